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
the features). A tree that searches every one of its features at every split (up to 16)
takes each feature's in-bag rows in order off the block's sorted columns once
(:func:`sort_columns`; the ranker keeps them from one forest to the next and merges in the
rows written since, :func:`update_columns`) and splits these lists with its nodes
(:func:`_split_lists`), so a level costs ``O(features * rows)``. A tree that draws a few of
its features per split reads a node of more than :data:`SMALL_NODE` rows in a feature's
order off the block's column, and a smaller node sorts its own rows. A tree then costs
``O(depth * n_split * rows)`` and a forest's columns ``O(features * rows)``, with no sort.

Cost. At the default settings (10 trees of depth 4 on 100 rows, every 10 rows) a forest on
4 features is about 7,500 steps of its scans and a few thousand of its lists' splits, so
what surrounds them counts: a forest allocates its arrays once (:func:`tree_scratch`), the
trees' helpers count no references (``_nrt=False``: two atomic operations per array
argument and call cost more than the scans), rows are sent to their side without a branch
on it, a scan reads its values in order (not through its rows), a binary stream's scans
move two sums per row (:func:`_scan_two`), and the lists of rows are unsigned (numba then
indexes without a check for negative indices). A 4-feature stream's forest takes about 2.5
times less time than when each node walked the block's columns and each tree allocated its
arrays, a 90- or 500-feature stream's about 1.3 times less.

Split choice, as in :mod:`models.cart._cart`: the score of a candidate is scikit-learn's Gini proxy
``sum_k l_k**2 / n_l + sum_k r_k**2 / n_r``, its threshold the midpoint of the two values
around it (the lower value when the midpoint rounds up onto the upper one); ties go to the
first feature searched and then to the lowest threshold. A node whose drawn features are all
constant in it draws more, until one splits it or the tree's features run out (scikit-learn
does the same).
"""

from __future__ import annotations

import math

import numpy as np

from ..core._jit import njit
from ..core._rng import next_u64, pick_next, shuffle
from ..core._stats import normalise
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
    root = math.isqrt(n_features - 1) + 1 if n_features > 0 else 0  # ceil(sqrt(n_features))
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


@njit(inline="always")
def candidate(q, X, features, pool, n_split, rng, lists, columns, rows, node_of, v, lo, hi,
              ids, vals):
    """``(f, rows)``: the ``q``-th candidate feature of node ``v``'s split search (its rows
    ``rows[lo:hi]``) and those rows in increasing order of it, their values into ``vals``.
    When ``n_split`` covers ``features``, ``features[q]``, read off the tree's sorted
    ``lists`` (:func:`_root_lists`); else the next of a partial shuffle of ``pool`` (drawn
    without replacement), read off the block's column (:func:`_node_column`) into ``ids``."""
    if n_split >= features.shape[0]:
        f = features[q]
        rows_q = lists[q][lo:hi]
        for k in range(hi - lo):
            # the values in the list's order, as the columns hold them: a scan that read
            # them through its rows (``X[i, f]``) would run slower
            vals[k] = X[rows_q[k], f]
        return f, rows_q
    f = pick_next(rng, 0, pool, q)
    _node_column(X, f, columns, rows, node_of, v, lo, hi, ids, vals)
    return f, ids


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
    increasing order of their values ``vals[:n]``; ``best`` (``[score, feature, threshold,
    at]``, :func:`_keep`) takes a split that scores higher.

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
        _keep(f, vals, at, top, best)


@njit(_nrt=False)
def _scan_two(f, ids, vals, n, codes, weight, count_v, n_v, best):
    """:func:`_scan` for two classes: the left side's weight and its weight of class 1 are
    all a row moves (two sums, no array to read back), the sums of squares are taken at the
    candidates only.

    The weights are bootstrap counts, integers: every sum and square here is an integer
    below ``2**53``, so exact, and equal to the sums :func:`_scan` moves row by row; the
    scores are its scores bit for bit.
    """
    n_0, n_1 = count_v[0], count_v[1]
    left_n, left_1, last = 0.0, 0.0, 0.0
    top, at = best[0], -1
    for k in range(n):
        x = vals[k]
        if k > 0 and x > last:
            left_0 = left_n - left_1
            right_0, right_1 = n_0 - left_0, n_1 - left_1
            score = ((left_0 * left_0 + left_1 * left_1) / left_n
                     + (right_0 * right_0 + right_1 * right_1) / (n_v - left_n))
            if score > top:
                top = score
                at = k
        i = ids[k]
        w = weight[i]
        left_n += w
        left_1 += w * codes[i]
        last = x
    if at >= 0:
        _keep(f, vals, at, top, best)


