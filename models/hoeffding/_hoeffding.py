"""Hoeffding statistics: per leaf, per feature, per class Gaussian estimators and split merits.

Shared by the naive Bayes learner, the Hoeffding tree and the ABFS decision stumps. The
statistics and the split merit are kept apart on purpose: :func:`gaussian_binary_split`
turns the estimators of one feature into the class distributions below and above a
threshold, and a criterion (:func:`info_gain`) scores those distributions. The regression
criterion :func:`variance_reduction` sits beside ``info_gain`` and scores the multi-target
sums of the E-BST observers (:mod:`models.isoup._ebst`).

State layout (``L`` leaves or nodes, ``F`` features, ``K`` classes)::

    g_w    (L, F, K) float64  weight of the values seen (weighted count)
    g_mean (L, F, K) float64  weighted mean
    g_m2   (L, F, K) float64  weighted sum of squared deviations (Welford with weights)
    g_min  (L, F, K) float64  smallest value seen (+inf when none)
    g_max  (L, F, K) float64  largest value seen (-inf when none)

The weighted update is river's ``stats.Var`` (``n += w``, ``mean += w/n (x - mean)``,
``m2 += w (x - mean_old)(x - mean_new)``), which is also MOA's ``GaussianEstimator`` up to
the rounding of the first value; the variance is ``m2 / (n - 1)`` when ``n > 1`` (0
otherwise), as in both.

References
----------
Domingos, P. and Hulten, G. (2000). Mining high-speed data streams. KDD 2000, 71-80.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import _fmath as fm
from ..core._jit import njit

# constants as literals, not computed with the C library's log at import (its last bit
# depends on the CPU; see models.core._fmath)
_LOG_SQRT_2PI = 0.9189385332046727  # log(2 pi) / 2, correctly rounded
_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)

#: how a class whose estimator has no spread scores a value in naive Bayes
DEGENERATE_SKIP = 0  # river: the feature is left out of that class's product (log pdf -inf)
DEGENERATE_POINT = 1  # MOA: density 1 at the mean, 0 elsewhere (a point mass)


def allocate_gaussians(n: int, n_features: int, n_classes: int) -> dict[str, np.ndarray]:
    """Fresh estimator arrays for ``n`` leaves (see the module doc)."""
    shape = (n, n_features, max(n_classes, 1))
    return {
        "g_w": np.zeros(shape), "g_mean": np.zeros(shape), "g_m2": np.zeros(shape),
        "g_min": np.full(shape, np.inf), "g_max": np.full(shape, -np.inf),
    }


#: fill value of each estimator array (used when arrays grow)
GAUSSIAN_FILL = {"g_w": 0.0, "g_mean": 0.0, "g_m2": 0.0, "g_min": np.inf, "g_max": -np.inf}


@njit(inline="always")
def gaussian_update(g_w, g_mean, g_m2, g_min, g_max, leaf, f, k, x, w):
    """Add value ``x`` with weight ``w`` to the estimator of (leaf, feature, class)."""
    n = g_w[leaf, f, k] + w
    old = g_mean[leaf, f, k]
    new = old + (w / n) * (x - old)
    g_w[leaf, f, k] = n
    g_mean[leaf, f, k] = new
    g_m2[leaf, f, k] += w * (x - old) * (x - new)
    if x < g_min[leaf, f, k]:
        g_min[leaf, f, k] = x
    if x > g_max[leaf, f, k]:
        g_max[leaf, f, k] = x


@njit(inline="always")
def gaussian_variance(n, m2):
    """Sample variance ``m2 / (n - 1)`` (0 while ``n <= 1``)."""
    if n > 1.0:
        return m2 / (n - 1.0)
    return 0.0


@njit(inline="always")
def gaussian_cdf(x, mean, variance):
    """``P(X <= x)`` for ``X ~ N(mean, variance)``; 0 when the variance is 0 (river)."""
    if variance <= 0.0:
        return 0.0
    # river's order of operations (z first, then z / sqrt 2), so split attempts land on the
    # same rows; sqrt and the core's erf give the same bits on every CPU, where river's
    # ``** 0.5`` and ``math.erf`` take the C library's (models.core._fmath)
    z = (x - mean) / math.sqrt(variance)
    return 0.5 * (1.0 + fm.erf(z / _SQRT2))


@njit(inline="always")
def gaussian_log_pdf(x, n, mean, variance, degenerate):
    """Log density of ``x`` under one estimator; ``-inf`` for no density.

    With no spread (``variance == 0``) river returns ``-inf`` (and naive Bayes skips the
    feature); MOA's estimator is a point mass: density 1 at the mean, 0 elsewhere, and 0
    for an estimator that saw nothing.
    """
    if variance > 0.0:
        d = x - mean
        return d * d / (-2.0 * variance) - _LOG_SQRT_2PI - 0.5 * fm.log(variance)
    if degenerate == DEGENERATE_POINT and n > 0.0 and x == mean:
        return 0.0
    return -math.inf


# ------------------------------------------------------------------------------ criteria


@njit(_nrt=False)
def entropy2(counts):
    """Entropy in bits of a class-weight vector, written as river/MOA compute it:
    ``(-sum c log2 c + S log2 S) / S`` (0 for an empty vector)."""
    h = 0.0
    s = 0.0
    for k in range(counts.shape[0]):
        c = counts[k]
        if c > 0.0:
            h -= c * fm.log2(c)
            s += c
    if s <= 0.0:
        return 0.0
    return (h + s * fm.log2(s)) / s


@njit(_nrt=False)
def info_gain(pre, left, right, min_branch_fraction):
    """Information gain of splitting ``pre`` into ``left`` and ``right`` (bits).

    ``-inf`` unless both branches hold more than ``min_branch_fraction`` of the weight
    (river's and MOA's ``InfoGainSplitCriterion``, fraction 0.01).
    """
    return info_gain_from(entropy2(pre), left, right, min_branch_fraction)


@njit(_nrt=False)
def info_gain_from(h_pre, left, right, min_branch_fraction):
    """:func:`info_gain` with the entropy of the class weights before the split given
    (``h_pre = entropy2(pre)``, the same for every threshold a leaf scores)."""
    wl = 0.0
    wr = 0.0
    for k in range(left.shape[0]):
        wl += left[k]
        wr += right[k]
    total = wl + wr
    if total <= 0.0 or wl / total <= min_branch_fraction or wr / total <= min_branch_fraction:
        return -math.inf
    post = (wl * entropy2(left) + wr * entropy2(right)) / total
    return h_pre - post


@njit(inline="always")
def info_gain_range(counts, by_last_index):
    """Range of the information gain, ``log2(max(m, 2))``.

    river: ``m`` = classes present in ``counts``; MOA (``by_last_index``): the length of
    its class-weight vector, i.e. the last class index with weight, plus one.
    """
    n = 0
    for k in range(counts.shape[0]):
        if counts[k] > 0.0:
            n = k + 1 if by_last_index else n + 1
    return fm.log2(float(max(n, 2)))


@njit
def variance_reduction(w_left, s_left, q_left, w_total, s_total, q_total, min_branch_fraction):
    """Intra-cluster variance reduction of a binary split of multi-target rows, in ``[0, 1]``.

    ``w_*`` are weights, ``s_*[j]`` and ``q_*[j]`` weighted sums and squared sums of target
    ``j`` on the left branch and on the whole leaf (the right branch is the difference).
    Per target the reduction is ``1 - (SS_left + SS_right) / SS_total`` (``SS``: sum of
    squared deviations), i.e. ``1 - sum_b (n_b / n) Var_b / Var``: each target is normalised
    by its own variance, so targets on different scales weigh alike; the merit is the mean
    over the targets that vary (iSOUP-Tree, Osojnik et al. 2018). 0 when a branch holds less
    than ``min_branch_fraction`` of the weight (MOA: 5%). Its range is 1, the range of the
    Hoeffding bound.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([[0.0], [0.0], [1.0], [1.0]])
    >>> round(variance_reduction(2.0, y[:2].sum(0), (y[:2] ** 2).sum(0), 4.0,
    ...                          y.sum(0), (y ** 2).sum(0), 0.05), 6)
    1.0
    """
    w_right = w_total - w_left
    if w_total <= 0.0 or w_left < min_branch_fraction * w_total \
            or w_right < min_branch_fraction * w_total:
        return 0.0
    merit = 0.0
    used = 0
    for j in range(s_total.shape[0]):
        sst = q_total[j] - s_total[j] * s_total[j] / w_total
        # a target constant on the leaf (up to the rounding of its sums) says nothing
        if sst <= 1e-12 * abs(q_total[j]):
            continue
        ssl = q_left[j] - s_left[j] * s_left[j] / w_left
        sr = s_total[j] - s_left[j]
        ssr = (q_total[j] - q_left[j]) - sr * sr / w_right
        merit += 1.0 - (ssl + ssr) / sst
        used += 1
    return merit / used if used > 0 else 0.0


@njit(inline="always")
def hoeffding_bound(value_range, delta, n):
    """``sqrt(R^2 ln(1/delta) / (2 n))``: the mean of ``n`` values in a range ``R`` is
    within this distance of its expectation with probability ``1 - delta``."""
    return math.sqrt(value_range * value_range * fm.log(1.0 / delta) / (2.0 * n))


def check_split_test(grace_period, delta, tau) -> None:
    """Check the settings of the Hoeffding split test (the trees' constructors call it).

    Parameters
    ----------
    grace_period : float
        Rows a leaf learns between split attempts; must be ``> 0``.
    delta : float
        Confidence of :func:`hoeffding_bound`; must lie in ``(0, 1)`` (its log is taken).
    tau : float
        Tie threshold: a split is taken when the bound falls below it; must be ``>= 0``.

    Raises
    ------
    ValueError
        When any of them is out of its range (``not > 0`` also refuses NaN).
    """
    if not float(grace_period) > 0 or not 0.0 < float(delta) < 1.0 or float(tau) < 0:
        raise ValueError("need grace_period > 0, 0 < delta < 1 and tau >= 0")


# ------------------------------------------------------------------------------ numeric split


@njit(_nrt=False)
def feature_range(g_w, g_min, g_max, leaf, f):
    """Smallest and largest value of feature ``f`` seen at ``leaf`` over all classes."""
    lo = math.inf
    hi = -math.inf
    for k in range(g_w.shape[2]):
        if g_w[leaf, f, k] > 0.0:
            if g_min[leaf, f, k] < lo:
                lo = g_min[leaf, f, k]
            if g_max[leaf, f, k] > hi:
                hi = g_max[leaf, f, k]
    return lo, hi


@njit(_nrt=False)
def gaussian_binary_split(g_w, g_mean, g_m2, g_min, g_max, leaf, f, threshold, left, right):
    """Class weights below (``x <= threshold``) and above the threshold, from the Gaussians.

    MOA's ``GaussianNumericAttributeClassObserver`` and river's ``GaussianSplitter``: a
    class whose values all lie above (below) the threshold goes right (left) entirely;
    otherwise its weight is shared by the Gaussian CDF.
    """
    for k in range(g_w.shape[2]):
        n = g_w[leaf, f, k]
        left[k] = 0.0
        right[k] = 0.0
        if n <= 0.0:
            continue
        if threshold < g_min[leaf, f, k]:
            right[k] = n
        elif threshold >= g_max[leaf, f, k]:
            left[k] = n
        else:
            var = gaussian_variance(n, g_m2[leaf, f, k])
            lw = gaussian_cdf(threshold, g_mean[leaf, f, k], var) * n
            left[k] = lw
            right[k] = n - lw


@njit
def split_scratch(K):
    """Scratch of :func:`best_numeric_split` for ``K`` classes, allocated once per kernel call.

    Parameters
    ----------
    K : int
        Length of the class axis.

    Returns
    -------
    left, right, best_left, best_right : ndarray of shape (K,)
        Zeroed class weights below and above a candidate threshold, and of the best one.
    """
    return np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(K)


@njit(_nrt=False)
def best_numeric_split(g_w, g_mean, g_m2, g_min, g_max, leaf, f, pre, n_splits,
                       min_branch_fraction, left, right, best_left, best_right):
    """Best of ``n_splits`` evenly spaced thresholds strictly inside the feature's range.

    Returns ``(merit, threshold)``; ``merit`` is ``-inf`` when no candidate is valid. The
    candidates are ``lo + (hi - lo) / (n_splits + 1) * i`` for ``i = 1..n_splits``; the
    first candidate of the highest merit wins. The winner's distributions are written into
    ``best_left`` and ``best_right``.
    """
    lo, hi = feature_range(g_w, g_min, g_max, leaf, f)
    best = -math.inf
    best_t = 0.0
    if lo == math.inf:
        return best, best_t
    step = (hi - lo) / (n_splits + 1.0)
    h_pre = entropy2(pre)  # once, not per threshold: a third of the logarithms of an attempt
    for i in range(n_splits):
        t = lo + step * (i + 1)
        if not (lo < t < hi):
            continue
        gaussian_binary_split(g_w, g_mean, g_m2, g_min, g_max, leaf, f, t, left, right)
        merit = info_gain_from(h_pre, left, right, min_branch_fraction)
        if merit > best:
            best = merit
            best_t = t
            for k in range(left.shape[0]):  # a loop: a slice copy may allocate a temporary
                best_left[k] = left[k]
                best_right[k] = right[k]
    return best, best_t


# ------------------------------------------------------------------------------ naive Bayes


@njit(inline="always")
def _seen_total(counts, out):
    """The leaf's total class weight; when it saw nothing, ``out`` is zeroed (no class to
    score)."""
    total = 0.0
    for k in range(out.shape[0]):
        total += counts[k]
    if total <= 0.0:
        for k in range(out.shape[0]):
            out[k] = 0.0
    return total


@njit(_nrt=False)
def naive_bayes_log_joint(x, mask, counts, g_w, g_mean, g_m2, leaf, degenerate, out):
    """Log of ``P(c) prod_f p(x_f | c)`` per class into ``out``; returns whether any class
    was seen. Features with ``mask[f] == 0`` are missing and left out of the product.

    A class never seen scores ``-inf``. A feature the leaf has no value of (for any class)
    is left out, as neither reference has an observer for it yet. In river's mode a
    feature whose log density is ``-inf`` for a class is left out of that class's product;
    in MOA's mode it makes the product 0.
    """
    K = out.shape[0]
    total = _seen_total(counts, out)
    if total <= 0.0:
        return False
    if degenerate == DEGENERATE_POINT:
        _moa_votes(x, mask, counts, total, g_w, g_mean, g_m2, leaf, out)
        return True
    for k in range(K):
        c = counts[k]
        out[k] = fm.log(c / total) if c > 0.0 else -math.inf
    for f in range(x.shape[0]):
        if mask[f] == 0 or not _observed(g_w, leaf, f, K):
            continue
        for k in range(K):
            if counts[k] <= 0.0:
                continue
            n = g_w[leaf, f, k]
            if degenerate == DEGENERATE_SKIP and n <= 0.0:
                continue  # river: a class with no estimator for the feature skips it
            lp = gaussian_log_pdf(x[f], n, g_mean[leaf, f, k],
                                  gaussian_variance(n, g_m2[leaf, f, k]), degenerate)
            if lp == -math.inf and degenerate == DEGENERATE_SKIP:
                continue
            out[k] += lp
    return True


@njit(inline="always")
def _observed(g_w, leaf, f, K):
    """Whether feature ``f`` has an estimator with weight for one of the ``K`` classes at
    ``leaf``."""
    for c in range(K):
        if g_w[leaf, f, c] > 0.0:
            return True
    return False


#: a factor of MOA's naive Bayes product that makes it 0 (an estimator that saw nothing, or
#: a point mass elsewhere); a density is never negative, so a negative number can mark it
_NB_ZERO = -1.0
#: a factor not computed yet (:func:`moa_cached_log_joint`)
_NB_UNKNOWN = -2.0


@njit(inline="always")
def _moa_factor(x, n, mean, m2):
    """One class's factor of MOA's naive Bayes product for value ``x`` of a feature: the
    density of its Gaussian estimator (weight ``n``, mean, ``m2``); 1 for a point mass at
    ``x``, :data:`_NB_ZERO` for a point mass elsewhere or an estimator that saw nothing."""
    if n <= 0.0:
        return _NB_ZERO
    sd = math.sqrt(gaussian_variance(n, m2))
    if sd > 0.0:
        d = x - mean
        return (1.0 / (_SQRT_2PI * sd)) * fm.exp(-(d * d / (2.0 * sd * sd)))
    if x != mean:
        return _NB_ZERO
    return 1.0


@njit(inline="always")
def _times(v, factor):
    """A product ``v`` times one factor of :func:`_moa_factor` (a point mass at the value
    multiplies by 1, which leaves every ``v`` as it is, as MOA leaves it)."""
    return 0.0 if factor == _NB_ZERO else v * factor


@njit(_nrt=False)
def _moa_votes(x, mask, counts, total, g_w, g_mean, g_m2, leaf, out):
    """MOA's naive Bayes votes, multiplied in linear space as MOA does (so a product that
    underflows to 0 stays 0, which decides many early predictions), returned as logs.

    Feature by feature, each class's product in ``out``: the feature's test of
    :func:`_observed` (a scan of the classes) is then made once, not once per class; each
    class's product still takes its factors in feature order, so the bits are MOA's order's.
    """
    K = out.shape[0]
    for k in range(K):
        out[k] = counts[k] / total
    for f in range(x.shape[0]):
        if mask[f] == 0 or not _observed(g_w, leaf, f, K):
            continue
        for k in range(K):
            if out[k] != 0.0:  # a product that is 0 stays 0: MOA skips its factors
                out[k] = _times(out[k], _moa_factor(x[f], g_w[leaf, f, k], g_mean[leaf, f, k],
                                                    g_m2[leaf, f, k]))
    for k in range(K):
        v = out[k]
        out[k] = fm.log(v) if v > 0.0 else -math.inf


# MOA's naive Bayes with its factors kept: a tree that predicts a row, learns it and predicts
# it again (the adaptive random forest's detectors are fed the error after learning) changes
# one class's estimators in between, so only that class's factors (an exp each) are new.


@njit(_nrt=False)
def moa_nb_reset(g_w, leaf, factors, observed):
    """Empty the factor cache of :func:`moa_cached_log_joint` for a new row or leaf.

    Parameters
    ----------
    g_w : ndarray of shape (L, m, K)
        Estimator weights.
    leaf : int
        The leaf.
    factors : ndarray of shape (K, m)
        Set to unknown for the features the leaf has a value of, to 1 (left out of the
        product) for the others.
    observed : ndarray of shape (m,)
        Set to whether the leaf has a value of each feature (:func:`_observed`).
    """
    K = factors.shape[0]
    for f in range(factors.shape[1]):
        observed[f] = _observed(g_w, leaf, f, K)
        fill = _NB_UNKNOWN if observed[f] else 1.0
        for k in range(K):
            factors[k, f] = fill


@njit(_nrt=False)
def moa_nb_learned(g_w, leaf, k, factors, observed):
    """Keep the cache of :func:`moa_nb_reset` after ``leaf`` learned a value of class ``k``
    for each feature (the same row): class ``k``'s factors are unknown again, and so is
    every class's factor of a feature the leaf had no value of before."""
    K = factors.shape[0]
    for f in range(factors.shape[1]):
        now = _observed(g_w, leaf, f, K)
        if now != observed[f]:
            observed[f] = now
            fill = _NB_UNKNOWN if now else 1.0
            for c in range(K):
                factors[c, f] = fill
        elif now:
            factors[k, f] = _NB_UNKNOWN


