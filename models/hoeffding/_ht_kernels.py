"""Hoeffding tree kernels: learn a batch of rows, predict a batch of rows.

Node arrays (``N`` node capacity, see :mod:`models.core._trees` for the tree layout)::

    node_feature, node_threshold, node_left, node_right, node_depth   the tree
    node_active     uint8    1 for a leaf that still learns statistics and may split
    node_last_eval  float64  leaf weight at its last split attempt
    node_mc, node_nb float64 weight a leaf's majority class / naive Bayes predicted right
    node_merit      float64  information gain of a split node's split
    node_counts     (N, K)   class weights: a leaf's observed ones, a split node's at its split
    g_*             (N, F, K) Gaussian estimators (:mod:`models.hoeffding._hoeffding`), leaves only
    n_nodes         (1,)     nodes in use

A feature with ``mask[f] == 0`` is missing (the ABFS filter): its estimators are not
updated, naive Bayes leaves it out, and a row that reaches a split on it stops at that
split node: it is not learned and is predicted by the node's class weights (MOA).
"""

from __future__ import annotations

import math

import numpy as np

from ..core._jit import njit
from ..core._stats import argmax
from . import _hoeffding as hs

LEAF_MC = 0
LEAF_NB = 1
LEAF_NBA = 2


@njit(inline="always")
def route(x, mask, node_feature, node_threshold, node_left, node_right):
    """Node reached by ``x``: a leaf, or the split node whose feature is missing."""
    i = 0
    while node_feature[i] >= 0:
        f = node_feature[i]
        if mask[f] == 0:
            return i
        i = node_left[i] if x[f] <= node_threshold[i] else node_right[i]
    return i


@njit
def _restart_leaf(node, moa, node_mc, node_nb, g_w, g_mean, g_m2, g_min, g_max):
    """A leaf whose split attempt answered "no split" forgets its estimators.

    Both references deactivate such a leaf and then, in the memory manager that runs right
    after every decided attempt, reactivate every inactive leaf with fresh, empty attribute
    observers (river's ``_enforce_size_limit``, MOA's ``enforceTrackerLimit``); the class
    weights stay. MOA's reactivated leaf is a new node, so (``moa``) its naive Bayes
    adaptive counters restart too; river keeps them.
    """
    g_w[node] = 0.0
    g_mean[node] = 0.0
    g_m2[node] = 0.0
    g_min[node] = math.inf
    g_max[node] = -math.inf
    if moa:
        node_mc[node] = 0.0
        node_nb[node] = 0.0


#: what a split attempt decided (:func:`split_decision`)
NO_DECISION = 0  # not attempted (one class), or the best candidate is not clearly best yet
RESTART = 1  # "no split": the leaf forgets its estimators and goes on learning
SPLIT = 2  # split on the best feature at its best threshold


@njit(_nrt=False)
def split_decision(pre, leaf, mask, delta, tau, n_splits, min_branch_fraction, max_share,
                   null_merit, moa, g_w, g_mean, g_m2, g_min, g_max, left, right, best_left,
                   best_right):
    """River's ``_attempt_to_split`` decision for a leaf with class weights ``pre`` and
    estimators ``g_*[leaf]``: ``(decision, feature, threshold, merit)``; on :data:`SPLIT`
    the children's class weights are in ``best_left`` and ``best_right``."""
    present = 0
    total = 0.0
    top = 0.0
    for k in range(pre.shape[0]):
        if pre[k] > 0.0:
            present += 1
            total += pre[k]
            if pre[k] > top:
                top = pre[k]
    if present < 2:
        return NO_DECISION, -1, 0.0, 0.0
    if top / total > max_share:
        # river answers "no split" for a leaf dominated by one class
        return RESTART, -1, 0.0, 0.0
    # candidates in river's order (the null split first, then the features); after a stable
    # ascending sort the last of the equal best wins, hence ">="
    best = null_merit
    best_f = -1
    best_t = 0.0
    second = -math.inf
    F = g_w.shape[1]
    for f in range(F):
        if mask[f] == 0:
            continue
        m, t = hs.best_numeric_split(g_w, g_mean, g_m2, g_min, g_max, leaf, f, pre, n_splits,
                                     min_branch_fraction, left, right, best_left, best_right)
        if m >= best:
            second = best
            best = m
            best_f = f
            best_t = t
        elif m >= second:
            second = m
    hb = hs.hoeffding_bound(hs.info_gain_range(pre, moa), delta, total)
    if not (best - second > hb or hb < tau):
        return NO_DECISION, -1, 0.0, 0.0
    if best_f < 0 or best == -math.inf:
        return RESTART, -1, 0.0, 0.0
    hs.best_numeric_split(g_w, g_mean, g_m2, g_min, g_max, leaf, best_f, pre, n_splits,
                          min_branch_fraction, left, right, best_left, best_right)
    return SPLIT, best_f, best_t, best


