"""Bounded E-BST observers: multi-target sums below candidate thresholds of one feature.

MOA's iSOUP-Tree keeps, per leaf and feature, an extended binary search tree (E-BST,
Ikonomovska et al. 2011) with one node per distinct value seen and, in each node, the weight
and the sums and squared sums of every target of the rows at or below that value. A split
candidate is every stored value ``v`` (``x <= v`` goes left).

Here one observer is an array of at most ``K`` thresholds (``obs_key``; sorted once full
and whenever its splits are scored) and, per threshold ``k``, the weight and target sums of
the rows with ``key[k-1] < x <= key[k]`` (a bin, so the sums below ``key[k]`` are a prefix
sum). While a leaf has seen at most ``K`` distinct values of the feature this is the E-BST
itself, flattened. Once ``K`` are stored, a
new value joins the bin of the smallest threshold above it, which leaves the sums below
every stored threshold exact; a value above the largest threshold moves that threshold up to
it (the largest threshold is never a valid split: nothing lies right of it). So every
candidate is scored on exactly the statistics MOA's E-BST would use for it; only the set of
candidates is limited to the first ``K`` distinct values of the leaf, a random sample of the
leaf's feature values. Memory is fixed (``K (1 + 2M)`` floats per observer), so observers
live in flat arrays and a leaf's split needs no allocation. A bin's weight and sums sit
side by side (``obs_stats``), so adding a row to a bin touches one or two cache lines. With the learners' default
``K = 32``, eight of Bike Sharing's twelve features (hour, month, weekday, ...) fit without
truncation; raising ``K`` to 64 or 128 changed the prequential MAE of an iSOUP tree with
MOA's perceptron update by less than 3% on Bike Sharing, SCM20d and a synthetic stream, and
costs up to a fifth of the forest's speed (``tests/benchmarks/learners/bench_isoup.py``). With the
capped delta rule a single tree gains from more candidates on streams of continuous features
(``relevant_stream``: aRMAE 0.282 at 32, 0.240 at 128; Bike Sharing and SCM20d within 0.3%),
the default forest does not (128: the switching stream 1-2% lower, SCM20d equal, Bike Sharing
5% higher), so ``K`` stays 32.

State layout (``T`` trees, ``S`` observer slots (one per learning leaf), ``P`` features per
leaf, ``K`` thresholds, ``M`` targets)::

    obs_n     (T, S, P)            int64    thresholds in use
    obs_key   (T, S, P, K)         float64  thresholds
    obs_stats (T, S, P, K, 1 + 2M) float64  per bin: weight, the sum of each target, the
                                            sum of squares of each target

References
----------
Ikonomovska, E., Gama, J. and Džeroski, S. (2011). Learning model trees from evolving data
streams. Data Mining and Knowledge Discovery 23(1), 128-168 (the E-BST).
"""

from __future__ import annotations

import math

from ..core._jit import njit
from ..hoeffding import _hoeffding as hs


@njit(_nrt=False)
def sort_bins(obs_n, obs_key, obs_stats, t, s, i):
    """Order the bins of observer (t, s, i) by threshold, in place (insertion sort: at most
    ``K`` bins, and no allocation)."""
    n = obs_n[t, s, i]
    W = obs_stats.shape[4]
    for a in range(1, n):
        b = a
        while b > 0 and obs_key[t, s, i, b - 1] > obs_key[t, s, i, b]:
            tmp = obs_key[t, s, i, b]
            obs_key[t, s, i, b] = obs_key[t, s, i, b - 1]
            obs_key[t, s, i, b - 1] = tmp
            for j in range(W):
                v = obs_stats[t, s, i, b, j]
                obs_stats[t, s, i, b, j] = obs_stats[t, s, i, b - 1, j]
                obs_stats[t, s, i, b - 1, j] = v
            b -= 1


