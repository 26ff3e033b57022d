"""CART classification trees grown level by level over columns prepared once per batch.

The batch learner of :mod:`models.cart.feature_stream_forest`: Breiman's CART with the Gini
criterion, the best split over every feature the tree was given (no further sampling per
node), a depth limit and nothing else to stop growth, as scikit-learn's
``DecisionTreeClassifier(max_depth=6)`` that Motl & Kordík (2019) use.

Layout. A tree is the structure-of-arrays of :mod:`models.core._trees` (``node_feature``,
``node_threshold``, ``node_left``, ``node_right``; ``-1`` marks a leaf) plus ``node_count``,
the weighted class counts of the training rows that reached each node. Leaves predict their
class frequencies; inner nodes keep their counts for the impurity-decrease importances
(:func:`mdi`). Nodes are numbered level by level, so a child always has a larger id than its
parent, which a restored state can check to rule out cycles.

Growth. A bootstrap is a weight per row (how many times it was drawn), so a tree needs no
copy of the data. Trees grow level by level: all nodes of a depth are searched together, each
feature in ``O(rows of the level's open nodes)``, and a whole tree in ``max_depth`` such rounds,
with no sorting or partitioning per node. Two searches, which choose the same splits:

* *scan*: the column's rows in increasing order of value (sorted once per batch by
  :func:`models.cart._cart_columns.prepare_columns`, shared by the batch's trees) update the running
  left class counts of each row's node; where a row's value differs from the previous one in
  its node, the split between them is scored. A tree copies the rows it still needs into its
  own lists on its first scan, and every scan drops rows of closed nodes from them;
* *histograms*, for columns with few distinct values (binary, one-hot, small integers): the
  rows of the level's open nodes, gathered once per level in row order, add their weight to
  their node's class counts for their value's rank (one byte per row and column, read almost
  in sequence), then each node walks its values in order. It replaces the scan while the
  level's nodes times the column's values stay within twice its rows, which holds on the
  shallow levels where most rows are.

Split choice. The score of a candidate is scikit-learn's Gini proxy
``sum_k l_k**2 / n_l + sum_k r_k**2 / n_r`` (maximising it minimises the weighted Gini of the
children); its threshold is the midpoint of the two values around it (the lower value when the
midpoint rounds up onto the upper one). A node splits when it holds two classes and some
feature has two distinct values in it, even when the best split leaves the impurity as it is
(as scikit-learn does with ``min_impurity_decrease=0``). Ties go to the first feature in the
tree's order (shuffled per tree, so no column is favoured) and then to the lowest threshold.
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit
from ..core._rng import next_u64, randint, shuffle, uniform
from ..core._stats import gini
from ..core._trees import find_leaf
from ._cart_columns import prepare_columns


def n_node_slots(max_depth: int) -> int:
    """Nodes of a full binary tree of depth ``max_depth``: the capacity of one tree."""
    return 2 ** (int(max_depth) + 1) - 1


@njit
def stratified_bootstrap(rng, i_rng, class_rows, class_start, sample_weight, row_weight):
    """Draw each class's rows with replacement, as many as the class has (Motl & Kordík).

    ``class_rows[class_start[k]:class_start[k + 1]]`` are the rows of class ``k``. A draw adds
    the row's ``sample_weight`` to ``row_weight`` (zeroed first), so a row drawn twice counts
    twice, as a duplicated row would in scikit-learn.
    """
    row_weight[:] = 0.0
    for k in range(class_start.shape[0] - 1):
        lo = class_start[k]
        m = class_start[k + 1] - lo
        for _ in range(m):
            r = class_rows[lo + randint(rng, i_rng, m)]
            row_weight[r] += sample_weight[r]


@njit(_nrt=False)
def impure(counts):
    """Whether more than one class has weight (a pure or empty node is a leaf)."""
    seen = 0
    for k in range(counts.shape[0]):
        if counts[k] > 0.0:
            seen += 1
    return seen > 1


@njit
def _scan_column(j, src_rows, src_values, src_codes, n_src, rows, values, codes, row_weight,
                 row_node, lo, hi, active, node_count, node_n, node_sq, left, left_n, left_sq,
                 right_sq, last, has_last, best_score, best_feature, best_threshold):
    """Score every split of column ``j`` in every active node with id in ``[lo, hi)``.

    Reads the column's first ``n_src`` entries (row, value, class) in sorted order and
    writes those of active nodes to ``rows, values, codes`` (which may be the source: the
    write position never passes the read position); returns how many it kept. Out-of-bag rows
    and rows of finished nodes thus leave the list once and are never read again.

    The sums of squared class weights of both sides are updated as each row crosses from
    right to left (``(a + w)^2 - a^2 = (2a + w) w``), so a candidate costs O(1) whatever the
    number of classes; with integer (bootstrap) weights these sums are exact.
    """
    for v in range(lo, hi):
        left[v, :] = 0.0
        left_n[v] = 0.0
        left_sq[v] = 0.0
        right_sq[v] = node_sq[v]
        has_last[v] = False
    kept = 0
    for s in range(n_src):
        i = src_rows[s]
        v = row_node[i]
        if v < lo or not active[v]:  # out of bag (-1) or in a finished node
            continue
        x = src_values[s]
        c = src_codes[s]
        rows[kept] = i
        values[kept] = x
        codes[kept] = c
        kept += 1
        if has_last[v] and x > last[v]:
            # Gini proxy of "x <= last | x > last": sum l_k^2 / n_l + sum r_k^2 / n_r
            score = left_sq[v] / left_n[v] + right_sq[v] / (node_n[v] - left_n[v])
            if score > best_score[v]:
                best_score[v] = score
                best_feature[v] = j
                t = last[v] / 2.0 + x / 2.0
                best_threshold[v] = last[v] if t >= x else t
        w = row_weight[i]
        a = left[v, c]
        left_sq[v] += (2.0 * a + w) * w
        right_sq[v] += (w - 2.0 * (node_count[v, c] - a)) * w
        left[v, c] = a + w
        left_n[v] += w
        last[v] = x
        has_last[v] = True
    return kept


@njit
def _active_rows(row_node, row_weight, codes, lo, active, act_rows, act_node, act_code, act_w):
    """Gather the rows of the level's active nodes (node relative to ``lo``); return how many."""
    m = 0
    for i in range(row_node.shape[0]):
        v = row_node[i]
        if v >= lo and active[v]:
            act_rows[m] = i
            act_node[m] = v - lo
            act_code[m] = codes[i]
            act_w[m] = row_weight[i]
            m += 1
    return m


