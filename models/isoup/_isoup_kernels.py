"""iSOUP-Tree kernels for one tree or a bagged forest of them: learn and predict batches.

A single iSOUP tree is a forest of one tree without bagging whose leaves observe every
feature, so :class:`~models.isoup.isoup_tree.ISOUPTree` and :class:`~models.isoup.isoup_forest.ISOUPSymRF`
run the same kernels.

State (``T`` trees, ``N`` node capacity, ``S`` observer slots, ``P`` features per leaf,
``F`` features, ``M`` targets; tree layout as in :mod:`models.core._trees`, one row per tree)::

    node_feature, node_threshold, node_left, node_right, node_depth   (T, N) the trees
    node_slot       (T, N)          observer slot of a leaf (-1 for a split node)
    node_last_eval  (T, N)          leaf weight at its last split attempt
    node_w          (T, N)          leaf weight (a child starts with its branch's weight)
    node_fit_w      (T, N)          weight the leaf's perceptron learned (its rate decays with it)
    node_ysum       (T, N, M)       weighted target sums of the leaf (the mean model)
    node_err        (T, N, M, 2)    faded absolute errors: [..., 0] perceptron, [..., 1] mean
    node_lin        (T, N, M, F+1)  perceptron weights (bias last) on standardised values
    slot_features   (T, S, P)       the features a leaf observes (its random subspace)
    obs_*           (T, S, P, ...)  bounded E-BST observers (:mod:`models.isoup._ebst`)
    norm_w (1,), x_mean, x_m2 (F,), y_mean, y_m2 (M,)   the standardiser of the stream
    rng (T,)                        one generator per tree (:mod:`models.core._rng`)
    n_nodes, n_slots (T,), n_seen (1,)
    d_* (T, ...), n_drifts (T,)     a drift detector per tree (the ADWIN layout of
                                    :mod:`models.drift.adwin`) and the trees replaced (forest only)
    bg_* (T, ...)                   a background tree per tree, the same layout (none while
                                    ``bg_n_nodes`` is 0), its generators ``bg_rng``, the faded
                                    comparison with its tree ``bg_cmp`` (T, 5) and the
                                    backgrounds started ``n_backgrounds`` (forest only)

Every row is standardised by the statistics of the rows before it (``(v - mean) / sd``, 0
without spread): one standardiser for the whole learner, since it describes the stream, not a
bootstrap replicate. A perceptron learns by the delta rule on standardised values, with a
rate ``learning_ratio / (1 + learning_ratio_decay * n)`` (``n``: weight the leaf's own
perceptron learned), capped at the rate that fits the row exactly (:func:`capped_rate`):
the cap keeps a leaf stable on any number of features and any raw scale (SCM20d's features
are in the thousands). MOA instead rescales each target's weights to unit L1 norm after
every step (``unit_l1``), which also bounds the outputs but leaves every fit of another norm
out of reach; it remains for states written with it.

On the per-row path every array a numba function receives costs two atomic reference-count
updates per call (inlined helpers too: inlining binds each argument to a new name), which
measured more than the arithmetic. So the leaf's learning step, the observers' update
(:func:`models.isoup._ebst.ebst_learn`, one call per row and leaf with the loop over features
inside) and the prediction bookkeeping are plain calls compiled without numba's runtime
(``_nrt=False``): they allocate nothing and keep no array, so they need no reference counts
(the caller owns every array). Together: +60% rows/s on the 10-tree forest.
"""

from __future__ import annotations

import math

import numpy as np

from ..core._jit import njit
from ..core._rng import poisson, randint
from ..core._trees import copy_into, find_leaf
from ..drift.adwin import _update_pairs, reset_detector
from ..hoeffding import _hoeffding as hs
from . import _ebst as eb

LEAF_ADAPTIVE = 0
LEAF_PERCEPTRON = 1
LEAF_MEAN = 2


@njit(inline="always")
def standardise(x, y, norm_w, x_mean, x_m2, y_mean, y_m2, xn, yn, y_scale):
    """``xn = (x - mean) / sd`` (0 without spread); ``yn`` likewise, ``y_scale = sd`` (1
    without spread)."""
    n = norm_w[0]
    for f in range(x.shape[0]):
        sd = math.sqrt(x_m2[f] / n) if n > 0.0 else 0.0
        xn[f] = (x[f] - x_mean[f]) / sd if sd > 0.0 else 0.0
    for j in range(y_mean.shape[0]):
        sd = math.sqrt(y_m2[j] / n) if n > 0.0 else 0.0
        y_scale[j] = sd if sd > 0.0 else 1.0
        yn[j] = (y[j] - y_mean[j]) / y_scale[j]


