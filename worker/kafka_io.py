"""Kafka clients of the worker: the group consumer, the transactional producer, the reader.

Thin construction helpers over confluent-kafka plus :class:`TransactionalProducer`, which
wraps the transaction calls and turns librdkafka errors into three classes (KIP-98/KIP-447,
confluent-kafka-python ``examples/eos_transactions.py``):

* *retriable* (``KafkaError.retriable()``): the same call is retried a bounded number of times;
* *abortable* (``txn_requires_abort()``): :class:`AbortableError`; the worker aborts the
  transaction and rewinds its partitions to the last committed checkpoint and offsets;
* *fatal* (``fatal()`` or anything else, e.g. the producer was fenced):
  :class:`FatalProducerError`; the worker closes the producer, makes a new one and rewinds.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

log = logging.getLogger("streamforest.kafka")
#: librdkafka's own lines (refused connections, retries, warnings) of every client built here:
#: JSON lines of the worker's log under ``run``; the operator tools drop them
#: (:func:`quiet_client_logs`) and say in one line what failed
CLIENT_LOG = logging.getLogger("streamforest.librdkafka")


def quiet_client_logs() -> logging.Logger:
    """Drop librdkafka's own lines (a command whose stderr is one line when it fails)."""
    if not any(isinstance(h, logging.NullHandler) for h in CLIENT_LOG.handlers):
        CLIENT_LOG.addHandler(logging.NullHandler())
    CLIENT_LOG.propagate = False
    return CLIENT_LOG


class AbortableError(RuntimeError):
    """The current transaction must be aborted (its outputs are discarded)."""


class FatalProducerError(RuntimeError):
    """The producer cannot continue (fenced, or an unrecoverable error): recreate it.

    ``fenced`` tells that another producer with the same ``transactional.id`` took over.
    """

    def __init__(self, message: str, fenced: bool = False):
        super().__init__(message)
        self.fenced = fenced


def _unwrapped(fn, *args):
    """``fn(*args)``, with the :class:`KafkaException` a delivery callback hid brought back.

    When a fatal error is raised while delivery reports are served, the next callback runs
    with the exception set and Python reports a ``SystemError`` whose context is the
    original :class:`KafkaException`.
    """
    try:
        return fn(*args)
    except SystemError as exc:
        cause = exc.__context__ or exc.__cause__
        if isinstance(cause, KafkaException):
            raise cause from None
        raise


def _fenced(err) -> bool:
    return isinstance(err, KafkaError) and err.code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


def producer_error_kind(err: KafkaError | None) -> str:
    """``"retriable"``, ``"abortable"`` or ``"fatal"`` for an error of the producer or its
    transaction (consumer errors: :func:`worker.consume_errors.consumer_error_kind`)."""
    if err is None:
        return "fatal"
    if err.fatal():
        return "fatal"
    if err.txn_requires_abort():
        return "abortable"
    if err.retriable():
        return "retriable"
    return "fatal"


def _base(settings) -> dict:
    """The connection properties, librdkafka's log lines routed to :data:`CLIENT_LOG` (without
    a logger librdkafka writes ``%3|...`` lines to stderr itself)."""
    conf = dict(settings.kafka.as_librdkafka_dict())
    conf["logger"] = CLIENT_LOG
    return conf


def consumer_config(settings, *, group: bool = True) -> dict:
    """Group consumer (``group=True``) or a group-less reader, both ``read_committed``."""
    w = settings.worker
    conf = _base(settings)
    ours = {
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "queued.max.messages.kbytes": w.queued_max_messages_kbytes,
        "fetch.message.max.bytes": max(1_048_576, settings.checkpoint.topic_max_message_bytes),
        "fetch.wait.max.ms": 100,
        # librdkafka pauses a partition's fetching this long once its local queue passed
        # queued.min.messages (default 1 s): a reader faster than that pause sat idle
        "fetch.queue.backoff.ms": 20,
    }
    if group:
        ours.update({
            "partition.assignment.strategy": "cooperative-sticky",
            "max.poll.interval.ms": w.max_poll_interval_ms,
        })
        if w.static_membership:
            # KIP-345: the coordinator keeps this member's partitions through a restart that
            # ends within session.timeout.ms (close() does not leave the group)
            ours["group.instance.id"] = w.member_name
    else:
        ours["enable.partition.eof"] = True
        # restores read short ranges: do not let the broker hold an empty fetch for long
        ours["fetch.wait.max.ms"] = 5
        ours["fetch.error.backoff.ms"] = 5
        ours["group.id"] = f"{settings.kafka.group_id}.reader"  # never joins nor commits
    _set_defaults(conf, ours)
    if not group:
        for k in ("partition.assignment.strategy", "group.instance.id", "session.timeout.ms"):
            conf.pop(k, None)
        conf["group.id"] = ours["group.id"]
    return for_client(conf, "consumer")


