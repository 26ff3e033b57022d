"""The window mixture's bookkeeping over the ring of block measurements, in place.

:class:`~models.cart.block_forest.BlockRanker` keeps its measurements in a ring (``history``,
one row per block forest, the newest at slot ``(n_blocks - 1) % rows``). Every measurement
scores each candidate window on it, and every ask averages the newest measurements over each
window. Both read only the newest ``gap + longest window`` rows, straight from the ring: on a
wide stream a copy of the whole ring in time order and its cumulative sums cost more than
the block forest itself.

The sums run in the order :func:`numpy.cumsum` runs them (newest first, one row after the
other) and the faded statistics are updated as numpy's in-place ``*=`` and ``+=`` update
them, so the results are numpy's bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..core._fmath import exp
from ..core._jit import njit


@njit
def window_means(history, n_blocks, skip, windows, out):
    """``out[k]``: the mean of the newest ``windows[k]`` measurements after the newest
    ``skip`` ones (all that are left when fewer), for increasing ``windows``."""
    rows, d = history.shape
    kept = min(n_blocks, rows) - skip
    acc = np.empty(d)
    j = 0
    for k in range(windows.shape[0]):
        c = min(windows[k], kept)
        while j < c:
            slot = (n_blocks - 1 - skip - j) % rows
            for f in range(d):
                acc[f] = history[slot, f] if j == 0 else acc[f] + history[slot, f]
            j += 1
        for f in range(d):
            out[k, f] = acc[f] / c


@njit
def score_windows(history, n_blocks, gap, windows, rate, losses, loss_cross, scratch):
    """Fade the windows' statistics and add the newest measurement's: each window's squared
    error in predicting it from the measurements that ended ``gap`` before it
    (``losses``) and the products of those errors (``loss_cross``). ``scratch``: shape
    ``(2,) + losses.shape``.
    """
    K, d = losses.shape
    pred, err = scratch[0], scratch[1]
    window_means(history, n_blocks, gap, windows, pred)
    target = history[(n_blocks - 1) % history.shape[0]]
    keep = 1.0 - rate
    for k in range(K):
        for f in range(d):
            p, t = pred[k, f], target[f]
            e = (p - t) * (p - t)
            err[k, f] = e
            losses[k, f] = losses[k, f] * keep + rate * e
    for k in range(K):
        for m in range(K):
            for f in range(d):
                loss_cross[k, m, f] = loss_cross[k, m, f] * keep + rate * (err[k, f] * err[m, f])


@njit
def paired_scores(losses, loss_cross, mass, squares, out):
    """``out[k, f]``: how many standard errors window ``k``'s faded loss lies above the best
    window's for feature ``f`` (0 for the best), from the faded losses and the products of
    the windows' errors, as :meth:`models.cart.block_forest.BlockRanker._paired_scores` defines it.

    Every value is the elementwise expression numpy evaluated before (no sums), in the same
    order, so the scores are the same bits; only the entries of ``loss_cross`` the scores
    read are divided by ``mass`` (the diagonal and the best window's column).
    """
    K, d = losses.shape
    for f in range(d):
        b = 0  # the first best window, as numpy's argmin
        for k in range(1, K):
            if losses[k, f] / mass < losses[b, f] / mass:
                b = k
        best = losses[b, f] / mass
        own_b = loss_cross[b, b, f] / mass
        for k in range(K):
            diff = losses[k, f] / mass - best
            var = loss_cross[k, k, f] / mass - 2.0 * (loss_cross[k, b, f] / mass) + own_b \
                - diff * diff
            se = np.sqrt((var if var > 0.0 else 0.0) * squares) / mass
            out[k, f] = diff / (se if se > 1e-300 else 1e-300) if diff > 0.0 else 0.0


@njit
def _pairwise_sum(a, lo, n, step):
    """``a[lo] + a[lo + step] + ...`` (``n`` terms) summed as numpy's reductions sum a run of
    doubles (``pairwise_sum`` of its ``loops_utils``): in order below 8 terms, in 8 running
    sums up to 128, halves above; the bits of :func:`numpy.sum` over that run."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i * step]
        return res
    if n <= 128:
        r = np.empty(8)
        for j in range(8):
            r[j] = a[lo + j * step]
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] += a[lo + (i + j) * step]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[lo + i * step]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, lo, n2, step) + _pairwise_sum(a, lo + n2 * step, n - n2, step)