@njit
def _attempt_split(node, mask, delta, tau, n_splits, min_branch_fraction,
                   max_share, null_merit, moa, node_feature, node_threshold, node_left, node_right,
                   node_depth, node_active, node_last_eval, node_mc, node_nb, node_merit,
                   node_counts, g_w, g_mean, g_m2, g_min, g_max, n_nodes, left, right,
                   best_left, best_right):
    """River's ``_attempt_to_split`` for one leaf (see :class:`HoeffdingTree`)."""
    decision, best_f, best_t, best = split_decision(
        node_counts[node], node, mask, delta, tau, n_splits, min_branch_fraction, max_share,
        null_merit, moa, g_w, g_mean, g_m2, g_min, g_max, left, right, best_left, best_right)
    if decision == RESTART:
        _restart_leaf(node, moa, node_mc, node_nb, g_w, g_mean, g_m2, g_min, g_max)
    if decision != SPLIT:
        return
    lc = n_nodes[0]
    rc = lc + 1
    n_nodes[0] = lc + 2
    node_feature[node] = best_f
    node_threshold[node] = best_t
    node_left[node] = lc
    node_right[node] = rc
    node_merit[node] = best
    node_active[node] = 0
    for c in (lc, rc):
        dist = best_left if c == lc else best_right
        node_feature[c] = -1
        node_left[c] = -1
        node_right[c] = -1
        node_depth[c] = node_depth[node] + 1
        node_active[c] = 1
        s = 0.0
        for k in range(dist.shape[0]):
            node_counts[c, k] = dist[k]
            s += dist[k]
        node_last_eval[c] = s  # river: the inherited weight counts as already evaluated
        node_mc[c] = 0.0
        node_nb[c] = 0.0


