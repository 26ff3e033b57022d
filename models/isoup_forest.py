"""iSOUP-SymRF: online bagging of iSOUP trees with random subspaces per leaf, and the
symbolic feature ranking (Osojnik, Panov & Džeroski 2020).

Kernels and the Python plumbing are shared with :class:`~models.isoup_tree.ISOUPTree`
(:mod:`models._isoup_base`, :mod:`models._isoup_kernels`).
"""

from __future__ import annotations

import math

import numpy as np

from ._isoup_base import ISOUPBase

#: subspace sizes of the paper: 1 + ceil(sqrt N) or 1 + ceil(ln N) features per leaf
SUBSPACES = {"sqrt": lambda n: 1 + math.ceil(math.sqrt(n)),
             "log": lambda n: 1 + math.ceil(math.log(n)) if n > 1 else 1}


class ISOUPSymRF(ISOUPBase):
    """Random forest of iSOUP trees for multi-target regression, with symbolic ranking.

    Each of ``n_models`` trees learns every row ``k ~ Poisson(1)`` times (online bagging,
    Oza 2005; the row's weight times ``k``). Whenever a leaf is created (the root, or either
    child of a split) it draws its own random subset of ``1 + ceil(sqrt(N))`` (``"sqrt"``)
    or ``1 + ceil(ln N)`` (``"log"``) of the ``N`` features and observes only those for its
    split candidates. Trees are :class:`~models.isoup_tree.ISOUPTree` otherwise (the same
    kernels); the forest predicts the mean of its trees.

    Parameters
    ----------
    n_models : int, default 10
        Number of trees (the paper's experiments use 10 to 100).
    subspace : {"sqrt", "log"}, default "sqrt"
        Subspace size per leaf.
    grace_period, delta, tau, leaf_prediction, learning_ratio, learning_ratio_decay, \
fading_factor, max_thresholds, max_depth
        As :class:`~models.isoup_tree.ISOUPTree` (200, 1e-7, 0.05, "adaptive", 0.02, 0.001,
        0.95, 32, None).
    seed : int, default 1
        Master seed; one generator per tree draws its bagging weights and subspaces.

    Notes
    -----
    :meth:`importances` returns ``{"symbolic": I, "share": I / sum(I)}`` with the paper's
    score ``I(A, E) = 1/|E| sum_T sum_{split nodes on A} 0.5 ** depth`` (root depth 0).
    Every split node counts, also one below an ancestor that splits on the same feature
    (MOA's ``ISOUPTreeRF.getFeatureScores`` overwrites instead of adding, so such repeats
    are lost there). The subspace sizes are the paper's (MOA's newer ``ISOUPTreeRF`` ends
    every option at ``ceil(0.1 N)`` features; its older one uses ``ceil(sqrt N)`` without
    the 1); a leaf whose size reaches ``N`` observes every feature. Bagging weights scale
    statistics and perceptron steps as instance weights do in
    :class:`~models.isoup_tree.ISOUPTree`; the trees share one standardiser of the stream.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(2)
    >>> X = rng.random((5000, 6))
    >>> Y = np.column_stack([3 * X[:, 0] + np.where(X[:, 1] > 0.5, 2.0, 0.0), X[:, 0] ** 2])
    >>> Y += rng.normal(0, 0.1, Y.shape)
    >>> forest = ISOUPSymRF(n_models=10, seed=1)
    >>> forest.learn_many(X, Y)
    >>> share = forest.importances()["share"]
    >>> [int(f) for f in np.argsort(-share)[:2]]  # the two relevant features lead
    [0, 1]

    References
    ----------
    Osojnik, A., Panov, P. and Džeroski, S. (2020). Feature ranking for multi-target
    regression with tree ensemble methods. Discovery Science 2020 (iSOUP-SymRF).
    Oza, N. C. (2005). Online bagging and boosting. IEEE SMC 2005, 2340-2345.
    """

    kind = "isoup_symrf"

    def __init__(self, n_models: int = 10, subspace: str = "sqrt", grace_period: int = 200,
                 delta: float = 1e-7, tau: float = 0.05, leaf_prediction: str = "adaptive",
                 learning_ratio: float = 0.02, learning_ratio_decay: float = 0.001,
                 fading_factor: float = 0.95, max_thresholds: int = 32,
                 max_depth: int | None = None, seed: int = 1):
        if subspace not in SUBSPACES:
            raise ValueError(f"subspace must be one of {sorted(SUBSPACES)}, got {subspace!r}")
        self.params = {"n_models": int(n_models), "subspace": subspace,
                       "grace_period": grace_period, "delta": float(delta), "tau": float(tau),
                       "leaf_prediction": leaf_prediction, "learning_ratio": float(learning_ratio),
                       "learning_ratio_decay": float(learning_ratio_decay),
                       "fading_factor": float(fading_factor),
                       "max_thresholds": int(max_thresholds),
                       "max_depth": None if max_depth is None else int(max_depth), "seed": int(seed)}
        self._init_settings(n_models, True, SUBSPACES[subspace], grace_period, delta, tau,
                            leaf_prediction, learning_ratio, learning_ratio_decay, fading_factor,
                            max_thresholds, max_depth, seed)

    def importances(self) -> dict:
        """``{"symbolic": score per feature, "share": scores normalised to sum 1}``."""
        score = self.symbolic_scores()
        total = score.sum()
        return {"symbolic": score, "share": score / total if total > 0 else np.zeros_like(score)}
