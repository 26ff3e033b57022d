"""ABFS kernel: the boosting layers of decision stumps, one row at a time, a batch per call.

Layer arrays (``Lc = n_features + 1`` layer capacity, creation order, ``n_layers`` in use)::

    layer_feature   int64    the feature its stump selected
    layer_threshold float64  the stump's threshold (``x <= t`` is the left branch)
    layer_class     (Lc, 2)  class its stump predicts left / right
    layer_sc, layer_sw       OzaBoost's weights of correctly / wrongly classified rows
    layer_detector  int64    the ADWIN detector (of the nested bank) watching its errors
    layer_merit     float64  information gain of the split at selection

The candidate stump keeps Gaussian estimators (:mod:`models.hoeffding._hoeffding`, one "leaf") over
the unselected features; ``scalars`` holds ``[candidate weight, candidate weight at its last
evaluation, total weight seen]``. The window of the last ``grace_period`` rows is a ring
(``win_X``, ``win_y``, ``win_meta = [rows held, next slot]``).

The kernel returns ``(next_row, status, info)`` so that the Python side can do the rare
structural work: ``DONE``; ``SELECTED`` (row ``next_row - 1`` made the candidate select a
feature; ``info`` = the new layer); ``DRIFT`` (at row ``next_row - 1`` the layer at position
``info`` of ``order`` saw its detector fire); ``GROW`` (row ``next_row`` needs a detector
with more rows; nothing of it was done).
"""

from __future__ import annotations

import math

import numpy as np

from ..core._jit import njit
from ..core._stats import argmax
from ..core._trees import copy_into
from ..drift.adwin import _update_pairs as _adwin_update
from . import _hoeffding as hs

DONE = 0
SELECTED = 1
DRIFT = 2
GROW = 3


@njit(inline="always")
def _accuracy(sc, sw):
    """Boosting accuracy ``sc / (sc + sw)`` (0 for a layer that has seen nothing)."""
    s = sc + sw
    return sc / s if s > 0.0 else 0.0


@njit
def _order_by_accuracy(n, layer_sc, layer_sw, order):
    """``order[:n]``: layers by ascending accuracy, creation order on ties (stable)."""
    for j in range(n):
        order[j] = j
    for a in range(1, n):
        j = order[a]
        acc = _accuracy(layer_sc[j], layer_sw[j])
        b = a - 1
        while b >= 0 and _accuracy(layer_sc[order[b]], layer_sw[order[b]]) > acc:
            order[b + 1] = order[b]
            b -= 1
        order[b + 1] = j


@njit
def _free_detector(n, layer_detector, n_detectors):
    """Lowest detector index no layer uses."""
    for d in range(n_detectors):
        used = False
        for j in range(n):
            if layer_detector[j] == d:
                used = True
                break
        if not used:
            return d
    return -1


@njit(inline="always")
def _push_window(x, k, win_X, win_y, win_meta):
    """Add a row to the ring of the last ``grace_period`` rows."""
    G = win_y.shape[0]
    slot = win_meta[1]
    copy_into(win_X[slot], x)
    win_y[slot] = k
    win_meta[1] = (slot + 1) % G
    if win_meta[0] < G:
        win_meta[0] += 1


@njit(inline="always")
def _boost(x, k, lam, omega, bole, ensemble_norm, total_weight, n_layers, layer_feature,
           layer_threshold, layer_class, layer_sc, layer_sw, layer_detector, order, det1,
           val1, out1, ad_settings, ad_arrays):
    """One row through the layers; returns ``(lambda, position in order of a drifting
    layer or -1)``. BOLE visits the worst untried layer after a miss and the best untried
    one after a hit; Oza visits them in creation order."""
    L = n_layers
    if bole:
        _order_by_accuracy(L, layer_sc, layer_sw, order)
    else:
        for j in range(L):
            order[j] = j
    ad_total = ad_arrays[4]
    ad_width = ad_arrays[6]
    ad_drift = ad_arrays[8]
    lo = 0
    hi = L - 1
    correct = False
    for n in range(L):
        if not bole:
            pos = n
        elif correct:
            pos = hi
            hi -= 1
        else:
            pos = lo
            lo += 1
        j = order[pos]
        side = 0 if x[layer_feature[j]] <= layer_threshold[j] else 1
        correct = layer_class[j, side] == k
        # OzaBoost with Assis' omega: lambda *= omega (sc + sw) / (2 sc) on a hit,
        # omega (sc + sw) / (2 sw) on a miss (N in place of sc + sw for BOLE's "ensemble")
        if correct:
            layer_sc[j] += lam
        else:
            layer_sw[j] += lam
        norm = total_weight if ensemble_norm else layer_sc[j] + layer_sw[j]
        lam *= omega * norm / (2.0 * (layer_sc[j] if correct else layer_sw[j]))
        # the layer's ADWIN watches its 0/1 error; like MOA's ADWINChangeDetector only a
        # rise of the error rate counts as a change
        d = layer_detector[j]
        before = ad_total[d] / ad_width[d] if ad_width[d] > 0.0 else 0.0
        det1[0] = d
        val1[0] = 0.0 if correct else 1.0
        _adwin_update(det1, val1, 0, out1, *ad_settings, *ad_arrays)
        if out1[0]:
            after = ad_total[d] / ad_width[d] if ad_width[d] > 0.0 else 0.0
            if after > before:
                return lam, pos
            # a fall of the error is no feature drift; MOA's ADWIN then goes on with the
            # shrunk window, where river's (ours) would restart at the next value
            ad_drift[d] = False
    return lam, -1


