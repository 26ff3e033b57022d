"""The worker's long-lived objects, kept out of CPython's full garbage collections.

A running worker holds some 165,000 tracked objects that live as long as it does: the
modules it imported, what numba built when it loaded its learners' kernels, its streams'
pipelines. CPython's collector walks every one of them in each full collection (some 75 ms
here), started each time enough of the streams' own objects outlive a few polls (held rows,
rankings, outputs): on Electricity, fully labelled or with half its labels 1,000 instances
late, a worker spent 0.09 to 0.19 s of the 1.4 to 2 s its 45,000 instances took in full
collections. :func:`gc.freeze` moves the objects alive at that moment to a permanent
generation that no collection walks; they are still freed by reference counting as soon as
nothing refers to them.

:class:`LongLivedHeap` freezes once the worker has started and again each time it holds more
resident streams than at its last freeze (a new stream's first poll is when numba loads its
kernels), after a collection, so no garbage is ever frozen. A frozen object is lost to the
collector only if it ends in a reference cycle: pipelines and their learners hold none (a
dropped one is freed by reference counting alone, ``tests/unit/test_heap.py``); what a
rebalance, a rewind or the shutdown drops is handed back to the collector by :meth:`thaw`.

Examples
--------
>>> heap = LongLivedHeap()
>>> heap.settle(2)  # two resident streams: what exists now is frozen
True
>>> heap.settle(2)  # nothing new
False
>>> heap.thaw()
>>> gc.get_freeze_count()
0
"""

from __future__ import annotations

import gc


class LongLivedHeap:
    """Freezes the worker's long-lived objects when they grew (see the module doc)."""

    def __init__(self) -> None:
        self.streams = -1  # resident streams at the last freeze; -1: nothing frozen

    def settle(self, n_streams: int) -> bool:
        """Collect, then freeze what is alive, when the worker holds more resident streams
        (``n_streams``) than at the last freeze, or nothing is frozen. Returns whether it
        froze."""
        if n_streams <= self.streams:
            return False
        gc.collect()
        gc.freeze()
        self.streams = n_streams
        return True

    def thaw(self) -> None:
        """Hand every frozen object back to the collector (after objects were dropped); the
        next :meth:`settle` freezes again."""
        gc.unfreeze()
        self.streams = -1
