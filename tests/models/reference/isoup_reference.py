"""Slow, obviously-correct twins of the iSOUP statistics kernels (for tests only)."""

from __future__ import annotations

import numpy as np


def variance_reduction_split(x: np.ndarray, Y: np.ndarray, threshold: float, w: np.ndarray | None = None,
                             min_branch_fraction: float = 0.05) -> float:
    """Variance reduction of the split ``x <= threshold`` of rows ``Y`` (weights ``w``)."""
    w = np.ones(len(x)) if w is None else w
    left = x <= threshold
    n, nl = w.sum(), w[left].sum()
    nr = n - nl
    if nl < min_branch_fraction * n or nr < min_branch_fraction * n:
        return 0.0
    merits = []
    for j in range(Y.shape[1]):
        var = np.average((Y[:, j] - np.average(Y[:, j], weights=w)) ** 2, weights=w)
        if var <= 1e-12 * np.average(Y[:, j] ** 2, weights=w):
            continue
        vl = np.average((Y[left, j] - np.average(Y[left, j], weights=w[left])) ** 2, weights=w[left])
        vr = np.average((Y[~left, j] - np.average(Y[~left, j], weights=w[~left])) ** 2, weights=w[~left])
        merits.append(1.0 - (nl * vl + nr * vr) / (n * var))
    return float(np.mean(merits)) if merits else 0.0


def symbolic_scores(trees: list[list[tuple[int, int]]], n_features: int) -> np.ndarray:
    """``1/|E| sum_T sum_{(feature, depth) split nodes of T} 0.5 ** depth``."""
    out = np.zeros(n_features)
    for nodes in trees:
        for feature, depth in nodes:
            out[feature] += 0.5 ** depth
    return out / len(trees)
