"""Adaptive random forest classifier (Gomes et al. 2017) on the Hoeffding tree kernels.

Kernels: :mod:`models.hoeffding._arf_kernels` (the forest), :mod:`models.hoeffding._ht_kernels` (the split
attempt and leaf prediction), :mod:`models.hoeffding._hoeffding` (statistics), :mod:`models.drift.adwin`
(the detectors).
"""

from __future__ import annotations

import math
from operator import itemgetter

import numpy as np

from ..core._rng import seed_states
from ..core._trees import grow_axis
from ..core.base import ClassIndex, LearnerEvent, ProbabilityClassifier, check_index, check_shapes, check_X
from ..drift.adwin import (
    check_tree_bank,
    grow_tree_bank,
    new_tree_bank,
    tree_bank_layout,
    tree_bank_names,
    tree_bank_settings,
)
from . import _arf_kernels as ak
from . import _hoeffding as hs
from . import _ht_kernels as hk
from ._arf_layout import pools_from_layout1
from ._gaussian_base import FLAVOURS

_LEAF = {"mc": hk.LEAF_MC, "nb": hk.LEAF_NB, "nba": hk.LEAF_NBA}
_SALT = 0xA4F
#: a state's layout: 2 since the node and leaf pools (layout 1: a node capacity per slot)
STATE_LAYOUT = 2
# the node pool (P,): name -> (dtype, fill); node_counts (P, K) beside them
_NODE_ARRAYS = {
    "node_feature": (np.int64, -1), "node_threshold": (np.float64, 0.0),
    "node_left": (np.int64, -1), "node_right": (np.int64, -1), "node_depth": (np.int64, 0),
    "node_active": (np.uint8, 0), "node_merit": (np.float64, 0.0),
    "node_slot": (np.int64, -1), "node_leaf": (np.int64, -1),
}
# the leaf pool (Q,); leaf_feat (Q, m) and the Gaussian estimators (Q, m, K) beside them
_LEAF_ARRAYS = {
    "leaf_node": (np.int64, -1), "leaf_last_eval": (np.float64, 0.0),
    "leaf_mc": (np.float64, 0.0), "leaf_nb": (np.float64, 0.0),
}
_INITIAL_NODES = 8  # per slot; the pools grow by a quarter from there (_grown)
_INITIAL_LEAVES = 8
_TREE_ARRAYS = {  # per tree (T,)
    "fg_slot": np.int64, "bg_slot": np.int64, "bg_active": np.uint8,
    "tree_correct": np.float64, "tree_seen": np.float64,
    "n_warnings": np.int64, "n_drifts": np.int64,
    # warnings and drifts of each tree in the last learn_many (what events() reports)
    "last_warnings": np.int64, "last_drifts": np.int64,
}


