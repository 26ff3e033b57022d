"""What the workers served: metrics of the predictions topic, without re-running anything.

Every prediction carries ``y_true`` when its instance was labelled, and predictions come in
input order per stream, so the prequential metrics of what production published can be read
straight off the predictions topic: per model (a pseudo-configuration each) and stream, the
same metrics as a replay. Records that are not valid predictions are counted by reason.
"""

from __future__ import annotations

import time
from collections import Counter

from schemas.codec import decode
from schemas.errors import DecodeError
from schemas.messages import Prediction

from .scores import CLASSIFICATION, REGRESSION, StreamMetrics


class Served:
    """Metrics of served predictions, per model and stream (see the module doc)."""

    def __init__(self, window: int, every: int, max_bytes: int):
        self.window, self.every, self.max_bytes = window, every, max_bytes
        self.metrics: dict[str, dict[str, StreamMetrics]] = {}
        self.counts: dict[str, dict[str, list[int]]] = {}  # model -> stream -> [n, labelled]
        self.malformed: Counter = Counter()
        self.seconds = 0.0

    def feed(self, p: int, msgs: list, offsets) -> None:
        t0 = time.perf_counter()
        by_key: dict[tuple[str, str], list] = {}
        for m in msgs:
            try:
                pred = decode(m.value(), Prediction, m.headers(), max_bytes=self.max_bytes)
            except DecodeError as exc:
                self.malformed[exc.code] += 1
                continue
            by_key.setdefault((pred.model, pred.stream), []).append(pred)
        for (model, stream), preds in by_key.items():
            self._add(model, stream, preds)
        self.seconds += time.perf_counter() - t0

    def _add(self, model: str, stream: str, preds: list) -> None:
        counts = self.counts.setdefault(model, {}).setdefault(stream, [0, 0])
        start = counts[0]
        counts[0] += len(preds)
        lab = [(start + i, p) for i, p in enumerate(preds) if p.y_true is not None]
        if not lab:
            return
        counts[1] += len(lab)
        per_model = self.metrics.setdefault(model, {})
        m = per_model.get(stream)
        if m is None:
            first = lab[0][1].y_true
            # a float is the one target of a single-target stream, as producers may send it
            task, n_targets = ((REGRESSION, len(first)) if isinstance(first, list) else
                               (REGRESSION, 1) if isinstance(first, float) else
                               (CLASSIFICATION, None))
            m = per_model[stream] = StreamMetrics(task, self.window, self.every, n_targets)
        m.update([p.y_true for _, p in lab], [p.y_pred for _, p in lab],
                 [pos for pos, _ in lab])

    def configurations(self) -> list[dict]:
        """One pseudo-configuration per model, for ``report.json``."""
        out = []
        for model in sorted(self.counts):
            streams = {}
            for stream, (n, n_lab) in sorted(self.counts[model].items()):
                m = self.metrics.get(model, {}).get(stream)
                streams[stream] = {
                    "task": m.task if m else None, "model": model, "instances": n,
                    "labelled": n_lab, "cumulative": m.cumulative() if m else {},
                    "window": m.windowed() if m else {}, "history": m.history() if m else [],
                    "alerts": [], "rankings": {}}
            out.append({"name": model, "config": {}, "profiles": [],
                        "throughput": {}, "memory": {}, "refused": {}, "streams": streams})
        return out
