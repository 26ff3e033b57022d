"""InstanceBatch records in, PredictionBatch records out (:mod:`schemas.batches`).

An InstanceBatch (header ``sf-kind: instance-batch``) is many consecutive rows of one stream in
one record. :class:`BatchInput` takes such a record for :class:`worker.batch.BatchDecoder`:
it validates every row, checks the rows against the stream's pipeline (width, feature names,
labels), creates the pipeline at a stream's first record, and appends the rows to the stream's
:class:`worker.batch.StreamRows` as one block, so they run through the same test-then-train
pipeline as rows sent one per record, in the same order. A record is taken or refused whole: a
bad row dead-letters the batch, with the row's index in the ``sf-row`` header and in the
reason, and no row of it reaches the pipeline.

Every row of a batch shares the record's offset; a checkpoint is always taken between records,
so a restore replays a batch whole, and the replay reproduces the uninterrupted run.

With ``output.prediction_batches`` on, :func:`encode_batched_predictions` writes one
PredictionBatch per live InstanceBatch (rows in input order); rows that came as plain
Instances still get one Prediction each.
"""

from __future__ import annotations

import numpy as np

from schemas.batches import (
    KIND_HEADER,
    BatchRowError,
    batch_rows,
    decode_instance_batch,
)
from schemas.codec import encode_state
from schemas.deadletter import ROW

from .keys import stream_of_key
from .pipeline import PipelineError, make_pipeline
from .wire import dumps_json

#: header of a PredictionBatch record on the predictions topic
PREDICTION_BATCH = "prediction-batch"
_MSGPACK_BATCH_HEADERS = [(KIND_HEADER, PREDICTION_BATCH.encode())]


class BatchInput:
    """Takes InstanceBatch records for a :class:`worker.batch.BatchDecoder` (see module doc).

    Attributes
    ----------
    extra_live_rows : int
        Live rows taken beyond one per record since :meth:`reset` (checkpoints are due after a
        number of instances, not of records).
    """

    def __init__(self, decoder):
        self.decoder = decoder
        self.extra_live_rows = 0

    def reset(self) -> None:
        self.extra_live_rows = 0

    def take(self, task, m, live: bool, dead: list, max_bytes: int, streams: dict,
             rows_of) -> None:
        """Append the rows of batch record ``m`` to ``streams``, or dead-letter it (when
        live; replayed records were dead-lettered before and are only skipped)."""
        try:
            stream, X, batch, ys = self._rows(task.pipelines, m, max_bytes)
        except (BatchRowError, PipelineError) as exc:
            if live:
                self.decoder.dead_letter(dead, task, m, exc, exc.code)
                row = getattr(exc, "row", None)
                if row is not None:
                    dead[-1][2].append((ROW, str(row).encode()))
            return
        n = X.shape[0]
        rows_of(streams, stream).extend(X, ys, m.offset(), batch.row_ids(), batch.row_ts(),
                                        live)
        if live:
            self.extra_live_rows += n - 1

    def _rows(self, pipelines: dict, m, max_bytes: int):
        """``(stream, X in the stream's column order, batch, labels)`` of a valid batch."""
        dec = self.decoder
        key = m.key()
        stream = dec.keys.get(key) if key is not None else None
        if stream is None:
            stream = stream_of_key(key)
        batch = decode_instance_batch(m.value(), m.headers(), max_bytes=max_bytes,
                                      limits=dec.caps.instance)
        if batch.stream != stream:
            raise PipelineError("key_mismatch", f"message key {stream!r} differs from the "
                                f"batch's stream {batch.stream!r}")
        pl = pipelines.get(stream)
        created = pl is None
        if created:
            pl = self._new_pipeline(pipelines, stream, batch)
        if pl.arrivals:
            raise PipelineError("batch_not_supported", f"stream {stream!r} is a stream of "
                                "features: send its instances one per record")
        X = batch_rows(batch, pl.feature_names)
        if X.shape[1] != pl.n_features:
            raise BatchRowError("feature_count", f"the stream has {pl.n_features} features, "
                                f"the batch's rows have {X.shape[1]}", "X[0]", 0)
        ys = batch.row_labels()
        try:
            _check_labels(pl, ys)
        except BatchRowError:
            if created:
                pipelines.pop(stream, None)  # a refused first record creates no stream
            raise
        if created:
            dec.new_stream()
        return stream, X, batch, ys

    def _new_pipeline(self, pipelines: dict, stream: str, batch):
        """The pipeline of a stream whose first record is this batch (registered at once, so
        that the label checks can fix its task; :meth:`_rows` drops it if they fail)."""
        caps = self.decoder.caps
        cfg = self.decoder.profiles.for_stream(stream)
        if cfg.arrivals:
            raise PipelineError("batch_not_supported", f"stream {stream!r} is a stream of "
                                "features: send its instances one per record")
        names = list(batch.features) if batch.features is not None else None
        pl = make_pipeline(stream, cfg, batch.X.shape[1], names, caps.max_classes,
                           caps.feature_rows, caps.instance.max_features)
        pipelines[stream] = pl
        return pl


