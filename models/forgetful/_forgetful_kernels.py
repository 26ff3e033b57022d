"""Kernels of the forgetful decision tree (Yuan, Sun & Shasha, Algorithms 16(6):278, 2023).

A forgetful tree keeps the raw rows it retains and, per node, the node's rows ordered by each
candidate feature ("sorted per-feature values") or a value x class count table for
low-cardinality features ("count tables"). Each mini-batch it forgets old rows, merges the new
ones in, and re-decides every visited node's split: an unchanged split keeps the node's
children, which are then updated the same way; a changed split rebuilds the subtree; leaves and
nodes at the maximum height are rebuilt (paper Sec. 3.1 and Appendix A). The split rule is in
:mod:`models.forgetful._forgetful_split`.

Layout (one tree; a forest adds a leading tree axis to every array and passes views):

* retained rows, column-major: ``X[f, r]`` and class indices ``y[r]`` for rows ``r < n``.
  Rows are kept compact in arrival order: forgetting removes rows and shifts the others down,
  new rows are appended, so rows ``n_kept .. n - 1`` are exactly this batch's rows.
* ``sorted_rows[f, :n]``: all retained rows ordered by feature ``f`` (sparse features of the
  tree's subset). A batch *merges* the new rows into it, dropping the forgotten ones while
  merging, instead of sorting again; ``sorted_valid[f]`` is 0 when it must be built by sorting.
* The per-node sorted lists are the node's *segment* of a working copy of ``sorted_rows``: the
  root segment is ``[0, n)``, and a split stably partitions each parent segment into its
  children's segments, so every segment is the node's rows sorted by every feature; merging
  once at the root therefore merges the new rows into every node's lists. ``rows`` is the same
  partition of the row list (class counts and count tables are read from it). A child that
  will not search a split (at the maximum height, pure, or unchanged) is not given lists.
* nodes: structure of arrays as in :mod:`models.core._trees` (``node_feature`` -1 for leaves,
  ``x[f] <= threshold`` goes left) plus ``node_rows`` (rows at the node when last visited),
  ``node_counts`` (class counts, the leaf distribution) and ``node_class`` (majority class,
  lowest index on ties). Freed node ids go to a free list and are reused.

A node whose rows are unchanged since its last visit (no new row reached it, none was
forgotten, same maximum height) keeps its whole subtree without being visited: given the same
rows, the rebuild would produce the same subtree. Because a kept split is re-decided on exactly
the node's rows, the incrementally updated tree is the tree a from-scratch build on the
retained rows would give (tests check this against a plain-Python twin that keeps per-node
lists as the reference code does). Two differences with the reference code: a node whose rows
all become one class turns into a leaf (the reference keeps a useless split there; predictions
are the same), and a node whose rows share one value of every feature predicts the majority of
all its rows, as a rebuild does (the reference takes the majority of its new rows only).

Hot loops index with ``uint64`` (see :mod:`models.forgetful._forgetful_split`).
"""

from __future__ import annotations

import numpy as np

from ..core import _fmath as fm
from ..core._jit import njit
from ..core._rng import randint
from ..core._trees import find_leaf
from ._forgetful_split import ONE, best_split
from ._retain import COLD_START_RATE, COLD_START_ROUND, adapt_retain

# Columns of the per-tree integer state ``tree_int``.
N_ROWS = 0        # retained rows
RETAIN = 1        # rSize: rows to keep after the next batch is merged
MAX_HEIGHT = 2    # nodes at this depth are leaves (the root has depth 0)
LAST_T = 3        # previous window: correct predictions
LAST_ALL = 4      # previous window: rows
FORGET_RATE = 5   # cold-start counter (-10 .. 0; 0 = normal mode)
ROUND_NO = 6      # cold-start doubling threshold
N_FEAT = 7        # size of the tree's feature subset (``features[:N_FEAT]``)
N_USED = 8        # node ids handed out so far (high-water mark)
N_FREE = 9        # entries on the node free list
COLLAPSED = 10    # 1 when the last batch forgot every old row (accuracy at chance)
N_FITS = 11       # batches learned
N_TREE_INT = 12

