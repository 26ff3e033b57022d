"""Statistics shared by every learner: impurities of class-count vectors and Student's t tail.

All functions are numba kernels over plain arrays so that tree kernels of different learners
(online random forest, forgetful trees, stumps) score splits with the same code.
"""

from __future__ import annotations

import numpy as np

from . import _fmath as fm
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


@njit(_nrt=False)
def argmax(values):
    """Index of the largest value, the lowest index on ties (deterministic votes)."""
    best = 0
    for k in range(1, values.shape[0]):
        if values[k] > values[best]:
            best = k
    return best


# ---------------------------------------------------------------------------- Student t tail
# The regularized incomplete beta function by its continued fraction (modified Lentz method;
# Press et al., Numerical Recipes, 3rd ed., Sec. 6.4), and the Student-t upper tail through
# P(T > |t|) = I_{df/(df+t^2)}(df/2, 1/2) / 2.


@njit(inline="always")
def normalise(values):
    """``values / values.sum()`` in place, the sum taken in order, unless it is not positive
    (votes and importances that are all zero stay zero)."""
    total = 0.0
    for j in range(values.shape[0]):
        total += values[j]
    if total > 0.0:
        for j in range(values.shape[0]):
            values[j] /= total


@njit(inline="always")
def _lentz_step(aa, c, d, tiny):
    """One step of the modified Lentz method with the coefficient ``aa``.

    Parameters
    ----------
    aa : float
        The continued fraction's next numerator (its denominator is 1).
    c, d : float
        Lentz's ratios before the step.
    tiny : float
        What a ratio that comes out near zero is replaced with (it would divide by zero).

    Returns
    -------
    c, d : float
        The ratios after the step; the fraction's value is multiplied by ``d * c``.
    """
    d = 1.0 + aa * d
    if abs(d) < tiny:
        d = tiny
    c = 1.0 + aa / c
    if abs(c) < tiny:
        c = tiny
    d = 1.0 / d
    return c, d


@njit
def _beta_continued_fraction(a, b, x):
    """Continued fraction of ``I_x(a, b)`` (converges fast for ``x < (a+1)/(a+b+2)``)."""
    tiny = 1e-300
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < tiny:
        d = tiny
    d = 1.0 / d
    h = d
    for m in range(1, 100000):
        m2 = 2.0 * m
        # each m takes two steps: the even coefficient, then the odd one
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        c, d = _lentz_step(aa, c, d, tiny)
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        c, d = _lentz_step(aa, c, d, tiny)
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


@njit
def betainc_regularized(a, b, x):
    """Regularized incomplete beta function ``I_x(a, b)`` for ``a, b > 0``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    # the core's lgamma, log and exp: the C library's depend on the CPU (models.core._fmath)
    log_front = (fm.lgamma(a + b) - fm.lgamma(a) - fm.lgamma(b) + a * fm.log(x)
                 + b * fm.log(1.0 - x))
    front = fm.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


@njit
def student_t_sf(t, df):
    """Upper tail ``P(T > t)`` of Student's t distribution with ``df > 0`` degrees of freedom."""
    if np.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc_regularized(0.5 * df, 0.5, df / (df + t * t))
    return tail if t > 0 else 1.0 - tail
