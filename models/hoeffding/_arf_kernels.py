"""Adaptive random forest kernels: many Hoeffding trees in two shared pools, learned row by row.

A forest of ``T`` trees holds ``S = 2 T`` tree *slots* (foreground and background trees);
``fg_slot[i]`` and ``bg_slot[i]`` say which slot holds tree ``i``'s foreground and its
(spare or learning) background tree, so a background tree replaces the foreground by
swapping two indices. ``slot_root[s]`` is the root node of slot ``s`` (-1: no tree, a spare
slot whose tree was dropped), ``slot_nodes[s]`` its node count.

The nodes of every slot share one *node pool* (capacity ``P``)::

    node_feature, node_threshold, node_left, node_right, node_depth   the trees
    node_active  uint8    1 for a leaf that still learns statistics and may split
    node_merit   float64  information gain of a split node's split
    node_slot    int64    the slot the node belongs to
    node_leaf    int64    the node's leaf record (-1 for a split node)
    node_counts  (P, K)   class weights: a leaf's observed ones, a split node's at its split

and the leaves' statistics one *leaf pool* (capacity ``Q``), one record per leaf::

    leaf_node                  int64    the leaf's node
    leaf_feat (Q, m)           int64    its random feature subset, ascending (the features
                                        whose estimators it keeps and whose splits it scores)
    leaf_last_eval             float64  leaf weight at its last split attempt
    leaf_mc, leaf_nb           float64  weight its majority class / naive Bayes predicted right
    g_* (Q, m, K)              Gaussian estimators (:mod:`models.hoeffding._hoeffding`), indexed by
                               position in the subset; a split's position is turned into the
                               feature's column right after the split

so a tree costs what it holds (not the largest tree's capacity) and only leaves hold
estimators. ``used = [nodes, leaf records]`` in use: nodes and records are appended at the
end (a split's left child takes over its parent's record), and dropping a slot's tree
compacts both pools in place keeping their order, so every child's index stays above its
parent's and the cells past ``used`` hold the arrays' fills.

The per-tree ADWIN detectors are two banks in the layout of :mod:`models.drift.adwin` (warning,
drift), updated through its kernel. Their rows start few (a window of ``w`` values needs about
``log2(w / 5)`` rows) and grow by doubling (the pools by a quarter): the kernel returns before
a row that a pool or a detector might not have room for.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import _fmath as fm
from ..core import _rng
from ..core._jit import njit
from ..core._stats import argmax, normalise
from ..core._trees import copy_into
from ..drift.adwin import _update_pairs, reset_detector
from . import _hoeffding as hs
from ._ht_kernels import LEAF_NB, LEAF_NBA, NO_DECISION, RESTART, SPLIT, split_decision

#: nodes and leaf records one row may add per tree (a background tree started and split,
#: the foreground tree split and replaced): the free cells the kernel wants before a row
NODES_PER_ROW = 6
LEAVES_PER_ROW = 4
# settings_i[4]: whose rules the forest follows where MOA and river differ
FLAVOUR_RIVER, FLAVOUR_MOA = 0, 1
# ``weighted``: how the trees' votes are weighted (see _vote_weight)
VOTE_EQUAL, VOTE_ACCURACY, VOTE_PERCENT = 0, 1, 2


@njit(_nrt=False)
def sample_feats(rng, g, feats, F, perm):
    """Fill ``feats`` (m,) with a random subset of ``m`` of ``F`` features, ascending
    (partial Fisher-Yates, then an insertion sort)."""
    m = feats.shape[0]
    for f in range(F):
        perm[f] = f
    for j in range(m):
        r = j + _rng.randint(rng, g, F - j)
        t = perm[j]
        perm[j] = perm[r]
        perm[r] = t
        v = perm[j]
        q = j
        while q > 0 and feats[q - 1] > v:
            feats[q] = feats[q - 1]
            q -= 1
        feats[q] = v


@njit(inline="always")
def _gather(x, feats, out):
    for j in range(feats.shape[0]):
        out[j] = x[feats[j]]


# ------------------------------------------------------------------------------ pools


@njit(_nrt=False)
def _fresh_record(q, n, leaf_node, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min,
                  g_max):
    """Leaf record ``q`` for node ``n``: empty estimators, no split attempt, no credit."""
    leaf_node[q] = n
    leaf_last_eval[q] = 0.0
    leaf_mc[q] = 0.0
    leaf_nb[q] = 0.0
    _restart_leaf(q, g_w, g_mean, g_m2, g_min, g_max)


@njit(_nrt=False)
def _empty_node(n, depth, active, s, q, node_feature, node_threshold, node_left, node_right,
                node_depth, node_active, node_merit, node_slot, node_leaf, node_counts):
    """Node ``n`` as a leaf with no split, no merit and no class weights.

    Parameters
    ----------
    n : int
        The node.
    depth : int
        Its depth in its tree.
    active : int
        1 for a leaf that learns, 0 for a free cell of the pool.
    s : int
        Its tree's slot (-1: a free cell).
    q : int
        Its leaf record (-1: none).
    node_feature, node_threshold, node_left, node_right : ndarray
        The node pool: split and children.
    node_depth, node_active, node_merit, node_slot, node_leaf, node_counts : ndarray
        The node pool: the node's place, state and class weights.
    """
    node_feature[n] = -1
    node_threshold[n] = 0.0
    node_left[n] = -1
    node_right[n] = -1
    node_depth[n] = depth
    node_active[n] = active
    node_merit[n] = 0.0
    node_slot[n] = s
    node_leaf[n] = q
    node_counts[n] = 0.0


@njit(_nrt=False)
def _new_leaf(s, depth, q, rng, g, perm, slot_nodes, used, node_feature, node_threshold,
              node_left, node_right, node_depth, node_active, node_merit, node_slot, node_leaf,
              node_counts, leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean,
              g_m2, g_min, g_max):
    """Append an empty active leaf at ``depth`` to slot ``s``, with leaf record ``q`` (-1: a
    new one), its feature subset drawn from tree ``g``'s generator; returns its node."""
    n = used[0]
    used[0] = n + 1
    if q < 0:
        q = used[1]
        used[1] = q + 1
    _empty_node(n, depth, 1, s, q, node_feature, node_threshold, node_left, node_right,
                node_depth, node_active, node_merit, node_slot, node_leaf, node_counts)
    _fresh_record(q, n, leaf_node, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min,
                  g_max)
    sample_feats(rng, g, leaf_feat[q], perm.shape[0], perm)
    slot_nodes[s] += 1
    return n