@njit(_nrt=False)
def moa_cached_products(x, counts, g_w, g_mean, g_m2, leaf, factors, out):
    """MOA's naive Bayes products ``P(c) prod_f p(x_f | c)`` per class into ``out``, in
    linear space (their logs are :func:`naive_bayes_log_joint`'s scores in MOA's mode:
    ``DEGENERATE_POINT``, no missing feature), with the factors taken from ``factors``
    (K, m) (see :func:`moa_nb_reset`) and the unknown ones computed and kept there;
    returns whether any class was seen (if not, ``out`` is 0)."""
    K = out.shape[0]
    total = _seen_total(counts, out)
    if total <= 0.0:
        return False
    for k in range(K):
        v = counts[k] / total
        for f in range(x.shape[0]):
            if v == 0.0:
                break  # a product that is 0 stays 0: MOA skips its factors
            factor = factors[k, f]
            if factor == _NB_UNKNOWN:
                factor = _moa_factor(x[f], g_w[leaf, f, k], g_mean[leaf, f, k],
                                     g_m2[leaf, f, k])
                factors[k, f] = factor
            v = _times(v, factor)
        out[k] = v
    return True


@njit(_nrt=False)
def moa_cached_log_joint(x, counts, g_w, g_mean, g_m2, leaf, factors, out):
    """:func:`naive_bayes_log_joint` in MOA's mode, the same bits, through the factor cache
    (:func:`moa_cached_products`)."""
    if not moa_cached_products(x, counts, g_w, g_mean, g_m2, leaf, factors, out):
        return False
    for k in range(out.shape[0]):
        v = out[k]
        out[k] = fm.log(v) if v > 0.0 else -math.inf
    return True