@njit
def _column_sums(w, out):
    """``out[f] = w[:, f].sum()`` as numpy's ``w.sum(axis=0)`` sums it: row after row; a
    single column is one contiguous run, which numpy sums pairwise."""
    K, d = w.shape
    if d == 1:
        out[0] = _pairwise_sum(w.reshape(-1), 0, K, 1)
        return
    for f in range(d):
        out[f] = 0.0
    for k in range(K):
        for f in range(d):
            out[f] += w[k, f]


@njit
def _row_mean(values, n_rows):
    """The mean of ``values``, one row of a ``(n_rows, n)`` selection's ``mean(axis=1)`` as
    numpy gives it: a boolean selection of columns comes back in column-major order, so
    numpy sums each row one value after the other; a single row is one contiguous run, which
    it sums pairwise."""
    n = values.shape[0]
    if n_rows == 1:
        return _pairwise_sum(values, 0, n, 1) / n
    total = 0.0
    for i in range(n):
        total += values[i]
    return total / n


@njit
def window_weights(losses, paired, log_windows, eta, paired_eta, pool, long_prior, out):
    """Each window's weight per feature (:meth:`models.cart.block_forest.BlockRanker._weights`
    defines them), normalised over the windows, into ``out`` (shape of ``losses``).

    ``paired``: :func:`paired_scores`; ``log_windows``: each window's log length over the
    longest's. The expressions and sums are numpy's as the method wrote them before, in the
    same order (:func:`_pairwise_sum`, :func:`_column_sums`), so the weights are the same
    bits: an ask made every block cost more in numpy's calls on small arrays than in their
    arithmetic.
    """
    K, d = losses.shape
    n_seen = 0
    for f in range(d):
        best, top = losses[0, f], losses[0, f]
        for k in range(1, K):
            best = min(best, losses[k, f])
            top = max(top, losses[k, f])
        n_seen += top > 0.0
        for k in range(K):
            lw = -(losses[k, f] - best) / (eta * best + 1e-12)
            cap = -paired[k, f] / paired_eta
            out[k, f] = lw if lw <= cap else cap  # numpy.minimum (no NaN here)
    if pool > 0.0 and n_seen > 0:
        # the stream's features usually drift at one speed: each feature's evidence shrunk
        # toward the mean over the features whose measurements ever moved
        seen = np.empty(n_seen)
        for k in range(K):
            j = 0
            for f in range(d):
                top = losses[0, f]
                for m in range(1, K):
                    top = max(top, losses[m, f])
                if top > 0.0:
                    seen[j] = out[k, f]
                    j += 1
            shared = _row_mean(seen, K)
            for f in range(d):
                out[k, f] = (1.0 - pool) * out[k, f] + pool * shared
    for f in range(d):
        top = -np.inf
        for k in range(K):
            out[k, f] = out[k, f] + long_prior * log_windows[k]
            top = max(top, out[k, f])
        for k in range(K):
            out[k, f] = exp(out[k, f] - top)
    total = np.empty(d)
    _column_sums(out, total)
    for k in range(K):
        for f in range(d):
            out[k, f] = out[k, f] / total[f]


@njit
def mixture(weights, means, out):
    """``out[f]``: the windows' means weighted, ``(weights * means).sum(axis=0)`` in numpy's
    order."""
    K, d = weights.shape
    prod = np.empty((K, d))
    for k in range(K):
        for f in range(d):
            prod[k, f] = weights[k, f] * means[k, f]
    _column_sums(prod, out)