def _grown(size: int, need: int) -> int:
    """A pool's next capacity: grown by a quarter at a time until it holds ``need`` cells.

    A quarter keeps the unused cells a pool carries below a fifth of it (doubling left up to
    half of it unused: the state budget counts capacity); the copies stay few (a pool of
    ``P`` cells was copied about ``4 P`` cells' worth in all).

    Examples
    --------
    >>> _grown(160, 161), _grown(160, 300)
    (200, 312)
    """
    while size < need:
        size += max(size // 4, 1)
    return size


def _round_log2(n: int) -> int:
    """``round(log2(n))`` for an integer ``n >= 1`` in integers (no C library ``log2``, whose
    last bit depends on the CPU): ``b = floor(log2 n)``, plus one when ``n >= 2^(b + 1/2)``,
    i.e. ``n^2 >= 2^(2b + 1)``.

    Examples
    --------
    >>> [_round_log2(n) for n in (1, 2, 3, 5, 6, 90)]
    [0, 1, 2, 2, 3, 6]
    """
    b = n.bit_length() - 1
    return b + int(n * n >= 1 << (2 * b + 1))


#: ``quiet`` of :func:`models.hoeffding._arf_kernels.learn_rows` when every row is predicted
_NONE_QUIET = np.zeros(0, np.uint8)
#: ``cuts`` and ``seg_counts`` of the kernel when a call is one segment
_ONE_SEGMENT = (np.zeros(0, np.int64), np.zeros((0, 2, 0), np.int64))
#: the pools, in the order the kernels take them
_POOL_NAMES = ("slot_root", "slot_nodes", "used", *_NODE_ARRAYS, "node_counts", "leaf_node",
               "leaf_feat", "leaf_last_eval", "leaf_mc", "leaf_nb", *hs.GAUSSIAN_FILL)
_pool_arrays = itemgetter(*_POOL_NAMES)
#: the state arrays :func:`~models.hoeffding._arf_kernels.learn_rows` takes after its
#: scratch, in its order: one C-level lookup of the ~90 names, where a lookup per name cost
#: a stream fed a row at a time a tenth of its call
_learn_arrays = itemgetter("rng", "fg_slot", "bg_slot", "bg_active", "tree_correct",
                           "tree_seen", "n_warnings", "n_drifts", "n_seen", *_POOL_NAMES,
                           *tree_bank_names("w_"), *tree_bank_names("d_"))


def _segment_events(counts: np.ndarray, drifts: int, warnings: int) -> list[tuple]:
    """Per segment of a call, as plain ints: (trees replaced, trees warned, replacements,
    drifts and warnings so far), from the kernel's ``seg_counts`` and the forest's drifts and
    warnings before the call.

    Examples
    --------
    >>> counts = np.array([[[1, 0], [0, 0]], [[0, 0], [2, 1]]])  # 2 segments, 2 trees
    >>> _segment_events(counts, 5, 7)
    [(1, 0, 1, 6, 7), (0, 2, 0, 6, 10)]
    >>> _segment_events(counts[:1], 5, 7) == _segment_events(counts, 5, 7)[:1]
    True
    """
    if counts.shape[0] == 1:  # one segment (a stream fed a row at a time): no array passes
        replaced, warned = counts[0].tolist()
        n_replaced, n_warned = sum(replaced), sum(warned)
        return [(len(replaced) - replaced.count(0), len(warned) - warned.count(0), n_replaced,
                 drifts + n_replaced, warnings + n_warned)]
    # a poll has a segment per 10 rows and most report nothing
    so_far = counts.sum(axis=2).cumsum(axis=0) + [drifts, warnings]
    return list(zip((counts[:, 0] > 0).sum(axis=1).tolist(),
                    (counts[:, 1] > 0).sum(axis=1).tolist(),
                    counts[:, 0].sum(axis=1).tolist(), *so_far.T.tolist()))


class AdaptiveRandomForest(ProbabilityClassifier):
    """Adaptive random forest (ARF) of Hoeffding trees with per-tree drift recovery.

    Each of ``n_models`` trees learns every row ``k ~ Poisson(lambda_value)`` times (one
    row of weight ``k``; online bagging with ``lambda = 6`` as in Gomes et al. 2017). Each
    leaf draws a random subset of ``m`` features when it is created and keeps Gaussian
    estimators, and scores splits, only for those (a random forest's feature sampling per
    split, done online). Every tree is watched by two ADWIN detectors fed with its own
    prequential 0/1 error: when the *warning* detector (``warning_delta``) fires a new
    background tree starts learning beside it; when the *drift* detector (``drift_delta``)
    fires, the background tree (or a new tree when there is none) replaces it. The forest
    predicts the mean of the trees' class distributions, each weighted by the tree's
    accuracy since it became foreground (the paper's weighted vote).

    The trees are :class:`~models.hoeffding.hoeffding_tree.HoeffdingTree` kernels (Gaussian observers,
    10 candidate thresholds, information gain, naive Bayes adaptive leaves). By default the
    forest follows MOA's ``AdaptiveRandomForest``, the paper's own implementation, where MOA
    and river differ (``flavour``; Notes).

    Parameters
    ----------
    n_models : int, default 10
        Number of trees (ARF-10).
    max_features : {"sqrt+1", "sqrt", "log2"} or int or float, default "sqrt+1"
        Features per leaf subset ``m``: ``round(sqrt(d)) + 1`` (MOA's default and the
        paper's), ``round(sqrt(d))`` (river's default), ``round(log2(d))``, an int, or a
        fraction of ``d``; clipped to ``[1, d]``.
    lambda_value : float, default 6.0
        Poisson rate of online bagging.
    grace_period : int, default 50
        Leaf weight between split attempts (river's and MOA's ARF default).
    delta : float, default 0.01
        Split confidence (ARF default in both references).
    tau : float, default 0.05
        Tie threshold.
    leaf_prediction : {"nba", "nb", "mc"}, default "nba"
        Leaf prediction strategy.
    n_splits : int, default 10
        Candidate thresholds per feature.
    max_depth : int or None, default None
        Leaves at this depth stop growing.
    warning_delta : float, default 0.01
        ADWIN confidence of the warning detectors.
    drift_delta : float, default 0.001
        ADWIN confidence of the drift detectors.
    weighted_vote : bool, default True
        Weight each tree's vote by its accuracy (``disable_weighted_vote=False``).
    flavour : {"moa", "river"}, default "moa"
        Whose rules to follow where MOA (``AdaptiveRandomForest``) and river 0.26
        (``ARFClassifier``) differ: see Notes.
    seed : int, default 1
        Master seed: the learner is deterministic given the seed and the stream.

    Notes
    -----
    Where river (0.26 ``ARFClassifier``) and MOA (``AdaptiveRandomForest``) differ,
    ``flavour="moa"`` (the default) takes MOA's rule, ``"river"`` river's:

    * *Detector input*: both update a tree's detectors only on rows it learns (``k > 0``).
      MOA (``ARFBaseLearner.trainOnInstance``) feeds the tree's error on the row *after*
      learning it and reacts only to a rise of the error (``ADWINChangeDetector``); river
      feeds the error *before* learning and reacts to any ADWIN change, so a tree whose
      error falls is replaced too.
    * *Background tree*: MOA trains it on the row with weight 1, river with the foreground
      tree's ``k``. On a swap MOA's new foreground keeps the background's detectors, never
      fed (fresh), as both flavours here start fresh ones.
    * *Vote weight*: the accuracy since the tree became foreground (river's ``Accuracy``
      and MOA's evaluator are reset on replacement). A tree with zero accuracy votes with
      weight 1 in both; MOA's accuracy is in percent, so there it weighs 1 against about 88
      of an accurate tree, in river 1 against 0.88. A tree whose leaf has no weight does not
      vote.
    * *Leaves*: river's "no split" answer for a leaf whose majority class holds more than
      99% of its weight, and its naive Bayes skipping a feature whose class estimator has no
      spread (MOA: no such answer; a point mass). In both a leaf keeps its feature subset
      when it restarts after a "no split" answer (river; MOA's reactivated leaf is a new node
      with a new subset), and keeps the Gaussian estimators of its ``m`` subset features
      only, as both references' leaves hold observers for their subset only.
    * *Subset size* (``max_features``, not part of the flavour): MOA's default is
      ``sqrt(M)+1``, river's ``"sqrt"`` is ``round(sqrt(M))``.

    In both flavours:

    * *Ties and empty classes*: a tree's own prediction (what its detectors are fed) breaks
      ties by the first class seen, river's by the sorted labels, so a river tree whose leaf
      has no weight predicts the smallest label and here it errs. river's split children
      may list a class with weight 0 (its Gaussian's CDF underflows), which river's naive
      Bayes then scores ``log 1``; here a class without weight scores ``-inf`` as in MOA.
      Removing that from river left its Power supply accuracy unchanged (0.1688, seed 1).
    * *Random numbers*: one SplitMix64 generator per tree (:mod:`models.core._rng`) draws its
      Poisson weights and the subsets of its foreground and background trees; the
      sequences differ from both references, so runs agree in distribution, not row for row.

    Measured (``tests/benchmarks/learners/bench_arf.py``, seeds 1-3, against MOA ARF-10 row by row):
    with river's rules and subset size the forest matched river's ARF and stayed 0.45-1.50
    points below MOA on five of the seven real streams (Electricity -1.34); MOA's subset
    size closed part of that, MOA's leaves most of the rest (Electricity: 0.8806 river,
    0.8856 with ``sqrt+1``, 0.8910 with MOA's leaves too, 0.8912 with all of MOA's rules,
    MOA 0.8941). The default is therefore MOA's, the paper's implementation.

    Memory: the trees of all slots share a node pool and their leaves a leaf pool (the
    Gaussian estimators are a leaf's, split nodes keep none), each grown by a quarter when a
    row might not fit and cut to what is used in a checkpoint; a tree replaced by its
    background tree leaves the pools at once. A stream's forest so costs what its trees hold,
    not 20 times the largest tree (:mod:`models.hoeffding._arf_kernels`).

    After each ``learn_many``, :meth:`events` reports the trees whose drift detector fired
    (``"tree_drift"``: the tree was replaced by its background tree, or by a new one) and
    those whose warning detector fired (``"tree_warning"``: a background tree started),
    with :attr:`n_drifted` and :attr:`n_warned` counting them among :attr:`n_models`;
    :attr:`n_drifts` and :attr:`n_warnings` are the totals since the start.

    :meth:`importances` returns ``{"split_gain": g}``: the mean over the foreground trees of
    the Hoeffding tree's split-gain importance (information gain of each split, weighted by
    the share of the tree's weight that reached it).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((2000, 4)); y = (X[:, 0] + X[:, 1] > 1.0).astype(int)
    >>> arf = AdaptiveRandomForest(n_models=5, seed=3)
    >>> arf.learn_many(X[:1500], y[:1500])
    >>> acc = np.mean(np.array(arf.predict_many(X[1500:])) == y[1500:])
    >>> bool(acc > 0.9)
    True

    References
    ----------
    Gomes, H. M., Bifet, A., Read, J., Barddal, J. P., Enembreck, F., Pfahringer, B.,
    Holmes, G. and Abdessalem, T. (2017). Adaptive random forests for evolving data stream
    classification. Machine Learning 106, 1469-1495.
    """

    kind = "adaptive_random_forest"
    #: :meth:`predict_proba_learn_many` takes rows labelled ``None`` (only predicted): a
    #: stream whose labels come later is served in one call per run of rows
    predicts_unlabelled_rows = True
    #: :meth:`predict_proba_learn_many` takes ``segments``: a poll of rows is learned in one
    #: call, its events judged per segment (:meth:`select_segment`)
    learns_in_segments = True
    state_arrays = {
        **{name: (np.dtype(dt).str, 1) for name, (dt, _) in _NODE_ARRAYS.items()},
        **{name: (np.dtype(dt).str, 1) for name, (dt, _) in _LEAF_ARRAYS.items()},
        "node_counts": ("<f8", 2), "leaf_feat": ("<i8", 2),
        **{name: ("<f8", 3) for name in hs.GAUSSIAN_FILL},
        "slot_root": ("<i8", 1), "slot_nodes": ("<i8", 1), "used": ("<i8", 1),
        **{name: (np.dtype(dt).str, 1) for name, dt in _TREE_ARRAYS.items()},
        "rng": ("<u8", 1), "n_seen": ("<i8", 1), "n_features": ("<i8", 1),
        **tree_bank_layout("w_"), **tree_bank_layout("d_"),
    }

    # pool cells past ``used`` hold the fills (the kernels keep them so)
    capacity_axes = {**{name: (0, fill, "nodes") for name, (_, fill) in _NODE_ARRAYS.items()},
                     "node_counts": (0, 0.0, "nodes"),
                     **{name: (0, fill, "leaves") for name, (_, fill) in _LEAF_ARRAYS.items()},
                     "leaf_feat": (0, 0, "leaves"),
                     **{name: (0, fill, "leaves") for name, fill in hs.GAUSSIAN_FILL.items()}}

    def __init__(self, n_models: int = 10, max_features="sqrt+1", lambda_value: float = 6.0,
                 grace_period: int = 50, delta: float = 0.01, tau: float = 0.05,
                 leaf_prediction: str = "nba", n_splits: int = 10,
                 max_depth: int | None = None, warning_delta: float = 0.01,
                 drift_delta: float = 0.001, weighted_vote: bool = True,
                 flavour: str = "moa", seed: int = 1):
        if flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
        if leaf_prediction not in _LEAF:
            raise ValueError(f"leaf_prediction must be one of {sorted(_LEAF)}, "
                             f"got {leaf_prediction!r}")
        if int(n_models) < 1 or not float(lambda_value) > 0 or not float(grace_period) > 0:
            raise ValueError("need n_models >= 1, lambda_value > 0 and grace_period > 0")
        if float(lambda_value) > 30:
            raise ValueError("lambda_value must be <= 30")
        for name, v in (("delta", delta), ("warning_delta", warning_delta),
                        ("drift_delta", drift_delta)):
            if not 0.0 < float(v) < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {v!r}")
        if float(tau) < 0 or int(n_splits) < 1 or (max_depth is not None and int(max_depth) < 0):
            raise ValueError("need tau >= 0, n_splits >= 1 and max_depth >= 0")
        if not (max_features in ("sqrt+1", "sqrt", "log2")
                or (isinstance(max_features, (int, float))
                    and not isinstance(max_features, bool) and max_features > 0)):
            raise ValueError(f"max_features must be 'sqrt+1', 'sqrt', 'log2' or a positive "
                             f"number, got {max_features!r}")
        self.params = {"n_models": int(n_models), "max_features": max_features,
                       "lambda_value": float(lambda_value), "grace_period": grace_period,
                       "delta": float(delta), "tau": float(tau),
                       "leaf_prediction": leaf_prediction, "n_splits": int(n_splits),
                       "max_depth": max_depth, "warning_delta": float(warning_delta),
                       "drift_delta": float(drift_delta), "weighted_vote": bool(weighted_vote),
                       "flavour": flavour, "seed": int(seed)}
        moa = flavour == "moa"
        # MOA's tree: no "no split" answer for a leaf of one dominant class (river's 99%
        # rule), and a class estimator without spread is a point mass (river skips it)
        self._settings_f = np.array([float(grace_period), float(delta), float(tau), 0.01,
                                     math.inf if moa else 0.99])
        self._settings_i = np.array([int(n_splits), _LEAF[leaf_prediction],
                                     hs.DEGENERATE_POINT if moa else hs.DEGENERATE_SKIP,
                                     2**31 if max_depth is None else int(max_depth),
                                     ak.FLAVOUR_MOA if moa else ak.FLAVOUR_RIVER], np.int64)
        self._vote = (ak.VOTE_EQUAL if not weighted_vote
                      else ak.VOTE_PERCENT if moa else ak.VOTE_ACCURACY)
        # ADWIN: delta, clock, max_buckets, min_window_length, grace_period (river defaults)
        self._w_settings = tree_bank_settings(warning_delta)
        self._d_settings = tree_bank_settings(drift_delta)
        self._classes = ClassIndex()
        self._arrays: dict[str, np.ndarray] = {}
        # the last call's detector counts per segment (:meth:`select_segment`), and the one
        # events() reads (:meth:`_last`)
        self._segments: list | None = None
        self._view: tuple | None = None

    # ------------------------------------------------------------------ arrays

    @property
    def n_features(self) -> int | None:
        return int(self._arrays["n_features"][0]) if self._arrays else None

    def subset_size(self, n_features: int) -> int:
        """The ``m`` of ``max_features`` for ``n_features`` columns."""
        mf = self.params["max_features"]
        if mf == "sqrt+1":
            m = round(math.sqrt(n_features)) + 1
        elif mf == "sqrt":
            m = round(math.sqrt(n_features))
        elif mf == "log2":
            m = _round_log2(n_features) if n_features > 0 else 1
        elif isinstance(mf, float) and mf <= 1.0:
            m = int(mf * n_features)
        else:
            m = int(mf)
        return int(min(max(m, 1), n_features))

    def _allocate(self, F: int, K: int) -> None:
        T = self.params["n_models"]
        S, K, m = 2 * T, max(K, 1), self.subset_size(F)
        P, Q = _INITIAL_NODES * S, _INITIAL_LEAVES * S
        a = {name: np.full(P, fill, dt) for name, (dt, fill) in _NODE_ARRAYS.items()}
        a["node_counts"] = np.zeros((P, K))
        a.update({name: np.full(Q, fill, dt) for name, (dt, fill) in _LEAF_ARRAYS.items()})
        a["leaf_feat"] = np.zeros((Q, m), np.int64)
        for name, fill in hs.GAUSSIAN_FILL.items():
            a[name] = np.full((Q, m, K), fill)
        a["slot_root"] = np.full(S, -1, np.int64)
        a["slot_nodes"] = np.zeros(S, np.int64)
        a["used"] = np.zeros(2, np.int64)
        for name, dt in _TREE_ARRAYS.items():
            a[name] = np.zeros(T, dt)
        a["fg_slot"][:] = np.arange(T)
        a["bg_slot"][:] = np.arange(T, 2 * T)
        a["rng"] = seed_states(self.params["seed"], T, _SALT)
        a["n_seen"] = np.zeros(1, np.int64)
        a["n_features"] = np.array([F], np.int64)
        for prefix in ("w_", "d_"):
            a.update(new_tree_bank(T, prefix))
        self._arrays = a
        perm = np.zeros(F, np.int64)
        index = np.zeros(P, np.int64)
        for t in range(T):  # the roots and their subsets, from each tree's own generator
            for slot in (t, T + t):
                ak.reset_slot(slot, a["rng"], t, perm, index, *self._pool_args())

    def _used_capacity(self) -> dict[str, int]:
        used = self._arrays["used"]
        return {"nodes": int(used[0]), "leaves": int(used[1])}

    def _capacity_bound(self) -> dict[str, int]:
        """The longest the node and leaf pools could have grown for the state's rows.

        Each of the ``2 T`` slots learns a row at most once and attempts at most one split
        on it, adding two nodes and one leaf: after ``n`` rows a slot holds at most
        ``1 + 2 n`` nodes and ``1 + n`` leaves (a depth limit ``d``: ``2^(d+1) - 1`` and
        ``2^d``), and dropped trees leave the pools. A pool starts at ``8`` cells per slot and
        grows only when fewer than its per-row reserve (``r T`` cells,
        :data:`models.hoeffding._arf_kernels.NODES_PER_ROW` and ``LEAVES_PER_ROW``) are free, by a
        quarter at a time (:func:`_grown`), so it never exceeds ``max(16 T, 5/4 (U + r T))``
        for ``U`` the most it held. Trees dropped since leave the capacity above what is used
        now; never above this.

        Examples
        --------
        >>> arf = AdaptiveRandomForest(n_models=10, max_depth=3)
        >>> arf._arrays = {"n_seen": np.array([1000])}
        >>> arf._capacity_bound()
        {'nodes': 450, 'leaves': 250}
        """
        n_seen = self._arrays["n_seen"]
        rows = max(0, int(n_seen[0])) if n_seen.shape == (1,) else 0
        nodes, leaves = 1 + 2 * rows, 1 + rows
        depth = self.params["max_depth"]
        if depth is not None:
            d = min(max(int(depth), 0), 62)
            nodes, leaves = min(nodes, (2 << d) - 1), min(leaves, 1 << d)
        T = self.params["n_models"]
        S = 2 * T
        return {"nodes": max(_INITIAL_NODES * S, 5 * (S * nodes + ak.NODES_PER_ROW * T) // 4),
                "leaves": max(_INITIAL_LEAVES * S, 5 * (S * leaves + ak.LEAVES_PER_ROW * T) // 4)}

    def _grow(self) -> None:
        """Double whatever the kernel stopped for: a pool or a detector's rows."""
        a, T = self._arrays, self.params["n_models"]
        for group, need, per_row in (("nodes", a["used"][0], ak.NODES_PER_ROW),
                                     ("leaves", a["used"][1], ak.LEAVES_PER_ROW)):
            names = [n for n, spec in self.capacity_axes.items() if spec[2] == group]
            size = a[names[0]].shape[0]
            if need + per_row * T > size:
                size = _grown(size, need + per_row * T)
                for name in names:
                    a[name] = grow_axis(a[name], size, axis=0, fill=self.capacity_axes[name][1])
        for prefix in ("w_", "d_"):
            grow_tree_bank(a, prefix)

    def _grow_classes(self, K: int) -> None:
        a = self._arrays
        if a["node_counts"].shape[1] < K:
            a["node_counts"] = grow_axis(a["node_counts"], K, axis=1)
            for name, fill in hs.GAUSSIAN_FILL.items():
                a[name] = grow_axis(a[name], K, axis=2, fill=fill)

    def _pool_args(self):
        """The pools in the order the kernels take them."""
        return _pool_arrays(self._arrays)

    # ------------------------------------------------------------------ learning

    def learn_many(self, X, y) -> None:
        """Learn the rows ``X`` with their labels ``y`` in order, each tree scoring each row
        before it learns it (new labels may appear at any time)."""
        self._learn(X, y, predict=False)

    def predict_proba_learn_many(self, X, y, learn_only=None, segments=None) -> np.ndarray:
        """Test-then-train in one kernel call: each row's class probabilities from the forest
        as it stood just before that row was learned (Gama et al. 2013's prequential
        evaluation, row by row), then the row learned; a row labelled ``None`` is only
        predicted.

        The same as ``predict_proba_many(X[i:i+1])`` then ``learn_many(X[i:i+1], y[i:i+1])``
        for every labelled row in turn, without a Python call per row. Columns follow
        :attr:`classes` after the call: a row predicted before a class appeared has
        probability 0 for it; a row predicted before anything was learned has all zeros.
        Rows where ``learn_only`` (booleans, optional) is set are learned without a
        prediction (their row is 0): the label of an instance predicted in an earlier call.

        ``segments`` (optional: the ends of consecutive runs of the rows, non-decreasing, the
        last ``len(X)``; a run may be empty) makes the call count its trees' replacements per
        run, as one call per run would: :meth:`select_segment` then shows each run's events.
        The predictions, the state and the last run's events are those of one call per run.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).random((400, 3))
        >>> y = ["a" if v > 0.5 else "b" for v in X[:, 0]]
        >>> arf = AdaptiveRandomForest(n_models=3, seed=1)
        >>> P = arf.predict_proba_learn_many(X, y)
        >>> P.shape, float(P[0].sum()), round(float(P[-1].sum()), 6)
        ((400, 2), 0.0, 1.0)
        """
        return self._learn(X, y, predict=True, learn_only=learn_only, segments=segments)

    def _learn(self, X, y, predict: bool, learn_only=None, segments=None) -> np.ndarray | None:
        X = check_X(X, self.n_features)
        if y is None:
            raise ValueError("AdaptiveRandomForest needs labels: y must not be None")
        known = len(self._classes)  # a row is predicted over the classes known by then
        codes = self._classes.encode(y, n_rows=X.shape[0], missing=predict)
        self._segments = self._view = None
        if X.shape[0] == 0 or not self._arrays and (codes < 0).all():
            if self._arrays:  # nothing learned: nothing to report
                self._arrays["last_drifts"][:] = 0
                self._arrays["last_warnings"][:] = 0
            return np.zeros((X.shape[0], len(self._classes))) if predict else None
        if not self._arrays:
            self._allocate(X.shape[1], len(self._classes))
        self._grow_classes(len(self._classes))
        a = self._arrays
        out = np.zeros((X.shape[0] if predict else 0, a["node_counts"].shape[1]))
        drifts, warnings = a["n_drifts"].copy(), a["n_warnings"].copy()
        done = 0
        quiet = (_NONE_QUIET if learn_only is None else
                 np.ascontiguousarray(learn_only, dtype=np.uint8).reshape(X.shape[0]))
        cuts, counts = _ONE_SEGMENT if segments is None else self._segment_arrays(segments, X)
        while True:
            a = self._arrays
            done = ak.learn_rows(
                X, codes, quiet, cuts, counts, done, out, known, self._vote, self.params["lambda_value"],
                self._settings_f, self._settings_i, self._w_settings, self._d_settings,
                *ak.learn_scratch(a["fg_slot"].shape[0], a["node_counts"].shape[1],
                                  a["leaf_feat"].shape[1], X.shape[1], a["node_feature"].shape[0]),
                *_learn_arrays(a))
            if done >= X.shape[0]:
                break
            self._grow()
        if segments is None:
            a["last_drifts"][:] = a["n_drifts"] - drifts
            a["last_warnings"][:] = a["n_warnings"] - warnings
        else:  # the state one call per segment leaves: the last segment's counts
            a["last_drifts"][:] = counts[-1, 0]
            a["last_warnings"][:] = counts[-1, 1]
            self._segments = _segment_events(counts, int(drifts.sum()), int(warnings.sum()))
        return out[:, :len(self._classes)] if predict else None

    def _segment_arrays(self, segments, X) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's ``cuts`` and zeroed ``seg_counts`` for ``segments``."""
        if type(segments) is list and len(segments) == 1 and segments[0] == X.shape[0]:
            cuts = np.full(1, X.shape[0], dtype=np.int64)  # one segment: nothing to check
            return cuts, np.zeros((1, 2, self.n_models), np.int64)
        cuts = np.asarray(segments, dtype=np.int64).reshape(-1)
        if cuts.shape[0] == 0 or cuts[-1] != X.shape[0] or (np.diff(cuts) < 0).any() \
                or cuts[0] < 0:
            raise ValueError("segments must be the ends of consecutive runs (an empty run: "
                             f"its end repeated), the last the number of rows ({X.shape[0]})")
        return cuts, np.zeros((cuts.shape[0], 2, self.n_models), np.int64)

    def select_segment(self, k: int) -> None:
        """Make :meth:`events` (and :attr:`n_drifted`, :attr:`n_warned`, the counts so far)
        describe segment ``k`` of the last call given ``segments``, as if it had been a call
        of its own: the alert rules then judge each segment as they judge a call."""
        if self._segments is None:
            raise ValueError("the last call was not given segments")
        self._view = self._segments[k]

    def _last(self) -> tuple:
        """``(trees replaced, trees that started a background tree, replacements, drifts so
        far, warnings so far)``: of the last call, or of the segment :meth:`select_segment`
        chose."""
        if self._view is None:  # once per call: the state changes only in _learn
            a = self._arrays
            self._view = (int((a["last_drifts"] > 0).sum()),
                          int((a["last_warnings"] > 0).sum()), int(a["last_drifts"].sum()),
                          int(a["n_drifts"].sum()), int(a["n_warnings"].sum()))
        return self._view

    # ------------------------------------------------------------------ prediction

    def predict_proba_many(self, X) -> np.ndarray:
        """Class probabilities ``(n, n_classes)``; ``(n, 0)`` before anything was learned."""
        X = check_X(X, self.n_features)
        if not self._arrays or self.n_seen == 0:
            return np.zeros((X.shape[0], 0))
        a = self._arrays
        full = np.zeros((X.shape[0], a["node_counts"].shape[1]))
        ak.predict_rows(X, self._vote, self._settings_i, a["fg_slot"],
                        a["tree_correct"], a["tree_seen"], a["slot_root"], a["node_feature"],
                        a["node_threshold"], a["node_left"], a["node_right"],
                        a["node_active"], a["node_leaf"], a["node_counts"], a["leaf_feat"],
                        a["leaf_mc"], a["leaf_nb"], a["g_w"], a["g_mean"], a["g_m2"], full)
        return full[:, :len(self._classes)]

    # ------------------------------------------------------------------ inspection

    @property
    def n_drifts(self) -> int:
        """Drifts detected (foreground trees replaced) so far, over all trees."""
        return self._last()[3] if self._arrays else 0

    @property
    def n_warnings(self) -> int:
        """Warnings detected (background trees started) so far, over all trees."""
        return self._last()[4] if self._arrays else 0

    @property
    def n_models(self) -> int:
        """Trees in the forest (the members an alert rule's share is taken of)."""
        return self.params["n_models"]

    @property
    def n_drifted(self) -> int:
        """Trees replaced (their drift detector fired) in the last ``learn_many``."""
        return self._last()[0] if self._arrays else 0

    @property
    def n_warned(self) -> int:
        """Trees that started a background tree (their warning detector fired) in the last
        ``learn_many``."""
        return self._last()[1] if self._arrays else 0

    def events(self) -> list[LearnerEvent]:
        """What the per-tree detectors did in the last ``learn_many``.

        A ``"tree_drift"`` event (level ``drift``) when trees were replaced and a
        ``"tree_warning"`` event (level ``warning``) when trees started background trees
        (Gomes et al. 2017, Alg. 1, lines 8-16). A single tree's replacement is the forest's
        routine recovery (each tree's ADWIN sees its own bootstrap error), so the registry's
        alert rule publishes only those in which a share of the forest takes part.
        """
        if not self._arrays:
            return []
        T, out = self.n_models, []
        if self.n_drifted:
            out.append(LearnerEvent(
                "tree_drift", "drift", -1, -1,
                f"{self.n_drifted} of {T} trees replaced after their drift detector fired "
                f"({self._last()[2]} replacement(s); {self.n_drifts} so far)"))
        if self.n_warned:
            out.append(LearnerEvent(
                "tree_warning", "warning", -1, -1,
                f"{self.n_warned} of {T} trees started a background tree after their warning "
                f"detector fired ({self.n_warnings} so far)"))
        return out

    def n_nodes(self) -> list[int]:
        """Nodes of each foreground tree."""
        if not self._arrays:
            return []
        a = self._arrays
        return [int(a["slot_nodes"][s]) for s in a["fg_slot"]]

    def importances(self) -> dict:
        """``{"split_gain": mean split gain per feature over the foreground trees}``."""
        if not self._arrays:
            return {"split_gain": np.zeros(0)}
        a = self._arrays
        out = np.zeros(self.n_features)
        used = int(a["used"][0])
        slot, feature = a["node_slot"][:used], a["node_feature"][:used]
        weight = a["node_counts"][:used].sum(axis=1)
        for s in a["fg_slot"]:
            root = weight[a["slot_root"][s]]
            for i in np.flatnonzero((slot == s) & (feature >= 0)):
                share = weight[i] / root if root > 0 else 0.0
                out[feature[i]] += a["node_merit"][i] * share
        return {"split_gain": out / len(a["fg_slot"])}

    # ------------------------------------------------------------------ state

    def _extra_state(self) -> dict:
        return {"classes": list(self._classes.classes), "layout": STATE_LAYOUT}

    def _load_extra_state(self, extra: dict) -> None:
        self._classes = ClassIndex(extra.get("classes", ()))

    @classmethod
    def from_state(cls, state: dict):
        """Rebuild a forest from :meth:`to_state` output; a state written before the node
        and leaf pools (layout 1, no ``"layout"`` in its extra) is converted first
        (:func:`models.hoeffding._arf_layout.pools_from_layout1`) and continues exactly, as does one
        written before ``flavour`` (its forest learned by river's rules: ``"river"``)."""
        if "flavour" not in state.get("params", {}):
            # written before the flavour: the forest learned by river's rules, and goes on so
            state = {**state, "params": {**state["params"], "flavour": "river"}}
        layout = (state.get("extra") or {}).get("layout", 1) if state.get("arrays") else STATE_LAYOUT
        if layout == 1:
            state = pools_from_layout1(state, cls.kind, STATE_LAYOUT)
        elif layout != STATE_LAYOUT:
            raise ValueError(f"{cls.kind} state has layout {layout!r}; this version reads "
                             f"layouts 1 and {STATE_LAYOUT}")
        return super().from_state(state)

    def _check_state(self) -> None:
        a, kind = self._arrays, self.kind
        T = self.params["n_models"]
        S = 2 * T
        P, Q = a["node_feature"].shape[0], a["leaf_node"].shape[0]
        F = int(a["n_features"][0]) if a["n_features"].shape == (1,) else -1
        K = a["node_counts"].shape[1] if a["node_counts"].ndim == 2 else 0
        m = self.subset_size(F) if F >= 1 else 0
        if F < 1 or K < max(len(self._classes), 1):
            raise ValueError(f"{kind} state: bad feature count or class axis")
        shapes = {**{n: (P,) for n in _NODE_ARRAYS}, "node_counts": (P, K),
                  **{n: (Q,) for n in _LEAF_ARRAYS}, "leaf_feat": (Q, m),
                  **{n: (Q, m, K) for n in hs.GAUSSIAN_FILL}, "slot_root": (S,),
                  "slot_nodes": (S,), "used": (2,),
                  **{n: (T,) for n in _TREE_ARRAYS}, "rng": (T,), "n_seen": (1,)}
        check_shapes(a, shapes)
        check_index(a["used"][:1], 0, P + 1, "used")
        check_index(a["used"][1:], 0, Q + 1, "used")
        check_index(a["bg_active"], 0, 2, "bg_active")
        for last, total in (("last_drifts", "n_drifts"), ("last_warnings", "n_warnings")):
            if (a[last] < 0).any() or (a[last] > a[total]).any():
                raise ValueError(f"{kind} state: {last} must lie between 0 and {total}")
        slots = np.concatenate([a["fg_slot"], a["bg_slot"]])
        check_index(slots, 0, S, "fg_slot/bg_slot")
        if np.unique(slots).size != S:
            raise ValueError(f"{kind} state: tree slots are not a permutation")
        self._check_pools(int(a["used"][0]), int(a["used"][1]), F, S)
        for prefix in ("w_", "d_"):
            check_tree_bank(a, prefix, T)

    def _check_pools(self, n: int, q: int, F: int, S: int) -> None:
        """The trees in the pools are trees: the kernels route and index without checks."""
        a, kind = self._arrays, self.kind
        check_index(a["node_slot"][:n], 0, S, "node_slot")
        check_index(a["node_feature"][:n], -1, F, "node_feature")
        check_index(a["node_leaf"][:n], -1, q, "node_leaf")
        check_index(a["node_active"][:n], 0, 2, "node_active")
        check_index(a["node_depth"][:n], 0, max(n, 1), "node_depth")
        check_index(a["leaf_node"][:q], 0, n, "leaf_node")
        check_index(a["leaf_feat"][:q], 0, F, "leaf_feat")
        check_index(a["slot_root"], -1, n, "slot_root")
        ids = np.arange(n)
        split = a["node_feature"][:n] >= 0
        for side in ("node_left", "node_right"):
            child = a[side][:n][split]
            # children after their parents (no cycle), in the parent's slot
            if (child <= ids[split]).any() or (child >= n).any() \
                    or (a["node_slot"][child] != a["node_slot"][:n][split]).any():
                raise ValueError(f"{kind} state: a split node points to a missing child")
        leaf = ~split
        # a leaf has no children, and cells past the used ones hold the fills: a state is
        # refused unless it is one the kernels could have written
        if (a["node_left"][:n][leaf] != -1).any() or (a["node_right"][:n][leaf] != -1).any():
            raise ValueError(f"{kind} state: a leaf has children")
        for names, used in ((_NODE_ARRAYS, n), (_LEAF_ARRAYS, q)):
            for name, (_, fill) in names.items():
                if (a[name][used:] != fill).any():
                    raise ValueError(f"{kind} state: {name} past the {used} cells in use "
                                     "is not empty")
        if leaf.sum() != q or (a["node_leaf"][:n][leaf] < 0).any() or (a["node_leaf"][:n][split] >= 0).any() \
                or (a["leaf_node"][a["node_leaf"][:n][leaf]] != ids[leaf]).any():
            raise ValueError(f"{kind} state: leaves and leaf records do not match")
        if a["slot_nodes"].sum() != n or (np.bincount(a["node_slot"][:n], minlength=S)
                                          != a["slot_nodes"]).any():
            raise ValueError(f"{kind} state: slot node counts do not match the pool")
        roots = a["slot_root"]
        if (roots[a["fg_slot"]] < 0).any() or ((roots[a["bg_slot"]] < 0)
                                               & (a["bg_active"] == 1)).any():
            raise ValueError(f"{kind} state: a tree in use has no root")
        has = roots >= 0
        if (a["node_slot"][roots[has]] != np.flatnonzero(has)).any():
            raise ValueError(f"{kind} state: a slot's root belongs to another slot")
