"""``streamforest tail TOPIC``: the records of any of the product's topics, decoded.

``kcat -C`` shows msgpack as bytes; this command prints every record as one JSON object per
line on stdout, whatever the value's format (msgpack or JSON, told by the ``content-type``
header or sniffed from the bytes as :func:`schemas.codec.load` does), so ``jq`` and ``grep``
can read any topic.

Topics are named as configured (``sf.predictions``) or by their logical name
(``instances``, ``features``, ``predictions``, ``drift``, ``rankings``, ``deadletter``,
``checkpoints``, ``latest``: the ``STREAMFOREST_TOPICS__*`` setting of that name), or as
``streamforest evaluate --publish PREFIX`` names the topics it writes:
``PREFIX.predictions``, ``PREFIX.drift`` and ``PREFIX.rankings`` are read as their kind.

Output layout
-------------
Every line has these keys, in this order::

    {"topic": "sf.predictions", "partition": 0, "offset": 41, "timestamp": 1700000000123,
     "key": "s1", "format": "json", "value": {...}}

* ``timestamp``: the record's timestamp in ms (null if the record has none);
* ``key``: the message key as text (the stream id), null without a key;
* ``format``: ``"msgpack"`` or ``"json"``, the format the value was read in; null when
  it cannot be parsed, and for checkpoints, whose bytes are not shown;
* ``value``: the value's map as it is on the wire (bytes as ``{"__bytes__": base64}`` and
  NaN or infinities as ``{"__float__": "nan"}``, the codec's JSON tags), null when it cannot
  be parsed.

Then, only when they apply, in this order:

* ``key_base64``: a key that is not UTF-8 (``key`` is null);
* ``value_text`` (UTF-8 text) or ``value_base64`` (other bytes): a value that cannot be
  parsed, as it is;
* ``error``: ``{"code", "where", "reason"}`` of a value that is not a valid contract of its
  topic (instances: ``Instance``, features: ``FeatureArrival``, predictions: ``Prediction``,
  drift: ``DriftAlert``, rankings: ``Ranking``, latest: the contract its ``sf-kind`` header
  names), as :func:`schemas.codec.decode` reports it;
* ``deadletter``: for the dead-letter topic, the explanation from the ``sf-*`` headers
  (``error_class``, ``code``, ``reason``, ``topic``, ``partition``, ``offset``, ``version``);
  the value is the refused record's, parsed when possible (its contract is not checked);
* ``checkpoint``: for the checkpoints topic, a summary instead of the state: a manifest
  (``kind``, ``group``, ``input_topic``, ``partition``, ``offsets``, ``ts``, ``streams`` as
  ``{stream: {"offset", "chunks", "bytes"}}``) or a chunk (``kind``, ``group``,
  ``input_topic``, ``stream``, ``index``, ``bytes``, and ``offsets``, ``ts``, ``config`` when
  the chunk holds a whole envelope).

Reading
-------
With its own consumer: ``read_committed`` (records of aborted or open transactions are never
shown), partitions assigned by hand, no consumer group joined, no offsets committed. From
the beginning of every partition by default (as ``kcat -C``), from the end with
``--from-end``, or from ``--start``: an offset (the same in every partition) or a time (an
ISO date-time, ``@`` and milliseconds, or a time before now such as ``now-15m``), as
``streamforest evaluate --start`` reads it (:mod:`worker.tools.evaluate.ranges`: a time
starts each partition at its first record from then on). It stops at the end offsets read
at start, or with ``--follow`` keeps waiting for new records. Records of one partition come
in offset order; partitions are interleaved as they arrive. ``--stream GLOB`` keeps the
records of matching streams (the message key; for checkpoints, the chunk's stream, and the
matching part of each manifest; for the latest state, the stream of the key); ``--max N``
stops after N records. Ctrl-C and a closed
pipe (``| head``) end it quietly with exit code 0; an unknown topic, a bad ``--start`` or bad
settings, with exit code 2; unreachable brokers, 1.

The latest-state topic (:mod:`worker.latest`) is shown as the current picture: up to the end
offsets read at start, only the last record of each key is kept (a record with a null value
deletes its key), then written in key order (stream first); with ``--follow``, every later
record as it comes.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import json
import math
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

import msgpack
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from schemas.batches import InstanceBatch, PredictionBatch
from schemas.codec import JSON, MSGPACK, load, validate, wire_format
from schemas.deadletter import parse_deadletter_headers
from schemas.errors import DecodeError
from schemas.kinds import KIND_HEADER
from schemas.messages import DriftAlert, FeatureArrival, Instance, Prediction, Ranking

from .. import consume_errors
from ..checkpoint_store import inflate
from ..kafka_io import quiet_client_logs
from ..latest import DRIFT_ALERT, RANKING, parse_key
from ..settings import TOPIC_KINDS, add_kafka_arguments

#: logical names of the product's topics (fields of ``worker.settings.TopicSettings``)
KINDS = TOPIC_KINDS
CONTRACTS = {"instances": Instance, "features": FeatureArrival, "predictions": Prediction,
             "drift": DriftAlert, "rankings": Ranking}
#: kinds of the topics ``streamforest evaluate --publish PREFIX`` writes, ``PREFIX.<kind>``
PUBLISHED_KINDS = ("predictions", "drift", "rankings")
#: contracts of records whose ``sf-kind`` header names a batch (instances, predictions topics)
BATCH_CONTRACTS = {b"instance-batch": InstanceBatch, b"prediction-batch": PredictionBatch}
#: contracts of the latest-state topic's records, by their ``sf-kind`` header
LATEST_CONTRACTS = {RANKING.encode(): Ranking, DRIFT_ALERT.encode(): DriftAlert}
_FORMATS = {MSGPACK: "msgpack", JSON: "json"}
# values are read whole, whatever their size: this tool shows, it does not guard a worker
_NO_LIMIT = 1 << 62


class UnknownTopic(ValueError):
    """A topic that is not one of the product's, or that does not exist on the brokers."""


