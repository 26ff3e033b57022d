"""A classification block ranker's rows in one kernel call: the ring of rows, a block forest
every ``stride`` rows, the windows scored on it and the mixture asked after it.

:meth:`~models.cart.block_forest.BlockRanker.learn_many` followed by an ask after every
measurement costs seven kernel calls and their Python glue per measurement; a stream of few
features spends more there than in its forests. :func:`learn_rows` runs the same steps in
the same order on the same arrays (every helper is the one the methods call), so the state
and the importances are those of the methods, bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..core import _fmath as fm
from ..core._jit import njit
from . import _block_cart, _block_windows

#: what :func:`learn_rows` answers beside the rows it took: done, or stopped at a
#: measurement because the ring of measurements must grow first (the caller grows it and
#: calls again with ``measure_first``)
DONE, GROW = 0, 1


@njit
def learn_rows(X, codes, n_classes, start, measure_first, block_x, block_y, ring, history,
               n_blocks, losses, loss_cross, rng, order, values, sort_scratch, sorted_ok,
               stride, cap, n_trees, mtry, n_split, max_depth, windows, gap, rate, logs,
               eta, paired_eta, pool, long_prior, trace_rows, trace_mdi, n_trace, status):
    """Write rows ``start:`` of ``X`` (their classes ``codes``) into the ring; every time a
    measurement is due, grow a forest on the block and score the windows on it, then write
    the mixture's importances into ``trace_mdi[n_trace[0]]`` and the rows taken so far into
    ``trace_rows``. Returns the first row not taken; ``status[0]`` says why it stopped.

    ``n_classes``: the classes known after the call's rows. A forest grown with more classes
    than its block holds is the same (an empty class draws no bootstrap row and adds nothing
    to an impurity), so a measurement made before a class appeared in this call is
    ``learn_many``'s. ``sorted_ok``: whether ``order``/``values`` hold the block's sorted
    columns as of the last measurement.
    """
    B = block_x.shape[0]
    status[0] = DONE
    if measure_first:
        _measure(n_classes, block_x, block_y, ring, history, n_blocks, losses,
                 loss_cross, rng, order, values, sort_scratch, sorted_ok, n_trees, mtry,
                 n_split, max_depth, windows, gap, rate, logs, eta, paired_eta, pool,
                 long_prior, trace_rows, trace_mdi, n_trace, start)
    while start < X.shape[0]:
        # rows up to the next measurement, written without wrapping past the ring's end
        due = stride - ring[2] if ring[1] == B else B - ring[1]
        take = min(due, X.shape[0] - start, B - ring[0])
        for r in range(take):
            for f in range(X.shape[1]):
                block_x[ring[0] + r, f] = X[start + r, f]
            block_y[ring[0] + r] = codes[start + r]
        ring[0] = (ring[0] + take) % B
        full = ring[1] == B
        ring[1] = min(B, ring[1] + take)
        ring[2] += take
        start += take
        if ring[1] == B and (not full or ring[2] >= stride):
            K = history.shape[0]
            if n_blocks[0] >= K and K < cap:
                status[0] = GROW
                return start
            _measure(n_classes, block_x, block_y, ring, history, n_blocks, losses,
                     loss_cross, rng, order, values, sort_scratch, sorted_ok, n_trees, mtry,
                     n_split, max_depth, windows, gap, rate, logs, eta, paired_eta, pool,
                     long_prior, trace_rows, trace_mdi, n_trace, start)
    return start


@njit
def _measure(n_classes, block_x, block_y, ring, history, n_blocks, losses, loss_cross, rng,
             order, values, sort_scratch, sorted_ok, n_trees, mtry, n_split, max_depth,
             windows, gap, rate, logs, eta, paired_eta, pool, long_prior, trace_rows,
             trace_mdi, n_trace, taken):
    """One measurement (``BlockRanker._measure``) and the ask after it (``_mixture``)."""
    B, d = block_x.shape
    fresh = ring[2]
    if sorted_ok[0] == 0 or fresh >= B:
        _block_cart.sort_columns(block_x, order, values)
    else:  # only the rows written since the last measurement moved
        _block_cart.update_ring_columns(block_x, ring[0], fresh, order, values, sort_scratch)
    sorted_ok[0] = 1
    forest, per_tree = np.empty(d), np.empty((n_trees, d))
    _block_cart.forest_importances(block_x, (order, values), block_y, n_classes, n_trees, mtry,
                                   n_split, max_depth, rng, forest, per_tree)
    n = n_blocks[0]
    slot = n % history.shape[0]
    for f in range(d):
        history[slot, f] = forest[f]
    ring[2] = 0
    n_blocks[0] = n + 1
    n = n + 1
    if min(n, history.shape[0]) > gap:
        _block_windows.score_windows(history, n, gap, windows, rate, losses, loss_cross,
                                     np.empty((2, losses.shape[0], d)))
    m = n_trace[0]
    _mixture(history, n, gap, windows, rate, losses, loss_cross, logs, eta, paired_eta, pool,
             long_prior, trace_mdi[m])
    trace_rows[m] = taken
    n_trace[0] = m + 1


@njit
def _mixture(history, n, gap, windows, rate, losses, loss_cross, logs, eta, paired_eta, pool,
             long_prior, out):
    """``BlockRanker._mixture`` after ``n`` measurements, into ``out``."""
    K, d = losses.shape
    # the faded means' weight and squared parts (BlockRanker._fade_mass)
    seen = max(0, n - gap)
    mass = 1.0 - fm.ipow(1.0 - rate, seen)
    squares = rate * rate * (1.0 - fm.ipow(1.0 - rate, 2 * seen)) / \
        (1.0 - (1.0 - rate) * (1.0 - rate))
    paired = np.zeros((K, d))
    if mass > 0.0:
        _block_windows.paired_scores(losses, loss_cross, mass, squares, paired)
    weights = np.empty((K, d))
    _block_windows.window_weights(losses, paired, logs, eta, paired_eta, pool, long_prior,
                                  weights)
    means = np.empty((K, d))
    _block_windows.window_means(history, n, 0, windows, means)
    _block_windows.mixture(weights, means, out)
