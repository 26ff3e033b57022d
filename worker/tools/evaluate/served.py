"""What the workers served: metrics of the predictions topic, without re-running anything.

Every prediction carries ``y_true`` when its instance came labelled, and predictions come in
input order per stream, so the prequential metrics of what production published can be read
straight off the predictions topic: per model (a pseudo-configuration each) and stream, the
same metrics as a replay. A prediction served without its label (``y_true`` null) is scored
when a LabelEvent labelled its instance later (:mod:`worker.tools.evaluate.late`), against
the prediction served and in label order; one never labelled is counted, not scored. Records
that are not valid predictions are counted by reason. Drift alerts are not read (the report
shows none: ``streamforest tail drift`` lists them).
"""

from __future__ import annotations

import time
from collections import Counter

from schemas.codec import decode
from schemas.errors import DecodeError
from schemas.messages import Prediction

from .scores import CLASSIFICATION, REGRESSION, StreamMetrics


class Served:
    """Metrics of served predictions, per model and stream (see the module doc).

    Parameters
    ----------
    window, every : int
        Sliding window of the windowed metrics, labelled rows between history points.
    max_bytes : int
        Larger records are malformed.
    late : callable, optional
        ``late(score)``: the :class:`~worker.tools.evaluate.late.LateLabels` that joins the
        labels that came later, told to call ``score`` for each; without it, only the
        predictions that carry ``y_true`` are scored.
    """

    def __init__(self, window: int, every: int, max_bytes: int, late=None):
        self.window, self.every, self.max_bytes = window, every, max_bytes
        self.metrics: dict[str, dict[str, StreamMetrics]] = {}
        # model -> stream -> [predictions, labelled, of which labelled later]
        self.counts: dict[str, dict[str, list[int]]] = {}
        self.position: dict[str, int] = {}  # predictions of each stream so far
        self.scored: dict[tuple[str, str], tuple[list, list, list]] = {}  # not yet in metrics
        self.malformed: Counter = Counter()
        self.late = late(self._late) if late is not None else None
        self.seconds = 0.0

    def feed(self, p: int, msgs: list, offsets) -> None:
        t0 = time.perf_counter()
        by_stream: dict[str, list] = {}
        needed: dict[tuple[str, int], int] = {}  # latest instance per instances partition
        for m in msgs:
            try:
                pred = decode(m.value(), Prediction, m.headers(), max_bytes=self.max_bytes)
            except DecodeError as exc:
                self.malformed[exc.code] += 1
                continue
            by_stream.setdefault(pred.stream, []).append(pred)
            key = (pred.topic, pred.partition)
            needed[key] = max(needed.get(key, pred.offset), pred.offset)
        if self.late is not None:
            self.late.ahead(needed)
        for stream, preds in by_stream.items():
            self._add(stream, preds)
        self._update()
        self.seconds += time.perf_counter() - t0

    def finish(self) -> None:
        """Every prediction fed: score the labels that came after the last."""
        if self.late is not None:
            t0 = time.perf_counter()
            try:
                self.late.finish()
            finally:
                self.late.close()
            self._update()
            self.seconds += time.perf_counter() - t0

    def _add(self, stream: str, preds: list) -> None:
        pos = self.position.get(stream, 0)
        late = self.late
        for pred in preds:
            self._counts(pred.model, stream)[0] += 1
            if late is not None:  # the labels before this instance, then it waits for its own
                late.prediction(stream, pos, pred)
            if pred.y_true is not None:
                self._score(stream, pred.model, pos, pred.y_true, pred.y_pred)
            pos += 1
        self.position[stream] = pos

    def _late(self, stream: str, model: str, position: int, y_true, y_pred) -> None:
        self._counts(model, stream)[2] += 1
        self._score(stream, model, position, y_true, y_pred)

    def _counts(self, model: str, stream: str) -> list[int]:
        return self.counts.setdefault(model, {}).setdefault(stream, [0, 0, 0])

    def _score(self, stream: str, model: str, position: int, y_true, y_pred) -> None:
        self._counts(model, stream)[1] += 1
        rows = self.scored.get((model, stream))
        if rows is None:
            rows = self.scored[model, stream] = ([], [], [])
        rows[0].append(y_true), rows[1].append(y_pred), rows[2].append(position)

    def _update(self) -> None:
        """The rows scored since the last update into their metrics, in order."""
        for (model, stream), (y_true, y_pred, positions) in self.scored.items():
            per_model = self.metrics.setdefault(model, {})
            m = per_model.get(stream)
            if m is None:
                first = y_true[0]
                # a float is the one target of a single-target stream, as producers may send it
                task, n_targets = ((REGRESSION, len(first)) if isinstance(first, list) else
                                   (REGRESSION, 1) if isinstance(first, float) else
                                   (CLASSIFICATION, None))
                m = per_model[stream] = StreamMetrics(task, self.window, self.every, n_targets)
            m.update(y_true, y_pred, positions)
        self.scored.clear()

    def labels(self) -> dict | None:
        """The labels that came later, for ``report.json`` (None: none was read, since every
        prediction carried its label)."""
        return None if self.late is None else self.late.summary()

    def configurations(self) -> list[dict]:
        """One pseudo-configuration per model, for ``report.json``."""
        out = []
        for model in sorted(self.counts):
            streams = {}
            for stream, (n, n_lab, n_late) in sorted(self.counts[model].items()):
                m = self.metrics.get(model, {}).get(stream)
                streams[stream] = {
                    "task": m.task if m else None, "model": model, "instances": n,
                    "labelled": n_lab, "labelled_later": n_late, "unlabelled": n - n_lab,
                    "cumulative": m.cumulative() if m else {},
                    "window": m.windowed() if m else {}, "history": m.history() if m else [],
                    "alerts": None, "rankings": {}}
            out.append({"name": model, "config": {}, "profiles": [],
                        "throughput": {}, "memory": {}, "refused": {}, "streams": streams})
        return out