def resolve_topic(topics, name: str) -> tuple[str, str]:
    """``(logical name, topic)`` of a topic given by logical or configured name.

    Examples
    --------
    >>> from worker.settings import load_settings
    >>> topics = load_settings({"STREAMFOREST_TOPICS__PREDICTIONS": "preds"}).topics
    >>> resolve_topic(topics, "predictions"), resolve_topic(topics, "sf.drift")
    (('predictions', 'preds'), ('drift', 'sf.drift'))
    >>> resolve_topic(topics, "backfill.predictions")  # written by evaluate --publish backfill
    ('predictions', 'backfill.predictions')
    >>> resolve_topic(topics, "sf.prediction")
    Traceback (most recent call last):
    ...
    worker.tools.tail.UnknownTopic: unknown topic 'sf.prediction': give a logical name (instances, ...
    """
    if name in KINDS and getattr(topics, name) is None:
        raise UnknownTopic(f"the {name} topic is turned off (STREAMFOREST_TOPICS__"
                           f"{name.upper()} is empty)")
    if name in KINDS:
        return name, getattr(topics, name)
    for kind in KINDS:
        if getattr(topics, kind) == name:
            return kind, name
    prefix, _, last = name.rpartition(".")
    if prefix and last in PUBLISHED_KINDS:
        return last, name
    configured = ", ".join(t for t in (getattr(topics, kind) for kind in KINDS) if t)
    raise UnknownTopic(f"unknown topic {name!r}: give a logical name ({', '.join(KINDS)}), "
                       f"a configured topic name ({configured}; STREAMFOREST_TOPICS__*) or "
                       "PREFIX.predictions, .drift or .rankings (evaluate --publish PREFIX)")


# =========================================================================== one record


def jsonable(obj: Any) -> Any:
    """``obj`` with what JSON cannot carry replaced by the codec's JSON tags.

    Examples
    --------
    >>> jsonable({"x": [1.5, float("nan")], "b": b"\\x00", 7: None})
    {'x': [1.5, {'__float__': 'nan'}], 'b': {'__bytes__': 'AA=='}, '7': None}
    """
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if t is dict:
        return {k if type(k) is str else _key_text(k): jsonable(v) for k, v in obj.items()}
    if t is list or t is tuple:
        return [jsonable(v) for v in obj]
    if isinstance(obj, bytes | bytearray | memoryview):
        return {"__bytes__": _b64(obj)}
    if isinstance(obj, msgpack.ExtType):
        return {"__ext__": obj.code, "data": _b64(obj.data)}
    if hasattr(obj, "tolist"):  # arrays of batches (decoded for their contract): nested lists
        return jsonable(obj.tolist())
    return str(obj)


