"""One poll (a ``consume()`` result) split by partition.

:func:`split_poll` turns one poll into ``partition -> (instances, features)``
:class:`Records` for the ready partition tasks (:class:`worker.task.PartitionTask`);
messages are read with the unbound accessors through ``map`` (no per-message Python frame
on the hot path).
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np
from confluent_kafka import KafkaError, Message

from .task import PartitionTask

# unbound accessors, for map() over a poll
_m_error, _m_partition, _m_offset = Message.error, Message.partition, Message.offset
_m_topic, _m_timestamp = Message.topic, Message.timestamp
_second = itemgetter(1)  # of a (timestamp type, timestamp) pair


class Records:
    """Consumed messages of one topic partition with their offsets and timestamps."""

    __slots__ = ("msgs", "offsets", "ts")

    def __init__(self, msgs: list, offsets: np.ndarray):
        self.msgs = msgs
        self.offsets = offsets
        self.ts = np.fromiter(map(_second, map(_m_timestamp, msgs)), dtype=np.int64,
                              count=len(msgs))


def without_errors(msgs: list, on_error) -> list:
    """The messages of a poll that carry no error, in order; errors other than the
    end of a partition go to ``on_error(err)``, which may raise."""
    errors = list(map(_m_error, msgs))
    # a KafkaError compared with None raises: count the types (C speed, no comparison)
    if list(map(type, errors)).count(type(None)) == len(errors):
        return msgs
    kept = []
    for m, err in zip(msgs, errors):
        if err is None:
            kept.append(m)
        elif err.code() != KafkaError._PARTITION_EOF:
            on_error(err)
    return kept


def split_poll(msgs: list, tasks: dict[int, PartitionTask], features: str, on_error
                ) -> tuple[dict[int, list], int]:
    """``(partition -> [instances Records or None, features Records or None], number of
    messages without error)`` of the ready partitions.

    Errors other than the end of a partition go to ``on_error(err)``, which may raise.
    """
    msgs = without_errors(msgs, on_error)
    if not msgs:
        return {}, 0
    topics = list(map(_m_topic, msgs))
    n_feat = topics.count(features)
    per_part: dict[int, list] = {}
    if n_feat == 0:
        _split(msgs, tasks, per_part, 0)
    elif n_feat == len(msgs):
        _split(msgs, tasks, per_part, 1)
    else:
        _split([m for m, t in zip(msgs, topics) if t != features], tasks, per_part, 0)
        _split([m for m, t in zip(msgs, topics) if t == features], tasks, per_part, 1)
    return per_part, len(msgs)


def _split(msgs: list, tasks: dict, per_part: dict, side: int) -> None:
    """Group one topic's messages by partition into ``per_part[p][side]``."""
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
    for p, pm, pos in groups:
        task = tasks.get(p)
        if task is None or not task.ready:
            continue  # re-read after the partition's restore seeks it
        per_part.setdefault(p, [None, None])[side] = Records(pm, pos)
