"""Reading a bounded range of a topic, without disturbing anyone.

The evaluation reads with a consumer of its own: ``read_committed`` (only what committed
transactions wrote), partitions assigned by hand, no group membership and no offset commits,
so the running consumer group never notices it. :func:`read_range` yields each partition's
records in offset order, in batches, and stops every partition at the end of its range
(records beyond it, and control records of transactions, are never handed out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from confluent_kafka import Message, TopicPartition

from ...poll import without_errors
from .ranges import PartitionRange

_m_partition, _m_offset = Message.partition, Message.offset


def read_range(reader, topic: str, ranges: list[PartitionRange], batch: int = 5000,
               timeout_s: float = 0.02, on_progress: Callable[[int], None] | None = None
               ) -> Iterator[tuple[int, list, np.ndarray]]:
    """Yield ``(partition, messages, offsets)`` batches covering every range.

    A consume call returns when it has ``batch`` records or after ``timeout_s``: a short
    timeout hands out what the client prefetched instead of waiting for a full batch (with
    0.5 s, a replay spent most of its time waiting).

    ``on_progress(n)`` is told how many offsets each batch advanced (control records and
    gaps included), so a progress bar reaches exactly the size of the range.
    """
    todo = {r.partition: r for r in ranges if len(r)}
    if not todo:
        return
    reader.incremental_assign([TopicPartition(topic, p, r.start) for p, r in todo.items()])
    done_at = {p: r.start for p, r in todo.items()}  # offsets accounted for in progress
    try:
        while todo:
            msgs = reader.consume(batch, timeout_s)
            yield from _by_partition(msgs, todo)
            _finish(reader, topic, todo, done_at, on_progress)
    finally:
        reader.unassign()


def _by_partition(msgs: list, todo: dict) -> list[tuple[int, list, np.ndarray]]:
    msgs = without_errors(msgs, _fail)
    if not msgs:
        return []
    parts = np.fromiter(map(_m_partition, msgs), dtype=np.int64, count=len(msgs))
    offs = np.fromiter(map(_m_offset, msgs), dtype=np.int64, count=len(msgs))
    out = []
    for p in dict.fromkeys(parts.tolist()):
        r = todo.get(p)
        if r is None:
            continue
        keep = np.flatnonzero((parts == p) & (offs < r.end))
        if keep.shape[0]:
            out.append((p, [msgs[i] for i in keep.tolist()], offs[keep]))
    return out


def _fail(err) -> None:
    raise RuntimeError(f"reading failed: {err}")


def _finish(reader, topic: str, todo: dict, done_at: dict, on_progress) -> None:
    """Drop the partitions whose position reached the end of their range."""
    tps = [TopicPartition(topic, p) for p in todo]
    for tp in reader.position(tps):
        r = todo[tp.partition]
        pos = min(tp.offset, r.end) if tp.offset >= 0 else done_at[tp.partition]
        if on_progress is not None and pos > done_at[tp.partition]:
            on_progress(pos - done_at[tp.partition])
        done_at[tp.partition] = max(done_at[tp.partition], pos)
        if pos >= r.end:
            del todo[tp.partition]
            reader.incremental_unassign([TopicPartition(topic, tp.partition)])
