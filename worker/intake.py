"""Records in: one partition's released records as per-stream rows and arrivals.

:class:`RecordDecoder` turns a partition's instance records into :class:`StreamRows` per
stream (the message key), in partition order, and its feature records into
:class:`Arrival` s. It is the one place that creates a stream's pipeline (at the stream's
first valid record, :meth:`RecordDecoder.new_pipeline`). Every record it cannot take
becomes a dead letter with its reason, in the poll's :class:`worker.output.Outbox`. The
steady state (plain instances of known streams) goes through the bulk kernel of
:mod:`worker.wire` with no per-message Python work; anything else is taken message by
message, every kind of record read by one call (:func:`schemas.records.read_record`).

An InstanceBatch record (header ``sf-kind: instance-batch``, :mod:`schemas.batches`) is many
consecutive rows of one stream in one record. :meth:`RecordDecoder.read_instances` validates every
row, checks the rows against the stream's pipeline (width, feature names, labels) and
appends them to the stream's :class:`StreamRows` as one block, so they run through the same
test-then-train pipeline as rows sent one per record, in the same order. A record is taken
or refused whole: a bad row dead-letters the batch, with the row's index in the ``sf-row``
header and in the reason, and no row of it reaches the pipeline. Every row of a batch shares
the record's offset; a checkpoint is always taken between records, so a restore replays a
batch whole, and the replay reproduces the uninterrupted run.

A LabelEvent record (header ``sf-kind: label``) is the label of an instance the stream sent
earlier without one: it joins the stream's rows as a row of its own, in partition order, and
the pipeline finds the instance it names among those it holds (:mod:`worker.pipeline.held`).
A record whose ``sf-kind`` names no kind is dead-lettered.

What a stream's pipeline takes is asked of the pipeline
(:class:`worker.pipeline.StreamPipeline`), whichever its kind. The records out are
:mod:`worker.output`'s; neither knows about transactions.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import repeat

import numpy as np
from confluent_kafka import Message

from schemas.batches import BatchRowError, BatchRows
from schemas.codec import decode
from schemas.deadletter import ROW
from schemas.errors import KEY_MISMATCH, DecodeError
from schemas.instances import InstanceLimits, InstanceRow
from schemas.kinds import KIND_HEADER, LABEL
from schemas.messages import FeatureArrival, LabelEvent
from schemas.records import read_record

from .keys import stream_of_key
from .pipeline import PipelineError, Profiles, StreamPipeline, make_pipeline
from .pipeline.protocol import not_a_stream_of_features
from .wire import decode_bulk

# unbound accessors, for map() over a poll
_m_key, _m_value, _m_headers = Message.key, Message.value, Message.headers
#: the headers of a LabelEvent as ``produce`` sends them (the bulk decoder reads these)
LABEL_HEADERS = [(KIND_HEADER, LABEL.encode())]

#: message keys whose stream id is remembered (keys beyond it are decoded each time)
MAX_CACHED_KEYS = 100_000


class StreamRows:
    """Decoded rows of one stream within one partition's released records.

    Filled either message by message (``rows``, ``ys``, ``ids``, ``ts``, ``offsets`` lists,
    see :meth:`finish`) or at once from bulk-decoded columns (:meth:`from_columns`).
    """

    __slots__ = ("rows", "ys", "offsets", "ids", "ts", "live", "X", "instance_batches",
                 "labels")

    def __init__(self):
        self.rows, self.ys, self.offsets, self.ids, self.ts = [], [], [], [], []
        self.live = 0  # index of the first live row (rows before it are replayed)
        self.X = None
        self.instance_batches = None  # (start, stop) rows of each InstanceBatch, in order
        # the rows that are LabelEvents (a list of row indices; a bool mask after finish)
        self.labels = None

    @classmethod
    def from_columns(cls, X, ys, offsets, ids, ts, live) -> StreamRows:
        sr = cls()
        sr.X, sr.ys, sr.offsets, sr.ids, sr.ts, sr.live = X, ys, offsets, ids, ts, live
        return sr

    def add_row(self, row, y, offset: int, ident, ts: int, live: bool) -> None:
        """One more row, in partition order (replayed rows all come before live ones)."""
        if not live:
            self.live += 1
        self.rows.append(row)
        self.ys.append(y)
        self.offsets.append(offset)
        self.ids.append(ident)
        self.ts.append(ts)

    def add_label(self, y, offset: int, ident, ts: int, live: bool) -> None:
        """A LabelEvent, in partition order: a row without features (``ident`` names the
        instance it labels)."""
        if self.labels is None:
            self.labels = []
        self.labels.append(len(self.ys))
        self.add_row(None, y, offset, ident, ts, live)

    def add_rows(self, X: np.ndarray, ys: list, offset: int, ids: list, ts: list,
               live: bool) -> None:
        """The rows of one InstanceBatch (all at ``offset``), kept as one block."""
        n = X.shape[0]
        if not live:
            self.live += n
        if self.instance_batches is None:
            self.instance_batches = []
        start = len(self.ys)
        self.instance_batches.append((start, start + n))
        self.rows.append(X)  # a 2-D block among 1-D rows: see finish
        self.ys.extend(ys)
        self.offsets.extend([offset] * n)
        self.ids.extend(ids)
        self.ts.extend(ts)

    def finish(self, n_features: int) -> None:
        """Rows appended one by one -> a feature matrix and an offsets array (a LabelEvent's
        row is zeros: the pipeline reads its instance's), and the LabelEvents' mask."""
        if self.X is None:
            if self.labels is not None:
                blank = [0.0] * n_features
                self.rows = [blank if r is None else r for r in self.rows]
            if self.instance_batches is not None:  # blocks of InstanceBatches: stacked, not copied row by row
                self.X = np.concatenate([np.asarray(r, dtype=np.float64).reshape(-1, n_features)
                                         for r in self.rows])
            else:
                self.X = np.array(self.rows, dtype=np.float64).reshape(len(self.rows), n_features)
            self.offsets = np.array(self.offsets, dtype=np.int64)
            self.rows = None
            if self.labels is not None:
                mask = np.zeros(len(self.ys), dtype=bool)
                mask[self.labels] = True
                self.labels = mask

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
    held_rows: int = 1000  # unlabelled instances a stream holds for their labels
    held_age_ms: int = 0  # and for how long (event time; 0: no bound)

    @classmethod
    def from_settings(cls, settings) -> Caps:
        w, learners = settings.worker, settings.learners
        return cls(w.max_classes, InstanceLimits(
            w.max_label_length, w.max_features, w.max_feature_name_length),
            learners.feature_stream_rows, learners.held_rows, learners.held_age_ms)


class RecordDecoder:
    """Decodes partitions' records into per-stream rows and arrivals (see the module doc).

    Parameters
    ----------
    profiles : worker.pipeline.Profiles
        What a new stream's pipeline is made of (its profile).
    caps : Caps
        Classes per stream, and what one instance may carry.

    Attributes
    ----------
    created : int
        Pipelines created so far (the worker's stream gauges follow it).
    extra_live_rows : int
        Live rows of InstanceBatch records beyond one per record, in the last :meth:`read_instances`
        (checkpoints are due after a number of instances, not of records).
    """

    def __init__(self, profiles: Profiles, caps: Caps):
        self.profiles = profiles
        self.caps = caps
        self.created = 0
        self.keys: dict[bytes, str] = {}  # message key -> stream id (decoded once)
        self.extra_live_rows = 0

    # -- the one place that creates pipelines --------------------------------------------------

    def new_pipeline(self, stream: str, n_features: int,
                     feature_names: list[str] | None) -> StreamPipeline:
        """The pipeline of a new stream, from its profile and its first record's columns (not
        registered: the caller registers it once its first record is taken)."""
        caps = self.caps
        return make_pipeline(stream, self.profiles.for_stream(stream), n_features,
                             feature_names, caps.max_classes, caps.feature_rows,
                             caps.instance.max_features, caps.held_rows, caps.held_age_ms)

    def register(self, pipelines, stream: str, pl: StreamPipeline) -> None:
        """A new stream's pipeline joins its partition's (its first record was taken)."""
        pipelines[stream] = pl
        self.created += 1

    # -- instance records ----------------------------------------------------------------------

    def read_instances(self, task, pm: list, offsets: np.ndarray, outbox,
               max_bytes: int) -> dict[str, StreamRows]:
        """Decode one partition's messages into per-stream rows; refused ones are
        dead-lettered in ``outbox`` (:class:`worker.output.Outbox`).

        The whole poll's share is parsed at once (:func:`worker.wire.decode_bulk`); when
        every message is a plain instance of a known stream with the stream's width (the
        steady state), rows are grouped by stream with array operations and no per-message
        Python work beyond reading the messages. Otherwise messages are taken one by one, in
        order: bulk-decoded ones as they are, the rest read by
        :func:`schemas.records.read_record` (the first record of a stream creates its
        pipeline; a refused one is dead-lettered).
        """
        self.extra_live_rows = 0
        mkeys = list(map(_m_key, pm))
        values = list(map(_m_value, pm))
        headers = list(map(_m_headers, pm))
        label = None
        n_plain = headers.count(None)
        if n_plain != len(headers):
            # a LabelEvent's header alone is read in bulk too; other headers go the long way
            label = _label_mask(headers)
            if n_plain + int(np.count_nonzero(label)) != len(headers):
                values = [v if h is None or e else None
                          for v, h, e in zip(values, headers, label.tolist())]
        D = decode_bulk(values, mkeys, max_bytes, label, self.caps.instance.max_label_length)
        codes, names, width = self._key_codes(task.pipelines, mkeys)
        fast = D.ok & (D.nx == width[codes])
        if label is not None:  # a LabelEvent of a known stream whose rows are read in bulk
            fast |= D.ok & D.label & (width[codes] >= 0)
        if fast.all() and self._labels_known(task.pipelines, D, codes, names):
            return _group_bulk(D, codes, names, width, offsets, task.committed)
        return self._decode_each(task, pm, outbox, max_bytes, D, fast)

    def _key_codes(self, pipelines: dict, mkeys: list):
        """Per message, the code of its key; per code, the known stream and its width
        (-1: decoded the long way: an unknown stream, or one whose rows the bulk kernel does
        not take, :attr:`worker.pipeline.StreamPipeline.bulk_ready`)."""
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
            if pl is not None and pl.bulk_ready:
                width[c], names[c] = pl.n_features, stream
        return codes, names, width

    @staticmethod
    def _labels_known(pipelines, D, codes, names) -> bool:
        """Every label of the poll is one its stream has seen (new ones take the long way,
        which checks the class cap and registers them), and a stream with LabelEvents among
        them takes them."""
        for c, stream in enumerate(names):
            sel = (codes == c) & D.has_y
            if not sel.any():
                continue
            pl = pipelines[stream]
            if not pl.task.knows(set(D.labels(np.flatnonzero(sel)))):
                return False
            events = sel & D.label
            if events.any():
                try:
                    pl.check_label_event(D.label_of(int(np.argmax(events))))
                except PipelineError:
                    return False
        return True

    def _decode_each(self, task, pm, outbox, max_bytes, D, fast) -> dict[str, StreamRows]:
        """Message by message (new streams, unusual layouts or errors)."""
        streams: dict[str, StreamRows] = {}
        replay_until = task.committed
        fast_l = fast.tolist()
        for i, m in enumerate(pm):
            off = m.offset()
            live = off >= replay_until
            stream = self.keys.get(m.key())
            try:
                if fast_l[i]:  # decoded in bulk: a plain instance or LabelEvent of a known stream
                    _take_bulk(task.pipelines[stream], D, i, off, live, streams, stream)
                else:  # any other record, of any kind
                    self._take(task.pipelines, m, live, max_bytes, streams)
            except (DecodeError, PipelineError) as exc:
                if live:  # replayed messages were dead-lettered before: only skipped
                    row = getattr(exc, "row", None)  # the bad row of an InstanceBatch
                    outbox.refuse(task, m, exc, exc.code, extra_headers=[
                        (ROW, str(row).encode())] if row is not None else ())
        return streams

    def _take(self, pipelines, m, live: bool, max_bytes: int, streams: dict) -> None:
        """A record of any kind, fully validated (:func:`schemas.records.read_record`), joins
        its stream's rows; the first valid record of a stream creates its pipeline. Raises
        what the record is refused for."""
        key = m.key()
        stream = self.keys.get(key) if key is not None else None
        if stream is None:
            stream = stream_of_key(key)
            if len(self.keys) < MAX_CACHED_KEYS:
                self.keys[key] = stream
        pl = pipelines.get(stream)
        record = read_record(m.value(), m.headers(), stream=stream, max_bytes=max_bytes,
                             limits=self.caps.instance,
                             columns=pl.fixed_columns if pl is not None else None)
        off = m.offset()  # the stream's rows are made once the record is taken
        if type(record) is LabelEvent:
            if pl is None:
                raise PipelineError("unknown_stream", f"no instance of stream {stream!r} has "
                                    "arrived: a LabelEvent follows the instance it labels")
            pl.check_label_event(record.y)
            _rows_of(streams, stream).add_label(record.y, off, record.id, record.ts, live)
        elif type(record) is BatchRows:
            self._check_batch(pipelines, stream, pl, record)
            _rows_of(streams, stream).add_rows(record.X, record.y, off, record.ids, record.ts,
                                             live)
            if live:
                self.extra_live_rows += record.X.shape[0] - 1
        else:
            row = self._row(pipelines, stream, pl, record)
            _rows_of(streams, stream).add_row(row, record.y, off, record.id, record.ts, live)

    def _check_batch(self, pipelines, stream, pl, rows: BatchRows) -> None:
        """The rows of a batch fit its stream; the first record of a stream creates its
        pipeline (a stream whose columns grow takes no batch)."""
        created = pl is None
        if created:
            pl = self.new_pipeline(stream, rows.X.shape[1], rows.features)
        pl.check_instance_batch()
        if rows.X.shape[1] != pl.n_features:
            raise BatchRowError("feature_count", f"the stream has {pl.n_features} features, "
                                f"the batch's rows have {rows.X.shape[1]}", "X[0]", 0)
        _check_labels(pl, rows.y)  # a refused first record creates no stream
        if created:
            self.register(pipelines, stream, pl)

    def _row(self, pipelines, stream, pl, record: InstanceRow):
        """The instance's row; a new stream's first row creates its pipeline.

        The label is checked by the stream's task (the first label fixes it when the
        stream's profile does not). A stream whose columns grow (a stream of features) takes
        ``x`` as it came: its pipeline checks it against the columns known when the row's
        turn comes.
        """
        if pl is None:
            return self._first_row(pipelines, stream, record)
        if record.y is not None:
            pl.check_label(record.y)
        return record.row if pl.fixed_columns is not None else record.x

    def _first_row(self, pipelines, stream, record: InstanceRow):
        """The first instance of a stream: its columns fix the new pipeline's."""
        if not record.row and not self.profiles.for_stream(stream).arrivals:
            raise DecodeError("feature_count", "x is empty: only a stream of features (a "
                              "profile with predictor feature_stream) may start without "
                              "features", "x")
        names = list(record.x) if isinstance(record.x, dict) else None
        pl = self.new_pipeline(stream, len(record.row), names)
        if record.y is not None:
            pl.check_label(record.y)  # a stream whose first label is refused is not created
        self.register(pipelines, stream, pl)
        return record.row if pl.fixed_columns is not None else record.x

    # -- feature records -----------------------------------------------------------------------

    def read_arrivals(self, task, records: list, outbox, max_bytes: int) -> list[Arrival]:
        """The feature records a merge released (``(message, instances before it)``), as
        :class:`Arrival` s in order; refused ones are dead-lettered (when live)."""
        out = []
        for m, n_before in records:
            live = m.offset() >= task.fcommitted
            try:
                arrival = self._arrival(task.pipelines, m, max_bytes)
            except (DecodeError, PipelineError) as exc:
                if live:
                    outbox.refuse(task, m, exc, exc.code, task.features)
                continue
            out.append(Arrival(arrival.stream, arrival, m, n_before, live))
        return out

    def _arrival(self, pipelines, m, max_bytes: int) -> FeatureArrival:
        """A valid FeatureArrival for a stream held here that takes arrivals."""
        stream = stream_of_key(m.key())
        arrival = decode(m.value(), FeatureArrival, m.headers(), max_bytes=max_bytes)
        if arrival.stream != stream:
            raise DecodeError(KEY_MISMATCH, f"message key {stream!r} differs from the "
                              f"arrival's stream {arrival.stream!r}")
        stream = arrival.stream
        limit = self.caps.instance.max_feature_name_length
        if len(arrival.feature) > limit:
            raise PipelineError("feature_name_length", f"feature name of {len(arrival.feature)} "
                                f"characters; the limit is {limit} "
                                "(STREAMFOREST_WORKER__MAX_FEATURE_NAME_LENGTH)")
        pl = pipelines.get(stream)
        if pl is None:
            if self.profiles.for_stream(stream).arrivals:
                raise PipelineError("unknown_stream", f"no instance of stream {stream!r} has "
                                    "arrived yet: send the instances before their features")
            raise not_a_stream_of_features(stream)
        pl.check_arrival()
        return arrival


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


