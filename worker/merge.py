"""The deterministic merge of two co-partitioned input topics (instances and features).

Partition ``p`` of the instances topic and partition ``p`` of the features topic form one
task. Their records are released to the pipelines in one order: at each step the head of
each topic's queue is compared by ``(record timestamp, topic, offset)``, instances before
features on equal timestamps, and the smaller is released. This is the merge Kafka Streams
applies to the partitions of one task; as there, a record is released only while the other
topic has a record to compare with. When one topic has nothing buffered, the other waits:

* not at all (``max_task_idle_ms = 0``, the default) once the empty topic is *caught up*
  (its fetch position has reached its end offset): nothing earlier can be pending there;
* ``max_task_idle_ms`` more when it is caught up, for producers that write the two topics
  with some delay between them;
* at most ``max_task_idle_ms`` plus :data:`LAG_GRACE_S` when its end offset is unknown or it
  lags and no record comes (a stuck fetch must not stop the other topic for good).

Past that bound the waiting records are *forced* out without comparison. A forced release
depends on timing, not on the records, so the merge would not replay identically: every
forced release is recorded as a **cut** ``(instances position, features position, side)``.
The cuts since the partition's last checkpoint travel with the committed offsets, in the
same transaction (the offset metadata of the instances partition, :func:`encode_cuts`), and a
restore replays with them: in the replay range, when one topic reaches a cut's position the
other is drained to its own (:meth:`CoMerge.release`). Between cuts every release compared
two heads, which replay repeats exactly; at the committed offsets, a topic that reached its
end lets the other drain to its end, as the live run did. So a stream's outputs after a crash
or a rebalance equal an uninterrupted run's. Consecutive forced releases of the same side
at the same position of the other topic are one cut, so an idle features topic adds no cut
until a feature arrives.

Examples
--------
Both topics have records: the merge follows the timestamps.

>>> m = CoMerge(a_start=0, b_start=0)
>>> m.push(A, [("a0", 10, 0), ("a1", 30, 1)])
>>> m.push(B, [("b0", 20, 0)])
>>> r = m.release(now=0.0, caught_up=lambda side: False)
>>> r.a, [(msg, before) for msg, before in r.b], m.position
(['a0'], [('b0', 1)], (1, 1))

``a1`` waits for the next feature record, or for the features topic to be idle:

>>> r = m.release(now=0.0, caught_up=lambda side: True)
>>> r.a, m.cuts
(['a1'], [(2, 1, 'a')])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

A, B = 0, 1  # the instances topic, the features topic
_SIDE = ("a", "b")
#: seconds an empty topic whose end is unknown (or that lags without delivering) holds the
#: other topic back, beyond max_task_idle_ms
LAG_GRACE_S = 5.0
#: the cuts of one partition, as committed offset metadata, stay below this many characters
#: (the broker's offset.metadata.max.bytes defaults to 4096); past it the partition is
#: checkpointed, which drops the cuts the checkpoint covers
MAX_CUTS_CHARS = 3000


class _Queue:
    """Fetched, not yet released records of one topic: messages, timestamps, offsets."""

    __slots__ = ("msgs", "ts", "offs", "head", "next_offset")

    def __init__(self, start: int):
        self.msgs: list = []
        self.ts = np.zeros(0, dtype=np.int64)
        self.offs = np.zeros(0, dtype=np.int64)
        self.head = 0
        self.next_offset = start  # records below it were queued already (or released)

    def __len__(self) -> int:
        return len(self.msgs) - self.head

    def push(self, msgs: Sequence, ts: np.ndarray, offs: np.ndarray) -> None:
        keep = offs >= self.next_offset  # a fetch may repeat what a seek left behind
        if not keep.all():
            idx = np.flatnonzero(keep)
            msgs, ts, offs = [msgs[i] for i in idx.tolist()], ts[idx], offs[idx]
        if not len(msgs):
            return
        if self.head:
            self.msgs, self.ts, self.offs = (self.msgs[self.head:], self.ts[self.head:],
                                             self.offs[self.head:])
            self.head = 0
        self.msgs = self.msgs + list(msgs)
        self.ts = np.concatenate((self.ts, ts))
        self.offs = np.concatenate((self.offs, offs))
        self.next_offset = int(offs[-1]) + 1

    def take(self, n: int) -> tuple[list, np.ndarray]:
        h = self.head
        self.head = h + n
        return self.msgs[h:h + n], self.offs[h:h + n]

    def count_below(self, offset: int) -> int:
        """Queued records with an offset below ``offset``."""
        return int(np.searchsorted(self.offs[self.head:], offset))


@dataclass
class Released:
    """What one :meth:`CoMerge.release` let through, in merged order.

    ``a`` are instance records (with ``a_offsets``); ``b`` are feature records, each with
    the number of records of ``a`` released before it.
    """

    a: list = field(default_factory=list)
    a_offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    b: list = field(default_factory=list)
    forced: bool = False

    def __bool__(self) -> bool:
        return bool(self.a) or bool(self.b)


class CoMerge:
    """The merge of one task's two partitions (see the module doc).

    Parameters
    ----------
    a_start, b_start : int
        Offsets of the next record of each topic (a checkpoint's, or the committed ones).
    a_end, b_end : int, optional
        The committed offsets: below them records are replayed and the merge follows
        ``cuts`` and the drain-to-the-end rule instead of waiting.
    cuts : list of (int, int, str), optional
        The forced releases recorded since the checkpoint (:func:`decode_cuts`).
    max_idle_s : float
        ``max_task_idle_ms`` in seconds.
    """

    def __init__(self, a_start: int, b_start: int, a_end: int | None = None,
                 b_end: int | None = None, cuts: Sequence = (), max_idle_s: float = 0.0):
        self.queues = (_Queue(a_start), _Queue(b_start))
        self.pos = [int(a_start), int(b_start)]
        self.end = [int(a_start if a_end is None else a_end),
                    int(b_start if b_end is None else b_end)]
        self.pending = [c for c in cuts if c[0] > a_start or c[1] > b_start]  # to replay
        self.cuts: list[tuple[int, int, str]] = [tuple(c) for c in self.pending]
        self.max_idle_s = float(max_idle_s)
        self._empty_since: list[float | None] = [None, None]

    @property
    def position(self) -> tuple[int, int]:
        """Next offset of each topic after what was released."""
        return self.pos[A], self.pos[B]

    def queued(self, side: int) -> int:
        return len(self.queues[side])

    def push(self, side: int, records: Sequence) -> None:
        """Queue ``(message, timestamp, offset)`` records of one topic, in offset order."""
        if not records:
            return
        msgs = [r[0] for r in records]
        ts = np.fromiter((r[1] for r in records), dtype=np.int64, count=len(records))
        offs = np.fromiter((r[2] for r in records), dtype=np.int64, count=len(records))
        self.push_arrays(side, msgs, ts, offs)

    def push_arrays(self, side: int, msgs: list, ts: np.ndarray, offs: np.ndarray) -> None:
        self.queues[side].push(msgs, ts, offs)
        if len(self.queues[side]):
            self._empty_since[side] = None

    def checkpointed(self) -> None:
        """A checkpoint now covers the released records: drop the cuts it covers."""
        a, b = self.pos
        self.cuts = [c for c in self.cuts if c[0] > a or c[1] > b]

    # -- releasing ------------------------------------------------------------------------

    def release(self, now: float, caught_up: Callable[[int], bool],
                limit: int | None = None) -> Released:
        """Release what the merge order allows now (see the module doc), at most about
        ``limit`` records (stopping early never changes the order: the next call goes on).

        ``caught_up(side)`` tells whether that topic's fetch position reached its end.
        """
        out = Released()
        a_parts: list[list] = []
        a_offs: list[np.ndarray] = []
        left = limit if limit is not None else -1
        while left:
            step = self._step(now, caught_up, left)
            if step is None:
                break
            side, n = step
            left = max(0, left - n) if limit is not None else -1
            msgs, offs = self.queues[side].take(n)
            self.pos[side] = int(offs[-1]) + 1
            if side == A:
                a_parts.append(msgs)
                a_offs.append(offs)
            else:
                n_before = sum(map(len, a_parts))
                out.b.extend((m, n_before) for m in msgs)
        out.a = [m for part in a_parts for m in part]
        if a_offs:
            out.a_offsets = np.concatenate(a_offs)
        for side in (A, B):
            if not len(self.queues[side]) and self._empty_since[side] is None:
                self._empty_since[side] = now
        return out

    def _step(self, now, caught_up, left: int) -> tuple[int, int] | None:
        """The next run to release: ``(side, number of records)``, or ``None`` to wait."""
        step = self._next(now, caught_up)
        if step is None:
            return None
        side, n, forced = step
        if 0 <= left < n:
            n = left
        if forced:
            self._record_cut(side, n)
        return side, n

    def _next(self, now, caught_up) -> tuple[int, int] | None:
        qa, qb = self.queues
        marks = self._marks()
        if marks is not None:  # replaying: follow the cuts, then drain to the ends
            step = self._drain_to(*marks)
            if step is False:
                # compared runs stop at the mark: there the live run was forced, or committed
                step = self._compare(marks[A]) if len(qa) and len(qb) else None
            return None if step is None else (*step, False)
        if len(qa) and len(qb):
            return (*self._compare(), False)
        if not len(qa) and not len(qb):
            return None
        side = A if len(qa) else B
        if not self._idle(1 - side, now, caught_up):
            return None
        return side, len(self.queues[side]), True

    def _marks(self) -> tuple[int, int] | None:
        """In the replay range, the next positions both topics pass together: the next
        recorded cut, else the committed offsets; ``None`` once both are passed."""
        while self.pending:
            a, b, _side = self.pending[0]
            if not (self._reached(A, a) and self._reached(B, b)):
                return a, b
            self.pending.pop(0)
        if self._reached(A, self.end[A]) and self._reached(B, self.end[B]):
            return None
        return self.end[A], self.end[B]

    def _reached(self, side: int, offset: int) -> bool:
        """Every record of ``side`` below ``offset`` was released."""
        q = self.queues[side]
        return self.pos[side] >= offset or (len(q) > 0 and int(q.offs[q.head]) >= offset)

    def _drain_to(self, a_off: int, b_off: int):
        """One side reached its mark: release the other's records below its own mark.

        ``False`` when neither side reached its mark; ``None`` when the records to drain
        are not fetched yet (never called with both marks reached).
        """
        ra, rb = self._reached(A, a_off), self._reached(B, b_off)
        if not ra and not rb:
            return False
        side, mark = (B, b_off) if ra else (A, a_off)
        n = self.queues[side].count_below(mark)
        return (side, n) if n else None

    def _compare(self, a_mark: int | None = None) -> tuple[int, int]:
        """Both heads present: the run of ``a`` not after ``b``'s head (and below
        ``a_mark``), else ``b``'s head."""
        qa, qb = self.queues
        kb = int(qb.ts[qb.head])
        later = np.flatnonzero(qa.ts[qa.head:] > kb)  # instances first on equal timestamps
        n = int(later[0]) if later.shape[0] else len(qa)
        if a_mark is not None:
            n = min(n, qa.count_below(a_mark))
        return (A, n) if n else (B, 1)

    def _idle(self, side: int, now: float, caught_up) -> bool:
        since = self._empty_since[side]
        if since is None:
            self._empty_since[side] = since = now
        waited = now - since
        if waited >= self.max_idle_s + LAG_GRACE_S:
            return True
        return waited >= self.max_idle_s and caught_up(side)

    def _record_cut(self, side: int, n: int) -> None:
        """A forced release of ``n`` records of ``side``: remember where it ended."""
        q = self.queues[side]
        pos = list(self.pos)
        pos[side] = int(q.offs[q.head + n - 1]) + 1
        cut = (pos[A], pos[B], _SIDE[side])
        last = self.cuts[-1] if self.cuts else None
        if last is not None and last[2] == cut[2] and last[1 - side] == cut[1 - side]:
            self.cuts[-1] = cut  # the same wait continued: one cut (see the module doc)
        else:
            self.cuts.append(cut)


