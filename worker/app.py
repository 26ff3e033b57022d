"""The worker: composition root, the consume -> decode -> learn -> produce loop, rebalances.

One :class:`Worker` is one member of the consumer group. Per consumed batch (numbers match
the comments in :meth:`Worker._process_batch`):

1. group the messages by partition, drop what belongs to partitions that are not restored
   yet (they are re-read after the restore seeks them);
2. decode every message (:class:`worker.batch.BatchDecoder`); invalid ones become
   dead letters; the rest are grouped by stream (the message key) in partition order;
3. run each stream's pipeline over its rows (test-then-train, see :mod:`worker.pipeline`);
   rows below a partition's replay mark only update state;
4. in one transaction: produce predictions, alerts, rankings and dead letters, the due
   checkpoints, send the consumed offsets (KIP-447 group metadata) and commit. The two
   round trips that end the transaction run on a commit thread while the next batch is
   consumed and computed; every later use of the producer, restore, rebalance callback and
   shutdown waits for them first, and a failed commit rewinds exactly as before (the state
   computed meanwhile is dropped with the rest).

Abortable errors abort the transaction and rewind: every assigned partition is restored again
from its last checkpoint and replayed up to the committed offsets, so in-memory state never
runs ahead of what was committed. Fatal producer errors do the same after making a new
producer. Rebalances (cooperative-sticky): new partitions are paused in the callback and
restored by the loop; revoked ones get a bounded final checkpoint and are dropped; lost ones
are dropped without committing.
"""

from __future__ import annotations

import logging
import signal
import time

import numpy as np
from confluent_kafka import KafkaError, Message, TopicPartition

from schemas.checkpoint import StreamCheckpoint

from . import __version__
from . import checkpoint as ckpt
from .batch import BatchDecoder, Caps, OutputEncoder
from .faults import Faults
from .kafka_io import (
    AbortableError,
    AtLeastOnceProducer,
    FatalProducerError,
    TransactionalProducer,
    make_consumer,
    make_reader,
)
from .logs import event
from .metrics import MetricsServer, WorkerMetrics
from .pipeline import Pipeline
from .recovery import restore_partition
from .settings import stream_profiles

log = logging.getLogger("streamforest.worker")

# unbound accessors, for map() over a consumed batch
_m_error, _m_partition, _m_offset = Message.error, Message.partition, Message.offset