STACK_ROWS = 160  # explicit DFS stack; depth is at most log2(rows) + 1 < 64
SCRATCH_BATCH_ORDER = 11  # position of the batch orders in the :func:`make_scratch` tuple


@njit
def xlogx_table(n):
    """``c * ln(c)`` for ``c = 0 .. n`` (0 for 0 and 1), the entropy table of the split scans."""
    out = np.zeros(n + 1)
    for c in range(2, n + 1):
        out[c] = c * fm.log(float(c))  # the core's log: the same bits on every CPU
    return out


#: a tree's integer state before its first batch (every column but ``N_FEAT``, its own):
#: no row retained, leaves at depth 1, one node handed out (the root), the cold start's
#: first round (:mod:`models.forgetful._retain`)
FRESH_TREE = np.array([{MAX_HEIGHT: 1, LAST_T: 1, LAST_ALL: 2, FORGET_RATE: COLD_START_RATE,
                        ROUND_NO: COLD_START_ROUND, N_USED: 1}.get(c, 0)
                       for c in range(N_TREE_INT)], dtype=np.int64)


@njit
def init_tree_state(ti, irate, irate0):
    """Reset one tree's adaptation state and node store (before its first batch)."""
    n_feat = ti[N_FEAT]
    ti[:] = FRESH_TREE
    ti[N_FEAT] = n_feat
    irate[0] = irate0


# ---------------------------------------------------------------------------- node store


@njit
def _alloc(nf, left, right, nn, free, ti):
    """A fresh node id (from the free list first), initialised as an unvisited leaf."""
    if ti[N_FREE] > 0:
        ti[N_FREE] -= 1
        i = free[ti[N_FREE]]
    else:
        i = ti[N_USED]
        ti[N_USED] += 1
    nf[i] = -1
    left[i] = -1
    right[i] = -1
    nn[i] = -1
    return i


@njit
def _free_subtree(root, nf, left, right, free, ti):
    """Put ``root`` and all its descendants on the free list (the list doubles as the queue)."""
    i = ti[N_FREE]
    free[ti[N_FREE]] = root
    ti[N_FREE] += 1
    while i < ti[N_FREE]:
        v = free[i]
        i += 1
        if nf[v] >= 0:
            free[ti[N_FREE]] = left[v]
            free[ti[N_FREE] + 1] = right[v]
            ti[N_FREE] += 2
        nf[v] = -1


@njit
def _make_leaf(node, nf, left, right, free, ti):
    if nf[node] >= 0:
        _free_subtree(left[node], nf, left, right, free, ti)
        _free_subtree(right[node], nf, left, right, free, ti)
    nf[node] = -1
    left[node] = -1
    right[node] = -1


@njit
def reset_nodes(nf, left, right, nn, free, ti):
    """Drop every node and allocate a fresh root (id 0)."""
    ti[N_USED] = 0
    ti[N_FREE] = 0
    _alloc(nf, left, right, nn, free, ti)


# ---------------------------------------------------------------------------- growing


@njit
def _stable_partition(a, s, e, goes_left, tmp):
    """Stable in-place partition of ``a[s:e]``: rows going left first; returns their count."""
    su = np.uint64(s)
    nl = np.uint64(0)
    nr = np.uint64(0)
    for p in range(s, e):
        r = a[np.uint64(p)]
        if goes_left[np.uint64(r)]:
            a[su + nl] = r
            nl += ONE
        else:
            tmp[nr] = r
            nr += ONE
    base = su + nl
    for q in range(nr):
        a[base + np.uint64(q)] = tmp[np.uint64(q)]
    return np.int64(nl)