@njit
def drop_slot(s, index, slot_root, slot_nodes, used, node_feature, node_threshold, node_left,
              node_right, node_depth, node_active, node_merit, node_slot, node_leaf, node_counts,
              leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min,
              g_max):
    """Remove the tree of slot ``s`` from both pools, keeping the order of what remains
    (``index``: scratch of at least ``max(used)`` cells); the freed cells get their fills."""
    if slot_root[s] < 0:
        return
    n_old, q_old = used[0], used[1]
    # new positions of the leaf records first: they are found through their nodes' slots
    j = 0
    for q in range(q_old):
        if node_slot[leaf_node[q]] != s:
            leaf_node[j] = leaf_node[q]
            copy_into(leaf_feat[j], leaf_feat[q])
            leaf_last_eval[j] = leaf_last_eval[q]
            leaf_mc[j] = leaf_mc[q]
            leaf_nb[j] = leaf_nb[q]
            copy_into(g_w[j], g_w[q])
            copy_into(g_mean[j], g_mean[q])
            copy_into(g_m2[j], g_m2[q])
            copy_into(g_min[j], g_min[q])
            copy_into(g_max[j], g_max[q])
            node_leaf[leaf_node[j]] = j
            j += 1
    for q in range(j, q_old):
        _fresh_record(q, -1, leaf_node, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2,
                      g_min, g_max)
        leaf_feat[q] = 0
    used[1] = j
    j = 0
    for n in range(n_old):
        index[n] = -1
        if node_slot[n] != s:
            index[n] = j
            j += 1
    for n in range(n_old):
        p = index[n]
        if p < 0:
            continue
        node_feature[p] = node_feature[n]
        node_threshold[p] = node_threshold[n]
        node_left[p] = index[node_left[n]] if node_left[n] >= 0 else -1
        node_right[p] = index[node_right[n]] if node_right[n] >= 0 else -1
        node_depth[p] = node_depth[n]
        node_active[p] = node_active[n]
        node_merit[p] = node_merit[n]
        node_slot[p] = node_slot[n]
        node_leaf[p] = node_leaf[n]
        copy_into(node_counts[p], node_counts[n])
        if node_leaf[p] >= 0:
            leaf_node[node_leaf[p]] = p
    for n in range(j, n_old):
        _empty_node(n, 0, 0, -1, -1, node_feature, node_threshold, node_left, node_right,
                    node_depth, node_active, node_merit, node_slot, node_leaf, node_counts)
    used[0] = j
    for r in range(slot_root.shape[0]):
        if slot_root[r] >= 0:
            slot_root[r] = index[slot_root[r]]
    slot_root[s] = -1
    slot_nodes[s] = 0


