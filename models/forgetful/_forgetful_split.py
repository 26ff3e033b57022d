"""Split search of the forgetful tree (Yuan, Sun & Shasha, Algorithms 16(6):278, 2023).

At a node holding the segment ``[s, e)`` of the working lists (see
:mod:`models.forgetful._forgetful_kernels`), every feature of the tree's subset is scanned in subset order:
a sparse feature walks its sorted segment, a count-table feature builds the node's value x class
table from the row list. Every distinct value ``c`` of the node except the largest is a
candidate threshold (``x <= c`` goes left); the score is the size-weighted child entropy
(natural log), scored as ``N * H = nl ln nl + nr ln nr - sum_k (l_k ln l_k + r_k ln r_k)`` from
a table of ``c ln c``; the smallest score wins, the earlier feature and then the lower
threshold on exact ties (strict ``<`` everywhere), as in the authors' reference code.

Two classes (the common case) keep their counts in registers. With more classes a running sum
prices each candidate in O(1) and the exact sum, in a fixed class order, is evaluated only for
candidates within rounding distance of the best, so the choice does not depend on the order in
which equal values were merged.

Hot loops index with ``uint64``: numba guards every signed index against negative values
(Python's wraparound), which doubled the cost of the scans.
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit

ONE = np.uint64(1)


@njit
def _value_code(dvals, f, nv, v):
    """Index of ``v`` in feature ``f``'s sorted table ``dvals[f, :nv]`` (``v`` is in it).

    Branch-free binary search: the loop length depends on ``nv`` only.
    """
    fu = np.uint64(f)
    base = np.uint64(0)
    width = np.uint64(nv)
    while width > ONE:
        half = width >> ONE
        if dvals[fu, base + half] <= v:
            base += half
        width -= half
    return base


@njit
def _exact_score(nl, nr, K, lc, tot, xl):
    """``N * H(split)`` from the left counts ``lc`` and the node totals ``tot``."""
    acc = 0.0
    for k in range(K):
        acc += xl[lc[k]] + xl[tot[k] - lc[k]]
    return (xl[nl] + xl[nr]) - acc


@njit
def _score2(nl, nr, l1, t0, t1, xl):
    """``N * H(split)`` for two classes (the same sum, in the same order, as ``_exact_score``).

    All arguments are ``uint64`` (see the note on indexing in the module docstring).
    """
    l0 = nl - l1
    acc = 0.0
    acc += xl[l0] + xl[t0 - l0]
    acc += xl[l1] + xl[t1 - l1]
    return (xl[nl] + xl[nr]) - acc


@njit
def _scan_sparse2(X, f, y, work, s, e, t0, t1, xl, best):
    """Two-class version of :func:`_scan_sparse` with the counts kept in registers."""
    fu = np.uint64(f)
    su = np.uint64(s)
    n = np.uint64(e - s)
    t0u = np.uint64(t0)
    t1u = np.uint64(t1)
    l1 = np.uint64(0)
    best_v = 0.0
    v = X[fu, np.uint64(work[fu, su])]
    for p in range(s, e - 1):
        pu = np.uint64(p)
        l1 += np.uint64(y[np.uint64(work[fu, pu])])
        v_next = X[fu, np.uint64(work[fu, pu + ONE])]
        if v_next != v:
            nl = pu - su + ONE
            score = _score2(nl, n - nl, l1, t0u, t1u, xl)
            if score < best:
                best, best_v = score, v
            v = v_next
    return best, best_v


@njit
def _scan_sparse(X, f, y, work, s, e, K, xl, tot, lc, best, tol):
    """``(score, threshold)`` of the best threshold of one sorted feature segment: ``best`` (and
    any threshold) unless a score is strictly below it.

    A running sum prices each candidate in O(1); candidates within ``tol`` of the best are
    re-scored exactly, so the decision does not depend on the order of equal values.
    """
    fu = np.uint64(f)
    n = e - s
    for k in range(K):
        lc[k] = 0
    run = 0.0  # sum_k (l_k ln l_k + r_k ln r_k)
    for k in range(K):
        run += xl[tot[k]]
    best_v = 0.0
    v = X[fu, np.uint64(work[fu, np.uint64(s)])]
    for p in range(s, e - 1):
        pu = np.uint64(p)
        k = np.uint64(y[np.uint64(work[fu, pu])])
        lk = np.uint64(lc[k])
        rk = np.uint64(tot[k]) - lk
        run += (xl[lk + ONE] - xl[lk]) + (xl[rk - ONE] - xl[rk])
        lc[k] = lk + ONE
        v_next = X[fu, np.uint64(work[fu, pu + ONE])]
        if v_next != v:
            nl = p - s + 1
            nr = n - nl
            if (xl[np.uint64(nl)] + xl[np.uint64(nr)]) - run <= best + tol:
                score = _exact_score(nl, nr, K, lc, tot, xl)
                if score < best:
                    best, best_v = score, v
            v = v_next
    return best, best_v


@njit
def _scan_dense2(X, f, y, rows, s, e, t0, t1, dvals, nv, xl, dcnt, dtot, best):
    """Two-class scan of a count-table feature (binary features in one register pass)."""
    fu = np.uint64(f)
    n = np.uint64(e - s)
    t0u = np.uint64(t0)
    t1u = np.uint64(t1)
    best_v = 0.0
    if nv == 2:
        hi = np.uint64(0)
        hi1 = np.uint64(0)
        v0 = dvals[fu, np.uint64(0)]
        for p in range(s, e):
            r = np.uint64(rows[np.uint64(p)])
            up = ONE if X[fu, r] != v0 else np.uint64(0)
            hi += up
            hi1 += up * np.uint64(y[r])
        nl = n - hi
        if nl > 0 and hi > 0:
            score = _score2(nl, hi, t1u - hi1, t0u, t1u, xl)
            if score < best:
                best, best_v = score, v0
        return best, best_v
    for c in range(nv):
        dtot[c] = 0
        dcnt[c, 1] = 0
    for p in range(s, e):
        r = np.uint64(rows[np.uint64(p)])
        c = _value_code(dvals, f, nv, X[fu, r])
        dtot[c] += 1
        dcnt[c, ONE] += y[r]
    nl = np.uint64(0)
    l1 = np.uint64(0)
    for c in range(nv):
        if dtot[c] == 0:
            continue
        nl += np.uint64(dtot[c])
        l1 += np.uint64(dcnt[c, 1])
        if nl >= n:
            break
        score = _score2(nl, n - nl, l1, t0u, t1u, xl)
        if score < best:
            best, best_v = score, dvals[fu, np.uint64(c)]
    return best, best_v


@njit
def _scan_dense(X, f, y, rows, s, e, K, dvals, nv, xl, tot, lc, dcnt, dtot, best, tol):
    """Best threshold of a low-cardinality feature from the node's value x class counts."""
    fu = np.uint64(f)
    n = e - s
    for c in range(nv):
        dtot[c] = 0
        for k in range(K):
            dcnt[c, k] = 0
    for p in range(s, e):
        r = np.uint64(rows[np.uint64(p)])
        c = _value_code(dvals, f, nv, X[fu, r])
        dcnt[c, np.uint64(y[r])] += 1
        dtot[c] += 1
    for k in range(K):
        lc[k] = 0
    run = 0.0
    for k in range(K):
        run += xl[tot[k]]
    best_v = 0.0
    nl = 0
    for c in range(nv):
        if dtot[c] == 0:
            continue
        for k in range(K):
            m = dcnt[c, k]
            if m > 0:
                lk = lc[k]
                rk = tot[k] - lk
                run += (xl[lk + m] - xl[lk]) + (xl[rk - m] - xl[rk])
                lc[k] = lk + m
        nl += dtot[c]
        if nl >= n:
            break
        nr = n - nl
        if (xl[nl] + xl[nr]) - run <= best + tol:
            score = _exact_score(nl, nr, K, lc, tot, xl)
            if score < best:
                best, best_v = score, dvals[f, c]
    return best, best_v