@njit(inline="always")
def _keep(f, vals, at, top, best):
    """A scan's best split, between its rows ``at - 1`` and ``at``, into ``best``: the
    midpoint of their values (the lower value when it rounds up onto the upper one), and
    ``at``, where the right side starts among the rows."""
    lo, hi = vals[at - 1], vals[at]
    best[0] = top
    best[1] = f
    t = lo / 2.0 + hi / 2.0
    best[2] = lo if t >= hi else t
    best[3] = at


@njit(inline="always")
def _scan_any(f, ids, vals, n, codes, weight, count_v, n_v, sq_v, left, best):
    """:func:`_scan_two` for two classes, :func:`_scan` for more."""
    if count_v.shape[0] == 2:
        _scan_two(f, ids, vals, n, codes, weight, count_v, n_v, best)
    else:
        _scan(f, ids, vals, n, codes, weight, count_v, n_v, sq_v, left, best)


@njit(_nrt=False)
def _search_node(X, columns, rows, node_of, v, codes, weight, lo, hi, count_v, features, pool,
                 n_split, rng, lists, vals, ids, left, best):
    """Best split of node ``v`` (its rows ``rows[lo:hi]``): over ``features`` in their order
    when ``n_split`` covers them, reading each feature's rows off the tree's sorted ``lists``
    (:func:`_root_lists`), else over ``n_split`` of them drawn without replacement (a
    partial shuffle of ``pool``), more while none splits the node, each read off the
    block's column (:func:`_node_column`)."""
    n_v, sq_v = 0.0, 0.0
    for c in range(count_v.shape[0]):
        n_v += count_v[c]
        sq_v += count_v[c] * count_v[c]
    best[0] = -np.inf
    best[1] = -1.0
    n_feat = features.shape[0]
    for q in range(n_feat):
        if q >= n_split and best[1] >= 0.0:
            return
        f, ids_f = candidate(q, X, features, pool, n_split, rng, lists, columns, rows,
                             node_of, v, lo, hi, ids, vals)
        _scan_any(f, ids_f, vals, hi - lo, codes, weight, count_v, n_v, sq_v, left, best)


@njit(_nrt=False)
def partition_rows(X, rows, node_of, lo, hi, f, threshold, a, spare):
    """Put the rows of ``rows[lo:hi]`` going left (to node ``a``) first, those going right
    (to ``a + 1``) after, both in their order; return where the right side starts (the
    classification and the regression block trees both split so).

    Every row is written to both sides' next place and only the place of its own side moves
    on: a branch on the side would be mispredicted for half the rows."""
    m, r = lo, 0
    for s in range(lo, hi):
        i = rows[s]
        right = not X[i, f] <= threshold
        rows[m] = i  # m <= s: a place already read
        spare[r] = i
        node_of[i] = a + right
        m += not right
        r += right
    for s in range(r):
        rows[m + s] = spare[s]
    return m


@njit(_nrt=False)
def _partition(X, rows, node_of, codes, weight, lo, hi, f, threshold, a, spare, count):
    """:func:`partition_rows`, then each side's classes counted (``count[a]``,
    ``count[a + 1]``), its rows' weights added in their order."""
    m = partition_rows(X, rows, node_of, lo, hi, f, threshold, a, spare)
    count[a, :] = 0.0
    count[a + 1, :] = 0.0
    for s in range(lo, hi):
        i = rows[s]
        count[node_of[i], codes[i]] += weight[i]
    return m