#: products within this fraction of the largest have their logarithm taken by
#: :func:`argmax_log`; the others' logarithms are surely smaller than the largest one's
_NEAR_TOP = 1.0 - 2.0 ** -30


@njit(_nrt=False)
def argmax_log(products):
    """The class :func:`models.core._stats.argmax` picks from the scores
    ``log(p) if p > 0 else -inf`` of ``products`` (:func:`moa_cached_products`), taking the
    logarithm of the largest products only.

    A product ``p <= top (1 - 2^-30)`` has ``log p <= log top - 2^-30``, and the core's
    ``log`` is within one unit in the last place (below ``2^-42`` for any double) of the
    true value, so its score is below the largest one and it is not the first largest; the
    others are scored as :func:`moa_cached_log_joint` scores them, so ties between values
    whose logarithms round alike break as there (the first class). 0 when no product is
    positive (every score ``-inf``).
    """
    top = 0.0
    for k in range(products.shape[0]):
        if products[k] > top:
            top = products[k]
    if not top > 0.0:
        return 0
    near = top * _NEAR_TOP
    best = -1
    best_log = 0.0
    for k in range(products.shape[0]):
        if products[k] >= near:
            lp = fm.log(products[k])
            if best < 0 or lp > best_log:
                best = k
                best_log = lp
    return best


@njit(_nrt=False)
def normalise_log(scores, out):
    """Probabilities from log scores (log-sum-exp); uniform when every score is ``-inf``."""
    K = scores.shape[0]
    top = -math.inf
    for k in range(K):
        if scores[k] > top:
            top = scores[k]
    if top == -math.inf:
        for k in range(K):
            out[k] = 1.0 / K
        return
    s = 0.0
    for k in range(K):
        out[k] = fm.exp(scores[k] - top)
        s += out[k]
    for k in range(K):
        out[k] /= s
