"""Adaptive random forest kernels: many Hoeffding trees in flat arrays, learned row by row.

A forest of ``T`` trees holds ``S = 2 T`` tree *slots* (foreground and background trees);
``fg_slot[i]`` and ``bg_slot[i]`` say which slot holds tree ``i``'s foreground and its
(spare or learning) background tree, so a background tree replaces the foreground by
swapping two indices. Each slot has the node arrays of :mod:`models._ht_kernels` with a
leading slot axis, plus ``leaf_feat (S, N, m)``: the random feature subset of each leaf,
ascending (the features whose estimators it keeps and whose splits it scores). The Gaussian
estimators ``g_* (S, N, m, K)`` are indexed by position in the leaf's subset, so a leaf
holds ``m`` of the ``F`` features' statistics; a split's position is turned into the
feature's column right after the split.

The per-tree ADWIN detectors are two banks in the layout of :mod:`models.adwin` (warning,
drift), updated through its kernel. Their rows start few (a window of ``w`` values needs about
``log2(w / 5)`` rows) and grow by doubling like the node arrays: the kernel returns before a
row that a detector might not have room for.
"""

from __future__ import annotations

import math

import numpy as np

from . import _hoeffding as hs
from . import _rng
from ._ht_kernels import LEAF_NB, LEAF_NBA, _attempt_split
from ._jit import njit
from ._stats import argmax
from .adwin import _update_pairs, reset_detector


@njit
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


@njit
def reset_slot(s, rng, g, m, perm, node_feature, node_threshold, node_left, node_right,
               node_depth, node_active, node_last_eval, node_mc, node_nb, node_merit,
               node_counts, g_w, g_mean, g_m2, g_min, g_max, leaf_feat, n_nodes):
    """Make slot ``s`` a fresh tree: one empty root leaf with a new feature subset."""
    for j in range(n_nodes[s, 0]):
        node_feature[s, j] = -1
        node_threshold[s, j] = 0.0
        node_left[s, j] = -1
        node_right[s, j] = -1
        node_depth[s, j] = 0
        node_active[s, j] = 0
        node_last_eval[s, j] = 0.0
        node_mc[s, j] = 0.0
        node_nb[s, j] = 0.0
        node_merit[s, j] = 0.0
        node_counts[s, j] = 0.0
        g_w[s, j] = 0.0
        g_mean[s, j] = 0.0
        g_m2[s, j] = 0.0
        g_min[s, j] = math.inf
        g_max[s, j] = -math.inf
        leaf_feat[s, j] = 0
    node_active[s, 0] = 1
    n_nodes[s, 0] = 1
    sample_feats(rng, g, leaf_feat[s, 0], perm.shape[0], perm)


@njit(inline="always")
def _route(s, x, node_feature, node_threshold, node_left, node_right):
    """Leaf of the tree in slot ``s`` reached by ``x``."""
    node = 0
    while node_feature[s, node] >= 0:
        node = node_left[s, node] if x[node_feature[s, node]] <= node_threshold[s, node] \
            else node_right[s, node]
    return node


@njit
def _leaf_votes(s, node, x, degenerate, node_counts, g_w, g_mean, g_m2, leaf_feat, scores,
                x_sub, ones):
    """``(majority class, naive Bayes class, leaf weight)`` of a leaf (-1: no vote).

    The naive Bayes class is the argmax of the log joint over the leaf's own subset, as the
    Hoeffding tree kernels compute it both to predict and to score the adaptive counters."""
    counts = node_counts[s, node]
    total = 0.0
    for c in range(counts.shape[0]):
        total += counts[c]
    if total <= 0.0:
        return -1, -1, total
    _gather(x, leaf_feat[s, node], x_sub)
    hs.naive_bayes_log_joint(x_sub, ones, counts, g_w[s], g_mean[s], g_m2[s], node,
                             degenerate, scores)
    return argmax(counts), argmax(scores), total