@njit
def reset_slot(s, rng, g, perm, index, slot_root, slot_nodes, used, node_feature,
               node_threshold, node_left, node_right, node_depth, node_active, node_merit,
               node_slot, node_leaf, node_counts, leaf_node, leaf_feat, leaf_last_eval, leaf_mc,
               leaf_nb, g_w, g_mean, g_m2, g_min, g_max):
    """Make slot ``s`` a fresh tree: one empty root leaf with a new feature subset."""
    drop_slot(s, index, slot_root, slot_nodes, used, node_feature, node_threshold, node_left,
              node_right, node_depth, node_active, node_merit, node_slot, node_leaf, node_counts,
              leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min,
              g_max)
    slot_root[s] = _new_leaf(s, 0, -1, rng, g, perm, slot_nodes, used, node_feature,
                             node_threshold, node_left, node_right, node_depth, node_active,
                             node_merit, node_slot, node_leaf, node_counts, leaf_node, leaf_feat,
                             leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min, g_max)


# ------------------------------------------------------------------------------ one tree


@njit(inline="always")
def _route(s, x, slot_root, node_feature, node_threshold, node_left, node_right):
    """Leaf of the tree in slot ``s`` reached by ``x``."""
    node = slot_root[s]
    while node_feature[node] >= 0:
        node = node_left[node] if x[node_feature[node]] <= node_threshold[node] \
            else node_right[node]
    return node


@njit(inline="always")
def _weight(node, node_counts):
    """A node's class weights summed."""
    total = 0.0
    for c in range(node_counts.shape[1]):
        total += node_counts[node, c]
    return total


@njit(_nrt=False)
def _leaf_votes(node, total, scored, x, degenerate, node_leaf, node_counts, leaf_feat, g_w,
                g_mean, g_m2, scores, x_sub, ones, factors, observed):
    """``(majority class, naive Bayes class)`` of a leaf of weight ``total`` (-1: no vote).

    The naive Bayes class is the argmax of the log joint over the leaf's own subset, as the
    Hoeffding tree kernels compute it both to predict and to score the adaptive counters;
    with ``scored`` the log joint is left in ``scores`` (the leaf's vote). In MOA's mode its
    factors stay in ``factors`` and ``observed`` (:func:`_naive_bayes`)."""
    if total <= 0.0:
        return -1, -1
    nb = _naive_bayes(node, -1, -1, scored, x, degenerate, node_leaf, node_counts, leaf_feat,
                      g_w, g_mean, g_m2, scores, x_sub, ones, factors, observed)
    return argmax(node_counts[node]), nb


@njit(inline="always")
def _naive_bayes(node, cached, k, scored, x, degenerate, node_leaf, node_counts, leaf_feat,
                 g_w, g_mean, g_m2, scores, x_sub, ones, factors, observed):
    """The naive Bayes class of leaf ``node`` (with weight) for row ``x``; with ``scored``
    its log joint is in ``scores`` (else ``scores`` is scratch).

    In MOA's mode (a point mass for an estimator without spread) through the factor cache
    ``factors``, ``observed`` (:func:`models.hoeffding._hoeffding.moa_cached_products`):
    ``cached == node`` when it holds this row's factors at this leaf from before the leaf
    learned the row with class ``k`` (only class ``k``'s are recomputed), else it is
    emptied first; the class alone takes the logarithms of the largest products only
    (:func:`models.hoeffding._hoeffding.argmax_log`)."""
    q = node_leaf[node]
    _gather(x, leaf_feat[q], x_sub)
    counts = node_counts[node]
    if degenerate != hs.DEGENERATE_POINT:
        hs.naive_bayes_log_joint(x_sub, ones, counts, g_w, g_mean, g_m2, q, degenerate,
                                 scores)
        return argmax(scores)
    if cached == node:
        hs.moa_nb_learned(g_w, q, k, factors, observed)
    else:
        hs.moa_nb_reset(g_w, q, factors, observed)
    if scored:
        hs.moa_cached_log_joint(x_sub, counts, g_w, g_mean, g_m2, q, factors, scores)
        return argmax(scores)
    hs.moa_cached_products(x_sub, counts, g_w, g_mean, g_m2, q, factors, scores)
    return hs.argmax_log(scores)


@njit(_nrt=False)
def _split_leaf(s, node, best_f, best_t, merit, best_left, best_right, rng, g, perm,
                slot_nodes, used, node_feature, node_threshold, node_left, node_right,
                node_depth, node_active, node_merit, node_slot, node_leaf, node_counts,
                leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2,
                g_min, g_max):
    """Leaf ``node`` becomes a split on subset position ``best_f``; its record passes to the
    left child, the right child gets a new one (each draws its own subset)."""
    q = node_leaf[node]
    node_feature[node] = leaf_feat[q, best_f]
    node_threshold[node] = best_t
    node_merit[node] = merit
    node_active[node] = 0
    node_leaf[node] = -1
    depth = node_depth[node] + 1
    for side in range(2):
        dist = best_left if side == 0 else best_right
        c = _new_leaf(s, depth, q if side == 0 else -1, rng, g, perm, slot_nodes, used,
                      node_feature, node_threshold, node_left, node_right, node_depth,
                      node_active, node_merit, node_slot, node_leaf, node_counts, leaf_node,
                      leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min,
                      g_max)
        if side == 0:
            node_left[node] = c
        else:
            node_right[node] = c
        w = 0.0
        for k in range(dist.shape[0]):
            node_counts[c, k] = dist[k]
            w += dist[k]
        leaf_last_eval[node_leaf[c]] = w  # river: the inherited weight counts as evaluated