def _key_text(k: Any) -> str:
    """A map key that is not a string (msgpack allows them) as JSON object key text."""
    if isinstance(k, bytes):
        return k.decode("utf-8", "backslashreplace")
    return json.dumps(jsonable(k))


def _b64(data) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _error(exc: DecodeError) -> dict:
    return {"code": exc.code, "where": exc.where or None, "reason": exc.reason}


def _parsed(value, headers, out: dict, arrays: bool = False) -> dict | None:
    """The value's map into ``out`` (``format``, ``value``), or the reason it has none."""
    try:
        obj = load(value, headers, max_bytes=_NO_LIMIT, arrays=arrays)
    except DecodeError as exc:
        if value:
            try:  # text (a JSON value refused for what it holds) is shown as it came
                out["value_text"] = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                out["value_base64"] = _b64(value)
        out["error"] = _error(exc)
        return None
    out["format"] = _FORMATS[wire_format(value, headers)]  # the one load just read
    out["value"] = jsonable(obj)
    return obj


def _contract(kind: str, value, headers, out: dict) -> None:
    """Instances, features and outputs: the map, checked against the topic's contract (or
    the batch contract its ``sf-kind`` header names)."""
    model = next((BATCH_CONTRACTS.get(v) for k, v in headers or () if k == KIND_HEADER), None)
    obj = _parsed(value, headers, out, arrays=model is not None)
    if obj is not None:
        try:
            validate(obj, model or CONTRACTS[kind])
        except DecodeError as exc:
            out["error"] = _error(exc)


def _latest(value, headers, out: dict) -> None:
    """A latest-state record: the contract its ``sf-kind`` header names; a null value deletes
    its key (no error)."""
    if value is None:
        return
    model = next((LATEST_CONTRACTS.get(v) for k, v in headers or () if k == KIND_HEADER), None)
    obj = _parsed(value, headers, out)
    if obj is None:
        return
    if model is None:
        out["error"] = {"code": "unknown_kind", "where": KIND_HEADER,
                        "reason": f"a latest-state record names its contract in its {KIND_HEADER} "
                        f"header: {RANKING} or {DRIFT_ALERT}"}
        return
    try:
        validate(obj, model)
    except DecodeError as exc:
        out["error"] = _error(exc)


def _deadletter(value, headers, out: dict) -> None:
    """The refused record (parsed when possible, as it came) and why it was refused."""
    if value:
        kept = [(k, v) for k, v in headers or () if not k.startswith("sf-")]
        obj = _parsed(value, kept, out)
        if obj is None:
            out.pop("error", None)  # not decodable is why it is here: the headers say it
    try:
        out["deadletter"] = parse_deadletter_headers(headers)
    except ValueError as exc:  # a hand-made record with a malformed sf-* header
        out["deadletter"] = {"malformed": str(exc)}


def checkpoint_summary(key: bytes | None, value: bytes | None) -> dict:
    """What a record of the checkpoints topic is about, without the state.

    Keys are those of :mod:`worker.checkpoint_store`: ``s<0>group<0>input topic<0>stream<0>i`` for
    chunk ``i`` of a stream's envelope, ``m<0>group<0>input topic<0>partition`` for a
    partition's manifest (``<0>`` a zero byte).

    Examples
    --------
    >>> from worker.checkpoint_store import chunk_key
    >>> checkpoint_summary(chunk_key("g", "sf.instances", "s1", 1), b"...")
    {'kind': 'chunk', 'group': 'g', 'input_topic': 'sf.instances', 'stream': 's1', 'index': 1, 'bytes': 3}
    """
    parts = (key or b"").split(b"\x00")
    text = [p.decode("utf-8", "replace") for p in parts]
    size = len(value) if value is not None else 0
    if parts[0] == b"s" and len(parts) == 5:
        out = {"kind": "chunk", "group": text[1], "input_topic": text[2], "stream": text[3],
               "index": _int(text[4]), "bytes": size}
        out.update(_envelope(value))
        return out
    if parts[0] == b"m" and len(parts) == 4:
        out = {"kind": "manifest", "group": text[1], "input_topic": text[2],
               "partition": _int(text[3]), "bytes": size}
        out.update(_manifest(value))
        return out
    return {"kind": "unknown", "bytes": size}


