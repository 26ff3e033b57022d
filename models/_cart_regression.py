"""CART regression trees over several targets, grown only for their impurity importances.

The batch learner of the block-forest ranker on regression streams
(:class:`~models.block_forest_regression.BlockForestRegressionRanker`): Breiman's CART with
the squared-error criterion summed over the targets, each target standardised on the block
first (so that a target on a large scale does not decide every split), bootstrap rows, a
random feature subset per tree (:func:`models._cart.draw_mask`), the best split over those
features, a depth limit and nothing else to stop growth, as scikit-learn's multi-output
``DecisionTreeRegressor(max_depth=...)`` on standardised targets.

Only the importances are kept: a tree grows level by level (the rows are sorted once per
block and feature; each level scans every feature's order once, and a node's prefix sums of
the targets are its left child's statistics), and every split adds its weighted impurity
decrease ``(n_v S_v - n_l S_l - n_r S_r) / n_root`` (``S``: squared error around the node's
mean, summed over targets) to its feature, as :func:`models._cart.mdi` does with the Gini
impurity. No node arrays are stored.
"""

from __future__ import annotations

import numpy as np

from ._cart import draw_mask
from ._jit import njit
from ._rng import next_u64, randint, shuffle


@njit(inline="always")
def _parent_score(s, v, n):
    """``sum_j s_j**2 / n`` of node ``v``: its SSE is ``sum_j q_j`` minus this."""
    out = 0.0
    for j in range(s.shape[1]):
        out += s[v, j] * s[v, j] / n
    return out


@njit(inline="always")
def _split_score(s, ls, v, n, nl):
    """``sum_j l_j**2 / n_l + r_j**2 / n_r`` of a split of node ``v`` whose left child holds
    the prefix ``ls, nl``: the children's SSE is the node's ``sum_j q_j`` minus this, so
    maximising it minimises their SSE (the proxy scikit-learn maximises)."""
    out, nr = 0.0, n - nl
    for j in range(s.shape[1]):
        out += ls[v, j] * ls[v, j] / nl
        if nr > 0.0:
            rs = s[v, j] - ls[v, j]
            out += rs * rs / nr
    return out


@njit
def _level_totals(Y, w, row_node, n_open, s, q, n):
    """Weighted sums of the targets and of their squares summed over targets, and the weight
    of every open node."""
    s[:n_open] = 0.0
    q[:n_open] = 0.0
    n[:n_open] = 0.0
    for i in range(Y.shape[0]):
        v = row_node[i]
        if v < 0:
            continue
        n[v] += w[i]
        for j in range(Y.shape[1]):
            s[v, j] += w[i] * Y[i, j]
            q[v] += w[i] * Y[i, j] * Y[i, j]


@njit
def _scan_feature(X, Y, w, f, order_f, row_node, n_open, s, n, ls, nl, last,
                  best, best_f, best_t):
    """Score every split of feature ``f`` in every open node with one pass over the rows in
    increasing order of ``x_f``: a node's prefix sums are its left child's statistics."""
    ls[:n_open] = 0.0
    nl[:n_open] = 0.0
    for i in order_f:
        v = row_node[i]
        if v < 0:
            continue
        x = X[i, f]
        if nl[v] > 0.0 and x != last[v]:
            score = _split_score(s, ls, v, n[v], nl[v])
            if score > best[v]:
                best[v] = score
                best_f[v] = f
                t = 0.5 * (last[v] + x)
                best_t[v] = last[v] if t >= x else t  # the midpoint rounded onto x
        nl[v] += w[i]
        for j in range(Y.shape[1]):
            ls[v, j] += w[i] * Y[i, j]
        last[v] = x


@njit
def tree_decreases(X, Y, w, orders, features, max_depth, out):
    """Grow one tree level by level on rows of weight ``w > 0`` and add each split's impurity
    decrease over the root's weight to ``out[feature]``.

    ``orders[f]`` lists the rows in increasing order of ``x_f`` (shared by a forest's trees);
    each level scans it once per feature, so a tree costs ``O(depth * features * rows)``
    without sorting per node. Ties of the score go to the first feature of ``features`` and
    then to the lowest threshold.
    """
    rows, M = X.shape[0], Y.shape[1]
    width = 2 ** max_depth  # open nodes of the deepest level at most
    row_node = np.where(w > 0.0, 0, -1).astype(np.int64)
    # the tree's own orders hold only its bootstrap's rows (about a third are not drawn)
    drawn = np.empty((orders.shape[0], int((w > 0.0).sum())), np.int64)
    for f in features:
        k = 0
        for i in orders[f]:
            if w[i] > 0.0:
                drawn[f, k] = i
                k += 1
    s, ls = np.zeros((width, M)), np.zeros((width, M))
    q, n, nl, last, best, best_t, base = (np.zeros(width), np.zeros(width), np.zeros(width),
                                          np.zeros(width), np.zeros(width), np.zeros(width),
                                          np.zeros(width))
    best_f = np.zeros(width, np.int64)
    child_of = np.zeros(width, np.int64)
    n_open, root = 1, -1.0
    for _ in range(max_depth):
        _level_totals(Y, w, row_node, n_open, s, q, n)
        if root < 0.0:
            root = n[0]
        if root <= 0.0:
            return
        for v in range(n_open):
            base[v] = _parent_score(s, v, n[v]) if n[v] > 0.0 else 0.0
            # a split must lower the node's SSE (q - base) by more than rounding
            best[v] = base[v] + 1e-12 * q[v]
            best_f[v] = -1
        for f in features:
            _scan_feature(X, Y, w, f, drawn[f], row_node, n_open, s, n, ls, nl, last,
                          best, best_f, best_t)
        n_next = 0
        for v in range(n_open):
            if best_f[v] < 0:
                child_of[v] = -1
                continue
            out[best_f[v]] += (best[v] - base[v]) / root  # the node's SSE less its children's
            child_of[v] = n_next
            n_next += 2
        if n_next == 0:
            return
        for i in range(rows):
            v = row_node[i]
            if v < 0:
                continue
            c = child_of[v]
            row_node[i] = -1 if c < 0 else (c if X[i, best_f[v]] <= best_t[v] else c + 1)
        n_open = n_next


@njit
def forest_decreases(X, Y, n_trees, p_all, max_depth, rng, out):
    """``out[t]``: tree ``t``'s impurity decreases per feature (unnormalised), each tree on
    its own bootstrap of the rows and its own feature subset (:func:`models._cart.draw_mask`
    with ``p_all``); one step of ``rng[0]`` seeds each tree's generator, as in
    :func:`models._cart.grow_forest`. ``Y`` must be standardised already."""
    n, F = X.shape
    w = np.empty(n)
    mask = np.zeros(F, np.int64)
    orders = np.empty((F, n), np.int64)
    for f in range(F):
        orders[f] = np.argsort(X[:, f], kind="mergesort")
    tree_rng = np.empty(1, np.uint64)
    for t in range(n_trees):
        tree_rng[0] = next_u64(rng, 0)
        draw_mask(tree_rng, 0, F, 0.0, p_all, mask)
        features = np.flatnonzero(mask).astype(np.int64)
        shuffle(tree_rng, 0, features)  # tie-break order of the split search
        w[:] = 0.0
        for _ in range(n):
            w[randint(tree_rng, 0, n)] += 1.0
        tree_decreases(X, Y, w, orders, features, max_depth, out[t])