@njit(inline="always")
def update_standardiser(x, y, w, norm_w, x_mean, x_m2, y_mean, y_m2):
    """Weighted Welford step of the input and target standardiser."""
    n = norm_w[0] + w
    norm_w[0] = n
    for f in range(x.shape[0]):
        old = x_mean[f]
        new = old + (w / n) * (x[f] - old)
        x_mean[f] = new
        x_m2[f] += w * (x[f] - old) * (x[f] - new)
    for j in range(y.shape[0]):
        old = y_mean[j]
        new = old + (w / n) * (y[j] - old)
        y_mean[j] = new
        y_m2[j] += w * (y[j] - old) * (y[j] - new)


@njit
def row_scratch(F, M):
    """Scratch of one row, allocated once per kernel call (:func:`standardise` fills the first
    three, :func:`leaf_outputs` the last three).

    Parameters
    ----------
    F, M : int
        Features and targets.

    Returns
    -------
    xn : ndarray of shape (F,)
        The standardised features.
    yn, y_scale : ndarray of shape (M,)
        The standardised targets and the targets' scales (ones until standardised).
    p_norm, p_lin, p_mean : ndarray of shape (M,)
        A leaf's outputs: its model's standardised and rescaled predictions, and its mean.
    """
    return np.zeros(F), np.zeros(M), np.ones(M), np.zeros(M), np.zeros(M), np.zeros(M)


@njit(inline="always")
def leaf_outputs(t, node, xn, y_mean, y_scale, node_w, node_ysum, node_lin, p_norm, p_lin, p_mean):
    """The leaf's perceptron (standardised and raw) and mean predictions of every target."""
    F = xn.shape[0]
    w = node_w[t, node]
    for j in range(y_mean.shape[0]):
        s = node_lin[t, node, j, F]
        for f in range(F):
            s += node_lin[t, node, j, f] * xn[f]
        p_norm[j] = s
        p_lin[j] = s * y_scale[j] + y_mean[j]
        p_mean[j] = node_ysum[t, node, j] / w if w > 0.0 else y_mean[j]


@njit(_nrt=False, inline="always")
def leaf_answer(t, node, j, leaf_mode, node_err, p_lin, p_mean):
    """The leaf's answer for target ``j``: its model with the lower faded error (adaptive
    leaves), or the model ``leaf_mode`` names."""
    if leaf_mode == LEAF_MEAN:
        return p_mean[j]
    if leaf_mode == LEAF_PERCEPTRON or node_err[t, node, j, 0] < node_err[t, node, j, 1]:
        return p_lin[j]
    return p_mean[j]


@njit(_nrt=False)
def add_outputs(out, i, T, t, node, leaf_mode, node_err, p_lin, p_mean):
    """``out[i, j] += answer / T`` for every target ``j`` (:func:`leaf_answer`)."""
    for j in range(p_lin.shape[0]):
        out[i, j] += leaf_answer(t, node, j, leaf_mode, node_err, p_lin, p_mean) / T


@njit
def draw_features(t, slot, rng, slot_features, perm):
    """A new leaf's subspace: ``P`` distinct features drawn uniformly (all when ``P == F``)."""
    P = slot_features.shape[2]
    F = perm.shape[0]
    if P >= F:
        for i in range(P):
            slot_features[t, slot, i] = i
        return
    for f in range(F):
        perm[f] = f
    for i in range(P):  # partial Fisher-Yates
        j = i + randint(rng, t, F - i)
        tmp = perm[i]
        perm[i] = perm[j]
        perm[j] = tmp
        slot_features[t, slot, i] = perm[i]


@njit
def init_roots(rng, slot_features, perm, node_slot, n_nodes, n_slots):
    """Every tree starts as one leaf (node 0) observing slot 0."""
    for t in range(n_nodes.shape[0]):
        node_slot[t, 0] = 0
        n_nodes[t] = 1
        n_slots[t] = 1
        draw_features(t, 0, rng, slot_features, perm)