@njit(_nrt=False)
def _restart_leaf(q, g_w, g_mean, g_m2, g_min, g_max):
    """A "no split" answer: the leaf forgets its estimators and keeps its class weights,
    feature subset and adaptive counters (river's memory manager reactivates it so)."""
    g_w[q] = 0.0
    g_mean[q] = 0.0
    g_m2[q] = 0.0
    g_min[q] = math.inf
    g_max[q] = -math.inf


@njit(_nrt=False)
def _update_leaf(node, x, k, wi, mc_pred, nb_pred, total_before, grace, leaf_prediction,
                 max_depth, node_depth, node_active, node_leaf, node_counts, leaf_feat,
                 leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min, g_max):
    """One weighted row into leaf ``node`` (the Hoeffding tree's row step, with the leaf's
    random feature subset in place of the global mask); ``mc_pred``, ``nb_pred`` and
    ``total_before`` are the leaf's votes before the row. Returns whether a split attempt
    is due (:func:`_attempt_split`; kept apart: it needs every pool array, and a call costs
    a reference count per array passed, while most rows only update the leaf)."""
    counts = node_counts[node]
    K = counts.shape[0]
    q = node_leaf[node]
    feats = leaf_feat[q]
    active = node_active[node] == 1
    if active and leaf_prediction == LEAF_NBA:
        # river: an empty leaf credits its majority class
        if total_before <= 0.0 or mc_pred == k:
            leaf_mc[q] += wi
        if total_before > 0.0 and nb_pred == k:
            leaf_nb[q] += wi
    counts[k] += wi
    if not active:
        return False
    for j in range(feats.shape[0]):
        hs.gaussian_update(g_w, g_mean, g_m2, g_min, g_max, q, j, k, x[feats[j]], wi)
    if node_depth[node] >= max_depth:
        node_active[node] = 0
        return False
    total = 0.0
    for c in range(K):
        total += counts[c]
    return total - leaf_last_eval[q] >= grace


@njit(_nrt=False)
def _attempt_split(s, node, rng, g, perm, settings_f, settings_i, slot_nodes, used,
                   node_feature, node_threshold, node_left, node_right, node_depth, node_active,
                   node_merit, node_slot, node_leaf, node_counts, leaf_node, leaf_feat,
                   leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min, g_max, left,
                   right, best_left, best_right, ones):
    """The split attempt of leaf ``node`` of the tree in slot ``s`` (due: see
    :func:`_update_leaf`): split it, restart it after a "no split" answer, or wait; returns
    the decision (:data:`SPLIT`, :data:`RESTART`, :data:`NO_DECISION`)."""
    delta, tau, mbf, max_share = settings_f[1], settings_f[2], settings_f[3], settings_f[4]
    n_splits = settings_i[0]
    counts = node_counts[node]
    q = node_leaf[node]
    total = 0.0
    for c in range(counts.shape[0]):
        total += counts[c]
    decision, best_f, best_t, merit = split_decision(
        counts, q, ones, delta, tau, n_splits, mbf, max_share, -math.inf, False, g_w, g_mean,
        g_m2, g_min, g_max, left, right, best_left, best_right)
    if decision == SPLIT:
        _split_leaf(s, node, best_f, best_t, merit, best_left, best_right, rng, g, perm,
                    slot_nodes, used, node_feature, node_threshold, node_left, node_right,
                    node_depth, node_active, node_merit, node_slot, node_leaf, node_counts,
                    leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2,
                    g_min, g_max)
        return decision
    if decision == RESTART:
        _restart_leaf(q, g_w, g_mean, g_m2, g_min, g_max)
    leaf_last_eval[q] = total
    return decision


# ------------------------------------------------------------------------------ the forest


@njit(inline="always")
def _vote_weight(t, weighted, tree_correct, tree_seen):
    """Weight of tree ``t``'s vote: its accuracy since it became foreground; a tree without a
    correct vote yet weighs 1 (``weighted`` VOTE_ACCURACY, river's accuracy in [0, 1]) or 1
    in 100 (VOTE_PERCENT: MOA's evaluator reports accuracy in percent and gives such a tree
    the same 1, so it hardly counts); VOTE_EQUAL: every tree 1."""
    if weighted == VOTE_EQUAL or tree_correct[t] <= 0.0:
        return 1.0
    if weighted == VOTE_PERCENT:
        return 100.0 * tree_correct[t] / tree_seen[t]
    return tree_correct[t] / tree_seen[t]