@njit(_nrt=False)
def _split_at(ids, lo, mid, hi, node_of, v, a, codes, weight, count):
    """:func:`_partition` of node ``v`` for a tree with sorted lists: ``ids[lo:hi]``, the
    node's rows in the order of the split's feature, go left before ``mid`` (the scan's
    ``at``: the rows up to the threshold) and right from it. Nothing moves (the lists
    follow, :func:`_split_lists`); the left side's classes are counted, the right side's are
    the node's less them (integer weights: exact, the sums :func:`_partition` takes)."""
    count[a, :] = 0.0
    for k in range(lo, mid):
        i = ids[k]
        node_of[i] = a
        count[a, codes[i]] += weight[i]
    for k in range(mid, hi):
        node_of[ids[k]] = a + 1
    for c in range(count.shape[1]):
        count[a + 1, c] = count[v, c] - count[a, c]


@njit(inline="always")
def _index(values, x):
    """Where ``x`` is in ``values`` (it is)."""
    q = 0
    while values[q] != x:
        q += 1
    return q


@njit(_nrt=False)
def _root_lists(columns, features, node_of, m, lists):
    """Each feature's in-bag rows in its order (the ``m`` rows of node 0), off the block's
    sorted columns: row ``q`` of ``lists`` for ``features[q]``."""
    order = columns[0]
    for q in range(features.shape[0]):
        f = features[q]
        k = 0
        for s in range(order.shape[1]):
            if k == m:
                break
            # written whatever the row's node, kept by moving on only for the node's rows
            # (no branch to mispredict; the lists hold one spare place)
            i = order[f, s]
            lists[q, k] = i
            k += node_of[i] == 0


@njit(_nrt=False)
def _split_lists(lists, children, n_feat, node_of, lo, mid, hi, a):
    """Each list's part of a node (``lists[:, lo:hi]``, :func:`_root_lists`) split as
    :func:`_partition` split its rows, into ``children``: the rows now of node ``a`` in
    ``[lo, mid)``, the others in ``[mid, hi)``, both in the list's order, so each child's
    part holds its rows in the feature's order."""
    for q in range(n_feat):
        m, r = lo, mid
        for s in range(lo, hi):
            i = lists[q, s]
            go_left = node_of[i] == a
            children[q, m if go_left else r] = i
            m += go_left
            r += not go_left


@njit(_nrt=False)
def in_bag_rows(weight, rows, node_of):
    """The rows a tree grows on: those of positive weight, all at the root.

    Parameters
    ----------
    weight : ndarray of shape (n,)
        Each row's bootstrap weight (0 for a row out of the bag).
    rows : ndarray of shape (n,), uint64
        Receives the in-bag rows in increasing order in ``rows[:m]`` (the rest is scratch
        for the partitions of the nodes).
    node_of : ndarray of shape (n,), int64
        Receives each row's node: 0 (the root) in the bag, -1 out of it.

    Returns
    -------
    m : int
        The number of in-bag rows.
    """
    m = 0
    for i in range(weight.shape[0]):
        # every row written to the next place (m <= i), kept by moving on only for a row in
        # the bag: no branch to mispredict on a coin flip
        in_bag = weight[i] > 0.0
        rows[m] = i
        node_of[i] = in_bag - 1
        m += in_bag
    return m


@njit(_nrt=False)
def _weighted_gini(counts):
    """``counts.sum() * gini(counts)`` (:func:`models.core._stats.gini`), the same sums in
    the same order in one call."""
    total = 0.0
    for k in range(counts.shape[0]):
        total += counts[k]
    if total <= 0.0:
        return total * 0.0
    s = 0.0
    for k in range(counts.shape[0]):
        p = counts[k] / total
        s += p * p
    return total * (1.0 - s)


@njit(_nrt=False)
def _decrease(count, count_l, count_r):
    """``n_v G_v - n_l G_l - n_r G_r``, the sums and impurities as :func:`models.cart._cart.mdi`
    takes them."""
    return _weighted_gini(count) - _weighted_gini(count_l) - _weighted_gini(count_r)


