"""The worker: composition root, the consume -> decode -> learn -> produce loop, rebalances.

One :class:`Worker` is one member of the consumer group. Per consumed batch (numbers match
the comments in :meth:`Worker._process_batch`):

1. group the messages by partition, drop what belongs to partitions that are not restored
   yet (they are re-read after the restore seeks them); partition *p* of the instances
   topic and partition *p* of the features topic (assigned with it by hand) are one task,
   whose records the merge releases in timestamp order (:mod:`worker.merge`);
2. decode every message (:class:`worker.batch.BatchDecoder`); invalid ones become
   dead letters; the rest are grouped by stream (the message key) in partition order;
3. run each stream's pipeline over its rows (test-then-train, see :mod:`worker.pipeline`),
   streams of features with their arrivals (:mod:`worker.feature_streams`); rows below a
   partition's replay mark only update state;
4. in one transaction: produce predictions, alerts, rankings and dead letters, the due
   checkpoints, send the consumed offsets of both topics (KIP-447 group metadata; the
   instances offset carries the merge's cuts) and commit. The two
   round trips that end the transaction run on a commit thread while the next batch is
   consumed and computed; every later use of the producer, restore, rebalance callback and
   shutdown waits for them first, and a failed commit rewinds exactly as before (the state
   computed meanwhile is dropped with the rest).

Abortable errors abort the transaction and rewind: every assigned partition is restored again
from its last checkpoint and replayed up to the committed offsets, so in-memory state never
runs ahead of what was committed. Fatal producer errors do the same after making a new
producer (a producer fenced again and again means another process shares the transactional
id: the worker exits). A passivated stream that cannot be restored on demand
(:mod:`worker.residency`) rewinds its partition alone, before the batch's transaction begins:
the partition is restored as at start, with its fallbacks (:mod:`worker.recovery`).
Rebalances (cooperative-sticky): new partitions are paused in the callback and restored by
the loop; revoked ones get a bounded final checkpoint and are dropped; lost ones are dropped
without committing. Every transaction, checkpoint-only ones included, sends the consumed
offsets with the group metadata, so a zombie member's writes are fenced by the group
generation (KIP-447).

Anything else that goes wrong (a bug, memory, a fatal consumer error such as a deleted input
topic or a failed authorization) ends the worker: the open transaction is aborted, no
checkpoint is written, and :func:`run` returns a non-zero status for the orchestrator to
restart the member, which restores from the last committed checkpoint. Before joining, the
worker checks its brokers and topics (:mod:`worker.preflight`).
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import time
from collections import deque
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from schemas.checkpoint import StreamCheckpoint

from . import __version__, consume_errors
from . import checkpoint as ckpt
from .batch import BatchDecoder, Caps, OutputEncoder
from .committer import Committer
from .faults import Faults
from .feature_streams import FeatureStreams
from .kafka_io import (
    AbortableError,
    AtLeastOnceProducer,
    FatalProducerError,
    TransactionalProducer,
    make_consumer,
    make_reader,
)
from .learn import learn_streams
from .logs import event
from .merge import MAX_CUTS_CHARS, A, B, CoMerge, encode_cuts
from .metrics import MetricsServer, WorkerMetrics, serve_metrics
from .partitions import PartitionTask, split_batch
from .preflight import BrokersUnreachable, TopicProblem, preflight
from .recovery import restore_partition, stream_pipeline
from .residency import Budget
from .settings import stream_profiles
from .watchdog import Watchdog

_m_key = Message.key

log = logging.getLogger("streamforest.worker")

#: a producer fenced this often within this many seconds shares its transactional id
_FENCING_LOOP = (3, 300.0)


class WorkerFailed(RuntimeError):
    """The worker cannot go on (see the module doc); the message says why."""


class RestoreOnDemandFailed(AbortableError):
    """Passivated streams could not be read back from their partition's checkpoint.

    :meth:`Worker._prefetch` restores the partition again (with the fallback of a restore
    at start); met anywhere else, it aborts the batch and rewinds every partition.
    """


def _send_and_commit(producer, offsets, metadata) -> None:
    """End a batch's transaction (runs on the commit thread)."""
    producer.send_offsets(offsets, metadata)
    producer.commit()