@njit
def _partition_rows(X, fs, threshold, y, rows, s, e, n_kept, tmp, goes_left):
    """Split segment ``[s, e)`` of the row list by ``X[fs] <= threshold``.

    Returns ``(nl, left_pure, right_pure, left_new, right_new)``: the left size, whether each
    side holds a single class, and how many of this batch's rows went to each side.
    """
    fu = np.uint64(fs)
    lk = -1
    rk = -1
    lpure = True
    rpure = True
    lnew = 0
    rnew = 0
    for p in range(s, e):
        r = rows[np.uint64(p)]
        ru = np.uint64(r)
        k = y[ru]
        g = X[fu, ru] <= threshold
        goes_left[ru] = g
        if g:
            lnew += r >= n_kept
            if lk < 0:
                lk = k
            elif k != lk:
                lpure = False
        else:
            rnew += r >= n_kept
            if rk < 0:
                rk = k
            elif k != rk:
                rpure = False
    nl = _stable_partition(rows, s, e, goes_left, tmp)
    return nl, lpure, rpure, lnew, rnew


@njit
def _partition_sorted(work, feats, nfeat, dense, s, e, goes_left, tmp):
    """Split segment ``[s, e)`` of every sorted list as the row list was split."""
    for j in range(nfeat):
        f = feats[j]
        if not dense[f]:
            # the row of ``work`` as a 1-D view: one partition kernel for rows and lists
            _stable_partition(work[f], s, e, goes_left, tmp)


@njit
def _set_leaf(node, y, rows, s, e, nn, counts, cls, nf, left, right, free, ti):
    """Make ``node`` a leaf holding the rows of segment ``[s, e)``."""
    K = counts.shape[1]
    if K == 2:
        t1 = 0
        for p in range(s, e):
            t1 += y[np.uint64(rows[np.uint64(p)])]
        counts[node, 0] = e - s - t1
        counts[node, 1] = t1
    else:
        for k in range(K):
            counts[node, k] = 0
        for p in range(s, e):
            counts[node, y[rows[p]]] += 1
    top = 0
    for k in range(1, K):
        if counts[node, k] > counts[node, top]:
            top = k
    cls[node] = top
    nn[node] = e - s
    _make_leaf(node, nf, left, right, free, ti)


@njit
def grow(X, y, n, n_kept, same_height, max_h, feats, nfeat, dense, dvals, dcount, nf, thr, left,
         right, nn, counts, cls, free, ti, xl, work, rows, tmp, goes_left, stack, tot, lc, dcnt,
         dtot):
    """Update the tree top-down on the retained rows (segments prepared by the caller).

    Each visited node recounts its classes, becomes a leaf at ``max_h``, at purity or without
    a candidate threshold, and otherwise re-decides its split: the same split keeps the
    children (visited next, incrementally), a new one frees them and grows new ones.
    """
    K = counts.shape[1]
    stack[0, 0] = 0
    stack[0, 1] = 0
    stack[0, 2] = n
    stack[0, 3] = 0
    sp = 1
    while sp > 0:
        sp -= 1
        # int64 like every other node id passed to _make_leaf (one specialisation of it)
        node = np.int64(stack[sp, 0])
        s = stack[sp, 1]
        e = stack[sp, 2]
        d = stack[sp, 3]
        m = e - s
        n_new = 0
        if K == 2:
            t1 = 0
            for p in range(s, e):
                r = rows[np.uint64(p)]
                t1 += y[np.uint64(r)]
                n_new += r >= n_kept
            tot[0] = m - t1
            tot[1] = t1
        else:
            for k in range(K):
                tot[k] = 0
            for p in range(s, e):
                r = rows[p]
                tot[y[r]] += 1
                n_new += r >= n_kept
        if same_height and n_new == 0 and nn[node] == m:
            # no row arrived and none was forgotten: the subtree is what a rebuild would give
            continue
        nn[node] = m
        top = 0
        for k in range(K):
            counts[node, k] = tot[k]
            if tot[k] > tot[top]:
                top = k
        cls[node] = top
        if d >= max_h or tot[top] == m:
            _make_leaf(node, nf, left, right, free, ti)
            continue
        f, v, found = best_split(X, y, s, e, K, feats, nfeat, dense, dvals, dcount, work, rows,
                                 xl, tot, lc, dcnt, dtot)
        if not found:
            _make_leaf(node, nf, left, right, free, ti)
            continue
        kept = nf[node] == f and thr[node] == v
        if not kept:
            # new split: the old children describe another partition, rebuild them
            _make_leaf(node, nf, left, right, free, ti)
            left[node] = _alloc(nf, left, right, nn, free, ti)
            right[node] = _alloc(nf, left, right, nn, free, ti)
            nf[node] = f
            thr[node] = v
        nl, lpure, rpure, lnew, rnew = _partition_rows(X, f, v, y, rows, s, e, n_kept, tmp,
                                                       goes_left)
        lch = left[node]
        rch = right[node]
        # a child needs its sorted lists only if it will search a split: not at the maximum
        # height, not pure, and not unchanged since the last batch (kept subtree)
        at_max = d + 1 >= max_h
        lskip = kept and same_height and lnew == 0 and nn[lch] == nl
        rskip = kept and same_height and rnew == 0 and nn[rch] == m - nl
        lneed = not (lskip or at_max or lpure)
        rneed = not (rskip or at_max or rpure)
        if lneed or rneed:
            _partition_sorted(work, feats, nfeat, dense, s, e, goes_left, tmp)
        if rneed:
            stack[sp, 0] = rch
            stack[sp, 1] = s + nl
            stack[sp, 2] = e
            stack[sp, 3] = d + 1
            sp += 1
        elif not rskip:
            _set_leaf(rch, y, rows, s + nl, e, nn, counts, cls, nf, left, right, free, ti)
        if lneed:
            stack[sp, 0] = lch
            stack[sp, 1] = s
            stack[sp, 2] = s + nl
            stack[sp, 3] = d + 1
            sp += 1
        elif not lskip:
            _set_leaf(lch, y, rows, s, s + nl, nn, counts, cls, nf, left, right, free, ti)