@njit
def _learn_tree(s, node, x, k, wi, mc_pred, nb_pred, total_before, rng, g, m, perm,
                settings_f, settings_i,
                node_feature, node_threshold, node_left, node_right, node_depth, node_active,
                node_last_eval, node_mc, node_nb, node_merit, node_counts,
                g_w, g_mean, g_m2, g_min, g_max, leaf_feat, n_nodes, left, right, best_left,
                best_right, ones):
    """One weighted row into leaf ``node`` of the tree in slot ``s`` (the Hoeffding tree's
    row step, with the leaf's random feature subset in place of the global mask);
    ``mc_pred``, ``nb_pred`` and ``total_before`` are the leaf's votes before the row."""
    grace, delta, tau, mbf, max_share = (settings_f[0], settings_f[1], settings_f[2],
                                         settings_f[3], settings_f[4])
    n_splits, leaf_prediction, max_depth = settings_i[0], settings_i[1], settings_i[3]
    counts = node_counts[s, node]
    K = counts.shape[0]
    feats = leaf_feat[s, node]
    active = node_active[s, node] == 1
    if active and leaf_prediction == LEAF_NBA:
        # river: an empty leaf credits its majority class
        if total_before <= 0.0 or mc_pred == k:
            node_mc[s, node] += wi
        if total_before > 0.0 and nb_pred == k:
            node_nb[s, node] += wi
    counts[k] += wi
    if not active:
        return
    for j in range(feats.shape[0]):
        hs.gaussian_update(g_w[s], g_mean[s], g_m2[s], g_min[s], g_max[s], node, j, k,
                           x[feats[j]], wi)
    if node_depth[s, node] >= max_depth:
        node_active[s, node] = 0
        return
    total = 0.0
    for c in range(K):
        total += counts[c]
    if total - node_last_eval[s, node] >= grace:
        before = n_nodes[s, 0]
        _attempt_split(node, ones, delta, tau, n_splits, mbf, max_share, -math.inf, False,
                       node_feature[s], node_threshold[s], node_left[s], node_right[s],
                       node_depth[s], node_active[s], node_last_eval[s], node_mc[s],
                       node_nb[s], node_merit[s], node_counts[s], g_w[s], g_mean[s], g_m2[s],
                       g_min[s], g_max[s], n_nodes[s], left, right, best_left, best_right)
        node_last_eval[s, node] = total
        if n_nodes[s, 0] > before:  # split on subset position j: store feature feats[j]
            node_feature[s, node] = feats[node_feature[s, node]]
            for c in range(before, n_nodes[s, 0]):
                sample_feats(rng, g, leaf_feat[s, c], perm.shape[0], perm)


@njit(inline="always")
def _vote(t, s, node, total, mc, nb, weighted, lp, node_active, node_mc, node_nb, node_counts,
          tree_correct, tree_seen, scores, proba, out_row):
    """Add tree ``t``'s vote for a row to ``out_row``, as :func:`predict_rows` weighs it,
    over its first ``len(out_row)`` classes (those known when the row is predicted);
    ``scores``: the leaf's naive Bayes log joint, as :func:`_leaf_votes` left it (each class's
    score does not depend on the others)."""
    if total <= 0.0:
        return
    K = out_row.shape[0]
    wt = 1.0
    if weighted and tree_correct[t] > 0.0:
        wt = tree_correct[t] / tree_seen[t]
    if node_active[s, node] == 1 and (
            lp == LEAF_NB or (lp == LEAF_NBA and node_nb[s, node] >= node_mc[s, node])):
        hs.normalise_log(scores[:K], proba[:K])
        for c in range(K):
            out_row[c] += proba[c] * wt
    else:
        counts = node_counts[s, node]
        for c in range(K):
            out_row[c] += counts[c] / total * wt


@njit(inline="always")
def _normalise(row):
    tot = 0.0
    for c in range(row.shape[0]):
        tot += row[c]
    if tot > 0.0:
        for c in range(row.shape[0]):
            row[c] /= tot