def encode_cuts(checkpoint: tuple[int, int], cuts: Sequence) -> str:
    """Offset metadata of the instances partition: the checkpoint and the cuts since.

    Examples
    --------
    >>> encode_cuts((10, 2), [(15, 2, "a"), (15, 4, "b")])
    'sf1;10,2;a15.2,b15.4'
    >>> decode_cuts('sf1;10,2;a15.2,b15.4')
    ((10, 2), [(15, 2, 'a'), (15, 4, 'b')])
    """
    body = ",".join(f"{s}{a}.{b}" for a, b, s in cuts)
    return f"sf1;{checkpoint[0]},{checkpoint[1]};{body}"


def decode_cuts(text: str | None) -> tuple[tuple[int, int] | None, list]:
    """``(checkpoint offsets, cuts)`` of :func:`encode_cuts` text; ``(None, [])`` for other
    or missing metadata."""
    if not text or not text.startswith("sf1;"):
        return None, []
    try:
        _v, ck, body = text.split(";", 2)
        a, b = (int(v) for v in ck.split(","))
        cuts = []
        for item in filter(None, body.split(",")):
            x, y = item[1:].split(".")
            if item[0] not in _SIDE:
                raise ValueError(item)
            cuts.append((int(x), int(y), item[0]))
    except ValueError:
        return None, []
    return (a, b), cuts