# ---------------------------------------------------------------------------- rows


@njit
def _choose_forgotten(n_old, n_forget, forget_random, rng, t, new_index, order):
    """``new_index[i]``: position of old row ``i`` after forgetting, -1 if forgotten.

    A single tree forgets its oldest rows; a forest tree forgets rows drawn uniformly without
    replacement among the old rows (partial Fisher-Yates). Kept rows keep arrival order.
    """
    if forget_random:
        for i in range(n_old):
            order[i] = i
            new_index[i] = 0
        for i in range(n_forget):
            j = i + randint(rng, t, n_old - i)
            tmp = order[i]
            order[i] = order[j]
            order[j] = tmp
            new_index[order[i]] = -1
    else:
        for i in range(n_old):
            new_index[i] = -1 if i < n_forget else 0
    k = 0
    for i in range(n_old):
        if new_index[i] == 0:
            new_index[i] = k
            k += 1
    return k


@njit
def _compact_rows(X, y, n_old, new_index):
    for f in range(X.shape[0]):
        xf = X[f]
        for i in range(n_old):
            j = new_index[i]
            if j >= 0:
                xf[j] = xf[i]
    for i in range(n_old):
        j = new_index[i]
        if j >= 0:
            y[j] = y[i]


@njit
def _merge_sorted(xf, old_sorted, n_old, new_index, n_kept, new_order, nb, out):
    """Merge kept old rows (``old_sorted`` order, old ids) with the new rows into ``out``.

    New row ``j`` of the batch is row ``n_kept + j``; ``new_order[:nb]`` sorts the batch.
    """
    i = 0
    j = 0
    o = 0
    while True:
        while i < n_old and new_index[old_sorted[i]] < 0:
            i += 1  # forgotten row: dropped while merging
        if i < n_old:
            ro = new_index[old_sorted[i]]
            if j < nb and xf[n_kept + new_order[j]] < xf[ro]:
                out[o] = n_kept + new_order[j]
                j += 1
            else:
                out[o] = ro
                i += 1
            o += 1
        elif j < nb:
            out[o] = n_kept + new_order[j]
            j += 1
            o += 1
        else:
            break
    return o