@njit
def _hist_column(j, k, rank_j, distinct_j, act_rows, act_node, act_code, act_w, n_act, lo, hi,
                 active, node_count, node_n, hist, left, best_score, best_feature,
                 best_threshold):
    """Score every split of the ranked column ``j`` (``k`` distinct values) in the level's nodes.

    One pass adds each active row to its node's class histogram over the column's values;
    then each node walks its non-empty values in increasing order, which visits the same
    candidates in the same order, with the same scores, as the sorted scan.
    """
    n_classes = node_count.shape[1]
    hist[:(hi - lo) * k * n_classes] = 0.0
    for a in range(n_act):
        hist[(act_node[a] * k + rank_j[act_rows[a]]) * n_classes + act_code[a]] += act_w[a]
    for v in range(lo, hi):
        if not active[v]:
            continue
        base = (v - lo) * k * n_classes
        left[v, :] = 0.0
        nl = 0.0
        prev = -1
        for b in range(k):
            wb = 0.0
            for c in range(n_classes):
                wb += hist[base + b * n_classes + c]
            if wb <= 0.0:
                continue
            if prev >= 0:
                sl = 0.0
                sr = 0.0
                for c in range(n_classes):
                    lc = left[v, c]
                    rc = node_count[v, c] - lc
                    sl += lc * lc
                    sr += rc * rc
                score = sl / nl + sr / (node_n[v] - nl)
                if score > best_score[v]:
                    best_score[v] = score
                    best_feature[v] = j
                    x0, x1 = distinct_j[prev], distinct_j[b]
                    t = x0 / 2.0 + x1 / 2.0
                    best_threshold[v] = x0 if t >= x1 else t
            for c in range(n_classes):
                left[v, c] += hist[base + b * n_classes + c]
            nl += wb
            prev = b