@njit
def learn_rows(X, y, start, out, k_known, weighted, lam, m, settings_f, settings_i, w_settings,
               d_settings,
               rng, fg_slot, bg_slot, bg_active, tree_correct, tree_seen, n_warnings,
               n_drifts, n_seen,
               node_feature, node_threshold, node_left, node_right, node_depth, node_active,
               node_last_eval, node_mc, node_nb, node_merit, node_counts,
               g_w, g_mean, g_m2, g_min, g_max, leaf_feat, n_nodes,
               wb_total, wb_var, wb_count, w_rows, w_total, w_variance, w_width, w_tick,
               w_drift, w_det, w_seen,
               db_total, db_var, db_count, d_rows, d_total, d_variance, d_width, d_tick,
               d_drift, d_det, d_seen):
    """Learn rows ``start, ...`` (river's ``ARFClassifier.learn_one`` per row); returns the
    first row not learned (early when a slot may run out of nodes or a detector of rows: the
    caller grows them).

    With ``out`` of one row per row of ``X`` (test-then-train), each row is first predicted
    by the forest as it stands (``out[i]``: the probabilities :func:`predict_rows` gives,
    ``weighted`` by the trees' accuracy), then learned: each tree votes before it learns the
    row, and no tree's vote depends on another's learning. A row whose label is -1 is only
    predicted (an unlabelled instance)."""
    T = fg_slot.shape[0]
    N = node_feature.shape[1]
    F = X.shape[1]
    K = node_counts.shape[2]
    left = np.zeros(K)
    right = np.zeros(K)
    best_left = np.zeros(K)
    best_right = np.zeros(K)
    scores = np.zeros(K)
    perm = np.zeros(F, np.int64)
    ones = np.ones(m, np.uint8)
    x_sub = np.zeros(m)
    det = np.zeros(1, np.int64)
    lp = settings_i[1]
    degenerate = settings_i[2]
    val = np.zeros(1)
    flag = np.zeros(1, np.bool_)
    proba = np.zeros(K)
    predict = out.shape[0] > 0
    k_now = k_known  # classes known when row i is predicted (indices follow first appearance)
    for r in range(start):
        k_now = max(k_now, y[r] + 1)
    i = start
    while i < X.shape[0]:
        for s in range(n_nodes.shape[0]):
            if n_nodes[s, 0] + 2 > N:
                return i
        # one insertion per detector and row adds at most one row (the ADWIN kernel's rule)
        for t in range(T):
            if w_rows[t] >= wb_total.shape[1] or d_rows[t] >= db_total.shape[1]:
                return i
        x = X[i]
        k = y[i]
        if predict:
            for c in range(K):
                out[i, c] = 0.0
        for t in range(T):
            s = fg_slot[t]
            node = _route(s, x, node_feature, node_threshold, node_left, node_right)
            mc_pred, nb_pred, tot = _leaf_votes(s, node, x, degenerate, node_counts, g_w,
                                                g_mean, g_m2, leaf_feat, scores, x_sub,
                                                ones)
            if predict:
                _vote(t, s, node, tot, mc_pred, nb_pred, weighted, lp, node_active, node_mc,
                      node_nb, node_counts, tree_correct, tree_seen, scores, proba,
                      out[i, :k_now])
            if k < 0:
                continue  # an unlabelled row: predicted, not learned
            # the tree's own prediction before learning the row (_predict_row's argmax)
            pred = mc_pred
            if tot > 0.0 and node_active[s, node] == 1 and (
                    lp == LEAF_NB or (lp == LEAF_NBA and node_nb[s, node] >= node_mc[s, node])):
                pred = nb_pred
            err = 0.0 if pred == k else 1.0
            tree_seen[t] += 1.0
            if err == 0.0:
                tree_correct[t] += 1.0
            kw = _rng.poisson(rng, t, lam)
            if kw <= 0:
                continue
            if bg_active[t] == 1:
                b_s = bg_slot[t]
                b_node = _route(b_s, x, node_feature, node_threshold, node_left, node_right)
                b_mc, b_nb, b_tot = _leaf_votes(b_s, b_node, x, degenerate, node_counts, g_w,
                                                g_mean, g_m2, leaf_feat, scores, x_sub,
                                                ones)
                _learn_tree(b_s, b_node, x, k, float(kw), b_mc, b_nb, b_tot, rng, t, m, perm,
                            settings_f, settings_i, node_feature, node_threshold, node_left,
                            node_right, node_depth, node_active, node_last_eval, node_mc,
                            node_nb, node_merit, node_counts, g_w, g_mean, g_m2, g_min, g_max,
                            leaf_feat, n_nodes, left, right, best_left, best_right, ones)
            _learn_tree(s, node, x, k, float(kw), mc_pred, nb_pred, tot, rng, t, m, perm,
                        settings_f, settings_i, node_feature, node_threshold, node_left,
                        node_right, node_depth, node_active, node_last_eval, node_mc,
                        node_nb, node_merit, node_counts, g_w, g_mean, g_m2, g_min, g_max,
                        leaf_feat, n_nodes, left, right, best_left, best_right, ones)
            det[0] = t
            val[0] = err
            _update_pairs(det, val, 0, flag, w_settings[0], int(w_settings[1]),
                          int(w_settings[2]), w_settings[3], w_settings[4], wb_total, wb_var,
                          wb_count, w_rows, w_total, w_variance, w_width, w_tick, w_drift,
                          w_det, w_seen)
            if flag[0]:
                reset_slot(bg_slot[t], rng, t, m, perm, node_feature, node_threshold,
                           node_left, node_right, node_depth, node_active, node_last_eval,
                           node_mc, node_nb, node_merit, node_counts, g_w, g_mean, g_m2,
                           g_min, g_max, leaf_feat, n_nodes)
                bg_active[t] = 1
                reset_detector(t, wb_total, wb_var, wb_count, w_rows, w_total, w_variance,
                               w_width, w_tick, w_drift)
                n_warnings[t] += 1
            _update_pairs(det, val, 0, flag, d_settings[0], int(d_settings[1]),
                          int(d_settings[2]), d_settings[3], d_settings[4], db_total, db_var,
                          db_count, d_rows, d_total, d_variance, d_width, d_tick, d_drift,
                          d_det, d_seen)
            if flag[0]:
                if bg_active[t] == 1:
                    fg_slot[t] = bg_slot[t]
                    bg_slot[t] = s
                    bg_active[t] = 0
                    reset_detector(t, wb_total, wb_var, wb_count, w_rows, w_total,
                                   w_variance, w_width, w_tick, w_drift)
                else:
                    reset_slot(s, rng, t, m, perm, node_feature, node_threshold, node_left,
                               node_right, node_depth, node_active, node_last_eval, node_mc,
                               node_nb, node_merit, node_counts, g_w, g_mean, g_m2, g_min,
                               g_max, leaf_feat, n_nodes)
                reset_detector(t, db_total, db_var, db_count, d_rows, d_total, d_variance,
                               d_width, d_tick, d_drift)
                tree_correct[t] = 0.0
                tree_seen[t] = 0.0
                n_drifts[t] += 1
        if predict:
            _normalise(out[i])
        if k >= 0:
            n_seen[0] += 1
            k_now = max(k_now, k + 1)
        i += 1
    return i


