"""Online feature importances of an online random forest: MDG and MDA (Cassidy & Deviney).

Kernels used by :mod:`models.orf._orf_kernels` while learning and by
:class:`models.OnlineRandomForest.importances` when a report is asked for. All statistics
live in arrays of the forest's state (``imp_*``); they exist only when the forest was built
with ``track_importance=True`` (otherwise they have a zero-length axis and these kernels are
never called).

Statistics per tree ``t`` (Cassidy & Deviney, section II):

* ``imp_count[t, node, c]``: class counts of the in-bag training instances that passed
  through ``node`` (every node of the path, internal nodes included), so that the Gini
  decrease of a split keeps evolving with the stream (paper, Fig. 1). A child created by a
  split starts from the left/right counts of the test that was chosen, like the prediction
  counts do.
* ``imp_oob[t, 0]``, ``imp_oob[t, 1]``: total and correctly classified out-of-bag instances
  (the accuracy part of the tree's online confusion matrix).
* ``imp_delta[t, j]``: the sum over OOB instances of ``correct_j - correct`` where
  ``correct_j`` is the outcome when, at every split on feature ``j``, the instance goes left
  or right at random with the training proportions of the two children (Hapfelmeier et al.
  2014, the paper's substitute for permutation). Features that do not appear on the
  instance's path route exactly as without randomisation, so only features on the path
  are re-routed; the others add zero.

Fading (``importance_decay = d``): every statistic above is a sum of instance weights. The
instance learned at step ``i`` gets weight ``w_i = (1 - d) ** -i`` (kept in ``imp_scale``),
which is the same as multiplying every accumulated count by ``(1 - d)`` at each step, but
costs one multiplication per instance instead of one per statistic. When ``w`` passes
``_RESCALE_AT`` every statistic is divided by ``w`` and ``w`` restarts at 1, which leaves all
ratios (Gini, accuracies, node shares) unchanged. A replaced tree's statistics are zeroed.

References
----------
.. [1] A. P. Cassidy, F. A. Deviney, "Calculating feature importance in data streams with
   concept drift using Online Random Forest", IEEE BigData 2014.
.. [2] A. Hapfelmeier, T. Hothorn, K. Ulm, C. Strobl, "A new variable importance measure for
   random forests with missing data", Statistics and Computing 24(1), 2014.
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit
from ..core._rng import uniform
from ..core._stats import gini

_RESCALE_AT = 1e100


@njit
def _advance_scale(imp_scale, imp_count, imp_oob, imp_delta, decay):
    """Weight of the next instance under fading; rescales all statistics when it is large."""
    if decay <= 0.0:
        return imp_scale[0]
    w = imp_scale[0] / (1.0 - decay)
    if w > _RESCALE_AT:
        inv = 1.0 / w
        imp_count *= inv
        imp_oob *= inv
        imp_delta *= inv
        w = 1.0
    imp_scale[0] = w
    return w


@njit
def _count_total(counts):
    s = 0.0
    for c in range(counts.shape[0]):
        s += counts[c]
    return s


@njit
def _leaf_vote(counts):
    """Predicted class of a leaf's counts, or -1 for an empty leaf (counts as an error)."""
    best = -1
    best_n = 0.0
    for c in range(counts.shape[0]):
        if counts[c] > best_n:
            best_n = counts[c]
            best = c
    return best


@njit
def _route_randomised(t, x, j, node_feature, node_threshold, node_left, node_right, imp_count,
                      rng_imp):
    """Leaf reached by ``x`` when every split on feature ``j`` is decided at random.

    At a node on ``j`` the instance goes left with probability ``n_L / (n_L + n_R)``, the
    children's training proportions (Hapfelmeier et al. 2014); 1/2 when both are empty.
    """
    i = 0
    while node_feature[t, i] >= 0:
        f = node_feature[t, i]
        left = node_left[t, i]
        right = node_right[t, i]
        if f == j:
            n_l = _count_total(imp_count[t, left])
            n_r = _count_total(imp_count[t, right])
            u = uniform(rng_imp, t)
            if n_l + n_r > 0.0:
                go_left = u * (n_l + n_r) < n_l
            else:
                go_left = u < 0.5
        else:
            go_left = x[f] <= node_threshold[t, i]
        i = left if go_left else right
    return i


