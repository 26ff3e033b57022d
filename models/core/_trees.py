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


@njit
def copy_into(dst, src):
    """``dst[...] = src`` for two arrays of one shape (a tree's row of nodes, a leaf's
    statistics), element by element.

    Why not the slice assignment: numba checks its shapes with an error message that it
    builds from the shapes' text, and compiling that text formatting (``str`` of tuples, per
    number of dimensions) cost about 3.6 s of a cold start for the default pipelines' two
    tree kernels that copy rows. A copy between rows of one pool is the caller's to make
    shape-safe; numba's bounds checks, when on, still apply to each element.

    Examples
    --------
    >>> a, b = np.zeros((2, 3)), np.arange(6.0).reshape(2, 3)
    >>> copy_into(a[1], b[0]); a.tolist()
    [[0.0, 0.0, 0.0], [0.0, 1.0, 2.0]]
    """
    for idx in np.ndindex(src.shape):
        dst[idx] = src[idx]


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