@njit
def _split_level(lo, hi, n_nodes, best_feature, best_threshold, node_feature, node_threshold,
                 node_left, node_right):
    """Turn the level's nodes that found a split into inner nodes; return the new node count."""
    for v in range(lo, hi):
        if best_feature[v] >= 0:
            node_feature[v] = best_feature[v]
            node_threshold[v] = best_threshold[v]
            node_left[v] = n_nodes
            node_right[v] = n_nodes + 1
            n_nodes += 2
    return n_nodes


@njit
def _route_rows(X, codes, row_weight, row_node, lo, hi, node_feature, node_threshold,
                node_left, node_right, node_count):
    """Move the rows of the level's split nodes to their children and count them there."""
    for i in range(X.shape[0]):
        v = row_node[i]
        if v < lo or v >= hi or node_feature[v] < 0:
            continue
        c = node_left[v] if X[i, node_feature[v]] <= node_threshold[v] else node_right[v]
        row_node[i] = c
        node_count[c, codes[i]] += row_weight[i]


@njit
def _search_level(columns, features, codes, row_weight, row_node, lo, hi, active, node_count,
                  node_n, node_sq, scratch, lists, best_score, best_feature, best_threshold):
    """Best split of every active node of the level ``[lo, hi)`` over the tree's features.

    A ranked column is searched by histograms while the level's nodes times its distinct
    values stay within twice the active rows (a shallow level); otherwise by a scan of its
    sorted rows, from the batch's shared list until the tree has its own (``list_len < 0``).
    """
    order, values, sorted_codes, rank, distinct, n_distinct = columns
    left, left_n, left_sq, right_sq, last, has_last, hist, act_rows, act_node, act_code, \
        act_w = scratch
    list_rows, list_values, list_codes, list_len = lists
    n_act = _active_rows(row_node, row_weight, codes, lo, active, act_rows, act_node, act_code,
                         act_w)
    for q in range(features.shape[0]):
        j = features[q]
        k = n_distinct[j]
        if k >= 0 and (hi - lo) * k <= 2 * n_act:
            _hist_column(j, k, rank[j], distinct[j], act_rows, act_node, act_code, act_w,
                         n_act, lo, hi, active, node_count, node_n, hist, left, best_score,
                         best_feature, best_threshold)
            continue
        if list_len[q] < 0:
            src_rows, src_values, src_codes, n_src = order[j], values[j], sorted_codes[j], \
                order.shape[1]
        else:
            src_rows, src_values, src_codes, n_src = list_rows[q], list_values[q], \
                list_codes[q], list_len[q]
        list_len[q] = _scan_column(
            j, src_rows, src_values, src_codes, n_src, list_rows[q], list_values[q],
            list_codes[q], row_weight, row_node, lo, hi, active, node_count, node_n, node_sq,
            left, left_n, left_sq, right_sq, last, has_last, best_score, best_feature,
            best_threshold)


@njit
def _node_totals(lo, hi, node_count, active, node_n, node_sq, best_score, best_feature):
    """Start the level: which nodes may split, their weights; return how many may."""
    n_active = 0
    for v in range(lo, hi):
        active[v] = impure(node_count[v])
        n_active += active[v]
        node_n[v] = 0.0
        node_sq[v] = 0.0
        for k in range(node_count.shape[1]):
            node_n[v] += node_count[v, k]
            node_sq[v] += node_count[v, k] * node_count[v, k]
        best_score[v] = -np.inf
        best_feature[v] = -1
    return n_active


