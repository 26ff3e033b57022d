"""Records out: every output record and dead letter of the worker, and the poll's outbox.

:class:`OutputEncoder` turns what a stream's pipeline returned into the records of the
output topics, in each topic's wire format (``output.*`` settings): Predictions (one builder
for every caller, :meth:`OutputEncoder.predictions`), PredictionBatches (with
``output.prediction_batches`` on: one per live InstanceBatch, rows in input order; rows that
came as plain Instances still get one Prediction each), DriftAlerts and Rankings. Every
record's fields are in the order of its contract in :mod:`schemas` (:func:`record`); a
record above its topic's limit dead-letters its input instead.

:class:`Outbox` collects what one poll sends in its transaction: the output records and
the dead letters (refused records with their explanation, rows a pipeline refused, outputs
too large for their topic), and the latest-state records that repeat the poll's last ranking
and alert of each key (:mod:`worker.latest`). Neither knows about transactions: the worker
produces the outbox (:mod:`worker.transactions`).
"""

from __future__ import annotations

import msgpack
import numpy as np

from schemas.batches import PredictionBatch
from schemas.codec import CONTENT_TYPE, JSON, encode_state
from schemas.deadletter import deadletter_headers, deadletter_record
from schemas.errors import OUTPUT_TOO_LARGE
from schemas.kinds import KIND_HEADER
from schemas.messages import DriftAlert, Prediction, Ranking

from .latest import DRIFT_ALERT, RANKING, LatestState, alert_key, ranking_key
from .settings import OUTPUT_KINDS
from .wire import dumps_json, encode_predictions, encode_predictions_json, merge_blocks

_pack = msgpack.Packer(use_bin_type=True).pack

#: a field left out of a record (``None`` is a value)
_ABSENT = object()

#: header of a PredictionBatch record on the predictions topic
PREDICTION_BATCH = "prediction-batch"
_MSGPACK_BATCH_HEADERS = [(KIND_HEADER, PREDICTION_BATCH.encode())]

#: field order of each output contract (``v`` first), as declared in :mod:`schemas`
_ORDER = {c: tuple(c.model_fields) for c in (Prediction, PredictionBatch, DriftAlert, Ranking)}
_KNOWN = {c: frozenset(order) for c, order in _ORDER.items()}


def record(contract, **fields) -> dict:
    """The fields of one ``contract`` record in the contract's order, its version first.

    Fields the caller leaves out are left out (a Prediction's per-row fields are added by
    the bulk encoders of :mod:`worker.wire`, in the same order).

    Examples
    --------
    >>> record(Ranking, ts=5, stream="s1", method="gini", features=["a"], scores=[1.0],
    ...        n_seen=3)
    {'v': 1, 'stream': 's1', 'method': 'gini', 'features': ['a'], 'scores': [1.0], 'n_seen': 3, 'ts': 5}
    """
    order = _ORDER[contract]
    unknown = fields.keys() - _KNOWN[contract]
    if unknown:
        raise TypeError(f"{contract.__name__} has no field {sorted(unknown)}")
    fields["v"] = contract.model_fields["v"].default
    return {k: fields[k] for k in order if k in fields}