class Worker:
    """A consumer-group member running one pipeline per stream (see module doc).

    Parameters
    ----------
    settings : worker.settings.Settings
        Validated settings.
    faults : Faults, optional
        Test-only fault injection.
    """

    def __init__(self, settings, faults: Faults | None = None):
        self.settings = settings
        self.topics = settings.topics
        self.profiles = stream_profiles(settings)
        self.faults = faults or Faults()
        self.metrics = WorkerMetrics()
        self.tasks: dict[int, PartitionTask] = {}
        self.to_restore: set[int] = set()
        self.stopping = False
        self.joined = False
        self.n_transactions = 0
        self.member = settings.member_name
        self.group = settings.kafka.group_id
        self.transactional_id = settings.transactional_id
        self.consumer = None
        self.producer: TransactionalProducer | None = None
        self.reader = None
        self.server: MetricsServer | None = None
        self.writer: ckpt.CheckpointWriter | None = None
        self._last_lag = 0.0
        self.budget = Budget(int(settings.worker.state_budget_mb * 1024 * 1024))
        self.limits = ckpt.Limits.from_settings(settings)  # what checkpoint records may claim
        self._restore_timeout_s = 60.0
        self.decoder = BatchDecoder(self.profiles, Caps.from_settings(settings), __version__,
                                    self._streams_changed)
        self.encoder = OutputEncoder(self.topics, self.metrics, __version__,
                                     output=settings.output)
        self.features = FeatureStreams(self.decoder, self.encoder, self.metrics)
        self._executor = None  # the commit thread (see _process_batch)
        self._pending = None  # (future, offsets, t0) of the commit in flight
        self.failed = False  # an unexpected error: abort, no checkpoint, non-zero exit
        self.n_batches = 0
        self._fenced: deque[float] = deque(maxlen=_FENCING_LOOP[0])
        self._aborts_in_row = 0
        self._unknown_since: float | None = None
        self._last_gauges = 0.0
        self.watchdog = Watchdog(settings.worker.shutdown_timeout_s)
        # a commit is two transaction calls, each bounded by shutdown_timeout_s, plus retries
        self._commit_bound = 3 * settings.worker.shutdown_timeout_s
        self._batch_bytes: int | None = None  # below the output topics' record limit
        # seconds spent waiting for input: the merge's idle bound counts these only, so time
        # spent computing a batch never makes a topic look idle (worker/merge.py)
        self._input_clock = 0.0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        self.server = serve_metrics(self.metrics, s.worker)
        checked = preflight(s, stopping=lambda: self.stopping)
        self.encoder.set_limits(checked.max_bytes)
        self._batch_bytes = min(checked.max_bytes.values()) - self.encoder.RECORD_OVERHEAD
        self._new_producer()
        self.reader = make_reader(s)
        self.consumer = make_consumer(s)
        # the group assigns instances partitions; each brings the same partition of the
        # features topic, assigned here by hand (no assignor co-partitions two topics)
        self.consumer.subscribe([self.topics.instances], on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)
        event(log, logging.INFO, "worker started", member=self.member,
              transactional_id=self.transactional_id, group=s.kafka.group_id,
              topic=self.topics.instances, features=self.topics.features, version=__version__)

    def _new_producer(self) -> None:
        if self.producer is not None:
            try:
                self.producer.close()
            except Exception:  # noqa: BLE001 (the old producer is being replaced anyway)
                pass
        if self.settings.worker.exactly_once:
            self.producer = TransactionalProducer(self.settings, self.transactional_id,
                                                  timeout_s=self.settings.worker.shutdown_timeout_s,
                                                  batch_bytes=self._batch_bytes)
        else:
            self.producer = AtLeastOnceProducer(self.settings, lambda: self.consumer,
                                                batch_bytes=self._batch_bytes)
        self.writer = ckpt.CheckpointWriter(
            self.producer, self.topics.checkpoints, self.settings.checkpoint.max_message_bytes,
            faults=self.faults)

    def request_stop(self, *_args) -> None:
        """Signal handler: finish the current batch, then shut down (within the bound)."""
        self.stopping = True
        self.watchdog.arm("shutdown")

    def run(self, until=None) -> None:
        """Consume until :meth:`request_stop` (or ``until()`` returns true), then shut down.

        An exception that is not a handled Kafka error marks the worker failed: the shutdown
        then aborts the open transaction and writes no checkpoint, and the exception goes on
        to the caller.
        """
        try:
            self.start()
            while not self.stopping and not (until is not None and until()):
                self.step()
        except BaseException:
            self.failed = True
            raise
        finally:
            self.shutdown()

    def step(self) -> int:
        """One loop turn: restore, consume, process one batch. Returns messages consumed."""
        w = self.settings.worker
        self.metrics.beat()
        if self.to_restore:
            self.settle()  # restores read the committed offsets
            self._restore_pending()
        t = time.monotonic()
        msgs = self.consumer.consume(w.consume_batch, w.consume_timeout_s)
        self._input_clock += time.monotonic() - t
        self.metrics.beat()
        if self.to_restore:  # assigned during consume: restore before processing
            self.settle()
            self._restore_pending()
        if msgs or any(t.ready and t.waiting for t in self.tasks.values()):
            self._guarded(self._process_batch, msgs)
        else:
            self._guarded(self._idle_checkpoints)
        self._check_input_topic()
        now = time.monotonic()
        if now - self._last_gauges > 1.0:
            self._last_gauges = now
            self._update_ckpt_age(now)
            self._streams_changed()  # state bytes grow as streams learn
        if now - self._last_lag > 5.0:
            self._last_lag = now
            self._update_lag()
        self.metrics.ready = self.joined and not self.to_restore
        return len(msgs)

    def shutdown(self) -> None:
        """Final checkpoint and commit, leave the group, close the clients.

        After a failure: abort the open transaction, no checkpoint (see :meth:`run`).
        """
        self.watchdog.arm("shutdown")
        event(log, logging.INFO, "worker stopping", member=self.member, failed=self.failed)
        try:
            if self.failed:
                self._abandon()
            elif self.consumer is not None and self.producer is not None:
                self._guarded(self._checkpoint_txn, list(self.tasks), True)
        finally:
            # each client is closed even if another fails (and a failure here never hides
            # the error that ended the worker)
            for what, close in (("consumer", self.consumer and self.consumer.close),
                                ("producer", self.producer and self.producer.close),
                                ("reader", self.reader and self.reader.close),
                                ("metrics server", self.server and self.server.stop),
                                ("commit thread", self._executor and self._executor.shutdown)):
                if close:
                    try:
                        close()  # the consumer revokes (checkpoint is then a no-op) and leaves
                    except Exception as exc:  # noqa: BLE001 (close every resource even when one fails)
                        event(log, logging.WARNING, f"{what} close failed", error=str(exc))
            self._executor = None
            self.watchdog.disarm()
        event(log, logging.INFO, "worker stopped", member=self.member)

    def _abandon(self) -> None:
        """After a failure: let a commit in flight end, abort the open transaction."""
        self._drain()
        if self.producer is not None:
            try:
                self.producer.abort()
            except Exception as exc:  # noqa: BLE001 (the broker aborts it at its timeout)
                event(log, logging.WARNING, "abort failed", error=str(exc))

    # -- error handling ---------------------------------------------------------------------

    def _guarded(self, fn, *args):
        """Run a transactional step; on failure abort (or recreate) and rewind."""
        try:
            return fn(*args)
        except AbortableError as exc:
            self._drain()
            event(log, logging.WARNING, "transaction aborted, rewinding", error=str(exc))
            self._aborted()
            try:
                self.producer.abort()
            except FatalProducerError:
                self._rebuild_producer()
            self._rewind()
        except FatalProducerError as exc:
            self._drain()
            event(log, logging.ERROR, "producer failed, recreating it", error=str(exc),
                  fenced=exc.fenced)
            self._aborted()
            if exc.fenced:
                self._check_fencing_loop()
            self._rebuild_producer()
            self._rewind()

    def _aborted(self) -> None:
        self.metrics.aborts.inc()
        self._aborts_in_row += 1
        self.metrics.consecutive_aborts.set(self._aborts_in_row)

    def _rebuild_producer(self) -> None:
        """A new producer; retried while the brokers recover (within the startup bound)."""
        self.metrics.producer_rebuilds.inc()
        deadline = time.monotonic() + self.settings.worker.startup_timeout_s
        while True:
            try:
                self._new_producer()
                return
            except (AbortableError, FatalProducerError) as exc:
                if time.monotonic() > deadline or self.stopping:
                    raise WorkerFailed(f"no producer could be made: {exc}") from exc
                event(log, logging.WARNING, "making a new producer failed, retrying",
                      error=str(exc))
                self.producer = None
                time.sleep(1.0)

    def _check_fencing_loop(self) -> None:
        """Fenced again and again: another process uses our transactional id (exit)."""
        now = time.monotonic()
        self._fenced.append(now)
        n, window = _FENCING_LOOP
        if len(self._fenced) == n and now - self._fenced[0] <= window:
            raise WorkerFailed(
                f"the producer was fenced {n} times within {window:g} s: another process uses "
                f"transactional.id {self.transactional_id!r}; give every member its own "
                "STREAMFOREST_WORKER__MEMBER_NAME (or leave it unset) and "
                "STREAMFOREST_WORKER__TRANSACTIONAL_ID")

    def _drain(self) -> None:
        """Before an abort: let a commit in flight end (its outcome no longer matters)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                self._wait_commit(pending[0])
            except Exception:  # noqa: BLE001 (everything is rewound anyway)
                pass

    def _wait_commit(self, future) -> None:
        """The commit's outcome, within a bound.

        librdkafka's transaction calls can block past their own timeouts while the
        coordinator is away (seen with a broker killed and restarted mid-commit). Past the
        bound the producer is given up: a new one with the same transactional id fences it
        (its transaction is aborted by the coordinator), and the partitions are rewound.
        """
        try:
            future.result(timeout=self._commit_bound)
        except FutureTimeout:
            self._give_up_producer()
            raise FatalProducerError(f"the transaction commit did not end within "
                                     f"{self._commit_bound:g} s") from None

    def _give_up_producer(self) -> None:
        """Leave a producer stuck in a call to its thread; the next one fences it."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
        self.producer = None  # not closed: closing would block on the same call

    def _rewind(self) -> None:
        """Drop in-memory state of every partition and restore it from checkpoint + replay."""
        for p, task in self.tasks.items():
            task.ready = False
            task.pipelines.clear()
            task.dirty.clear()
            self.to_restore.add(p)
        tps = self._both(self.tasks)
        if tps:
            self.consumer.pause(tps)

    def _both(self, parts) -> list[TopicPartition]:
        """The instances and the features partition of each of ``parts``."""
        t = self.topics
        return [TopicPartition(topic, p) for p in parts for topic in (t.instances, t.features)]

    # -- rebalance callbacks (run inside consume) -------------------------------------------

    def _on_assign(self, consumer, partitions) -> None:
        self.joined = True
        self.metrics.rebalances.labels(event="assign").inc()
        both = self._both(tp.partition for tp in partitions)
        consumer.incremental_assign(both)
        if both:
            consumer.pause(both)  # restored by the loop, outside this callback
        for tp in partitions:
            self.tasks[tp.partition] = PartitionTask(self.group, tp.topic, tp.partition,
                                                     self.topics.features, self._load_streams)
            self.to_restore.add(tp.partition)
        self.metrics.assigned.set(len(self.tasks))
        event(log, logging.INFO, "partitions assigned",
              partitions=[tp.partition for tp in partitions])

    def _on_revoke(self, consumer, partitions) -> None:
        self.metrics.rebalances.labels(event="revoke").inc()
        parts = [tp.partition for tp in partitions if tp.partition in self.tasks]
        # the last batch is committed (once the commit in flight ends); a final checkpoint
        # saves the new owner a replay. After a failure nothing is committed any more.
        self.watchdog.arm("partition revocation")
        try:
            if self.producer is not None and not self.failed:
                self.settle()
                if parts:
                    self._guarded(self._checkpoint_txn, parts, True)
        finally:
            if not self.stopping:
                self.watchdog.disarm()
        self._drop(parts)
        consumer.incremental_unassign(self._both(tp.partition for tp in partitions))
        event(log, logging.INFO, "partitions revoked", partitions=parts)

    def _on_lost(self, consumer, partitions) -> None:
        self.metrics.rebalances.labels(event="lost").inc()
        self.joined = False  # out of the group until the next assignment
        self.metrics.ready = False
        parts = [tp.partition for tp in partitions]
        if self.producer is not None:
            self.settle()  # the commit in flight ends (or fails and rewinds) first
        self._drop(parts)  # no commit: another member owns them now
        consumer.incremental_unassign(self._both(parts))
        event(log, logging.WARNING, "partitions lost", partitions=parts)

    def _drop(self, parts) -> None:
        for p in parts:
            task = self.tasks.pop(p, None)
            self.to_restore.discard(p)
            if task is not None:
                self.metrics.forget_partition(p)
        self.metrics.assigned.set(len(self.tasks))
        self.metrics.streams.set(self._n_streams())

    def _n_streams(self) -> int:
        return sum(t.pipelines.n_resident for t in self.tasks.values())

    def _streams_changed(self) -> None:
        tasks = self.tasks.values()
        self.metrics.streams.set(self._n_streams())
        self.metrics.streams_passivated.set(sum(len(t.pipelines.passivated) for t in tasks))
        self.metrics.state_bytes.set(self.budget.held(self.tasks))

    # -- the state budget (worker/residency.py) ---------------------------------------------------

    def _load_streams(self, task: PartitionTask, streams: list[str]) -> dict:
        """Passivated streams' pipelines, from the checkpoint the partition's manifest names.

        Their envelopes may have been written in the transaction of the previous batch: its
        commit ends first, and the read waits until the partition's last stable offset
        reaches them (a read_committed reader sees a committed transaction only once its
        markers are written, which happens after the commit returns). A checkpoint that
        cannot be read or restored raises :class:`RestoreOnDemandFailed`.
        """
        self._settle()
        try:
            envelopes = ckpt.read_streams(self.reader, self.topics.checkpoints, task.partition,
                                          task.manifest, streams, self._restore_timeout_s,
                                          task.manifest_end, self.limits)
            pipelines = {s: stream_pipeline(s, env) for s, env in envelopes.items()}
        except (RuntimeError, ValueError, TimeoutError, MemoryError, KafkaException) as exc:
            # CheckpointError is a RuntimeError; so are the timeouts and read errors
            raise RestoreOnDemandFailed(f"{type(exc).__name__}: {exc}") from exc
        self.metrics.restored_on_demand.inc(len(envelopes))
        event(log, logging.DEBUG, "streams restored", partition=task.partition,
              streams=len(envelopes))
        return pipelines

    def _prefetch(self, task: PartitionTask, rel) -> None:
        """Restore, in one read, the passivated streams the released records are keyed by.

        When the read fails the partition is restored again from its checkpoints, as at start
        (an older checkpoint, else a rebuild from the input), and its records are read again
        after that: ``task.ready`` is then false.
        """
        if not task.pipelines.passivated:
            return
        keys = dict.fromkeys(map(_m_key, rel.a + rel.b))
        try:
            task.pipelines.prefetch(k.decode("utf-8", "replace") for k in keys if k is not None)
        except RestoreOnDemandFailed as exc:
            self._restore_again(task, str(exc))

    def _restore_again(self, task: PartitionTask, why: str) -> None:
        """Drop a partition's state and restore it from its checkpoints in the next step.

        The batches before were committed (a restore on demand waits for that), so the
        restore replays silently what the dropped state had learned since its checkpoint.
        """
        event(log, logging.WARNING, "restore on demand failed: restoring the partition from "
              "its checkpoints again", partition=task.partition, error=why)
        self.metrics.restore_failures.inc()
        task.ready = False
        task.pipelines.clear()
        task.dirty.clear()
        self.to_restore.add(task.partition)
        self.consumer.pause(self._both([task.partition]))

    def _passivate(self) -> None:
        """Within the budget's low-water mark again (after the checkpoints of a batch)."""
        dropped = self.budget.passivate(self.tasks)
        if dropped:
            self.metrics.passivations.inc(len(dropped))
            event(log, logging.INFO, "streams passivated", streams=len(dropped),
                  resident=self._n_streams(), bytes=self.budget.held(self.tasks))
        self._streams_changed()

    # -- restore ------------------------------------------------------------------------------

    def _restore_pending(self) -> None:
        for p in sorted(self.to_restore):
            task = self.tasks.get(p)
            if task is None:
                self.to_restore.discard(p)
                continue
            try:
                r = restore_partition(self.consumer, self.reader, self.group, task.topic, p,
                                      self.topics.checkpoints, task.features,
                                      budget_bytes=self.budget.left(self.tasks, p),
                                      limits=self.limits)
            except Exception as exc:  # noqa: BLE001 (broker trouble: stay paused, retry)
                event(log, logging.ERROR, "restore failed, will retry", partition=p,
                      error=f"{type(exc).__name__}: {exc}")
                self.metrics.restore_failures.inc()
                err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
                if isinstance(err, KafkaError) and err.code() in consume_errors.UNKNOWN_TOPIC:
                    self._unknown_since = self._unknown_since or time.monotonic()
                time.sleep(1.0)
                continue
            if r.refused:
                self.metrics.checkpoints_refused.inc(len(r.refused))
                self.metrics.restore_fallbacks.labels(kind=r.fallback).inc()
            task.pipelines.clear()
            for s, pl in r.pipelines.items():
                task.pipelines[s] = pl
            task.pipelines.mark_passivated(r.passivated)
            task.dirty.clear()
            task.position, task.committed = r.start, r.committed
            task.fposition, task.fcommitted = r.fstart, r.fcommitted
            task.merge = CoMerge(r.start, r.fstart, r.committed, r.fcommitted, r.cuts,
                                 self.settings.worker.max_task_idle_ms / 1000.0)
            task.held = set()
            task.manifest = r.manifest or ckpt.empty_manifest(
                self.group, task.topic, p, r.start, task.features, r.fstart)
            task.manifest_end = r.end
            task.since_ckpt = 0
            task.last_ckpt = time.monotonic()
            task.restore_t0 = time.monotonic() - r.seconds
            self._seek(TopicPartition(task.topic, p, r.start))
            self._seek(TopicPartition(task.features, p, r.fstart))
            task.ready = True
            if not task.replaying:
                self._replayed(task)
            self.to_restore.discard(p)
            self.metrics.restore_seconds.observe(r.seconds)
            event(log, logging.INFO, "partition restored", partition=p, streams=len(r.pipelines),
                  passivated=len(r.passivated),
                  checkpoint_offset=r.manifest.offsets[task.topic] if r.manifest else None,
                  committed=r.committed, start=r.start, features_start=r.fstart,
                  features_committed=r.fcommitted, cuts=len(r.cuts), bytes=r.n_bytes,
                  seconds=round(r.seconds, 3))
        self._streams_changed()

    def _seek(self, tp: TopicPartition) -> None:
        """Position a (paused) assigned partition at ``tp.offset`` and resume it."""
        try:
            self.consumer.seek(tp)
        except Exception:  # noqa: BLE001 (not fetching yet: re-assign at the offset instead)
            self.consumer.incremental_unassign([TopicPartition(tp.topic, tp.partition)])
            self.consumer.incremental_assign([tp])
        self.consumer.resume([TopicPartition(tp.topic, tp.partition)])

    # -- the batch ------------------------------------------------------------------------------

    def _process_batch(self, msgs) -> None:
        t0 = time.perf_counter()
        w = self.settings.worker
        tasks = self.tasks
        # 1. split by partition, queue for the merge of instances and features, release what
        #    the merge order allows (worker/merge.py)
        released = self._release(msgs)
        if not released:
            return
        producer = self.producer
        n_live = n_replay = 0
        dead = []
        outputs: list[tuple[str, bytes, list[bytes]]] = []  # (topic, key, values)
        for p, rel in released.items():
            task = tasks[p]
            # 2. decode, group by stream (passivated streams come back first)
            self._prefetch(task, rel)
            if not task.ready:  # they could not: the partition is restored again
                continue
            streams = (self.decoder.decode(task, rel.a, rel.a_offsets, dead, w.max_message_bytes)
                       if rel.a else {})
            arrivals = (self.decoder.decode_arrivals(task, rel.b, dead, w.max_message_bytes)
                        if rel.b else [])
            # 3. learn (streams of features with their arrivals, in merged order)
            learned = learn_streams(task, streams)
            for stream, pl, sr, lo, res in learned.results:
                self.encoder.encode(task, stream, pl, res, sr, lo, outputs, dead)
            n_live += learned.n_live
            n_replay += learned.n_replay
            self.features.process(task, streams, arrivals, rel.a_offsets, outputs, dead)
            task.pipelines.touch(list(streams) + [a.stream for a in arrivals], self.n_batches)
            n_a = rel.a_offsets.shape[0]
            live_a = n_a if not n_a or rel.a_offsets[0] >= task.committed else int(
                np.count_nonzero(rel.a_offsets >= task.committed))
            # checkpoints are due by instances: an InstanceBatch counts its rows
            live_a += self.decoder.batches.extra_live_rows if rel.a else 0
            task.since_ckpt += live_a + sum(1 for a in arrivals if a.live)
            task.position, task.fposition = task.merge.position
            if task.restore_t0 is not None and not task.replaying:
                self._replayed(task)
        self.metrics.replayed.inc(n_replay)
        self.metrics.instances_in.inc(n_live)
        # 4. one transaction: outputs, dead letters, checkpoints, offsets
        moved = [p for p in released if tasks[p].ready and (
            tasks[p].position > tasks[p].committed or tasks[p].fposition > tasks[p].fcommitted)]
        self.n_batches += 1
        self.faults.raise_if("raise_before_begin", self.n_batches)
        if not moved and not outputs and not dead:
            return  # pure replay: nothing to commit
        self._settle()  # the previous batch's commit (it ran while this batch was computed)
        producer.begin()
        producer.produce_many(outputs, self.encoder.headers)
        self.faults.raise_if("raise_after_begin", self.n_batches)
        for key, value, headers, reason in dead:
            producer.produce(self.topics.deadletter, value, key, headers=headers)
            self.metrics.deadletters.labels(reason=reason).inc()
        self._due_checkpoints(list(released))
        offsets = self._offsets(moved)  # after the checkpoints, which drop the cuts they cover
        n = self.n_transactions + 1
        self.faults.crash_if("crash_before_commit", n, producer.flush)
        metadata = self.consumer.consumer_group_metadata()
        if isinstance(producer, AtLeastOnceProducer):  # commits through the consumer: in line
            producer.send_offsets(offsets, metadata)
            producer.commit()
            self._committed(offsets, t0)
            return
        # the commit round trips (offsets to the coordinator, then the commit itself) overlap
        # the next consume and its computation; the next producer use waits for them
        # (:meth:`_settle`), and a failed commit rewinds to the committed state as before
        self._pending = (self._committer().submit(_send_and_commit, producer, offsets, metadata),
                         offsets, t0)

    def _release(self, msgs) -> dict:
        """``partition -> Released`` of the partitions whose merge lets records through."""
        for p, (ra, rb) in self._by_partition(msgs).items():
            merge = self.tasks[p].merge
            if ra is not None:
                merge.push_arrays(A, ra.msgs, ra.ts, ra.offsets)
            if rb is not None:
                merge.push_arrays(B, rb.msgs, rb.ts, rb.offsets)
        now = self._input_clock
        limit = self.settings.worker.consume_batch
        out = {}
        for p, task in self.tasks.items():
            if task.ready and task.waiting:
                rel = task.merge.release(now, lambda side, p=p: self._caught_up(p, side), limit)
                if rel:
                    out[p] = rel
                self._backpressure(task)
        return out

    def _backpressure(self, task) -> None:
        """Pause a topic partition whose records pile up waiting for the other topic (as
        Kafka Streams' buffered.records.per.partition), resume it once they drain."""
        high = 4 * self.settings.worker.consume_batch
        for side, topic in ((A, task.topic), (B, task.features)):
            queued = task.merge.queued(side)
            tp = [TopicPartition(topic, task.partition)]
            if side not in task.held and queued > high:
                self.consumer.pause(tp)
                task.held.add(side)
            elif side in task.held and queued <= high // 4:
                self.consumer.resume(tp)
                task.held.discard(side)

    def _caught_up(self, p: int, side: int) -> bool:
        """Whether the topic of ``side`` has nothing more to deliver for partition ``p`` yet:
        its fetch position reached its end offset (the last stable one, read_committed)."""
        task = self.tasks[p]
        topic = task.topic if side == A else task.features
        tp = TopicPartition(topic, p)
        try:
            high = self.consumer.get_watermark_offsets(tp, cached=True)[1]
            fetched = self.consumer.position([tp])[0].offset
        except Exception:  # noqa: BLE001 (unknown yet: the merge waits within its bound)
            return False
        here = max(fetched, task.merge.position[side])
        return high >= 0 and here >= high

    def _offsets(self, parts) -> list[TopicPartition]:
        """Offsets to commit for ``parts``: both topics; the instances partition carries the
        merge's cuts since the last checkpoint (worker/merge.py)."""
        out = []
        for p in parts:
            t = self.tasks[p]
            ck = t.manifest.offsets
            meta = encode_cuts((ck.get(t.topic, 0), ck.get(t.features, 0)), t.merge.cuts)
            out.append(TopicPartition(t.topic, p, max(t.position, t.committed), metadata=meta))
            out.append(TopicPartition(t.features, p, max(t.fposition, t.fcommitted)))
        return out

    def _committer(self) -> Committer:
        if self._executor is None:
            self._executor = Committer()
        return self._executor

    def _settle(self) -> None:
        """Wait for the commit in flight; its errors surface here (inside :meth:`_guarded`)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            future, offsets, t0 = pending
            self._wait_commit(future)
            self._committed(offsets, t0)

    def settle(self) -> None:
        """Wait until every processed batch is committed (or rewound after a failed commit)."""
        self._guarded(self._settle)

    def _committed(self, offsets, t0: float) -> None:
        self.n_transactions += 1
        self.metrics.commits.inc()
        self._aborts_in_row = 0
        self.metrics.consecutive_aborts.set(0)
        for tp in offsets:
            task = self.tasks.get(tp.partition)
            if task is None:
                continue
            if tp.topic == task.topic:
                task.committed = tp.offset
            else:
                task.fcommitted = tp.offset
        self.faults.crash_if("crash_after_commit", self.n_transactions)
        self.metrics.batch_latency.observe(time.perf_counter() - t0)

    def _by_partition(self, msgs) -> dict[int, list]:
        """``partition -> [instances, features]`` records of the ready partitions
        (:func:`worker.partitions.split_batch`); consumer errors go to :meth:`_consume_error`."""
        per_part, n_ok = split_batch(msgs, self.tasks, self.topics.features, self._consume_error)
        if n_ok:
            self._unknown_since = None  # the input topic is there
        return per_part

    def _consume_error(self, err) -> None:
        """Count and log a consumer error; raise :class:`WorkerFailed` for fatal ones."""
        self.metrics.consume_errors.labels(code=err.name()).inc()
        event(log, logging.WARNING, "consume error", error=str(err), code=err.name())
        what = consume_errors.kind(err)
        if what == "fatal":
            raise WorkerFailed(f"fatal consumer error: {err}")
        if what == "unknown_topic" and self._unknown_since is None:
            self._unknown_since = time.monotonic()

    def _check_input_topic(self) -> None:
        """An input topic reported unknown and never came back within the bound: exit."""
        if self._unknown_since is None:
            return
        gone = time.monotonic() - self._unknown_since
        if gone <= self.settings.worker.startup_timeout_s:
            return
        missing = []
        for topic, var in ((self.topics.instances, "INSTANCES"),
                           (self.topics.features, "FEATURES")):
            try:
                md = self.consumer.list_topics(topic, timeout=5.0).topics.get(topic)
            except Exception:  # noqa: BLE001 (brokers unreachable: not this check's business)
                return
            if md is None or md.error is not None or not md.partitions:
                missing.append((topic, var))
        if not missing:
            self._unknown_since = None  # it was a passing error (a topic being created)
            return
        topic, var = missing[0]
        raise WorkerFailed(f"the input topic {topic} has been unknown for {gone:.0f} s "
                           f"(deleted?): create it, or point STREAMFOREST_TOPICS__{var} at "
                           "an existing topic")

    def _replayed(self, task: PartitionTask) -> None:
        """The partition caught up with its committed offset: restore and replay are done."""
        seconds = time.monotonic() - task.restore_t0
        task.restore_t0 = None
        self.metrics.recovery_seconds.observe(seconds)
        event(log, logging.INFO, "partition caught up", partition=task.partition,
              committed=task.committed, seconds=round(seconds, 3))

    # -- checkpoints ----------------------------------------------------------------------------

    def _due_checkpoints(self, parts) -> None:
        """Checkpoint the partitions that are due (``every_instances`` or ``interval_s``, once
        their changed streams learned ``rows_per_stream`` rows each on average); past the state
        budget, every partition with changed streams, whose least recently used streams are then
        passivated.

        One transaction writes at most ``checkpoint.transaction_bytes`` of checkpoints (a
        partition is never split): thousands of streams per partition make a checkpoint of
        hundreds of MB, which would outlast the transaction timeout. Due partitions left over
        go first in the next transactions; those whose merge cuts no longer fit the offset
        metadata are never left over.
        """
        c = self.settings.checkpoint
        now = time.monotonic()
        over = self.budget.exceeded(self.tasks)
        due = []  # (cuts too long: never left over, last checkpoint, task)
        for p in (sorted(self.tasks) if over else parts):
            task = self.tasks[p]
            if not (task.ready and task.dirty):
                continue
            must = self._cuts_too_long(task)
            # a checkpoint rewrites every changed stream's whole state: with thousands of
            # streams it waits until they learned rows_per_stream rows each on average
            enough = task.since_ckpt >= c.rows_per_stream * len(task.dirty)
            if over or must or enough and (task.since_ckpt >= c.every_instances
                                           or now - task.last_ckpt >= c.interval_s):
                due.append((not must, task.last_ckpt, p))
        written = 0
        for optional, _, p in sorted(due):
            if written >= c.transaction_bytes and optional:
                break
            written += self._checkpoint(self.tasks[p])
        if over:
            self._passivate()

    @staticmethod
    def _cuts_too_long(task) -> bool:
        """The merge's cuts would not fit the offset metadata: a checkpoint drops them."""
        return len(encode_cuts((0, 0), task.merge.cuts)) > MAX_CUTS_CHARS

    def _checkpoint(self, task: PartitionTask) -> int:
        """Write the changed streams of a partition (transaction open); returns the bytes."""
        t0 = time.perf_counter()
        ts = int(time.time() * 1000)
        offsets = {task.topic: task.position, task.features: task.fposition}
        topics = [task.topic, task.features]
        level = self.settings.checkpoint.compression_level
        blobs = {
            s: ckpt.encode_blob(StreamCheckpoint(
                group=self.group, topics=topics, partition=task.partition, stream=s,
                config=task.pipelines[s].cfg.as_dict(), offsets=offsets,
                state=task.pipelines[s].to_state(), ts=ts), level)
            for s in sorted(task.dirty) if s in task.pipelines
        }
        base = task.manifest.model_copy(update={"offsets": offsets, "topics": topics, "ts": ts})
        manifest, n_bytes, task.manifest_end = self.writer.write(base, blobs, task.manifest_end)
        task.manifest = manifest
        task.merge.checkpointed()
        task.dirty.clear()
        task.since_ckpt = 0
        task.last_ckpt = time.monotonic()
        self.metrics.ckpt_seconds.observe(time.perf_counter() - t0)
        self.metrics.ckpt_bytes.labels(partition=task.partition).set(n_bytes)
        event(log, logging.DEBUG, "checkpoint written", partition=task.partition,
              offset=task.position, streams=len(blobs), bytes=n_bytes)
        return n_bytes

    def _checkpoint_txn(self, parts, force: bool) -> None:
        """A transaction holding only checkpoints (idle interval, revoke, shutdown).

        It sends the partitions' offsets with the group metadata like every batch does, so
        a member that is no longer in the group (a zombie) cannot commit it (KIP-447). The
        offset sent is the committed one or the position if further (never behind: during a
        replay the position is below the committed offset).
        """
        self._settle()
        todo = [self.tasks[p] for p in parts
                if p in self.tasks and self.tasks[p].ready and self.tasks[p].dirty]
        cap = self.settings.checkpoint.transaction_bytes
        while todo:  # transactions of at most ``cap`` bytes each (see _due_checkpoints)
            self.producer.begin()
            done, written = [], 0
            while todo and (written < cap or not done):
                task = todo.pop(0)
                written += self._checkpoint(task)
                done.append(task)
            offsets = self._offsets([t.partition for t in done])
            self.producer.send_offsets(offsets, self.consumer.consumer_group_metadata())
            self.producer.commit()
            self._committed(offsets, time.perf_counter())

    def _idle_checkpoints(self) -> None:
        self._settle()  # nothing to overlap the commit in flight with
        c = self.settings.checkpoint
        now = time.monotonic()
        due = [p for p, t in self.tasks.items()
               if t.ready and t.dirty and now - t.last_ckpt >= c.interval_s]
        if due:
            self._checkpoint_txn(due, False)

    def _update_ckpt_age(self, now: float) -> None:
        for p, t in self.tasks.items():
            self.metrics.ckpt_age.labels(partition=p).set(now - t.last_ckpt)

    def _update_lag(self) -> None:
        """Lag of every assigned partition; one still restoring counts from its committed offset."""
        for p, task in self.tasks.items():
            tp = TopicPartition(task.topic, p)
            try:
                if task.ready:
                    high = self.consumer.get_watermark_offsets(tp, cached=True)[1]
                    position = task.position
                else:  # paused, no fetch yet: ask the broker
                    high = self.reader.get_watermark_offsets(tp, timeout=1.0)[1]
                    position = max(0, self.consumer.committed([tp], timeout=1.0)[0].offset)
            except Exception:  # noqa: BLE001 (no answer yet: keep the last value)
                continue
            if high is not None and high >= 0:
                self.metrics.lag.labels(partition=p).set(max(0, high - position))