@njit
def grow_tree(X, codes, columns, features, row_weight, max_depth, node_feature, node_threshold,
              node_left, node_right, node_count):
    """Grow one CART tree on the rows weighted by ``row_weight``; return its node count.

    Parameters
    ----------
    X : float64 array (n_rows, n_columns)
        Training rows (for routing rows to children).
    codes : int64 array (n_rows,)
        Class index of each row.
    columns : tuple
        :func:`models.cart._cart_columns.prepare_columns` of ``X`` and ``codes``.
    features : int64 array
        Columns the tree may split on, in the order ties are broken.
    row_weight : float64 array (n_rows,)
        Bootstrap weight of each row; rows of weight 0 are out of bag.
    max_depth : int
        Depth of the deepest leaves (the root has depth 0).
    node_feature, node_threshold, node_left, node_right : arrays (n_node_slots,)
        The tree's node arrays (overwritten).
    node_count : float64 array (n_node_slots, n_classes)
        Weighted class counts per node (overwritten).
    """
    n, n_slots, n_classes, n_feat = X.shape[0], node_feature.shape[0], node_count.shape[1], \
        features.shape[0]
    node_feature[:] = -1
    node_threshold[:] = 0.0
    node_left[:] = -1
    node_right[:] = -1
    node_count[:, :] = 0.0
    row_node = np.full(n, -1, np.int64)
    for i in range(n):
        if row_weight[i] > 0.0:
            row_node[i] = 0
            node_count[0, codes[i]] += row_weight[i]
    # per-node state of the split search, indexed by node id
    active = np.zeros(n_slots, np.bool_)
    node_n, node_sq = np.zeros(n_slots), np.zeros(n_slots)
    best_score, best_threshold = np.zeros(n_slots), np.zeros(n_slots)
    best_feature = np.full(n_slots, -1, np.int64)
    scratch = (np.zeros((n_slots, n_classes)), np.zeros(n_slots), np.zeros(n_slots),
               np.zeros(n_slots), np.zeros(n_slots), np.zeros(n_slots, np.bool_),
               np.empty(2 * n * n_classes), np.empty(n, np.int64), np.empty(n, np.int64),
               np.empty(n, np.int64), np.empty(n))
    # the tree's own sorted lists, one per feature, built by its first scan of the feature
    # from the batch's shared ones and shrunk in place by every later scan
    lists = (np.empty((n_feat, n), np.int64), np.empty((n_feat, n)),
             np.empty((n_feat, n), np.int64), np.full(n_feat, -1, np.int64))
    lo, hi, n_nodes = 0, 1, 1
    for _ in range(max_depth):
        if _node_totals(lo, hi, node_count, active, node_n, node_sq, best_score,
                        best_feature) == 0:
            break
        _search_level(columns, features, codes, row_weight, row_node, lo, hi, active,
                      node_count, node_n, node_sq, scratch, lists, best_score, best_feature,
                      best_threshold)
        first_child = n_nodes
        n_nodes = _split_level(lo, hi, n_nodes, best_feature, best_threshold, node_feature,
                               node_threshold, node_left, node_right)
        if n_nodes == first_child:
            break
        _route_rows(X, codes, row_weight, row_node, lo, hi, node_feature, node_threshold,
                    node_left, node_right, node_count)
        lo, hi = first_child, n_nodes
    return n_nodes


@njit
def predict_proba_trees(X, node_feature, node_threshold, node_left, node_right, node_count,
                        tree_weight, out):
    """``out[r] = sum_t w_t P_t(x_r) / sum_t w_t`` over trees of positive weight.

    ``P_t`` is the class frequency of the leaf ``x_r`` reaches in tree ``t``. Rows where no
    tree has weight are left at zero.
    """
    n_classes = out.shape[1]
    norm = np.zeros(X.shape[0])
    for t in range(node_feature.shape[0]):
        w = tree_weight[t]
        if w <= 0.0:
            continue
        for r in range(X.shape[0]):
            leaf = find_leaf(node_feature[t], node_threshold[t], node_left[t], node_right[t],
                             X[r])
            total = 0.0
            for k in range(n_classes):
                total += node_count[t, leaf, k]
            if total <= 0.0:
                continue
            scale = w / total
            for k in range(n_classes):
                out[r, k] += scale * node_count[t, leaf, k]
            norm[r] += w
    for r in range(X.shape[0]):
        if norm[r] > 0.0:
            for k in range(n_classes):
                out[r, k] /= norm[r]


@njit
def _tree_decrease(t, node_feature, node_left, node_right, node_count, n_nodes, w, out):
    """Add ``w`` times tree ``t``'s impurity decreases, ``(n_v G_v - n_l G_l - n_r G_r) /
    n_root`` per split, to ``out[feature]``; nothing when the tree has no weight at its root."""
    root = node_count[t, 0].sum()
    if root <= 0.0:
        return
    for v in range(n_nodes[t]):
        f = node_feature[t, v]
        if f < 0:
            continue
        a, b = node_left[t, v], node_right[t, v]
        dec = (node_count[t, v].sum() * gini(node_count[t, v])
               - node_count[t, a].sum() * gini(node_count[t, a])
               - node_count[t, b].sum() * gini(node_count[t, b]))
        out[f] += w * dec / root