@njit(_nrt=False)
def _rose(t, before, total, width, drift):
    """Whether detector ``t``'s change, just flagged, is a rise of its mean from ``before``
    (MOA's ``ADWINChangeDetector`` reports only those). A fall is not reported: the window
    keeps its cut (MOA's ADWIN goes on from it), so the fresh start river makes after any
    change is cancelled."""
    if total[t] / width[t] > before:
        return True
    drift[t] = False
    return False


@njit(_nrt=False)
def _tree_error(s, x, k, lp, degenerate, slot_root, node_feature, node_threshold, node_left,
                node_right, node_active, node_leaf, node_counts, leaf_feat, leaf_mc, leaf_nb,
                g_w, g_mean, g_m2, scores, x_sub, ones, factors, observed, cached):
    """0/1 error of the tree in slot ``s`` on row ``x`` of class ``k`` (its own prediction:
    the leaf's naive Bayes or majority class, as its detectors are fed), just after it
    learned the row; ``cached``: the leaf whose naive Bayes factors for the row, from
    before, are in ``factors`` (-1: none, see :func:`_naive_bayes`)."""
    node = _route(s, x, slot_root, node_feature, node_threshold, node_left, node_right)
    total = _weight(node, node_counts)
    if total <= 0.0:
        return 1.0  # no vote: an error, as _leaf_votes' -1
    if not _uses_nb(node, total, lp, node_active, node_leaf, leaf_mc, leaf_nb):
        return 0.0 if argmax(node_counts[node]) == k else 1.0
    # naive Bayes only when the leaf predicts by it
    nb = _naive_bayes(node, cached, k, False, x, degenerate, node_leaf, node_counts, leaf_feat,
                      g_w, g_mean, g_m2, scores, x_sub, ones, factors, observed)
    return 0.0 if nb == k else 1.0


@njit(inline="always")
def _uses_nb(node, total, lp, node_active, node_leaf, leaf_mc, leaf_nb):
    """Whether a leaf with weight ``total`` predicts by naive Bayes (else by its class
    weights)."""
    if total <= 0.0 or node_active[node] != 1:
        return False
    if lp == LEAF_NB:
        return True
    q = node_leaf[node]
    return lp == LEAF_NBA and leaf_nb[q] >= leaf_mc[q]


@njit(inline="always")
def _vote(t, node, total, use_nb, weighted, node_counts, tree_correct, tree_seen,
          scores, proba, out_row):
    """Add tree ``t``'s vote for a row to ``out_row``, as :func:`predict_rows` weighs it,
    over its first ``len(out_row)`` classes (those known when the row is predicted);
    ``scores``: the leaf's naive Bayes log joint, as :func:`_leaf_votes` left it (each class's
    score does not depend on the others)."""
    if total <= 0.0:
        return
    K = out_row.shape[0]
    wt = _vote_weight(t, weighted, tree_correct, tree_seen)
    if use_nb:
        hs.normalise_log(scores[:K], proba[:K])
        for c in range(K):
            out_row[c] += proba[c] * wt
    else:
        counts = node_counts[node]
        for c in range(K):
            out_row[c] += counts[c] / total * wt


@njit(inline="always")
def _predict_vote(t, node, total, use_nb, x, degenerate, weighted, node_leaf, node_counts,
                  leaf_feat, g_w, g_mean, g_m2, tree_correct, tree_seen, scores, proba, x_sub,
                  ones, factors, observed, out_row):
    """:func:`_vote` of tree ``t`` for a row it will not learn: the leaf's naive Bayes log
    joint only when the leaf votes with it, and neither of its classes (they score a row
    the tree learns)."""
    if use_nb:
        _leaf_votes(node, total, True, x, degenerate, node_leaf, node_counts, leaf_feat, g_w,
                    g_mean, g_m2, scores, x_sub, ones, factors, observed)
    _vote(t, node, total, use_nb, weighted, node_counts, tree_correct, tree_seen, scores,
          proba, out_row)


@njit(_nrt=False)
def _detect(learned, errors, n, moa, flags, befores, settings, b_total, b_var, b_count, rows,
            total, variance, width, tick, drift, n_detections, n_seen):
    """Feed ``errors[:n]`` to the detectors ``learned[:n]`` of one bank (ADWIN, in order);
    ``flags[j]``: whether detector ``learned[j]`` reports a change (MOA's rule: only a rise
    of its mean, :func:`_rose`)."""
    for j in range(n):
        t = learned[j]
        befores[j] = total[t] / width[t] if width[t] > 0 else 0.0
    _update_pairs(learned[:n], errors[:n], 0, flags[:n], settings[0], int(settings[1]),
                  int(settings[2]), settings[3], settings[4], b_total, b_var, b_count, rows,
                  total, variance, width, tick, drift, n_detections, n_seen)
    if moa:
        for j in range(n):
            if flags[j] and not _rose(learned[j], befores[j], total, width, drift):
                flags[j] = False


