"""Forgetful decision tree (Yuan, Sun & Shasha, Algorithms 16(6):278, 2023).

The kernels are in :mod:`models.forgetful._forgetful_kernels` (incremental update),
:mod:`models.forgetful._forgetful_split` (split search) and :mod:`models.forgetful._retain` (adaptive retain size);
this module holds the Python side shared with the forgetful random forest (validation, label
mapping, allocation and growth, prediction, the state round trip) and the
:class:`ForgetfulDecisionTree` class.
"""

from __future__ import annotations

import numpy as np

from ..core._rng import seed_states
from ..core._trees import grow_axis
from ..core.base import Classifier, ClassIndex, LearnerEvent, check_index, check_shapes, check_X
from . import _forgetful_kernels as fk

_SALT_TREES = 0x4F46  # "FO"
_MIN_ROWS = 64


class ForgetfulLearner(Classifier):
    """Shared machinery of the forgetful tree and forest (not used directly).

    State arrays (leading axis: trees; ``R`` row capacity, ``N = 4 R`` node capacity):

    * ``rows_x (T, F, R)``, ``rows_y (T, R)``: retained rows, column-major, arrival order;
    * ``sorted_rows (T, F, R)``, ``sorted_valid (T, F)``: rows ordered by each sparse feature;
    * ``features (T, F)``: each tree's feature subset, in scan order;
    * ``node_feature``, ``node_threshold``, ``node_left``, ``node_right``, ``node_rows``,
      ``node_class``, ``node_free`` ``(T, N)`` and ``node_counts (T, N, K)``: the trees;
    * ``tree_int (T, 12)`` (see :mod:`models.forgetful._forgetful_kernels` for the columns) and
      ``tree_irate (T,)``: the adaptation state of each tree;
    * ``dense (F,)``, ``dense_values (F, D)``, ``dense_count (F,)``: count-table features and
      their value tables; ``rng (T,)``; ``n_seen (1,)``.

    A node store of ``4 R`` ids always suffices: while a tree is updated, the nodes alive are
    those of the updated part (at most one leaf per retained row) and the not yet visited old
    subtrees (at most one leaf per old row), so fewer than ``2 (n_old + n_new) <= 4 R``.
    """

    _n_trees: int = 1

    def __init__(self, increase_rate: float = 0.3, increase_rate_min: float = 1e-3,
                 increase_rate_max: float = 1e3, dense_max_values: int = 16, seed: int = 1):
        if not float(increase_rate) > 0:
            raise ValueError("increase_rate must be > 0")
        if not 0 < float(increase_rate_min) <= float(increase_rate) <= float(increase_rate_max):
            raise ValueError("need 0 < increase_rate_min <= increase_rate <= increase_rate_max")
        if not 0 <= int(dense_max_values) <= 256:
            raise ValueError("dense_max_values must be in [0, 256]")
        self.params = {
            "increase_rate": float(increase_rate), "increase_rate_min": float(increase_rate_min),
            "increase_rate_max": float(increase_rate_max),
            "dense_max_values": int(dense_max_values), "seed": int(seed),
        }
        self._arrays: dict[str, np.ndarray] = {}
        self._classes = ClassIndex()
        self._xlogx = np.zeros(1)

    # ------------------------------------------------------------------ properties

    @property
    def n_features(self) -> int | None:
        """Number of feature columns, ``None`` before the first batch."""
        return int(self._arrays["rows_x"].shape[1]) if self._arrays else None

    @property
    def retained_rows(self) -> np.ndarray:
        """Rows each tree currently retains (shape ``(n_trees,)``)."""
        if not self._arrays:
            return np.zeros(self._n_trees, np.int64)
        return self._arrays["tree_int"][:, fk.N_ROWS].copy()

    @property
    def n_collapsed(self) -> int:
        """Trees that forgot all their old rows at the last batch (accuracy at chance)."""
        if not self._arrays:
            return 0
        return int(self._arrays["tree_int"][:, fk.COLLAPSED].sum())

    def events(self) -> list[LearnerEvent]:
        """A ``collapse`` event when trees forgot all their rows at the last batch.

        A batch at or below chance accuracy makes a tree forget every old row (Yuan et al.
        2023, Sec. 3.2, the abrupt-drift case of the adaptive retain size). In a forest single
        trees collapse now and then; the event is a ``drift`` when at least half of the trees
        collapsed at that batch (a single tree: always), a ``warning`` when fewer did.
        """
        collapsed = self.n_collapsed
        if not collapsed:
            return []
        kept = self.retained_rows
        level = "drift" if 2 * collapsed >= self._n_trees else "warning"
        detail = (f"{collapsed} of {self._n_trees} forgetful tree(s) discarded their retained "
                  "data (batch accuracy at or below chance); rows now retained: "
                  f"{int(np.max(kept))} at most")
        return [LearnerEvent("collapse", level, -1, -1, detail)]

    # ------------------------------------------------------------------ restore checks

    def _check_state(self) -> None:
        """Shapes agree with each other and every index stays inside its array."""
        a, T = self._arrays, self._n_trees
        F, R = a["rows_x"].shape[1], a["rows_x"].shape[2]
        N, K = a["node_counts"].shape[1], a["node_counts"].shape[2]
        D = self.params["dense_max_values"]
        check_shapes(a, {
            "rows_x": (T, F, R), "rows_y": (T, R), "sorted_rows": (T, F, R), "sorted_valid": (T, F),
            "features": (T, F), "node_feature": (T, N), "node_threshold": (T, N), "node_left": (T, N),
            "node_right": (T, N), "node_rows": (T, N), "node_counts": (T, N, K), "node_class": (T, N),
            "node_free": (T, N), "tree_int": (T, fk.N_TREE_INT), "tree_irate": (T,), "dense": (F,),
            "dense_values": (F, D), "dense_count": (F,), "rng": (T,), "n_seen": (1,),
        })
        if len(self._classes) > K:
            raise ValueError(f"{len(self._classes)} class labels but class counts for {K}")
        for name, lo, hi in (("rows_y", 0, K), ("sorted_rows", 0, R), ("features", 0, F),
                             ("node_feature", -1, F), ("node_left", -1, N), ("node_right", -1, N),
                             ("node_class", 0, K), ("node_free", 0, N), ("dense", 0, 2),
                             ("dense_count", 0, D + 1), ("node_rows", -1, R + 1)):
            check_index(a[name], lo, hi, name)
        ti = a["tree_int"]
        for col, lo, hi, what in ((fk.N_ROWS, 0, R + 1, "retained rows"), (fk.N_FEAT, 0, F + 1, "subset size"),
                                  (fk.N_USED, 1, N + 1, "nodes used"), (fk.N_FREE, 0, N + 1, "free nodes"),
                                  (fk.MAX_HEIGHT, 0, 64, "max height")):
            check_index(ti[:, col], lo, hi, what)

    # ------------------------------------------------------------------ allocation

    def _allocate(self, n_features: int, n_classes: int, rows: int) -> None:
        p = self.params
        T, F, K, D = self._n_trees, n_features, max(n_classes, 1), p["dense_max_values"]
        R = _MIN_ROWS
        while R < rows:
            R *= 2
        N = 4 * R
        a = {
            "rows_x": np.zeros((T, F, R)),
            "rows_y": np.zeros((T, R), np.int32),
            "sorted_rows": np.zeros((T, F, R), np.int32),
            "sorted_valid": np.zeros((T, F), np.uint8),
            "features": np.zeros((T, F), np.int32),
            "node_feature": np.full((T, N), -1, np.int32),
            "node_threshold": np.zeros((T, N)),
            "node_left": np.full((T, N), -1, np.int32),
            "node_right": np.full((T, N), -1, np.int32),
            "node_rows": np.full((T, N), -1, np.int32),
            "node_counts": np.zeros((T, N, K), np.int32),
            "node_class": np.zeros((T, N), np.int32),
            "node_free": np.zeros((T, N), np.int32),
            "tree_int": np.zeros((T, fk.N_TREE_INT), np.int64),
            "tree_irate": np.zeros(T),
            "dense": np.full(F, 1 if D > 0 else 0, np.uint8),
            "dense_values": np.zeros((F, D)),
            "dense_count": np.zeros(F, np.int64),
            "rng": seed_states(p["seed"], T, _SALT_TREES),
            "n_seen": np.zeros(1, np.int64),
        }
        for t in range(T):
            fk.init_tree_state(a["tree_int"][t], a["tree_irate"][t:t + 1], p["increase_rate"])
        self._arrays = a
        self._init_features()

    def _init_features(self) -> None:
        """Every feature, in column order (the forest draws subsets instead)."""
        a = self._arrays
        F = a["features"].shape[1]
        a["features"][:] = np.arange(F, dtype=np.int32)
        a["tree_int"][:, fk.N_FEAT] = F

    def _ensure_capacity(self, n_classes: int, batch_rows: int) -> None:
        a = self._arrays
        if n_classes > a["node_counts"].shape[2]:
            a["node_counts"] = grow_axis(a["node_counts"], n_classes, axis=2, fill=0)
        need = int(a["tree_int"][:, fk.N_ROWS].max()) + batch_rows
        R = a["rows_x"].shape[2]
        if need > R:
            while R < need:
                R *= 2
            a["rows_x"] = grow_axis(a["rows_x"], R, axis=2)
            a["rows_y"] = grow_axis(a["rows_y"], R, axis=1)
            a["sorted_rows"] = grow_axis(a["sorted_rows"], R, axis=2)
            N = 4 * R
            for name, fill in (("node_feature", -1), ("node_threshold", 0), ("node_left", -1),
                               ("node_right", -1), ("node_rows", -1), ("node_counts", 0),
                               ("node_class", 0), ("node_free", 0)):
                a[name] = grow_axis(a[name], N, axis=1, fill=fill)
        R = a["rows_x"].shape[2]
        if self._xlogx.shape[0] < R + 1:
            self._xlogx = fk.xlogx_table(R)

    def learn_many(self, X, y) -> None:
        """Learn one mini-batch (test on it first; see the class docstring).

        Parameters
        ----------
        X, y
            A mini-batch of feature rows (finite numbers) and one label per row, as every
            learner takes them (:mod:`models.core.base`); new labels may appear at any time.
        """
        prepared = self._prepare(X, y)
        if prepared is not None:
            self._learn_batch(*prepared)

    def _learn_batch(self, X: np.ndarray, codes: np.ndarray) -> None:
        """Run the learner's kernel on a checked batch (class indices ``codes``)."""
        raise NotImplementedError

    def predict_many(self, X) -> list:
        """Predicted labels (see :meth:`_predict_codes`); ``None`` for every row before the
        first batch."""
        X = check_X(X, self.n_features)
        if not self._arrays or self.n_seen == 0:
            return [None] * X.shape[0]
        out = np.empty(X.shape[0], np.int64)
        self._predict_codes(X, out)
        return self._classes.decode(out)

    def _predict_codes(self, X: np.ndarray, out: np.ndarray) -> None:
        """Write the predicted class index of each row of a checked ``X`` into ``out``."""
        raise NotImplementedError

    def _prepare(self, X, y) -> tuple[np.ndarray, np.ndarray] | None:
        X = check_X(X, self.n_features)
        if y is None:
            raise ValueError(f"{type(self).__name__} needs labels: y must not be None")
        codes = self._encode(y, X.shape[0])
        if X.shape[0] == 0:
            return None
        rows = X.shape[0] * self._batch_copies()
        if not self._arrays:
            self._allocate(X.shape[1], len(self._classes), rows)
        self._ensure_capacity(len(self._classes), rows)
        return X, codes

    def _encode(self, y, n_rows: int) -> np.ndarray:
        """Class indices of ``y``; known labels take a dictionary fast path."""
        index = self._classes._index
        try:
            if len(y) == n_rows:
                return np.fromiter(map(index.__getitem__, y), np.int64, n_rows)
        except (KeyError, TypeError):
            pass
        return self._classes.encode(y, n_rows=n_rows)

    def _batch_copies(self) -> int:
        """Most copies of a batch one tree may learn at once."""
        return 1

    # ------------------------------------------------------------------ prediction

    def predict_proba_many(self, X) -> np.ndarray:
        """Class distributions of the leaves (mean over trees), ``(n, 0)`` before learning."""
        X = check_X(X, self.n_features)
        if not self._arrays or self.n_seen == 0:
            return np.zeros((X.shape[0], 0))
        a = self._arrays
        out = np.zeros((X.shape[0], a["node_counts"].shape[2]))
        fk.predict_proba_trees(X, a["node_feature"], a["node_threshold"], a["node_left"],
                               a["node_right"], a["node_counts"], a["tree_int"], out)
        return out

    def importances(self) -> dict:
        """Forgetful learners rank no features: an empty dict."""
        return {}

    # ------------------------------------------------------------------ inspection

    def _nested(self, t: int = 0):
        """Tree ``t`` as nested tuples ``(feature, threshold, left, right)`` / leaf count tuples.

        Used by the tests to compare trees node by node.
        """
        a = self._arrays
        nf, thr = a["node_feature"][t], a["node_threshold"][t]
        left, right, counts = a["node_left"][t], a["node_right"][t], a["node_counts"][t]

        def walk(i):
            if nf[i] < 0:
                return tuple(int(c) for c in counts[i])
            return (int(nf[i]), float(thr[i]), walk(left[i]), walk(right[i]))

        return walk(0)

    # ------------------------------------------------------------------ state

    def _extra_state(self) -> dict:
        return {"classes": list(self._classes.classes)}

    def _load_extra_state(self, extra: dict) -> None:
        self._classes = ClassIndex(extra.get("classes", ()))


