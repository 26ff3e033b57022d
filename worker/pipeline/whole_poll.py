"""A poll learned in one call per learner, its outputs given per segment.

:meth:`~worker.pipeline.engine.Pipeline.process` cuts its rows into segments: a ranker's
block (``learn_every`` rows, 10 by default), cut again where a ranking is due. Called once
per segment, the predictor and the rankers cost a Python call and its glue per 10 rows,
more than their kernels on streams of few features. Two learners can do a poll's work in one
call and still answer per segment:

* a predictor that counts its events per segment (``learns_in_segments``), when every row
  of the poll is a labelled instance: where the segments end then depends on the counters
  alone, so the poll is learned ahead and the segments read their answers
  (:class:`PlannedSegments`);
* a ranker that gives its importances after each of its measurements
  (``ranks_while_learning``): the segments hand it their rows and ask for rankings, both
  recorded; once the poll is through, it learns the rows in one call and the rankings are
  made from its importances as they stood at each ask (:class:`DeferredRankings`).

Every output is what one call per segment gives, in the same order.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np


class PlannedSegments:
    """The predictor's answers of one call over the poll, handed out segment by segment.

    Per segment ``(start, end, blocks, calls, learned)``: its prediction blocks, the
    predictor's calls one call per run would have made in it (``(k, stream positions of the
    rows learned, input row of its events)``, ``k`` the call's segment of the one call) and
    its labelled rows to score and learn
    (:class:`~worker.pipeline.planning.LabelledRows`: a label event's with the prediction
    served and its instance's row; a refused label event is not among them).
    """

    def __init__(self, segments: list):
        self.segments = segments

    @property
    def next_end(self) -> int:
        """Where the next segment ends."""
        return self.segments[0][1]

    def next_segment(self, i: int, j: int) -> tuple:
        """The answers for the segment ``i:j`` (the next one)."""
        segment = self.segments.pop(0)
        if segment[:2] != (i, j):  # the plan and the segments share one rule: this is a bug
            raise RuntimeError(f"segment {i}:{j} processed where the poll planned "
                               f"{segment[0]}:{segment[1]}")
        return segment[2:]


class DeferredRankings:
    """The rows the segments hand the rankers and the rankings they ask for, in order; made
    by :meth:`flush` from one call per ranker.

    Parameters
    ----------
    rankers : list
        The pipeline's ranker stages (none of them the predictor, none with events).
    """

    def __init__(self, rankers: list):
        self.rankers = rankers
        self.X: list[np.ndarray] = []
        self.y: list = []
        self.fed = 0  # rows handed so far
        self.asks: list[tuple[int, bool, int]] = []  # (input row, only changed, rows fed)

    def feed(self, X: np.ndarray, y) -> None:
        """Rows the rankers learn (``y``: the task's learning targets)."""
        self.X.append(X)
        self.y.append(y)
        self.fed += X.shape[0]

    def ask(self, row: int, only_changed: bool) -> None:
        """Rankings due at input row ``row``, of the rankers as they stand now."""
        self.asks.append((row, only_changed, self.fed))

    def flush(self, publish) -> None:
        """Learn the rows handed, one call per ranker, then make every ranking asked for:
        ``publish(row, only_changed, stage, n_seen, rankings)`` in the order asked."""
        traces = {}
        for stage in self.rankers:
            seen, before = int(stage.learner.n_seen), stage.learner.importances()
            if self.fed:
                X = self.X[0] if len(self.X) == 1 else np.concatenate(self.X)
                y = self.y[0] if len(self.y) == 1 else _joined(self.y)
                rows, imps = stage.learner.learn_many_ranked(X, y)
            else:
                rows, imps = np.zeros(0, np.int64), {}
            traces[id(stage)] = (rows.tolist(), imps, seen, before)
        for row, only_changed, fed in self.asks:
            for stage in self.rankers:
                rows, imps, seen, before = traces[id(stage)]
                m = bisect_right(rows, fed) - 1  # the last measurement made by then
                now = before if m < 0 else {key: v[m] for key, v in imps.items()}
                publish(row, only_changed, stage, seen + fed, stage.rankings(now))


def _joined(parts: list):
    """Learning targets of several segments as one: lists joined, arrays stacked."""
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return [v for part in parts for v in part]

