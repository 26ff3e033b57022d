"""Adaptive retain size, increase rate and maximum height of a forgetful tree.

Yuan, Sun & Shasha, "Forgetful Forests: Data Structures for Machine Learning on Streaming Data
under Concept Drift", Algorithms 16(6):278, 2023, Sec. 3.2 and Appendix B. Once per mini-batch,
after the tree has been tested on the batch and before it learns it, the accuracy on the batch
is compared with the accuracy of the previous window and decides how many rows (``retain``,
rSize in the paper) the tree keeps:

* a big accuracy increase grows the retained set a lot, a mild one slightly, no change slowly;
* a decrease shrinks it, and a batch no better than random guessing forgets all old rows.

The formulas are the ones of the authors' reference code (``DecisionTree::fit``), which the paper
copy we have lost:

1. First batch: ``retain = b``.
2. Cold start (``forget_rate < 0``): keep everything (``retain = n_rows + b``); each time the
   retained size reaches the doubling threshold ``round_no`` (64, 128, ...) a batch better than
   chance adds 5 to ``forget_rate``; a batch at or below chance resets it to -10. Forgetting
   starts once ``forget_rate`` reaches 0, i.e. after beating chance at two doublings.
3. Normal mode, four cases in this order, with ``g = 1/K`` the random-guess accuracy:
   ``a_new <= g`` -> ``retain = b`` (abrupt drift: forget all old rows);
   ``a_old <= g`` -> ``retain += b``;
   ``a_new == a_old`` -> ``retain += round(iRate * b)`` and the previous window is extended;
   otherwise ``q = (a_new - g) / (a_old - g)``, ``iRate /= q``, ``q' = q**2`` if ``q >= 1`` else
   ``q**(3 - q)``, ``retain = min(round(retain * q' + iRate * b), retain + b)``.
4. ``retain = max(retain, b)`` and ``max_height = max(1, floor(log2(retain)))``.

Rounding is half away from zero (C's ``round``), as in the reference code.

The increase rate is clamped to ``[irate_min, irate_max]`` after each division. The reference
code leaves it unbounded, so it can reach 0 or overflow (it is divided by the accuracy ratio at
every batch); the clamp keeps ``iRate * b`` finite. See :class:`models.ForgetfulDecisionTree` for
the default bounds and why they were chosen.
"""

from __future__ import annotations

import numpy as np

from ..core import _fmath as fm
from ..core._jit import njit

#: Initial doubling threshold of the cold start.
COLD_START_ROUND = 64
#: Value of ``forget_rate`` at the start and after a batch at or below chance in cold start.
COLD_START_RATE = -10


@njit
def round_half_away(x):
    """Round a non-negative float to the nearest integer, halves away from zero (C ``round``)."""
    r = np.floor(x)
    if x - r >= 0.5:
        r += 1.0
    return np.int64(r)


@njit
def max_height_for(retain):
    """``max(1, floor(log2(retain)))`` computed on integers (exact at powers of two)."""
    h = -1
    v = retain
    while v > 0:
        v >>= 1
        h += 1
    return max(h, 1)


@njit
def adapt_retain(n_rows, b, correct, n_classes, retain, irate, last_t, last_all, forget_rate,
                 round_no, irate_min, irate_max):
    """One step of the adaptation rule (module docstring).

    Parameters
    ----------
    n_rows : int
        Rows the tree retains before this batch (0 before the first batch).
    b : int
        Rows in this batch.
    correct : int
        Rows of this batch the tree predicted correctly before learning it.
    n_classes : int
        Classes seen so far; the random-guess accuracy is ``1 / max(n_classes, 2)``.
    retain, irate, last_t, last_all, forget_rate, round_no
        The tree's current adaptation state (``last_t / last_all`` is the previous window's
        accuracy).
    irate_min, irate_max : float
        Bounds of the increase rate.

    Returns
    -------
    tuple
        ``(retain, irate, max_height, last_t, last_all, forget_rate, round_no, collapsed)``;
        ``collapsed`` is true when the batch was no better than chance in normal mode and all old
        rows are forgotten.
    """
    collapsed = False
    if n_rows == 0:
        retain = b
    else:
        g = 1.0 / max(n_classes, 2)
        a_new = correct / b
        if forget_rate == 0:
            a_old = last_t / last_all
            if a_new <= g:
                last_t = correct
                last_all = b
                retain = b
                collapsed = True
            elif a_old <= g:
                last_t = correct
                last_all = b
                retain += b
            elif a_old == a_new:
                last_t += correct
                last_all += b
                retain += round_half_away(irate * b)
            else:
                q = (a_new - g) / (a_old - g)
                # iRate follows the raw ratio; the exponent only shapes the retain update.
                irate = min(max(irate / q, irate_min), irate_max)
                if q >= 1.0:
                    qq = q * q
                else:
                    qq = fm.pow_positive(q, 3.0 - q)  # not libm's pow: CPU-independent
                retain = min(round_half_away(retain * qq + irate * b), retain + b)
                last_t = correct
                last_all = b
        else:
            retain = n_rows + b
            while retain >= round_no:
                if a_new > g:
                    forget_rate += 5
                round_no *= 2
            if a_new <= g:
                forget_rate = COLD_START_RATE
            if forget_rate >= 0:
                forget_rate = 0
            last_t = correct
            last_all = b
    retain = max(retain, b)
    return (retain, irate, max_height_for(retain), last_t, last_all, forget_rate, round_no,
            collapsed)
