"""The worker's transactions: its producer, the commit thread, aborts and fencing.

Every poll's outputs, dead letters, checkpoints and consumed offsets go out in one Kafka
transaction (:mod:`worker.app`). :class:`Transactions` owns what that takes:

* the producer (transactional, or the at-least-once one) and the checkpoint writer bound to
  it, made again after a fatal producer error;
* the commit thread: the two round trips that end a transaction (offsets to the group
  coordinator, then the commit) run there while the next poll is consumed and computed;
  :meth:`Transactions.settle` waits for them, and every later use of the producer settles
  first;
* aborts: the body of a ``with`` :meth:`Transactions.step` is a transactional step; when
  it fails, the step aborts (or makes a new producer) and its :class:`StepOutcome` says
  ``aborted``: the caller must then rewind every partition to its last commit. The worker
  runs its own steps; nothing here calls back into it;
* fencing: a producer fenced again and again means another process shares the
  transactional id, and the worker must end (:class:`worker.failure.WorkerFailed`).

A committed transaction advances the committed offsets of the partition tasks it covered
(:meth:`worker.task.PartitionTask.committed_through`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager

from . import checkpoint_store as ckpt
from .committer import Committer
from .failure import WorkerFailed
from .kafka_io import (
    AbortableError,
    AtLeastOnceProducer,
    FatalProducerError,
    TransactionalProducer,
)
from .logs import event

log = logging.getLogger("streamforest.worker")

#: a producer fenced this often within this many seconds shares its transactional id
FENCING_LOOP = (3, 300.0)


def send_and_commit(producer, offsets, metadata) -> None:
    """End a transaction (runs on the commit thread)."""
    producer.send_offsets(offsets, metadata)
    producer.commit()


class StepOutcome:
    """What one :meth:`Transactions.step` came to: ``aborted`` when its body failed."""

    __slots__ = ("aborted",)

    def __init__(self):
        self.aborted = False


class Transactions:
    """The producer and the life of its transactions (see the module doc).

    Parameters
    ----------
    settings : worker.settings.Settings
        Validated settings.
    metrics : worker.metrics.WorkerMetrics
        Commits, aborts, producer rebuilds, dead letters, latency.
    faults : worker.faults.Faults
        Test-only fault injection.
    stop : threading.Event
        Set once the worker is asked to stop (a producer is then no longer retried).
    """

    def __init__(self, settings, metrics, faults, stop: threading.Event):
        self.settings = settings
        self.metrics = metrics
        self.faults = faults
        self.stop = stop
        self.transactional_id = settings.transactional_id
        self.consumer = None  # set by the worker; the at-least-once producer commits through it
        self.producer: TransactionalProducer | None = None
        self.writer: ckpt.CheckpointWriter | None = None
        self.batch_bytes: int | None = None  # below the output topics' record limit
        self.n_transactions = 0
        self._executor: Committer | None = None
        self._pending = None  # (future, offsets, tasks, t0) of the commit in flight
        self._fenced: deque[float] = deque(maxlen=FENCING_LOOP[0])
        self._aborts_in_row = 0
        # a commit is two transaction calls, each bounded by shutdown_timeout_s, plus retries
        self._commit_bound = 3 * settings.worker.shutdown_timeout_s

    # -- the producer -----------------------------------------------------------------------

    def open(self, batch_bytes: int) -> None:
        """The first producer, whose record batches stay below ``batch_bytes``."""
        self.batch_bytes = batch_bytes
        self._new_producer()

    def _new_producer(self) -> None:
        if self.producer is not None:
            try:
                self.producer.close()
            except Exception:  # noqa: BLE001 (the old producer is being replaced anyway)
                pass
        w = self.settings.worker
        if w.exactly_once:
            self.producer = TransactionalProducer(self.settings, self.transactional_id,
                                                  timeout_s=w.shutdown_timeout_s,
                                                  batch_bytes=self.batch_bytes)
        else:
            self.producer = AtLeastOnceProducer(self.settings, lambda: self.consumer,
                                                batch_bytes=self.batch_bytes)
        self.writer = ckpt.CheckpointWriter(
            self.producer, self.settings.topics.checkpoints,
            self.settings.checkpoint.max_message_bytes, faults=self.faults)

    def _rebuild_producer(self) -> None:
        """A new producer; retried while the brokers recover (within the startup bound)."""
        self.metrics.producer_rebuilds.inc()
        deadline = time.monotonic() + self.settings.worker.startup_timeout_s
        while True:
            try:
                self._new_producer()
                return
            except (AbortableError, FatalProducerError) as exc:
                if time.monotonic() > deadline or self.stop.is_set():
                    raise WorkerFailed(f"no producer could be made: {exc}") from exc
                event(log, logging.WARNING, "making a new producer failed, retrying",
                      error=str(exc))
                self.producer = None
                time.sleep(1.0)

    def check_fencing_loop(self) -> None:
        """Fenced again and again: another process uses our transactional id (exit)."""
        now = time.monotonic()
        self._fenced.append(now)
        n, window = FENCING_LOOP
        if len(self._fenced) == n and now - self._fenced[0] <= window:
            raise WorkerFailed(
                f"the producer was fenced {n} times within {window:g} s: another process uses "
                f"transactional.id {self.transactional_id!r}; give every member its own "
                "STREAMFOREST_WORKER__MEMBER_NAME (or leave it unset) and "
                "STREAMFOREST_WORKER__TRANSACTIONAL_ID")

    # -- running a transactional step ----------------------------------------------------------

    @contextmanager
    def step(self) -> Iterator[StepOutcome]:
        """A transactional step: the ``with`` body; on failure abort (or recreate the
        producer), and the failure goes no further.

        The outcome it yields says ``aborted`` once the body failed and was aborted: the
        caller must then rewind every partition to its last commit (the state computed
        since is dropped).
        """
        outcome = StepOutcome()
        try:
            yield outcome
        except AbortableError as exc:
            outcome.aborted = True
            self.drain()
            event(log, logging.WARNING, "transaction aborted, rewinding", error=str(exc))
            self._aborted()
            try:
                self.producer.abort()
            except FatalProducerError:
                self._rebuild_producer()
        except FatalProducerError as exc:
            outcome.aborted = True
            self.drain()
            event(log, logging.ERROR, "producer failed, recreating it", error=str(exc),
                  fenced=exc.fenced)
            self._aborted()
            if exc.fenced:
                self.check_fencing_loop()
            self._rebuild_producer()

    def _aborted(self) -> None:
        self.metrics.aborts.inc()
        self._aborts_in_row += 1
        self.metrics.consecutive_aborts.set(self._aborts_in_row)

    def abandon(self) -> None:
        """After a failure: let a commit in flight end, abort the open transaction."""
        self.drain()
        if self.producer is not None:
            try:
                self.producer.abort()
            except Exception as exc:  # noqa: BLE001 (the broker aborts it at its timeout)
                event(log, logging.WARNING, "abort failed", error=str(exc))

    # -- one transaction --------------------------------------------------------------------------

    def begin(self) -> None:
        """Open a transaction, once the commit in flight ended."""
        self.settle()
        self.producer.begin()

    def send(self, records: list, headers: dict) -> None:
        """Output records ``(topic, key, values[, headers])`` (transaction open)."""
        self.producer.produce_many(records, headers)

    def send_dead(self, dead: list) -> None:
        """Dead letters ``(key, value, headers, reason)`` (transaction open)."""
        topic = self.settings.topics.deadletter
        for key, value, headers, reason in dead:
            self.producer.produce(topic, value, key, headers=headers)
            self.metrics.deadletters.labels(reason=reason).inc()

    def commit(self, offsets, tasks: dict, t0: float, in_background: bool) -> None:
        """Send the consumed ``offsets`` with the group metadata and commit.

        ``tasks`` (partition -> task) advance their committed offsets once it is committed.
        ``in_background``: the two round trips run on the commit thread, overlapping the
        next poll; the next use of the producer waits for them (:meth:`settle`), and a failed
        commit surfaces there. The at-least-once producer commits through the consumer, in
        line.
        """
        metadata = self.consumer.consumer_group_metadata()
        if not in_background or isinstance(self.producer, AtLeastOnceProducer):
            send_and_commit(self.producer, offsets, metadata)
            self._committed(offsets, tasks, t0)
            return
        if self._executor is None:
            self._executor = Committer()
        future = self._executor.submit(send_and_commit, self.producer, offsets, metadata)
        self._pending = (future, offsets, tasks, t0)

    def crash_before_commit(self) -> None:
        """Test-only: the fault that kills the process before the next commit."""
        self.faults.crash_if("crash_before_commit", self.n_transactions + 1, self.producer.flush)

    def settle(self) -> None:
        """Wait for the commit in flight; its errors surface here (inside :meth:`run`)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            future, offsets, tasks, t0 = pending
            self._wait_commit(future)
            self._committed(offsets, tasks, t0)

    def _committed(self, offsets, tasks: dict, t0: float) -> None:
        self.n_transactions += 1
        self.metrics.commits.inc()
        self._aborts_in_row = 0
        self.metrics.consecutive_aborts.set(0)
        for tp in offsets:
            task = tasks.get(tp.partition)
            if task is not None:
                task.committed_through(tp)
        self.faults.crash_if("crash_after_commit", self.n_transactions)
        self.metrics.poll_latency.observe(time.perf_counter() - t0)

    def drain(self) -> None:
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

    def closers(self) -> list:
        """``(what, close)`` of the producer and the commit thread, for the shutdown."""
        return [("producer", self.producer and self.producer.close),
                ("commit thread", self._executor and self._close_executor)]

    def _close_executor(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown()