@njit
def sort_batch(Xb, feats, nfeat, dense, batch_order):
    """``batch_order[f, :b]``: the batch's rows ordered by each sparse feature of the subset."""
    b = Xb.shape[0]
    col = np.empty(b)
    for j in range(nfeat):
        f = feats[j]
        if dense[f]:
            continue
        for i in range(b):
            col[i] = Xb[i, f]
        order = np.argsort(col, kind="mergesort")
        for i in range(b):
            batch_order[f, i] = order[i]


SEG_KEEP = 0   # rows unchanged since the orders were built (tree replacement)
SEG_MERGE = 1  # old rows forgotten / renumbered by ``new_index``, this batch's rows appended
SEG_FRESH = 2  # every row is new


@njit
def prepare_segments(X, n, n_kept, n_old, mode, new_index, batch_order, sorted_rows, sorted_valid,
                     feats, nfeat, dense, in_subset, work, rows):
    """Root segments: ``sorted_rows`` brought up to date and copied to the working lists.

    ``sorted_valid[f]`` says whether ``sorted_rows[f]`` orders the tree's rows as they were
    before this call. Orders of the tree's sparse features are merged with the new rows
    (``SEG_MERGE``), kept (``SEG_KEEP``) or sorted when invalid or all rows are new; orders of
    the other features go stale whenever rows change.
    """
    F = X.shape[0]
    for f in range(F):
        in_subset[f] = False
    for j in range(nfeat):
        f = feats[j]
        in_subset[f] = True
        if dense[f]:
            continue
        sf = sorted_rows[f]
        wf = work[f]
        xf = X[f]
        if sorted_valid[f] and mode == SEG_KEEP:
            for p in range(n):
                wf[p] = sf[p]
        elif sorted_valid[f] and mode == SEG_MERGE:
            _merge_sorted(xf, sf, n_old, new_index, n_kept, batch_order[f], n - n_kept, wf)
            for p in range(n):
                sf[p] = wf[p]
        else:
            order = np.argsort(xf[:n], kind="mergesort")
            for p in range(n):
                sf[p] = order[p]
                wf[p] = order[p]
            sorted_valid[f] = 1
    if mode != SEG_KEEP:
        for f in range(F):
            if not in_subset[f] or dense[f]:
                sorted_valid[f] = 0
    for p in range(n):
        rows[p] = p


# ---------------------------------------------------------------------------- one tree


@njit
def make_scratch(F, R, K, D):
    """Working arrays of one learn call (shared by the trees of a forest, used one at a time)."""
    work = np.empty((F, R), np.int32)
    rows = np.empty(R, np.int32)
    tmp = np.empty(R, np.int32)
    goes_left = np.zeros(R, np.bool_)
    new_index = np.empty(R, np.int64)
    order = np.empty(R, np.int64)
    stack = np.empty((STACK_ROWS, 4), np.int64)
    tot = np.zeros(max(K, 1), np.int64)
    lc = np.zeros(max(K, 1), np.int64)
    dcnt = np.zeros((max(D, 1), max(K, 1)), np.int64)
    dtot = np.zeros(max(D, 1), np.int64)
    batch_order = np.empty((F, R), np.int32)
    in_subset = np.zeros(F, np.bool_)
    return (work, rows, tmp, goes_left, new_index, order, stack, tot, lc, dcnt, dtot, batch_order,
            in_subset)


@njit
def rebuild_tree(X, y, sorted_rows, sorted_valid, feats, nf, thr, left, right, nn, counts, cls,
                 free, ti, dense, dvals, dcount, xl, scratch):
    """Build the tree from scratch on its retained (unchanged) rows."""
    (work, rows, tmp, goes_left, new_index, order, stack, tot, lc, dcnt, dtot, batch_order,
     in_subset) = scratch
    n = ti[N_ROWS]
    nfeat = ti[N_FEAT]
    reset_nodes(nf, left, right, nn, free, ti)
    prepare_segments(X, n, 0, 0, SEG_KEEP, new_index, batch_order, sorted_rows, sorted_valid,
                     feats, nfeat, dense, in_subset, work, rows)
    grow(X, y, n, 0, False, ti[MAX_HEIGHT], feats, nfeat, dense, dvals, dcount, nf, thr, left,
         right, nn, counts, cls, free, ti, xl, work, rows, tmp, goes_left, stack, tot, lc, dcnt,
         dtot)


