"""Hoeffding tree classifier (VFDT, Domingos & Hulten 2000) for numeric features.

Kernels: :mod:`models.hoeffding._ht_kernels` (tree), :mod:`models.hoeffding._hoeffding` (statistics, merits).
"""

from __future__ import annotations

import math

import numpy as np

from ..core._trees import grow_axis
from ..core.base import check_index, check_X
from . import _hoeffding as hs
from . import _ht_kernels as hk
from ._gaussian_base import FLAVOURS, GaussianLearner, check_same_shape, check_weights

_LEAF = {"mc": hk.LEAF_MC, "nb": hk.LEAF_NB, "nba": hk.LEAF_NBA}
_INITIAL_NODES = 16
_NODE_ARRAYS = {  # name -> (dtype, fill)
    "node_feature": (np.int64, -1), "node_threshold": (np.float64, 0.0),
    "node_left": (np.int64, -1), "node_right": (np.int64, -1), "node_depth": (np.int64, 0),
    "node_active": (np.uint8, 0), "node_last_eval": (np.float64, 0.0),
    "node_mc": (np.float64, 0.0), "node_nb": (np.float64, 0.0),
    "node_merit": (np.float64, 0.0),
}


class HoeffdingTree(GaussianLearner):
    """Hoeffding tree with Gaussian numeric observers and binary splits.

    Each leaf keeps class weights and, per feature and class, a weighted Gaussian estimator
    with the smallest and largest value. Every ``grace_period`` weight a leaf that holds
    more than one class scores, per feature, ``n_splits`` thresholds evenly spaced between
    the observed minimum and maximum (class weights below/above a threshold from the
    Gaussian CDFs) by information gain, and splits on the best feature when it beats the
    second best by more than the Hoeffding bound ``sqrt(R^2 ln(1/delta) / (2 n))``
    (``R = log2(classes)``), or when the bound fell below ``tau``. The children start from
    the winning threshold's class weights. Leaves predict by majority class (``mc``), naive
    Bayes (``nb``) or whichever of the two has been right more often on the leaf's own
    training rows (``nba``, the default of MOA and river).

    Parameters
    ----------
    grace_period : int, default 200
        Leaf weight between split attempts.
    delta : float, default 1e-7
        Split confidence (the ``delta`` of the Hoeffding bound).
    tau : float, default 0.05
        Tie threshold: split anyway once the bound is below it.
    leaf_prediction : {"nba", "nb", "mc"}, default "nba"
        Leaf prediction strategy.
    n_splits : int, default 10
        Candidate thresholds per feature (MOA's and river's Gaussian observer).
    max_depth : int or None, default None
        Leaves at this depth stop growing.
    flavour : {"river", "moa"}, default "river"
        The small points where river 0.26 and MOA differ. ``"river"``: a leaf whose
        majority class holds more than 99% of its weight answers "no split" at its split
        attempt (``max_share_to_split``), and naive Bayes skips a feature whose class
        estimator has no spread. ``"moa"``: no share rule, an estimator without spread is
        a point mass, the range of the gain counts the classes up to the last one the leaf
        has seen (MOA's class-weight vector length), a leaf restarted after a "no split"
        answer also restarts its naive Bayes adaptive counters, and an empty leaf credits
        class 0 to both its predictors. In both the "no split" candidate scores ``-inf``
        (river's null ``BranchFactory``; MOA's information gain of a single branch fails
        the minimum branch fraction).
    classes : list, optional
        Labels known up front, in this order (class indices otherwise follow first
        appearance); gives the class order of an ARFF header, which MOA's range uses.

    Notes
    -----
    :meth:`importances` returns ``{"split_gain": g}``: for each feature the information
    gain of every split on it, weighted by the share of the training weight that had
    reached the split node when it split (a mean decrease of entropy, in bits).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> X = rng.random((3000, 3)); y = (X[:, 1] > 0.6).astype(int)
    >>> tree = HoeffdingTree()
    >>> tree.learn_many(X, y)
    >>> tree.split_features()  # the root, then a refinement of its left child
    [1, 1]
    >>> tree.predict_many(np.array([[0.5, 0.9, 0.5], [0.5, 0.1, 0.5]]))
    [1, 0]

    References
    ----------
    Domingos, P. and Hulten, G. (2000). Mining high-speed data streams. KDD 2000, 71-80.
    Pfahringer, B., Holmes, G. and Kirkby, R. (2008). Handling numeric attributes in
    Hoeffding trees. PAKDD 2008, 296-307 (the Gaussian approximation).
    """

    kind = "hoeffding_tree"
    state_arrays = {
        **{name: (np.dtype(dt).str, 1) for name, (dt, _) in _NODE_ARRAYS.items()},
        "node_counts": ("<f8", 2), "mask": ("|u1", 1), "n_nodes": ("<i8", 1),
        "n_seen": ("<i8", 1), **{name: ("<f8", 3) for name in hs.GAUSSIAN_FILL},
    }
    _class_axis = {"node_counts": (1, 0.0), **{n: (2, v) for n, v in hs.GAUSSIAN_FILL.items()}}

    def __init__(self, grace_period: int = 200, delta: float = 1e-7, tau: float = 0.05,
                 leaf_prediction: str = "nba", n_splits: int = 10, max_depth: int | None = None,
                 flavour: str = "river", classes: list | None = None):
        if leaf_prediction not in _LEAF:
            raise ValueError(f"leaf_prediction must be one of {sorted(_LEAF)}, "
                             f"got {leaf_prediction!r}")
        if flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
        hs.check_split_test(grace_period, delta, tau)
        if int(n_splits) < 1 or (max_depth is not None and int(max_depth) < 0):
            raise ValueError("need n_splits >= 1 and max_depth >= 0")
        self.params = {"grace_period": grace_period, "delta": float(delta), "tau": float(tau),
                       "leaf_prediction": leaf_prediction, "n_splits": int(n_splits),
                       "max_depth": max_depth, "flavour": flavour,
                       "classes": None if classes is None else list(classes)}
        river = flavour == "river"
        self._settings = (
            float(grace_period), float(delta), float(tau), int(n_splits), 0.01,
            0.99 if river else math.inf, -math.inf, _LEAF[leaf_prediction],
            hs.DEGENERATE_SKIP if river else hs.DEGENERATE_POINT,
            2**31 if max_depth is None else int(max_depth), not river)
        self._init_common(classes)

    # ------------------------------------------------------------------ arrays

    def _allocate(self, n_features: int, n_classes: int) -> None:
        N = _INITIAL_NODES
        a = {name: np.full(N, fill, dtype) for name, (dtype, fill) in _NODE_ARRAYS.items()}
        a["node_active"][0] = 1
        a["node_counts"] = np.zeros((N, max(n_classes, 1)))
        a["mask"] = np.ones(n_features, np.uint8)
        a["n_nodes"] = np.ones(1, np.int64)
        a["n_seen"] = np.zeros(1, np.int64)
        a.update(hs.allocate_gaussians(N, n_features, n_classes))
        self._arrays = a

    def _grow_nodes(self) -> None:
        a = self._arrays
        N = 2 * a["node_feature"].shape[0]
        for name, (_, fill) in _NODE_ARRAYS.items():
            a[name] = grow_axis(a[name], N, fill=fill)
        a["node_counts"] = grow_axis(a["node_counts"], N)
        for name, fill in hs.GAUSSIAN_FILL.items():
            a[name] = grow_axis(a[name], N, fill=fill)

    def _node_args(self):
        a = self._arrays
        return (a["node_feature"], a["node_threshold"], a["node_left"], a["node_right"],
                a["node_depth"], a["node_active"], a["node_last_eval"], a["node_mc"],
                a["node_nb"], a["node_merit"], a["node_counts"], a["g_w"], a["g_mean"],
                a["g_m2"], a["g_min"], a["g_max"], a["n_nodes"], a["n_seen"])

    # ------------------------------------------------------------------ kernels

    def _learn(self, X, codes, w, out=None, k_known: int = 0) -> None:
        prequential = out is not None
        if out is None:
            out = np.zeros((1, 1))
        done = 0
        while True:
            done = hk.learn_rows(X, codes, w, self._arrays["mask"], done, prequential, out,
                                 k_known, *self._settings, *self._node_args())
            if done >= X.shape[0]:
                return
            self._grow_nodes()

    def predict_learn_many(self, X, y, sample_weight=None) -> list:
        """Test-then-train in one kernel call: the label predicted for each row by the tree
        as it stood just before learning that row (``None`` for rows before any learning).

        Equivalent to ``predict_many(X[i:i+1])`` then ``learn_many(X[i:i+1], ...)`` for
        every row in turn, without a Python call per row.
        """
        X = check_X(X, self.n_features)
        codes = self._classes.encode(y, n_rows=X.shape[0])
        w = check_weights(sample_weight, X.shape[0])
        if X.shape[0] == 0:
            return []
        first = self.n_seen == 0
        if not self._arrays:
            self._allocate(X.shape[1], len(self._classes))
        self._grow_classes(len(self._classes))
        out = np.zeros((X.shape[0], self._arrays["node_counts"].shape[1]))
        self._learn(X, codes, w, out, len(self._classes))
        labels = self._classes.decode(np.argmax(out, axis=1))
        if first:
            labels[0] = None
        return labels

    def _proba(self, X, out) -> None:
        a = self._arrays
        full = np.zeros((X.shape[0], a["node_counts"].shape[1]))
        hk.predict_rows(X, a["mask"], self._settings[7], self._settings[8],
                        a["node_feature"], a["node_threshold"], a["node_left"],
                        a["node_right"], a["node_active"], a["node_mc"], a["node_nb"],
                        a["node_counts"], a["g_w"], a["g_mean"], a["g_m2"], full)
        out[:] = full[:, :out.shape[1]]

    # ------------------------------------------------------------------ inspection

    @property
    def n_nodes(self) -> int:
        """Nodes in the tree (1 before the first split)."""
        return int(self._arrays["n_nodes"][0]) if self._arrays else 0

    def split_features(self) -> list[int]:
        """Features of the split nodes in creation order (the root's first)."""
        if not self._arrays:
            return []
        nf = self._arrays["node_feature"][:self.n_nodes]
        return [int(f) for f in nf if f >= 0]

    def importances(self) -> dict:
        """``{"split_gain": gain per feature}`` (see the class notes); zeros before a split."""
        if not self._arrays:
            return {"split_gain": np.zeros(0)}
        a = self._arrays
        n = self.n_nodes
        out = np.zeros(a["mask"].shape[0])
        root = a["node_counts"][0].sum()
        nf = a["node_feature"][:n]
        for i in np.flatnonzero(nf >= 0):
            share = a["node_counts"][i].sum() / root if root > 0 else 0.0
            out[nf[i]] += a["node_merit"][i] * share
        return {"split_gain": out}

    def _check_state(self) -> None:
        a = self._arrays
        N = a["node_feature"].shape[0]
        F = a["mask"].shape[0]
        check_same_shape(a, _NODE_ARRAYS, (N,), self.kind)
        check_same_shape(a, ["n_nodes", "n_seen"], (1,), self.kind)
        if a["node_counts"].shape[0] != N:
            raise ValueError(f"{self.kind} state array 'node_counts' has "
                             f"{a['node_counts'].shape[0]} rows, expected {N}")
        self._check_gaussians(N)
        if a["g_w"].shape[2] != a["node_counts"].shape[1]:
            raise ValueError(f"{self.kind} state: class axes of node_counts and g_w differ")
        check_index(a["n_nodes"], 1, N + 1, "n_nodes")
        check_index(a["node_feature"], -1, F, "node_feature")
        check_index(a["node_left"], -1, N, "node_left")
        check_index(a["node_right"], -1, N, "node_right")
        check_index(a["node_active"], 0, 2, "node_active")
        check_index(a["node_depth"], 0, N, "node_depth")
        internal = a["node_feature"] >= 0
        # a split node must have two children created after it (no cycles)
        ids = np.arange(N)
        if (a["node_left"][internal] <= ids[internal]).any() \
                or (a["node_right"][internal] <= ids[internal]).any():
            raise ValueError(f"{self.kind} state: a split node points to a missing child")
