"""Kernels of the online random forest (Saffari et al. 2009): grow, learn, predict, discard.

State layout (all arrays of :class:`models.OnlineRandomForest`; ``T`` trees, node capacity
``N``, leaf-pool capacity ``S``, ``M`` random tests per leaf, ``F`` features, ``C`` classes):

* tree nodes, ``(T, N)``: ``node_feature`` (-1 = leaf), ``node_threshold``, ``node_left``,
  ``node_right``, ``node_depth``, ``node_slot`` (the leaf's pool slot, -1 for internal nodes
  and for leaves at ``max_depth`` that can never split) and ``node_count`` ``(T, N, C)``,
  the class counts used for prediction. ``n_nodes[t]`` nodes are in use.
* leaf pool, ``(T, S)``: a splittable leaf owns one slot holding its ``M`` candidate tests
  (``slot_feature``, ``slot_threshold``; ``NaN`` = not placed yet), their left/right class
  counts ``slot_count`` ``(T, S, M, 2, C)``, the leaf's feature ranges ``slot_lo``,
  ``slot_hi`` ``(T, S, F)`` and the weight it has learned since it was created, ``slot_n``.
  Free slots are a stack per tree (``slot_free``, ``n_free``). Internal nodes hold no tests,
  so memory per tree is bounded by the number of splittable leaves (at most
  ``2 ** (max_depth - 1)``), not by the number of nodes.
* per tree: ``tree_age`` (in-bag weight learned since the tree was created),
  ``tree_oob_n`` / ``tree_oob_err`` (out-of-bag instances seen and misclassified since then).
* forest: ``feat_lo``, ``feat_hi`` (range of every feature over the whole stream, the range
  a new root starts from), ``rng`` (``T + 1`` SplitMix64 generators: one per tree, the last
  one for tree discarding), ``n_seen``, ``n_replaced``.

Random tests and ranges. A test is a feature drawn uniformly and a threshold drawn uniformly
in the range of that feature at the leaf. A leaf's range starts as the range it inherits
(its parent's range cut at the parent's threshold; a root inherits the stream's range) and
widens with every value the leaf sees. A test whose feature has an empty or single-point
range when the leaf is created is *pending*: its threshold is drawn the first time the
leaf's range of that feature is non-degenerate, and it counts instances from then on. This
is what lets the very first roots, which know no range at all, start learning.

Resumable growth. :func:`_learn_rows` checks at the start of every row that each tree can
absorb one split (two nodes, one extra slot); otherwise it returns a status and the row it
reached *before touching any state for that row*, Python grows the arrays and calls again
from that row. The result is therefore identical whatever the initial capacities.
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit
from ..core._rng import poisson, randint, uniform
from ..core._stats import gini
from ..core._trees import copy_into, find_leaf
from ._orf_importance import _advance_scale, _reset_tree_importance, _update_mda

DONE = 0
NODES_FULL = 1
SLOTS_FULL = 2


@njit
def _draw_tests(t, s, slot_feature, slot_threshold, slot_count, slot_lo, slot_hi, rng):
    """Draw the ``M`` random tests of slot ``s`` of tree ``t`` from the slot's ranges."""
    n_features = slot_lo.shape[2]
    for m in range(slot_feature.shape[2]):
        f = randint(rng, t, n_features)
        slot_feature[t, s, m] = f
        lo = slot_lo[t, s, f]
        hi = slot_hi[t, s, f]
        if hi > lo:
            slot_threshold[t, s, m] = lo + uniform(rng, t) * (hi - lo)
        else:
            slot_threshold[t, s, m] = np.nan
        slot_count[t, s, m, :, :] = 0.0


@njit
def _reset_tree(t, max_depth, node_feature, node_threshold, node_left, node_right, node_depth,
                node_slot, node_count, n_nodes, slot_feature, slot_threshold, slot_count,
                slot_lo, slot_hi, slot_n, slot_free, n_free, tree_age, tree_oob_n, tree_oob_err,
                feat_lo, feat_hi, rng):
    """Make tree ``t`` a single empty root leaf whose range is the stream's range so far."""
    n_old = n_nodes[t]
    for i in range(n_old):
        node_count[t, i, :] = 0.0
    node_feature[t, 0] = -1
    node_threshold[t, 0] = 0.0
    node_left[t, 0] = -1
    node_right[t, 0] = -1
    node_depth[t, 0] = 0
    n_nodes[t] = 1
    n_slots = slot_free.shape[1]
    for k in range(n_slots):  # stack of free slots, slot 0 on top
        slot_free[t, k] = n_slots - 1 - k
    n_free[t] = n_slots
    if max_depth > 0:
        n_free[t] -= 1
        s = slot_free[t, n_free[t]]
        node_slot[t, 0] = s
        copy_into(slot_lo[t, s], feat_lo)
        copy_into(slot_hi[t, s], feat_hi)
        slot_n[t, s] = 0.0
        _draw_tests(t, s, slot_feature, slot_threshold, slot_count, slot_lo, slot_hi, rng)
    else:
        node_slot[t, 0] = -1
    tree_age[t] = 0.0
    tree_oob_n[t] = 0.0
    tree_oob_err[t] = 0.0


