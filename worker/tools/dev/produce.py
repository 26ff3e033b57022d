"""Producing streams to the instances topic: a dataset, a rotating hyperplane, or a file.

Used by ``streamforest demo``, the integration tests and the benchmarks, and available as
``streamforest produce dataset NAME`` / ``streamforest produce hyperplane`` /
``streamforest produce file PATH`` (the rows of a CSV or JSON-lines file: :mod:`.rows`;
``-`` reads stdin). Instances are
msgpack maps of the :class:`schemas.Instance` contract, keyed by stream id; ``x`` is a list
(the compact form) or, with ``names=True``, a map from feature name to value. With
``batch=N`` (``--batch N``) every N consecutive rows travel as one
:class:`schemas.batches.InstanceBatch` record (header ``sf-kind: instance-batch``).
"""

from __future__ import annotations

import json
import sys
import time

import msgpack
import numpy as np
from confluent_kafka import KafkaError, Producer

from schemas.codec import encode_state
from schemas.kinds import INSTANCE_BATCH, KIND_HEADER
from schemas.messages import TRUTH_HEADER

from ...cli import UsageError
from ...intake import LABEL_HEADERS
from ...kafka_io import for_client, quiet_client_logs
from ...settings import add_kafka_arguments

_pack = msgpack.Packer(use_bin_type=True).pack


def instance_values(stream: str, X: np.ndarray, y=None, *, start_id: int = 0,
                    ts0: int = 0, names: list[str] | None = None,
                    labelled=None) -> list[bytes]:
    """msgpack values of consecutive instances of one stream.

    Parameters
    ----------
    stream : str
        Stream id.
    X : ndarray of shape (n, d)
        Feature rows.
    y : sequence of labels, optional
        Class labels, or rows of targets for multi-target regression (``None`` entries, or
        ``y=None``, make unlabelled instances).
    start_id : int
        Id of the first instance (ids are consecutive integers).
    ts0 : int
        Timestamp (ms) of the first instance; one millisecond per instance after it.
    names : list of str, optional
        Send ``x`` as a map with these names.
    labelled : array of bool, optional
        Which instances carry their label.
    """
    rows = np.asarray(X, dtype=np.float64).tolist()
    ys = [None] * len(rows) if y is None else [_plain(v) for v in y]
    out = []
    for i, row in enumerate(rows):
        x = dict(zip(names, row)) if names else row
        d = {"v": 1, "stream": stream, "id": start_id + i, "ts": ts0 + i, "x": x}
        if ys[i] is not None and (labelled is None or labelled[i]):
            d["y"] = ys[i]
        out.append(_pack(d))
    return out


#: headers of an InstanceBatch record
BATCH_HEADERS = [(KIND_HEADER, INSTANCE_BATCH.encode())]


def label_value(stream: str, ident, y, ts: int) -> bytes:
    """The msgpack value of a :class:`schemas.messages.LabelEvent` (send it with
    :data:`LABEL_HEADERS`)."""
    return _pack({"v": 1, "stream": stream, "id": ident, "y": _plain(y), "ts": int(ts)})


def delayed_label_values(stream: str, X: np.ndarray, y, delay: int, *, start_id: int = 0,
                         ts0: int = 0, names: list[str] | None = None, every: int = 1):
    """``(values, headers)`` of a stream whose labels come ``delay`` instances late: every
    ``every``-th instance (from the first) unlabelled, its LabelEvent right after instance
    ``i + delay`` (the last ones after the last instance), the others carrying their labels;
    ``headers`` maps a value's index to its headers. A row without a label (``None``) gets
    no LabelEvent.

    Examples
    --------
    >>> import numpy as np
    >>> values, headers = delayed_label_values("s", np.zeros((3, 1)), [1, 0, 1], delay=1)
    >>> len(values), sorted(headers)
    (6, [2, 4, 5])
    >>> values, headers = delayed_label_values("s", np.zeros((3, 1)), [1, 0, 1], 1, every=2)
    >>> len(values), sorted(headers)
    (5, [2, 4])
    """
    ys = list(y)
    n = len(ys)
    late = [ys[i] is not None and i % every == 0 for i in range(n)]
    instances = instance_values(stream, X, [None if late[i] else ys[i] for i in range(n)],
                                start_id=start_id, ts0=ts0, names=names)
    values, headers = [], {}

    def label(i):
        if late[i]:
            headers[len(values)] = LABEL_HEADERS
            # the label's event time: that of the instance it follows
            values.append(label_value(stream, start_id + i, ys[i], ts0 + min(i + delay, n - 1)))

    for i in range(n):
        values.append(instances[i])
        if i - delay >= 0:
            label(i - delay)
    for i in range(max(0, n - delay), n):
        label(i)
    return values, headers


