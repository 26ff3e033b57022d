"""A poll of labelled instances learned in one call per learner, answered per segment.

:meth:`~worker.pipeline.engine.Pipeline.process` cuts its rows into segments: a ranker's
block (``learn_every`` rows, 10 by default), cut again where a ranking is due. Called once
per segment, the predictor and the rankers cost a Python call and its glue per 10 rows,
more than their kernels on streams of few features. When every row of a poll is a labelled
instance, where the segments end depends on the counters alone, so the poll is learned
ahead in one call per learner that can report per segment: the predictor's events per
segment (``learns_in_segments``), a ranker's importances after each of its measurements
(``ranks_while_learning``). The segments then read their answers from a :class:`WholePoll`
instead of calling the learners; every output is what one call per segment gives.
"""

from __future__ import annotations

import numpy as np


class WholePoll:
    """The answers of one poll's calls, handed out segment by segment.

    ``segments``: per segment ``(k, start, end, classes, y_pred, proba)`` of the predictor's
    call; ``traces``: per ranker (by ``id`` of its stage) ``(rows, importances by key, rows
    seen before, importances before)`` of its call (:meth:`fed` counts the rows the
    segments have handed it so far).
    """

    def __init__(self, segments: list, traces: dict):
        self.segments = segments
        self.traces = traces
        self.fed = 0  # rows the rankers have learned, as the segments count them

    def next_segment(self, i: int, j: int) -> tuple:
        """The predictor's answers for the segment ``i:j`` (the next one)."""
        k, a, b, classes, y_pred, proba = self.segments.pop(0)
        if (a, b) != (i, j):  # the plan and the segments share one rule: this is a bug
            raise RuntimeError(f"segment {i}:{j} processed where the poll planned {a}:{b}")
        return k, classes, y_pred, proba

    def learned(self, stage) -> bool:
        """Whether ``stage`` learned the poll's rows ahead (its segments only count them)."""
        return id(stage) in self.traces

    def rankings(self, stage) -> tuple[int, list] | None:
        """``(rows seen, rankings)`` of a ranker that learned ahead, as it stood once it had
        learned the rows the segments handed it so far; ``None`` for any other."""
        trace = self.traces.get(id(stage))
        if trace is None:
            return None
        rows, imps, seen, before = trace
        m = int(np.searchsorted(rows, self.fed, side="right")) - 1
        now = before if m < 0 else {key: v[m] for key, v in imps.items()}
        return seen + self.fed, stage.rankings(now)