@njit
def _init_forest(max_depth, node_feature, node_threshold, node_left, node_right, node_depth,
                 node_slot, node_count, n_nodes, slot_feature, slot_threshold, slot_count,
                 slot_lo, slot_hi, slot_n, slot_free, n_free, tree_age, tree_oob_n,
                 tree_oob_err, feat_lo, feat_hi, rng):
    """Reset every tree (used once, when the learner sees its first batch)."""
    for t in range(node_feature.shape[0]):
        _reset_tree(t, max_depth, node_feature, node_threshold, node_left, node_right,
                    node_depth, node_slot, node_count, n_nodes, slot_feature, slot_threshold,
                    slot_count, slot_lo, slot_hi, slot_n, slot_free, n_free, tree_age,
                    tree_oob_n, tree_oob_err, feat_lo, feat_hi, rng)


@njit
def _best_test(t, s, slot_threshold, slot_count, scratch):
    """Index and Gini gain of the best placed test of slot ``s`` (-1, 0.0 when none splits).

    Gain of a test = ``I(L+R) - P_L I(L) - P_R I(R)`` on the test's own counts, with ``I``
    the Gini impurity; tests that send everything one way have no gain.
    """
    best = -1
    best_gain = 0.0
    n_classes = slot_count.shape[4]
    for m in range(slot_threshold.shape[2]):
        if np.isnan(slot_threshold[t, s, m]):
            continue
        counts_l = slot_count[t, s, m, 0]
        counts_r = slot_count[t, s, m, 1]
        n_l = 0.0
        n_r = 0.0
        for c in range(n_classes):
            n_l += counts_l[c]
            n_r += counts_r[c]
            scratch[c] = counts_l[c] + counts_r[c]
        if n_l <= 0.0 or n_r <= 0.0:
            continue
        n = n_l + n_r
        gain = gini(scratch) - (n_l / n) * gini(counts_l) - (n_r / n) * gini(counts_r)
        if gain > best_gain:
            best_gain = gain
            best = m
    return best, best_gain


@njit
def _split_leaf(t, leaf, m, max_depth, track, w, node_feature, node_threshold, node_left,
                node_right, node_depth, node_slot, node_count, n_nodes, slot_feature,
                slot_threshold, slot_count, slot_lo, slot_hi, slot_n, slot_free, n_free,
                imp_count, rng):
    """Turn ``leaf`` into a split on its test ``m``; children start from the test's counts."""
    s = node_slot[t, leaf]
    f = slot_feature[t, s, m]
    thr = slot_threshold[t, s, m]
    left = n_nodes[t]
    right = left + 1
    n_nodes[t] += 2
    depth = node_depth[t, leaf] + 1
    node_feature[t, leaf] = f
    node_threshold[t, leaf] = thr
    node_left[t, leaf] = left
    node_right[t, leaf] = right
    node_slot[t, leaf] = -1
    for side in range(2):
        child = left + side
        node_feature[t, child] = -1
        node_threshold[t, child] = 0.0
        node_left[t, child] = -1
        node_right[t, child] = -1
        node_depth[t, child] = depth
        copy_into(node_count[t, child], slot_count[t, s, m, side])
        if track:
            for c in range(imp_count.shape[2]):
                imp_count[t, child, c] = w * slot_count[t, s, m, side, c]
    if depth >= max_depth:  # children can never split: they hold no tests
        node_slot[t, left] = -1
        node_slot[t, right] = -1
        slot_free[t, n_free[t]] = s
        n_free[t] += 1
        return
    # the right child takes a fresh slot, the left child keeps the parent's slot in place
    n_free[t] -= 1
    s_r = slot_free[t, n_free[t]]
    copy_into(slot_lo[t, s_r], slot_lo[t, s])
    copy_into(slot_hi[t, s_r], slot_hi[t, s])
    if slot_lo[t, s_r, f] < thr:
        slot_lo[t, s_r, f] = thr  # right child: x[f] > thr
    if slot_hi[t, s, f] > thr:
        slot_hi[t, s, f] = thr  # left child: x[f] <= thr
    node_slot[t, left] = s
    node_slot[t, right] = s_r
    for child_slot in (s, s_r):
        slot_n[t, child_slot] = 0.0
        _draw_tests(t, child_slot, slot_feature, slot_threshold, slot_count, slot_lo, slot_hi,
                    rng)


