"""The Python side shared by :class:`~models.isoup.isoup_tree.ISOUPTree` and
:class:`~models.isoup.isoup_forest.ISOUPSymRF`: validation, allocation, growth, state checks.

Kernels: :mod:`models.isoup._isoup_kernels` (trees), :mod:`models.isoup._ebst` (observers),
:mod:`models.hoeffding._hoeffding` (variance reduction, Hoeffding bound).
"""

from __future__ import annotations

import numpy as np

from ..core._rng import seed_states
from ..core._trees import grow_axis
from ..core.base import Learner, check_index, check_shapes, check_targets, check_X, upgrade_state
from ..drift.adwin import _INITIAL_ROWS as _ADWIN_ROWS
from ..drift.adwin import grow_tree_bank, new_tree_bank, tree_bank_args, tree_bank_layout, tree_bank_settings
from ..hoeffding._gaussian_base import check_weights
from ..hoeffding._hoeffding import check_split_test
from . import _isoup_kernels as ik

LEAF_MODES = {"adaptive": ik.LEAF_ADAPTIVE, "perceptron": ik.LEAF_PERCEPTRON,
              "mean": ik.LEAF_MEAN}
#: perceptron updates: the delta rule with its rate capped at the row's exact fit, or MOA's
#: delta rule followed by a rescaling of each target's weights to unit L1 norm
PERCEPTRONS = ("capped", "unit_l1")
#: the layout of a learner's state; a state of an older version is converted or refused by
#: :meth:`ISOUPBase.from_state` (version 1: no ``perceptron`` parameter, MOA's update, and a
#: forest's ``drift_delta`` replaced a tree without a background tree)
STATE_VERSION = 2
_INITIAL_NODES = 8
_SALT = 0x150B
_BG_SALT = 0x150C  # the background trees' generators: a background draws nothing of its tree's
#: node arrays: name -> (dtype, fill, trailing axes: "M" targets, "2", "F1" features + 1)
_NODE = {
    "node_feature": (np.int64, -1, ()), "node_threshold": (np.float64, 0.0, ()),
    "node_left": (np.int64, -1, ()), "node_right": (np.int64, -1, ()),
    "node_depth": (np.int64, 0, ()), "node_slot": (np.int64, -1, ()),
    "node_last_eval": (np.float64, 0.0, ()), "node_w": (np.float64, 0.0, ()),
    "node_fit_w": (np.float64, 0.0, ()),
    "node_ysum": (np.float64, 0.0, ("M",)), "node_err": (np.float64, 0.0, ("M", 2)),
    "node_lin": (np.float64, 0.0, ("M", "F1")),
}
#: observer arrays: name -> (dtype, trailing axes after (T, S, P))
_SLOT = {"obs_n": (np.int64, ()), "obs_key": (np.float64, ("K",)),
         "obs_stats": (np.float64, ("K", "W2M"))}
#: the tree arrays (nodes, observers, counts) in the order the kernels take them
TREE = (*_NODE, "slot_features", *_SLOT, "n_nodes", "n_slots")
#: prefix of the background trees' arrays (``bg_node_feature``, ...)
BG = "bg_"
#: what a forest that follows drift adds: a detector per tree (``d_*``), a background tree
#: per tree (``bg_*``, none while ``bg_n_nodes`` is 0), the faded comparison of the two
#: (``bg_cmp``), the replacements (``n_drifts``) and the backgrounds started
DRIFT_ARRAYS = {
    **tree_bank_layout("d_"), "n_drifts": ("<i8", 1),
    **{BG + n: (np.dtype(d).str, 2 + len(ax)) for n, (d, _, ax) in _NODE.items()},
    BG + "slot_features": ("<i8", 3),
    **{BG + n: (np.dtype(d).str, 3 + len(ax)) for n, (d, ax) in _SLOT.items()},
    BG + "n_nodes": ("<i8", 1), BG + "n_slots": ("<i8", 1), BG + "cmp": ("<f8", 2), BG + "rng": ("<u8", 1),
    "n_backgrounds": ("<i8", 1),
}
#: columns of ``bg_cmp`` (:func:`models.isoup._isoup_kernels.push_difference`)
_CMP = 5


