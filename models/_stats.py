"""Statistics shared by every learner: impurities of class-count vectors and running moments.

All functions are numba kernels over plain arrays so that tree kernels of different learners
(online random forest, forgetful trees, stumps) score splits with the same code.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def gini(counts):
    """Gini impurity ``1 - sum p_k**2`` of a class-count vector (0 for an empty vector)."""
    total = 0.0
    for k in range(counts.shape[0]):
        total += counts[k]
    if total <= 0.0:
        return 0.0
    s = 0.0
    for k in range(counts.shape[0]):
        p = counts[k] / total
        s += p * p
    return 1.0 - s


@njit
def entropy(counts):
    """Shannon entropy (natural log) of a class-count vector (0 for an empty vector)."""
    total = 0.0
    for k in range(counts.shape[0]):
        total += counts[k]
    if total <= 0.0:
        return 0.0
    h = 0.0
    for k in range(counts.shape[0]):
        c = counts[k]
        if c > 0.0:
            p = c / total
            h -= p * np.log(p)
    return h


@njit
def argmax(values):
    """Index of the largest value, the lowest index on ties (deterministic votes)."""
    best = 0
    for k in range(1, values.shape[0]):
        if values[k] > values[best]:
            best = k
    return best


@njit
def welford_update(n, mean, m2, x):
    """One step of Welford's running mean and sum of squared deviations.

    Returns the new ``(n, mean, m2)``; the sample variance is ``m2 / (n - 1)``.
    """
    n += 1.0
    delta = x - mean
    mean += delta / n
    m2 += delta * (x - mean)
    return n, mean, m2