class ForgetfulDecisionTree(ForgetfulLearner):
    """Forgetful decision tree for mini-batch streams (Yuan, Sun & Shasha 2023).

    ``learn_many(X, y)`` learns one mini-batch. The tree is first tested on the batch; the
    accuracy decides how many rows it keeps (the adaptive retain size ``rSize``, its increase
    rate ``iRate`` and the maximum height ``max(1, floor(log2 rSize))``, paper Sec. 3.2 and
    Appendix B, see :mod:`models.forgetful._retain`). It then forgets its oldest rows beyond ``rSize``,
    merges the batch into each node's per-feature sorted values (or value x class count
    tables), re-decides each visited node's split by the minimum weighted child entropy and
    keeps the subtree of an unchanged split, rebuilding changed ones; leaves and nodes at the
    maximum height are rebuilt (paper Sec. 3.1, Appendix A; :mod:`models.forgetful._forgetful_kernels`).
    A leaf predicts the majority class of its rows; :meth:`predict_proba_many` returns their
    class distribution.

    Parameters
    ----------
    increase_rate : float, default 0.3
        Initial iRate (the paper's and reference code's default).
    increase_rate_min, increase_rate_max : float, default 1e-3 and 1e3
        Bounds of iRate, applied after each division. The reference code divides iRate by the
        accuracy ratio at every batch without bounds; on Electricity it sits below 0.01 most
        of the time and peaks above 80. Unbounded it can underflow to 0 (and never recover) or
        overflow, which makes ``round(iRate * b)`` undefined. Below ``1 / (2 b)`` iRate adds at
        most half a row before rounding, and above ``rSize / b + 1`` the cap ``rSize + b``
        binds whatever its value, so wide bounds are a numerical guard rather than a change of
        rule: with ``[1e-3, 1e3]`` the tree and the 20-tree forest give the same accuracy as
        with ``[1e-300, 1e300]`` on all five reference streams, while ``[0.01, 10]`` moves
        Electricity, Power supply and MIXED gradual by up to 0.2 points.
    dense_max_values : int, default 16
        A feature is learned through count tables while it has shown at most this many
        distinct values (binary and small categorical features: Phishing, the MIXED booleans,
        Electricity's day of week); past that it switches to sorted values for good. Both give
        the same splits; the tables only save time. 0 disables them.
    seed : int, default 1
        Master seed (a standalone tree uses no random numbers; kept for a uniform surface).

    Notes
    -----
    * Numeric and categorical features: categories must be coded as numbers; splits are
      ``x <= c`` on the codes, as in the reference code (its drivers pass one-hot or ordinal
      codes).
    * The random-guess accuracy is ``1 / K`` with ``K`` the number of classes seen so far
      (at least 2); the reference drivers declare ``K`` up front.
    * The oldest rows are those that arrived first (the reference code drops the tail of its
      newest-first list, i.e. the last rows of the oldest batch).
    * :attr:`collapsed` reports a batch at or below chance in normal mode: the tree then
      forgets every old row (an abrupt drift signal).
    """

    kind = "forgetful_tree"
    state_arrays = {
        "rows_x": ("<f8", 3), "rows_y": ("<i4", 2), "sorted_rows": ("<i4", 3), "sorted_valid": ("|u1", 2),
        "features": ("<i4", 2), "node_feature": ("<i4", 2), "node_threshold": ("<f8", 2),
        "node_left": ("<i4", 2), "node_right": ("<i4", 2), "node_rows": ("<i4", 2),
        "node_counts": ("<i4", 3), "node_class": ("<i4", 2), "node_free": ("<i4", 2),
        "tree_int": ("<i8", 2), "tree_irate": ("<f8", 1), "dense": ("|u1", 1), "dense_values": ("<f8", 2),
        "dense_count": ("<i8", 1), "rng": ("<u8", 1), "n_seen": ("<i8", 1),
    }

    @property
    def collapsed(self) -> bool:
        """True when the last batch was at or below chance and all old rows were forgotten."""
        return self.n_collapsed > 0

    def _learn_batch(self, X, codes) -> None:
        a, p = self._arrays, self.params
        fk.learn_single_tree(
            X, codes, len(self._classes), p["increase_rate"], p["increase_rate_min"],
            p["increase_rate_max"], a["rows_x"], a["rows_y"], a["sorted_rows"],
            a["sorted_valid"], a["features"], a["node_feature"], a["node_threshold"],
            a["node_left"], a["node_right"], a["node_rows"], a["node_counts"], a["node_class"],
            a["node_free"], a["tree_int"], a["tree_irate"], a["rng"], a["dense"],
            a["dense_values"], a["dense_count"], self._xlogx, a["n_seen"])

    def _predict_codes(self, X, out) -> None:
        """Majority class of each row's leaf (lowest class index on ties)."""
        a = self._arrays
        fk.predict_classes(X, a["node_feature"][0], a["node_threshold"][0], a["node_left"][0],
                           a["node_right"][0], a["node_class"][0], out)