class Outbox:
    """What one poll sends in its transaction: output records, then dead letters.

    Parameters
    ----------
    version : str
        Worker version, written into dead-letter headers.

    Attributes
    ----------
    records : list
        ``(topic, key, values[, headers])`` groups, in order, for
        :meth:`worker.kafka_io.TransactionalProducer.produce_many`.
    dead : list
        Dead letters ``(key, value, headers, code)``, in order.
    latest : worker.latest.LatestState or None
        The latest-state records (made by the encoder when the topic is on).
    """

    __slots__ = ("version", "records", "dead", "latest")

    def __init__(self, version: str):
        self.version = version
        self.records: list[tuple] = []
        self.dead: list[tuple] = []
        self.latest: LatestState | None = None

    def latest_groups(self) -> list[tuple]:
        """The latest-state records, grouped as :attr:`records` (none when off)."""
        return [] if self.latest is None else self.latest.groups()

    def __bool__(self) -> bool:
        return bool(self.records or self.dead)

    def add(self, topic: str, key: bytes, values: list[bytes], headers=None) -> None:
        """One group of records of one key for one topic."""
        self.records.append((topic, key, values) if headers is None
                            else (topic, key, values, headers))

    def refused_codes(self) -> list[str]:
        """The code of each dead letter, in order."""
        return [d[3] for d in self.dead]

    def refuse(self, task, m, exc: Exception, code: str, topic: str | None = None,
               extra_headers=()) -> None:
        """A refused record: original key, value and headers, then the explanation (and
        ``extra_headers``, such as the row of an InstanceBatch that refused it)."""
        key, value, headers = deadletter_record(m.key(), m.value(), m.headers(), exc,
                                                topic or task.topic, task.partition,
                                                m.offset(), self.version)
        headers.extend(extra_headers)
        self.dead.append((key, value, headers, code))

    def refuse_row(self, task, stream: str, key: bytes, offset: int, kind: str, reason: str,
                   code: str) -> None:
        """An input row whose outputs are refused (the row itself is not kept: its stream and
        offset say where it is)."""
        headers = deadletter_headers(kind, reason, task.topic, task.partition, int(offset),
                                     self.version, code=code)
        self.dead.append((key, _pack({"stream": stream, "offset": int(offset)}), headers, code))


