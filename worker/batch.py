"""One partition's share of a consumed batch: messages in, per-stream rows; results out, messages.

:class:`BatchDecoder` turns a partition's messages into :class:`StreamRows` per stream (the
message key), in partition order, and creates the pipeline of a stream at its first valid
message. Every message it cannot take becomes a dead letter with its reason. The steady state
(plain instances of known streams) goes through the bulk kernel of :mod:`worker.wire` with no
per-message Python work; anything else is taken message by message, InstanceBatch records
(many rows in one record) by :mod:`worker.instance_batch`.

:class:`OutputEncoder` turns what a pipeline returned for a stream's live rows into the
messages of the output topics, in each topic's wire format (``output.*`` settings).

Neither knows about transactions: the worker produces what they return.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgpack
import numpy as np
from confluent_kafka import Message

from schemas.batches import is_instance_batch
from schemas.codec import CONTENT_TYPE, JSON, InstanceLimits, decode, decode_instance, instance_features
from schemas.deadletter import deadletter_headers, deadletter_record
from schemas.errors import OUTPUT_TOO_LARGE, DecodeError
from schemas.messages import FeatureArrival

from .instance_batch import BatchInput, encode_batched_predictions
from .keys import stream_of_key
from .pipeline import Pipeline, PipelineError, Profiles, make_pipeline
from .settings import OUTPUT_KINDS
from .wire import (
    decode_bulk,
    decode_fast,
    dumps_json,
    encode_predictions,
    encode_predictions_json,
    merge_blocks,
)

# unbound accessors, for map() over a consumed batch
_m_key, _m_value, _m_headers = Message.key, Message.value, Message.headers

_pack = msgpack.Packer(use_bin_type=True).pack

#: a field left out of a record (``None`` is a value)
_ABSENT = object()

#: message keys whose stream id is remembered (keys beyond it are decoded each time)
MAX_CACHED_KEYS = 100_000


class StreamRows:
    """Decoded rows of one stream within one batch.

    Filled either message by message (``rows``, ``ys``, ``ids``, ``ts``, ``offsets`` lists,
    see :meth:`finish`) or at once from bulk-decoded columns (:meth:`from_columns`).
    """

    __slots__ = ("rows", "ys", "offsets", "ids", "ts", "live", "X", "batches")

    def __init__(self):
        self.rows, self.ys, self.offsets, self.ids, self.ts = [], [], [], [], []
        self.live = 0  # index of the first live row (rows before it are replayed)
        self.X = None
        self.batches = None  # (start, stop) rows of each InstanceBatch, in order

    @classmethod
    def from_columns(cls, X, ys, offsets, ids, ts, live) -> StreamRows:
        sr = cls()
        sr.X, sr.ys, sr.offsets, sr.ids, sr.ts, sr.live = X, ys, offsets, ids, ts, live
        return sr

    def append(self, row, y, offset: int, ident, ts: int, live: bool) -> None:
        """One more row, in partition order (replayed rows all come before live ones)."""
        if not live:
            self.live += 1
        self.rows.append(row)
        self.ys.append(y)
        self.offsets.append(offset)
        self.ids.append(ident)
        self.ts.append(ts)

    def extend(self, X: np.ndarray, ys: list, offset: int, ids: list, ts: list,
               live: bool) -> None:
        """The rows of one InstanceBatch (all at ``offset``), kept as one block."""
        n = X.shape[0]
        if not live:
            self.live += n
        if self.batches is None:
            self.batches = []
        start = len(self.ys)
        self.batches.append((start, start + n))
        self.rows.append(X)  # a 2-D block among 1-D rows: see finish
        self.ys.extend(ys)
        self.offsets.extend([offset] * n)
        self.ids.extend(ids)
        self.ts.extend(ts)

    def finish(self, n_features: int) -> None:
        """Rows appended one by one -> a feature matrix and an offsets array."""
        if self.X is None:
            if self.batches is not None:  # blocks of InstanceBatches: stacked, not copied row by row
                self.X = np.concatenate([np.asarray(r, dtype=np.float64).reshape(-1, n_features)
                                         for r in self.rows])
            else:
                self.X = np.array(self.rows, dtype=np.float64).reshape(len(self.rows), n_features)
            self.offsets = np.array(self.offsets, dtype=np.int64)
            self.rows = None

    def __len__(self) -> int:
        return len(self.ys)


@dataclass(frozen=True)
class Caps:
    """What one stream and one message may hold; past it, input is dead-lettered.

    ``max_classes`` bounds the class labels of one stream; ``instance`` bounds labels, ids and
    feature names. The number of streams has no cap: the state budget passivates idle ones
    (:mod:`worker.residency`).
    """

    max_classes: int = 1000
    instance: InstanceLimits = InstanceLimits()
    feature_rows: int = 100_000  # rows a stream of features holds

    @classmethod
    def from_settings(cls, settings) -> Caps:
        w = settings.worker
        return cls(w.max_classes, InstanceLimits(
            w.max_label_length, w.max_features, w.max_feature_name_length),
            settings.learners.feature_stream_rows)


class BatchDecoder:
    """Decodes partitions' messages into per-stream rows (see module doc).

    Parameters
    ----------
    profiles : worker.pipeline.Profiles
        What a new stream's pipeline is made of (its profile).
    caps : Caps
        Classes per stream, and what one instance may carry.
    version : str
        Worker version, written into dead-letter headers.
    on_new_stream : callable, optional
        Called after a pipeline was created.

    Attributes
    ----------
    created : int
        Pipelines created so far (the worker's stream gauges follow it).
    """

    def __init__(self, profiles: Profiles, caps: Caps, version: str,
                 on_new_stream: Callable[[], None] | None = None):
        self.profiles = profiles
        self.caps = caps
        self.version = version
        self.on_new_stream = on_new_stream
        self.created = 0
        self.keys: dict[bytes, str] = {}  # message key -> stream id (decoded once)
        self.batches = BatchInput(self)  # InstanceBatch records (worker/instance_batch.py)

    def decode(self, task, pm: list, offsets: np.ndarray, dead: list,
               max_bytes: int) -> dict[str, StreamRows]:
        """Decode one partition's messages into per-stream rows; failures go to ``dead``.

        The whole batch is parsed at once (:func:`worker.wire.decode_bulk`); when every
        message is a plain instance of a known stream with the stream's width (the steady
        state), rows are grouped by stream with array operations and no per-message Python
        work beyond reading the messages. Otherwise messages are taken one by one, in order:
        bulk-decoded ones as they are, the rest through :func:`decode_fast` or full
        validation, which also creates pipelines and reports errors.
        """
        self.batches.reset()
        mkeys = list(map(_m_key, pm))
        values = list(map(_m_value, pm))
        headers = list(map(_m_headers, pm))
        if headers.count(None) != len(headers):  # messages with headers go the long way
            values = [v if h is None else None for v, h in zip(values, headers)]
        D = decode_bulk(values, mkeys, max_bytes)
        codes, names, width = self._key_codes(task.pipelines, mkeys)
        fast = D.ok & (D.nx == width[codes])
        if fast.all() and self._labels_known(task.pipelines, D, codes, names):
            return _group_bulk(D, codes, names, width, offsets, task.committed)
        return self._decode_each(task, pm, dead, max_bytes, D, fast)

    def _key_codes(self, pipelines: dict, mkeys: list):
        """Per message, the code of its key; per code, the known stream and its width
        (-1: decoded the long way: an unknown stream, or one that is not a classification
        stream yet, whose labels the bulk kernel does not check)."""
        uniq = dict.fromkeys(mkeys)  # first-seen order: outputs never depend on hash seeds
        if len(uniq) == 1:
            codes_of = {mkeys[0]: 0}
            codes = np.zeros(len(mkeys), dtype=np.int64)
        else:
            codes_of = {k: c for c, k in enumerate(uniq)}
            codes = np.fromiter(map(codes_of.__getitem__, mkeys), dtype=np.int64,
                                count=len(mkeys))
        width = np.full(len(codes_of), -1, dtype=np.int64)
        names = [None] * len(codes_of)
        for k, c in codes_of.items():
            stream = self.keys.get(k)
            pl = pipelines.get(stream) if stream is not None else None
            if pl is not None and _bulk_ready(pl):
                width[c], names[c] = pl.n_features, stream
        return codes, names, width

    def _decode_each(self, task, pm, dead, max_bytes, D, fast) -> dict[str, StreamRows]:
        """Message by message (a batch with new streams, unusual layouts or errors)."""
        streams: dict[str, StreamRows] = {}
        replay_until = task.committed
        fast_l = fast.tolist()
        for i, m in enumerate(pm):
            off = m.offset()
            live = off >= replay_until
            stream = self.keys.get(m.key())
            if fast_l[i]:  # decoded in bulk: a plain instance of this known stream
                a = int(D.xstart[i])
                _rows_of(streams, stream).append(
                    D.xs[a:a + int(D.nx[i])], int(D.y[i]) if D.has_y[i] else None, off,
                    int(D.ids[i]), int(D.ts[i]), live)
                continue
            if is_instance_batch(m.headers()):  # many rows in one record
                self.batches.take(task, m, live, dead, max_bytes, streams, _rows_of)
                continue
            taken = self._decode_fast(task.pipelines, m, stream, max_bytes)
            if taken is None:  # first message of a stream, anything unusual, and errors
                taken = self._decode_full(task, m, live, dead, max_bytes)
            if taken is not None:
                stream, row, y, ident, ts = taken
                _rows_of(streams, stream).append(row, y, off, ident, ts, live)
        return streams

    @staticmethod
    def _labels_known(pipelines, D, codes, names) -> bool:
        """Every label of the batch is one its stream has seen (new ones take the long way,
        which checks the class cap and registers them)."""
        for c, stream in enumerate(names):
            sel = (codes == c) & D.has_y
            if sel.any() and not pipelines[stream].task.knows(np.unique(D.y[sel]).tolist()):
                return False
        return True

    def _decode_fast(self, pipelines, m, stream, max_bytes):
        """``(stream, row, y, id, ts)`` of a plain, well-formed instance of a known stream
        with the stream's width and a label it knows, or ``None``."""
        if stream is None or m.headers() is not None:
            return None
        fast = decode_fast(m.value(), max_bytes)
        if fast is None or fast[0] != stream:
            return None
        pl = pipelines.get(stream)
        if pl is None or len(fast[3]) != pl.n_features or not _bulk_ready(pl):
            return None
        _stream, ident, ts, row, y = fast
        longest = self.caps.instance.max_label_length
        if (type(ident) is str and len(ident) > longest) or (
                y is not None and not pl.task.knows((y,))):
            return None  # the long way says why, or registers the new label
        return stream, row, y, ident, ts

    def _decode_full(self, task, m, live: bool, dead: list, max_bytes: int):
        """Full validation; creates the stream's pipeline at its first valid message.

        Returns ``(stream, row, y, id, ts)``, or ``None`` after dead-lettering the message
        (replayed messages were dead-lettered before: they are only skipped).
        """
        key = m.key()
        try:
            stream = stream_of_key(key)
        except PipelineError as exc:
            if live:
                self.dead_letter(dead, task, m, exc, exc.code)
            return None
        if len(self.keys) < MAX_CACHED_KEYS:
            self.keys[key] = stream
        try:
            stream, pl, inst = self._validated(task.pipelines, m, stream, max_bytes)
            row = self._row(task.pipelines, stream, pl, inst)
        except (DecodeError, PipelineError) as exc:
            if live:
                self.dead_letter(dead, task, m, exc, exc.code)
            return None
        return stream, row, inst.y, inst.id, inst.ts

    def _validated(self, pipelines, m, stream, max_bytes):
        """``(stream, pipeline or None, Instance)`` of a message that passes validation."""
        pl = pipelines.get(stream)
        fixed = pl is not None and not pl.arrivals  # a stream of features grows
        inst = decode_instance(
            m.value(), m.headers(), max_bytes=max_bytes,
            n_features=pl.n_features if fixed else None,
            feature_names=pl.feature_names if fixed else None,
            limits=self.caps.instance)
        if inst.stream != stream:
            raise PipelineError("key_mismatch", f"message key {stream!r} differs from "
                                f"the instance's stream {inst.stream!r}")
        return stream, pl, inst

    def _row(self, pipelines, stream, pl, inst) -> list:
        """The instance's feature row; a new stream's first row creates its pipeline.

        The label is checked by the stream's task (the first label fixes it when the
        stream's profile does not). A stream of features takes ``x`` as it came: its
        pipeline checks it against the columns known when the row's turn comes.
        """
        if pl is not None and pl.arrivals:
            if inst.y is not None:
                pl.check_label(inst.y)
            return inst.x
        if pl is not None:
            if pl.feature_names is None and isinstance(inst.x, dict):
                # names mean nothing to a stream whose columns have none: reading the map by
                # position would put values under the wrong features
                raise DecodeError("unknown_feature", "x is a map, but this stream's features have "
                                  "no names (its first instance sent x as a list): send x as a list "
                                  "in the stream's order", "x")
            row = instance_features(inst, pl.feature_names)
            if len(row) != pl.n_features:
                raise DecodeError("feature_count", f"expected {pl.n_features} features,"
                                  f" got {len(row)}", "x")
            if inst.y is not None:
                pl.check_label(inst.y)
            return row
        names = list(inst.x) if isinstance(inst.x, dict) else None
        row = instance_features(inst, names)
        cfg = self.profiles.for_stream(stream)
        if not row and not cfg.arrivals:
            raise DecodeError("feature_count", "x is empty: only a stream of features (a "
                              "profile with predictor feature_stream) may start without "
                              "features", "x")
        pl = make_pipeline(stream, cfg, len(row), names, self.caps.max_classes,
                           self.caps.feature_rows, self.caps.instance.max_features)
        if inst.y is not None:
            pl.check_label(inst.y)  # a stream whose first label is refused is not created
        pipelines[stream] = pl
        self.new_stream()
        return inst.x if pl.arrivals else row

    def new_stream(self) -> None:
        """A pipeline was created."""
        self.created += 1
        if self.on_new_stream is not None:
            self.on_new_stream()

    def decode_arrivals(self, task, records: list, dead: list,
                        max_bytes: int) -> list[Arrival]:
        """The feature records a merge released (``(message, instances before it)``), as
        :class:`Arrival` s in order; refused ones become dead letters (when live)."""
        out = []
        for m, n_before in records:
            live = m.offset() >= task.fcommitted
            try:
                arrival, pl = self._arrival(task.pipelines, m, max_bytes)
            except (DecodeError, PipelineError) as exc:
                if live:
                    self.dead_letter(dead, task, m, exc, exc.code, task.features)
                continue
            out.append(Arrival(arrival.stream, arrival, m, n_before, live))
        return out

    def _arrival(self, pipelines, m, max_bytes: int):
        """A valid FeatureArrival of a stream of features held here, with its pipeline."""
        stream = stream_of_key(m.key())
        arrival = decode(m.value(), FeatureArrival, m.headers(), max_bytes=max_bytes)
        if arrival.stream != stream:
            raise PipelineError("key_mismatch", f"message key {stream!r} differs from the "
                                f"arrival's stream {arrival.stream!r}")
        stream = arrival.stream
        limit = self.caps.instance.max_feature_name_length
        if len(arrival.feature) > limit:
            raise PipelineError("feature_name_length", f"feature name of {len(arrival.feature)} "
                                f"characters; the limit is {limit} "
                                "(STREAMFOREST_WORKER__MAX_FEATURE_NAME_LENGTH)")
        pl = pipelines.get(stream)
        if pl is None and self.profiles.for_stream(stream).arrivals:
            raise PipelineError("unknown_stream", f"no instance of stream {stream!r} has "
                                "arrived yet: send the instances before their features")
        if pl is None or not pl.arrivals:
            raise PipelineError(
                "no_feature_profile", f"stream {stream!r} is not a stream of features: give "
                "it a profile with predictor feature_stream (STREAMFOREST_PROFILES) to send "
                "it FeatureArrivals")
        return arrival, pl

    def dead_letter(self, dead: list, task, m, exc: Exception, code: str,
                    topic: str | None = None) -> None:
        """A refused record: original key, value and headers, then the explanation."""
        key, value, headers = deadletter_record(m.key(), m.value(), m.headers(), exc,
                                                topic or task.topic, task.partition,
                                                m.offset(), self.version)
        dead.append((key, value, headers, code))


