"""Which streams of a partition are in memory: a state budget, passivation, restore on demand.

Keyed streams invite one stream per device or customer: thousands per worker, most of them
idle at any moment. A worker keeps its streams' pipelines in memory up to a state budget
(``STREAMFOREST_WORKER__STATE_BUDGET_MB``). Past it, the least recently used streams whose
state is in the partition's checkpoint are *passivated*: dropped from memory, and restored
from the checkpoints topic when their next message arrives (Orleans' grains and Flink's
state backends keep the same contract: memory is a cache of the durable state).

A stream is passivated only when it is *clean*: unchanged since it was last written into a
checkpoint. The worker checkpoints a partition early when the budget is exceeded, so every
stream can become clean. Its state then is the envelope the partition's manifest names, and
a restore gives back exactly the learners that were dropped: outputs do not depend on the
budget. A checkpoint written in the open transaction is readable once that transaction
commits, so the worker waits for the commit in flight before restoring, and the read waits
until the partition's last stable offset reaches the checkpoint (a read_committed reader sees
a committed transaction only once its markers are written, after the commit returned). A
restore on demand that fails (a checkpoint refused, a read timed out) never ends the worker:
the partition is restored again from its checkpoints, with the fallback of a restore at start
(see :meth:`worker.restore_on_demand.OnDemand.load` and :mod:`worker.recovery`).

:class:`StreamTable` is the mapping the decoder, the learner loop and the checkpoint writer
use (``table[stream]``, ``table.get(stream)``, ``stream in table``): a passivated stream
named there is restored on the spot. :meth:`StreamTable.prefetch` restores the passivated
streams of a whole batch in one read first.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

Loader = Callable[[list[str]], dict[str, Any]]


class StreamTable:
    """The pipelines of one partition, resident or passivated, in order of last use.

    Parameters
    ----------
    load : callable
        ``load(streams) -> {stream: pipeline}``: the passivated streams' pipelines, read from
        the partition's checkpoint.

    Examples
    --------
    >>> class P:  # a pipeline stand-in: only its size matters here
    ...     def __init__(self, n): self.nbytes = n
    >>> saved = {}
    >>> t = StreamTable(lambda streams: {s: saved.pop(s) for s in streams})
    >>> t["a"], t["b"] = P(10), P(20)
    >>> t.touch(["a", "b"], tick=1); t.touch(["a"], tick=2)
    >>> list(t.by_last_use()), t.resident_bytes
    ([(1, 'b'), (2, 'a')], 30)
    >>> saved["b"] = t.passivate("b")
    >>> len(t), t.n_resident, sorted(t.passivated), t.resident_bytes
    (2, 1, ['b'], 10)
    >>> t["b"].nbytes, t.n_resident, t.n_loaded  # restored on demand
    (20, 2, 1)
    """

    def __init__(self, load: Loader):
        self._load = load
        self._resident: OrderedDict[str, Any] = OrderedDict()  # least recently used first
        self._last: dict[str, int] = {}  # stream -> tick of its last use
        self._bytes: dict[str, int] = {}  # stream -> bytes at its last use
        self._tick = 0  # the latest tick of touch(): new streams count as used then
        self.resident_bytes = 0
        self.passivated: set[str] = set()
        self.n_loaded = 0  # streams restored on demand since the table was made

    # -- the mapping the worker's loop uses ----------------------------------------------------

    def get(self, stream: str, default=None):
        """The stream's pipeline (restored if passivated), or ``default`` for a new stream."""
        pl = self._resident.get(stream)
        if pl is not None:
            return pl
        if stream in self.passivated:
            self.prefetch([stream])
            return self._resident[stream]
        return default

    def __getitem__(self, stream: str):
        pl = self.get(stream)
        if pl is None:
            raise KeyError(stream)
        return pl

    def __setitem__(self, stream: str, pipeline) -> None:
        """Hold a pipeline (a new stream, or one rebuilt by a restore)."""
        self.passivated.discard(stream)
        self._resident[stream] = pipeline
        self._resident.move_to_end(stream)
        self._last[stream] = self._tick
        self._resize(stream, pipeline)

    def pop(self, stream: str, default=None):
        """Forget a stream (a new stream whose first record was refused)."""
        self.passivated.discard(stream)
        pl = self._resident.pop(stream, None)
        if pl is None:
            return default
        self._last.pop(stream, None)
        self.resident_bytes -= self._bytes.pop(stream, 0)
        return pl

    def __contains__(self, stream: str) -> bool:
        return stream in self._resident or stream in self.passivated

    def __len__(self) -> int:
        return len(self._resident) + len(self.passivated)

    def __iter__(self) -> Iterator[str]:
        """Every stream id, resident ones first (nothing is restored)."""
        yield from list(self._resident)
        yield from sorted(self.passivated)

    def clear(self) -> None:
        """Forget every stream (the partition is rewound or dropped)."""
        self._resident.clear()
        self._last.clear()
        self._bytes.clear()
        self.passivated.clear()
        self.resident_bytes = 0

    # -- residency ---------------------------------------------------------------------------------

    @property
    def n_resident(self) -> int:
        return len(self._resident)

    def items(self):
        """``(stream, pipeline)`` of the streams in memory, least recently used first."""
        return list(self._resident.items())

    def values(self):
        """The pipelines in memory, least recently used first."""
        return list(self._resident.values())

    def prefetch(self, streams: Iterable[str]) -> int:
        """Restore the passivated streams among ``streams`` in one read; returns how many.

        What ``load`` raises goes to the caller, and the table is unchanged then.
        """
        wanted = [s for s in dict.fromkeys(streams) if s in self.passivated]
        if not wanted:
            return 0
        loaded = self._load(wanted)
        missing = sorted(set(wanted) - set(loaded))
        if missing:
            raise RuntimeError(f"passivated streams {missing[:5]} were not restored")
        for s in wanted:
            self[s] = loaded[s]
        self.n_loaded += len(wanted)
        return len(wanted)

    def touch(self, streams: Iterable[str], tick: int) -> None:
        """Mark resident ``streams`` used at ``tick`` (never decreasing) and account their
        current size."""
        self._tick = tick
        for s in streams:
            pl = self._resident.get(s)
            if pl is None:
                continue
            self._resident.move_to_end(s)
            self._last[s] = tick
            self._resize(s, pl)

    def passivate(self, stream: str):
        """Drop a resident stream from memory (its state must be in the checkpoint); returns
        its pipeline."""
        pl = self._resident.pop(stream)
        self.resident_bytes -= self._bytes.pop(stream, 0)
        self._last.pop(stream, None)
        self.passivated.add(stream)
        return pl

    def mark_passivated(self, streams: Iterable[str]) -> None:
        """Streams of a restored checkpoint left out of memory (restored when they come)."""
        self.passivated.update(s for s in streams if s not in self._resident)

    def by_last_use(self) -> Iterator[tuple[int, str]]:
        """``(tick, stream)`` of the resident streams, least recently used first."""
        return ((self._last.get(s, 0), s) for s in self._resident)

    def _resize(self, stream: str, pipeline) -> None:
        size = int(pipeline.nbytes)
        self.resident_bytes += size - self._bytes.get(stream, 0)
        self._bytes[stream] = size