class OutputEncoder:
    """Records of one stream's results: predictions, drift alerts, rankings, rejections.

    Parameters
    ----------
    topics : worker.settings.TopicSettings
        Output topic names.
    metrics : worker.metrics.WorkerMetrics
        Output and alert counters.
    max_bytes : dict of str to int, optional
        Largest record of each output topic (see :meth:`set_limits`).
    output : worker.settings.OutputSettings, optional
        Wire format of predictions, drift alerts and rankings; ``None``: msgpack for all
        (not the settings' defaults, which make drift alerts and rankings JSON).

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
    >>> s = load_settings({"STREAMFOREST_OUTPUT__RANKINGS": "msgpack"})
    >>> OutputEncoder(s.topics, WorkerMetrics(), output=s.output).headers
    {'sf.drift': [('content-type', b'application/json')]}
    """

    #: bytes of a record beyond its value: key, headers, record and batch framing (generous)
    RECORD_OVERHEAD = 1024

    def __init__(self, topics, metrics, max_bytes: dict[str, int] | None = None, output=None):
        self.topics = topics
        self.metrics = metrics
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
        # the compacted topic repeating the last ranking and alert of each key (None: off)
        self.latest_topic = getattr(topics, "latest", None)

    def set_limits(self, max_bytes: dict[str, int]) -> None:
        """Largest record each output topic takes (its ``max.message.bytes``)."""
        self.limits = {t: n - self.RECORD_OVERHEAD for t, n in max_bytes.items()}

    # -- records that may be too large -----------------------------------------------------------

    def _fits(self, topic: str, key: bytes, values: list[bytes]) -> bool:
        limit = self.limits.get(topic)
        return limit is None or max(map(len, values), default=0) + len(key) <= limit

    def _too_large(self, task, stream: str, key: bytes, offset: int, topic: str, size: int,
                   outbox: Outbox) -> None:
        """Dead-letter the input whose output ``topic`` would refuse (instead of stalling)."""
        reason = (f"its output to {topic} would be {size} bytes, above the topic's limit of "
                  f"{self.limits[topic] + self.RECORD_OVERHEAD} (max.message.bytes)")
        outbox.refuse_row(task, stream, key, offset, "OutputTooLarge", reason, OUTPUT_TOO_LARGE)

    def _add_one(self, task, stream, key, topic, value, offset, outbox, headers=None) -> bool:
        """One record, or a dead letter for its input when it is too large; whether it fit."""
        if self._fits(topic, key, [value]):
            outbox.add(topic, key, [value], headers)
            return True
        self._too_large(task, stream, key, offset, topic, len(value), outbox)
        return False

    def _keep_fitting(self, task, stream, key, topic, values, offsets, outbox) -> list[bytes]:
        kept = []
        for value, off in zip(values, offsets):
            if len(value) + len(key) <= self.limits[topic]:
                kept.append(value)
            else:
                self._too_large(task, stream, key, off, topic, len(value), outbox)
        return kept

    # -- a stream of instances -------------------------------------------------------------------

    def encode(self, task, stream: str, pl, res, sr, lo: int, outbox: Outbox) -> None:
        """The records of a :class:`worker.pipeline.StreamResult` for the live rows ``lo:`` of
        ``sr`` (:class:`worker.intake.StreamRows`)."""
        key = stream.encode()
        if self.prediction_batches and sr.instance_batches:
            self._batched_predictions(task, stream, key, pl, res, sr, lo, outbox)
        else:
            self._predictions(task, stream, key, pl, res, sr, lo, outbox)
        self._alerts(task, stream, key, pl, res, sr, lo, outbox)
        self._rankings(task, stream, key, res, sr, lo, outbox)
        self._rejected(task, stream, key, res.rejected, outbox)
        if res.held_dropped:
            self.metrics.held_dropped.inc(res.held_dropped)
        if res.labels_joined:
            self.metrics.labels_joined.inc(res.labels_joined)

    def _rejected(self, task, stream: str, key: bytes, rejected: list, outbox: Outbox) -> None:
        """Rows a pipeline refused (``[(offsets, PipelineError)]``) as dead letters."""
        for offsets, err in rejected:
            for off in offsets:
                outbox.refuse_row(task, stream, key, off, type(err).__name__, err.reason,
                                  err.code)

    def predictions(self, task, stream: str, key: bytes, model: str, classes, rows,
                    outbox: Outbox, n_features=_ABSENT) -> None:
        """One group of Prediction records: the one builder of every caller.

        ``rows`` is ``(ids, y_pred, y_true, proba, offsets, ts)`` of consecutive rows
        predicted with the same ``classes``; ``n_features`` is written for streams of
        features only. The fields shared by the rows come first, then the row's (the
        Prediction wire format as published); a record above the topic's limit is
        dead-lettered instead.
        """
        ids, y_pred, y_true, proba, offsets, ts = rows
        shared = {"stream": stream, "model": model, "classes": classes, "topic": task.topic,
                  "partition": task.partition}
        if n_features is not _ABSENT:
            shared["n_features"] = n_features
        ptopic = self.topics.predictions
        values = self._encode_predictions(record(Prediction, **shared), ids, y_pred, y_true,
                                          proba, offsets, ts)
        if not self._fits(ptopic, key, values):
            values = self._keep_fitting(task, stream, key, ptopic, values, offsets, outbox)
        outbox.add(ptopic, key, values)

    def _predictions(self, task, stream, key, pl, res, sr, lo, outbox) -> None:
        ids, ts, offs, ys = sr.ids, sr.ts, sr.offsets, sr.ys
        for start, stop, classes, y_pred, proba in merge_blocks(res.blocks):
            a, z = lo + start, lo + stop
            rows = _instances_of(sr, a, z, (ids[a:z], y_pred, ys[a:z], proba, offs[a:z],
                                            ts[a:z]))
            if len(rows[0]):
                self.predictions(task, stream, key, pl.model_name, classes, rows, outbox)
        self.metrics.outputs.labels(kind="prediction").inc(_n_instances(sr, lo))

    def _batched_predictions(self, task, stream, key, pl, res, sr, lo, outbox) -> None:
        """One PredictionBatch per InstanceBatch, one Prediction per other row, in row order."""
        blocks = list(_live_blocks(res.blocks))
        n_live = len(sr) - lo
        spans = [(a - lo, z - lo) for a, z in sr.instance_batches if a >= lo]
        i = 0
        for a, z in spans:
            if i < a:
                self._single_rows(task, stream, key, pl, blocks, sr, lo, i, a, outbox)
            self._prediction_batch(task, stream, key, pl, blocks, sr, lo, a, z, outbox)
            i = z
        if i < n_live:
            self._single_rows(task, stream, key, pl, blocks, sr, lo, i, n_live, outbox)
        self.metrics.outputs.labels(kind="prediction").inc(_n_instances(sr, lo))

    def _single_rows(self, task, stream, key, pl, blocks, sr, lo, a, z, outbox) -> None:
        """Rows ``a:z`` (live-relative) that came as plain Instances: one Prediction each."""
        ids, ts, offs, ys = sr.ids, sr.ts, sr.offsets, sr.ys
        for s0, s1, classes, y_pred, proba in _slices(blocks, a, z):
            p, q = lo + s0, lo + s1
            rows = _instances_of(sr, p, q, (ids[p:q], y_pred, ys[p:q], proba, offs[p:q],
                                            ts[p:q]))
            if len(rows[0]):
                self.predictions(task, stream, key, pl.model_name, classes, rows, outbox)

    def _prediction_batch(self, task, stream, key, pl, blocks, sr, lo, a, z, outbox) -> None:
        """The PredictionBatch of the InstanceBatch at live rows ``a:z``."""
        ptopic = self.topics.predictions
        parts = list(_slices(blocks, a, z))
        classes, proba = batch_proba(parts, z - a)
        p, q = lo + a, lo + z
        offset = int(sr.offsets[p])
        msg = record(PredictionBatch, stream=stream, model=pl.model_name,
                     ids=_plain(sr.ids[p:q]), y_pred=[v for part in parts for v in part[3]],
                     classes=classes, proba=proba, y_true=list(sr.ys[p:q]), topic=task.topic,
                     partition=task.partition, offset=offset, ts=_plain(sr.ts[p:q]))
        if self.json_predictions:
            msg["proba"] = None if proba is None else proba.tolist()
            value = dumps_json(msg)
            headers = self.headers[ptopic] + _MSGPACK_BATCH_HEADERS
        else:
            value = encode_state(msg)
            headers = _MSGPACK_BATCH_HEADERS
        self._add_one(task, stream, key, ptopic, value, offset, outbox, headers)

    def _alerts(self, task, stream, key, pl, res, sr, lo, outbox) -> None:
        topic = self.topics.drift
        if res.alerts:  # counted by the stream's profile (bounded, unlike stream ids)
            profile = self.metrics.profile_label(pl.cfg.profile)
        for a in res.alerts:
            value = self._dump_alert(record(
                DriftAlert, stream=stream, source=a.source, level=a.level,
                position=a.position, feature=a.feature, detail=a.detail,
                ts=int(sr.ts[lo + a.row])))
            offset = sr.offsets[lo + a.row]
            if self._add_one(task, stream, key, topic, value, offset, outbox) \
                    and self.latest_topic is not None:
                self._latest(task, stream, key, topic, value, offset, outbox,
                             alert_key(stream, a.source, a.level), DRIFT_ALERT)
            self.metrics.drift_alerts.labels(profile=profile, source=a.source,
                                             level=a.level).inc()
        if res.alerts:
            self.metrics.outputs.labels(kind="drift").inc(len(res.alerts))
        for (source, kind), n in res.events.items():  # held back by the alert rules
            self.metrics.learner_events.labels(source=source, kind=kind).inc(n)

    def _ranking(self, task, stream, key, rk, ts: int, offset: int, outbox) -> bool:
        value = self._dump_ranking(record(
            Ranking, stream=stream, method=rk.method, features=rk.features, scores=rk.scores,
            n_seen=rk.n_seen, ts=int(ts)))
        topic = self.topics.rankings
        if not self._add_one(task, stream, key, topic, value, offset, outbox):
            return False
        if self.latest_topic is not None:
            self._latest(task, stream, key, topic, value, offset, outbox,
                         ranking_key(stream, rk.method), RANKING)
        return True

    def _latest(self, task, stream, key, topic, value, offset, outbox, latest_key: bytes,
                kind: str) -> None:
        """Repeat a record of ``topic`` just added on the latest-state topic, under
        ``latest_key`` (:mod:`worker.latest`). A record that topic would refuse dead-letters
        its input, as any output too large for its topic does."""
        latest = self.latest_topic
        if not self._fits(latest, latest_key, [value]):
            self._too_large(task, stream, key, offset, latest, len(value) + len(latest_key),
                            outbox)
            return
        if outbox.latest is None:
            outbox.latest = LatestState(latest)
        outbox.latest.put(latest_key, value, self.headers.get(topic, []), kind)

    def _rankings(self, task, stream, key, res, sr, lo, outbox) -> None:
        for rk in res.rankings:
            self._ranking(task, stream, key, rk, sr.ts[lo + rk.row], sr.offsets[lo + rk.row],
                          outbox)
        if res.rankings:
            self.metrics.outputs.labels(kind="ranking").inc(len(res.rankings))

    # -- a stream of features --------------------------------------------------------------------

    def encode_features(self, task, stream: str, pl, res, ts: int, offset: int,
                        outbox: Outbox) -> None:
        """The records of a :class:`worker.pipeline.FeatureResult`: the predictions of held
        rows, an arrival's ranking (event time ``ts``, input ``offset``) and the rows its
        pipeline refused."""
        key = stream.encode()
        held = res.predictions
        if held is not None and len(held.ids):
            self.predictions(task, stream, key, pl.model_name, held.classes,
                             (held.ids, held.y_pred, held.y_true, held.proba, held.offsets,
                              held.ts), outbox, n_features=held.n_features)
            self.metrics.outputs.labels(kind="prediction").inc(len(held.ids))
        rk = res.ranking
        if rk is not None and self._ranking(task, stream, key, rk, ts, offset, outbox):
            self.metrics.outputs.labels(kind="ranking").inc()
        self._rejected(task, stream, key, res.rejected, outbox)