# librdkafka's other names of the properties the worker sets (CONFIGURATION.md): the name
# given last wins, so a default of ours must yield to a kafka.extra setting under either
_ALIASES = {
    "linger.ms": "queue.buffering.max.ms",
    "compression.type": "compression.codec",
    "fetch.message.max.bytes": "max.partition.fetch.bytes",
}


def _set_defaults(conf: dict, ours: dict) -> None:
    """Add ``ours`` to ``conf`` where kafka.extra set neither the property nor its alias
    (explicit settings win).

    Examples
    --------
    >>> conf = {"queue.buffering.max.ms": "5"}
    >>> _set_defaults(conf, {"linger.ms": 20, "batch.size": 1000})
    >>> conf
    {'queue.buffering.max.ms': '5', 'batch.size': 1000}
    """
    for k, v in ours.items():
        if k not in conf and _ALIASES.get(k) not in conf:
            conf[k] = v


def producer_config(settings, transactional_id: str | None,
                    batch_bytes: int | None = None) -> dict:
    """Producer with a large linger/batch (never flushed per message).

    ``batch_bytes``: the smallest record limit of the output topics. A topic's
    ``max.message.bytes`` bounds a whole record batch, so a batch of several large outputs
    (each under the limit) would be refused; batches stay below it. A single record larger than
    the batch size still goes out alone.
    """
    conf = _base(settings)
    ours = {
        "linger.ms": 20,
        "batch.num.messages": 10000,
        "batch.size": min(4_000_000, batch_bytes or 4_000_000),
        "compression.type": "lz4",
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "message.max.bytes": settings.checkpoint.topic_max_message_bytes + 65536,
        "enable.idempotence": True,
        # a crashed member's open transaction blocks read_committed readers until it times
        # out; keep it short like Kafka Streams under EOS (batches take well under a second)
        "transaction.timeout.ms": 15000,
    }
    if transactional_id:
        ours["transactional.id"] = transactional_id
    else:
        del ours["transaction.timeout.ms"]
    _set_defaults(conf, ours)
    return for_client(conf, "producer")


# properties of one client role (librdkafka's CONFIGURATION.md, column C or P, aliases
# included): kafka.extra serves every client, and librdkafka ignores a property of the other
# role with a CONFWARN line at each client's start, so each client leaves those out
_CONSUMER_ONLY = frozenset({
    "group.id", "group.instance.id", "group.protocol", "group.protocol.type",
    "group.remote.assignor", "partition.assignment.strategy", "session.timeout.ms",
    "heartbeat.interval.ms", "coordinator.query.interval.ms", "max.poll.interval.ms",
    "isolation.level", "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
    "enable.auto.offset.store", "queued.min.messages", "queued.max.messages.kbytes",
    "fetch.wait.max.ms", "fetch.queue.backoff.ms", "fetch.message.max.bytes",
    "max.partition.fetch.bytes", "fetch.max.bytes", "fetch.min.bytes", "fetch.error.backoff.ms",
    "enable.partition.eof", "check.crcs", "consume.callback.max.messages", "offset.store.method"})
_PRODUCER_ONLY = frozenset({
    "transactional.id", "transaction.timeout.ms", "enable.idempotence",
    "enable.gapless.guarantee", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
    "queue.buffering.max.ms", "linger.ms", "message.send.max.retries", "retries",
    "queue.buffering.backpressure.threshold", "compression.codec", "compression.type",
    "compression.level", "batch.num.messages", "batch.size", "delivery.report.only.error",
    "sticky.partitioning.linger.ms", "request.required.acks", "acks", "request.timeout.ms",
    "message.timeout.ms", "delivery.timeout.ms", "partitioner", "produce.offset.report"})