@njit
def fit_tree(Xb, yb, correct, n_classes, forget_random, irate_min, irate_max, rng, t, X, y,
             sorted_rows, sorted_valid, feats, nf, thr, left, right, nn, counts, cls, free, ti,
             irate, dense, dvals, dcount, xl, scratch, batch_sorted):
    """Learn one mini-batch: adapt retain size and height, forget, merge, update the tree.

    Parameters
    ----------
    Xb, yb : arrays
        The batch (row-major features, class indices) the tree learns.
    correct : int
        Rows of the batch the tree predicted correctly before learning it.
    n_classes : int
        Classes seen so far (random-guess accuracy ``1 / max(n_classes, 2)``).
    forget_random : bool
        Forget uniformly random old rows (forest trees) instead of the oldest (single tree).
    irate_min, irate_max : float
        Bounds of the increase rate (:func:`models.forgetful._retain.adapt_retain`).
    rng, t : array, int
        Random state and the tree's generator index.
    X ... dcount : arrays
        The tree's views of the state arrays (see the module docstring).
    xl : array
        ``c ln c`` table covering the row capacity.
    scratch : tuple
        :func:`make_scratch` output.
    batch_sorted : bool
        ``scratch``'s batch orders already sort ``Xb`` by every sparse feature (a forest
        without bagging sorts its batch once for all trees).
    """
    (work, rows, tmp, goes_left, new_index, order, stack, tot, lc, dcnt, dtot, batch_order,
     in_subset) = scratch
    b = Xb.shape[0]
    n_old = ti[N_ROWS]
    prev_h = ti[MAX_HEIGHT]
    (retain, ir, max_h, last_t, last_all, forget_rate, round_no, collapsed) = adapt_retain(
        n_old, b, correct, n_classes, ti[RETAIN], irate[0], ti[LAST_T], ti[LAST_ALL],
        ti[FORGET_RATE], ti[ROUND_NO], irate_min, irate_max)
    ti[RETAIN] = retain
    irate[0] = ir
    ti[MAX_HEIGHT] = max_h
    ti[LAST_T] = last_t
    ti[LAST_ALL] = last_all
    ti[FORGET_RATE] = forget_rate
    ti[ROUND_NO] = round_no
    ti[COLLAPSED] = 1 if collapsed else 0
    # forgetting happens at the root only (paper Appendix A); new rows are never forgotten
    n_forget = 0
    if n_old + b > retain:
        n_forget = min(n_old + b - retain, n_old)
    rebuild = n_forget == n_old
    n_kept = 0
    if not rebuild:
        n_kept = _choose_forgotten(n_old, n_forget, forget_random, rng, t, new_index, order)
        if n_forget > 0:
            _compact_rows(X, y, n_old, new_index)
    F = X.shape[0]
    for i in range(b):
        for f in range(F):
            X[f, n_kept + i] = Xb[i, f]
        y[n_kept + i] = yb[i]
    n = n_kept + b
    ti[N_ROWS] = n
    ti[N_FITS] += 1
    nfeat = ti[N_FEAT]
    if rebuild:
        reset_nodes(nf, left, right, nn, free, ti)
    if not batch_sorted:
        sort_batch(Xb, feats, nfeat, dense, batch_order)
    prepare_segments(X, n, n_kept, n_old, SEG_FRESH if rebuild else SEG_MERGE, new_index,
                     batch_order, sorted_rows, sorted_valid, feats, nfeat, dense, in_subset, work,
                     rows)
    same_height = (not rebuild) and max_h == prev_h
    grow(X, y, n, n_kept, same_height, max_h, feats, nfeat, dense, dvals,
         dcount, nf, thr, left, right, nn, counts, cls, free, ti, xl, work, rows, tmp, goes_left,
         stack, tot, lc, dcnt, dtot)