@njit
def _best_two(t, slot, min_frac, slot_features, obs_n, obs_key, obs_stats,
              cum_s, cum_q, tot_s, tot_q):
    """Best merit (with its feature position and threshold index) and the second best."""
    best = 0.0
    best_i = -1
    best_k = -1
    second = 0.0
    weight = 0.0
    for i in range(slot_features.shape[2]):
        m, k, w = eb.ebst_best_split(obs_n, obs_key, obs_stats, t, slot, i,
                                     min_frac, cum_s, cum_q, tot_s, tot_q)
        weight = max(weight, w)
        if k < 0:
            continue
        if m > best:
            second = best
            best = m
            best_i = i
            best_k = k
        elif m > second:
            second = m
    return best, best_i, best_k, second, weight


@njit
def _make_child(t, parent, c, slot, w, ysum, node_feature, node_left, node_right, node_depth,
                node_slot, node_last_eval, node_w, node_fit_w, node_ysum, node_err, node_lin,
                obs_n):
    node_feature[t, c] = -1
    node_left[t, c] = -1
    node_right[t, c] = -1
    node_depth[t, c] = node_depth[t, parent] + 1
    node_slot[t, c] = slot
    node_w[t, c] = w
    node_last_eval[t, c] = w  # grace counts the weight learned by the child itself
    copy_into(node_ysum[t, c], ysum)
    copy_into(node_err[t, c], node_err[t, parent])
    copy_into(node_lin[t, c], node_lin[t, parent])  # the child inherits the parent's perceptron ...
    node_fit_w[t, c] = 0.0  # ... but its learning rate starts afresh (MOA)
    obs_n[t, slot] = 0  # an observer empties by forgetting its thresholds


@njit
def attempt_split(t, node, delta, tau, min_frac, rng, perm, node_feature, node_threshold,
                  node_left, node_right, node_depth, node_slot, node_last_eval, node_w, node_fit_w,
                  node_ysum, node_err, node_lin, slot_features, obs_n, obs_key, obs_stats,
                  n_nodes, n_slots, cum_s, cum_q, tot_s, tot_q):
    """Split leaf ``node`` of tree ``t`` when its best split is clearly the best.

    MOA's rule: with ``HB = sqrt(ln(1/delta) / 2n)`` (range 1), split when the second best
    merit over the best is below ``1 - HB`` or when ``HB < tau``. The children start with
    their branch's weight and target sums (so their mean model is defined at once), the
    parent's faded errors and a copy of its perceptron, and draw their own subspaces.
    """
    slot = node_slot[t, node]
    best, bi, bk, second, weight = _best_two(t, slot, min_frac, slot_features, obs_n, obs_key,
                                             obs_stats, cum_s, cum_q, tot_s, tot_q)
    if bi < 0 or best <= 0.0:
        return
    hb = hs.hoeffding_bound(1.0, delta, weight)
    if not (second / best < 1.0 - hb or hb < tau):
        return
    wl = eb.ebst_totals(obs_n, obs_stats, t, slot, bi, bk, cum_s, cum_q)
    W = eb.ebst_totals(obs_n, obs_stats, t, slot, bi, obs_n[t, slot, bi], tot_s, tot_q)
    lc = n_nodes[t]
    rc = lc + 1
    n_nodes[t] = lc + 2
    rs = n_slots[t]
    n_slots[t] = rs + 1
    node_feature[t, node] = slot_features[t, slot, bi]
    node_threshold[t, node] = obs_key[t, slot, bi, bk]
    node_left[t, node] = lc
    node_right[t, node] = rc
    node_slot[t, node] = -1
    _make_child(t, node, lc, slot, wl, cum_s, node_feature, node_left, node_right, node_depth,
                node_slot, node_last_eval, node_w, node_fit_w, node_ysum, node_err, node_lin, obs_n)
    _make_child(t, node, rc, rs, W - wl, tot_s - cum_s, node_feature, node_left, node_right,
                node_depth, node_slot, node_last_eval, node_w, node_fit_w, node_ysum, node_err,
                node_lin, obs_n)
    draw_features(t, slot, rng, slot_features, perm)
    draw_features(t, rs, rng, slot_features, perm)