@njit
def _update_leaf(t, leaf, x, c, k, node_count, node_slot, slot_feature, slot_threshold,
                 slot_count, slot_lo, slot_hi, slot_n, rng):
    """Learn ``(x, c)`` with weight ``k`` at ``leaf``: counts, ranges, pending tests, tests.

    Returns the leaf's slot (-1 when it can never split).
    """
    node_count[t, leaf, c] += k
    s = node_slot[t, leaf]
    if s < 0:
        return s
    slot_n[t, s] += k
    for f in range(x.shape[0]):
        v = x[f]
        if v < slot_lo[t, s, f]:
            slot_lo[t, s, f] = v
        if v > slot_hi[t, s, f]:
            slot_hi[t, s, f] = v
    for m in range(slot_feature.shape[2]):
        f = slot_feature[t, s, m]
        thr = slot_threshold[t, s, m]
        if np.isnan(thr):
            lo = slot_lo[t, s, f]
            hi = slot_hi[t, s, f]
            if hi <= lo:
                continue
            thr = lo + uniform(rng, t) * (hi - lo)
            slot_threshold[t, s, m] = thr
        side = 0 if x[f] <= thr else 1
        slot_count[t, s, m, side, c] += k
    return s


@njit
def _discard_one(gamma, rng, tree_age, tree_oob_n, tree_oob_err):
    """Temporal knowledge weighting (Saffari et al. 2009, Alg. 2) for one learned instance.

    One tree is drawn uniformly among those older than ``1 / gamma``; it is to be replaced
    when its OOB error rate exceeds a uniform draw. Returns its index or -1.
    """
    n_trees = tree_age.shape[0]
    limit = 1.0 / gamma
    n_old = 0
    for t in range(n_trees):
        if tree_age[t] > limit:
            n_old += 1
    if n_old == 0:
        return -1
    r = randint(rng, n_trees, n_old)
    for t in range(n_trees):
        if tree_age[t] > limit:
            if r == 0:
                err = tree_oob_err[t] / tree_oob_n[t] if tree_oob_n[t] > 0.0 else 0.0
                return t if err > uniform(rng, n_trees) else -1
            r -= 1
    return -1


