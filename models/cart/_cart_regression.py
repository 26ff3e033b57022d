"""CART regression trees over several targets, grown only for their impurity importances.

The batch learner of the block-forest ranker on regression streams
(:class:`~models.cart.block_forest_regression.BlockForestRegressionRanker`): Breiman's CART with
the squared-error criterion summed over the targets, each target standardised on the block
first (so that a target on a large scale does not decide every split), bootstrap rows, a
random feature subset per tree (:func:`models.cart._cart.draw_mask`), at every node the best split
over ``n_split`` features drawn from the tree's (all of them when it has no more), a depth
limit and nothing else to stop growth, as scikit-learn's multi-output
``DecisionTreeRegressor(max_depth=...)`` on standardised targets.

Only the importances are kept: every split adds its weighted impurity decrease ``(n_v S_v -
n_l S_l - n_r S_r) / n_root`` (``S``: squared error around the node's mean, summed over
targets) to its feature, as :func:`models.cart._cart.mdi` does with the Gini impurity. No node
arrays are stored. A tree grows as the classification trees of :mod:`models.cart._block_cart` do:
each node keeps its rows together, in increasing row order, and reads them in a feature's
order off the tree's lists split with its nodes (a tree searching every feature at every
split) or off the block's sorted columns (or sorts them, when few), so a tree costs
``O(depth * n_split * rows)`` and nothing is sorted per tree; a forest allocates its arrays
once (:func:`tree_scratch`). The sums run over the same rows in the same order as a scan of
every node of a level in the column's order did before, so with every feature searched at
every node the decreases are those trees' bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit
from ..core._rng import next_u64, randint, shuffle
from ._block_cart import _root_lists, _split_lists, candidate, in_bag_rows, partition_rows
from ._cart import draw_mask


@njit(_nrt=False)
def _node_totals(Y, w, rows, lo, hi, s_v):
    """The node's weight, its targets' weighted sums (into ``s_v``) and the weighted sum of
    their squares over the targets, over ``rows[lo:hi]`` in their order."""
    s_v[:] = 0.0
    n, q = 0.0, 0.0
    for k in range(lo, hi):
        i = rows[k]
        n += w[i]
        for j in range(Y.shape[1]):
            s_v[j] += w[i] * Y[i, j]
            q += w[i] * Y[i, j] * Y[i, j]
    return n, q


@njit(_nrt=False)
def _parent_score(s_v, n):
    """``sum_j s_j**2 / n`` of a node: its SSE is ``sum_j q_j`` minus this."""
    out = 0.0
    for j in range(s_v.shape[0]):
        out += s_v[j] * s_v[j] / n
    return out


@njit(_nrt=False)
def _scan(f, ids, vals, m, Y, w, s_v, n_v, ls, best):
    """Score every split of feature ``f`` in a node whose ``m`` rows are ``ids[:m]`` in
    increasing order of their values ``vals[:m]``: a prefix's sums are the left child's, and
    ``sum_j l_j**2 / n_l + r_j**2 / n_r`` is maximised (it minimises the children's SSE, the
    proxy scikit-learn maximises). ``best`` (``[score, feature, threshold]``) takes a split
    that scores higher."""
    ls[:] = 0.0
    nl, last = 0.0, 0.0
    for k in range(m):
        x = vals[k]
        i = ids[k]
        if nl > 0.0 and x != last:
            score, nr = 0.0, n_v - nl
            for j in range(s_v.shape[0]):
                score += ls[j] * ls[j] / nl
                if nr > 0.0:
                    rs = s_v[j] - ls[j]
                    score += rs * rs / nr
            if score > best[0]:
                best[0] = score
                best[1] = f
                t = 0.5 * (last + x)
                best[2] = last if t >= x else t  # the midpoint rounded onto x
        nl += w[i]
        for j in range(Y.shape[1]):
            ls[j] += w[i] * Y[i, j]
        last = x


@njit(_nrt=False)
def _search_node(X, Y, w, columns, rows, node_of, v, lo, hi, s_v, n_v, features, pool,
                 n_split, rng, lists, ids, vals, ls, best):
    """Best split of node ``v`` (its rows ``rows[lo:hi]``) over ``features`` in their order
    when ``n_split`` covers them, reading each feature's rows off the tree's sorted ``lists``
    (:func:`models.cart._block_cart._root_lists`), else over ``n_split`` of them drawn
    without replacement (a partial shuffle of ``pool``), more while none splits the node,
    each read off the block's column."""
    for q in range(features.shape[0]):
        if q >= n_split and best[1] >= 0.0:
            return
        f, ids_f = candidate(q, X, features, pool, n_split, rng, lists, columns, rows,
                             node_of, v, lo, hi, ids, vals)
        _scan(f, ids_f, vals, hi - lo, Y, w, s_v, n_v, ls, best)


@njit
def tree_scratch(n, n_targets, max_depth, n_lists):
    """The arrays :func:`tree_decreases` works in, for trees on ``n`` rows with sorted lists
    for up to ``n_lists`` features: allocated once per forest, every tree overwrites what it
    reads. The lists of rows are unsigned, as :func:`models.cart._block_cart.tree_scratch`
    says why."""
    n_slots = 2 ** (max_depth + 1) - 1
    return (np.empty(n, np.uint64), np.empty(n, np.int64), np.empty(n_slots, np.int64),
            np.empty(n_slots, np.int64), np.empty(n + 1, np.uint64), np.empty(n + 1),
            np.empty(n, np.uint64), np.empty(n_targets), np.empty(n_targets), np.empty(3),
            np.empty((n_lists, n + 1), np.uint64), np.empty((n_lists, n + 1), np.uint64))


