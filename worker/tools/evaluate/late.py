"""Labels that came later, joined to the predictions served for their instances
(``evaluate --served``).

A prediction published with ``y_true`` null was served for an instance that came without its
label; when a :class:`~schemas.messages.LabelEvent` labelled that instance later, the worker
learned the row then. To score such a prediction, the served evaluation reads the LabelEvents
of the instances topic the predictions name (their ``topic`` and ``partition``), from the
first instance of the range on, and joins each label as the worker joined it:

* a label at offset ``L`` names the latest unlabelled prediction of its stream and id served
  for an instance before ``L`` (ids are typed: ``7`` and ``"7"`` are two instances);
* it joins only if the worker still held that instance: the worker's own bounded store
  (:class:`worker.pipeline.held.HeldInstances`, ``learners.held_rows`` rows per stream and
  ``learners.held_age_ms``) decides, so a label the worker refused (expired, a duplicate, of
  an unknown id) is counted by reason and not scored;
* it is scored in label order, against the prediction served, at the stream position of the
  latest instance before it: as a replay with ``--label-delay`` scores it.

Labels before the first instance of the range are not read; a later label of an instance
served before the range finds no prediction and counts as ``label_unknown_id``. The held
store starts empty at the start of the range, where the worker's may already hold rows: past
``held_rows`` waiting instances, a label the worker refused as expired may be scored here.

Two passes over the predictions: :func:`survey` finds each stream's instances (where its
labels start) and whether any prediction lacks its label (if none, nothing else is read); the
second pass (:class:`Served <worker.tools.evaluate.served.Served>`) feeds
:class:`LateLabels`, whose reader keeps a chunk ahead of the predictions read. Memory: per
stream, the held store (at most ``held_rows`` predictions waiting), and the labels read ahead
of their stream's predictions.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from confluent_kafka import TopicPartition

from schemas.codec import load
from schemas.errors import DecodeError
from schemas.kinds import INSTANCE, LABEL, record_kind
from schemas.labels import decode_label_event

from ...pipeline.errors import PipelineError
from ...pipeline.held import HeldInstances
from .ranges import PartitionRange
from .reader import read_range

#: records of the instances topic read past the predictions at a time: each read assigns the
#: partition anew, so one read covers many batches of predictions
CHUNK = 20_000
#: a label whose type is not its stream's (a list of targets for a class, or the reverse)
INVALID_TARGET = "invalid_target"
_NO_ROW = np.empty(0)  # the store holds served predictions here, not rows


@dataclass
class Span:
    """A stream's predictions in the range: the partition of its instances, the offset of
    the first, and how many predictions."""

    topic: str
    partition: int
    first: int
    n: int = 0


def survey(batches: Iterable[tuple[int, list, np.ndarray]], max_bytes: int
           ) -> tuple[dict[str, Span], bool]:
    """Each stream's :class:`Span`, and whether a prediction came without its label.

    Parameters
    ----------
    batches : iterable of (partition, messages, offsets)
        The predictions of the range (:func:`worker.tools.evaluate.reader.read_range`).
    max_bytes : int
        Larger records are skipped (the second pass counts them as malformed).

    Examples
    --------
    >>> import msgpack
    >>> from confluent_kafka import Message
    >>> def pred(i, off, y):
    ...     return Message(value=msgpack.packb({"stream": "s1", "id": i, "topic": "in",
    ...                                         "partition": 0, "offset": off, "y_true": y}))
    >>> survey([(0, [pred(1, 40, "a"), pred(2, 41, None)], None)], 1 << 20)
    ({'s1': Span(topic='in', partition=0, first=40, n=2)}, True)
    """
    spans: dict[str, Span] = {}
    unlabelled = False
    for _p, msgs, _offs in batches:
        for m in msgs:
            if record_kind(m.headers()) != INSTANCE:
                continue  # a PredictionBatch, which the served evaluation does not read
            try:
                d = load(m.value(), m.headers(), max_bytes=max_bytes)
            except DecodeError:
                continue
            stream, topic, part, off = (d.get(k) for k in ("stream", "topic", "partition",
                                                           "offset"))
            if not (type(stream) is str and type(topic) is str and type(part) is int
                    and type(off) is int):
                continue
            span = spans.get(stream)
            if span is None:
                span = spans[stream] = Span(topic, part, off)
            span.first = min(span.first, off)
            span.n += 1
            unlabelled = unlabelled or d.get("y_true") is None
    return spans, unlabelled


class LateLabels:
    """The LabelEvents of the predictions' instances, joined as the worker joined them (see
    the module doc).

    Parameters
    ----------
    reader : confluent_kafka.Consumer
        A group-less ``read_committed`` reader of its own (closed by :meth:`close`).
    spans : dict of str to Span
        The streams of the range (:func:`survey`); labels of other streams are not read.
    score : callable
        ``score(stream, model, position, y_true, y_pred)`` of each label joined, in order.
    held_rows, held_age_ms : int
        The worker's bounds of its held instances (``learners.*``).
    max_bytes : int
        Larger records are refused, as by the worker.
    limits : schemas.instances.InstanceLimits
        Lengths of labels and ids the worker takes.
    timeout_s : float
        Bound on each metadata call.
    """

    def __init__(self, reader, spans: dict[str, Span], score: Callable, held_rows: int,
                 held_age_ms: int, max_bytes: int, limits, timeout_s: float = 30.0):
        self.reader, self.spans, self.score = reader, spans, score
        self.bounds = (held_rows, held_age_ms)
        self.max_bytes, self.limits = max_bytes, limits
        self.held: dict[str, HeldInstances] = {}
        self.waiting: dict[str, deque] = {}  # labels read before their stream's predictions
        self.last: dict[str, int] = {}  # stream position of each stream's latest prediction
        self.targets: dict[str, bool] = {}  # whether a stream predicts targets (regression)
        self.left = {s: span.n for s, span in spans.items()}  # predictions still to come
        self.read, self.joined = 0, 0
        self.refused: Counter = Counter()
        self.missing: list[str] = []  # topics named by predictions that do not exist
        self.next, self.end = self._partitions(timeout_s)
        self.start = dict(self.next)

    def _partitions(self, timeout_s: float) -> tuple[dict, dict]:
        """Per instances partition, the offset its labels are read from, and its end."""
        start: dict[tuple[str, int], int] = {}
        for span in self.spans.values():
            key = (span.topic, span.partition)
            start[key] = min(start.get(key, span.first), span.first)
        end = {}
        for topic in sorted({t for t, _p in start}):
            md = self.reader.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if md is None or md.error is not None:
                self.missing.append(topic)
                continue
            for t, p in start:
                if t == topic and p in md.partitions:
                    end[t, p] = self.reader.get_watermark_offsets(
                        TopicPartition(t, p), timeout=timeout_s)[1]
        return {k: v for k, v in start.items() if k in end}, end

    # -- the predictions ---------------------------------------------------------------------

    def ahead(self, needed: dict[tuple[str, int], int]) -> None:
        """Read the labels of each instances partition at least up to its offset in
        ``needed`` (the latest instance of the batch of predictions about to be fed)."""
        for key, offset in needed.items():
            at = self.next.get(key)
            if at is not None and at <= offset:
                self._read(key, min(self.end[key], max(offset + 1, at + CHUNK)))

    def prediction(self, stream: str, position: int, pred) -> None:
        """One prediction of ``stream``, in order: the labels before its instance join
        first, then it waits for its own if it was served without one."""
        queue = self.waiting.get(stream)
        while queue and queue[0][0] < pred.offset:
            self._join(stream, queue.popleft()[1])
        self.last[stream] = position
        y = pred.y_pred if pred.y_pred is not None else pred.y_true
        if y is not None:
            self.targets[stream] = isinstance(y, list)
        if pred.y_true is None:
            self._store(stream).put(pred.id, _NO_ROW, (pred.model, pred.y_pred), pred.ts)
        self.left[stream] = self.left.get(stream, 0) - 1

    def finish(self) -> None:
        """Every prediction fed: the labels still waiting join, then those up to the end of
        each partition (read while one of its streams has a prediction waiting)."""
        self.left = dict.fromkeys(self.left, 0)
        for stream, queue in self.waiting.items():
            while queue:
                self._join(stream, queue.popleft()[1])
        for key in sorted(self.next):
            streams = [s for s, span in self.spans.items()
                       if (span.topic, span.partition) == key]
            while self.next[key] < self.end[key] and any(len(self.held.get(s, ())) for s in streams):
                self._read(key, min(self.end[key], self.next[key] + CHUNK))

    def close(self) -> None:
        self.reader.close()

    def summary(self) -> dict:
        """The labels part of the served report."""
        return {"label_events": self.read, "joined": self.joined,
                "refused": dict(sorted(self.refused.items())),
                "partitions": {f"{t}:{p}": [self.start[t, p], self.next[t, p]]
                               for t, p in sorted(self.next)},
                "missing_topics": self.missing,
                "held_rows": self.bounds[0], "held_age_ms": self.bounds[1]}

    # -- reading and joining -----------------------------------------------------------------

    def _read(self, key: tuple[str, int], stop: int) -> None:
        topic, p = key
        for _p, msgs, _offs in read_range(self.reader, topic,
                                          [PartitionRange(p, self.next[key], stop)]):
            for m in msgs:
                self._label(m)
        self.next[key] = stop

    def _label(self, m) -> None:
        """A record of the instances topic: a LabelEvent of a stream of the range joins, or
        waits for its stream's predictions to pass it."""
        if record_kind(m.headers()) != LABEL or m.key() is None:
            return
        stream = m.key().decode("utf-8", "replace")
        span = self.spans.get(stream)
        if span is None or (m.topic(), m.partition()) != (span.topic, span.partition) \
                or m.offset() < span.first:
            return  # another stream's, or the label of an instance before the range
        try:
            event = decode_label_event(m.value(), m.headers(), max_bytes=self.max_bytes,
                                       limits=self.limits)
        except DecodeError:
            return  # the worker dead-lettered it
        if event.stream != stream:
            return  # refused by the worker as well (key_mismatch)
        self.read += 1
        queue = self.waiting.setdefault(stream, deque())
        if self.left.get(stream, 0) > 0:
            queue.append((m.offset(), event))
            return
        while queue:  # its predictions are all fed: the labels read before it come first
            self._join(stream, queue.popleft()[1])
        self._join(stream, event)

    def _join(self, stream: str, event) -> None:
        targets = self.targets.get(stream)
        if targets is not None and isinstance(event.y, list) != targets:
            # refused before the join, as by the worker: its instance stays held
            self.refused[INVALID_TARGET] += 1
            return
        try:
            _row, (model, y_pred) = self._store(stream).take(event.id, event.ts)
        except PipelineError as exc:
            self.refused[exc.code] += 1
            return
        self.joined += 1
        self.score(stream, model, self.last[stream], event.y, y_pred)

    def _store(self, stream: str) -> HeldInstances:
        held = self.held.get(stream)
        if held is None:
            held = self.held[stream] = HeldInstances(0, *self.bounds)
        return held
