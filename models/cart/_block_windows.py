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