@njit
def tree_scratch(n, n_classes, max_depth, n_lists):
    """The arrays :func:`tree_importances` works in, for trees on ``n`` rows with sorted
    lists for up to ``n_lists`` features: allocated once per forest, every tree overwrites
    what it reads.

    The lists of rows are unsigned: numba indexes an array with an unsigned integer as it
    is, where a signed one is first checked for a negative value to wrap around, three
    instructions per read in the trees' innermost loops."""
    n_slots = 2 ** (max_depth + 1) - 1
    return (np.empty(n, np.uint64), np.empty(n, np.int64), np.empty((n_slots, n_classes)),
            np.empty(n_slots, np.int64), np.empty(n_slots, np.int64), np.empty(n + 1),
            np.empty(n + 1, np.uint64), np.empty(n, np.uint64), np.empty(n_classes),
            np.empty(4), np.empty((n_lists, n + 1), np.uint64),
            np.empty((n_lists, n + 1), np.uint64))


@njit(_nrt=False)
def tree_importances(X, columns, codes, weight, features, pool, n_split, max_depth, rng,
                     scratch, forest, tree):
    """Grow one tree on the rows of positive ``weight`` and add each split's Gini decrease
    over the root's weight to ``forest[feature]`` and ``tree[feature]``.

    ``columns`` is ``(order, values)`` of :func:`sort_columns`, ``pool`` as long as
    ``features`` (the draws of the splits shuffle it), ``scratch`` of :func:`tree_scratch`
    (with lists for ``features`` when ``n_split`` covers them). Nodes are split level by
    level, in the order :mod:`models.cart._cart` numbers them, so the decreases add up in
    the order :func:`models.cart._cart.mdi` adds them.

    When every split searches every feature, the tree keeps each feature's rows in its
    order, node by node (:func:`_root_lists`, :func:`_split_lists`, as scikit-learn's
    presorting did): a level costs ``O(features * rows)``, where reading every node's rows
    off the block's columns costs a walk over the block per node and feature, and a small
    node an insertion sort; a node then splits where its scan found the split, in the split
    feature's list (:func:`_split_at`). A tree searching a few features per split reads them
    off the columns (:func:`_node_column`) and partitions its rows (:func:`_partition`):
    keeping every feature's lists would cost more.

    Allocates nothing (and counts no references: ``_nrt=False``): a forest's trees share
    its scratch, and the helpers it calls for every node and feature take a dozen arrays,
    whose reference counts (atomic, two per array and call) cost more than the scans did.
    """
    rows, node_of, count, start, stop, vals, ids, spare, left, best, lists, children = scratch
    m = in_bag_rows(weight, rows, node_of)
    count[0, :] = 0.0
    for s in range(m):
        count[0, codes[rows[s]]] += weight[rows[s]]
    start[0], stop[0] = 0, m
    root = 0.0
    for c in range(count.shape[1]):
        root += count[0, c]
    if root <= 0.0:
        return
    n_feat = features.shape[0]
    presorted = n_split >= n_feat
    if presorted:
        _root_lists(columns, features, node_of, m, lists)
    for q in range(n_feat):  # a slice assignment could allocate a copy
        pool[q] = features[q]
    lo, hi, n_nodes = 0, 1, 1
    for depth in range(max_depth):
        first_child = n_nodes
        for v in range(lo, hi):
            if not impure(count[v]):
                continue
            _search_node(X, columns, rows, node_of, v, codes, weight, start[v], stop[v],
                         count[v], features, pool, n_split, rng, lists, vals, ids, left, best)
            f = int(best[1])
            if f < 0:
                continue
            a, b = n_nodes, n_nodes + 1
            n_nodes += 2
            if presorted:
                mid = start[v] + int(best[3])
                _split_at(lists[_index(features, f)], start[v], mid, stop[v], node_of, v, a,
                          codes, weight, count)
            else:
                mid = _partition(X, rows, node_of, codes, weight, start[v], stop[v], f, best[2],
                                 a, spare, count)
            start[a], stop[a], start[b], stop[b] = start[v], mid, mid, stop[v]
            dec = _decrease(count[v], count[a], count[b])
            forest[f] += 1.0 * dec / root
            tree[f] += 1.0 * dec / root
            if presorted and depth + 1 < max_depth and (impure(count[a]) or impure(count[b])):
                # the children's lists, for the next level's search (a node's rows keep
                # their places, so the next level's nodes are all in ``children``)
                _split_lists(lists, children, n_feat, node_of, start[v], mid, stop[v], a)
        if n_nodes == first_child:
            break
        lo, hi = first_child, n_nodes
        lists, children = children, lists