@njit
def best_split(X, y, s, e, K, feats, nfeat, dense, dvals, dcount, work, rows, xl, tot, lc,
               dcnt, dtot):
    """Best ``(feature, threshold, found)`` of the node holding segment ``[s, e)``.

    ``tot`` holds the node's class counts. Features are tried in subset order and a later one
    wins only with a strictly smaller score.
    """
    m = e - s
    tol = 1e-7 * (1.0 + xl[m])
    best = np.inf
    best_f = -1
    best_v = 0.0
    for j in range(nfeat):
        f = feats[j]
        if K == 2:
            if dense[f]:
                sc, v = _scan_dense2(X, f, y, rows, s, e, tot[0], tot[1], dvals, dcount[f],
                                     xl, dcnt, dtot, best)
            else:
                sc, v = _scan_sparse2(X, f, y, work, s, e, tot[0], tot[1], xl, best)
        elif dense[f]:
            sc, v = _scan_dense(X, f, y, rows, s, e, K, dvals, dcount[f], xl, tot, lc, dcnt,
                                dtot, best, tol)
        else:
            sc, v = _scan_sparse(X, f, y, work, s, e, K, xl, tot, lc, best, tol)
        if sc < best:  # a scan improves on ``best`` only strictly
            best = sc
            best_f = f
            best_v = v
    return best_f, best_v, best_f >= 0
