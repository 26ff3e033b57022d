"""Column views shared by all trees of a batch: sorted order, and value ranks of discrete columns.

:func:`prepare_columns` runs once per batch (one generation of
:mod:`models.cart.feature_stream_forest`) and gives the CART kernel of :mod:`models.cart._cart` two
views of every column:

* *sorted*: the rows in increasing order of the column's value, with their values and
  classes in that order (``order``, ``values``, ``sorted_codes``), for split search by a scan;
* *ranked* (columns with at most :data:`HIST_MAX` distinct values only): each row's value as
  its rank among the column's distinct values (``rank``) and those values in increasing
  order (``distinct[j, :n_distinct[j]]``), for split search by class histograms per value.

A ranked column is sorted by counting its ranks, in ``O(n_rows)``; only columns with many
distinct values pay a comparison sort. Binary and one-hot columns, common in the paper's
datasets, never do.
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit
from ..core._trees import copy_into

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
    copy_into(out[:k], np.sort(out[:k]))
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
def _counting_order(rank_j, k, order_j):
    """Rows in increasing rank, stable: a counting sort in ``O(n_rows + k)``."""
    start = np.zeros(k + 1, np.int64)
    for i in range(rank_j.shape[0]):
        start[rank_j[i] + 1] += 1
    for b in range(k):
        start[b + 1] += start[b]
    for i in range(rank_j.shape[0]):
        b = rank_j[i]
        order_j[start[b]] = i
        start[b] += 1


@njit
def prepare_columns(X, codes):
    """Both views of every column of ``X`` (see the module doc).

    Returns
    -------
    tuple
        ``(order, values, sorted_codes, rank, distinct, n_distinct)``: the first four of shape
        ``(n_columns, n_rows)``, ``distinct`` of shape ``(n_columns, HIST_MAX)`` and
        ``n_distinct`` of shape ``(n_columns,)`` (-1 for columns that are not ranked).
    """
    n, d = X.shape
    order = np.empty((d, n), np.int64)
    values = np.empty((d, n))
    sorted_codes = np.empty((d, n), np.int64)
    rank = np.zeros((d, n), np.uint8)  # HIST_MAX <= 256: a byte per row keeps scans in cache
    distinct = np.zeros((d, HIST_MAX))
    n_distinct = np.empty(d, np.int64)
    for j in range(d):
        k = _distinct_values(X[:, j], distinct[j])
        n_distinct[j] = k
        if k < 0:
            # ties may come in any order: a split scan only scores between distinct values
            copy_into(order[j], np.argsort(X[:, j]))
        else:
            for i in range(n):
                rank[j, i] = _rank_of(distinct[j], k, X[i, j])
            _counting_order(rank[j], k, order[j])
        for s in range(n):
            values[j, s] = X[order[j, s], j]
            sorted_codes[j, s] = codes[order[j, s]]
    return order, values, sorted_codes, rank, distinct, n_distinct