@dataclass(frozen=True)
class Arrival:
    """A valid FeatureArrival and where it sits in the merged order of its partition."""

    stream: str
    arrival: FeatureArrival
    msg: Message
    n_before: int  # instance records released before it in the same release
    live: bool

    def values(self) -> dict[str, float]:
        """The feature's values by instance id (string form)."""
        v = self.arrival.values
        if isinstance(v, dict):
            return v
        return {str(i): x for i, x in zip(self.arrival.ids, v)}


def _bulk_ready(pl: Pipeline) -> bool:
    """The bulk kernels take integer labels unchecked: only for classification streams (and
    not for streams of features, whose rows the pipeline checks)."""
    return pl.task is not None and pl.task.name == "classification" and not pl.arrivals


def _rows_of(streams: dict, stream: str) -> StreamRows:
    sr = streams.get(stream)
    if sr is None:
        sr = streams[stream] = StreamRows()
    return sr


def _group_bulk(D, codes, names, width, offsets, replay_until) -> dict[str, StreamRows]:
    """Per-stream columns of a batch decoded in bulk (rows stay in partition order)."""
    streams: dict[str, StreamRows] = {}
    if width.shape[0] == 1:
        groups = [(0, np.arange(codes.shape[0]))]
    else:
        order = np.argsort(codes, kind="stable")
        cuts = np.flatnonzero(np.diff(codes[order])) + 1
        groups = [(int(codes[g[0]]), g) for g in np.split(order, cuts)]
    for c, idx in groups:
        offs = offsets[idx]
        ys = D.y[idx].tolist()
        unl = np.flatnonzero(~D.has_y[idx])
        for r in unl.tolist():
            ys[r] = None
        streams[names[c]] = StreamRows.from_columns(
            D.rows(idx, int(width[c])), ys, offs, D.ids[idx], D.ts[idx],
            int(np.searchsorted(offs, replay_until)))
    return streams