@njit(_nrt=False)
def fit_leaf(t, node, x, y, xn, yn, xsq, wt, can_fit, observe, unit_l1, lr, lr_decay, fade,
             p_norm, p_lin, p_mean, node_w, node_fit_w, node_ysum, node_err, node_lin, node_slot,
             slot_features, obs_n, obs_key, obs_stats):
    """Learn one row of weight ``wt`` at leaf ``node`` (its outputs ``p_*`` already computed):
    the leaf models' faded errors, the perceptron step, the target sums, the observers.

    The perceptron takes a delta-rule step of rate ``wt * lr / (1 + lr_decay * n)`` on the
    standardised row. With ``unit_l1`` (MOA) each target's weights are then rescaled to unit
    L1 norm. Without it the rate is capped at ``1 / xsq`` (``xsq = 1 + |xn|^2``), the rate
    that fits the row exactly (:func:`capped_rate`), so no step overshoots and no scale
    diverges.
    """
    F = xn.shape[0]
    M = y.shape[0]
    for j in range(M):
        # faded absolute errors of both models on this row, before they learn it
        node_err[t, node, j, 0] = fade * node_err[t, node, j, 0] + wt * abs(y[j] - p_lin[j])
        node_err[t, node, j, 1] = fade * node_err[t, node, j, 1] + wt * abs(y[j] - p_mean[j])
    if can_fit:
        # delta rule on standardised values; the rate decays with the leaf's weight
        step = wt * lr / (1.0 + lr_decay * node_fit_w[t, node])
        if not unit_l1:
            step = capped_rate(step, xsq)
        node_fit_w[t, node] += wt
        for j in range(M):
            d = step * (yn[j] - p_norm[j])
            for f in range(F):
                node_lin[t, node, j, f] += d * xn[f]
            node_lin[t, node, j, F] += d
            if unit_l1:
                # MOA keeps each target's weights at unit L1 norm: the output then never
                # exceeds the largest standardised input, but no fit of another norm is
                # reachable (a leaf whose target is flat still answers one sd off its mean)
                norm = 0.0
                for f in range(F + 1):
                    norm += abs(node_lin[t, node, j, f])
                if norm > 0.0:
                    for f in range(F + 1):
                        node_lin[t, node, j, f] /= norm
    node_w[t, node] += wt
    for j in range(M):
        node_ysum[t, node, j] += wt * y[j]
    if observe:
        eb.ebst_learn(obs_n, obs_key, obs_stats, slot_features, t, node_slot[t, node], x, y, wt)


@njit(_nrt=False, inline="always")
def capped_rate(rate, xsq):
    """``min(rate, 1 / xsq)`` with ``xsq = 1 + |xn|^2``: the delta rule's rate, at most the
    one that moves the output of the standardised row ``xn`` (and its bias input 1) exactly
    onto its target.

    A step of rate ``r`` changes the row's error ``e`` to ``e (1 - r xsq)``; with the cap the
    error keeps its sign and shrinks, the condition of the normalised LMS filter for a
    stable step on any number of features (Haykin, *Adaptive Filter Theory*, the normalised
    LMS filter). With few features the cap seldom binds at the default rates (the plain delta
    rule); on SCM20d's 61 features it binds for every row (``0.02 * 62 > 1``).

    Examples
    --------
    >>> capped_rate(0.02, 1.0 + 1.0 + 4.0)      # xn = (1, -2): 0.02 * 6 < 1, uncapped
    0.02
    >>> capped_rate(0.5, 6.0)                    # one step would overshoot
    0.16666666666666666
    """
    return rate if rate * xsq <= 1.0 else 1.0 / xsq


@njit(_nrt=False, inline="always")
def squared_norm(xn):
    """``1 + |xn|^2``: the squared norm of a standardised row with its bias input."""
    sq = 1.0
    for f in range(xn.shape[0]):
        sq += xn[f] * xn[f]
    return sq


@njit(_nrt=False)
def tree_error(t, node, leaf_mode, node_err, p_lin, p_mean, y, y_scale):
    """The tree's error on a row before learning it, in ``[0, 1]``: the mean over targets of
    ``|answer - y| / (2 sd)``, each term clipped to 1 (what its drift detector watches)."""
    M = p_lin.shape[0]
    e = 0.0
    for j in range(M):
        v = leaf_answer(t, node, j, leaf_mode, node_err, p_lin, p_mean)
        e += min(1.0, abs(v - y[j]) / (2.0 * y_scale[j]))
    return e / M


