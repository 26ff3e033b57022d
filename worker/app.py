"""The worker: composition root, the consume -> decode -> learn -> produce loop, rebalances.

One :class:`Worker` is one member of the consumer group: the loop and the rebalance
callbacks. The layers under it, in the spirit of Kafka Streams' thread, task and record
collector:

* :class:`worker.task.PartitionTask`: one assigned partition (restore, merge, the
  per-partition step, offsets, checkpoint);
* :class:`worker.step.StreamStep`: decode, learn, encode, for the worker and the evaluator;
* :class:`worker.transactions.Transactions`: the producer, the commit thread, aborts and
  fencing; a failed step comes back as "rewind", never as a call into the worker;
* :class:`worker.checkpoint_policy.CheckpointPolicy`: which partitions are checkpointed
  when, how many per transaction, and passivation past the state budget.

Per poll (one ``consume()`` result; numbers match the comments in
:meth:`Worker._process_poll`):

1. group the messages by partition, drop what belongs to partitions that are not restored
   yet (they are re-read after the restore seeks them); partition *p* of the instances
   topic and partition *p* of the features topic (assigned with it by hand) are one task,
   whose records the merge releases in timestamp order (:mod:`worker.merge`);
2. decode every message (:class:`worker.intake.RecordDecoder`); invalid ones become
   dead letters; the rest are grouped by stream (the message key) in partition order;
3. run each stream's pipeline over its rows (test-then-train, see :mod:`worker.pipeline`),
   streams of features with their arrivals (:mod:`worker.step`); rows below a
   partition's replay mark only update state;
4. in one transaction: produce the poll's :class:`worker.output.Outbox` (predictions,
   alerts, rankings, their latest state and dead letters), the due checkpoints, send the
   consumed offsets of both topics (KIP-447 group metadata; the instances offset carries the
   merge's cuts) and commit. The two round trips that end the transaction run on a commit thread while the
   next poll is consumed and computed; every later use of the producer, restore, rebalance callback and
   shutdown waits for them first, and a failed commit rewinds exactly as before (the state
   computed meanwhile is dropped with the rest).

Abortable errors abort the transaction and rewind: every assigned partition is restored again
from its last checkpoint and replayed up to the committed offsets, so in-memory state never
runs ahead of what was committed. Fatal producer errors do the same after making a new
producer (a producer fenced again and again means another process shares the transactional
id: the worker exits). A passivated stream that cannot be restored on demand
(:mod:`worker.residency`) rewinds its partition alone, before the poll's transaction begins:
the partition is restored as at start, with its fallbacks (:mod:`worker.recovery`).
Rebalances (cooperative-sticky): new partitions are paused in the callback and restored by
the loop; revoked ones get a bounded final checkpoint and are dropped; lost ones are dropped
without committing. Every transaction, checkpoint-only ones included, sends the consumed
offsets with the group metadata, so a zombie member's writes are fenced by the group
generation (KIP-447).

Anything else that goes wrong (a bug, memory, a fatal consumer error such as a deleted input
topic or a failed authorization) ends the worker: the open transaction is aborted, no
checkpoint is written, and :func:`worker.run_command.run` returns a non-zero status for the orchestrator to
restart the member, which restores from the last committed checkpoint. Before joining, the
worker checks its brokers and topics (:mod:`worker.preflight`).
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import TopicPartition

from . import __version__, gauges
from . import checkpoint_store as ckpt
from .checkpoint_policy import CheckpointPolicy
from .failure import WorkerFailed
from .faults import Faults
from .heap import LongLivedHeap
from .input_watch import InputWatch
from .intake import Caps, RecordDecoder
from .kafka_io import make_consumer, make_reader
from .logs import event
from .metrics import MetricsServer, WorkerMetrics, serve_metrics
from .output import Outbox, OutputEncoder
from .poll import split_poll
from .preflight import preflight
from .progress_log import ThroughputLog, counter_total
from .residency import Budget
from .restore_on_demand import OnDemand
from .settings import stream_profiles
from .step import StreamStep
from .task import PartitionTask
from .transactions import Transactions
from .watchdog import Watchdog

__all__ = ["Worker", "WorkerFailed"]

log = logging.getLogger("streamforest.worker")


class Worker:
    """A consumer-group member running one pipeline per stream (see module doc).

    It owns the loop and the rebalance callbacks; the partition tasks
    (:class:`worker.task.PartitionTask`) do the per-partition work, :class:`Transactions`
    the producer and its transactions, :class:`CheckpointPolicy` the checkpoints.

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
        self._stop = threading.Event()
        self.joined = False
        self.member = settings.member_name
        self.group = settings.kafka.group_id
        self.consumer = None
        self.reader = None
        self.server: MetricsServer | None = None
        self.txn = Transactions(settings, self.metrics, self.faults, self._stop)
        self._last_lag = 0.0
        self.budget = Budget(int(settings.worker.state_budget_mb * 1024 * 1024))
        self.policy = CheckpointPolicy(settings.checkpoint, self.budget, self.metrics)
        self.limits = ckpt.Limits.from_settings(settings)  # what checkpoint records may claim
        self.decoder = RecordDecoder(self.profiles, Caps.from_settings(settings))
        self.encoder = OutputEncoder(self.topics, self.metrics, output=settings.output)
        self.stream_step = StreamStep(self.decoder, self.encoder, self.metrics,
                                settings.worker.max_message_bytes)
        self.on_demand: OnDemand | None = None  # restores passivated streams (after start)
        self.inputs = InputWatch(self.topics, self.metrics, settings.worker.startup_timeout_s)
        self.failed = False  # an unexpected error: abort, no checkpoint, non-zero exit
        self.n_polls = 0
        self._last_gauges = 0.0
        self.throughput = ThroughputLog(settings.worker.progress_log_s, time.monotonic())
        self.watchdog = Watchdog(settings.worker.shutdown_timeout_s)
        # seconds spent waiting for input: the merge's idle bound counts these only, so time
        # spent computing a poll never makes a topic look idle (worker/merge.py)
        self._input_clock = 0.0
        self.heap = LongLivedHeap()  # the collector kept off what lives as long as the worker

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def producer(self):
        return self.txn.producer

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        self.server = serve_metrics(self.metrics, s.worker)
        checked = preflight(s, stopping=self._stop.is_set)
        for warning in checked.warnings:
            event(log, logging.WARNING, warning)
        self.encoder.set_limits(checked.max_bytes)
        self.txn.open(min(checked.max_bytes.values()) - self.encoder.RECORD_OVERHEAD)
        self.reader = make_reader(s)
        self.consumer = self.txn.consumer = make_consumer(s)
        self.on_demand = OnDemand(self.reader, self.topics.checkpoints, self.limits, self.txn,
                                  self.metrics)
        # the group assigns instances partitions; each brings the same partition of the
        # features topic, assigned here by hand (no assignor co-partitions two topics)
        self.consumer.subscribe([self.topics.instances], on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)
        event(log, logging.INFO, "worker started", member=self.member,
              transactional_id=self.txn.transactional_id, group=s.kafka.group_id,
              topic=self.topics.instances, features=self.topics.features, version=__version__)
        self.throughput.reset(time.monotonic())
        self.heap.settle(0)

    def request_stop(self, *_args) -> None:
        """Signal handler: finish the current poll, then shut down (within the bound)."""
        self._stop.set()
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
        """One loop turn: restore, consume, process one poll. Returns messages consumed."""
        w = self.settings.worker
        self.metrics.beat()
        if self.to_restore:
            self.settle()  # restores read the committed offsets
            self._restore_pending()
        t = time.monotonic()
        # records the merge already holds are work: ask for more without waiting for it
        busy = any(task.ready and task.waiting for task in self.tasks.values())
        msgs = self.consumer.consume(w.max_poll_records, 0 if busy else w.consume_timeout_s)
        self._input_clock += time.monotonic() - t
        self.metrics.beat()
        if self.to_restore:  # assigned during consume: restore before processing
            self.settle()
            self._restore_pending()
        if msgs or any(t.ready and t.waiting for t in self.tasks.values()):
            self._transact(self._process_poll, msgs)
        else:
            self._transact(self._idle_checkpoints)
        self.inputs.check(self.consumer)
        self.heap.settle(gauges.n_streams(self.tasks))  # new streams: their kernels loaded
        now = time.monotonic()
        if now - self._last_gauges > 1.0:
            self._last_gauges = now
            gauges.checkpoint_age(self.metrics, self.tasks, now)
            self._stream_gauges()  # state bytes grow as streams learn
        if now - self._last_lag > 5.0:
            self._last_lag = now
            gauges.lag(self.metrics, self.tasks, self.consumer, self.reader)
        if self.throughput.due(now):
            self._log_throughput(now)
        self.metrics.ready = self.joined and not self.to_restore
        return len(msgs)

    def _log_throughput(self, now: float) -> None:
        m = self.metrics
        event(log, logging.INFO, "progress", member=self.member, **self.throughput.fields(
            now, counter_total(m.instances_in), gauges.n_streams(self.tasks),
            counter_total(m.deadletters)))

    def shutdown(self) -> None:
        """Final checkpoint and commit, leave the group, close the clients.

        After a failure: abort the open transaction, no checkpoint (see :meth:`run`).
        """
        self.watchdog.arm("shutdown")
        event(log, logging.INFO, "worker stopping", member=self.member, failed=self.failed)
        try:
            if self.failed:
                self.txn.abandon()
            elif self.consumer is not None and self.producer is not None:
                self._transact(self.policy.write_alone, self.tasks, list(self.tasks), self.txn)
        finally:
            # each client is closed even if another fails (and a failure here never hides
            # the error that ended the worker)
            txn_producer, txn_thread = self.txn.closers()
            for what, close in (("consumer", self.consumer and self.consumer.close),
                                txn_producer,
                                ("reader", self.reader and self.reader.close),
                                ("metrics server", self.server and self.server.stop),
                                txn_thread):
                if close:
                    try:
                        close()  # the consumer revokes (checkpoint is then a no-op) and leaves
                    except Exception as exc:  # noqa: BLE001 (close every resource even when one fails)
                        event(log, logging.WARNING, f"{what} close failed", error=str(exc))
            self.watchdog.disarm()
            self.heap.thaw()
        event(log, logging.INFO, "worker stopped", member=self.member)

    # -- transactions and rewinds ----------------------------------------------------------------

    def _transact(self, fn, *args) -> None:
        """Run a transactional step; when it was aborted, rewind every partition."""
        with self.txn.step() as step:
            fn(*args)
        if step.aborted:
            self._rewind()

    def settle(self) -> None:
        """Wait until every processed poll is committed (or rewound after a failed commit)."""
        self._transact(self.txn.settle)

    def _rewind(self) -> None:
        """Drop in-memory state of every partition and restore it from checkpoint + replay."""
        for p, task in self.tasks.items():
            task.release_state()
            self.to_restore.add(p)
        self.heap.thaw()  # the released state goes back to the collector
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
        load = self.on_demand.load if self.on_demand is not None else None
        for tp in partitions:
            self.tasks[tp.partition] = PartitionTask(self.group, tp.topic, tp.partition,
                                                     self.topics.features, load)
            self.to_restore.add(tp.partition)
        self.metrics.assigned.set(len(self.tasks))
        event(log, logging.INFO, "partitions assigned",
              partitions=[tp.partition for tp in partitions])

    def _on_revoke(self, consumer, partitions) -> None:
        self.metrics.rebalances.labels(event="revoke").inc()
        parts = [tp.partition for tp in partitions if tp.partition in self.tasks]
        # the last poll is committed (once the commit in flight ends); a final checkpoint
        # saves the new owner a replay. After a failure nothing is committed any more.
        self.watchdog.arm("partition revocation")
        try:
            if self.producer is not None and not self.failed:
                self.settle()
                if parts:
                    self._transact(self.policy.write_alone, self.tasks, parts, self.txn)
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
        dropped = False
        for p in parts:
            task = self.tasks.pop(p, None)
            self.to_restore.discard(p)
            if task is not None:
                self.metrics.forget_partition(p)
                dropped = True
        self.metrics.assigned.set(len(self.tasks))
        self.metrics.streams.set(gauges.n_streams(self.tasks))
        if dropped:  # a cooperative rebalance revokes nothing from most members
            self.heap.thaw()  # the dropped tasks go back to the collector

    def _stream_gauges(self) -> None:
        gauges.streams(self.metrics, self.tasks, self.budget)

    # -- restore ------------------------------------------------------------------------------

    def _restore_pending(self) -> None:
        for p in sorted(self.to_restore):
            task = self.tasks.get(p)
            if task is None:
                self.to_restore.discard(p)
                continue
            try:
                r = task.restore(self.consumer, self.reader, self.topics.checkpoints,
                                 self.budget.left(self.tasks, p), self.limits,
                                 self.settings.worker.max_task_idle_ms / 1000.0)
            except Exception as exc:  # noqa: BLE001 (broker trouble: stay paused, retry)
                event(log, logging.ERROR, "restore failed, will retry", partition=p,
                      error=f"{type(exc).__name__}: {exc}")
                self.metrics.restore_failures.inc()
                self.inputs.restore_error(exc)
                time.sleep(1.0)
                continue
            if r.refused:
                self.metrics.checkpoints_refused.inc(len(r.refused))
                self.metrics.restore_fallbacks.labels(kind=r.fallback).inc()
            self._replayed(task, task.end_replay())
            self.to_restore.discard(p)
            self.metrics.restore_seconds.observe(r.seconds)
            event(log, logging.INFO, "partition restored", partition=p, streams=len(r.pipelines),
                  passivated=len(r.passivated),
                  checkpoint_offset=r.manifest.offsets[task.topic] if r.manifest else None,
                  committed=r.committed, start=r.start, features_start=r.fstart,
                  features_committed=r.fcommitted, cuts=len(r.cuts), bytes=r.n_bytes,
                  seconds=round(r.seconds, 3))
        self._stream_gauges()

    def _replayed(self, task: PartitionTask, seconds: float | None) -> None:
        """The partition caught up with its committed offset: restore and replay are done."""
        if seconds is None:
            return
        self.metrics.recovery_seconds.observe(seconds)
        event(log, logging.INFO, "partition caught up", partition=task.partition,
              committed=task.committed, seconds=round(seconds, 3))

    def _restore_again(self, task: PartitionTask, why: str) -> None:
        """A partition whose passivated streams could not be read back dropped its state:
        restore it from its checkpoints in the next turn, as at start.

        The polls before were committed (a restore on demand waits for that), so the
        restore replays silently what the dropped state had learned since its checkpoint.
        """
        event(log, logging.WARNING, "restore on demand failed: restoring the partition from "
              "its checkpoints again", partition=task.partition, error=why)
        self.metrics.restore_failures.inc()
        self.to_restore.add(task.partition)
        self.consumer.pause(self._both([task.partition]))

    # -- the poll -----------------------------------------------------------------------------

    def _process_poll(self, msgs) -> None:
        """Steps 1-4 of the module doc for one poll."""
        t0 = time.perf_counter()
        # 1. split by partition, queue for the merge of instances and features, release what
        #    the merge order allows (worker/merge.py)
        released = self._release(msgs)
        if not released:
            return
        created = self.decoder.created
        n_live = n_replay = 0
        outbox = Outbox(__version__)
        for p, rel in released.items():
            task = self.tasks[p]
            # 2., 3. decode, learn, encode (passivated streams come back first)
            done = task.process(rel, self.stream_step, outbox, self.n_polls)
            if done.restore_again is not None:
                self._restore_again(task, done.restore_again)
                continue
            n_live += done.stepped.learned.n_live
            n_replay += done.stepped.learned.n_replay
            self._replayed(task, done.replayed_s)
        if self.decoder.created != created:
            self._stream_gauges()
        self.metrics.replayed.inc(n_replay)
        self.metrics.instances_in.inc(n_live)
        # 4. one transaction: outputs, dead letters, checkpoints, offsets
        moved = [p for p in released if self.tasks[p].moved]
        self.n_polls += 1
        self.faults.raise_if("raise_before_begin", self.n_polls)
        if not moved and not outbox:
            return  # pure replay: nothing to commit
        self.txn.begin()  # once the previous poll's commit ended (it ran while this was computed)
        self.txn.send(outbox.records, self.encoder.headers)
        self.txn.send(outbox.latest_groups(), None)  # the latest state, in the same transaction
        self.faults.raise_if("raise_after_begin", self.n_polls)
        self.txn.send_dead(outbox.dead)
        if self.policy.write_due(self.tasks, list(released), self.txn.writer):
            self._stream_gauges()
        # after the checkpoints, which drop the cuts they cover
        offsets = [tp for p in moved for tp in self.tasks[p].offsets()]
        self.txn.crash_before_commit()
        self.txn.commit(offsets, {p: self.tasks[p] for p in moved}, t0, in_background=True)

    def _release(self, msgs) -> dict:
        """``partition -> Released`` of the partitions whose merge lets records through."""
        errors = []
        per_part, n_ok = split_poll(msgs, self.tasks, self.topics.features, errors.append)
        for err in errors:
            self.inputs.consume_error(err)
        if n_ok:
            self.inputs.delivered()
        for p, records in per_part.items():
            self.tasks[p].push(records)
        out = {}
        for p, task in self.tasks.items():
            if task.ready and task.waiting:
                rel = task.release(self.consumer, self._input_clock,
                                   self.settings.worker.max_poll_records)
                if rel:
                    out[p] = rel
        return out

    def _idle_checkpoints(self) -> None:
        self.txn.settle()  # nothing to overlap the commit in flight with
        due = self.policy.idle(self.tasks)
        if due:
            self.policy.write_alone(self.tasks, due, self.txn)