@njit(inline="always")
def _train_candidate(x, k, lam, grace, threshold, n_splits, selected, cand_counts, g_w,
                     g_mean, g_m2, g_min, g_max, scalars, left, right, best_left,
                     best_right):
    """The candidate stump learns the row with weight ``lambda`` (selected features are
    missing for it); every ``grace`` of weight it looks for the unselected feature of
    highest information gain above ``threshold``. Returns ``(feature or -1, threshold,
    merit)``; the winner's class weights below/above are left in ``best_left/right``."""
    scalars[0] += lam
    cand_counts[k] += lam
    F = x.shape[0]
    for f in range(F):
        if selected[f] == 0:
            hs.gaussian_update(g_w, g_mean, g_m2, g_min, g_max, 0, f, k, x[f], lam)
    if scalars[0] - scalars[1] < grace:
        return -1, 0.0, 0.0
    scalars[1] = scalars[0]
    best = -math.inf
    best_f = -1
    best_t = 0.0
    for f in range(F):
        if selected[f] != 0:
            continue
        m, t = hs.best_numeric_split(g_w, g_mean, g_m2, g_min, g_max, 0, f, cand_counts,
                                     n_splits, 0.01, left, right, best_left, best_right)
        if m > best and m > threshold:  # the first feature of the highest gain wins
            best = m
            best_f = f
            best_t = t
    if best_f < 0 or best == 0.0:
        return -1, 0.0, 0.0
    hs.best_numeric_split(g_w, g_mean, g_m2, g_min, g_max, 0, best_f, cand_counts,
                          n_splits, 0.01, left, right, best_left, best_right)
    return best_f, best_t, best


@njit
def abfs_rows(X, y, w, start, omega, bole, ensemble_norm, grace, threshold, n_splits,
              layer_feature, layer_threshold, layer_class, layer_sc, layer_sw, layer_detector,
              layer_merit, n_layers, selected, order, cand_counts, g_w, g_mean, g_m2, g_min,
              g_max, scalars, win_X, win_y, win_meta, n_seen, ad_settings, ad_arrays):
    """Run the selector over rows ``start, ...`` until the batch ends or something changes."""
    K = cand_counts.shape[0]
    det1 = np.zeros(1, np.int64)
    val1 = np.zeros(1)
    out1 = np.zeros(1, np.bool_)
    left, right, best_left, best_right = hs.split_scratch(K)
    ad_rows = ad_arrays[3]
    capacity = ad_arrays[0].shape[1]
    i = start
    while i < X.shape[0]:
        L = n_layers[0]
        for j in range(L):
            if ad_rows[layer_detector[j]] >= capacity:
                return i, GROW, layer_detector[j]
        x = X[i]
        k = y[i]
        _push_window(x, k, win_X, win_y, win_meta)  # the reference adds the row first
        scalars[2] += w[i]
        n_seen[0] += 1
        i += 1
        lam, drifted = _boost(x, k, w[i - 1], omega, bole, ensemble_norm, scalars[2], L,
                              layer_feature, layer_threshold, layer_class, layer_sc,
                              layer_sw, layer_detector, order, det1, val1, out1, ad_settings,
                              ad_arrays)
        if drifted >= 0:
            return i, DRIFT, drifted
        if lam <= 0.0:
            continue
        f, t, merit = _train_candidate(x, k, lam, grace, threshold, n_splits, selected,
                                       cand_counts, g_w, g_mean, g_m2, g_min, g_max, scalars,
                                       left, right, best_left, best_right)
        if f < 0:
            continue
        layer_feature[L] = f
        layer_threshold[L] = t
        layer_class[L, 0] = argmax(best_left)
        layer_class[L, 1] = argmax(best_right)
        layer_sc[L] = 0.0
        layer_sw[L] = 0.0
        layer_merit[L] = merit
        layer_detector[L] = _free_detector(L, layer_detector, ad_arrays[4].shape[0])
        n_layers[0] = L + 1
        selected[f] = 1
        restart_candidate(cand_counts, g_w, g_mean, g_m2, g_min, g_max, scalars)
        return i, SELECTED, L
    return i, DONE, -1


@njit
def restart_candidate(cand_counts, g_w, g_mean, g_m2, g_min, g_max, scalars):
    """A new, empty candidate stump."""
    cand_counts[:] = 0.0
    g_w[:] = 0.0
    g_mean[:] = 0.0
    g_m2[:] = 0.0
    g_min[:] = math.inf
    g_max[:] = -math.inf
    scalars[0] = 0.0
    scalars[1] = 0.0


@njit
def guard_rows(pred_filtered, pred_plain, codes, fade, scores, use_plain):
    """Which learner answers each row of :class:`models.hoeffding.abfs.ABFSClassifier`'s guard.

    Row ``i`` is answered by the unfiltered learner (``use_plain[i]``) when its faded
    prequential accuracy so far is above the filtered learner's (ties: the filtered one,
    the reference); then both scores fade by ``fade`` and add whether each predicted
    ``codes[i]`` (a prediction of -1, none, is wrong). ``scores``: ``(filtered, plain)``,
    updated in place.
    """
    for i in range(codes.shape[0]):
        use_plain[i] = scores[1] > scores[0]
        scores[0] = fade * scores[0] + (1.0 if pred_filtered[i] == codes[i] else 0.0)
        scores[1] = fade * scores[1] + (1.0 if pred_plain[i] == codes[i] else 0.0)