def _tree_arrays(T: int, N: int, F: int, M: int, P: int, K: int, prefix: str = "") -> dict:
    """Empty arrays of ``T`` trees of ``N`` nodes (``N // 2`` observer slots)."""
    axes = {"M": M, "F1": F + 1, "K": K, "W2M": 1 + 2 * M}
    a = {prefix + n: np.full((T, N, *(axes.get(x, x) for x in ax)), fill, d)
         for n, (d, fill, ax) in _NODE.items()}
    a[prefix + "slot_features"] = np.zeros((T, N // 2, P), np.int64)
    a.update({prefix + n: np.zeros((T, N // 2, P, *(axes.get(x, x) for x in ax)), d)
              for n, (d, ax) in _SLOT.items()})
    a[prefix + "n_nodes"] = np.zeros(T, np.int64)
    a[prefix + "n_slots"] = np.zeros(T, np.int64)
    return a


def new_drift_state(T: int, F: int, M: int, P: int, K: int, seed: int,
                    rows: int = _ADWIN_ROWS) -> dict:
    """Empty detectors (``rows`` bucket rows each), no background trees (their generators
    seeded from ``seed``), nothing counted."""
    return {**new_tree_bank(T, "d_", rows), "n_drifts": np.zeros(T, np.int64),
            **_tree_arrays(T, _INITIAL_NODES, F, M, P, K, BG), BG + "cmp": np.zeros((T, _CMP)),
            BG + "rng": seed_states(seed, T, _BG_SALT), "n_backgrounds": np.zeros(T, np.int64)}


def drift_args(a: dict, delta: float | None, replace: tuple) -> tuple:
    """The kernel's drift arguments: whether to follow drift, the ADWIN settings (any delta
    when off: the kernel reads none of it), the detectors, the replacement settings
    ``(fade, z, min_rows)`` and the background trees of ``a``."""
    return (delta is not None, tree_bank_settings(0.002 if delta is None else delta),
            *tree_bank_args(a, "d_"), a["n_drifts"], np.array(replace, np.float64), a[BG + "rng"],
            *(a[BG + n] for n in TREE), a[BG + "cmp"], a["n_backgrounds"])


def _double_trees(a: dict, prefix: str) -> None:
    """Double the node capacity (and observer slots) of the trees of ``prefix``."""
    N = 2 * a[prefix + "node_feature"].shape[1]
    for name, (_, fill, _) in _NODE.items():
        a[prefix + name] = grow_axis(a[prefix + name], N, axis=1, fill=fill)
    for name in ("slot_features", *_SLOT):
        a[prefix + name] = grow_axis(a[prefix + name], N // 2, axis=1)


class ISOUPBase(Learner):
    """Learning, prediction and the state round trip of bagged iSOUP trees (not used directly).

    Subclasses set ``self.params`` and call :meth:`_init_settings` with the number of
    trees, whether they bag, and a function giving the subspace size from ``F``.
    """

    state_arrays = {
        **{n: (np.dtype(d).str, 2 + len(ax)) for n, (d, _, ax) in _NODE.items()},
        "slot_features": ("<i8", 3),
        **{n: (np.dtype(d).str, 3 + len(ax)) for n, (d, ax) in _SLOT.items()},
        "norm_w": ("<f8", 1), "x_mean": ("<f8", 1), "x_m2": ("<f8", 1), "y_mean": ("<f8", 1),
        "y_m2": ("<f8", 1), "rng": ("<u8", 1), "n_nodes": ("<i8", 1), "n_slots": ("<i8", 1),
        "n_seen": ("<i8", 1),
    }

    def _init_settings(self, n_models: int, bagging: bool, subspace, grace_period, delta, tau,
                       leaf_prediction, learning_ratio, learning_ratio_decay, fading_factor,
                       max_thresholds, max_depth, seed, perceptron) -> None:
        if leaf_prediction not in LEAF_MODES:
            raise ValueError(f"leaf_prediction must be one of {sorted(LEAF_MODES)}, "
                             f"got {leaf_prediction!r}")
        if perceptron not in PERCEPTRONS:
            raise ValueError(f"perceptron must be one of {list(PERCEPTRONS)}, got {perceptron!r}")
        check_split_test(grace_period, delta, tau)
        if not float(learning_ratio) > 0 or float(learning_ratio_decay) < 0 \
                or not 0.0 <= float(fading_factor) <= 1.0:
            raise ValueError("need learning_ratio > 0, learning_ratio_decay >= 0 and "
                             "0 <= fading_factor <= 1")
        if int(max_thresholds) < 2 or int(n_models) < 1:
            raise ValueError("need max_thresholds >= 2 and n_models >= 1")
        if max_depth is not None and int(max_depth) < 0:
            raise ValueError("max_depth must be None or >= 0")
        self._n_models = int(n_models)
        self._subspace = subspace
        self._max_thresholds = int(max_thresholds)
        self._seed = int(seed)
        self._settings = (bool(bagging), 1.0, float(grace_period), float(delta), float(tau),
                          0.05, float(learning_ratio), float(learning_ratio_decay),
                          float(fading_factor), perceptron == "unit_l1",
                          LEAF_MODES[leaf_prediction], 2**62 if max_depth is None else int(max_depth))
        self._leaf_mode = LEAF_MODES[leaf_prediction]
        self._no_drift = None
        self._arrays = {}

    # ------------------------------------------------------------------ shape

    @property
    def n_features(self) -> int | None:
        """Feature count (``None`` before learning)."""
        return self._arrays["x_mean"].shape[0] if self._arrays else None

    @property
    def n_targets(self) -> int | None:
        """Target count (``None`` before learning)."""
        return self._arrays["y_mean"].shape[0] if self._arrays else None

    def _shape(self, F: int) -> tuple[int, int]:
        """Features per leaf and thresholds per observer of a stream of ``F`` features."""
        return min(self._subspace(F), F), self._max_thresholds

    def _allocate(self, F: int, M: int) -> None:
        T = self._n_models
        P, K = self._shape(F)
        a = _tree_arrays(T, _INITIAL_NODES, F, M, P, K)
        a.update(norm_w=np.zeros(1), x_mean=np.zeros(F), x_m2=np.zeros(F), y_mean=np.zeros(M),
                 y_m2=np.zeros(M), rng=seed_states(self._seed, T, _SALT),
                 n_seen=np.zeros(1, np.int64))
        ik.init_roots(a["rng"], a["slot_features"], np.zeros(F, np.int64), a["node_slot"],
                      a["n_nodes"], a["n_slots"])
        if "n_drifts" in self.state_arrays:
            a.update(new_drift_state(T, F, M, P, K, self._seed))
        self._arrays = a

    def _grow(self) -> None:
        """Double whatever the kernel stopped for: a tree's nodes (also when a background
        tree would not fit its foreground), a background tree's nodes or a detector's rows."""
        a = self._arrays
        drift = "n_drifts" in a
        if drift:
            grow_tree_bank(a, "d_")
        N = a["node_feature"].shape[1]
        used = np.maximum(a["n_nodes"], a[BG + "n_nodes"]) if drift else a["n_nodes"]
        if (used + 2 > N).any() or (a["n_slots"] + 1 > N // 2).any():
            _double_trees(a, "")
        if drift:
            NB = a[BG + "node_feature"].shape[1]
            if (a[BG + "n_nodes"] + 2 > NB).any() or (a[BG + "n_slots"] + 1 > NB // 2).any():
                _double_trees(a, BG)

    # ------------------------------------------------------------------ learning

    def _run(self, X, Y, sample_weight, out) -> None:
        X = check_X(X, self.n_features)
        Y = check_targets(X, Y, self.n_targets)
        w = check_weights(sample_weight, X.shape[0])
        if X.shape[0] == 0:
            return
        if not self._arrays:
            self._allocate(X.shape[1], Y.shape[1])
        prequential = out is not None
        if out is None:
            out = np.zeros((1, 1))
        done = 0
        while True:
            done = ik.learn_rows(X, Y, w, done, prequential, out, *self._settings,
                                 *self._kernel_arrays(), *self._detection())
            if done >= X.shape[0]:
                return
            self._grow()

    def _kernel_arrays(self):
        a = self._arrays
        return (a["norm_w"], a["x_mean"], a["x_m2"], a["y_mean"], a["y_m2"], a["rng"],
                a["node_feature"], a["node_threshold"], a["node_left"], a["node_right"],
                a["node_depth"], a["node_slot"], a["node_last_eval"], a["node_w"],
                a["node_fit_w"], a["node_ysum"], a["node_err"], a["node_lin"], a["slot_features"], a["obs_n"],
                a["obs_key"], a["obs_stats"], a["n_nodes"],
                a["n_slots"], a["n_seen"])

    def _detection(self) -> tuple:
        """Drift arguments of the kernel: none here (a forest may follow drift)."""
        if self._no_drift is None:
            self._no_drift = new_drift_state(self._n_models, 1, 1, 1, 2, 0, rows=1)
        return drift_args(self._no_drift, None, (1.0, 0.0, 0.0))

    def learn_many(self, X, Y, sample_weight=None) -> None:
        """Learn rows ``X`` (n, F) with targets ``Y`` (n, M) and optional weights (n,)."""
        self._run(X, Y, sample_weight, None)

    def predict_learn_many(self, X, Y, sample_weight=None) -> np.ndarray:
        """Test-then-train in one kernel call: each row's prediction by the model as it stood
        just before learning that row (zeros for rows before any learning), shape (n, M).

        Equivalent to ``predict_many`` then ``learn_many`` row by row, without a Python call
        per row.
        """
        X = check_X(X, self.n_features)
        Y = check_targets(X, Y, self.n_targets)
        out = np.zeros(Y.shape)
        if X.shape[0]:
            self._run(X, Y, sample_weight, out)
        return out

    def predict_many(self, X) -> np.ndarray:
        """Predicted targets of each row, (n, M); (n, 0) before learning."""
        X = check_X(X, self.n_features)
        if not self._arrays:
            return np.zeros((X.shape[0], 0))
        a = self._arrays
        out = np.zeros((X.shape[0], a["y_mean"].shape[0]))
        ik.predict_rows(X, out, self._leaf_mode, a["norm_w"], a["x_mean"], a["x_m2"],
                        a["y_mean"], a["y_m2"], a["node_feature"], a["node_threshold"],
                        a["node_left"], a["node_right"], a["node_w"], a["node_ysum"],
                        a["node_err"], a["node_lin"])
        return out

    # ------------------------------------------------------------------ inspection

    @property
    def n_nodes(self) -> int:
        """Nodes over all trees (the number of trees before the first split)."""
        return int(self._arrays["n_nodes"].sum()) if self._arrays else 0

    def split_counts(self) -> np.ndarray:
        """Split nodes per feature, summed over the trees."""
        if not self._arrays:
            return np.zeros(0)
        nf = self._arrays["node_feature"]
        return np.bincount(nf[nf >= 0], minlength=self.n_features).astype(np.float64)

    def symbolic_scores(self) -> np.ndarray:
        """Per feature the sum over split nodes of ``0.5 ** depth``, averaged over the trees
        (Osojnik et al. 2018, the symbolic importance ``I(A, E)`` with ``w = 0.5``)."""
        if not self._arrays:
            return np.zeros(0)
        a = self._arrays
        nf = a["node_feature"]
        split = nf >= 0
        # 2^-depth by ldexp (exact), not numpy's power (whose AVX-512 variant may differ)
        weights = np.ldexp(1.0, -a["node_depth"][split].astype(np.int64))
        scores = np.bincount(nf[split], weights=weights, minlength=self.n_features)
        return scores / nf.shape[0]

    # ------------------------------------------------------------------ state

    def _extra_state(self) -> dict:
        return {"state_version": STATE_VERSION}

    @classmethod
    def from_state(cls, state: dict):
        """Rebuild from :meth:`to_state`. A state of version 1 (written before the
        ``perceptron`` parameter) continues with MOA's update (``perceptron="unit_l1"``), as
        it was written; a state of a later version than this learner's is refused."""
        state = upgrade_state(cls, state, STATE_VERSION)
        return super().from_state(state)

    @classmethod
    def _upgrade_v1(cls, state: dict) -> dict:
        """A version-1 state as version 2 (the learner's parameters as written)."""
        params = {"perceptron": "unit_l1", **(state.get("params") or {})}
        return {**state, "params": params, "extra": {**(state.get("extra") or {}),
                                                     "state_version": STATE_VERSION}}

    def _check_state(self) -> None:
        a = self._arrays
        T, N = a["node_feature"].shape
        F, M = a["x_mean"].shape[0], a["y_mean"].shape[0]
        if T != self._n_models:
            raise ValueError(f"{self.kind} state has {T} trees, expected {self._n_models}")
        check_shapes(a, {"norm_w": (1,), "x_m2": (F,), "y_m2": (M,), "rng": (T,), "n_seen": (1,)})
        self._check_trees("", 1)
        if not np.isfinite(a["norm_w"]).all() or a["norm_w"][0] < 0:
            raise ValueError(f"{self.kind} state: the standardiser weight is invalid")

    def _check_trees(self, prefix: str, least: int) -> None:
        """Shapes and indices of the trees of ``prefix``: each holds ``least`` nodes or more
        (a background tree may hold none), its split nodes point to children created after
        them within its nodes, and its leaves to observer slots in use."""
        a = self._arrays
        T, N = a[prefix + "node_feature"].shape
        F, M = a["x_mean"].shape[0], a["y_mean"].shape[0]
        S, P = a[prefix + "slot_features"].shape[1:]
        K = a[prefix + "obs_key"].shape[3]
        if (P, K) != self._shape(F) or S != N // 2:
            raise ValueError(f"{self.kind} state: observer shape {(S, P, K)} does not fit "
                             f"{N} nodes and {F} features")
        axes = {"M": M, "F1": F + 1, "K": K, "W2M": 1 + 2 * M}
        shapes = {prefix + n: (T, N, *(axes.get(x, x) for x in ax)) for n, (_, _, ax) in _NODE.items()}
        shapes.update({prefix + n: (T, S, P, *(axes.get(x, x) for x in ax)) for n, (_, ax) in _SLOT.items()})
        shapes.update({prefix + "slot_features": (T, S, P), prefix + "n_nodes": (T,),
                       prefix + "n_slots": (T,)})
        check_shapes(a, shapes)
        n_nodes, n_slots = a[prefix + "n_nodes"], a[prefix + "n_slots"]
        feature, left, right = (a[prefix + n] for n in ("node_feature", "node_left", "node_right"))
        slot = a[prefix + "node_slot"]
        check_index(n_nodes, least, N + 1, prefix + "n_nodes")
        check_index(n_slots, least, S + 1, prefix + "n_slots")
        check_index(feature, -1, F, prefix + "node_feature")
        check_index(left, -1, N, prefix + "node_left")
        check_index(right, -1, N, prefix + "node_right")
        check_index(slot, -1, S, prefix + "node_slot")
        check_index(a[prefix + "node_depth"], 0, N, prefix + "node_depth")
        check_index(a[prefix + "slot_features"], 0, F, prefix + "slot_features")
        check_index(a[prefix + "obs_n"], 0, K + 1, prefix + "obs_n")
        if ((n_nodes == 0) != (n_slots == 0)).any():
            raise ValueError(f"{self.kind} state: a tree without nodes has observers, or one with nodes has none")
        ids = np.arange(N)
        split = feature >= 0
        # a split node has two children created after it (no cycles), a leaf an observer
        if (left[split] <= np.broadcast_to(ids, (T, N))[split]).any() \
                or (right[split] <= np.broadcast_to(ids, (T, N))[split]).any():
            raise ValueError(f"{self.kind} state: a split node points to a missing child")
        used = ids[None, :] < n_nodes[:, None]
        within = n_nodes[:, None]
        if (split & ((left >= within) | (right >= within) | ~used)).any():
            raise ValueError(f"{self.kind} state: a split node points past the tree's nodes")
        if (used & ~split & (slot >= n_slots[:, None])).any():
            raise ValueError(f"{self.kind} state: a leaf's observer slot is not in use")
        if (slot[used & ~split] < 0).any():
            raise ValueError(f"{self.kind} state: a leaf has no observer")
