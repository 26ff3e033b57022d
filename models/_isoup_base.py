"""The Python side shared by :class:`~models.isoup_tree.ISOUPTree` and
:class:`~models.isoup_forest.ISOUPSymRF`: validation, allocation, growth, state checks.

Kernels: :mod:`models._isoup_kernels` (trees), :mod:`models._ebst` (observers),
:mod:`models._hoeffding` (variance reduction, Hoeffding bound).
"""

from __future__ import annotations

import numpy as np

from . import _isoup_kernels as ik
from ._gaussian_base import check_weights
from ._rng import seed_states
from ._trees import grow_axis
from .adwin import _INITIAL_ROWS as _ADWIN_ROWS
from .adwin import grow_tree_bank, new_tree_bank, tree_bank_args, tree_bank_layout, tree_bank_settings
from .base import Learner, check_index, check_shapes, check_targets, check_X

LEAF_MODES = {"adaptive": ik.LEAF_ADAPTIVE, "perceptron": ik.LEAF_PERCEPTRON,
              "mean": ik.LEAF_MEAN}
_INITIAL_NODES = 8
_SALT = 0x150B
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
#: the per-tree drift detectors of a forest that watches its trees, and its replacements
DETECTOR_ARRAYS = {**tree_bank_layout("d_"), "n_drifts": ("<i8", 1)}


def new_detectors(T: int, rows: int = _ADWIN_ROWS) -> dict[str, np.ndarray]:
    """Empty ADWIN windows for ``T`` trees (``rows`` bucket rows each) and no drifts yet."""
    return {**new_tree_bank(T, "d_", rows), "n_drifts": np.zeros(T, np.int64)}


