"""Random forest on a stream of features (Motl & Kordík 2019).

The rows are fixed and the columns arrive: each arrival of new columns trains one
*generation* of CART trees (:mod:`models.cart._cart`) on all columns known so far and adds it to
the forest. The kernels (feature sampling, growing a generation of trees) are
:func:`models.cart._cart.draw_mask` and :func:`models.cart._cart.grow_forest`.
"""

from __future__ import annotations

import numpy as np

from ..core._rng import seed_states
from ..core._trees import grow_axis
from ..core.base import ClassIndex, ProbabilityClassifier, check_index, check_shapes, check_X
from . import _cart

_SALT_FOREST = 0x5F0A

CHALLENGER = "challenger"
BASELINE = "baseline"
MODES = (CHALLENGER, BASELINE)


class FeatureStreamForest(ProbabilityClassifier):
    """Random forest on a stream of features (Motl & Kordík 2019, Algorithm 1).

    The rows are fixed; the columns arrive. Every :meth:`learn_many` trains one generation
    of ``n_trees`` CART trees (Gini, depth ``max_depth``, best split over the tree's
    features) on stratified bootstraps of all the columns known so far and adds it to the
    forest. Old generations are kept (but see ``max_generations``): a forest on ``d``
    features built one feature at a time holds ``d * n_trees`` trees.

    *Challenger* (the paper's method): every tree of a generation takes the new columns and
    each old column with probability ``p_old = (mtry * d - n_new) / n_old`` (``d = n_old +
    n_new`` columns), so a tree has ``mtry * d`` features on average. Old columns have had
    chances in every earlier generation, so the generation's trees vote with a weight that
    makes the new column's weighted use equal the old columns' mean::

        w = mean(weighted_use[old]) / (mean(use[new]) - mean(use[old]))
        weighted_use += w * use

    where ``use[j]`` counts this generation's trees that took column ``j``. Later
    generations thus weigh more (about ``1 / (1 - p_old)``, three times, per generation at
    ``mtry = 2/3``). A prediction is the weighted mean of the trees' leaf class frequencies.

    *Baseline* (``mode="baseline"``, the paper's contender): every column, new ones
    included, is drawn with the same probability ``p_old``, and every tree has weight 1.

    Parameters
    ----------
    n_trees : int, default 30
        Trees per generation (the paper's ``treeCnt``; 30 in its experiments).
    mtry : float, default 2/3
        Expected fraction of the known columns a tree may split on (the paper's ``mtry``).
    max_depth : int, default 6
        Depth of the trees (the authors' ``DecisionTreeClassifier(max_depth=6)``).
    mode : {"challenger", "baseline"}, default "challenger"
        Feature sampling and tree weights as described above.
    max_generations : int, default 0
        Keep at most this many generations, dropping the oldest (0: keep all, as the paper).
        The paper's suggested extension: old generations weigh almost nothing in the
        challenger, while a stream that repeats the same columns would grow without end.
    seed : int, default 1
        Master seed; the learner is deterministic given the seed and the batches.

    Notes
    -----
    How the contract maps onto the paper, and choices where it leaves room:

    * *Generations.* ``learn_many(X, y)`` trains one generation on all columns of ``X``;
      ``X`` may be wider than before by any number of columns (never narrower). The rows
      need not be the same as before, although the paper's setting has them fixed.
      ``n_seen`` adds up the rows of every call.
    * *Several new columns at once* extend the paper's single new feature: all are taken by
      every tree and ``p_old`` is the authors' formula with ``n_new`` columns (clamped to
      ``[0, 1]``). The *first* generation and a generation *without new columns* draw every
      column with probability ``mtry`` (a plain random forest); a generation without new
      columns weighs as much as the latest one, which keeps the use balance unchanged.
    * *Weights are relative*: after each generation all weights and the weighted use are
      divided by the new generation's weight, so the newest generation weighs 1. The
      formula above is invariant to that scale and a weighted mean does not change, but the
      paper's absolute weights grow threefold per generation and would overflow after a few
      hundred features. For the same reason the authors' fallback ``w = 1`` (when the
      denominator is 0, only when ``mtry = 1``) here means "as heavy as the latest".
    * *Sampling* of old columns is an independent Bernoulli draw per tree, as in the
      authors' Python code (their paper runs used a stratified Matlab helper; their code
      notes a gain below 0.1 AUC points for it). The baseline redraws a tree's subset while
      it is empty, which has the distribution of the authors' rejection of the whole
      generation's draw. When ``p_old`` is 0 (a batch brings ``mtry * d`` new columns or
      more) the baseline draws with ``mtry`` instead.
    * *Scores* are the weighted mean of the trees' probabilities, divided by the sum of the
      weights; the authors average ``w * P`` without that division, which ranks rows the
      same (their AUCs are equal) but is no probability.
    * *Importances* (``importances()["mdi"]``) are the trees' mean decrease in Gini impurity,
      with each tree counted with its voting weight: they measure what the forest as it
      predicts relies on. The weighted use (:attr:`feature_use`) is balanced across columns
      by design, so it says how fairly columns were offered, not how useful they are.
    * *Instance weights*: ``sample_weight`` multiplies a row's bootstrap count.
    * *Dropped generations* (``max_generations``) stay in the weighted use: it records the
      chances each column was given, which later weights balance against.

    References
    ----------
    .. [1] J. Motl, P. Kordík, "Learning on a Stream of Features with Random Forest",
       ITAT 2019, CEUR Workshop Proceedings vol. 2473, paper 12.
    .. [2] L. Breiman, "Random forests", Machine Learning 45(1), 2001.

    Examples
    --------
    Features arrive one at a time; only the second one tells the classes apart:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((400, 3))
    >>> y = (X[:, 1] > 0.5).astype(int)
    >>> forest = FeatureStreamForest(n_trees=10, seed=1)
    >>> for d in (1, 2, 3):
    ...     forest.learn_many(X[:, :d], y)
    >>> forest.n_generations, forest.n_features
    (3, 3)
    >>> forest.predict_many([[0.5, 0.9, 0.5], [0.5, 0.1, 0.5]])
    [1, 0]
    >>> int(np.argmax(forest.importances()["mdi"]))
    1
    """

    kind = "feature_stream_forest"
    state_arrays = {
        "node_feature": ("<i8", 2), "node_threshold": ("<f8", 2), "node_left": ("<i8", 2),
        "node_right": ("<i8", 2), "node_count": ("<f8", 3), "n_nodes": ("<i8", 1),
        "gen_weight": ("<f8", 1), "gen_width": ("<i8", 1), "weighted_use": ("<f8", 1),
        "rng": ("<u8", 1), "n_seen": ("<i8", 1),
    }

    def __init__(self, n_trees: int = 30, mtry: float = 2 / 3, max_depth: int = 6,
                 mode: str = CHALLENGER, max_generations: int = 0, seed: int = 1):
        if int(n_trees) < 1:
            raise ValueError("n_trees must be >= 1")
        if not 0.0 < float(mtry) <= 1.0:
            raise ValueError("mtry must be in (0, 1]")
        if not 1 <= int(max_depth) <= 20:
            raise ValueError("max_depth must be in [1, 20]")
        if int(max_generations) < 0:
            raise ValueError("max_generations must be >= 0 (0: keep every generation)")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.params = {"n_trees": int(n_trees), "mtry": float(mtry),
                       "max_depth": int(max_depth), "mode": str(mode),
                       "max_generations": int(max_generations), "seed": int(seed)}
        self._arrays: dict[str, np.ndarray] = {}
        self._classes = ClassIndex()

    # ------------------------------------------------------------------ properties

    @property
    def n_features(self) -> int | None:
        """Columns known so far, ``None`` before the first batch."""
        return int(self._arrays["weighted_use"].shape[0]) if self._arrays else None

    @property
    def n_generations(self) -> int:
        """Generations of trees trained so far (one per :meth:`learn_many`)."""
        return int(self._arrays["gen_weight"].shape[0]) if self._arrays else 0

    @property
    def generation_weights(self) -> np.ndarray:
        """Voting weight of each generation's trees, relative to the newest (weight 1)."""
        return self._arrays["gen_weight"].copy() if self._arrays else np.zeros(0)

    @property
    def feature_use(self) -> np.ndarray:
        """Weighted use per column (the paper's ``weightedFeatureUseCnt``, relative scale)."""
        return self._arrays["weighted_use"].copy() if self._arrays else np.zeros(0)

    # ------------------------------------------------------------------ learning

    def learn_many(self, X, y, sample_weight=None) -> None:
        """Train one generation of trees on all columns of ``X``.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Rows with every column known so far; ``d`` may exceed the columns of the last
            call (the new columns are the last ones) but not fall below it.
        y : sequence of labels (ints or strings)
            One label per row.
        sample_weight : array-like of shape (n,), optional
            Non-negative weight per row (multiplies its bootstrap count).
        """
        X = check_X(X)
        known = self.n_features or 0
        if X.shape[1] < known:
            raise ValueError(f"X has {X.shape[1]} features but the learner knows {known}; "
                             "columns may be added, never removed")
        if X.shape[0] == 0:
            return
        if y is None:
            raise ValueError("FeatureStreamForest needs labels: y must not be None")
        codes = self._classes.encode(y, n_rows=X.shape[0])
        weights = self._check_weights(sample_weight, X.shape[0])
        if not self._arrays:
            self._allocate()
        if len(self._classes) > self._arrays["node_count"].shape[2]:
            self._arrays["node_count"] = grow_axis(self._arrays["node_count"],
                                                   len(self._classes), axis=2, fill=0.0)
        use = self._grow(X, codes, weights, known)
        self._reweight(use, known, X.shape[1])
        self._drop_oldest()
        self._arrays["n_seen"][0] += X.shape[0]

    @staticmethod
    def _check_weights(sample_weight, n: int) -> np.ndarray:
        if sample_weight is None:
            return np.ones(n)
        w = np.ascontiguousarray(sample_weight, dtype=np.float64).reshape(-1)
        if w.shape[0] != n:
            raise ValueError(f"sample_weight has {w.shape[0]} values but X has {n} rows")
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError("sample_weight must be finite and non-negative")
        return w

    def _allocate(self) -> None:
        slots = _cart.n_node_slots(self.params["max_depth"])
        self._arrays = {
            "node_feature": np.zeros((0, slots), np.int64),
            "node_threshold": np.zeros((0, slots)),
            "node_left": np.zeros((0, slots), np.int64),
            "node_right": np.zeros((0, slots), np.int64),
            "node_count": np.zeros((0, slots, max(len(self._classes), 1))),
            "n_nodes": np.zeros(0, np.int64),
            "gen_weight": np.zeros(0),
            "gen_width": np.zeros(0, np.int64),
            "weighted_use": np.zeros(0),
            "rng": seed_states(self.params["seed"], 1, _SALT_FOREST),
            "n_seen": np.zeros(1, np.int64),
        }

    def _sampling(self, n_old: int, n_new: int) -> tuple[float, float]:
        """``(p_old, p_all)`` for :func:`models.cart._cart.draw_mask` (``p_all < 0``: new columns forced)."""
        mtry = self.params["mtry"]
        if n_old == 0 or n_new == 0:
            return 0.0, mtry
        p_old = min(1.0, max(0.0, (mtry * (n_old + n_new) - n_new) / n_old))
        if self.params["mode"] == CHALLENGER:
            return p_old, -1.0
        return p_old, p_old if p_old > 0.0 else mtry

    def _grow(self, X, codes, weights, n_old: int) -> np.ndarray:
        """Train a generation, append its trees; return each column's use count."""
        a = self._arrays
        T, d = self.params["n_trees"], X.shape[1]
        slots, n_classes = a["node_feature"].shape[1], a["node_count"].shape[2]
        p_old, p_all = self._sampling(n_old, d - n_old)
        class_rows, class_start = _cart.class_layout(codes, n_classes)
        masks = np.zeros((T, d), np.int64)
        gen = {"node_feature": np.zeros((T, slots), np.int64),
               "node_threshold": np.zeros((T, slots)),
               "node_left": np.zeros((T, slots), np.int64),
               "node_right": np.zeros((T, slots), np.int64),
               "node_count": np.zeros((T, slots, n_classes)),
               "n_nodes": np.zeros(T, np.int64)}
        _cart.grow_forest(X, codes, weights, class_rows, class_start, n_old,
                         p_old, p_all, self.params["max_depth"], a["rng"], masks,
                         gen["node_feature"], gen["node_threshold"], gen["node_left"],
                         gen["node_right"], gen["node_count"], gen["n_nodes"])
        for name, arr in gen.items():
            a[name] = np.concatenate((a[name], arr))
        a["gen_width"] = np.append(a["gen_width"], d)
        return masks.sum(axis=0).astype(np.float64)

    def _reweight(self, use: np.ndarray, n_old: int, d: int) -> None:
        """Algorithm 1, lines 10-11, on the relative scale (the newest generation weighs 1)."""
        a = self._arrays
        wu = grow_axis(a["weighted_use"], d, fill=0.0)
        w = 1.0
        if self.params["mode"] == CHALLENGER and 0 < n_old < d:
            gap = use[n_old:].mean() - use[:n_old].mean()
            if gap > 0.0:
                w = wu[:n_old].mean() / gap
            if not (np.isfinite(w) and w > 0.0):
                w = 1.0
        if self.params["mode"] == CHALLENGER:
            a["weighted_use"] = (wu + w * use) / w
            a["gen_weight"] = np.append(a["gen_weight"] / w, 1.0)
        else:
            a["weighted_use"] = wu + use
            a["gen_weight"] = np.append(a["gen_weight"], 1.0)

    def _drop_oldest(self) -> None:
        """Keep the newest ``max_generations`` generations (all when it is 0)."""
        a, cap = self._arrays, self.params["max_generations"]
        drop = a["gen_weight"].shape[0] - cap
        if cap == 0 or drop <= 0:
            return
        cut = drop * self.params["n_trees"]
        for name in ("node_feature", "node_threshold", "node_left", "node_right", "node_count",
                     "n_nodes"):
            a[name] = a[name][cut:].copy()
        a["gen_weight"] = a["gen_weight"][drop:].copy()
        a["gen_width"] = a["gen_width"][drop:].copy()

    # ------------------------------------------------------------------ prediction

    def _tree_weights(self) -> np.ndarray:
        return np.repeat(self._arrays["gen_weight"], self.params["n_trees"])

    def predict_proba_many(self, X) -> np.ndarray:
        """Class probabilities, shape ``(n, len(classes))``; ``(n, 0)`` before learning.

        ``X`` must have every column known so far (:attr:`n_features`).
        """
        X = check_X(X, self.n_features)
        if not self._arrays:
            return np.zeros((X.shape[0], 0))
        a = self._arrays
        out = np.zeros((X.shape[0], a["node_count"].shape[2]))
        _cart.predict_proba_trees(X, a["node_feature"], a["node_threshold"], a["node_left"],
                                  a["node_right"], a["node_count"], self._tree_weights(), out)
        return out

    # ------------------------------------------------------------------ importances

    def importances(self) -> dict:
        """``{"mdi": array}`` aligned to the columns known so far; empty before learning.

        Mean decrease in Gini impurity of the splits on each column, each tree counted with
        its voting weight, normalised to sum to 1 (see the class notes for why not the
        weighted use).
        """
        if not self._arrays:
            return {}
        a = self._arrays
        return {"mdi": _cart.mdi(a["node_feature"], a["node_left"], a["node_right"],
                                 a["node_count"], a["n_nodes"], self._tree_weights(),
                                 self.n_features)}

    # ------------------------------------------------------------------ state

    def _extra_state(self) -> dict:
        return {"classes": list(self._classes.classes)}

    def _load_extra_state(self, extra: dict) -> None:
        self._classes = ClassIndex(extra.get("classes", ()))

    def _check_state(self) -> None:
        """Shapes agree with the parameters and each other; every index stays inside its array."""
        a = self._arrays
        G, F = a["gen_weight"].shape[0], a["weighted_use"].shape[0]
        T = G * self.params["n_trees"]
        slots = _cart.n_node_slots(self.params["max_depth"])
        n_classes = len(self._classes)
        check_shapes(a, {
            "node_feature": (T, slots), "node_threshold": (T, slots), "node_left": (T, slots),
            "node_right": (T, slots), "node_count": (T, slots, max(n_classes, 1)),
            "n_nodes": (T,), "gen_width": (G,), "rng": (1,), "n_seen": (1,),
        })
        if G and n_classes == 0:
            raise ValueError("feature_stream_forest state has trees but no class labels")
        check_index(a["n_seen"], 0, np.iinfo(np.int64).max, "n_seen")
        check_index(a["gen_width"], 1, F + 1, "gen_width")
        if G and (np.any(np.diff(a["gen_width"]) < 0) or a["gen_width"][-1] != F):
            raise ValueError("state array 'gen_width' must grow to the number of columns")
        check_index(a["n_nodes"], 1, slots + 1, "n_nodes")
        self._check_nodes(a, slots)
        for name in ("node_threshold", "node_count", "gen_weight", "weighted_use"):
            if not np.isfinite(a[name]).all():
                raise ValueError(f"state array {name!r} holds NaN or infinity")
        if (a["node_count"] < 0).any() or (a["gen_weight"] < 0).any():
            raise ValueError("state arrays 'node_count' and 'gen_weight' must be >= 0")

    def _check_nodes(self, a: dict, slots: int) -> None:
        """Tree links: an inner node's children lie after it and within the tree's nodes.

        Then routing always moves to a larger id and ends at a leaf inside the arrays.
        """
        feature = a["node_feature"]
        width = np.repeat(a["gen_width"], self.params["n_trees"])[:, None]
        if (feature < -1).any() or (feature >= width).any():
            raise ValueError("state array 'node_feature' tests a column its tree never had")
        inner = feature >= 0
        ids = np.arange(slots)[None, :]
        end = a["n_nodes"][:, None]
        for name in ("node_left", "node_right"):
            child = a[name]
            if ((child <= ids) | (child >= end))[inner].any():
                raise ValueError(f"state array {name!r} links a node to a child outside "
                                 "its tree")
