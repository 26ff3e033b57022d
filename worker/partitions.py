"""The worker's view of its input partitions: what it holds for each, and a consumed batch
split by partition.

:class:`PartitionTask` is everything one assigned input partition carries between batches
(its streams' pipelines, positions, the last checkpoint's manifest). :func:`split_batch`
turns one ``consume()`` result into ``partition -> (messages, offsets)`` for the ready
partitions, keeping only what follows each partition's position; messages are read with
the unbound accessors through ``map`` (no per-message Python frame on the hot path).
"""

from __future__ import annotations

import time

import numpy as np
from confluent_kafka import KafkaError, Message

from . import checkpoint as ckpt

# unbound accessors, for map() over a consumed batch
_m_error, _m_partition, _m_offset = Message.error, Message.partition, Message.offset


class PartitionTask:
    """What the worker holds for one assigned input partition."""

    def __init__(self, group: str, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.ready = False
        self.pipelines: dict = {}  # stream -> worker.pipeline.Pipeline
        self.dirty: set[str] = set()
        self.position = 0  # next offset to process
        self.committed = 0  # offsets below it were committed (and are replayed silently)
        self.manifest = ckpt.empty_manifest(group, topic, partition, 0)
        self.since_ckpt = 0
        self.last_ckpt = time.monotonic()
        self.restore_t0: float | None = None  # set while replaying after a restore


def split_batch(msgs: list, tasks: dict[int, PartitionTask], on_error
                ) -> tuple[dict[int, tuple[list, np.ndarray]], int]:
    """``(partition -> (messages, offsets), number of messages without error)``.

    Only ready partitions are kept, and of them only what follows the position (a restore
    seeks there; earlier messages of the same fetch are stale). Errors other than the end of
    a partition go to ``on_error(err)``, which may raise.
    """
    errors = list(map(_m_error, msgs))
    if errors.count(None) != len(errors):
        kept = []
        for m, err in zip(msgs, errors):
            if err is None:
                kept.append(m)
            elif err.code() != KafkaError._PARTITION_EOF:
                on_error(err)
        msgs = kept
    if not msgs:
        return {}, 0
    parts = list(map(_m_partition, msgs))
    offsets = np.fromiter(map(_m_offset, msgs), dtype=np.int64, count=len(msgs))
    distinct = list(dict.fromkeys(parts))  # first-seen order
    if len(distinct) == 1:
        groups = [(distinct[0], msgs, offsets)]
    else:
        pa = np.fromiter(parts, dtype=np.int64, count=len(parts))
        groups = []
        for p in distinct:
            idx = np.flatnonzero(pa == p)
            groups.append((p, list(map(msgs.__getitem__, idx.tolist())), offsets[idx]))
    per_part: dict[int, tuple[list, np.ndarray]] = {}
    for p, pm, pos in groups:
        task = tasks.get(p)
        if task is None or not task.ready:
            continue
        keep = pos >= task.position
        if not keep.all():
            idx = np.flatnonzero(keep)
            if not idx.shape[0]:
                continue
            pm, pos = list(map(pm.__getitem__, idx.tolist())), pos[idx]
        per_part[p] = (pm, pos)
    return per_part, len(msgs)
