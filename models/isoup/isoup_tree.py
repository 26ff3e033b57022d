"""iSOUP-Tree: a multi-target Hoeffding model tree (Osojnik, Panov & Džeroski 2018).

The learner shares its kernels with :class:`~models.isoup.isoup_forest.ISOUPSymRF` (a forest of
one tree without bagging whose leaves observe every feature); see :mod:`models.isoup._isoup_base`.
"""

from __future__ import annotations

from ._isoup_base import ISOUPBase


def _all_features(n_features: int) -> int:
    return n_features


class ISOUPTree(ISOUPBase):
    """Multi-target regression tree with adaptive perceptron/mean leaves (iSOUP-Tree).

    Every leaf keeps, per feature, a bounded E-BST observer (:mod:`models.isoup._ebst`): for
    candidate thresholds, the weight and the sums and squared sums of every target below
    them. Every ``grace_period`` weight a leaf scores each feature's best threshold by
    intra-cluster variance reduction (mean over targets of ``1 - sum_b (n_b/n) Var_b / Var``,
    a branch with less than 5% of the weight scores 0) and splits on the best feature when
    ``second / best < 1 - HB`` or ``HB < tau``, with ``HB = sqrt(ln(1/delta) / 2n)``
    (binary numeric splits, ``x <= threshold`` left). A leaf predicts each target by its
    perceptron (on inputs and targets standardised online by the stream's running mean and
    standard deviation, trained by the delta rule) or by its target mean, whichever has the
    lower faded absolute
    error (factor ``fading_factor``) on the leaf's own rows; children inherit a copy of the
    parent's perceptron.

    Parameters
    ----------
    grace_period : int, default 200
        Leaf weight between split attempts.
    delta : float, default 1e-7
        Split confidence of the Hoeffding bound.
    tau : float, default 0.05
        Tie threshold: split anyway once the bound is below it.
    leaf_prediction : {"adaptive", "perceptron", "mean"}, default "adaptive"
        Leaf model; ``adaptive`` picks per target the better of the other two.
    learning_ratio : float, default 0.02
        Perceptron learning rate before decay.
    learning_ratio_decay : float, default 0.001
        The rate is ``learning_ratio / (1 + learning_ratio_decay * n)``, ``n`` the weight the
        leaf's perceptron learned (a child inherits the weights, not the count).
    fading_factor : float, default 0.95
        Fading of the leaf models' absolute errors.
    max_thresholds : int, default 32
        Candidate thresholds per leaf and feature (the bound of the E-BST).
    max_depth : int or None, default None
        Leaves at this depth stop observing and splitting (their models keep learning), so
        a tree's memory stays bounded on an endless stream; ``None``: no limit (the paper).
    seed : int, default 1
        Unused by a single tree (no randomness); kept for a uniform surface.
    perceptron : {"capped", "unit_l1"}, default "capped"
        The perceptron's update: the delta rule with its rate capped at the row's exact fit
        (:func:`models.isoup._isoup_kernels.capped_rate`), or MOA's delta rule followed by a
        rescaling of each target's weights to unit L1 norm (the default of state version 1,
        kept to continue such checkpoints as written).

    Notes
    -----
    :meth:`importances` returns ``{"splits": s, "symbolic": i}``: ``s[f]`` counts the split
    nodes on feature ``f``; ``i[f]`` sums ``0.5 ** depth`` over them (the symbolic score of
    iSOUP-SymRF for one tree). Rows are standardised by the statistics of the rows before
    them.

    Choices where the paper and MOA leave room (MOA's ``ISOUPTree`` is the reference):

    * *Observers.* E-BSTs bounded to ``max_thresholds`` candidates per leaf and feature
      (:mod:`models.isoup._ebst`): every kept candidate is scored on exact sums; only the set of
      candidates is limited to the first distinct values a leaf sees.
    * *Merit.* Variance reduction with population variances, each target normalised by its
      own variance; targets constant on the leaf are left out of the mean; the Hoeffding
      bound uses the leaf's weight since it was created. Split thresholds are stored values
      (``x <= v`` left), as MOA's E-BST.
    * *Children.* They start with their branch's weight and target sums (their mean model
      is defined at once), the parent's faded errors and a copy of its perceptron weights;
      the perceptron's learning-rate count restarts, as in MOA.
    * *Perceptron.* Weights start at 0 (MOA draws them uniformly in ``[-1, 1]`` and
      normalises them). MOA rescales each target's weights to unit L1 norm after every step;
      the paper describes a plain perceptron trained by the delta rule, and we follow the
      paper: the rescaling makes every fit whose weights (bias included) do not sum to 1 in
      absolute value unreachable, such as a target constant on a leaf whose mean is not one
      standard deviation away from the stream's, or two features of equal weight
      (``perceptron="unit_l1"`` keeps it). What the rescaling guarded against, a step on
      many standardised inputs that overshoots and diverges, is prevented by capping the
      rate at the one that fits the row exactly (the normalised LMS condition). It was the
      cause of our leaves' lag behind river's (one ``LinearRegression`` trained by SGD per
      target on raw inputs, with a constant rate): with it one leaf on the switching stream
      of ``tests/models/isoup_streams.py`` errs 0.999 against river's 0.925, without it
      0.914 (``tests/benchmarks/learners/bench_isoup_drift.py``).
    * *Weights.* An instance weight ``w`` scales every statistic and the perceptron step
      (MOA repeats the step ``int(w)`` times); rows of weight 0 are not learned.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> X = rng.random((4000, 3))
    >>> Y = np.column_stack([np.where(X[:, 0] > 0.5, 4.0, 0.0), X[:, 1] * 2])
    >>> Y += rng.normal(0, 0.1, Y.shape)
    >>> tree = ISOUPTree()
    >>> P = tree.predict_learn_many(X, Y)
    >>> print(f"MAE over the last 1000 rows: {np.abs(P[-1000:] - Y[-1000:]).mean():.2f}")
    MAE over the last 1000 rows: 0.10
    >>> [int(n) for n in tree.importances()["splits"]]  # x2 is noise: never split on
    [1, 13, 0]

    References
    ----------
    Osojnik, A., Panov, P. and Džeroski, S. (2018). Tree-based methods for online
    multi-target regression. Journal of Intelligent Information Systems 50(2), 315-339.
    Osojnik, A., Panov, P. and Džeroski, S. (2020). Feature ranking for multi-target
    regression with tree ensemble methods (iSOUP-SymRF). Discovery Science 2020 / MLJ.
    """

    kind = "isoup_tree"

    def __init__(self, grace_period: int = 200, delta: float = 1e-7, tau: float = 0.05,
                 leaf_prediction: str = "adaptive", learning_ratio: float = 0.02,
                 learning_ratio_decay: float = 0.001, fading_factor: float = 0.95,
                 max_thresholds: int = 32, max_depth: int | None = None, seed: int = 1,
                 perceptron: str = "capped"):
        self.params = {"grace_period": grace_period, "delta": float(delta), "tau": float(tau),
                       "leaf_prediction": leaf_prediction, "learning_ratio": float(learning_ratio),
                       "learning_ratio_decay": float(learning_ratio_decay),
                       "fading_factor": float(fading_factor),
                       "max_thresholds": int(max_thresholds),
                       "max_depth": None if max_depth is None else int(max_depth), "seed": int(seed),
                       "perceptron": perceptron}
        self._init_settings(1, False, _all_features, grace_period, delta, tau, leaf_prediction,
                            learning_ratio, learning_ratio_decay, fading_factor, max_thresholds,
                            max_depth, seed, perceptron)

    def importances(self) -> dict:
        """``{"splits": split nodes per feature, "symbolic": sum of 0.5 ** depth}``."""
        return {"splits": self.split_counts(), "symbolic": self.symbolic_scores()}