def admin_config(settings) -> dict:
    """Connection settings for an AdminClient (a producer's handle in librdkafka: no
    consumer-only keys)."""
    return for_client(_base(settings), "producer")


def for_client(conf: dict, role: str) -> dict:
    """``conf`` without the properties of the other role: a ``"producer"``'s (an
    AdminClient is one in librdkafka) without the consumer-only ones, a ``"consumer"``'s
    without the producer-only ones.

    Examples
    --------
    >>> conf = {"bootstrap.servers": "b:9092", "group.id": "g", "linger.ms": "5"}
    >>> for_client(conf, "producer")
    {'bootstrap.servers': 'b:9092', 'linger.ms': '5'}
    >>> for_client(conf, "consumer")
    {'bootstrap.servers': 'b:9092', 'group.id': 'g'}
    """
    other = {"producer": _CONSUMER_ONLY, "consumer": _PRODUCER_ONLY}[role]
    return {k: v for k, v in conf.items() if k not in other}


def make_consumer(settings) -> Consumer:
    """The group consumer of :func:`consumer_config`."""
    return Consumer(consumer_config(settings, group=True))


def make_reader(settings) -> Consumer:
    """A group-less ``read_committed`` consumer for checkpoints and watermarks."""
    return Consumer(consumer_config(settings, group=False))


