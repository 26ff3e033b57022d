"""Restoring an assigned partition: checkpoint, replay range, resume.

On assignment (and at start) a partition is paused; the worker's loop then calls
:func:`restore_partition`, which

1. asks the group for the partition's committed offset ``C`` (a ``read_committed`` consumer
   waits for pending transactional offsets, KIP-447),
2. reads the newest usable checkpoint (:func:`worker.checkpoint_store.read_usable`), which covers
   the input up to ``K <= C``, and rebuilds the streams' pipelines from it,
3. returns ``K`` (where to seek) and ``C`` (below which input is *replayed*: it updates the
   state only, because its outputs were committed in earlier transactions).

The same partition of the features topic is restored with it: the checkpoint records both
offsets, the group both committed offsets, and the instances partition's committed offset
carries the merge's cuts since the checkpoint (:mod:`worker.merge`), which the replay follows.

A checkpoint whose chunks are missing or corrupt, that is not the one its manifest names,
that claims more than its records can hold (chunk counts, inflated sizes, capacities and
learner parameters past their bounds), or whose learner states fail their checks is refused
and the previous one still on the topic is tried; one that claims more input than the
committed offset (``K > C``, e.g. after an operator reset the group's offsets) is skipped the
same way. When none is usable the state is rebuilt from the partition's first available
offset, with a warning: outputs stay exact as long as retention kept the input since the
group's first commit. A restore never loops on a bad checkpoint: the outcome is the same every
time, and it is reported in :attr:`Restored.refused` (the worker counts it in its metrics).

A passivated stream restored on demand (:mod:`worker.residency`) reads the same checkpoint;
when that read fails, the worker restores the whole partition again through
:func:`restore_partition`, so a checkpoint refused on demand takes the same fallback as at
start (see :meth:`worker.restore_on_demand.OnDemand.load`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from . import checkpoint_store as ckpt
from .logs import event
from .merge import decode_cuts
from .pipeline import pipeline_from_state

log = logging.getLogger("streamforest.recovery")


@dataclass
class Restored:
    pipelines: dict  # stream -> Pipeline, in memory
    manifest: ckpt.Manifest | None
    start: int  # first offset to (re)process
    committed: int  # offsets below are replayed without outputs
    seconds: float
    n_bytes: int
    refused: list = field(default_factory=list)  # why newer checkpoints were not used
    fstart: int = 0  # the same two of the features partition
    fcommitted: int = 0
    cuts: list = field(default_factory=list)  # the merge's forced releases since the checkpoint
    passivated: list = field(default_factory=list)  # streams left out of memory (the budget)
    end: int = 0  # offset of the manifest's record: the chunks it names lie below

    @property
    def fallback(self) -> str | None:
        """``"older"`` (an older checkpoint was used), ``"rebuild"`` (none) or ``None``."""
        if not self.refused:
            return None
        return "older" if self.manifest is not None else "rebuild"


def _committed_both(consumer, topic: str, features: str, partition: int, timeout_s: float):
    """Committed offsets of both partitions (``None``: none) and the instances' metadata."""
    tps = consumer.committed([TopicPartition(topic, partition),
                              TopicPartition(features, partition)], timeout=timeout_s)
    for tp in tps:
        if tp.error is not None:
            raise RuntimeError(f"cannot read the committed offset of {tp.topic}[{partition}]: "
                               f"{tp.error}")
    a, b = (tp.offset if tp.offset >= 0 else None for tp in tps)
    return a, b, tps[0].metadata


def stream_pipeline(s: str, env) -> object:
    """The pipeline of one stream's envelope, or a ``ValueError`` saying why it is unusable.

    A checkpoint is read from a topic: whatever is wrong in it (a missing field, a learner
    state that fails its checks, a learner this version does not know) refuses it.
    """
    try:
        pipeline = pipeline_from_state(env.state)
    except Exception as exc:  # noqa: BLE001 (any defect of the stored state refuses it)
        raise ValueError(f"stream {s!r}: {type(exc).__name__}: {exc}") from None
    if pipeline.stream != s:
        raise ValueError(f"stream {s!r}: the state is of stream {pipeline.stream!r}")
    return pipeline