def _int(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _unpacked(value: bytes | None) -> dict | None:
    """A whole msgpack map, extension types (arrays) left packed; None for a partial chunk."""
    if not value:
        return None
    try:
        obj = msgpack.unpackb(inflate(value), raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 (a chunk of a larger envelope is no map on its own)
        return None
    return obj if type(obj) is dict else None


def _envelope(value: bytes | None) -> dict:
    """Offsets, time and learners of a chunk that holds a whole envelope (never the state)."""
    env = _unpacked(value)
    if env is None:
        return {}
    return {k: jsonable(env[k]) for k in ("offsets", "ts", "config") if k in env}


def _manifest(value: bytes | None) -> dict:
    m = _unpacked(value)
    if m is None:
        return {"malformed": value is not None}
    streams = {str(s): dict(zip(("offset", "chunks", "bytes"), span))
               for s, span in (m.get("streams") or {}).items()}
    return {"offsets": jsonable(m.get("offsets")), "ts": m.get("ts"), "streams": streams}


def _key(key: bytes | None, out: dict) -> str | None:
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        out["key_base64"] = _b64(key)
        return None


def render(kind: str, msg, pattern: str | None = None) -> dict | None:
    """One record as the map of the module doc; None when ``pattern`` leaves it out.

    Parameters
    ----------
    kind : str
        Logical name of the record's topic (one of :data:`KINDS`).
    msg : confluent_kafka.Message
        The record.
    pattern : str, optional
        Glob on the stream (``fnmatch`` rules, case-sensitive).

    Examples
    --------
    >>> from confluent_kafka import Message
    >>> m = Message(topic="sf.drift", partition=0, offset=3, key=b"s1", timestamp=(1, 5),
    ...             value=b'{"v":1,"stream":"s1","source":"adwin","level":"drift",'
    ...                   b'"position":9,"ts":5}')
    >>> render("drift", m)  # doctest: +NORMALIZE_WHITESPACE
    {'topic': 'sf.drift', 'partition': 0, 'offset': 3, 'timestamp': 5, 'key': 's1',
     'format': 'json', 'value': {'v': 1, 'stream': 's1', 'source': 'adwin', 'level': 'drift',
     'position': 9, 'ts': 5}}
    >>> render("drift", m, "s2*") is None
    True
    """
    key, value, headers = msg.key(), msg.value(), msg.headers()
    ts_type, ts = msg.timestamp()
    out: dict[str, Any] = {"topic": msg.topic(), "partition": msg.partition(),
                           "offset": msg.offset(), "timestamp": ts if ts_type else None,
                           "key": None, "format": None, "value": None}
    out["key"] = _key(key, out)
    if kind == "checkpoints":
        summary = checkpoint_summary(key, value)
        if pattern is not None and not _keep_checkpoint(summary, pattern):
            return None
        out["checkpoint"] = summary
        return out
    if pattern is not None and not _stream_matches(kind, out["key"], pattern):
        return None
    if kind == "deadletter":
        _deadletter(value, headers, out)
    elif kind == "latest":
        _latest(value, headers, out)
    else:
        _contract(kind, value, headers, out)
    return out


def _stream_matches(kind: str, key: str | None, pattern: str) -> bool:
    """The key is the stream (on the latest-state topic: its ``stream`` field)."""
    if key is not None and kind == "latest":
        key = (parse_key(key.encode()) or {}).get("stream")
    return key is not None and fnmatch.fnmatchcase(key, pattern)


def _keep_checkpoint(summary: dict, pattern: str) -> bool:
    """A chunk of a matching stream; a manifest, cut to its matching streams, if any."""
    if summary["kind"] == "chunk":
        return fnmatch.fnmatchcase(summary["stream"], pattern)
    streams = summary.get("streams") or {}
    summary["streams"] = {s: v for s, v in streams.items() if fnmatch.fnmatchcase(s, pattern)}
    return bool(summary["streams"])


def dumps(record: dict) -> bytes:
    """One output line (UTF-8, newline included)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode() + b"\n"


# =========================================================================== the reader


def reader_config(settings) -> dict:
    """The group-less ``read_committed`` reader of :mod:`worker.kafka_io`, waiting longer for
    data (it follows a topic; restores want short waits) unless ``kafka.extra`` says."""
    from ..kafka_io import consumer_config

    conf = consumer_config(settings, group=False)
    if "fetch.wait.max.ms" not in settings.kafka.extra:
        conf["fetch.wait.max.ms"] = 200
    return conf


class Ends:
    """Per partition, the end offset read at start; a partition is done once it is reached.

    Under ``read_committed`` the last offsets may be transaction markers, never delivered:
    the end event of a partition (``enable.partition.eof``) at or past the end counts too.
    """

    def __init__(self, ends: dict[int, int], starts: dict[int, int]):
        self.ends = ends
        self.pending = {p for p, end in ends.items() if end > starts.get(p, 0)}

    def shown(self, partition: int, offset: int) -> bool:
        """Whether a record is before the end (to show); notes a reached end."""
        end = self.ends.get(partition, 0)
        if offset >= end - 1:
            self.pending.discard(partition)
        return offset < end

    def eof(self, partition: int, offset: int) -> None:
        """The partition's end event at ``offset``: done if that is at or past its end."""
        if offset >= self.ends.get(partition, 0):
            self.pending.discard(partition)


class Picture:
    """The latest-state topic up to its ends: the last record of each key, then in key order.

    Examples
    --------
    >>> lines = []
    >>> pic = Picture(lines.append)
    >>> for key, value in ((b"b", 1), (b"a", 2), (b"b", 3), (b"c", 4), (b"c", None)):
    ...     pic.add(key, {"key": key.decode(), "value": value})
    >>> pic.flush(None)
    2
    >>> [line.decode().strip() for line in lines]
    ['{"key":"a","value":2}', '{"key":"b","value":3}']
    """

    def __init__(self, write: Callable[[bytes], Any]):
        self.write = write
        self.last: dict[bytes | None, dict] = {}

    def add(self, key: bytes | None, record: dict) -> None:
        """A record; one with a null value deletes its key, as compaction will."""
        self.last.pop(key, None)  # re-inserted last: the dict keeps the latest only
        if record["value"] is not None or "error" in record:
            self.last[key] = record

    def flush(self, limit: int | None) -> int:
        """Write the picture in key order (at most ``limit`` lines); the number written."""
        records = sorted(self.last.values(), key=lambda r: (r["key"] is None, r["key"] or ""))
        self.last = {}
        records = records if limit is None else records[:limit]
        for record in records:
            self.write(dumps(record))
        return len(records)


def tail(consumer, kind: str, topic: str, write: Callable[[bytes], Any], *,
         from_end: bool = False, start: tuple[str, int | None] | None = None,
         follow: bool = False, pattern: str | None = None, limit: int | None = None,
         timeout_s: float = 30.0, flush=lambda: None) -> int:
    """Write the records of ``topic`` (see the module doc); the number written.

    ``consumer`` is an unassigned consumer with ``enable.partition.eof`` (closed by the
    caller). ``start`` is a bound of :func:`worker.tools.evaluate.ranges.parse_bound`
    (default: the beginning, or the end with ``from_end``). Raises :class:`UnknownTopic`
    when the topic does not exist.
    """
    from .evaluate.ranges import offset_of

    md = consumer.list_topics(timeout=timeout_s).topics.get(topic)
    if md is None or md.error is not None:
        raise UnknownTopic(f"topic {topic} does not exist on the brokers; create the topics "
                           "with `streamforest topics create`")
    parts = sorted(md.partitions)
    marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
             for p in parts}
    start = start or (("latest", None) if from_end else ("earliest", None))
    starts = {p: offset_of(consumer, topic, p, start, low, high, timeout_s)
              for p, (low, high) in marks.items()}
    ends = Ends({p: high for p, (_low, high) in marks.items()}, starts)
    if not follow and not ends.pending:
        return 0
    # from the beginning, whatever retention deleted since the watermarks were read
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if start[0] == "earliest"
                                    else starts[p]) for p in parts])
    # the latest state: held as a picture until every partition reached its end
    picture = Picture(write) if kind == "latest" and ends.pending else None
    written = 0
    while follow or ends.pending:
        msgs = consumer.consume(500, 0.5)
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    ends.eof(m.partition(), m.offset())
                elif consume_errors.consumer_error_kind(err) != "transient":
                    raise KafkaException(err)
                continue  # librdkafka retries: a follower rides out a broker restart
            shown = ends.shown(m.partition(), m.offset())
            if not follow and not shown:
                continue
            record = render(kind, m, pattern)
            if record is None:
                continue
            if picture is not None:
                picture.add(m.key(), record)
                continue
            write(dumps(record))
            written += 1
            if limit is not None and written >= limit:
                return written
        if picture is not None and not ends.pending:
            written += picture.flush(limit)
            picture = None
            if limit is not None and written >= limit:
                return written
        if msgs:
            flush()  # a follower sees records as they come, not when a buffer fills
    return written