@njit
def tree_decreases(X, Y, w, columns, features, n_split, max_depth, rng, out):
    """Grow one tree level by level on rows of weight ``w > 0`` and add each split's impurity
    decrease over the root's weight to ``out[feature]``.

    ``columns`` is ``(order, values)`` of :func:`models.cart._block_cart.sort_columns` (shared by a
    forest's trees). Ties of the score go to the first feature searched and then to the
    lowest threshold. A forest grows its trees in scratch it allocates once
    (:func:`_grow_tree`).
    """
    _grow_tree(X, Y, w, columns, features, np.empty_like(features), n_split, max_depth, rng,
               tree_scratch(X.shape[0], Y.shape[1], max_depth,
                            min(features.shape[0], n_split)), out)


@njit(_nrt=False)
def _grow_tree(X, Y, w, columns, features, pool, n_split, max_depth, rng, scratch, out):
    """:func:`tree_decreases` in ``scratch`` (:func:`tree_scratch`), ``pool`` as long as
    ``features`` (the draws of the splits shuffle it).

    When every split searches every feature, the tree keeps each feature's rows in its
    order, node by node, as the classification trees do
    (:func:`models.cart._block_cart.tree_importances`); the rows themselves stay in row
    order in each node, the order the node's sums are taken in.

    Allocates nothing (and counts no references, ``_nrt=False``: the helpers it calls for
    every node and feature take a dozen arrays, whose atomic reference counts cost more than
    the scans did)."""
    rows, node_of, start, stop, ids, vals, spare, s_v, ls, best, lists, children = scratch
    m = in_bag_rows(w, rows, node_of)
    start[0], stop[0] = 0, m
    n_feat = features.shape[0]
    presorted = n_split >= n_feat
    if presorted:
        _root_lists(columns, features, node_of, m, lists)
    for q in range(features.shape[0]):  # a slice assignment could allocate a copy
        pool[q] = features[q]
    lo, hi, n_nodes, root = 0, 1, 1, -1.0
    for depth in range(max_depth):
        first_child = n_nodes
        for v in range(lo, hi):
            n_v, q = _node_totals(Y, w, rows, start[v], stop[v], s_v)
            if root < 0.0:
                root = n_v
            if root <= 0.0:
                return
            base = _parent_score(s_v, n_v) if n_v > 0.0 else 0.0
            # a split must lower the node's SSE (q - base) by more than rounding
            best[0], best[1] = base + 1e-12 * q, -1.0
            _search_node(X, Y, w, columns, rows, node_of, v, start[v], stop[v], s_v, n_v,
                         features, pool, n_split, rng, lists, ids, vals, ls, best)
            f = int(best[1])
            if f < 0:
                continue
            out[f] += (best[0] - base) / root  # the node's SSE less its children's
            a, b = n_nodes, n_nodes + 1
            n_nodes += 2
            mid = partition_rows(X, rows, node_of, start[v], stop[v], f, best[2], a, spare)
            start[a], stop[a], start[b], stop[b] = start[v], mid, mid, stop[v]
            if presorted and depth + 1 < max_depth:  # the children are searched
                _split_lists(lists, children, n_feat, node_of, start[v], mid, stop[v], a)
        if n_nodes == first_child:
            return
        lo, hi = first_child, n_nodes
        lists, children = children, lists


@njit
def forest_decreases(X, Y, columns, n_trees, p_all, n_split, max_depth, rng, out):
    """``out[t]``: tree ``t``'s impurity decreases per feature (unnormalised), each tree on
    its own bootstrap of the rows and its own feature subset (:func:`models.cart._cart.draw_mask`
    with ``p_all``), ``n_split`` features searched per node; one step of ``rng[0]`` seeds
    each tree's generator, as in :func:`models.cart._cart.grow_forest`. ``Y`` must be
    standardised already; ``columns`` is the block's (:func:`models.cart._block_cart.sort_columns`).
    The arrays are allocated once for the forest."""
    n, F = X.shape
    w = np.empty(n)
    mask, features, pool = np.zeros(F, np.int64), np.empty(F, np.int64), np.empty(F, np.int64)
    scratch = tree_scratch(n, Y.shape[1], max_depth, min(F, n_split))
    tree_rng = np.empty(1, np.uint64)
    for t in range(n_trees):
        tree_rng[0] = next_u64(rng, 0)
        draw_mask(tree_rng, 0, F, 0.0, p_all, mask)
        n_feat = 0
        for j in range(F):  # np.flatnonzero(mask)
            if mask[j] != 0:
                features[n_feat] = j
                n_feat += 1
        shuffle(tree_rng, 0, features[:n_feat])  # tie-break order of the split search
        w[:] = 0.0
        for _ in range(n):
            w[randint(tree_rng, 0, n)] += 1.0
        _grow_tree(X, Y, w, columns, features[:n_feat], pool[:n_feat], n_split, max_depth,
                   tree_rng, scratch, out[t])