def _check_labels(pl, ys: list) -> None:
    """Every label is one the stream takes (the first new one may fix its task, new classes
    are registered as rows sent one by one would register them); else the first bad row.

    New classes of the rows before a bad one stay registered although the batch is refused:
    a replay of the same records registers them again, so a restored run stays identical."""
    task = pl.task
    if task is not None and task.name == "classification":
        try:
            distinct = set(ys)
        except TypeError:  # a list among the labels: refused below, with its row
            distinct = None
        if distinct is not None:
            distinct.discard(None)
            if task.knows(distinct):
                return  # the steady state: labels the stream has seen
    seen = set()
    for r, y in enumerate(ys):
        if y is None:
            continue
        key = (type(y), tuple(y)) if type(y) is list else (type(y), y)
        if key in seen:
            continue
        try:
            pl.check_label(y)
        except PipelineError as exc:
            raise BatchRowError(exc.code, exc.reason, f"y[{r}]", r) from None
        seen.add(key)


# =========================================================================== outputs


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
    """``(classes, proba)`` of a batch's rows from the blocks that predicted them.

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


def encode_batched_predictions(enc, task, stream: str, key: bytes, pl, res, sr, lo: int,
                               outputs: list, dead: list) -> None:
    """Predictions of a stream's live rows: one PredictionBatch per InstanceBatch, one
    Prediction per other row, in row order (``enc``: the :class:`worker.batch.OutputEncoder`).
    """
    blocks = list(_live_blocks(res.blocks))
    n_live = len(sr) - lo
    spans = [(a - lo, z - lo) for a, z in sr.batches if a >= lo]
    i = 0
    for a, z in spans:
        if i < a:
            _single_rows(enc, task, stream, key, pl, blocks, sr, lo, i, a, outputs, dead)
        _one_batch(enc, task, stream, key, pl, blocks, sr, lo, a, z, outputs, dead)
        i = z
    if i < n_live:
        _single_rows(enc, task, stream, key, pl, blocks, sr, lo, i, n_live, outputs, dead)
    enc.metrics.outputs.labels(kind="prediction").inc(n_live)


def _single_rows(enc, task, stream, key, pl, blocks, sr, lo, a, z, outputs, dead) -> None:
    """Rows ``a:z`` (live-relative) that came as plain Instances: one Prediction each."""
    ids, ts, offs, ys = sr.ids, sr.ts, sr.offsets, sr.ys
    for s0, s1, classes, y_pred, proba in _slices(blocks, a, z):
        p, q = lo + s0, lo + s1
        enc.predictions(task, stream, key, pl.model_name, classes,
                        (ids[p:q], y_pred, ys[p:q], proba, offs[p:q], ts[p:q]), outputs, dead)


def _one_batch(enc, task, stream, key, pl, blocks, sr, lo, a, z, outputs, dead) -> None:
    """The PredictionBatch of the InstanceBatch at live rows ``a:z``."""
    ptopic = enc.topics.predictions
    parts = list(_slices(blocks, a, z))
    classes, proba = batch_proba(parts, z - a)
    p, q = lo + a, lo + z
    offset = int(sr.offsets[p])
    msg = {"v": 1, "stream": stream, "model": pl.model_name, "ids": _plain(sr.ids[p:q]),
           "y_pred": [v for part in parts for v in part[3]], "classes": classes,
           "proba": proba, "y_true": list(sr.ys[p:q]), "topic": task.topic,
           "partition": task.partition, "offset": offset, "ts": _plain(sr.ts[p:q])}
    if enc.json_predictions:
        msg["proba"] = None if proba is None else proba.tolist()
        value = dumps_json(msg)
        headers = enc.headers[ptopic] + _MSGPACK_BATCH_HEADERS
    else:
        value = encode_state(msg)
        headers = _MSGPACK_BATCH_HEADERS
    if enc._fits(ptopic, key, [value]):
        outputs.append((ptopic, key, [value], headers))
    else:
        enc._too_large(task, stream, key, offset, ptopic, len(value), dead)


def _plain(values) -> list:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)