@njit
def mdi(node_feature, node_left, node_right, node_count, n_nodes, tree_weight, n_features):
    """Weighted mean decrease in Gini impurity per feature, normalised to sum to 1.

    Each split adds ``(n_v G_v - n_l G_l - n_r G_r) / n_root`` of its tree (Breiman's
    impurity importance; ``n`` are weighted row counts, ``G`` Gini impurities), and trees add
    up with the weights they vote with (``tree_weight``). All zeros when no tree split.
    """
    out = np.zeros(n_features)
    for t in range(node_feature.shape[0]):
        if tree_weight[t] > 0.0:
            _tree_decrease(t, node_feature, node_left, node_right, node_count, n_nodes,
                           tree_weight[t], out)
    total = out.sum()
    if total > 0.0:
        out /= total
    return out


@njit
def mdi_per_tree(node_feature, node_left, node_right, node_count, n_nodes, n_features):
    """Each tree's impurity importance, normalised to sum to 1 per tree: shape ``(T, F)``.

    The spread of a feature's importance across the trees of one forest tells how precisely
    the forest's mean estimates it (a row of zeros: the tree did not split).
    """
    out = np.zeros((node_feature.shape[0], n_features))
    for t in range(node_feature.shape[0]):
        _tree_decrease(t, node_feature, node_left, node_right, node_count, n_nodes, 1.0,
                       out[t])
        total = out[t].sum()
        if total > 0.0:
            out[t] /= total
    return out


def class_layout(codes, n_classes: int):
    """``(class_rows, class_start)`` for :func:`grow_forest`: the rows sorted by class (stable)
    and where each class begins among them (``n_classes + 1`` int64 offsets)."""
    class_rows = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=n_classes)
    return class_rows, np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


@njit
def draw_mask(rng, i_rng, n_old, p_old, p_all, mask):
    """One tree's feature subset: ``mask[j] = 1`` when the tree may split on column ``j``.

    ``p_all < 0`` (the challenger with new columns): each old column ``j < n_old`` is drawn
    with probability ``p_old`` and every new column is always taken, so a new column gets
    as many chances in this generation as it can. Otherwise every column is drawn with
    probability ``p_all`` and the draw is repeated until the subset is not empty (the
    authors' baseline rejects empty subsets the same way).
    """
    n = mask.shape[0]
    if p_all < 0.0:
        for j in range(n):
            mask[j] = 1 if j >= n_old or uniform(rng, i_rng) < p_old else 0
        return
    taken = 0
    while taken == 0:
        for j in range(n):
            mask[j] = 1 if uniform(rng, i_rng) < p_all else 0
            taken += mask[j]


@njit
def grow_forest(X, codes, sample_weight, class_rows, class_start, n_old, p_old, p_all,
                     max_depth, rng, masks, node_feature, node_threshold, node_left, node_right,
                     node_count, n_nodes):
    """Grow ``masks.shape[0]`` trees, each on its own features and stratified bootstrap.

    ``masks[t]`` receives tree ``t``'s features (:func:`draw_mask` with ``n_old``, ``p_old``,
    ``p_all``); ``class_rows`` lists the rows by class and ``class_start`` where each class
    begins in it (the stratified bootstrap's input).

    Each tree gets its own generator seeded from the forest's (one step of ``rng[0]`` per
    tree), so a tree's draws do not depend on how the others went.
    """
    columns = prepare_columns(X, codes)
    row_weight = np.empty(X.shape[0])
    tree_rng = np.empty(1, np.uint64)
    for t in range(masks.shape[0]):
        tree_rng[0] = next_u64(rng, 0)
        draw_mask(tree_rng, 0, n_old, p_old, p_all, masks[t])
        features = np.flatnonzero(masks[t]).astype(np.int64)
        shuffle(tree_rng, 0, features)  # tie-break order of the split search
        stratified_bootstrap(tree_rng, 0, class_rows, class_start, sample_weight,
                                   row_weight)
        n_nodes[t] = grow_tree(X, codes, columns, features, row_weight, max_depth,
                                     node_feature[t], node_threshold[t], node_left[t],
                                     node_right[t], node_count[t])
