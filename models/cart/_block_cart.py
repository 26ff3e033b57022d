"""CART classification trees of the block forests, grown only for their impurity importances.

The batch learner of :class:`~models.cart.block_forest.BlockForestRanker`: Breiman's CART with the
Gini criterion on a bootstrap of one block of rows (stratified, as :mod:`models.cart._cart` draws
it), a random feature subset per tree (:func:`models.cart._cart.draw_mask`), a depth limit, and at
every node the best split over ``n_split`` features drawn from the tree's (all of them when it
has no more: the trees of :mod:`models.cart._cart` then, split for split). Only the importances are
kept: every split adds its weighted Gini decrease ``(n_v G_v - n_l G_l - n_r G_r) / n_root``
to its feature, per tree and for the forest, in the order :func:`models.cart._cart.mdi` adds them.

Why another grower. The trees of :mod:`models.cart._cart` search every node of a level over every
feature of the tree, on columns sorted again for every forest: a tree costs ``O(depth *
features * rows)`` plus a sort of every column per block, which on a 500-feature stream was
nearly all of the default pipeline's time (a forest every 10 rows). Here each node keeps its
rows together (a partition of the in-bag rows, as scikit-learn's trees do) and searches
``n_split`` features (:func:`split_features`: every one up to 16, then the square root of
the features). A node of more than :data:`SMALL_NODE` rows reads its rows in a feature's order
off the block's sorted columns (:func:`sort_columns`; the ranker keeps them from one forest
to the next and merges in the rows written since, :func:`update_columns`); a smaller node
sorts its own rows. A tree then costs ``O(depth * n_split * rows)`` and a forest's columns
``O(features * rows)``, with no sort.

Split choice, as in :mod:`models.cart._cart`: the score of a candidate is scikit-learn's Gini proxy
``sum_k l_k**2 / n_l + sum_k r_k**2 / n_r``, its threshold the midpoint of the two values
around it (the lower value when the midpoint rounds up onto the upper one); ties go to the
first feature searched and then to the lowest threshold. A node whose drawn features are all
constant in it draws more, until one splits it or the tree's features run out (scikit-learn
does the same).
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit
from ..core._rng import next_u64, pick_next, shuffle
from ..core._stats import gini
from ._cart import draw_mask, impure, stratified_bootstrap

#: nodes of at most this many rows sort their own rows for each feature; larger ones walk the
#: block's sorted column
SMALL_NODE = 16

#: a split searches every feature of its tree up to this many; wider trees search the larger
#: of this and the square root of their features
SPLIT_FEATURES = 16


def split_features(n_features: int) -> int:
    """Features each split of a block tree searches on a stream of ``n_features``.

    Every one up to :data:`SPLIT_FEATURES` (the trees of :mod:`models.cart._cart`, split for
    split), then the larger of :data:`SPLIT_FEATURES` and ``ceil(sqrt(n_features))``, as a
    random forest draws its candidates per split: the cost of a tree then grows as the
    square root of the features instead of in proportion to them.

    >>> split_features(10), split_features(90), split_features(500)
    (10, 16, 23)
    """
    root = int(np.ceil(np.sqrt(n_features)))
    return min(n_features, max(SPLIT_FEATURES, root))


@njit(inline="always")
def _insert(vals, ids, k, x, i):
    """Insert value ``x`` of row ``i`` into the sorted ``vals[:k]`` (and ``ids[:k]``), after
    the values equal to it: rows inserted in row order keep that order among ties."""
    m = k
    while m > 0 and vals[m - 1] > x:
        vals[m] = vals[m - 1]
        ids[m] = ids[m - 1]
        m -= 1
    vals[m] = x
    ids[m] = i


@njit(_nrt=False)
def _node_column(X, f, columns, rows, node_of, v, lo, hi, ids, vals):
    """The rows of node ``v`` (``rows[lo:hi]``) in increasing order of feature ``f``, into
    ``ids[:n]`` and their values into ``vals[:n]``: a node of many rows is read off the
    block's sorted column, a small one sorts its own rows (insertion: fewer steps than a walk
    over the whole block)."""
    n = hi - lo
    if n > SMALL_NODE:
        order_f, values_f = columns[0][f], columns[1][f]
        k = 0
        for s in range(order_f.shape[0]):
            # written whatever the row's node, kept by moving on only for the node's rows:
            # no branch to mispredict on a coin flip (``ids`` and ``vals`` hold one spare)
            i = order_f[s]
            ids[k] = i
            vals[k] = values_f[s]
            k += node_of[i] == v
            if k == n:
                return
        return
    for k in range(n):
        i = rows[lo + k]
        _insert(vals, ids, k, X[i, f], i)


@njit(_nrt=False)
def _scan(f, ids, vals, n, codes, weight, count_v, n_v, sq_v, left, best):
    """Score every split of feature ``f`` in a node whose ``n`` rows are ``ids[:n]`` in
    increasing order of their values ``vals[:n]``; ``best`` (``[score, feature, threshold]``)
    takes a split that scores higher.

    The sums of squared class weights of both sides move as each row crosses from right to
    left (``(a + w)^2 - a^2 = (2a + w) w``); with integer (bootstrap) weights they are exact,
    so the scores are those of :func:`models.cart._cart._scan_column` bit for bit.
    """
    left[:] = 0.0
    left_n, left_sq, right_sq, last = 0.0, 0.0, sq_v, 0.0
    top, at = best[0], -1  # the best score so far and where this feature beat it last
    for k in range(n):
        x = vals[k]
        if k > 0 and x > last:
            score = left_sq / left_n + right_sq / (n_v - left_n)
            if score > top:
                top = score
                at = k
        i = ids[k]
        c = codes[i]
        w = weight[i]
        a = left[c]
        left_sq += (2.0 * a + w) * w
        right_sq += (w - 2.0 * (count_v[c] - a)) * w
        left[c] = a + w
        left_n += w
        last = x
    if at >= 0:
        best[0] = top
        best[1] = f
        lo, hi = vals[at - 1], vals[at]
        t = lo / 2.0 + hi / 2.0
        best[2] = lo if t >= hi else t


@njit
def _scan_feature(X, f, columns, rows, node_of, v, lo, hi, codes, weight, count_v, n_v, sq_v,
                  vals, ids, left, best):
    """Score every split of feature ``f`` in node ``v`` (its rows ``rows[lo:hi]``)."""
    _node_column(X, f, columns, rows, node_of, v, lo, hi, ids, vals)
    _scan(f, ids, vals, hi - lo, codes, weight, count_v, n_v, sq_v, left, best)


@njit
def _search_node(X, columns, rows, node_of, v, codes, weight, lo, hi, count_v, features, pool,
                 n_split, rng, vals, ids, left, best):
    """Best split of node ``v`` (its rows ``rows[lo:hi]``): over ``features`` in their order
    when ``n_split`` covers them, else over ``n_split`` of them drawn without replacement (a
    partial shuffle of ``pool``), more while none splits the node."""
    n_v, sq_v = 0.0, 0.0
    for c in range(count_v.shape[0]):
        n_v += count_v[c]
        sq_v += count_v[c] * count_v[c]
    best[0] = -np.inf
    best[1] = -1.0
    n_feat = features.shape[0]
    if n_split >= n_feat:
        for q in range(n_feat):
            _scan_feature(X, features[q], columns, rows, node_of, v, lo, hi, codes, weight,
                          count_v, n_v, sq_v, vals, ids, left, best)
        return
    for q in range(n_feat):
        if q >= n_split and best[1] >= 0.0:
            return
        f = pick_next(rng, 0, pool, q)
        _scan_feature(X, f, columns, rows, node_of, v, lo, hi, codes, weight, count_v, n_v,
                      sq_v, vals, ids, left, best)


@njit(_nrt=False)
def _partition(X, rows, node_of, codes, weight, lo, hi, f, threshold, a, b, spare, count_l,
               count_r):
    """Put the rows of ``rows[lo:hi]`` going left (to node ``a``) first, those going right
    (to ``b``) after, both in their order; count each side's classes; return where the right
    side starts."""
    count_l[:] = 0.0
    count_r[:] = 0.0
    m = lo
    r = 0
    for s in range(lo, hi):
        i = rows[s]
        if X[i, f] <= threshold:
            rows[m] = i
            m += 1
            node_of[i] = a
            count_l[codes[i]] += weight[i]
        else:
            spare[r] = i
            r += 1
            node_of[i] = b
            count_r[codes[i]] += weight[i]
    for s in range(r):
        rows[m + s] = spare[s]
    return m


@njit
def in_bag_rows(weight):
    """The rows a tree grows on: those of positive weight, all at the root.

    Parameters
    ----------
    weight : ndarray of shape (n,)
        Each row's bootstrap weight (0 for a row out of the bag).

    Returns
    -------
    rows : ndarray of shape (n,), int64
        The in-bag rows in increasing order in ``rows[:m]`` (the rest is scratch for the
        partitions of the nodes).
    node_of : ndarray of shape (n,), int64
        Each row's node: 0 (the root) in the bag, -1 out of it.
    m : int
        The number of in-bag rows.
    """
    n = weight.shape[0]
    rows = np.empty(n, np.int64)
    node_of = np.full(n, -1, np.int64)  # out of bag: -1
    m = 0
    for i in range(n):
        if weight[i] > 0.0:
            rows[m] = i
            node_of[i] = 0
            m += 1
    return rows, node_of, m


@njit
def _decrease(count, count_l, count_r):
    """``n_v G_v - n_l G_l - n_r G_r``, the sums and impurities as :func:`models.cart._cart.mdi`
    takes them."""
    return (count.sum() * gini(count) - count_l.sum() * gini(count_l)
            - count_r.sum() * gini(count_r))


@njit
def tree_importances(X, columns, codes, weight, features, n_split, max_depth, rng, n_classes,
                     forest, tree):
    """Grow one tree on the rows of positive ``weight`` and add each split's Gini decrease
    over the root's weight to ``forest[feature]`` and ``tree[feature]``.

    ``columns`` is ``(order, values)`` of :func:`sort_columns`. Nodes are split level by
    level, in the order :mod:`models.cart._cart` numbers them, so the decreases add up in the
    order :func:`models.cart._cart.mdi` adds them.
    """
    n_slots = 2 ** (max_depth + 1) - 1
    rows, node_of, m = in_bag_rows(weight)
    count = np.zeros((n_slots, n_classes))
    for s in range(m):
        count[0, codes[rows[s]]] += weight[rows[s]]
    start, stop = np.zeros(n_slots, np.int64), np.zeros(n_slots, np.int64)
    stop[0] = m
    root = count[0].sum()
    if root <= 0.0:
        return
    pool = features.copy()
    vals, ids, spare = np.empty(m + 1), np.empty(m + 1, np.int64), np.empty(m, np.int64)
    left, best = np.empty(n_classes), np.empty(3)
    lo, hi, n_nodes = 0, 1, 1
    for _ in range(max_depth):
        first_child = n_nodes
        for v in range(lo, hi):
            if not impure(count[v]):
                continue
            _search_node(X, columns, rows, node_of, v, codes, weight, start[v], stop[v],
                         count[v], features, pool, n_split, rng, vals, ids, left, best)
            f = int(best[1])
            if f < 0:
                continue
            a, b = n_nodes, n_nodes + 1
            n_nodes += 2
            mid = _partition(X, rows, node_of, codes, weight, start[v], stop[v], f, best[2], a,
                             b, spare, count[a], count[b])
            start[a], stop[a], start[b], stop[b] = start[v], mid, mid, stop[v]
            dec = _decrease(count[v], count[a], count[b])
            forest[f] += 1.0 * dec / root
            tree[f] += 1.0 * dec / root
        if n_nodes == first_child:
            break
        lo, hi = first_child, n_nodes


@njit
def forest_importances(X, columns, codes, n_classes, class_rows, class_start, n_trees, p_all,
                       n_split, max_depth, rng, forest, per_tree):
    """MDI of a forest of ``n_trees`` trees on one block: ``forest`` (normalised to sum to 1)
    and each tree's (``per_tree``, normalised per tree; a row of zeros: no split).

    ``columns`` is ``(order, values)`` of the block (:func:`sort_columns`). Each tree gets its
    own generator seeded from the forest's (one step of ``rng[0]`` per tree), its feature
    subset (:func:`models.cart._cart.draw_mask` with ``p_all``), shuffled for the tie-break order,
    and its stratified bootstrap, drawn as :func:`models.cart._cart.grow_forest` draws them; then
    the per-node draws of ``n_split`` features.
    """
    d = X.shape[1]
    forest[:] = 0.0
    per_tree[:, :] = 0.0
    weight = np.empty(X.shape[0])
    mask = np.zeros(d, np.int64)
    ones = np.ones(X.shape[0])
    tree_rng = np.empty(1, np.uint64)
    for t in range(n_trees):
        tree_rng[0] = next_u64(rng, 0)
        draw_mask(tree_rng, 0, 0, 0.0, p_all, mask)
        features = np.flatnonzero(mask).astype(np.int64)
        shuffle(tree_rng, 0, features)
        stratified_bootstrap(tree_rng, 0, class_rows, class_start, ones, weight)
        tree_importances(X, columns, codes, weight, features, n_split, max_depth, tree_rng,
                         n_classes, forest, per_tree[t])
    total = forest.sum()
    if total > 0.0:
        forest /= total
    for t in range(n_trees):
        total = per_tree[t].sum()
        if total > 0.0:
            per_tree[t] /= total


# ------------------------------------------------------------------ the block's sorted columns


@njit
def sort_columns(X, order, values):
    """Every column's rows in increasing order of value, ties by row (``order[f]``), and
    their values in that order (``values[f]``)."""
    for f in range(X.shape[1]):
        o = np.argsort(X[:, f], kind="mergesort")  # stable: ties keep the row order
        for s in range(X.shape[0]):
            order[f, s] = o[s]
            values[f, s] = X[o[s], f]


@njit
def update_columns(X, changed, order, values, scratch):
    """:func:`sort_columns` after the rows with ``changed`` set were overwritten, from the
    order before: the other rows keep their order, the new ones (sorted by insertion, few)
    are merged in. The result is the full sort's exactly (ties by row).

    ``scratch``: ``(changed rows, their sorted rows, their sorted values, kept rows, kept
    values)``, each one longer than the block (a sentinel ends each sorted list).
    """
    changed_rows, new_rows, new_vals, old_rows, old_vals = scratch
    n, k = X.shape[0], 0
    for i in range(n):
        if changed[i]:
            changed_rows[k] = i
            k += 1
    # inputs are finite (check_X), so an infinite value ends a list without a length test
    new_vals[k], new_rows[k] = np.inf, n
    for f in range(X.shape[1]):
        for q in range(k):  # insertion in row order, strict: ties keep the row order
            i = changed_rows[q]
            _insert(new_vals, new_rows, q, X[i, f], i)
        a = 0
        for s in range(n):  # the unchanged rows in their order, without a branch per row
            i = order[f, s]
            old_rows[a] = i
            old_vals[a] = values[f, s]
            a += not changed[i]
        old_vals[a], old_rows[a] = np.inf, n
        a, b = 0, 0
        for s in range(n):  # merge: a new row first when its value is smaller, or equal
            x, y = old_vals[a], new_vals[b]  # and its row lower
            take = y < x or (y == x and new_rows[b] < old_rows[a])
            order[f, s] = new_rows[b] if take else old_rows[a]
            values[f, s] = y if take else x
            b += take
            a += not take