def _n_instances(sr, lo: int) -> int:
    """Instances among the live rows ``lo:`` of ``sr`` (its LabelEvents are not)."""
    n = len(sr) - lo
    return n if sr.labels is None else n - int(sr.labels[lo:].sum())


def _instances_of(sr, a: int, z: int, rows: tuple) -> tuple:
    """``rows`` (``(ids, y_pred, y_true, proba, offsets, ts)`` of rows ``a:z`` of ``sr``)
    without the LabelEvents' rows: a prediction block may cover them (they carry the
    prediction served for their instance), and only instances get a Prediction."""
    if sr.labels is None or not sr.labels[a:z].any():
        return rows
    keep = np.flatnonzero(~sr.labels[a:z])
    return tuple(None if v is None else v[keep] if isinstance(v, np.ndarray)
                 else [v[k] for k in keep.tolist()] for v in rows)


def _live_blocks(blocks):
    """``(start, stop, classes, y_pred, proba)`` of each prediction block (rows relative to
    the first live row)."""
    for b in blocks:
        yield b.start, b.stop, b.classes, b.y_pred, (b.proba if b.classes else None)


def _slices(blocks, a: int, z: int):
    """The parts of ``blocks`` covering live rows ``a:z``, cut to them."""
    for start, stop, classes, y_pred, proba in blocks:
        lo, hi = max(a, start), min(z, stop)
        if lo < hi:
            yield (lo, hi, classes, y_pred[lo - start:hi - start],
                   None if proba is None else proba[lo - start:hi - start])


def batch_proba(parts, n: int) -> tuple[list | None, np.ndarray | None]:
    """``(classes, proba)`` of an InstanceBatch's rows from the blocks that predicted them.

    The classes are those of the last block; rows predicted while fewer classes were known
    get probability 0 for the others (the model could not predict a class it had not seen).

    Examples
    --------
    >>> parts = [(0, 1, ["a"], ["a"], np.array([[1.0]])),
    ...          (1, 2, ["a", "b"], ["b"], np.array([[0.4, 0.6]]))]
    >>> batch_proba(parts, 2)
    (['a', 'b'], array([[1. , 0. ],
           [0.4, 0.6]]))
    """
    classes = parts[-1][2] if parts else None
    if not classes:
        return None, None
    P = np.zeros((n, len(classes)))
    col = {c: j for j, c in enumerate(classes)}
    a0 = parts[0][0]
    for lo, hi, cl, _y, proba in parts:
        if not cl:
            continue
        if cl == classes:
            P[lo - a0:hi - a0] = proba
        else:
            P[lo - a0:hi - a0, [col[c] for c in cl]] = proba
    return list(classes), P


def _plain(values) -> list:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)