def batch_values(stream: str, X: np.ndarray, y=None, *, size: int, start_id: int = 0,
                 ts0: int = 0, names: list[str] | None = None) -> list[bytes]:
    """msgpack values of InstanceBatch records of ``size`` consecutive rows (the last one
    may be shorter); ids and timestamps as in :func:`instance_values`.

    Examples
    --------
    >>> from schemas.batches import decode_instance_batch
    >>> values = batch_values("s", np.zeros((5, 2)), [0, 1, 0, 1, None], size=2)
    >>> [decode_instance_batch(v).row_ids() for v in values]
    [[0, 1], [2, 3], [4]]
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    ys = None if y is None else [_plain(v) for v in y]
    out = []
    for a in range(0, X.shape[0], size):
        b = min(a + size, X.shape[0])
        d = {"v": 1, "stream": stream, "X": X[a:b], "ids": list(range(start_id + a, start_id + b)),
             "ts": list(range(ts0 + a, ts0 + b))}
        if ys is not None:
            d["y"] = ys[a:b]
        if names:
            d["features"] = list(names)
        out.append(encode_state(d))
    return out


def _plain(label):
    """A label as msgpack takes it: a target row becomes a list, a numpy scalar a number."""
    if isinstance(label, np.ndarray):
        return label.tolist()
    return label.item() if hasattr(label, "item") else label


def make_producer(bootstrap_or_conf) -> Producer:
    conf = ({"bootstrap.servers": bootstrap_or_conf} if isinstance(bootstrap_or_conf, str)
            else dict(bootstrap_or_conf))
    conf.setdefault("linger.ms", 20)
    conf.setdefault("batch.num.messages", 10000)
    conf.setdefault("compression.type", "lz4")
    conf.setdefault("enable.idempotence", True)
    conf.setdefault("queue.buffering.max.messages", 1_000_000)
    return Producer(conf)


class Deliveries:
    """The delivery reports of produced records (``on_delivery``): how many the broker
    acknowledged and the first failure, so that a producer says what really arrived.

    Examples
    --------
    >>> d = Deliveries()
    >>> d(None, None); d("topic does not exist", None)
    >>> d.ok, d.failed, d.first_error
    (1, 1, 'topic does not exist')
    """

    def __init__(self):
        self.ok = 0
        self.failed = 0
        self.first_error = None

    def __call__(self, err, msg) -> None:
        if err is None:
            self.ok += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = err


def produce_values(producer: Producer, topic: str, stream: str, values,
                   partition: int | None = None, headers: dict | None = None,
                   on_delivery=None) -> int:
    """Produce values keyed by ``stream``; returns the count. Does not flush.

    ``headers`` maps the index of a value to the headers of its record; ``on_delivery``
    (e.g. :class:`Deliveries`) gets each record's delivery report.
    """
    key = stream.encode()
    n = 0
    extra = {} if partition is None else {"partition": partition}
    if on_delivery is not None:
        extra["on_delivery"] = on_delivery
    for i, v in enumerate(values):
        if headers and i in headers:
            extra_i = {**extra, "headers": headers[i]}
        else:
            extra_i = extra
        while True:
            try:
                producer.produce(topic, v, key, **extra_i)
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
        if n % 10000 == 0:
            producer.poll(0)
    return n


def produce_stream(producer: Producer, topic: str, stream: str, X, y, *, names=None,
                   start_id: int = 0, chunk: int = 20000, partition: int | None = None,
                   rate: float | None = None, truth=None, truth_every: int = 1000,
                   batch: int = 0, on_delivery=None, label_delay: int | None = None) -> int:
    """Produce a whole stream in chunks (optionally paced at ``rate`` instances/s).

    ``batch``: rows per InstanceBatch record (0: one Instance per record). Returns the
    number of instances (rows) either way.

    ``truth``: the true importance of each feature per instance (``W`` of :func:`hyperplane`),
    declared every ``truth_every`` instances with an ``sf-truth`` header (a JSON map from
    feature name to weight) that ``streamforest evaluate`` compares rankings with.

    ``label_delay``: send every instance unlabelled and its label as a LabelEvent that many
    instances later (:func:`delayed_label_values`; one Instance per record).
    """
    n = len(X)
    t0 = time.monotonic()
    feature_names = names or [f"x{j}" for j in range(X.shape[1])]
    if label_delay is not None:
        return _produce_delayed(producer, topic, stream, X, y, label_delay, start_id, names,
                                partition, truth, truth_every, feature_names, on_delivery)
    if batch > 0:
        chunk = max(batch, chunk - chunk % batch)  # whole batches per chunk
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        if batch > 0:
            _produce_batches(producer, topic, stream, X[a:b], None if y is None else y[a:b],
                             batch, a, start_id + a, names, partition, truth, truth_every,
                             feature_names, on_delivery)
            _pace(rate, b, t0)
            continue
        vals = instance_values(stream, X[a:b], None if y is None else y[a:b],
                               start_id=start_id + a, ts0=start_id + a, names=names)
        headers = None
        if truth is not None:
            first = -(-a // truth_every) * truth_every
            headers = {i - a: [(TRUTH_HEADER, json.dumps(dict(zip(
                feature_names, map(float, truth[i])))).encode())]
                for i in range(first, b, truth_every)}
        produce_values(producer, topic, stream, vals, partition, headers, on_delivery)
        _pace(rate, b, t0)
    return n


def _produce_delayed(producer, topic, stream, X, y, delay, start_id, names, partition, truth,
                     truth_every, feature_names, on_delivery) -> int:
    """A stream whose labels come ``delay`` instances late (see :func:`produce_stream`)."""
    if y is None:
        raise ValueError("label_delay needs labels to delay")
    values, headers = delayed_label_values(stream, X, y, delay, start_id=start_id,
                                           ts0=start_id, names=names)
    if truth is not None:
        instances = [k for k in range(len(values)) if k not in headers]
        for i in range(0, len(X), truth_every):
            headers[instances[i]] = [(TRUTH_HEADER, json.dumps(dict(zip(
                feature_names, map(float, truth[i])))).encode())]
    produce_values(producer, topic, stream, values, partition, headers, on_delivery)
    return len(X)


def _pace(rate: float | None, done: int, t0: float) -> None:
    if rate:
        wait = (done / rate) - (time.monotonic() - t0)
        if wait > 0:
            time.sleep(wait)


def _produce_batches(producer, topic, stream, X, y, size, row0, first_id, names, partition,
                     truth, truth_every, feature_names, on_delivery=None) -> None:
    """InstanceBatch records of the chunk ``X`` (rows ``row0 ...`` of the stream, ids from
    ``first_id``); a batch holding a row at which the true weights are declared carries them
    (``sf-truth``: those of its first such row)."""
    vals = batch_values(stream, X, y, size=size, start_id=first_id, ts0=first_id, names=names)
    headers = {}
    for k in range(len(vals)):
        h = list(BATCH_HEADERS)
        if truth is not None:
            a, b = row0 + k * size, row0 + min((k + 1) * size, len(X))
            first = -(-a // truth_every) * truth_every
            if first < b:
                h.append((TRUTH_HEADER, json.dumps(dict(zip(
                    feature_names, map(float, truth[first])))).encode()))
        headers[k] = h
    produce_values(producer, topic, stream, vals, partition, headers, on_delivery)


def hyperplane(n: int, n_features: int = 10, n_drift_features: int = 2, seed: int = 1,
               mag_change: float = 0.001, sigma: float = 0.1, noise: float = 0.05):
    """``X, y, W`` of a rotating hyperplane (W: the true ``|weight|`` of each feature)."""
    from models.generators.hyperplane import RotatingHyperplane

    gen = RotatingHyperplane(n_features=n_features, n_drift_features=n_drift_features,
                             mag_change=mag_change, sigma=sigma, noise=noise, seed=seed)
    return gen.take(n)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("produce", help="produce a dataset, a hyperplane stream or a file")
    sub = p.add_subparsers(dest="produce_command", metavar="SOURCE")
    d = sub.add_parser("dataset", help="a dataset shipped with the package or in --data-dir")
    d.add_argument("name")
    d.add_argument("--data-dir", default=None)
    h = sub.add_parser("hyperplane", help="a rotating hyperplane stream")
    h.add_argument("--features", type=int, default=10)
    h.add_argument("--drift-features", type=int, default=2)
    h.add_argument("--mag-change", type=float, default=0.001)
    h.add_argument("--seed", type=int, default=1)
    h.add_argument("--truth-every", type=int, default=1000, metavar="N",
                   help="declare the true feature weights every N instances (sf-truth header, "
                   "read by streamforest evaluate; 0: never)")
    d.add_argument("--positional", action="store_true",
                   help="send x as a list in the dataset's column order (default: a map from "
                   "feature name to value, so that rankings name the features)")
    h.add_argument("--names", action="store_true", help="send x as a name -> value map")
    for q in (d, h):
        q.add_argument("--stream", default=None, help="stream id (default: the source name)")
        q.add_argument("-n", "--rows", type=int, default=None, help="number of instances")
        q.add_argument("--batch", type=int, default=0, metavar="N",
                       help="send N rows per record, as InstanceBatch records (0: one Instance "
                       "per record)")
        q.add_argument("--label-delay", type=_delay, default=None, metavar="N",
                       help="send every instance unlabelled and its label as a LabelEvent N "
                       "instances later")
        add_kafka_arguments(q)
        q.set_defaults(func=_cmd_produce)
    _add_file_parser(sub)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _delay(text: str) -> int:
    """``--label-delay``: a number of instances, 0 or more."""
    import argparse

    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of instances (0 or more)")
    return n


def _cmd_produce(args) -> int:
    from ...settings import settings_or_exit

    settings = settings_or_exit(args)
    if args.batch > 0 and args.label_delay is not None:
        raise UsageError("--label-delay sends one Instance per record: leave out --batch")
    if args.produce_command == "dataset":
        from .datasets import load

        try:
            ds = load(args.name, args.data_dir)
        except (ValueError, FileNotFoundError) as exc:  # an unknown name, a missing file
            raise UsageError(str(exc)) from None
        X, y, names = ds.X, ds.y, ds.feature_names
        stream = args.stream or args.name
        truth = None
        by_name = not args.positional
    else:
        X, y, W = hyperplane(args.rows or 10000, args.features, args.drift_features,
                             args.seed, args.mag_change)
        names = [f"x{j}" for j in range(X.shape[1])]
        stream = args.stream or "hyperplane"
        truth = W if args.truth_every > 0 else None
        by_name = args.names
    if args.rows:
        X, y = X[:args.rows], y[:args.rows]
    producer, topic = _checked_producer(settings)
    if producer is None:
        return 1
    deliveries = Deliveries()
    n = produce_stream(producer, topic, stream, X, y,
                       names=names if by_name else None, truth=truth,
                       truth_every=max(1, getattr(args, "truth_every", 0)),
                       batch=max(0, args.batch), on_delivery=deliveries,
                       label_delay=args.label_delay)
    if not _all_delivered(producer, deliveries, topic):
        return 1
    how = (f" in batches of {args.batch}" if args.batch > 0 else
           f", each label {args.label_delay} instances late" if args.label_delay is not None
           else "")
    print(f"produced {n} instances of stream {stream!r} to {topic}{how}")
    return 0


def _checked_producer(settings) -> tuple[Producer | None, str]:
    """``(producer, instances topic)``, the producer ``None`` (the reason on stderr) when the
    brokers do not answer or the topic does not exist."""
    conf = for_client(settings.kafka.as_librdkafka_dict(), "producer")
    conf["logger"] = quiet_client_logs()  # the outcome is one line, not librdkafka's retries
    producer = make_producer(conf)
    topic = settings.topics.instances
    problem = _topic_problem(producer, topic)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return None, topic
    return producer, topic


def _all_delivered(producer: Producer, deliveries: Deliveries, topic: str) -> bool:
    """Flush; ``False`` (what arrived on stderr) unless the broker acknowledged every record."""
    left = producer.flush(FLUSH_TIMEOUT)
    if deliveries.failed or left:
        why = (f"the first failure: {deliveries.first_error}" if deliveries.failed else
               f"{left} record(s) still unacknowledged after {FLUSH_TIMEOUT:.0f} s")
        print(f"error: {deliveries.ok} of {deliveries.ok + deliveries.failed + left} records "
              f"delivered to {topic}; {why}", file=sys.stderr)
        return False
    return True


def _add_file_parser(sub) -> None:
    from .rows import FORMATS

    f = sub.add_parser(
        "file", help="the rows of a CSV or JSON-lines file (or stdin)",
        description="Send every row of a CSV file (first line: the column names) or a JSON-lines "
        "file (one object per line) as an Instance. Every column the options do not name is a "
        "feature, sent by name. The whole file is checked as the worker checks instances "
        "before anything is sent: a row it would dead-letter is a usage error naming the line.")
    f.add_argument("path", metavar="PATH", help="a .csv or .jsonl file, or - for stdin")
    f.add_argument("--format", choices=FORMATS, default=None,
                   help="the format of PATH (default: from its extension; stdin needs it)")
    which = f.add_mutually_exclusive_group()
    which.add_argument("--stream", default=None, metavar="NAME",
                       help="stream id of every row (default: the file's name without extension)")
    which.add_argument("--stream-column", default=None, metavar="COL",
                       help="the column holding each row's stream id")
    f.add_argument("--label", default=None, metavar="COL",
                   help="the label column (default: none, the instances are unlabelled)")
    f.add_argument("--id", default=None, metavar="COL",
                   help="the instance id column (default: the row's number, from 0)")
    f.add_argument("--ts", default=None, metavar="COL",
                   help="the event time column, whole milliseconds (default: the row's number)")
    add_kafka_arguments(f)
    f.set_defaults(func=_cmd_produce_file)


def _cmd_produce_file(args) -> int:
    from pathlib import Path

    from schemas.instances import InstanceLimits

    from ...settings import settings_or_exit
    from .rows import Columns, file_format, read_records

    settings = settings_or_exit(args)
    fmt = file_format(args.path, args.format)
    stream = args.stream
    if stream is None and args.stream_column is None:
        if args.path == "-":
            raise UsageError("reading stdin (-) needs --stream NAME or --stream-column COL")
        stream = Path(args.path).stem
    w = settings.worker
    records = read_records(
        args.path, fmt, Columns(stream, args.stream_column, args.label, args.id, args.ts),
        max_bytes=w.max_message_bytes,
        limits=InstanceLimits(w.max_label_length, w.max_features, w.max_feature_name_length))
    producer, topic = _checked_producer(settings)
    if producer is None:
        return 1
    deliveries = Deliveries()
    for key, value in records.values:
        produce_values(producer, topic, key, (value,), on_delivery=deliveries)
    if not _all_delivered(producer, deliveries, topic):
        return 1
    n = len(records.values)
    names = [repr(s) for s in records.streams]
    streams = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    print(f"produced {n} instances ({records.labelled} labelled) of "
          f"{'stream' if len(records.streams) == 1 else 'streams'} {streams} to {topic}")
    return 0


#: seconds ``produce`` waits for the broker to acknowledge what it sent
FLUSH_TIMEOUT = 60.0
#: seconds ``produce`` waits for the topic's metadata before it sends anything
METADATA_TIMEOUT = 10.0


def _topic_problem(producer: Producer, topic: str) -> str | None:
    """Why nothing can be produced to ``topic`` (an unreachable broker, a topic that does
    not exist), or ``None``."""
    from confluent_kafka import KafkaException

    try:
        meta = producer.list_topics(topic, timeout=METADATA_TIMEOUT)
    except KafkaException as exc:
        return (f"no broker answered within {METADATA_TIMEOUT:.0f} s "
                f"({exc.args[0].str() if exc.args else exc}): check -b / "
                "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS")
    t = meta.topics.get(topic)
    if t is None or t.error is not None:
        return (f"topic {topic!r} does not exist (create it: streamforest topics create)"
                if t is None or t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART else
                f"topic {topic!r}: {t.error.str()}")
    return None