@njit
def clear_tree(t, node_feature, node_threshold, node_left, node_right, node_depth, node_slot,
               node_last_eval, node_w, node_fit_w, node_ysum, node_err, node_lin, slot_features,
               obs_n, obs_key, obs_stats, n_nodes, n_slots):
    """Tree ``t`` holds nothing (no node, no observer): every cell as allocated."""
    node_feature[t] = -1
    node_threshold[t] = 0.0
    node_left[t] = -1
    node_right[t] = -1
    node_depth[t] = 0
    node_slot[t] = -1
    node_last_eval[t] = 0.0
    node_w[t] = 0.0
    node_fit_w[t] = 0.0
    node_ysum[t] = 0.0
    node_err[t] = 0.0
    node_lin[t] = 0.0
    slot_features[t] = 0
    obs_n[t] = 0
    obs_key[t] = 0.0
    obs_stats[t] = 0.0
    n_nodes[t] = 0
    n_slots[t] = 0


@njit
def reset_tree(t, rng, perm, node_feature, node_threshold, node_left, node_right, node_depth,
               node_slot, node_last_eval, node_w, node_fit_w, node_ysum, node_err, node_lin,
               slot_features, obs_n, obs_key, obs_stats, n_nodes, n_slots):
    """Tree ``t`` starts again as one leaf with a new subspace: every cell as a fresh forest
    allocates it, only its generator goes on."""
    clear_tree(t, node_feature, node_threshold, node_left, node_right, node_depth, node_slot,
               node_last_eval, node_w, node_fit_w, node_ysum, node_err, node_lin, slot_features,
               obs_n, obs_key, obs_stats, n_nodes, n_slots)
    node_slot[t, 0] = 0
    n_nodes[t] = 1
    n_slots[t] = 1
    draw_features(t, 0, rng, slot_features, perm)


@njit
def copy_tree(t, s_feature, s_threshold, s_left, s_right, s_depth, s_slot, s_last_eval, s_w,
              s_fit_w, s_ysum, s_err, s_lin, s_slot_features, s_obs_n, s_obs_key, s_obs_stats,
              s_n_nodes, s_n_slots, node_feature, node_threshold, node_left, node_right,
              node_depth, node_slot, node_last_eval, node_w, node_fit_w, node_ysum, node_err,
              node_lin, slot_features, obs_n, obs_key, obs_stats, n_nodes, n_slots):
    """Tree ``t`` of the ``s_*`` arrays (a background tree) becomes tree ``t`` of the others
    (its foreground tree): the nodes and observers in use are copied, the rest of the row
    cleared. The destination holds at least as many nodes as the source uses (the kernel
    stops for the caller to grow it before)."""
    clear_tree(t, node_feature, node_threshold, node_left, node_right, node_depth, node_slot,
               node_last_eval, node_w, node_fit_w, node_ysum, node_err, node_lin, slot_features,
               obs_n, obs_key, obs_stats, n_nodes, n_slots)
    n = s_n_nodes[t]
    m = s_n_slots[t]
    copy_into(node_feature[t, :n], s_feature[t, :n])
    copy_into(node_threshold[t, :n], s_threshold[t, :n])
    copy_into(node_left[t, :n], s_left[t, :n])
    copy_into(node_right[t, :n], s_right[t, :n])
    copy_into(node_depth[t, :n], s_depth[t, :n])
    copy_into(node_slot[t, :n], s_slot[t, :n])
    copy_into(node_last_eval[t, :n], s_last_eval[t, :n])
    copy_into(node_w[t, :n], s_w[t, :n])
    copy_into(node_fit_w[t, :n], s_fit_w[t, :n])
    copy_into(node_ysum[t, :n], s_ysum[t, :n])
    copy_into(node_err[t, :n], s_err[t, :n])
    copy_into(node_lin[t, :n], s_lin[t, :n])
    copy_into(slot_features[t, :m], s_slot_features[t, :m])
    copy_into(obs_n[t, :m], s_obs_n[t, :m])
    copy_into(obs_key[t, :m], s_obs_key[t, :m])
    copy_into(obs_stats[t, :m], s_obs_stats[t, :m])
    n_nodes[t] = n
    n_slots[t] = m