@njit
def _update_mda(t, x, c, w, leaf, node_feature, node_threshold, node_left, node_right,
                node_count, imp_count, imp_oob, imp_delta, rng_imp, stamp):
    """Account one out-of-bag instance ``(x, c)`` of weight ``w`` for tree ``t``.

    ``leaf`` is where ``x`` lands normally. ``stamp`` is an int64 scratch array of length
    ``n_features`` holding -1 (restored before returning) that de-duplicates the features
    of the path.
    """
    correct = 1.0 if _leaf_vote(node_count[t, leaf]) == c else 0.0
    imp_oob[t, 0] += w
    imp_oob[t, 1] += w * correct
    # mark the distinct features on the path, then re-route once per feature
    i = 0
    while node_feature[t, i] >= 0:
        f = node_feature[t, i]
        stamp[f] = 1
        i = node_left[t, i] if x[f] <= node_threshold[t, i] else node_right[t, i]
    i = 0
    while node_feature[t, i] >= 0:
        f = node_feature[t, i]
        if stamp[f] == 1:
            stamp[f] = -1
            leaf_j = _route_randomised(t, x, f, node_feature, node_threshold, node_left,
                                       node_right, imp_count, rng_imp)
            correct_j = 1.0 if _leaf_vote(node_count[t, leaf_j]) == c else 0.0
            imp_delta[t, f] += w * (correct_j - correct)
        i = node_left[t, i] if x[f] <= node_threshold[t, i] else node_right[t, i]


@njit
def _reset_tree_importance(t, n_nodes_old, imp_count, imp_oob, imp_delta):
    """Forget the statistics of tree ``t`` (it is being replaced by a fresh tree)."""
    for i in range(n_nodes_old):
        for c in range(imp_count.shape[2]):
            imp_count[t, i, c] = 0.0
    imp_oob[t, 0] = 0.0
    imp_oob[t, 1] = 0.0
    for j in range(imp_delta.shape[1]):
        imp_delta[t, j] = 0.0


@njit
def _mdg_per_tree(node_feature, node_left, node_right, n_nodes, imp_count, n_features):
    """MDG of every tree: ``(n_trees, n_features)``.

    For each split node ``i`` on feature ``j``: ``(n_i / n_root) * (I(L+R) - P_L I(L) -
    P_R I(R))`` with ``I`` the Gini impurity (paper, eqs. 1-2), ``L``, ``R`` the children's
    current counts and ``n_i`` their total (the node's incoming data); summed per feature.
    """
    n_trees = node_feature.shape[0]
    n_classes = imp_count.shape[2]
    out = np.zeros((n_trees, n_features))
    both = np.empty(n_classes)
    for t in range(n_trees):
        if node_feature[t, 0] < 0:
            continue
        n_root = (_count_total(imp_count[t, node_left[t, 0]])
                  + _count_total(imp_count[t, node_right[t, 0]]))
        if n_root <= 0.0:
            continue
        for i in range(n_nodes[t]):
            f = node_feature[t, i]
            if f < 0:
                continue
            counts_l = imp_count[t, node_left[t, i]]
            counts_r = imp_count[t, node_right[t, i]]
            n_l = _count_total(counts_l)
            n_r = _count_total(counts_r)
            n = n_l + n_r
            if n <= 0.0:
                continue
            for c in range(n_classes):
                both[c] = counts_l[c] + counts_r[c]
            decrease = gini(both) - (n_l / n) * gini(counts_l) - (n_r / n) * gini(counts_r)
            out[t, f] += (n / n_root) * decrease
    return out


def mdg(node_feature, node_left, node_right, n_nodes, imp_count, n_features) -> np.ndarray:
    """Mean decrease in Gini impurity per feature, averaged over all trees (stumps add 0)."""
    per_tree = _mdg_per_tree(node_feature, node_left, node_right, n_nodes, imp_count,
                             n_features)
    return per_tree.mean(axis=0)


def mda(imp_oob, imp_delta) -> np.ndarray:
    """Mean decrease in accuracy per feature: mean over trees of ``acc_t - acc_t,j``.

    Trees without out-of-bag evidence yet (fresh trees) are left out of the mean; all zeros
    when no tree has any.
    """
    total = imp_oob[:, 0]
    has = total > 0.0
    if not has.any():
        return np.zeros(imp_delta.shape[1])
    drop = -imp_delta[has] / total[has, None]
    return drop.mean(axis=0)