@njit
def predict_classes(X, nf, thr, left, right, cls, out):
    """Majority class of the leaf of each row of ``X``."""
    for i in range(X.shape[0]):
        out[i] = cls[find_leaf(nf, thr, left, right, X[i])]


@njit
def update_dense_tables(Xb, dense, dvals, dcount, sorted_valid):
    """Add the batch's new values to the count-table features' value tables.

    A feature keeps count tables while it has shown at most ``dvals.shape[1]`` distinct values;
    the first value beyond that turns it into a sorted-values feature for good (every tree then
    sorts it at its next batch). Both treatments give the same splits.
    """
    D = dvals.shape[1]
    for f in range(Xb.shape[1]):
        if not dense[f]:
            continue
        for i in range(Xb.shape[0]):
            v = Xb[i, f]
            nv = dcount[f]
            c = 0  # insertion point: first table value >= v
            while c < nv and dvals[f, c] < v:
                c += 1
            if c < nv and dvals[f, c] == v:
                continue
            if nv == D:
                dense[f] = 0
                for t in range(sorted_valid.shape[0]):
                    sorted_valid[t, f] = 0
                break
            for q in range(nv, c, -1):
                dvals[f, q] = dvals[f, q - 1]
            dvals[f, c] = v
            dcount[f] = nv + 1


@njit
def learn_single_tree(Xb, yb, n_classes, irate0, irate_min, irate_max, X, y, sorted_rows,
                      sorted_valid, feats, nf, thr, left, right, nn, counts, cls, free, ti, irate,
                      rng, dense, dvals, dcount, xl, n_seen):
    """One batch of a standalone forgetful tree: test on the batch, then learn it."""
    update_dense_tables(Xb, dense, dvals, dcount, sorted_valid)
    b = Xb.shape[0]
    correct = 0
    if ti[0, N_ROWS] > 0:
        pred = np.empty(b, np.int64)
        predict_classes(Xb, nf[0], thr[0], left[0], right[0], cls[0], pred)
        for i in range(b):
            if pred[i] == yb[i]:
                correct += 1
    scratch = make_scratch(X.shape[1], X.shape[2], counts.shape[2], dvals.shape[1])
    fit_tree(Xb, yb, correct, n_classes, False, irate_min, irate_max, rng, 0, X[0], y[0],
             sorted_rows[0], sorted_valid[0], feats[0], nf[0], thr[0], left[0], right[0], nn[0],
             counts[0], cls[0], free[0], ti[0], irate[0:1], dense, dvals, dcount, xl, scratch,
             False)
    n_seen[0] += b


@njit
def predict_proba_trees(X, nf, thr, left, right, counts, ti, out):
    """Mean leaf class distribution over the trees that have learned at least one batch."""
    T = nf.shape[0]
    K = counts.shape[2]
    for i in range(X.shape[0]):
        used = 0
        for t in range(T):
            if ti[t, N_ROWS] == 0:
                continue
            leaf = find_leaf(nf[t], thr[t], left[t], right[t], X[i])
            total = 0
            for k in range(K):
                total += counts[t, leaf, k]
            for k in range(K):
                out[i, k] += counts[t, leaf, k] / total
            used += 1
        if used > 0:
            for k in range(K):
                out[i, k] /= used


@njit
def predict_vote_trees(X, nf, thr, left, right, cls, ti, K, out):
    """Unweighted majority vote of the trees' leaf classes (lowest class index on ties)."""
    T = nf.shape[0]
    votes = np.zeros(K, np.int64)
    for i in range(X.shape[0]):
        for k in range(K):
            votes[k] = 0
        for t in range(T):
            if ti[t, N_ROWS] == 0:
                continue
            votes[cls[t, find_leaf(nf[t], thr[t], left[t], right[t], X[i])]] += 1
        top = 0
        for k in range(1, K):
            if votes[k] > votes[top]:
                top = k
        out[i] = top