@njit
def predict_rows(X, weighted, settings_i, fg_slot, tree_correct, tree_seen,
                 node_feature, node_threshold, node_left, node_right, node_active, node_mc,
                 node_nb, node_counts, g_w, g_mean, g_m2, leaf_feat, out):
    """Accuracy-weighted vote of the foreground trees (river's ``predict_proba_one``).

    A tree votes with the class distribution of the leaf it routes the row to (naive Bayes
    over the leaf's subset, or the leaf's class weights, as :mod:`models._ht_kernels`
    predicts); a leaf without weight does not vote (river's empty prediction)."""
    K = node_counts.shape[2]
    lp = settings_i[1]
    degenerate = settings_i[2]
    scores = np.zeros(K)
    proba = np.zeros(K)
    m = leaf_feat.shape[2]
    ones = np.ones(m, np.uint8)
    x_sub = np.zeros(m)
    for i in range(X.shape[0]):
        x = X[i]
        for c in range(K):
            out[i, c] = 0.0
        for t in range(fg_slot.shape[0]):
            s = fg_slot[t]
            node = _route(s, x, node_feature, node_threshold, node_left, node_right)
            counts = node_counts[s, node]
            total = 0.0
            for c in range(K):
                total += counts[c]
            if total <= 0.0:
                continue
            wt = 1.0
            if weighted and tree_correct[t] > 0.0:
                wt = tree_correct[t] / tree_seen[t]
            if node_active[s, node] == 1 and (
                    lp == LEAF_NB or (lp == LEAF_NBA and node_nb[s, node] >= node_mc[s, node])):
                _gather(x, leaf_feat[s, node], x_sub)
                hs.naive_bayes_log_joint(x_sub, ones, counts, g_w[s], g_mean[s], g_m2[s],
                                         node, degenerate, scores)
                hs.normalise_log(scores, proba)
                for c in range(K):
                    out[i, c] += proba[c] * wt
            else:
                for c in range(K):
                    out[i, c] += counts[c] / total * wt
        tot = 0.0
        for c in range(K):
            tot += out[i, c]
        if tot > 0.0:
            for c in range(K):
                out[i, c] /= tot
