"""Restoring an assigned partition: checkpoint, replay range, resume.

On assignment (and at start) a partition is paused; the worker's loop then calls
:func:`restore_partition`, which

1. asks the group for the partition's committed offset ``C`` (a ``read_committed`` consumer
   waits for pending transactional offsets, KIP-447),
2. reads the latest committed checkpoint (:func:`worker.checkpoint.read_latest`), which
   covers the input up to ``K <= C``, and rebuilds the streams' pipelines from it,
3. returns ``K`` (where to seek) and ``C`` (below which input is *replayed*: it updates the
   state only, because its outputs were committed in earlier transactions).

Without a checkpoint, ``K`` is the partition's first available offset. A checkpoint that
claims more input than the committed offset (``K > C``, e.g. after an operator reset the
group's offsets) is not used: the state is rebuilt from the first available offset so it
matches what the offsets say.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from . import checkpoint as ckpt
from .logs import event
from .pipeline import Pipeline

log = logging.getLogger("streamforest.recovery")


@dataclass
class Restored:
    pipelines: dict  # stream -> Pipeline
    manifest: ckpt.Manifest | None
    start: int  # first offset to (re)process
    committed: int  # offsets below are replayed without outputs
    seconds: float
    n_bytes: int


def committed_offset(consumer, topic: str, partition: int, timeout_s: float) -> int | None:
    """The group's committed offset of a partition, or ``None`` when there is none."""
    tp = consumer.committed([TopicPartition(topic, partition)], timeout=timeout_s)[0]
    if tp.error is not None:
        raise RuntimeError(f"cannot read the committed offset of {topic}[{partition}]: "
                           f"{tp.error}")
    return tp.offset if tp.offset >= 0 else None


def restore_partition(consumer, reader, group: str, topic: str, partition: int,
                      ckpt_topic: str, timeout_s: float = 60.0) -> Restored:
    """Read the partition's checkpoint and decide the replay range (see module doc)."""
    t0 = time.monotonic()
    committed = committed_offset(consumer, topic, partition, timeout_s)
    low, _high = reader.get_watermark_offsets(TopicPartition(topic, partition),
                                              timeout=timeout_s)
    manifest, envelopes, n_bytes = ckpt.read_latest(reader, ckpt_topic, partition, group, topic,
                                                    timeout_s)
    covered = manifest.offsets[topic] if manifest is not None else None
    if manifest is not None and committed is not None and covered > committed:
        event(log, logging.WARNING, "checkpoint ahead of committed offset: not used",
              topic=topic, partition=partition, checkpoint=covered, committed=committed)
        manifest, envelopes, n_bytes = None, {}, 0
    if manifest is not None and committed is None:
        event(log, logging.WARNING, "checkpoint without committed offset: resuming from it",
              topic=topic, partition=partition, checkpoint=covered)
    pipelines = {s: Pipeline.from_state(env.state) for s, env in envelopes.items()}
    if manifest is not None:
        start = covered
    else:
        start = low
        if committed is not None and low > 0:
            # the input before `low` is gone (retention): the state cannot be rebuilt exactly
            event(log, logging.ERROR, "no checkpoint and input before the first available "
                  "offset was deleted: state rebuilt from what is left", topic=topic,
                  partition=partition, low=low, committed=committed)
    if committed is None:
        committed = start
    if start < low:
        event(log, logging.ERROR, "checkpoint offset below the first available offset",
              topic=topic, partition=partition, checkpoint=start, low=low)
    return Restored(pipelines, manifest, start, committed, time.monotonic() - t0, n_bytes)