@njit
def _learn_rows(X, y, start, n_tests, min_samples, min_gain, max_depth, max_nodes, max_slots,
                gamma, lam, track, decay,
                node_feature, node_threshold, node_left, node_right, node_depth, node_slot,
                node_count, n_nodes, slot_feature, slot_threshold, slot_count, slot_lo, slot_hi,
                slot_n, slot_free, n_free, tree_age, tree_oob_n, tree_oob_err, feat_lo,
                feat_hi, rng, n_seen, n_replaced, imp_count, imp_oob, imp_delta, imp_scale,
                rng_imp, proba_out):
    """Learn rows ``start, start + 1, ...`` of ``(X, y)``, trees inside rows.

    When ``proba_out`` has one row per row of ``X`` (test-then-train), each row is first
    predicted by the forest as it stands (soft vote, left at zero when every tree abstains)
    and then learned; pass a ``(0, C)`` array to only learn.

    Returns ``(status, row)``: ``status`` is :data:`DONE` with ``row == len(X)``, or
    :data:`NODES_FULL` / :data:`SLOTS_FULL` with the first row not learned (nor predicted).
    """
    n_trees = node_feature.shape[0]
    n_rows = X.shape[0]
    node_cap = node_feature.shape[1]
    slot_cap = slot_free.shape[1]
    scratch = np.empty(node_count.shape[2])
    stamp = np.full(X.shape[1], -1, dtype=np.int64)
    need_oob = track or gamma > 0.0
    predict = proba_out.shape[0] == n_rows
    for i in range(start, n_rows):
        for t in range(n_trees):  # room for one split in every tree, checked before any change
            if n_nodes[t] + 2 > node_cap and node_cap < max_nodes:
                return NODES_FULL, i
            if n_free[t] < 1 and slot_cap < max_slots:
                return SLOTS_FULL, i
        x = X[i]
        c = y[i]
        if predict:
            _vote_row(x, node_feature, node_threshold, node_left, node_right, node_count,
                      proba_out[i])
        for f in range(x.shape[0]):
            if x[f] < feat_lo[f]:
                feat_lo[f] = x[f]
            if x[f] > feat_hi[f]:
                feat_hi[f] = x[f]
        w = 1.0
        if track:
            w = _advance_scale(imp_scale, imp_count, imp_oob, imp_delta, decay)
        for t in range(n_trees):
            k = poisson(rng, t, lam)
            if k > 0:
                # in-bag: walk to the leaf, feeding the importance counts of every node
                node = 0
                while True:
                    if track:
                        imp_count[t, node, c] += w * k
                    f = node_feature[t, node]
                    if f < 0:
                        break
                    node = node_left[t, node] if x[f] <= node_threshold[t, node] \
                        else node_right[t, node]
                tree_age[t] += k
                s = _update_leaf(t, node, x, c, float(k), node_count, node_slot, slot_feature,
                                 slot_threshold, slot_count, slot_lo, slot_hi, slot_n, rng)
                if s >= 0 and slot_n[t, s] >= min_samples and node_depth[t, node] < max_depth:
                    m, gain = _best_test(t, s, slot_threshold, slot_count, scratch)
                    if m >= 0 and gain >= min_gain:
                        _split_leaf(t, node, m, max_depth, track, w, node_feature,
                                    node_threshold, node_left, node_right, node_depth,
                                    node_slot, node_count, n_nodes, slot_feature,
                                    slot_threshold, slot_count, slot_lo, slot_hi, slot_n,
                                    slot_free, n_free, imp_count, rng)
            elif need_oob:
                leaf = find_leaf(node_feature[t], node_threshold[t], node_left[t],
                                 node_right[t], x)
                tree_oob_n[t] += 1.0
                best = -1
                best_n = 0.0
                for cc in range(node_count.shape[2]):
                    if node_count[t, leaf, cc] > best_n:
                        best_n = node_count[t, leaf, cc]
                        best = cc
                if best != c:
                    tree_oob_err[t] += 1.0
                if track:
                    _update_mda(t, x, c, w, leaf, node_feature, node_threshold, node_left,
                                node_right, node_count, imp_count, imp_oob, imp_delta,
                                rng_imp, stamp)
        if gamma > 0.0:
            t = _discard_one(gamma, rng, tree_age, tree_oob_n, tree_oob_err)
            if t >= 0:
                if track:
                    _reset_tree_importance(t, n_nodes[t], imp_count, imp_oob, imp_delta)
                _reset_tree(t, max_depth, node_feature, node_threshold, node_left, node_right,
                            node_depth, node_slot, node_count, n_nodes, slot_feature,
                            slot_threshold, slot_count, slot_lo, slot_hi, slot_n, slot_free,
                            n_free, tree_age, tree_oob_n, tree_oob_err, feat_lo, feat_hi, rng)
                n_replaced[0] += 1
        n_seen[0] += 1
    return DONE, n_rows


@njit
def _vote_row(x, node_feature, node_threshold, node_left, node_right, node_count, out):
    """Soft vote for one row into ``out`` (zeros): mean of the trees' leaf distributions.

    Trees whose leaf is still empty (fresh trees) abstain. Returns the number of votes; with
    none, ``out`` stays zero.
    """
    n_classes = node_count.shape[2]
    n_votes = 0
    for t in range(node_feature.shape[0]):
        leaf = find_leaf(node_feature[t], node_threshold[t], node_left[t], node_right[t], x)
        total = 0.0
        for c in range(n_classes):
            total += node_count[t, leaf, c]
        if total <= 0.0:
            continue
        n_votes += 1
        for c in range(n_classes):
            out[c] += node_count[t, leaf, c] / total
    if n_votes > 0:
        for c in range(n_classes):
            out[c] /= n_votes
    return n_votes


@njit
def _predict_proba_rows(X, node_feature, node_threshold, node_left, node_right, node_count,
                        out):
    """Soft vote of every row of ``X`` into ``out`` (zeros, shape ``(n, C)``).

    A row on which every tree abstains gets the uniform distribution.
    """
    n_classes = node_count.shape[2]
    for i in range(X.shape[0]):
        n_votes = _vote_row(X[i], node_feature, node_threshold, node_left, node_right,
                            node_count, out[i])
        if n_votes == 0:
            for c in range(n_classes):
                out[i, c] = 1.0 / n_classes
