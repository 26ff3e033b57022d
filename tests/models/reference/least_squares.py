"""A test-only multi-target regressor: ridge least squares over every row learned so far.

It follows the learner contract of :mod:`models.core.base` for regressors (``learn_many(X, Y)``
with ``Y`` of shape ``(n, n_targets)``, ``predict_many`` returning one, ``(n, 0)`` before
learning) so the contract suite's regression cases and the worker's regression task run
before, and beside, the real multi-target families.
"""

from __future__ import annotations

import numpy as np

from models.core.base import Learner, check_X
from models.registry import PREDICTOR, REGRESSION, LearnerSpec


class LeastSquares(Learner):
    """Ridge regression on the accumulated normal equations (with an intercept)."""

    kind = "test_least_squares"
    state_arrays = {"xtx": ("<f8", 2), "xty": ("<f8", 2), "n_seen": ("<i8", 1)}

    def __init__(self, ridge: float = 1e-3, seed: int = 1):
        if not float(ridge) > 0:
            raise ValueError("ridge must be > 0")
        self.params = {"ridge": float(ridge), "seed": int(seed)}
        self._arrays: dict[str, np.ndarray] = {"n_seen": np.zeros(1, np.int64)}

    @property
    def n_features(self):
        return self._arrays["xtx"].shape[0] - 1 if "xtx" in self._arrays else None

    def learn_many(self, X, Y) -> None:
        X = check_X(X, self.n_features)
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be an (n, n_targets) matrix of {X.shape[0]} target rows")
        if not np.isfinite(Y).all():
            raise ValueError("y contains NaN or infinity")
        if "xtx" not in self._arrays:
            d = X.shape[1] + 1
            self._arrays.update(xtx=np.zeros((d, d)), xty=np.zeros((d, Y.shape[1])))
        if Y.shape[1] != self._arrays["xty"].shape[1]:
            raise ValueError(f"expected {self._arrays['xty'].shape[1]} targets per row, "
                             f"got {Y.shape[1]}")
        Z = np.column_stack([X, np.ones(X.shape[0])])
        self._arrays["xtx"] += Z.T @ Z
        self._arrays["xty"] += Z.T @ Y
        self._arrays["n_seen"][0] += X.shape[0]

    def predict_many(self, X) -> np.ndarray:
        X = check_X(X, self.n_features)
        if "xtx" not in self._arrays:
            return np.zeros((X.shape[0], 0))
        a = self._arrays
        W = np.linalg.solve(a["xtx"] + self.params["ridge"] * np.eye(a["xtx"].shape[0]),
                            a["xty"])
        return np.column_stack([X, np.ones(X.shape[0])]) @ W

    def importances(self) -> dict:
        return {}


SPEC = LearnerSpec(name="test_least_squares", cls=LeastSquares,
                   tasks=frozenset({REGRESSION}), roles=frozenset({PREDICTOR}),
                   summary="test-only ridge least squares")