def _rows_of(streams: dict, stream: str) -> StreamRows:
    sr = streams.get(stream)
    if sr is None:
        sr = streams[stream] = StreamRows()
    return sr


def _group_bulk(D, codes, names, width, offsets, replay_until) -> dict[str, StreamRows]:
    """Per-stream columns of records decoded in bulk (rows stay in partition order)."""
    streams: dict[str, StreamRows] = {}
    if width.shape[0] == 1:
        groups = [(0, np.arange(codes.shape[0]))]
    else:
        order = np.argsort(codes, kind="stable")
        cuts = np.flatnonzero(np.diff(codes[order])) + 1
        groups = [(int(codes[g[0]]), g) for g in np.split(order, cuts)]
    for c, idx in groups:
        offs = offsets[idx]
        sr = streams[names[c]] = StreamRows.from_columns(
            D.rows(idx, int(width[c])), D.labels(idx), offs, D.idents(idx), D.ts[idx],
            int(np.searchsorted(offs, replay_until)))
        events = D.label[idx]
        if events.any():  # the LabelEvents' mask (their rows are zeros)
            sr.labels = events
    return streams


def _take_bulk(pl, D, i: int, off: int, live: bool, streams: dict, stream: str) -> None:
    """Record ``i`` decoded in bulk joins its stream's rows, its label checked as the long
    way checks it (a new class counts against the stream's cap); raises what refuses it."""
    y = D.label_of(i)
    if D.label[i]:
        pl.check_label_event(y)
        _rows_of(streams, stream).add_label(y, off, D.ident_of(i), int(D.ts[i]), live)
        return
    if y is not None:
        pl.check_label(y)
    a = int(D.xstart[i])
    _rows_of(streams, stream).add_row(D.xs[a:a + int(D.nx[i])], y, off, D.ident_of(i),
                                      int(D.ts[i]), live)


def _label_mask(headers: list) -> np.ndarray:
    """Per record, whether its headers are the LabelEvent kind's header and nothing else (the
    records the bulk decoder reads as LabelEvents); one comparison per record, in C."""
    return np.fromiter(map(operator.eq, headers, repeat(LABEL_HEADERS)), dtype=np.bool_,
                       count=len(headers))