class TransactionalProducer:
    """One transactional producer per worker (KIP-447: fenced through the group metadata).

    Parameters
    ----------
    settings : Settings
        Worker settings.
    transactional_id : str
        Stable per member, so a restarted member fences its predecessor at once.
    timeout_s : float
        Bound on each blocking transaction call.
    """

    def __init__(self, settings, transactional_id: str, timeout_s: float = 30.0,
                 batch_bytes: int | None = None):
        self.settings = settings
        self.transactional_id = transactional_id
        self.timeout_s = timeout_s
        self.in_transaction = False
        self._p = Producer(producer_config(settings, transactional_id, batch_bytes))
        self._call(self._p.init_transactions, timeout_s)

    @property
    def raw(self) -> Producer:
        return self._p

    def _call(self, fn, *args, retries: int = 5):
        """Run a transaction call, retrying retriable errors, raising classified errors."""
        delay = 0.05
        for attempt in range(retries + 1):
            try:
                return _unwrapped(fn, *args)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                kind = producer_error_kind(err if isinstance(err, KafkaError) else None)
                if kind == "retriable" and attempt < retries:
                    log.warning("retrying %s after %s", getattr(fn, "__name__", fn), err)
                    time.sleep(delay)
                    delay = min(1.0, delay * 2)
                    continue
                if kind == "abortable" or (kind == "retriable"):
                    raise AbortableError(str(err)) from exc
                raise FatalProducerError(str(err), fenced=_fenced(err)) from exc
        raise AssertionError("unreachable")

    def begin(self) -> None:
        if not self.in_transaction:
            self._call(self._p.begin_transaction)
            self.in_transaction = True

    def produce(self, topic: str, value: bytes, key: bytes | None = None, headers=None,
                partition: int = -1, on_delivery=None) -> None:
        """Queue one message; waits for room (serving delivery reports) when the queue is full."""
        p = self._p
        while True:
            try:
                if headers is None and on_delivery is None:
                    p.produce(topic, value, key, partition)
                else:
                    p.produce(topic, value, key, partition, on_delivery=on_delivery,
                              headers=headers)
                return
            except BufferError:
                p.poll(0.05)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                kind = producer_error_kind(err if isinstance(err, KafkaError) else None)
                if kind == "fatal":
                    raise FatalProducerError(str(err)) from exc
                raise AbortableError(str(err)) from exc

    def produce_many(self, groups, headers: dict | None = None) -> None:
        """Queue ``(topic, key, [values])`` or ``(topic, key, [values], headers)`` groups (the
        hot path: one tight loop).

        ``headers`` maps a topic to the headers of each of its records (JSON outputs say
        their content type); groups of other topics are produced without headers.
        """
        produce = self._p.produce
        for group in groups:
            topic, key, values = group[0], group[1], group[2]
            # a fourth item: headers of this group's records (PredictionBatch records)
            h = group[3] if len(group) > 3 else headers.get(topic) if headers else None
            if h is not None:
                for value in values:
                    self.produce(topic, value, key, headers=h)
                continue
            for value in values:
                try:
                    produce(topic, value, key)
                except (BufferError, KafkaException):
                    self.produce(topic, value, key)  # waits for room / classifies the error

    def poll(self, timeout: float = 0.0) -> int:
        return self._p.poll(timeout)

    def flush(self, timeout: float | None = None) -> None:
        """Wait for every queued message (inside a transaction: before reading offsets)."""
        try:
            left = _unwrapped(self._p.flush, self.timeout_s if timeout is None else timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if producer_error_kind(err if isinstance(err, KafkaError) else None) == "fatal":
                raise FatalProducerError(str(err), fenced=_fenced(err)) from exc
            raise AbortableError(str(err)) from exc
        if left:
            raise AbortableError(f"{left} messages not delivered within the flush timeout")

    def send_offsets(self, offsets: list[TopicPartition], group_metadata) -> None:
        if offsets:
            self._call(self._p.send_offsets_to_transaction, offsets, group_metadata,
                       self.timeout_s)

    def commit(self) -> None:
        if self.in_transaction:
            self._call(self._p.commit_transaction, self.timeout_s)
            self.in_transaction = False

    def abort(self) -> None:
        """Abort the open transaction (errors here are fatal for the producer)."""
        if not self.in_transaction:
            return
        try:
            self._p.abort_transaction(self.timeout_s)
        except KafkaException as exc:
            raise FatalProducerError(f"abort failed: {exc}") from exc
        finally:
            self.in_transaction = False

    def close(self) -> None:
        try:
            if self.in_transaction:
                self.abort()
        except FatalProducerError:
            pass
        try:
            _unwrapped(self._p.flush, 0)
        except KafkaException:
            pass  # a fenced or failed producer: what it still holds is aborted anyway


class AtLeastOnceProducer(TransactionalProducer):
    """``worker.exactly_once = false``: an idempotent producer and synchronous offset commits.

    The same calls as :class:`TransactionalProducer`, so the worker's loop is unchanged:
    ``begin`` does nothing, ``send_offsets`` remembers the offsets and ``commit`` flushes every
    output (and checkpoint) before committing them. A crash between the flush and the offset
    commit replays the batch: outputs may then appear twice (at-least-once), states never
    run ahead of the committed checkpoint + offsets.
    """

    def __init__(self, settings, consumer_getter, timeout_s: float = 30.0,
                 batch_bytes: int | None = None):
        self.settings = settings
        self.transactional_id = None
        self.timeout_s = timeout_s
        self.in_transaction = False
        self._consumer = consumer_getter
        self._offsets: list[TopicPartition] = []
        self._failed: list = []  # delivery errors since the last commit
        conf = producer_config(settings, None, batch_bytes)
        # offsets are committed only if every output of the batch was delivered (the reports
        # of successes are needed too: checkpoint chunks take their offsets from them)
        conf["on_delivery"] = self._on_delivery
        self._p = Producer(conf)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self._failed.append((msg.topic(), err))

    def begin(self) -> None:
        self.in_transaction = True

    def send_offsets(self, offsets, group_metadata) -> None:
        self._offsets = list(offsets)

    def commit(self) -> None:
        self.flush()
        if self._failed:
            (topic, err), n = self._failed[0], len(self._failed)
            self._failed, self._offsets = [], []
            raise AbortableError(f"{n} output(s) not delivered (first to {topic}: {err}); "
                                 "offsets not committed, the batch is processed again")
        if self._offsets:
            try:
                self._consumer().commit(offsets=self._offsets, asynchronous=False)
            except KafkaException as exc:
                raise AbortableError(f"offset commit failed: {exc}") from exc
        self._offsets = []
        self.in_transaction = False

    def abort(self) -> None:
        # what was produced stays produced (at-least-once); offsets are not committed
        self._offsets = []
        self._failed = []
        self.in_transaction = False