def run(settings, faults: Faults | None = None) -> int:
    """Run a worker until SIGTERM/SIGINT; the process exit status.

    0 after a requested stop; 2 when a topic is missing or unfit (the message says what to
    fix); 1 when the brokers cannot be reached at start or the worker failed (the open
    transaction was aborted and no checkpoint written: a restart resumes exactly).
    """
    worker = Worker(settings, faults)
    signal.signal(signal.SIGTERM, worker.request_stop)
    signal.signal(signal.SIGINT, worker.request_stop)
    try:
        worker.run()
    except TopicProblem as exc:
        event(log, logging.ERROR, f"cannot start: {exc}")
        return 2
    except BrokersUnreachable as exc:
        event(log, logging.ERROR, f"cannot start: {exc}")
        return 1
    except Exception as exc:  # noqa: BLE001 (the orchestrator restarts the member)
        event(log, logging.ERROR, "worker failed: open transaction aborted, no checkpoint "
              "written; restart it to resume from the last committed checkpoint",
              error=f"{type(exc).__name__}: {exc}", exc_info=True)
        return 1
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a worker (configured by STREAMFOREST_* env)")
    p.add_argument("--test-fault", default=None, metavar="NAME=N[,NAME=N]",
                   help="test-only fault injection: " + ", ".join(Faults.NAMES))
    p.set_defaults(func=_cmd_run)


def _cmd_run(args) -> int:
    from .logs import setup
    from .settings import settings_or_exit

    settings = settings_or_exit()
    setup(settings.worker.log_level, secrets=settings.secret_values())
    # `kill -USR1 <pid>` prints every thread's stack to stderr: what a stuck member is waiting on
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return run(settings, Faults(args.test_fault))