def detector_args(a: dict, delta: float | None) -> tuple:
    """The kernel's detection arguments: whether to detect, the ADWIN settings (any delta
    when off: the kernel reads none of it) and the detector arrays of ``a``."""
    return (delta is not None, tree_bank_settings(0.002 if delta is None else delta),
            *tree_bank_args(a, "d_"), a["n_drifts"])


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
                       max_thresholds, max_depth, seed) -> None:
        if leaf_prediction not in LEAF_MODES:
            raise ValueError(f"leaf_prediction must be one of {sorted(LEAF_MODES)}, "
                             f"got {leaf_prediction!r}")
        if not float(grace_period) > 0 or not 0.0 < float(delta) < 1.0 or float(tau) < 0:
            raise ValueError("need grace_period > 0, 0 < delta < 1 and tau >= 0")
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
                          float(fading_factor), LEAF_MODES[leaf_prediction],
                          2**62 if max_depth is None else int(max_depth))
        self._leaf_mode = LEAF_MODES[leaf_prediction]
        self._no_detectors = None
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

    def _allocate(self, F: int, M: int) -> None:
        T, N = self._n_models, _INITIAL_NODES
        S, P, K = N // 2, min(self._subspace(F), F), self._max_thresholds
        axes = {"M": M, "F1": F + 1, "K": K, "W2M": 1 + 2 * M}
        a = {n: np.full((T, N, *(axes.get(x, x) for x in ax)), fill, d) for n, (d, fill, ax) in _NODE.items()}
        a["slot_features"] = np.zeros((T, S, P), np.int64)
        a.update({n: np.zeros((T, S, P, *(axes.get(x, x) for x in ax)), d) for n, (d, ax) in _SLOT.items()})
        a.update(norm_w=np.zeros(1), x_mean=np.zeros(F), x_m2=np.zeros(F), y_mean=np.zeros(M),
                 y_m2=np.zeros(M), rng=seed_states(self._seed, T, _SALT),
                 n_nodes=np.zeros(T, np.int64), n_slots=np.zeros(T, np.int64),
                 n_seen=np.zeros(1, np.int64))
        ik.init_roots(a["rng"], a["slot_features"], np.zeros(F, np.int64), a["node_slot"],
                      a["n_nodes"], a["n_slots"])
        if "n_drifts" in self.state_arrays:
            a.update(new_detectors(T))
        self._arrays = a

    def _grow(self) -> None:
        """Double whatever the kernel stopped for: a tree's nodes or a detector's rows."""
        a = self._arrays
        if "n_drifts" in a:
            grow_tree_bank(a, "d_")
        N, S = a["node_feature"].shape[1], a["slot_features"].shape[1]
        if (a["n_nodes"] + 2 <= N).all() and (a["n_slots"] + 1 <= S).all():
            return
        N = 2 * N
        for name, (_, fill, _) in _NODE.items():
            a[name] = grow_axis(a[name], N, axis=1, fill=fill)
        for name in ("slot_features", *_SLOT):
            a[name] = grow_axis(a[name], N // 2, axis=1)

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
        """Detection arguments of the kernel: none here (a forest may watch its trees)."""
        if self._no_detectors is None:
            self._no_detectors = new_detectors(self._n_models, rows=1)
        return detector_args(self._no_detectors, None)

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

    def _check_state(self) -> None:
        a = self._arrays
        T, N = a["node_feature"].shape
        F, M = a["x_mean"].shape[0], a["y_mean"].shape[0]
        S, P = a["slot_features"].shape[1:]
        K = a["obs_key"].shape[3]
        if T != self._n_models:
            raise ValueError(f"{self.kind} state has {T} trees, expected {self._n_models}")
        if P != min(self._subspace(F), F) or K != self._max_thresholds or S != N // 2:
            raise ValueError(f"{self.kind} state: observer shape {(S, P, K)} does not fit "
                             f"{N} nodes and {F} features")
        axes = {"M": M, "F1": F + 1, "K": K, "W2M": 1 + 2 * M}
        shapes = {n: (T, N, *(axes.get(x, x) for x in ax)) for n, (_, _, ax) in _NODE.items()}
        shapes.update({n: (T, S, P, *(axes.get(x, x) for x in ax)) for n, (_, ax) in _SLOT.items()})
        shapes.update(slot_features=(T, S, P), norm_w=(1,), x_m2=(F,), y_m2=(M,), rng=(T,),
                      n_nodes=(T,), n_slots=(T,), n_seen=(1,))
        check_shapes(a, shapes)
        check_index(a["n_nodes"], 1, N + 1, "n_nodes")
        check_index(a["n_slots"], 1, S + 1, "n_slots")
        check_index(a["node_feature"], -1, F, "node_feature")
        check_index(a["node_left"], -1, N, "node_left")
        check_index(a["node_right"], -1, N, "node_right")
        check_index(a["node_slot"], -1, S, "node_slot")
        check_index(a["node_depth"], 0, N, "node_depth")
        check_index(a["slot_features"], 0, F, "slot_features")
        check_index(a["obs_n"], 0, K + 1, "obs_n")
        ids = np.arange(N)
        split = a["node_feature"] >= 0
        # a split node has two children created after it (no cycles), a leaf an observer
        if (a["node_left"][split] <= np.broadcast_to(ids, (T, N))[split]).any() \
                or (a["node_right"][split] <= np.broadcast_to(ids, (T, N))[split]).any():
            raise ValueError(f"{self.kind} state: a split node points to a missing child")
        used = ids[None, :] < a["n_nodes"][:, None]
        within = a["n_nodes"][:, None]
        if (np.where(split, a["node_left"], 0) >= within).any() \
                or (np.where(split, a["node_right"], 0) >= within).any() or (split & ~used).any():
            raise ValueError(f"{self.kind} state: a split node points past the tree's nodes")
        if (np.where(used & ~split, a["node_slot"], 0) >= a["n_slots"][:, None]).any():
            raise ValueError(f"{self.kind} state: a leaf's observer slot is not in use")
        if (a["node_slot"][used & ~split] < 0).any():
            raise ValueError(f"{self.kind} state: a leaf has no observer")
        if not np.isfinite(a["norm_w"]).all() or a["norm_w"][0] < 0:
            raise ValueError(f"{self.kind} state: the standardiser weight is invalid")
