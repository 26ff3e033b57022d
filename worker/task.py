"""One assigned input partition and everything it does between two polls.

Partition *p* of the instances topic and partition *p* of the features topic are one task
(co-partitioned and merged in timestamp order, :mod:`worker.merge`). A
:class:`PartitionTask` holds the task's stream pipelines, positions and last checkpoint,
and does what happens to one partition:

* :meth:`~PartitionTask.restore`: from its last checkpoint, positioned to replay up to the
  committed offsets (:mod:`worker.recovery`); :meth:`~PartitionTask.release_state` drops it
  (a rewind, a failed restore on demand);
* :meth:`~PartitionTask.push` and :meth:`~PartitionTask.release`: consumed records into the
  merge, and out in merged order, with backpressure on the topic that runs ahead;
* :meth:`~PartitionTask.process`: the one per-partition step (decode, learn, encode:
  :class:`worker.step.StreamStep`), shared with ``streamforest evaluate``;
* :meth:`~PartitionTask.offsets` and :meth:`~PartitionTask.committed_through`: what a
  transaction commits for it, and what it committed;
* :meth:`~PartitionTask.checkpoint`: its changed streams written in the open transaction.

It never calls back into the worker: what the worker must act on comes back as return
values (:class:`Processed`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial

from confluent_kafka import Message, TopicPartition

from schemas.checkpoint import StreamCheckpoint

from . import checkpoint_store as ckpt
from .logs import event
from .merge import MAX_CUTS_CHARS, A, B, CoMerge, Released, encode_cuts
from .recovery import Restored, restore_partition
from .residency import StreamTable
from .restore_on_demand import RestoreOnDemandFailed

_m_key = Message.key

log = logging.getLogger("streamforest.worker")


@dataclass
class Processed:
    """What :meth:`PartitionTask.process` did, for the worker to act on.

    Attributes
    ----------
    stepped : worker.step.Stepped or None
        The decoded streams and what their pipelines returned (``None`` when the partition
        must be restored again).
    restore_again : str or None
        Why the partition's passivated streams could not be read back: its state was
        dropped and it must be restored from its checkpoints again.
    replayed_s : float or None
        Seconds the restore and its replay took, when this step ended the replay.
    """

    stepped: object = None
    restore_again: str | None = None
    replayed_s: float | None = None


class PartitionTask:
    """One assigned input partition (see the module doc).

    Parameters
    ----------
    group : str
        Consumer group (named in checkpoints).
    topic, features : str
        The instances and the features topic.
    partition : int
        The partition of both.
    load : callable, optional
        ``load(task, streams)`` restores passivated streams from the partition's checkpoint
        (:meth:`worker.restore_on_demand.OnDemand.load`); without it, nothing may be
        passivated.
    """

    def __init__(self, group: str, topic: str, partition: int, features: str, load=None):
        self.group = group
        self.topic = topic
        self.features = features
        self.partition = partition
        self.ready = False
        # stream -> worker.pipeline.Pipeline, resident or passivated
        self.pipelines = StreamTable(partial(load or _nothing_passivated, self))
        self.dirty: set[str] = set()
        self.position = 0  # next instances offset to process
        self.committed = 0  # offsets below it were committed (and are replayed silently)
        self.fposition = 0  # the same two of the features partition
        self.fcommitted = 0
        self.merge = CoMerge(0, 0)  # made again by every restore
        self.held: set[int] = set()  # sides paused while their records wait in the merge
        self.manifest = ckpt.empty_manifest(group, topic, partition, 0, features)
        # where the manifest's chunks end on the checkpoints topic (worker.checkpoint_store.Written)
        self.manifest_end = 0
        self.since_ckpt = 0
        self.last_ckpt = time.monotonic()
        self.restore_t0: float | None = None  # set while replaying after a restore

    @property
    def replaying(self) -> bool:
        return self.position < self.committed or self.fposition < self.fcommitted

    @property
    def waiting(self) -> bool:
        """Records are buffered for the merge (a later step may release them)."""
        return bool(self.merge.queued(A) or self.merge.queued(B))

    @property
    def moved(self) -> bool:
        """Ready, and past what was committed (a transaction has offsets to send)."""
        return self.ready and (self.position > self.committed or self.fposition > self.fcommitted)

    def topic_partitions(self) -> list[TopicPartition]:
        """The instances and the features partition."""
        return [TopicPartition(self.topic, self.partition),
                TopicPartition(self.features, self.partition)]

    # -- restore and release ------------------------------------------------------------------

    def release_state(self) -> None:
        """Drop the in-memory state: the task is restored from its checkpoints again."""
        self.ready = False
        self.pipelines.clear()
        self.dirty.clear()

    def restore(self, consumer, reader, checkpoints: str, budget_bytes: int, limits,
                max_idle_s: float) -> Restored:
        """Restore from the last checkpoint and seek both topics to replay from it.

        ``budget_bytes`` bounds what the restore keeps resident (the rest stays
        passivated). Raises what the reads raise (the caller retries).
        """
        p = self.partition
        r = restore_partition(consumer, reader, self.group, self.topic, p, checkpoints,
                              self.features, budget_bytes=budget_bytes, limits=limits)
        self.pipelines.clear()
        for s, pl in r.pipelines.items():
            self.pipelines[s] = pl
        self.pipelines.mark_passivated(r.passivated)
        self.dirty.clear()
        self.position, self.committed = r.start, r.committed
        self.fposition, self.fcommitted = r.fstart, r.fcommitted
        self.merge = CoMerge(r.start, r.fstart, r.committed, r.fcommitted, r.cuts, max_idle_s)
        self.held = set()
        self.manifest = r.manifest or ckpt.empty_manifest(
            self.group, self.topic, p, r.start, self.features, r.fstart)
        self.manifest_end = r.end
        self.since_ckpt = 0
        self.last_ckpt = time.monotonic()
        self.restore_t0 = time.monotonic() - r.seconds
        _seek(consumer, TopicPartition(self.topic, p, r.start))
        _seek(consumer, TopicPartition(self.features, p, r.fstart))
        self.ready = True
        return r

    def end_replay(self) -> float | None:
        """Seconds since the restore began, once the replay caught up (else ``None``)."""
        if self.restore_t0 is None or self.replaying:
            return None
        seconds = time.monotonic() - self.restore_t0
        self.restore_t0 = None
        return seconds

    # -- the merge ------------------------------------------------------------------------------

    def push(self, records) -> None:
        """Consumed ``[instances Records or None, features Records or None]`` into the merge."""
        ra, rb = records
        if ra is not None:
            self.merge.push_arrays(A, ra.msgs, ra.ts, ra.offsets)
        if rb is not None:
            self.merge.push_arrays(B, rb.msgs, rb.ts, rb.offsets)

    def release(self, consumer, now: float, limit: int) -> Released:
        """What the merge order lets through now (at most about ``limit`` records); the topic
        whose records pile up waiting for the other is paused (as Kafka Streams'
        ``buffered.records.per.partition``), and resumed once they drain."""
        rel = self.merge.release(now, partial(self._caught_up, consumer), limit)
        high = 4 * limit
        for side, topic in ((A, self.topic), (B, self.features)):
            queued = self.merge.queued(side)
            tp = [TopicPartition(topic, self.partition)]
            if side not in self.held and queued > high:
                consumer.pause(tp)
                self.held.add(side)
            elif side in self.held and queued <= high // 4:
                consumer.resume(tp)
                self.held.discard(side)
        return rel

    def _caught_up(self, consumer, side: int) -> bool:
        """Whether the topic of ``side`` has nothing more to deliver yet: its fetch position
        reached its end offset (the last stable one, read_committed)."""
        tp = TopicPartition(self.topic if side == A else self.features, self.partition)
        try:
            high = consumer.get_watermark_offsets(tp, cached=True)[1]
            fetched = consumer.position([tp])[0].offset
        except Exception:  # noqa: BLE001 (unknown yet: the merge waits within its bound)
            return False
        here = max(fetched, self.merge.position[side])
        return high >= 0 and here >= high

    # -- the step ---------------------------------------------------------------------------------

    def process(self, rel: Released, step, outbox, tick: int) -> Processed:
        """Released records through the partition's stream pipelines (test-then-train).

        Passivated streams the records are keyed by come back first; when they cannot, the
        state is dropped and :attr:`Processed.restore_again` says why. Output records and
        dead letters go to ``outbox`` (:class:`worker.output.Outbox`).
        """
        why = self._prefetch(rel)
        if why is not None:
            self.release_state()
            return Processed(restore_again=why)
        stepped = step.run(self, rel, outbox)
        self.pipelines.touch(stepped.touched(), tick)
        self.since_ckpt += stepped.live_instances(self.committed, rel)
        self.position, self.fposition = self.merge.position
        return Processed(stepped, replayed_s=self.end_replay())

    def _prefetch(self, rel: Released) -> str | None:
        """Restore, in one read, the passivated streams the released records are keyed by;
        why not, when the read failed."""
        if not self.pipelines.passivated:
            return None
        keys = dict.fromkeys(map(_m_key, rel.a + [m for m, _n in rel.b]))
        try:
            self.pipelines.prefetch(k.decode("utf-8", "replace") for k in keys if k is not None)
        except RestoreOnDemandFailed as exc:
            return str(exc)
        return None

    # -- commits and checkpoints ---------------------------------------------------------------

    def offsets(self) -> list[TopicPartition]:
        """Offsets to commit: both topics; the instances partition carries the merge's cuts
        since the last checkpoint (:mod:`worker.merge`). Never behind the committed ones
        (during a replay the position is below them)."""
        ck = self.manifest.offsets
        meta = encode_cuts((ck.get(self.topic, 0), ck.get(self.features, 0)), self.merge.cuts)
        return [TopicPartition(self.topic, self.partition, max(self.position, self.committed),
                               metadata=meta),
                TopicPartition(self.features, self.partition,
                               max(self.fposition, self.fcommitted))]

    def committed_through(self, tp: TopicPartition) -> None:
        """A transaction committed ``tp`` (one of this task's two partitions)."""
        if tp.topic == self.topic:
            self.committed = tp.offset
        else:
            self.fcommitted = tp.offset

    def cuts_too_long(self) -> bool:
        """The merge's cuts would not fit the offset metadata: a checkpoint drops them."""
        return len(encode_cuts((0, 0), self.merge.cuts)) > MAX_CUTS_CHARS

    def checkpoint(self, writer, level: int, metrics) -> int:
        """Write the changed streams (transaction open); returns the bytes written."""
        t0 = time.perf_counter()
        ts = int(time.time() * 1000)
        offsets = {self.topic: self.position, self.features: self.fposition}
        topics = [self.topic, self.features]
        streams = [s for s in sorted(self.dirty) if s in self.pipelines]
        blobs = (  # each encoded as it is produced (see CheckpointWriter.write)
            (s, ckpt.encode_blob(StreamCheckpoint(
                group=self.group, topics=topics, partition=self.partition, stream=s,
                config=self.pipelines[s].cfg.as_dict(), offsets=offsets,
                state=self.pipelines[s].to_state(), ts=ts), level))
            for s in streams)
        base = self.manifest.model_copy(update={"offsets": offsets, "topics": topics, "ts": ts})
        self.manifest, n_bytes, self.manifest_end = writer.write(base, blobs, self.manifest_end)
        self.merge.checkpointed()
        self.dirty.clear()
        self.since_ckpt = 0
        self.last_ckpt = time.monotonic()
        metrics.ckpt_seconds.observe(time.perf_counter() - t0)
        metrics.ckpt_bytes.labels(partition=self.partition).set(n_bytes)
        event(log, logging.DEBUG, "checkpoint written", partition=self.partition,
              offset=self.position, streams=len(streams), bytes=n_bytes)
        return n_bytes


def _nothing_passivated(task, streams) -> dict:
    raise RuntimeError(f"partition {task.partition} cannot restore passivated streams {streams}")


def _seek(consumer, tp: TopicPartition) -> None:
    """Position a (paused) assigned partition at ``tp.offset`` and resume it."""
    try:
        consumer.seek(tp)
    except Exception:  # noqa: BLE001 (not fetching yet: re-assign at the offset instead)
        consumer.incremental_unassign([TopicPartition(tp.topic, tp.partition)])
        consumer.incremental_assign([tp])
    consumer.resume([TopicPartition(tp.topic, tp.partition)])
