"""Structure-of-arrays binary trees shared by the tree learners.

A tree is a set of parallel arrays indexed by node id (the root is node 0):

* ``node_feature[i]``: the feature tested at node ``i``, or ``-1`` when ``i`` is a leaf;
* ``node_threshold[i]``: an instance goes left when ``x[feature] <= threshold``;
* ``node_left[i]``, ``node_right[i]``: child ids (``-1`` for leaves);
* ``node_depth[i]``: the root has depth 0.

Forests keep one row per tree in 2-D arrays of shape ``(n_trees, node_capacity)``; a kernel
passes ``arr[t]`` (a view) to these functions. Capacity grows by doubling from Python
(:func:`grow_axis`) when a kernel reports that a tree is full.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit


@njit
def find_leaf(node_feature, node_threshold, node_left, node_right, x):
    """Route one instance ``x`` from the root to its leaf and return the leaf id."""
    i = 0
    while node_feature[i] >= 0:
        if x[node_feature[i]] <= node_threshold[i]:
            i = node_left[i]
        else:
            i = node_right[i]
    return i


def grow_axis(arr: np.ndarray, size: int, axis: int = 0, fill=0) -> np.ndarray:
    """Return a copy of ``arr`` whose ``axis`` has length ``size``, new cells set to ``fill``."""
    old = arr.shape[axis]
    if size <= old:
        return arr
    shape = list(arr.shape)
    shape[axis] = size
    out = np.full(shape, fill, dtype=arr.dtype)
    index = [slice(None)] * arr.ndim
    index[axis] = slice(0, old)
    out[tuple(index)] = arr
    return out
