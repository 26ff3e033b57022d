"""Column views shared by all trees of a batch: sorted order, and value ranks of discrete columns.

:func:`prepare_columns` runs once per batch (one generation of
:mod:`models.feature_stream_forest`) and gives the CART kernel of :mod:`models._cart` two
views of every column:

* *sorted*: the rows in increasing order of the column's value, with their values and
  classes in that order (``order``, ``values``, ``sorted_codes``), for split search by a scan;
* *binned* (columns with at most :data:`HIST_MAX` distinct values only): the column's distinct
  values in increasing order (``distinct[j, :n_distinct[j]]``), where each value's rows start
  in the sorted order (``bin_start``) and which value has the most rows (``mode``), for split
  search by class histograms per value. The mode's histogram is never filled row by row: it
  is the node's counts minus the other values', so a one-hot column costs its few ones.

A binned column is sorted by counting its values' ranks, in ``O(n_rows)``; only columns with
many distinct values pay a comparison sort. Binary and one-hot columns, common in the paper's
datasets, never do.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

#: columns with at most this many distinct values are ranked and searched by histograms
HIST_MAX = 64


@njit
def _distinct_values(column, out):
    """Sorted distinct values of ``column`` in ``out[:k]``; return ``k``, or -1 past ``HIST_MAX``.

    A continuous column gives up after ``HIST_MAX + 1`` distinct values, within its first rows.
    """
    k = 0
    for i in range(column.shape[0]):
        x = column[i]
        found = False
        for t in range(k):
            if out[t] == x:
                found = True
                break
        if not found:
            if k == out.shape[0]:
                return -1
            out[k] = x
            k += 1
    out[:k] = np.sort(out[:k])
    return k


@njit
def _rank_of(distinct, k, x):
    """Index of ``x`` in the sorted ``distinct[:k]`` (``x`` is one of them)."""
    a, b = 0, k - 1
    while a < b:
        m = (a + b) // 2
        if distinct[m] < x:
            a = m + 1
        else:
            b = m
    return a


@njit
def _counting_order(rank, k, order_j, bin_start_j):
    """Rows in increasing rank, stable (a counting sort); ``bin_start_j[b]``: where rank b starts."""
    bin_start_j[:] = 0
    for i in range(rank.shape[0]):
        bin_start_j[rank[i] + 1] += 1
    for b in range(k):
        bin_start_j[b + 1] += bin_start_j[b]
    next_free = bin_start_j[:k].copy()
    for i in range(rank.shape[0]):
        b = rank[i]
        order_j[next_free[b]] = i
        next_free[b] += 1


@njit
def prepare_columns(X, codes):
    """Both views of every column of ``X`` (see the module doc).

    Returns
    -------
    tuple
        ``(order, values, sorted_codes, distinct, bin_start, n_distinct, mode)``: the first
        three of shape ``(n_columns, n_rows)``, ``distinct`` ``(n_columns, HIST_MAX)``,
        ``bin_start`` ``(n_columns, HIST_MAX + 1)``, ``n_distinct`` and ``mode``
        ``(n_columns,)`` (``n_distinct`` is -1 for columns that are not binned).
    """
    n, d = X.shape
    order = np.empty((d, n), np.int64)
    values = np.empty((d, n))
    sorted_codes = np.empty((d, n), np.int64)
    distinct = np.zeros((d, HIST_MAX))
    bin_start = np.zeros((d, HIST_MAX + 1), np.int64)
    n_distinct = np.empty(d, np.int64)
    mode = np.zeros(d, np.int64)
    rank = np.empty(n, np.int64)
    for j in range(d):
        k = _distinct_values(X[:, j], distinct[j])
        n_distinct[j] = k
        if k < 0:
            # ties may come in any order: a split scan only scores between distinct values
            order[j] = np.argsort(X[:, j])
        else:
            for i in range(n):
                rank[i] = _rank_of(distinct[j], k, X[i, j])
            _counting_order(rank, k, order[j], bin_start[j])
            mode[j] = np.argmax(bin_start[j, 1:k + 1] - bin_start[j, :k])
        for s in range(n):
            values[j, s] = X[order[j, s], j]
            sorted_codes[j, s] = codes[order[j, s]]
    return order, values, sorted_codes, distinct, bin_start, n_distinct, mode