@njit(_nrt=False)
def push_difference(cmp, t, d, fade):
    """Add the paired difference ``d`` (foreground error minus background error on one row)
    to tree ``t``'s faded comparison: ``cmp[t] = [sum of weights, sum of squared weights,
    sum of w d, sum of w d^2, rows compared]``, older rows weighted by powers of ``fade``."""
    cmp[t, 0] = fade * cmp[t, 0] + 1.0
    cmp[t, 1] = fade * fade * cmp[t, 1] + 1.0
    cmp[t, 2] = fade * cmp[t, 2] + d
    cmp[t, 3] = fade * cmp[t, 3] + d * d
    cmp[t, 4] += 1.0


@njit(_nrt=False)
def background_better(cmp, t, z, min_rows):
    """Whether tree ``t``'s background tree has been better than the tree over the faded
    window: compared on at least ``min_rows`` rows, and the weighted mean difference of
    their errors above ``z`` standard errors (effective rows ``(sum w)^2 / sum w^2``).

    Examples
    --------
    Ten rows on which the background's error was 0.1 lower, then 0.3 lower (no fading):
    mean 0.2, standard deviation 0.1, standard error 0.1 / sqrt(20) = 0.022.

    >>> import numpy as np
    >>> cmp = np.zeros((1, 5))
    >>> for d in [0.1] * 10 + [0.3] * 10:
    ...     push_difference(cmp, 0, d, 1.0)
    >>> bool(background_better(cmp, 0, 3.0, 20)), bool(background_better(cmp, 0, 3.0, 21))
    (True, False)
    >>> bool(background_better(cmp, 0, 9.0, 20))  # 0.2 < 9 * 0.022
    False
    """
    n = cmp[t, 4]
    if n < min_rows or cmp[t, 0] <= 0.0:
        return False
    w = cmp[t, 0]
    mean = cmp[t, 2] / w
    var = max(0.0, cmp[t, 3] / w - mean * mean)
    return mean > 0.0 and mean * mean * (w * w / cmp[t, 1]) > z * z * var


