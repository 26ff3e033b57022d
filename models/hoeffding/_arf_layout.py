"""Adaptive random forest states of layout 1 (before the node and leaf pools) read as layout 2.

Layout 1 gave each of the ``S`` tree slots its own node arrays, ``(S, N)`` with ``N`` the
capacity of the largest tree, plus ``leaf_feat (S, N, m)`` and the Gaussian estimators
``(S, N, m, K)`` for every node, and ``n_nodes (S, 1)``. Layout 2 (:mod:`models.hoeffding._arf_kernels`)
puts the nodes of every slot in one pool and the leaves' statistics in a leaf pool. The trees,
their statistics and every generator's state carry over unchanged, so a forest restored from a
layout-1 checkpoint continues exactly as it would have: node order inside a pool decides no
output.

The converted arrays are checked as any restored state is (:meth:`AdaptiveRandomForest.
_check_state`); here only what the conversion itself indexes is checked first.
"""

from __future__ import annotations

import numpy as np

from ..core.base import check_index, check_layout

#: layout 1's per-slot node arrays: name -> (dtype, dimensions)
_SLOT_ARRAYS = {
    "node_feature": ("<i8", 2), "node_threshold": ("<f8", 2), "node_left": ("<i8", 2),
    "node_right": ("<i8", 2), "node_depth": ("<i8", 2), "node_active": ("|u1", 2),
    "node_last_eval": ("<f8", 2), "node_mc": ("<f8", 2), "node_nb": ("<f8", 2),
    "node_merit": ("<f8", 2), "node_counts": ("<f8", 3), "leaf_feat": ("<i8", 3),
    "n_nodes": ("<i8", 2), "g_w": ("<f8", 4), "g_mean": ("<f8", 4), "g_m2": ("<f8", 4),
    "g_min": ("<f8", 4), "g_max": ("<f8", 4),
}
_KEPT_ON_NODES = ("node_feature", "node_threshold", "node_depth", "node_active", "node_merit",
                  "node_counts")
_LEAF_FROM_NODE = {"leaf_last_eval": "node_last_eval", "leaf_mc": "node_mc", "leaf_nb": "node_nb",
                   "leaf_feat": "leaf_feat", "g_w": "g_w", "g_mean": "g_mean", "g_m2": "g_m2",
                   "g_min": "g_min", "g_max": "g_max"}


def _slot_arrays(arrays: dict, kind: str) -> tuple[int, int]:
    """Check what the conversion indexes: ``(S, N)``; ``ValueError`` if it cannot be read."""
    check_layout({k: arrays[k] for k in _SLOT_ARRAYS if k in arrays}, _SLOT_ARRAYS, kind)
    S, N = arrays["node_feature"].shape
    for name in _SLOT_ARRAYS:
        if arrays[name].shape[:2] != ((S, 1) if name == "n_nodes" else (S, N)):
            raise ValueError(f"{kind} layout-1 state array {name!r} has shape "
                             f"{arrays[name].shape} for {S} slots of {N} nodes")
    check_index(arrays["n_nodes"], 1, N + 1, "n_nodes")
    for side in ("node_left", "node_right"):
        check_index(arrays[side], -1, N, side)
    return S, N


def pools_from_layout1(state: dict, kind: str, layout: int) -> dict:
    """The layout-2 state of a layout-1 ``state`` (``ValueError`` if it cannot be read).

    Nodes go into the node pool slot by slot in their order (a child still comes after its
    parent), leaves into the leaf pool in node order; the pools' capacity is what they hold
    (the learner grows them before its next row).

    Examples
    --------
    One slot holding a root split into two leaves, one spare slot with a lone root:

    >>> S, N, m, K = 2, 4, 1, 2
    >>> a = {n: np.zeros((S, N), np.dtype(dt)) for n, (dt, d) in _SLOT_ARRAYS.items() if d == 2}
    >>> a["node_counts"], a["leaf_feat"] = np.zeros((S, N, K)), np.zeros((S, N, m), np.int64)
    >>> a.update({n: np.zeros((S, N, m, K)) for n in ("g_w", "g_mean", "g_m2", "g_min", "g_max")})
    >>> a["n_nodes"] = np.array([[3], [1]])
    >>> a["node_feature"][:] = -1; a["node_left"][:] = -1; a["node_right"][:] = -1
    >>> a["node_feature"][0, 0], a["node_left"][0, 0], a["node_right"][0, 0] = 0, 1, 2
    >>> b = pools_from_layout1({"arrays": a, "extra": {}}, "demo", 2)["arrays"]
    >>> b["slot_root"].tolist(), b["node_slot"].tolist(), b["node_leaf"].tolist()
    ([0, 3], [0, 0, 0, 1], [-1, 0, 1, 2])
    >>> b["leaf_node"].tolist(), b["used"].tolist(), b["slot_nodes"].tolist()
    ([1, 2, 3], [4, 3], [3, 1])
    """
    a = dict(state["arrays"])
    S, _ = _slot_arrays(a, kind)
    counts = a.pop("n_nodes")[:, 0]
    slot = np.repeat(np.arange(S, dtype=np.int64), counts)
    local = np.concatenate([np.arange(c, dtype=np.int64) for c in counts])
    base = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    out = {name: np.ascontiguousarray(a.pop(name)[slot, local]) for name in _KEPT_ON_NODES}
    for side in ("node_left", "node_right"):
        child = a.pop(side)[slot, local]
        out[side] = np.where(child >= 0, child + base[slot], -1).astype(np.int64)
    leaves = np.flatnonzero(out["node_feature"] < 0).astype(np.int64)
    out["node_slot"] = slot
    out["node_leaf"] = np.full(slot.shape[0], -1, np.int64)
    out["node_leaf"][leaves] = np.arange(leaves.shape[0], dtype=np.int64)
    out["leaf_node"] = leaves
    for name, source in _LEAF_FROM_NODE.items():
        out[name] = np.ascontiguousarray(a.pop(source)[slot[leaves], local[leaves]])
    out["slot_root"] = base
    out["slot_nodes"] = counts.astype(np.int64)
    out["used"] = np.array([slot.shape[0], leaves.shape[0]], np.int64)
    state = {k: v for k, v in state.items() if k != "capacity"}
    return {**state, "arrays": {**a, **out}, "extra": {**(state.get("extra") or {}),
                                                       "layout": layout}}