def least_recent(tables: dict[int, StreamTable]) -> Iterator[tuple[int, str]]:
    """``(partition, stream)`` of every resident stream of ``tables``, least recently used
    first across partitions.

    Examples
    --------
    >>> class P:
    ...     nbytes = 1
    >>> a, b = StreamTable(dict), StreamTable(dict)
    >>> a["x"] = b["y"] = a["z"] = P()
    >>> a.touch(["x"], 3); b.touch(["y"], 1); a.touch(["z"], 5)
    >>> list(least_recent({0: a, 1: b}))
    [(1, 'y'), (0, 'x'), (0, 'z')]
    """
    runs = [_tagged(p, t) for p, t in tables.items()]
    return ((p, s) for _tick, p, s in heapq.merge(*runs))


def _tagged(p: int, table: StreamTable) -> Iterator[tuple[int, int, str]]:
    return ((tick, p, s) for tick, s in table.by_last_use())


class Budget:
    """The worker's state budget over all its partitions (see the module doc).

    Parameters
    ----------
    budget_bytes : int
        Memory the streams' learners may hold.
    low_water : float, default 0.8
        Passivation frees memory down to this share of the budget, so that a worker at its
        budget checkpoints early and passivates in rounds, not at every batch.

    Examples
    --------
    >>> class P:
    ...     nbytes = 100
    >>> class T:  # a partition: its table, manifest and changed streams
    ...     ready, dirty = True, set()
    ...     manifest = type("M", (), {"streams": {"a": 0, "b": 0, "c": 0}})()
    >>> t = T(); t.pipelines = StreamTable(dict)
    >>> for i, s in enumerate("abc"):
    ...     t.pipelines[s] = P(); t.pipelines.touch([s], i)
    >>> b = Budget(250)  # 300 bytes held: down to 200, the least recently used goes
    >>> b.exceeded({0: t}), b.passivate({0: t}), sorted(t.pipelines.passivated)
    (True, ['a'], ['a'])
    """

    def __init__(self, budget_bytes: int, low_water: float = 0.8):
        self.budget_bytes = int(budget_bytes)
        self.low_water = float(low_water)

    @staticmethod
    def held(tasks: dict) -> int:
        """Bytes the resident streams of ``tasks`` hold."""
        return sum(t.pipelines.resident_bytes for t in tasks.values())

    def exceeded(self, tasks: dict) -> bool:
        return self.held(tasks) > self.budget_bytes

    def left(self, tasks: dict, but: int) -> int:
        """Bytes a restore of partition ``but`` may fill (what the others leave free)."""
        others = {p: t for p, t in tasks.items() if p != but}
        return max(0, int(self.budget_bytes * self.low_water) - self.held(others))

    def passivate(self, tasks: dict) -> list[str]:
        """Passivate clean streams, least recently used first, until the resident ones fit
        the low-water mark; returns them. A stream is clean when it has not changed since
        the checkpoint its partition's manifest names (changed ones cannot be dropped)."""
        ready = {p: t for p, t in tasks.items() if t.ready}
        held = self.held(ready)
        target = self.budget_bytes * self.low_water
        dropped = []
        for p, s in list(least_recent({p: t.pipelines for p, t in ready.items()})):
            if held <= target:
                break
            task = ready[p]
            if s in task.dirty or s not in task.manifest.streams:
                continue
            before = task.pipelines.resident_bytes
            task.pipelines.passivate(s)
            held -= before - task.pipelines.resident_bytes
            dropped.append(s)
        return dropped
