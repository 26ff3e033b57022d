"""Python side shared by the naive Bayes learner and the Hoeffding tree.

Both keep Gaussian estimators per (leaf, feature, class) (:mod:`models.hoeffding._hoeffding`), take
instance weights, map labels to class indices, grow the class axis when a new label
appears, and accept a feature mask: columns outside it are *missing* (the ABFS filter of
the reference code, where unselected features are absent and learners skip them).
"""

from __future__ import annotations

import numpy as np

from ..core._trees import grow_axis
from ..core.base import ClassIndex, ProbabilityClassifier, check_index, check_X
from . import _hoeffding as hs

FLAVOURS = ("river", "moa")


def check_weights(sample_weight, n: int) -> np.ndarray:
    """Instance weights as a float64 vector of ``n`` finite values ``>= 0`` (ones for None)."""
    if sample_weight is None:
        return np.ones(n)
    try:
        w = np.ascontiguousarray(sample_weight, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample_weight must be numeric: {exc}") from None
    if w.shape[0] != n:
        raise ValueError(f"sample_weight has {w.shape[0]} values but X has {n} rows")
    if not np.isfinite(w).all() or (w.size and w.min() < 0.0):
        raise ValueError("sample_weight must hold finite values >= 0")
    return w


def check_same_shape(arrays: dict, names, shape: tuple, kind: str) -> None:
    """``ValueError`` unless every array of ``names`` has ``shape``."""
    for name in names:
        if arrays[name].shape != shape:
            raise ValueError(f"{kind} state array {name!r} has shape {arrays[name].shape}, "
                             f"expected {shape}")


class GaussianLearner(ProbabilityClassifier):
    """Labels, weights, masks, class growth and the state round trip (not used directly).

    Subclasses implement ``_allocate(n_features, n_classes)``, ``_learn(X, codes, w)`` and
    ``_proba(X, out)``, and list their class-axis arrays in ``_class_axis``
    (name -> (axis, fill)).
    """

    _class_axis: dict = {}

    def _init_common(self, classes=None) -> None:
        self._classes = ClassIndex(classes or ())
        self._arrays: dict[str, np.ndarray] = {}

    @property
    def n_features(self) -> int | None:
        """Number of feature columns, ``None`` before the first batch."""
        return int(self._arrays["mask"].shape[0]) if self._arrays else None

    # ------------------------------------------------------------------ feature mask

    def set_feature_mask(self, columns=None) -> None:
        """Columns the learner sees from now on; the others are missing (``None``: all).

        A missing feature is not learned, is left out of naive Bayes, and a row reaching a
        split on it stops at that split (see :mod:`models.hoeffding._ht_kernels`).
        """
        if not self._arrays:
            self._pending_mask = None if columns is None else list(columns)
            return
        mask = self._arrays["mask"]
        if columns is None:
            mask[:] = 1
            return
        cols = np.asarray(list(columns), dtype=np.int64)
        if cols.size and (cols.min() < 0 or cols.max() >= mask.shape[0]):
            raise ValueError(f"feature mask columns must be in [0, {mask.shape[0]})")
        mask[:] = 0
        mask[cols] = 1

    # ------------------------------------------------------------------ learning

    def learn_many(self, X, y, sample_weight=None) -> None:
        """Learn a batch of rows, in order.

        Parameters
        ----------
        X, y
            Feature rows (finite numbers) and one label per row, as every learner takes them
            (:mod:`models.core.base`); new labels may appear at any time.
        sample_weight : array-like of shape (n,), optional
            Instance weights (``>= 0``; a row of weight 0 is counted but not learned).
        """
        X, codes, w = self._prepared(X, y, sample_weight)
        if X.shape[0]:
            self._learn(X, codes, w)

    def predict_proba_learn_many(self, X, y, sample_weight=None) -> np.ndarray:
        """Test-then-train in one kernel call: each row's class probabilities from the model
        as it stood just before that row was learned, then the row learned (Domingos &
        Hulten 2000's prequential setting, row by row).

        The same as ``predict_proba_many(X[i:i+1])`` then ``learn_many`` of that row for
        every row in turn, without a Python call per row. Columns follow :attr:`classes`
        after the call (a row predicted before a class appeared has probability 0 for it; a
        row predicted before anything was learned has all zeros).
        """
        known = len(self._classes)  # a row is predicted over the classes known by then
        X, codes, w = self._prepared(X, y, sample_weight)
        if X.shape[0] == 0:
            return np.zeros((0, len(self._classes)))
        out = np.zeros((X.shape[0], self._class_capacity()))
        self._learn(X, codes, w, out, known)
        return out[:, :len(self._classes)]

    def _prepared(self, X, y, sample_weight):
        """``(X, class indices, weights)`` checked, the state allocated and grown for them."""
        X = check_X(X, self.n_features)
        if y is None:
            raise ValueError(f"{type(self).__name__} needs labels: y must not be None")
        codes = self._classes.encode(y, n_rows=X.shape[0])
        w = check_weights(sample_weight, X.shape[0])
        if X.shape[0] == 0:
            return X, codes, w
        if not self._arrays:
            self._allocate(X.shape[1], len(self._classes))
            pending = getattr(self, "_pending_mask", None)
            if pending is not None:
                self.set_feature_mask(pending)
        self._grow_classes(len(self._classes))
        return X, codes, w

    def _class_capacity(self) -> int:
        """Length of the class axis of the state (at least the classes known)."""
        name, (axis, _) = next(iter(self._class_axis.items()))
        return self._arrays[name].shape[axis]

    def _grow_classes(self, n_classes: int) -> None:
        a = self._arrays
        for name, (axis, fill) in self._class_axis.items():
            if a[name].shape[axis] < n_classes:
                a[name] = grow_axis(a[name], n_classes, axis=axis, fill=fill)

    # ------------------------------------------------------------------ prediction

    def predict_proba_many(self, X) -> np.ndarray:
        """Class probabilities ``(n, n_classes)``; ``(n, 0)`` before anything was learned."""
        X = check_X(X, self.n_features)
        if not self._arrays or self.n_seen == 0:
            return np.zeros((X.shape[0], 0))
        out = np.zeros((X.shape[0], len(self._classes)))
        self._proba(X, out)
        return out

    # ------------------------------------------------------------------ state

    def _extra_state(self) -> dict:
        return {"classes": list(self._classes.classes),
                "pending_mask": getattr(self, "_pending_mask", None)}

    def _load_extra_state(self, extra: dict) -> None:
        self._classes = ClassIndex(extra.get("classes", ()))
        self._pending_mask = extra.get("pending_mask")

    def _check_gaussians(self, n: int) -> None:
        """Estimator arrays are ``(n, F, K)`` with ``K`` at least the known classes."""
        a = self._arrays
        F = a["mask"].shape[0]
        K = a["g_w"].shape[2]
        if K < max(len(self._classes), 1):
            raise ValueError(f"{self.kind} state has {K} class columns but "
                             f"{len(self._classes)} classes")
        check_same_shape(a, hs.GAUSSIAN_FILL, (n, F, K), self.kind)
        check_index(a["mask"], 0, 2, "mask")