def learn_scratch(T, K, m, F, P):
    """Zeroed scratch of one :func:`learn_rows` call for ``T`` trees, ``K`` classes, subsets of
    ``m`` features of ``F`` and a node pool of ``P`` cells, in its parameters' order:
    ``left``, ``right``, ``best_left``, ``best_right``, ``scores`` and ``proba`` (K,), ``perm``
    (F,), ``index`` (P,), ``ones`` and ``x_sub`` (m,), ``factors`` (2, K, m) (naive Bayes
    factors of a foreground and a background leaf, see :func:`_naive_bayes`), ``observed``
    (2, m), ``learned``, ``errors``, ``flags`` and ``befores`` (T,) (the trees that learned a
    row, their errors, and their detectors' answers and means before it).

    Examples
    --------
    >>> [a.shape for a in learn_scratch(2, 3, 1, 4, 5)][5:9]
    [(3,), (4,), (5,), (1,)]
    """
    return (np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(K),
            np.zeros(F, np.int64), np.zeros(P, np.int64), np.ones(m, np.uint8), np.zeros(m),
            np.zeros((2, K, m)), np.zeros((2, m), np.bool_), np.zeros(T, np.int64),
            np.zeros(T), np.zeros(T, np.bool_), np.zeros(T))


@njit(_nrt=False)
def learn_rows(X, y, quiet, cuts, seg_counts, start, out, k_known, weighted, lam, settings_f,
               settings_i, w_settings, d_settings,
               left, right, best_left, best_right, scores, proba, perm, index, ones, x_sub,
               factors, observed, learned, errors, flags, befores,
               rng, fg_slot, bg_slot, bg_active, tree_correct, tree_seen, n_warnings,
               n_drifts, n_seen,
               slot_root, slot_nodes, used, node_feature, node_threshold, node_left, node_right,
               node_depth, node_active, node_merit, node_slot, node_leaf, node_counts,
               leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb,
               g_w, g_mean, g_m2, g_min, g_max,
               wb_total, wb_var, wb_count, w_rows, w_total, w_variance, w_width, w_tick,
               w_drift, w_det, w_seen,
               db_total, db_var, db_count, d_rows, d_total, d_variance, d_width, d_tick,
               d_drift, d_det, d_seen):
    """Learn rows ``start, ...`` (river's ``ARFClassifier.learn_one`` per row); returns the
    first row not learned (early when a pool may run out of cells or a detector of rows: the
    caller grows them).

    With ``out`` of one row per row of ``X`` (test-then-train), each row is first predicted
    by the forest as it stands (``out[i]``: the probabilities :func:`predict_rows` gives,
    ``weighted`` by the trees' accuracy), then learned: each tree votes before it learns the
    row, and no tree's vote depends on another's learning. A row whose label is -1 is only
    predicted (an unlabelled instance); a row with ``quiet[i]`` set (``quiet`` empty: none)
    is only learned, its ``out`` row left 0 (the label of an instance predicted earlier: the
    prediction would not be used, and a tree's vote changes nothing it learns).

    ``cuts`` (ascending ends of the call's segments, the last ``X.shape[0]``; empty: one
    segment) and ``seg_counts`` (segments x 2 x T, zeros) count each tree's replacements
    (``[:, 0]``) and background trees started (``[:, 1]``) per segment: what one call per
    segment would report, learned in one call.

    Compiled without numba's runtime: here a view (a row, a leaf's class weights) and a
    helper's call cost no reference counts, which were most of a row's time on streams of few
    features. The scratch it needs, from ``left`` to ``befores``, is :func:`learn_scratch`'s
    (allocated by the caller, since nothing here may allocate)."""
    T = fg_slot.shape[0]
    K = node_counts.shape[1]
    lp = settings_i[1]
    degenerate = settings_i[2]
    moa = settings_i[4] == FLAVOUR_MOA
    grace, max_depth = settings_f[0], settings_i[3]
    predicting = out.shape[0] > 0
    predict = predicting
    limit = fm.exp(-lam)  # of the Poisson weights, as _rng.poisson computes it
    k_now = k_known  # classes known when row i is predicted (indices follow first appearance)
    for r in range(start):
        k_now = max(k_now, y[r] + 1)
    i = start
    seg = 0
    while i < X.shape[0]:
        while seg + 1 < cuts.shape[0] and i >= cuts[seg]:
            seg += 1
        if used[0] + NODES_PER_ROW * T > node_feature.shape[0] \
                or used[1] + LEAVES_PER_ROW * T > leaf_node.shape[0]:
            return i
        # one insertion per detector and row adds at most one row (the ADWIN kernel's rule)
        for t in range(T):
            if w_rows[t] >= wb_total.shape[1] or d_rows[t] >= db_total.shape[1]:
                return i
        x = X[i]
        k = y[i]
        predict = predicting and (quiet.shape[0] == 0 or quiet[i] == 0)
        if predict:
            for c in range(K):
                out[i, c] = 0.0
        n_learned = 0
        for t in range(T):
            s = fg_slot[t]
            node = _route(s, x, slot_root, node_feature, node_threshold, node_left, node_right)
            tot = _weight(node, node_counts)
            use_nb = _uses_nb(node, tot, lp, node_active, node_leaf, leaf_mc, leaf_nb)
            if k < 0:  # an unlabelled row: predicted, not learned
                if predict:
                    _predict_vote(t, node, tot, use_nb, x, degenerate, weighted, node_leaf,
                                  node_counts, leaf_feat, g_w, g_mean, g_m2, tree_correct,
                                  tree_seen, scores, proba, x_sub, ones, factors[0],
                                  observed[0], out[i, :k_now])
                continue
            # the log joint (a logarithm per class) only when the leaf votes with it
            mc_pred, nb_pred = _leaf_votes(node, tot, predict and use_nb, x, degenerate,
                                           node_leaf, node_counts, leaf_feat, g_w, g_mean,
                                           g_m2, scores, x_sub, ones, factors[0], observed[0])
            cached = node if tot > 0.0 else -1  # the leaf of the naive Bayes factors kept
            if predict:
                _vote(t, node, tot, use_nb, weighted, node_counts, tree_correct,
                      tree_seen, scores, proba, out[i, :k_now])
            # the tree's own prediction before learning the row (_predict_row's argmax)
            pred = nb_pred if use_nb else mc_pred
            err = 0.0 if pred == k else 1.0
            tree_seen[t] += 1.0
            if err == 0.0:
                tree_correct[t] += 1.0
            kw = _rng.poisson_below(rng, t, limit)
            if kw <= 0:
                continue
            if bg_active[t] == 1:
                b_s = bg_slot[t]
                b_node = _route(b_s, x, slot_root, node_feature, node_threshold, node_left,
                                node_right)
                b_tot = _weight(b_node, node_counts)
                b_mc, b_nb = _leaf_votes(b_node, b_tot, False, x, degenerate, node_leaf,
                                         node_counts, leaf_feat, g_w, g_mean, g_m2, scores,
                                         x_sub, ones, factors[1], observed[1])
                # MOA trains a background tree on the row itself (weight 1), river with k
                b_w = 1.0 if moa else float(kw)
                if _update_leaf(b_node, x, k, b_w, b_mc, b_nb, b_tot, grace, lp, max_depth,
                                node_depth, node_active, node_leaf, node_counts, leaf_feat,
                                leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min,
                                g_max):
                    _attempt_split(b_s, b_node, rng, t, perm, settings_f, settings_i,
                                   slot_nodes, used, node_feature, node_threshold, node_left,
                                   node_right, node_depth, node_active, node_merit, node_slot,
                                   node_leaf, node_counts, leaf_node, leaf_feat, leaf_last_eval,
                                   leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min, g_max, left,
                                   right, best_left, best_right, ones)
            if _update_leaf(node, x, k, float(kw), mc_pred, nb_pred, tot, grace, lp, max_depth,
                            node_depth, node_active, node_leaf, node_counts, leaf_feat,
                            leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2, g_min, g_max):
                decision = _attempt_split(s, node, rng, t, perm, settings_f, settings_i,
                                          slot_nodes, used, node_feature, node_threshold,
                                          node_left, node_right, node_depth, node_active,
                                          node_merit, node_slot, node_leaf, node_counts,
                                          leaf_node, leaf_feat, leaf_last_eval, leaf_mc,
                                          leaf_nb, g_w, g_mean, g_m2, g_min, g_max, left, right,
                                          best_left, best_right, ones)
                if decision != NO_DECISION:
                    cached = -1  # split or restarted: its estimators are not those of the votes
            if moa:  # MOA's detectors see the tree's error on the row it has just learned
                err = _tree_error(s, x, k, lp, degenerate, slot_root, node_feature,
                                  node_threshold, node_left, node_right, node_active,
                                  node_leaf, node_counts, leaf_feat, leaf_mc, leaf_nb, g_w,
                                  g_mean, g_m2, scores, x_sub, ones, factors[0], observed[0],
                                  cached)
            learned[n_learned] = t
            errors[n_learned] = err
            n_learned += 1
        # the detectors of the trees that learned the row, one call per bank (a call costs
        # the reference counts of every array it is passed): tree by tree, a warning starts
        # a background tree, then a drift swaps it in (each tree's own slots and generator)
        if n_learned:
            _detect(learned, errors, n_learned, moa, flags, befores, w_settings, wb_total,
                    wb_var, wb_count, w_rows, w_total, w_variance, w_width, w_tick, w_drift,
                    w_det, w_seen)
            for j in range(n_learned):
                if flags[j]:
                    t = learned[j]
                    reset_slot(bg_slot[t], rng, t, perm, index, slot_root, slot_nodes, used,
                               node_feature, node_threshold, node_left, node_right, node_depth,
                               node_active, node_merit, node_slot, node_leaf, node_counts,
                               leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w,
                               g_mean, g_m2, g_min, g_max)
                    bg_active[t] = 1
                    reset_detector(t, wb_total, wb_var, wb_count, w_rows, w_total, w_variance,
                                   w_width, w_tick, w_drift)
                    n_warnings[t] += 1
                    if cuts.shape[0] > 0:
                        seg_counts[seg, 1, t] += 1
            _detect(learned, errors, n_learned, moa, flags, befores, d_settings, db_total,
                    db_var, db_count, d_rows, d_total, d_variance, d_width, d_tick, d_drift,
                    d_det, d_seen)
            for j in range(n_learned):
                if not flags[j]:
                    continue
                t = learned[j]
                s = fg_slot[t]
                if bg_active[t] == 1:
                    fg_slot[t] = bg_slot[t]
                    bg_slot[t] = s
                    bg_active[t] = 0
                    # the replaced tree is dropped (the slot waits for the next warning)
                    drop_slot(s, index, slot_root, slot_nodes, used, node_feature,
                              node_threshold, node_left, node_right, node_depth, node_active,
                              node_merit, node_slot, node_leaf, node_counts, leaf_node,
                              leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w, g_mean, g_m2,
                              g_min, g_max)
                    reset_detector(t, wb_total, wb_var, wb_count, w_rows, w_total,
                                   w_variance, w_width, w_tick, w_drift)
                else:
                    reset_slot(s, rng, t, perm, index, slot_root, slot_nodes, used,
                               node_feature, node_threshold, node_left, node_right, node_depth,
                               node_active, node_merit, node_slot, node_leaf, node_counts,
                               leaf_node, leaf_feat, leaf_last_eval, leaf_mc, leaf_nb, g_w,
                               g_mean, g_m2, g_min, g_max)
                reset_detector(t, db_total, db_var, db_count, d_rows, d_total, d_variance,
                               d_width, d_tick, d_drift)
                tree_correct[t] = 0.0
                tree_seen[t] = 0.0
                n_drifts[t] += 1
                if cuts.shape[0] > 0:
                    seg_counts[seg, 0, t] += 1
        if predict:
            normalise(out[i])
        if k >= 0:
            n_seen[0] += 1
            k_now = max(k_now, k + 1)
        i += 1
    return i