# =========================================================================== the command


def _positive(text: str) -> int:
    """``--max``: a whole number, 1 or more."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return n


def add_parser(subparsers) -> None:
    """Register ``streamforest tail``."""
    p = subparsers.add_parser(
        "tail", help="print a topic's records decoded, one JSON object per line",
        description="Print the records of one of streamforest's topics as JSON lines "
        "(topic, partition, offset, timestamp, key, format, value, and for dead letters "
        "their reason, for checkpoints a summary). Reads read_committed, joins no group, "
        "commits nothing. Exit code 2 for an unknown topic.")
    p.add_argument("topic", metavar="TOPIC",
                   help="logical name (" + ", ".join(KINDS) + "), configured topic name, or "
                   "PREFIX.predictions, .drift or .rankings (what evaluate --publish PREFIX "
                   "writes); latest prints the current picture: the last record of each key")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", dest="from_end", action="store_false",
                       help="start at the beginning of every partition (the default)")
    start.add_argument("--from-end", dest="from_end", action="store_true",
                       help="start at the end: only records written from now on (with --follow)")
    start.add_argument("--start", metavar="BOUND", default=None,
                       help="start at an offset (the same in every partition) or a time: an ISO "
                       "date-time, @ms or a time before now (now-15m, now-2h, now-1d), as evaluate "
                       "--start")
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep waiting for new records (default: stop at the end offsets "
                   "read at start)")
    p.add_argument("--stream", metavar="GLOB", default=None,
                   help="only records of matching streams (the message key): *, ?, [seq]")
    p.add_argument("--max", metavar="N", type=_positive, default=None,
                   help="stop after N records")
    add_kafka_arguments(p)
    p.set_defaults(func=_cmd_tail, from_end=False)


def _cmd_tail(args) -> int:
    from ..settings import settings_or_exit
    from .evaluate.ranges import RangeError, parse_bound

    settings = settings_or_exit(args)
    try:
        kind, topic = resolve_topic(settings.topics, args.topic)
        start = parse_bound(args.start) if args.start is not None else None
    except (UnknownTopic, RangeError) as exc:
        print(f"streamforest tail: {exc}", file=sys.stderr)
        return 2
    return _run(settings, kind, topic, args, start)


def _run(settings, kind: str, topic: str, args, start) -> int:
    from confluent_kafka import Consumer

    out: BinaryIO = sys.stdout.buffer
    # stdout is the data and stderr the one line that says what failed: librdkafka's
    # retries (a refused connection every 50 ms while brokers are down) are not shown
    quiet_client_logs()
    consumer = Consumer(reader_config(settings))
    try:
        tail(consumer, kind, topic, out.write, from_end=args.from_end, start=start,
             follow=args.follow,
             pattern=args.stream, limit=args.max, timeout_s=settings.worker.startup_timeout_s,
             flush=out.flush)
        out.flush()
    except UnknownTopic as exc:
        print(f"streamforest tail: {exc}", file=sys.stderr)
        return 2
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        why = err.str() if isinstance(err, KafkaError) else str(err)
        print(f"streamforest tail: cannot read {topic} from the Kafka brokers at "
              f"{settings.kafka.bootstrap_servers} ({why}); check -b / "
              "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS and the network", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a follower ends
    finally:
        _close(consumer)
    return 0


def _close(consumer) -> None:
    """Close the reader; a second Ctrl-C while it closes still ends quietly."""
    try:
        consumer.close()
    except (KeyboardInterrupt, KafkaException, RuntimeError):
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m worker.tools.tail TOPIC ...``: the command without the rest of the CLI (a
    closed pipe and errors are handled as by ``streamforest``)."""
    from ..cli import run_command

    parser = argparse.ArgumentParser(prog="streamforest")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["tail", *(sys.argv[1:] if argv is None else argv)])
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