@njit(_nrt=False)
def ebst_learn(obs_n, obs_key, obs_stats, slot_features, t, s, x, y, w):
    """Add a row (features ``x``, targets ``y``, weight ``w``) to every observer of slot ``s``
    of tree ``t`` (observer ``i`` watches feature ``slot_features[t, s, i]``).

    While fewer than ``K`` thresholds are stored, bins are in arrival order (a linear scan
    finds an equal value; a new one is appended); the moment the ``K``-th arrives they are
    sorted, and from then on a binary search places every value. One call per row and leaf,
    with the loop over features inside, compiled without numba's runtime: it allocates
    nothing, so its array arguments need no reference counting (which would cost more than
    the insertion itself; see :mod:`models.isoup._isoup_kernels`).
    """
    K = obs_key.shape[3]
    M = y.shape[0]
    for i in range(slot_features.shape[2]):
        xv = x[slot_features[t, s, i]]
        n = obs_n[t, s, i]
        full = False
        if n < K:
            k = n
            for m in range(n):
                if obs_key[t, s, i, m] == xv:
                    k = m
                    break
            if k == n:
                obs_key[t, s, i, k] = xv
                for j in range(1 + 2 * M):
                    obs_stats[t, s, i, k, j] = 0.0
                obs_n[t, s, i] = n + 1
                full = n + 1 == K
        else:
            # first k with key[k] >= x, by branch-free halving: a fixed number of steps whose
            # only choice is a conditional move (the comparisons are unpredictable, and
            # mispredicted branches would cost more than the search)
            base = 0
            length = n
            while length > 1:
                half = length >> 1
                base = base + half if obs_key[t, s, i, base + half - 1] < xv else base
                length -= half
            k = base + 1 if obs_key[t, s, i, base] < xv else base
            if k == n:
                k = n - 1  # above every threshold: the top bin stretches up to x
                obs_key[t, s, i, k] = xv
            # else: joins the bin (key[k-1], key[k]] (the sums below every threshold stay exact)
        obs_stats[t, s, i, k, 0] += w
        for j in range(M):
            v = w * y[j]
            obs_stats[t, s, i, k, 1 + j] += v
            obs_stats[t, s, i, k, 1 + M + j] += v * y[j]
        if full:
            sort_bins(obs_n, obs_key, obs_stats, t, s, i)


@njit
def ebst_totals(obs_n, obs_stats, t, s, i, upto, out_s, out_q):
    """Weight and target sums of bins ``0..upto`` (inclusive) into ``out_*``; returns the weight."""
    M = out_s.shape[0]
    w = 0.0
    out_s[:] = 0.0
    out_q[:] = 0.0
    for k in range(min(upto + 1, obs_n[t, s, i])):
        w += obs_stats[t, s, i, k, 0]
        for j in range(M):
            out_s[j] += obs_stats[t, s, i, k, 1 + j]
            out_q[j] += obs_stats[t, s, i, k, 1 + M + j]
    return w


@njit
def ebst_best_split(obs_n, obs_key, obs_stats, t, s, i, min_branch_fraction,
                    cum_s, cum_q, tot_s, tot_q):
    """Best threshold of observer (t, s, i) by :func:`models.hoeffding._hoeffding.variance_reduction`.

    Returns ``(merit, k, weight)``: the merit (0 when no threshold is valid), the index of
    the threshold (``-1``: none) and the observer's weight. The lowest of equal thresholds
    wins.
    """
    n = obs_n[t, s, i]
    M = cum_s.shape[0]
    if n < obs_key.shape[3]:
        sort_bins(obs_n, obs_key, obs_stats, t, s, i)
    W = ebst_totals(obs_n, obs_stats, t, s, i, n, tot_s, tot_q)
    cum_s[:] = 0.0
    cum_q[:] = 0.0
    wl = 0.0
    best = 0.0
    best_k = -1
    for k in range(n - 1):
        wl += obs_stats[t, s, i, k, 0]
        for j in range(M):
            cum_s[j] += obs_stats[t, s, i, k, 1 + j]
            cum_q[j] += obs_stats[t, s, i, k, 1 + M + j]
        merit = hs.variance_reduction(wl, cum_s, cum_q, W, tot_s, tot_q, min_branch_fraction)
        if merit > best and not math.isnan(merit):
            best = merit
            best_k = k
    return best, best_k, W