@njit
def predict_rows(X, weighted, settings_i, fg_slot, tree_correct, tree_seen, slot_root,
                 node_feature, node_threshold, node_left, node_right, node_active, node_leaf,
                 node_counts, leaf_feat, leaf_mc, leaf_nb, g_w, g_mean, g_m2, out):
    """Accuracy-weighted vote of the foreground trees (river's ``predict_proba_one``).

    A tree votes with the class distribution of the leaf it routes the row to (naive Bayes
    over the leaf's subset, or the leaf's class weights, as :mod:`models.hoeffding._ht_kernels`
    predicts); a leaf without weight does not vote (river's empty prediction)."""
    K = node_counts.shape[1]
    lp = settings_i[1]
    degenerate = settings_i[2]
    scores = np.zeros(K)
    proba = np.zeros(K)
    m = leaf_feat.shape[1]
    ones = np.ones(m, np.uint8)
    x_sub = np.zeros(m)
    for i in range(X.shape[0]):
        x = X[i]
        for c in range(K):
            out[i, c] = 0.0
        for t in range(fg_slot.shape[0]):
            node = _route(fg_slot[t], x, slot_root, node_feature, node_threshold, node_left,
                          node_right)
            counts = node_counts[node]
            total = 0.0
            for c in range(K):
                total += counts[c]
            if total <= 0.0:
                continue
            use_nb = _uses_nb(node, total, lp, node_active, node_leaf, leaf_mc, leaf_nb)
            if use_nb:
                q = node_leaf[node]
                _gather(x, leaf_feat[q], x_sub)
                hs.naive_bayes_log_joint(x_sub, ones, counts, g_w, g_mean, g_m2, q,
                                         degenerate, scores)
            _vote(t, node, total, use_nb, weighted, node_counts, tree_correct,
                  tree_seen, scores, proba, out[i])
        normalise(out[i])