class PartitionTask:
    """What the worker holds for one assigned input partition."""

    def __init__(self, group: str, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.ready = False
        self.pipelines: dict[str, Pipeline] = {}
        self.dirty: set[str] = set()
        self.position = 0  # next offset to process
        self.committed = 0  # offsets below it were committed (and are replayed silently)
        self.manifest = ckpt.empty_manifest(group, topic, partition, 0)
        self.since_ckpt = 0
        self.last_ckpt = time.monotonic()
        self.restore_t0: float | None = None  # set while replaying after a restore


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
        self.decoder = BatchDecoder(self.profiles, Caps.from_settings(settings), __version__,
                                    self._streams_changed)
        self.encoder = OutputEncoder(self.topics, self.metrics, __version__)
        self._executor = None  # the commit thread (see _process_batch)
        self._pending = None  # (future, offsets, t0) of the commit in flight

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        if s.worker.metrics_port:
            self.server = MetricsServer(self.metrics, s.worker.metrics_port).start()
        self._new_producer()
        self.reader = make_reader(s)
        self.consumer = make_consumer(s)
        self.consumer.subscribe([self.topics.instances], on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)
        event(log, logging.INFO, "worker started", member=self.member,
              transactional_id=self.transactional_id, group=s.kafka.group_id,
              topic=self.topics.instances, version=__version__)

    def _new_producer(self) -> None:
        if self.producer is not None:
            try:
                self.producer.close()
            except Exception:  # noqa: BLE001 (the old producer is being replaced anyway)
                pass
        if self.settings.worker.exactly_once:
            self.producer = TransactionalProducer(self.settings, self.transactional_id)
        else:
            self.producer = AtLeastOnceProducer(self.settings, lambda: self.consumer)
        self.writer = ckpt.CheckpointWriter(
            self.producer, self.topics.checkpoints, self.settings.checkpoint.max_message_bytes,
            faults=self.faults)

    def request_stop(self, *_args) -> None:
        """Signal handler: finish the current batch, then shut down."""
        self.stopping = True

    def run(self, until=None) -> None:
        """Consume until :meth:`request_stop` (or ``until()`` returns true), then shut down."""
        self.start()
        try:
            while not self.stopping and not (until is not None and until()):
                self.step()
        finally:
            self.shutdown()

    def step(self) -> int:
        """One loop turn: restore, consume, process one batch. Returns messages consumed."""
        w = self.settings.worker
        self.metrics.beat()
        if self.to_restore:
            self.settle()  # restores read the committed offsets
            self._restore_pending()
        msgs = self.consumer.consume(w.consume_batch, w.consume_timeout_s)
        self.metrics.beat()
        if self.to_restore:  # assigned during consume: restore before processing
            self.settle()
            self._restore_pending()
        if msgs:
            self._guarded(self._process_batch, msgs)
        else:
            self._guarded(self._idle_checkpoints)
        now = time.monotonic()
        if now - self._last_lag > 5.0:
            self._last_lag = now
            self._update_lag()
        self.metrics.ready = self.joined and not self.to_restore
        return len(msgs)

    def shutdown(self) -> None:
        """Final checkpoint and commit, leave the group, close the clients."""
        event(log, logging.INFO, "worker stopping", member=self.member)
        try:
            if self.consumer is not None and self.producer is not None:
                self._guarded(self._checkpoint_txn, list(self.tasks), True)
        finally:
            if self.consumer is not None:
                try:
                    self.consumer.close()  # revokes (checkpoint is then a no-op) and leaves
                except Exception as exc:  # noqa: BLE001
                    event(log, logging.WARNING, "consumer close failed", error=str(exc))
            if self.producer is not None:
                self.producer.close()
            if self.reader is not None:
                self.reader.close()
            if self.server is not None:
                self.server.stop()
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
        event(log, logging.INFO, "worker stopped", member=self.member)

    # -- error handling ---------------------------------------------------------------------

    def _guarded(self, fn, *args):
        """Run a transactional step; on failure abort (or recreate) and rewind."""
        try:
            return fn(*args)
        except AbortableError as exc:
            self._drain()
            event(log, logging.WARNING, "transaction aborted, rewinding", error=str(exc))
            self.metrics.aborts.inc()
            try:
                self.producer.abort()
            except FatalProducerError:
                self._new_producer()
            self._rewind()
        except FatalProducerError as exc:
            self._drain()
            event(log, logging.ERROR, "producer failed, recreating it", error=str(exc))
            self.metrics.aborts.inc()
            self._new_producer()
            self._rewind()

    def _drain(self) -> None:
        """Before an abort: let a commit in flight end (its outcome no longer matters)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                pending[0].result()
            except Exception:  # noqa: BLE001 (everything is rewound anyway)
                pass

    def _rewind(self) -> None:
        """Drop in-memory state of every partition and restore it from checkpoint + replay."""
        for p, task in self.tasks.items():
            task.ready = False
            task.pipelines.clear()
            task.dirty.clear()
            self.to_restore.add(p)
        tps = [TopicPartition(self.topics.instances, p) for p in self.tasks]
        if tps:
            self.consumer.pause(tps)

    # -- rebalance callbacks (run inside consume) -------------------------------------------

    def _on_assign(self, consumer, partitions) -> None:
        self.joined = True
        self.metrics.rebalances.labels(event="assign").inc()
        consumer.incremental_assign(partitions)
        if partitions:
            consumer.pause(partitions)  # restored by the loop, outside this callback
        for tp in partitions:
            self.tasks[tp.partition] = PartitionTask(self.group, tp.topic, tp.partition)
            self.to_restore.add(tp.partition)
        self.metrics.assigned.set(len(self.tasks))
        event(log, logging.INFO, "partitions assigned",
              partitions=[tp.partition for tp in partitions])

    def _on_revoke(self, consumer, partitions) -> None:
        self.metrics.rebalances.labels(event="revoke").inc()
        parts = [tp.partition for tp in partitions if tp.partition in self.tasks]
        # the last batch is committed (once the commit in flight ends); a final checkpoint
        # saves the new owner a replay
        if self.producer is not None:
            self.settle()
        if self.producer is not None and parts:
            self._guarded(self._checkpoint_txn, parts, True)
        self._drop(parts)
        consumer.incremental_unassign(partitions)
        event(log, logging.INFO, "partitions revoked", partitions=parts)

    def _on_lost(self, consumer, partitions) -> None:
        self.metrics.rebalances.labels(event="lost").inc()
        parts = [tp.partition for tp in partitions]
        if self.producer is not None:
            self.settle()  # the commit in flight ends (or fails and rewinds) first
        self._drop(parts)  # no commit: another member owns them now
        consumer.incremental_unassign(partitions)
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
        return sum(len(t.pipelines) for t in self.tasks.values())

    def _streams_changed(self) -> None:
        self.metrics.streams.set(self._n_streams())

    # -- restore ------------------------------------------------------------------------------

    def _restore_pending(self) -> None:
        for p in sorted(self.to_restore):
            task = self.tasks.get(p)
            if task is None:
                self.to_restore.discard(p)
                continue
            try:
                r = restore_partition(self.consumer, self.reader, self.group, task.topic, p,
                                      self.topics.checkpoints)
            except Exception as exc:  # noqa: BLE001 (stay paused; retried next turn)
                event(log, logging.ERROR, "restore failed, will retry", partition=p,
                      error=f"{type(exc).__name__}: {exc}")
                time.sleep(1.0)
                continue
            task.pipelines = r.pipelines
            task.dirty.clear()
            task.position = r.start
            task.committed = r.committed
            task.manifest = r.manifest or ckpt.empty_manifest(self.group, task.topic, p, r.start)
            task.since_ckpt = 0
            task.last_ckpt = time.monotonic()
            task.restore_t0 = time.monotonic() - r.seconds
            tp = TopicPartition(task.topic, p, r.start)
            self._seek(tp)
            task.ready = True
            if r.start >= r.committed:
                self._replayed(task)
            self.to_restore.discard(p)
            self.metrics.restore_seconds.observe(r.seconds)
            event(log, logging.INFO, "partition restored", partition=p, streams=len(r.pipelines),
                  checkpoint_offset=r.manifest.offsets[task.topic] if r.manifest else None,
                  committed=r.committed, start=r.start, bytes=r.n_bytes,
                  seconds=round(r.seconds, 3))
        self.metrics.streams.set(self._n_streams())

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
        # 1. group by partition, keep what follows each restored partition's position
        per_part = self._by_partition(msgs)
        if not per_part:
            return
        producer = self.producer
        topics = self.topics
        n_live = n_replay = 0
        dead = []
        outputs: list[tuple[str, bytes, list[bytes]]] = []  # (topic, key, values)
        for p, (pm, pos) in per_part.items():
            task = tasks[p]
            # 2. decode, group by stream
            streams = self.decoder.decode(task, pm, pos, dead, w.max_message_bytes)
            # 3. learn
            for stream, sr in streams.items():
                pl = task.pipelines[stream]
                sr.finish(pl.n_features)
                X, offs, n_rows = sr.X, sr.offsets, len(sr)
                # replayed rows change the state too: the stream must be checkpointed again
                task.dirty.add(stream)
                if sr.live > 0:
                    pl.process(X[:sr.live], sr.ys[:sr.live], offs[:sr.live], emit=False)
                    n_replay += sr.live
                if sr.live < n_rows:
                    lo = sr.live
                    res = pl.process(X[lo:], sr.ys[lo:], offs[lo:], emit=True)
                    self.encoder.encode(task, stream, pl, res, sr, lo, outputs, dead)
                    n_live += n_rows - lo
            last = int(pos[-1]) + 1
            if pos[0] >= task.committed:  # offsets increase: all of them are live
                task.since_ckpt += len(pm)
            else:
                task.since_ckpt += int(np.count_nonzero(pos >= task.committed))
            task.position = last
            if task.restore_t0 is not None and last >= task.committed:
                self._replayed(task)
        self.metrics.replayed.inc(n_replay)
        self.metrics.instances_in.inc(n_live)
        # 4. one transaction: outputs, dead letters, checkpoints, offsets
        offsets = [TopicPartition(topics.instances, p, tasks[p].position)
                   for p in per_part if tasks[p].position > tasks[p].committed]
        if not offsets and not outputs and not dead:
            return  # pure replay: nothing to commit
        self._settle()  # the previous batch's commit (it ran while this batch was computed)
        producer.begin()
        producer.produce_many(outputs)
        for key, value, headers, reason in dead:
            producer.produce(topics.deadletter, value, key, headers=headers)
            self.metrics.deadletters.labels(reason=reason).inc()
        self._due_checkpoints(list(per_part))
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

    def _committer(self):
        if self._executor is None:
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(1, thread_name_prefix="streamforest-commit")
        return self._executor

    def _settle(self) -> None:
        """Wait for the commit in flight; its errors surface here (inside :meth:`_guarded`)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            future, offsets, t0 = pending
            future.result()
            self._committed(offsets, t0)

    def settle(self) -> None:
        """Wait until every processed batch is committed (or rewound after a failed commit)."""
        self._guarded(self._settle)

    def _committed(self, offsets, t0: float) -> None:
        self.n_transactions += 1
        self.metrics.commits.inc()
        for tp in offsets:
            task = self.tasks.get(tp.partition)
            if task is not None:
                task.committed = tp.offset
        self.faults.crash_if("crash_after_commit", self.n_transactions)
        self.metrics.batch_latency.observe(time.perf_counter() - t0)

    def _by_partition(self, msgs) -> dict[int, tuple[list, np.ndarray]]:
        """``partition -> (messages, offsets)`` of what follows each ready partition's position.

        Messages are read with the unbound accessors through ``map`` (no per-message Python
        frame); consume errors are logged and skipped.
        """
        errors = list(map(_m_error, msgs))
        if errors.count(None) != len(errors):
            kept = []
            for m, err in zip(msgs, errors):
                if err is None:
                    kept.append(m)
                elif err.code() != KafkaError._PARTITION_EOF:
                    event(log, logging.WARNING, "consume error", error=str(err))
            msgs = kept
        if not msgs:
            return {}
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
            task = self.tasks.get(p)
            if task is None or not task.ready:
                continue
            keep = pos >= task.position
            if not keep.all():
                idx = np.flatnonzero(keep)
                if not idx.shape[0]:
                    continue
                pm, pos = list(map(pm.__getitem__, idx.tolist())), pos[idx]
            per_part[p] = (pm, pos)
        return per_part

    def _replayed(self, task: PartitionTask) -> None:
        """The partition caught up with its committed offset: restore and replay are done."""
        seconds = time.monotonic() - task.restore_t0
        task.restore_t0 = None
        self.metrics.recovery_seconds.observe(seconds)
        event(log, logging.INFO, "partition caught up", partition=task.partition,
              committed=task.committed, seconds=round(seconds, 3))

    # -- checkpoints ----------------------------------------------------------------------------

    def _due_checkpoints(self, parts) -> None:
        c = self.settings.checkpoint
        now = time.monotonic()
        for p in parts:
            task = self.tasks[p]
            if task.dirty and (task.since_ckpt >= c.every_instances
                               or now - task.last_ckpt >= c.interval_s):
                self._checkpoint(task)

    def _checkpoint(self, task: PartitionTask) -> None:
        """Write the changed streams of a partition (transaction open)."""
        t0 = time.perf_counter()
        ts = int(time.time() * 1000)
        offsets = {task.topic: task.position}
        blobs = {
            s: ckpt.encode_blob(StreamCheckpoint(
                group=self.group, topics=[task.topic], partition=task.partition, stream=s,
                config=task.pipelines[s].cfg.as_dict(), offsets=offsets,
                state=task.pipelines[s].to_state(), ts=ts))
            for s in sorted(task.dirty) if s in task.pipelines
        }
        base = task.manifest.model_copy(update={"offsets": offsets, "ts": ts})
        manifest, n_bytes = self.writer.write(base, blobs)
        task.manifest = manifest
        task.dirty.clear()
        task.since_ckpt = 0
        task.last_ckpt = time.monotonic()
        self.metrics.ckpt_seconds.observe(time.perf_counter() - t0)
        self.metrics.ckpt_bytes.labels(partition=task.partition).set(n_bytes)
        event(log, logging.DEBUG, "checkpoint written", partition=task.partition,
              offset=task.position, streams=len(blobs), bytes=n_bytes)

    def _checkpoint_txn(self, parts, force: bool) -> None:
        """A transaction holding only checkpoints (idle interval, revoke, shutdown)."""
        self._settle()
        todo = [self.tasks[p] for p in parts
                if p in self.tasks and self.tasks[p].ready and self.tasks[p].dirty]
        if not todo:
            return
        self.producer.begin()
        for task in todo:
            self._checkpoint(task)
        self.producer.commit()
        self.metrics.commits.inc()

    def _idle_checkpoints(self) -> None:
        self._settle()  # nothing to overlap the commit in flight with
        c = self.settings.checkpoint
        now = time.monotonic()
        due = [p for p, t in self.tasks.items()
               if t.ready and t.dirty and now - t.last_ckpt >= c.interval_s]
        if due:
            self._checkpoint_txn(due, False)
        for p, t in self.tasks.items():
            self.metrics.ckpt_age.labels(partition=p).set(now - t.last_ckpt)

    def _update_lag(self) -> None:
        for p, task in self.tasks.items():
            if not task.ready:
                continue
            try:
                _low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(task.topic, p), cached=True)
            except Exception:  # noqa: BLE001 (no fetch response yet)
                continue
            if high is not None and high >= 0:
                self.metrics.lag.labels(partition=p).set(max(0, high - task.position))


def run(settings, faults: Faults | None = None) -> int:
    """Run a worker until SIGTERM/SIGINT."""
    worker = Worker(settings, faults)
    signal.signal(signal.SIGTERM, worker.request_stop)
    signal.signal(signal.SIGINT, worker.request_stop)
    worker.run()
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
    return run(settings, Faults(args.test_fault))
