"""A stream whose relevant features switch at known rows (for the ABFS tests and benchmark).

``n_features`` features are drawn uniformly from ``[0, 1]``. Concept ``c`` (rows
``switch_every * c`` to ``switch_every * (c + 1) - 1``) makes the pair of features
``relevant(c) = (2c mod F, 2c + 1 mod F)`` decide the class: ``y = 1`` when their sum
exceeds 1, with a fraction ``noise`` of the labels flipped. Every other feature is
irrelevant, so at row ``switch_every * c`` the previous pair stops being relevant and a new
pair becomes so (an abrupt feature drift in the sense of Barddal et al. 2017).
"""

from __future__ import annotations

import numpy as np


def relevant(concept: int, n_features: int) -> tuple[int, int]:
    """The pair of features that decides the class under ``concept``."""
    return (2 * concept) % n_features, (2 * concept + 1) % n_features


def feature_drift_stream(n_rows: int, n_features: int = 10, switch_every: int = 5000,
                         noise: float = 0.05, seed: int = 1):
    """Rows ``X (n_rows, n_features)``, labels ``y`` (0/1) and the concept of each row."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_rows, n_features))
    concept = np.arange(n_rows) // switch_every
    a = (2 * concept) % n_features
    b = (2 * concept + 1) % n_features
    rows = np.arange(n_rows)
    y = (X[rows, a] + X[rows, b] > 1.0).astype(np.int64)
    flip = rng.random(n_rows) < noise
    y[flip] = 1 - y[flip]
    return X, y, concept