@njit(_nrt=False)
def class_layout(codes, class_rows, class_start):
    """:func:`models.cart._cart.class_layout` into ``class_rows`` (the rows by class, in row
    order within a class: a stable sort) and ``class_start`` (``n_classes + 1`` offsets)."""
    class_start[:] = 0
    for i in range(codes.shape[0]):
        class_start[codes[i] + 1] += 1
    for k in range(1, class_start.shape[0]):
        class_start[k] += class_start[k - 1]
    for i in range(codes.shape[0]):  # class_start[k] is the next free place of class k - 1
        class_rows[class_start[codes[i]]] = i
        class_start[codes[i]] += 1
    for k in range(class_start.shape[0] - 1, 0, -1):
        class_start[k] = class_start[k - 1]
    class_start[0] = 0


@njit
def forest_importances(X, columns, codes, n_classes, n_trees, p_all, n_split, max_depth, rng,
                       forest, per_tree):
    """MDI of a forest of ``n_trees`` trees on one block: ``forest`` (normalised to sum to 1)
    and each tree's (``per_tree``, normalised per tree; a row of zeros: no split).

    ``columns`` is ``(order, values)`` of the block (:func:`sort_columns`), ``codes`` the
    rows' classes, of ``n_classes`` classes (or up to the largest code, when that is more).
    Each tree gets its own generator seeded from the forest's (one step of ``rng[0]`` per
    tree), its feature subset (:func:`models.cart._cart.draw_mask` with ``p_all``), shuffled
    for the tie-break order, and its stratified bootstrap, drawn as
    :func:`models.cart._cart.grow_forest` draws them (on :func:`class_layout`); then the
    per-node draws of ``n_split`` features. The arrays are allocated once for the forest.
    """
    n, d = X.shape
    forest[:] = 0.0
    per_tree[:, :] = 0.0
    for i in range(n):
        n_classes = max(n_classes, codes[i] + 1)
    class_rows, class_start = np.empty(n, np.int64), np.empty(n_classes + 1, np.int64)
    class_layout(codes, class_rows, class_start)
    ones, weight = np.ones(n), np.empty(n)
    mask, features, pool = np.zeros(d, np.int64), np.empty(d, np.int64), np.empty(d, np.int64)
    scratch = tree_scratch(n, n_classes, max_depth, min(d, n_split))
    tree_rng = np.empty(1, np.uint64)
    for t in range(n_trees):
        tree_rng[0] = next_u64(rng, 0)
        draw_mask(tree_rng, 0, 0, 0.0, p_all, mask)
        n_feat = 0
        for j in range(d):  # np.flatnonzero(mask)
            if mask[j] != 0:
                features[n_feat] = j
                n_feat += 1
        shuffle(tree_rng, 0, features[:n_feat])
        stratified_bootstrap(tree_rng, 0, class_rows, class_start, ones, weight)
        tree_importances(X, columns, codes, weight, features[:n_feat], pool[:n_feat], n_split,
                         max_depth, tree_rng, scratch, forest, per_tree[t])
    normalise(forest)
    for t in range(n_trees):
        normalise(per_tree[t])


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


@njit
def update_ring_columns(X, end, fresh, order, values, scratch):
    """:func:`update_columns` after the ``fresh`` rows before slot ``end`` of the block (a
    ring: they wrap around its end) were overwritten."""
    n = X.shape[0]
    changed = np.zeros(n, np.bool_)
    for j in range(fresh):
        changed[(end - fresh + j) % n] = True
    update_columns(X, changed, order, values, scratch)