@njit
def learn_rows(X, y, w, mask, start, prequential, out, k_known, grace, delta, tau, n_splits,
               min_branch_fraction, max_share, null_merit, leaf_prediction, degenerate, max_depth,
               moa,
               node_feature, node_threshold, node_left, node_right, node_depth, node_active,
               node_last_eval, node_mc, node_nb, node_merit, node_counts,
               g_w, g_mean, g_m2, g_min, g_max, n_nodes, n_seen):
    """Learn rows ``start, start+1, ...``; returns the first row not learned.

    With ``prequential``, each row is first predicted into ``out[i]`` by the tree as it
    stands (test-then-train inside one call), over the classes known then: ``k_known`` before
    the call, and those of the rows learned since (class indices follow first appearance).

    Stops early (returns that row) when fewer than two free nodes are left, so that the
    caller can double the node capacity and call again.
    """
    K = node_counts.shape[1]
    N = node_feature.shape[0]
    left, right, best_left, best_right = hs.split_scratch(K)
    scores = np.zeros(K)
    k_now = k_known
    for r in range(start):
        k_now = max(k_now, y[r] + 1)
    i = start
    while i < X.shape[0]:
        if n_nodes[0] + 2 > N:
            return i
        x = X[i]
        k = y[i]
        wi = w[i]
        if prequential and n_seen[0] > 0:  # before any row: no prediction (zeros)
            _predict_row(x, mask, leaf_prediction, degenerate, node_feature, node_threshold,
                         node_left, node_right, node_active, node_mc, node_nb, node_counts,
                         g_w, g_mean, g_m2, out[i, :k_now], scores)
        k_now = max(k_now, k + 1)
        n_seen[0] += 1
        i += 1
        if wi <= 0.0:
            continue
        node = route(x, mask, node_feature, node_threshold, node_left, node_right)
        if node_feature[node] >= 0:
            continue  # stopped at a split on a missing feature: MOA learns nothing
        counts = node_counts[node]
        active = node_active[node] == 1
        if active and leaf_prediction == LEAF_NBA:
            total = 0.0
            for c in range(K):
                total += counts[c]
            # an empty leaf: river credits the majority class; MOA takes class 0 as the
            # prediction of both (the index of the largest of all-zero votes)
            if (total <= 0.0 and not moa) or argmax(counts) == k:
                node_mc[node] += wi
            if total > 0.0 or moa:
                hs.naive_bayes_log_joint(x, mask, counts, g_w, g_mean, g_m2, node,
                                         degenerate, scores)
                if argmax(scores) == k:
                    node_nb[node] += wi
        counts[k] += wi
        if not active:
            continue
        for f in range(x.shape[0]):
            if mask[f] != 0:
                hs.gaussian_update(g_w, g_mean, g_m2, g_min, g_max, node, f, k, x[f], wi)
        if node_depth[node] >= max_depth:
            node_active[node] = 0
            continue
        total = 0.0
        for c in range(K):
            total += counts[c]
        if total - node_last_eval[node] >= grace:
            _attempt_split(node, mask, delta, tau, n_splits, min_branch_fraction,
                           max_share, null_merit, moa, node_feature, node_threshold, node_left,
                           node_right, node_depth, node_active, node_last_eval, node_mc,
                           node_nb, node_merit, node_counts, g_w, g_mean, g_m2, g_min, g_max,
                           n_nodes, left, right, best_left, best_right)
            node_last_eval[node] = total
    return i


@njit(inline="always")
def _predict_row(x, mask, leaf_prediction, degenerate, node_feature, node_threshold,
                 node_left, node_right, node_active, node_mc, node_nb, node_counts,
                 g_w, g_mean, g_m2, out, scores):
    """Class probabilities of one row into ``out``, over its first ``len(out)`` classes (the
    classes known when the row is predicted)."""
    K = out.shape[0]
    node = route(x, mask, node_feature, node_threshold, node_left, node_right)
    counts = node_counts[node, :K]
    use_nb = node_feature[node] < 0 and node_active[node] == 1 and (
        leaf_prediction == LEAF_NB
        or (leaf_prediction == LEAF_NBA and node_nb[node] >= node_mc[node]))
    if use_nb:
        hs.naive_bayes_log_joint(x, mask, counts, g_w, g_mean, g_m2, node, degenerate,
                                 scores[:K])
        hs.normalise_log(scores[:K], out)
        return
    total = 0.0
    for c in range(K):
        total += counts[c]
    for c in range(K):
        out[c] = counts[c] / total if total > 0.0 else 1.0 / K


@njit
def predict_rows(X, mask, leaf_prediction, degenerate, node_feature, node_threshold,
                 node_left, node_right, node_active, node_mc, node_nb, node_counts,
                 g_w, g_mean, g_m2, out):
    """Class probabilities of each row into ``out`` (n, K)."""
    scores = np.zeros(node_counts.shape[1])
    for i in range(X.shape[0]):
        _predict_row(X[i], mask, leaf_prediction, degenerate, node_feature, node_threshold,
                     node_left, node_right, node_active, node_mc, node_nb, node_counts,
                     g_w, g_mean, g_m2, out[i], scores)