class OutputEncoder:
    """Messages of one stream's results: predictions, drift alerts, rankings, rejections.

    Parameters
    ----------
    topics : worker.settings.TopicSettings
        Output topic names.
    metrics : worker.metrics.WorkerMetrics
        Output and alert counters.
    version : str
        Worker version, written into dead-letter headers.
    max_bytes : dict of str to int, optional
        Largest record of each output topic (see :meth:`set_limits`).
    output : worker.settings.OutputSettings, optional
        Wire format of predictions, drift alerts and rankings (default: msgpack for all).

    Attributes
    ----------
    headers : dict of str to list
        Headers of every record of a topic, by topic, for
        :meth:`worker.kafka_io.TransactionalProducer.produce_many`: JSON topics say
        ``content-type: application/json``; msgpack topics are absent (no header, as always).

    Examples
    --------
    >>> from worker.metrics import WorkerMetrics
    >>> from worker.settings import load_settings
    >>> s = load_settings({"STREAMFOREST_OUTPUT__PREDICTIONS": "json"})
    >>> OutputEncoder(s.topics, WorkerMetrics(), "0", output=s.output).headers
    {'sf.predictions': [('content-type', b'application/json')]}
    """

    #: bytes of a record beyond its value: key, headers, record and batch framing (generous)
    RECORD_OVERHEAD = 1024

    def __init__(self, topics, metrics, version: str, max_bytes: dict[str, int] | None = None,
                 output=None):
        self.topics = topics
        self.metrics = metrics
        self.version = version
        self.limits: dict[str, int] = {}
        self.set_limits(max_bytes or {})
        json_kinds = [k for k in OUTPUT_KINDS if output is not None and output.format_of(k) == "json"]
        # chosen once: the msgpack default keeps its bulk encoder and header-less records
        self._encode_predictions = (encode_predictions_json if "predictions" in json_kinds
                                    else encode_predictions)
        self._dump_alert = dumps_json if "drift" in json_kinds else _pack
        self._dump_ranking = dumps_json if "rankings" in json_kinds else _pack
        self.json_predictions = "predictions" in json_kinds
        # one PredictionBatch per InstanceBatch instead of one Prediction per row
        self.prediction_batches = bool(getattr(output, "prediction_batches", False))
        json_header = [(CONTENT_TYPE, JSON.encode())]
        self.headers = {getattr(topics, k): json_header for k in json_kinds}

    def set_limits(self, max_bytes: dict[str, int]) -> None:
        """Largest record each output topic takes (its ``max.message.bytes``)."""
        self.limits = {t: n - self.RECORD_OVERHEAD for t, n in max_bytes.items()}

    def _fits(self, topic: str, key: bytes, values: list[bytes]) -> bool:
        limit = self.limits.get(topic)
        return limit is None or max(map(len, values), default=0) + len(key) <= limit

    def _too_large(self, task, stream: str, key: bytes, offset: int, topic: str, size: int,
                   dead: list) -> None:
        """Dead-letter the input whose output ``topic`` would refuse (instead of stalling)."""
        reason = (f"its output to {topic} would be {size} bytes, above the topic's limit of "
                  f"{self.limits[topic] + self.RECORD_OVERHEAD} (max.message.bytes)")
        headers = deadletter_headers("OutputTooLarge", reason, task.topic, task.partition,
                                     int(offset), self.version, code=OUTPUT_TOO_LARGE)
        dead.append((key, _pack({"stream": stream, "offset": int(offset)}), headers,
                     OUTPUT_TOO_LARGE))

    def _keep_fitting(self, task, stream, key, topic, values, offsets, dead) -> list[bytes]:
        kept = []
        for value, off in zip(values, offsets):
            if len(value) + len(key) <= self.limits[topic]:
                kept.append(value)
            else:
                self._too_large(task, stream, key, off, topic, len(value), dead)
        return kept

    def encode(self, task, stream: str, pl: Pipeline, res, sr: StreamRows, lo: int,
               outputs: list, dead: list) -> None:
        """Append ``(topic, key, values)`` groups for the live rows ``lo:`` of ``sr``."""
        key = stream.encode()
        if self.prediction_batches and sr.batches:
            encode_batched_predictions(self, task, stream, key, pl, res, sr, lo, outputs, dead)
        else:
            self._predictions(task, stream, key, pl, res, sr, lo, outputs, dead)
        self._alerts(task, stream, key, res, sr, lo, outputs, dead)
        self._rankings(task, stream, key, res, sr, lo, outputs, dead)
        self._rejected(task, stream, key, res.rejected, dead)

    def _rejected(self, task, stream: str, key: bytes, rejected: list, dead: list) -> None:
        """Rows a pipeline refused (``[(offsets, PipelineError)]``) as dead letters."""
        for offsets, err in rejected:
            for off in offsets:
                headers = deadletter_headers(type(err).__name__, err.reason, task.topic,
                                             task.partition, int(off), self.version,
                                             code=err.code)
                dead.append((key, _pack({"stream": stream, "offset": int(off)}), headers,
                             err.code))

    def encode_features(self, task, stream: str, pl, res, ts: int, offset: int,
                        outputs: list, dead: list) -> None:
        """Outputs of a stream of features (:class:`worker.pipeline.FeatureResult`): the
        predictions of held rows, an arrival's ranking (event time ``ts``, input ``offset``)
        and the rows its pipeline refused."""
        key = stream.encode()
        held = res.predictions
        if held is not None and len(held.ids):
            self.predictions(task, stream, key, pl.model_name, held.classes,
                             (held.ids, held.y_pred, held.y_true, held.proba, held.offsets,
                              held.ts), outputs, dead, n_features=held.n_features)
            self.metrics.outputs.labels(kind="prediction").inc(len(held.ids))
        rk = res.ranking
        if rk is not None:
            topic = self.topics.rankings
            value = self._dump_ranking({"v": 1, "stream": stream, "method": rk.method,
                                        "features": rk.features, "scores": rk.scores,
                                        "n_seen": rk.n_seen, "ts": int(ts)})
            if self._fits(topic, key, [value]):
                outputs.append((topic, key, [value]))
                self.metrics.outputs.labels(kind="ranking").inc()
            else:
                self._too_large(task, stream, key, offset, topic, len(value), dead)
        self._rejected(task, stream, key, res.rejected, dead)

    def predictions(self, task, stream: str, key: bytes, model: str, classes, rows,
                    outputs: list, dead: list, n_features=_ABSENT) -> None:
        """Append one group of Prediction records: the one builder of every caller.

        ``rows`` is ``(ids, y_pred, y_true, proba, offsets, ts)`` of consecutive rows
        predicted with the same ``classes``; ``n_features`` is written for streams of
        features only. Fields in the order of the :class:`schemas.messages.Prediction`
        wire format as published (shared fields first, then the row's); a record above the
        topic's limit is dead-lettered instead.
        """
        ids, y_pred, y_true, proba, offsets, ts = rows
        const = {"v": 1, "stream": stream, "model": model, "classes": classes,
                 "topic": task.topic, "partition": task.partition}
        if n_features is not _ABSENT:
            const["n_features"] = n_features
        ptopic = self.topics.predictions
        values = self._encode_predictions(const, ids, y_pred, y_true, proba, offsets, ts)
        if not self._fits(ptopic, key, values):
            values = self._keep_fitting(task, stream, key, ptopic, values, offsets, dead)
        outputs.append((ptopic, key, values))

    def _predictions(self, task, stream, key, pl, res, sr, lo, outputs, dead) -> None:
        ids, ts, offs, ys = sr.ids, sr.ts, sr.offsets, sr.ys
        for start, stop, classes, y_pred, proba in merge_blocks(res.blocks):
            a, z = lo + start, lo + stop
            self.predictions(task, stream, key, pl.model_name, classes,
                             (ids[a:z], y_pred, ys[a:z], proba, offs[a:z], ts[a:z]),
                             outputs, dead)
        self.metrics.outputs.labels(kind="prediction").inc(len(sr) - lo)

    def _alerts(self, task, stream, key, res, sr, lo, outputs, dead) -> None:
        topic = self.topics.drift
        for a in res.alerts:
            value = self._dump_alert({
                "v": 1, "stream": stream, "source": a.source, "level": a.level,
                "position": a.position, "feature": a.feature, "detail": a.detail,
                "ts": int(sr.ts[lo + a.row]),
            })
            if self._fits(topic, key, [value]):
                outputs.append((topic, key, [value]))
            else:
                self._too_large(task, stream, key, sr.offsets[lo + a.row], topic, len(value), dead)
            self.metrics.drift_alerts.labels(source=a.source, level=a.level).inc()
        if res.alerts:
            self.metrics.outputs.labels(kind="drift").inc(len(res.alerts))
        for (source, kind), n in res.events.items():  # held back by the alert rules
            self.metrics.learner_events.labels(source=source, kind=kind).inc(n)

    def _rankings(self, task, stream, key, res, sr, lo, outputs, dead) -> None:
        topic = self.topics.rankings
        for rk in res.rankings:
            value = self._dump_ranking({
                "v": 1, "stream": stream, "method": rk.method, "features": rk.features,
                "scores": rk.scores, "n_seen": rk.n_seen, "ts": int(sr.ts[lo + rk.row]),
            })
            if self._fits(topic, key, [value]):
                outputs.append((topic, key, [value]))
            else:
                self._too_large(task, stream, key, sr.offsets[lo + rk.row], topic, len(value),
                                dead)
        if res.rankings:
            self.metrics.outputs.labels(kind="ranking").inc(len(res.rankings))