def _admit(budget_bytes: int | None):
    """``accept`` for :func:`worker.checkpoint_store.read_usable`: every stream's pipeline is
    rebuilt (which checks its state); the most recently checkpointed ones stay in memory up to
    ``budget_bytes``, the others are passivated. Returns ``(resident, passivated)``."""
    def accept(_manifest, envelopes) -> tuple[OrderedDict, list]:
        resident: OrderedDict = OrderedDict()  # in the order of their chunks: oldest first
        passivated, held = [], 0
        for s, env in envelopes:
            pl = stream_pipeline(s, env)
            resident[s] = pl
            held += pl.nbytes
            while budget_bytes is not None and held > budget_bytes and resident:
                old, gone = resident.popitem(last=False)
                held -= gone.nbytes
                passivated.append(old)
        return resident, passivated
    return accept


def restore_partition(consumer, reader, group: str, topic: str, partition: int,
                      ckpt_topic: str, features: str, timeout_s: float = 60.0,
                      budget_bytes: int | None = None,
                      limits: ckpt.Limits | None = None) -> Restored:
    """Read the partition's checkpoint and decide the replay range (see module doc).

    Every stream's state is read and checked; those that do not fit ``budget_bytes`` (the
    least recently checkpointed) are passivated (:mod:`worker.residency`). ``limits`` bound
    what the checkpoint's records may claim (:class:`worker.checkpoint_store.Limits`).
    """
    t0 = time.monotonic()
    committed, fcommitted, metadata = _committed_both(consumer, topic, features, partition,
                                                      timeout_s)
    low, _high = reader.get_watermark_offsets(TopicPartition(topic, partition),
                                              timeout=timeout_s)
    loaded = ckpt.read_usable(reader, ckpt_topic, partition, group, topic, timeout_s,
                              max_offset=committed, accept=_admit(budget_bytes), limits=limits)
    manifest = loaded.manifest
    for why in loaded.refused:
        event(log, logging.WARNING, "checkpoint refused", topic=topic, partition=partition,
              reason=why)
    if manifest is not None and committed is None:
        event(log, logging.WARNING, "checkpoint without committed offset: resuming from it",
              topic=topic, partition=partition, checkpoint=manifest.offsets[topic])
    if manifest is not None:
        start = manifest.offsets[topic]
    else:
        start = low
        if loaded.refused:
            event(log, logging.WARNING, "no usable checkpoint: rebuilding the state from the "
                  "first available input", topic=topic, partition=partition, low=low,
                  committed=committed, refused=len(loaded.refused))
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
    fstart, cuts = _features_range(reader, manifest, features, partition, fcommitted,
                                   metadata, timeout_s)
    resident, passivated = loaded.value or ({}, [])
    return Restored(resident, manifest, start, committed, time.monotonic() - t0,
                    loaded.n_bytes, loaded.refused, fstart,
                    fstart if fcommitted is None else fcommitted, cuts, passivated, loaded.end)


def _features_range(reader, manifest, features: str, partition: int, fcommitted,
                    metadata, timeout_s: float) -> tuple[int, list]:
    """Where the features partition restarts, and the cuts its merge replays with."""
    if manifest is not None and features in manifest.offsets:
        fstart = manifest.offsets[features]
    else:  # no checkpoint, or one written before the features topic was read
        fstart = reader.get_watermark_offsets(TopicPartition(features, partition),
                                              timeout=timeout_s)[0]
        if manifest is not None and fcommitted is not None:
            fstart = fcommitted
    ck, cuts = decode_cuts(metadata)
    here = (manifest.offsets[manifest.topics[0]], fstart) if manifest is not None else None
    if cuts and ck != here:
        event(log, logging.WARNING, "the merge's cuts were recorded after another checkpoint: "
              "the replayed order of instances and features may differ from the first run",
              partition=partition, cuts_after=ck, checkpoint=here)
    return fstart, cuts