@njit
def learn_rows(X, Y, w, start, prequential, out, bagging, lam, grace, delta, tau, min_frac,
               lr, lr_decay, fade, unit_l1, leaf_mode, max_depth,
               norm_w, x_mean, x_m2, y_mean, y_m2, rng,
               node_feature, node_threshold, node_left, node_right, node_depth, node_slot,
               node_last_eval, node_w, node_fit_w, node_ysum, node_err, node_lin, slot_features,
               obs_n, obs_key, obs_stats, n_nodes, n_slots, n_seen,
               detect, d_settings, db_total, db_var, db_count, d_rows, d_total, d_variance,
               d_width, d_tick, d_drift, d_det, d_seen, n_drifts,
               r_settings, b_rng, b_feature, b_threshold, b_left, b_right, b_depth, b_slot,
               b_last_eval, b_w, b_fit_w, b_ysum, b_err, b_lin, b_slot_features, b_obs_n,
               b_obs_key, b_obs_stats, b_n_nodes, b_n_slots, b_cmp, n_backgrounds):
    """Learn rows ``start, start+1, ...``; returns the first row not learned.

    Each tree learns a row with weight ``k * w`` (``k ~ Poisson(lam)`` with ``bagging``,
    else 1). With ``prequential``, ``out[i]`` first receives the mean over the trees of
    their predictions as they stood (test-then-train in one call).

    With ``detect`` (a forest that follows drift, as the adaptive random forest of Gomes et
    al. 2017 with a replacement rule of its own), every row of positive weight feeds each
    tree's error on it (:func:`tree_error`, before learning it) to the tree's ADWIN detector
    (``d_settings``: delta, clock, max_buckets, min_window_length, grace_period). When the
    detector cuts a window whose error rose, a *background tree* (the ``b_*`` arrays: one
    leaf with a new subspace) starts learning the same rows with the same bagging weights
    (a background already there starts again, as in the adaptive random forest) and the
    detector empties. Every row both trees answered adds the difference of their errors to
    the tree's faded comparison (:func:`push_difference`, fading ``r_settings[0]``); the
    background replaces the tree as soon as it has been better (:func:`background_better`,
    ``r_settings[1]`` standard errors, at least ``r_settings[2]`` rows), and the detector
    empties. A tree whose error rises for a while (a daily cycle) keeps its place: the young
    background is not better than it over the window, and the next rise starts it again.

    Stops early when a tree has fewer than two free nodes, a background tree could not be
    copied into its foreground's capacity, or a detector may need one more row, so that the
    caller can double the capacity.
    """
    T, N = node_feature.shape
    S = slot_features.shape[1]
    NB = b_feature.shape[1]
    SB = b_slot_features.shape[1]
    F = X.shape[1]
    M = Y.shape[1]
    xn, yn, y_scale, p_norm, p_lin, p_mean = row_scratch(F, M)
    cum_s = np.zeros(M)
    cum_q = np.zeros(M)
    tot_s = np.zeros(M)
    tot_q = np.zeros(M)
    perm = np.zeros(F, np.int64)
    # the trees whose detectors take this row's errors: one call of the ADWIN kernel per row
    dets = np.zeros(T, np.int64)
    vals = np.zeros(T)
    flags = np.zeros(T, np.bool_)
    before = np.zeros(T)
    r_fade, r_z, r_min = r_settings[0], r_settings[1], r_settings[2]
    i = start
    while i < X.shape[0]:
        for t in range(T):
            if n_nodes[t] + 2 > N or n_slots[t] + 1 > S:
                return i
            if detect:
                # one insertion per detector and row adds at most one row (the ADWIN kernel's rule)
                if d_rows[t] >= db_total.shape[1]:
                    return i
                # a background grows by at most two nodes a row and must fit its foreground
                if b_n_nodes[t] + 2 > NB or b_n_slots[t] + 1 > SB or b_n_nodes[t] + 2 > N:
                    return i
        x = X[i]
        y = Y[i]
        wi = w[i]
        standardise(x, y, norm_w, x_mean, x_m2, y_mean, y_m2, xn, yn, y_scale)
        can_fit = norm_w[0] > 1.0  # a perceptron learns once the scales mean something
        xsq = squared_norm(xn)
        watch = detect and wi > 0.0
        if prequential:
            out[i] = 0.0
        n_watched = 0
        for t in range(T):
            node = find_leaf(node_feature[t], node_threshold[t], node_left[t], node_right[t], x)
            leaf_outputs(t, node, xn, y_mean, y_scale, node_w, node_ysum, node_lin,
                         p_norm, p_lin, p_mean)
            if prequential:
                add_outputs(out, i, T, t, node, leaf_mode, node_err, p_lin, p_mean)
            if watch:  # the tree's own answer, before it learns the row
                vals[n_watched] = tree_error(t, node, leaf_mode, node_err, p_lin, p_mean, y, y_scale)
            k = poisson(rng, t, lam) if bagging else 1
            wt = k * wi
            if wt > 0.0:  # written out here: a function taking the arrays would cost reference counts
                grows = node_depth[t, node] < max_depth
                fit_leaf(t, node, x, y, xn, yn, xsq, wt, can_fit, grows, unit_l1, lr, lr_decay,
                         fade, p_norm, p_lin, p_mean, node_w, node_fit_w, node_ysum, node_err,
                         node_lin, node_slot, slot_features, obs_n, obs_key, obs_stats)
                if grows and node_w[t, node] - node_last_eval[t, node] >= grace:
                    node_last_eval[t, node] = node_w[t, node]
                    attempt_split(t, node, delta, tau, min_frac, rng, perm, node_feature,
                                  node_threshold, node_left, node_right, node_depth, node_slot,
                                  node_last_eval, node_w, node_fit_w, node_ysum, node_err,
                                  node_lin, slot_features, obs_n, obs_key, obs_stats, n_nodes,
                                  n_slots, cum_s, cum_q, tot_s, tot_q)
            if not watch:
                continue
            if b_n_nodes[t] > 0:
                bnode = find_leaf(b_feature[t], b_threshold[t], b_left[t], b_right[t], x)
                leaf_outputs(t, bnode, xn, y_mean, y_scale, b_w, b_ysum, b_lin,
                             p_norm, p_lin, p_mean)
                push_difference(b_cmp, t, vals[n_watched] - tree_error(t, bnode, leaf_mode, b_err, p_lin,
                                                              p_mean, y, y_scale), r_fade)
                if wt > 0.0:  # the same steps as the tree's, on the background's arrays
                    grows = b_depth[t, bnode] < max_depth
                    fit_leaf(t, bnode, x, y, xn, yn, xsq, wt, can_fit, grows, unit_l1, lr,
                             lr_decay, fade, p_norm, p_lin, p_mean, b_w, b_fit_w, b_ysum, b_err,
                             b_lin, b_slot, b_slot_features, b_obs_n, b_obs_key, b_obs_stats)
                    if grows and b_w[t, bnode] - b_last_eval[t, bnode] >= grace:
                        b_last_eval[t, bnode] = b_w[t, bnode]
                        attempt_split(t, bnode, delta, tau, min_frac, b_rng, perm, b_feature,
                                      b_threshold, b_left, b_right, b_depth, b_slot, b_last_eval,
                                      b_w, b_fit_w, b_ysum, b_err, b_lin, b_slot_features,
                                      b_obs_n, b_obs_key, b_obs_stats, b_n_nodes, b_n_slots,
                                      cum_s, cum_q, tot_s, tot_q)
                if background_better(b_cmp, t, r_z, r_min):
                    copy_tree(t, b_feature, b_threshold, b_left, b_right, b_depth, b_slot,
                              b_last_eval, b_w, b_fit_w, b_ysum, b_err, b_lin, b_slot_features,
                              b_obs_n, b_obs_key, b_obs_stats, b_n_nodes, b_n_slots,
                              node_feature, node_threshold, node_left, node_right, node_depth,
                              node_slot, node_last_eval, node_w, node_fit_w, node_ysum,
                              node_err, node_lin, slot_features, obs_n, obs_key, obs_stats,
                              n_nodes, n_slots)
                    clear_tree(t, b_feature, b_threshold, b_left, b_right, b_depth, b_slot,
                               b_last_eval, b_w, b_fit_w, b_ysum, b_err, b_lin, b_slot_features,
                               b_obs_n, b_obs_key, b_obs_stats, b_n_nodes, b_n_slots)
                    b_cmp[t] = 0.0
                    reset_detector(t, db_total, db_var, db_count, d_rows, d_total, d_variance,
                                   d_width, d_tick, d_drift)
                    n_drifts[t] += 1
                    continue  # the new tree's errors start a new window
            dets[n_watched] = t
            before[n_watched] = d_total[t] / d_width[t] if d_width[t] > 0.0 else 0.0
            n_watched += 1
        if n_watched > 0:
            _update_pairs(dets[:n_watched], vals[:n_watched], 0, flags[:n_watched], d_settings[0],
                          int(d_settings[1]), int(d_settings[2]), d_settings[3], d_settings[4],
                          db_total, db_var, db_count, d_rows, d_total, d_variance, d_width, d_tick,
                          d_drift, d_det, d_seen)
        for j in range(n_watched):
            t = dets[j]
            # a cut leaves the recent part of the window: a background starts only when the
            # error rose (a young tree's falling error is no drift)
            if flags[j] and d_width[t] > 0.0 and d_total[t] / d_width[t] > before[j]:
                reset_tree(t, b_rng, perm, b_feature, b_threshold, b_left, b_right, b_depth,
                           b_slot, b_last_eval, b_w, b_fit_w, b_ysum, b_err, b_lin,
                           b_slot_features, b_obs_n, b_obs_key, b_obs_stats, b_n_nodes,
                           b_n_slots)
                b_cmp[t] = 0.0
                reset_detector(t, db_total, db_var, db_count, d_rows, d_total, d_variance,
                               d_width, d_tick, d_drift)
                n_backgrounds[t] += 1
        if wi > 0.0:
            update_standardiser(x, y, wi, norm_w, x_mean, x_m2, y_mean, y_m2)
        n_seen[0] += 1
        i += 1
    return i


@njit
def predict_rows(X, out, leaf_mode, norm_w, x_mean, x_m2, y_mean, y_m2, node_feature,
                 node_threshold, node_left, node_right, node_w, node_ysum, node_err, node_lin):
    """Mean over the trees of their predictions of each row into ``out`` (n, M)."""
    T = node_feature.shape[0]
    F = X.shape[1]
    M = out.shape[1]
    xn, yn, y_scale, p_norm, p_lin, p_mean = row_scratch(F, M)
    for i in range(X.shape[0]):
        x = X[i]
        standardise(x, y_mean, norm_w, x_mean, x_m2, y_mean, y_m2, xn, yn, y_scale)
        out[i] = 0.0
        for t in range(T):
            node = find_leaf(node_feature[t], node_threshold[t], node_left[t], node_right[t], x)
            leaf_outputs(t, node, xn, y_mean, y_scale, node_w, node_ysum, node_lin,
                         p_norm, p_lin, p_mean)
            add_outputs(out, i, T, t, node, leaf_mode, node_err, p_lin, p_mean)
