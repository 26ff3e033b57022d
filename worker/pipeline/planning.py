"""Where a stream's poll is cut into segments, and the poll learned in one predictor call.

:meth:`~worker.pipeline.engine.Pipeline.process` processes its rows in segments whose ends
depend only on the stream (the rankers' block, a mini-batch, the next ranking), so a run's
outputs never depend on how its input was cut into polls (see the engine's module doc).
:class:`SegmentPlanning` holds that rule (:meth:`SegmentPlanning._segment_end`) and, for a
predictor that counts its events per segment, the plan of a whole poll from one kernel call
(:class:`~worker.pipeline.whole_poll.PlannedSegments`): the segments then read their answers
instead of calling the predictor. :class:`Rows` is what a poll knows of its rows beside ``X``
and ``y``.

:class:`SegmentPlanning` is a part of :class:`~worker.pipeline.engine.Pipeline`: it reads the
pipeline's stages (``task``, ``predictor``, ``selector``, ``held``), its counters
(``n_pending``, ``n_ranked``, ``n_instances``, ``next_ranking``, ``rank_rows``,
``prequential``, ``cfg``) and serves label events through its ``_take``.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import NamedTuple

import numpy as np

from .errors import PipelineError
from .results import PredictionBlock, StreamResult
from .whole_poll import PlannedSegments


class SegmentPlanning:
    """Segment ends and whole-poll plans of a :class:`~worker.pipeline.engine.Pipeline`
    (see the module doc)."""

    def _segment_end(self, i: int, lab_idx: list | None, rows: Rows, owed: int,
                     pending: int, seen: int, next_ranking: int) -> int:
        """The end of the segment of rows that starts at row ``i``: after the labelled row
        (of ``lab_idx``; ``None``: every row) that completes the rankers' block (``owed`` of
        its rows learned by the predictor,
        not yet by them; ``lab_idx`` ascends) or the mini-batch of a predictor defined on mini-batches
        (``pending`` rows waiting), or at the instance at which a ranking is due (``seen``
        instances so far, the next ranking at ``next_ranking``); the poll's end at the
        latest."""
        # at least one row: a state written before the rankers learned per block holds
        # up to a mini-batch of rows they have not learned; they learn at the first row
        need = max(1, self.rank_rows - owed)
        if not self.prequential:  # rows a mini-batch learner waits for
            need = max(1, min(need, self.cfg.batch_size - pending))
        if lab_idx is None:  # every row labelled
            j = min(rows.n, i + need)
        else:
            j = rows.n
            k = bisect_left(lab_idx, i)
            if k + need - 1 < len(lab_idx):
                j = lab_idx[k + need - 1] + 1
        if self.cfg.ranking_every and self.cfg.rankers:
            j = min(j, rows.after_instances(i, max(1, next_ranking - seen)))
        return j

    def _plan_poll(self, X, y, labelled, rows: Rows, emit: bool) -> PlannedSegments | None:
        """The predictor's answers for every segment from one call over the poll
        (:mod:`worker.pipeline.whole_poll`) when every row is a labelled instance and the
        predictor counts its events per segment; ``None`` otherwise (the segments then call
        it themselves).

        The segments are those :meth:`process` cuts (:meth:`_planned_bounds`).
        """
        learner = self.predictor.learner if self.predictor is not None else None
        if (self.task is None or self.selector is not None or not self.prequential
                or not getattr(learner, "learns_in_segments", False) or not labelled.all()
                or (rows.labels is not None and rows.labels.any())):
            return None
        bounds = self._planned_bounds(labelled, list(range(len(y))), rows)
        y_pred, proba, classes, known = self._call_segments(X, y, None, [b for _, b in bounds])
        plan = []
        for k, (a, b) in enumerate(bounds):
            K = known(b)
            block = PredictionBlock(a, b, classes[:K], y_pred[a:b],
                                    proba[a:b, :K] if emit else None)
            learned = LabelledRows(np.arange(a, b), y[a:b], y_pred[a:b], X[a:b],
                                   rows.offsets[a:b])
            plan.append((a, b, [block], [(k, rows.pos[a:b], b - 1)], learned))
        return PlannedSegments(plan)

    def _plan_mixed(self, X, y, labelled, rows: Rows, emit: bool,
                    out: StreamResult) -> PlannedSegments | None:
        """:meth:`_plan_poll` for a poll with unlabelled instances or label events, when the
        predictor also takes unlabelled rows in its kernel (``predicts_unlabelled_rows``):
        the label events take their instances from the held store and the unlabelled
        instances are held, in row order as the segments would; then one kernel call
        learns the poll, its segments the calls one call per run of rows would make (a
        segment holding a label event: one; any other: one per run of labelled rows); the
        rows only predicted between two calls go with the next (they count no event).
        ``None`` when nothing in the poll is labelled.

        The segments end where :meth:`process` cuts them: at labelled rows counted before
        any label event is refused (as its cuts are made before the segment's label events
        are joined), the rankers' block counting the rows each segment learned.
        """
        learner = self.predictor.learner if self.predictor is not None else None
        if (self.task is None or self.selector is not None or not self.prequential
                or not getattr(learner, "learns_in_segments", False)
                or not getattr(learner, "predicts_unlabelled_rows", False)
                or not labelled.any()):
            return None
        n = X.shape[0]
        events = [False] * n if rows.labels is None else rows.labels.tolist()
        lab = labelled.tolist()
        Xs = X if rows.labels is None else X.copy()  # label events' rows become their instances'
        served, later, keep = self._hold_and_join(rows, 0, events, Xs, lab, labelled, out)
        learns = np.flatnonzero(np.array(lab, dtype=bool))  # the rows learned, ascending
        bounds = self._planned_bounds(labelled, learns.tolist(), rows)
        ends = np.searchsorted(learns, [j for _i, j in bounds]).tolist()  # per segment
        calls = self._mixed_calls(bounds, events, lab, keep, rows, learns, ends)
        # the kernel's rows: the poll's but the refused label events (a row kept is labelled
        # exactly when its y is a label)
        whole = len(keep) == n
        Xk, ys = (Xs, y) if whole else (Xs[keep], [y[r] for r in keep])
        quiet = np.zeros(len(keep), dtype=bool) if rows.labels is None else \
            rows.labels if whole else rows.labels[keep]
        y_k, proba, classes, known = self._call_segments(Xk, ys, quiet,
                                                         [call[0] for call in calls])
        self._hold_later(later, y_k)
        if whole:
            kernel, preds = np.arange(n, dtype=np.int64), list(y_k)
        else:  # kernel row k is input row keep[k]
            kernel, preds = np.full(n, -1, dtype=np.int64), [None] * n
            kernel[keep] = np.arange(len(keep))
            for r, pred in zip(keep, y_k):
                preds[r] = pred
        for r, pred in served.items():
            preds[r] = y_k[pred.row] if type(pred) is Pending else pred
        full = self._event_proba(kernel, rows, proba) if emit and rows.labels is not None else None
        learned = LabelledRows.of_rows(learns, y, preds, Xs, rows.offsets)
        plan, c = [], 0
        for s, (i, j) in enumerate(bounds):
            blocks, mine = [], []
            while c < len(calls) and calls[c][1] <= j:
                mine.append(c)
                c += 1
            if any(events[i:j]):
                K = known(calls[mine[0]][0])
                blocks.append(PredictionBlock(i, j, classes[:K], preds[i:j],
                                              full[i:j, :K] if emit else None))
            else:
                for a, b in runs(lab, i, j):
                    ka, kb = int(kernel[a]), int(kernel[b - 1]) + 1
                    K = known(kb) if lab[a] else known(ka)
                    blocks.append(PredictionBlock(a, b, classes[:K], preds[a:b],
                                                  proba[ka:kb, :K] if emit else None))
            steps = [(k, calls[k][2], calls[k][3]) for k in mine if calls[k][3] >= 0]
            plan.append((i, j, blocks, steps, learned.part(ends[s - 1] if s else 0, ends[s])))
        return PlannedSegments(plan)

    def _hold_and_join(self, rows: Rows, i: int, events: list, Xs, lab: list, labelled,
                       out: StreamResult):
        """Rows ``i:`` (``events``, ``Xs`` and ``lab`` hold theirs; ``labelled``: the poll's
        labelled rows before any refusal) in order: each label event
        takes its instance from the held store (its row into ``Xs``; a refused one is no
        longer labelled, in ``lab``), each unlabelled instance is held until its prediction
        is known. Returns ``(served, later, keep)``: the predictions served for the label
        events taken (a :class:`Pending` for an instance held in the same call), what the
        store needs once the call's predictions are known (:meth:`_hold_later`) and the rows
        (from ``i``) the kernel takes.

        When the order of the poll's takes and holds cannot matter
        (:meth:`~worker.pipeline.held.HeldInstances.orderless`), the events take first and
        the instances are held after the call, with their predictions; otherwise row by
        row, each instance held with a placeholder settled after the call."""
        held, ids, ts = self.held, rows.ids, rows.ts
        n = len(events)
        takes, puts = rows.joins(labelled, i, i + n)
        put_ids = [ids[i + r] for r in puts]
        take_ids = [ids[i + r] for r in takes]
        if not held.orderless(put_ids, puts, take_ids, takes):
            return self._hold_and_join_in_order(rows, i, events, Xs, lab, out)
        put_at = dict(zip(put_ids, puts))  # the instances still to hold, by id
        taken, joined, refused = held.take_many(take_ids, takes, put_at)
        # label event -> the prediction its instance was served
        served: dict[int, object] = dict(zip(taken.at, taken.served))
        for r, exc in refused:
            refuse_label(rows, i, r, lab, out, exc)
        if taken.at:  # the rows held before
            Xs[taken.at] = taken.X
        if joined:  # instances held in this poll: their rows are this poll's
            Xs[[r for r, _p in joined]] = Xs[[p for _r, p in joined]]
        gone = {r for r, _exc in refused}
        keep = [r for r in range(n) if r not in gone] if gone else list(range(n))
        keep_at = np.asarray(keep, dtype=np.int64)  # kernel row k is input row keep[k]
        at = np.searchsorted(keep_at, [p for _r, p in joined]).tolist()
        for (r, _p), k in zip(joined, at):
            served[r] = Pending(k)
        puts = list(put_at.values())
        later = HoldLater(None, list(put_at), Xs[puts], [int(ts[i + r]) for r in puts],
                          np.searchsorted(keep_at, puts).tolist())
        return served, later, keep

    def _hold_and_join_in_order(self, rows: Rows, i: int, events: list, Xs, lab: list,
                                out: StreamResult):
        """:meth:`_hold_and_join` row by row."""
        held, hold, ids, ts = self.held, rows.holding, rows.ids, rows.ts
        served: dict[int, object] = {}
        pending: list = []  # (id, kernel row) of rows held before their prediction is known
        keep: list[int] = []
        for r in range(len(events)):
            if events[r]:
                pred = self._take(rows, i, r, Xs, lab, out)
                if pred is REFUSED:
                    continue
                served[r] = pred
            elif hold and not lab[r]:
                pending.append((ids[i + r], len(keep)))
                held.put(ids[i + r], Xs[r], Pending(len(keep)), ts[i + r])
            keep.append(r)
        return served, HoldLater(pending, (), None, (), ()), keep

    def _hold_later(self, later: HoldLater, predictions: list) -> None:
        """What :meth:`_hold_and_join` left for after the kernel call, ``predictions`` its
        rows': the placeholders settled, or the instances held."""
        if later.pending:
            self.held.settle(later.pending, predictions)
        elif later.ids:
            self.held.put_many(later.ids, later.X, [predictions[k] for k in later.kernel],
                               later.ts)

    def _planned_bounds(self, labelled, learned: list, rows: Rows) -> list[tuple[int, int]]:
        """The segments :meth:`process` cuts, from the same counters advanced as the
        segments will advance them: ends at the labelled rows as given, the rankers' block
        counting the rows each segment learned (``learned``, ascending: after refusals) and
        restarting once complete, a ranking due every ``ranking_every`` instances."""
        n, block, every = len(labelled), self.rank_rows, self.cfg.ranking_every
        lab_idx = None if labelled.all() else np.flatnonzero(labelled).tolist()
        owed, seen, next_ranking = self.n_pending - self.n_ranked, self.n_instances, \
            self.next_ranking
        bounds, i = [], 0
        while i < n:
            j = self._segment_end(i, lab_idx, rows, owed, 0, seen, next_ranking)
            bounds.append((i, j))
            got = bisect_left(learned, j) - bisect_left(learned, i)
            owed = 0 if owed + got >= block else owed + got
            seen += rows.instances(i, j)
            if every and seen >= next_ranking:
                next_ranking = (seen // every + 1) * every
            i = j
        return bounds

    @staticmethod
    def _mixed_calls(bounds: list, events: list, lab: list, keep: list, rows: Rows,
                     learns: np.ndarray, ends: list) -> list[tuple]:
        """The predictor calls one call per run would make: ``(kernel rows up to its end,
        input row where its segment ends, stream positions of the rows it learned, the last
        of those rows)`` (no row learned: an empty array and -1); the last call's end
        stretched to the kernel's last row. ``learns``: the rows learned, ascending;
        ``ends[s]``: how many of them end before segment ``s`` does."""
        taken = np.zeros(len(lab) + 1, dtype=np.int64)  # kernel rows before each input row
        taken[np.asarray(keep, dtype=np.int64) + 1] = 1
        taken = np.cumsum(taken).tolist()
        at = rows.pos[learns]
        learns = learns.tolist()
        calls = []
        for s, (i, j) in enumerate(bounds):
            if any(events[i:j]):
                a, b = ends[s - 1] if s else 0, ends[s]
                calls.append((taken[j], j, at[a:b], learns[b - 1] if b > a else -1))
                continue
            for a, b in runs(lab, i, j):
                if lab[a]:
                    calls.append((taken[b], j, rows.pos[a:b], b - 1))
        calls[-1] = (len(keep), *calls[-1][1:])
        return calls

    @staticmethod
    def _event_proba(kernel: np.ndarray, rows: Rows, proba: np.ndarray) -> np.ndarray:
        """The probabilities of a poll's rows for the segments that hold label events:
        the kernel's of each instance, zeros for label events (see :class:`PredictionBlock`)
        and refused rows; a segment's block reads its rows' slice."""
        inst = kernel >= 0
        if rows.labels is not None:
            inst &= ~rows.labels
        inst = np.flatnonzero(inst)
        full = np.zeros((kernel.shape[0], proba.shape[1]))
        full[inst] = proba[kernel[inst]]
        return full

    def _call_segments(self, X, ys: list, quiet: np.ndarray | None,
                       cuts: list | None = None):
        """``(y_pred, proba, classes, known)`` of the predictor's test-then-train call on
        ``X`` and labels ``ys`` (``None``: predicted only; ``quiet``: learned only, a label
        event's; ``None``: none), its events counted per segment ending at ``cuts``
        (``None``: one);
        ``known(k)``: the classes known after row ``k - 1``. Rows predicted before anything
        was learned predict nothing."""
        learner, task = self.predictor.learner, self.task
        fresh = learner.n_seen == 0
        before = len(task.classes(learner))
        proba = np.asarray(learner.predict_proba_learn_many(X, ys, learn_only=quiet,
                                                            segments=cuts))
        classes = task.classes(learner)
        y_pred = [classes[k] for k in np.argmax(proba, axis=1).tolist()] if classes else \
            [None] * len(ys)
        if fresh:  # rows up to the first one learned: predicted by an empty model
            first = next((k for k, v in enumerate(ys) if v is not None), len(ys))
            y_pred[:first + 1] = [None] * min(first + 1, len(y_pred))
            proba[:first + 1] = 0.0
        firsts = [ys.index(c) for c in classes[before:]]  # where each new class appeared

        def known(k: int) -> int:  # the first appearances ascend with the class indices
            return before + bisect_left(firsts, k)

        return y_pred, proba, classes, known


class LabelledRows(NamedTuple):
    """The labelled rows of a segment as the pipeline scores and learns them: their input
    rows (``idx``), labels, the predictions served for them, their feature rows (a label
    event's: its instance's) and source offsets."""

    idx: np.ndarray
    y_true: list
    preds: list
    X: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, y: list, y_pred: list, Xs: np.ndarray, lab: np.ndarray, offsets: np.ndarray,
           i: int, j: int) -> LabelledRows:
        """Those of rows ``i:j`` (``y_pred``, ``Xs`` and ``lab``, which are labelled: theirs)."""
        if lab.all():  # the common case: no index lists
            return cls(np.arange(i, j), y[i:j], y_pred, Xs, offsets[i:j])
        at = np.flatnonzero(lab)  # the segment's rows, numbered from i
        return cls.of_rows(at, y[i:j], y_pred, Xs, offsets[i:j])._replace(idx=i + at)

    @classmethod
    def of_rows(cls, idx: np.ndarray, y: list, preds: list, Xs: np.ndarray,
                offsets: np.ndarray) -> LabelledRows:
        """Rows ``idx`` of a whole poll (its ``y``, ``preds``, ``Xs`` and ``offsets``), to be
        handed out per segment by :meth:`part`."""
        at = idx.tolist()
        return cls(idx, [y[r] for r in at], [preds[r] for r in at], Xs[idx], offsets[idx])

    def part(self, a: int, b: int) -> LabelledRows:
        """Rows ``a:b`` of these."""
        return LabelledRows(self.idx[a:b], self.y_true[a:b], self.preds[a:b], self.X[a:b],
                            self.offsets[a:b])


class Rows:
    """What one :meth:`Pipeline.process` call knows of its rows beside ``X`` and ``y``:
    offsets, instance ids and times (for held rows), which rows are label events, and
    each row's stream position (a label event stands at its latest instance's)."""

    __slots__ = ("n", "ids", "ts", "offsets", "labels", "holding", "prefix", "pos")
    # ``prefix``: the instances among rows ``0..k-1`` for every ``k``, a list (read one value
    # at a time); ``None`` when every row is an instance

    @classmethod
    def of(cls, n: int, start: int, ids, ts, labels, offsets) -> Rows:
        r = cls()
        r.n = n
        # ids as Python values: held rows are keyed by them and checkpointed (the bulk decoder
        # gives arrays)
        r.ids = ids.tolist() if isinstance(ids, np.ndarray) else ids
        r.ts, r.offsets = ts, offsets
        r.labels = labels if labels is not None and labels.any() else None
        r.holding = ids is not None and ts is not None
        if r.labels is None:
            r.prefix = None
            r.pos = start + np.arange(n, dtype=np.int64)
        else:
            prefix = np.concatenate(([0], np.cumsum(~r.labels, dtype=np.int64)))
            r.pos = start + prefix[:-1] - r.labels.astype(np.int64)
            r.prefix = prefix.tolist()
        return r

    def instances(self, i: int, j: int) -> int:
        """Instances among rows ``i:j``."""
        return j - i if self.prefix is None else self.prefix[j] - self.prefix[i]

    def after_instances(self, i: int, k: int) -> int:
        """The row after the ``k``-th instance from row ``i`` (the row count when fewer)."""
        if self.prefix is None:
            return i + k
        return min(bisect_left(self.prefix, self.prefix[i] + k), len(self.prefix) - 1)

    def joins(self, labelled: np.ndarray, i: int, j: int) -> tuple[list, list]:
        """The label events among rows ``i:j`` and the unlabelled instances to hold
        (``labelled``: which rows of the poll are labelled), as positions from ``i``."""
        lab = labelled[i:j]
        if self.labels is None:
            takes = []
        else:
            kind = self.labels[i:j]
            takes, lab = np.flatnonzero(kind).tolist(), lab | kind
        return takes, (np.flatnonzero(~lab).tolist() if self.holding else [])

    def hold(self, held, X, y_pred: list, i: int, j: int) -> None:
        """Hold unlabelled rows ``i:j`` (``X``, ``y_pred``: theirs) for their labels."""
        if self.holding:
            for r in range(j - i):
                held.put(self.ids[i + r], X[r], y_pred[r], self.ts[i + r])

    def hold_some(self, held, X, y_pred: list, i: int, which) -> None:
        """Hold the unlabelled rows ``i + which`` (of ``X``, ``y_pred``: rows ``i:``)."""
        if self.holding:
            for r in which.tolist():
                held.put(self.ids[i + r], X[r], y_pred[r], self.ts[i + r])


def runs(lab: list, i: int, j: int):
    """The runs ``(a, b)`` of equal ``lab`` values among rows ``i:j``."""
    a = i
    for r in range(i + 1, j + 1):
        if r == j or lab[r] != lab[a]:
            yield a, r
            a = r


def refuse_label(rows: Rows, i: int, r: int, lab: list, out: StreamResult,
                 exc: PipelineError) -> None:
    """The label event at row ``i + r`` is refused: reported in ``out.rejected`` with its
    offset, and no longer labelled in ``lab`` (rows ``i:``)."""
    lab[r] = False
    out.rejected.append((rows.offsets[i + r:i + r + 1], exc))


#: what :meth:`Pipeline._take` answers for a refused label event (a served prediction may be
#: ``None``)
REFUSED = object()


class Pending:
    """The prediction of a row held within the kernel call that predicts it (known after the
    call: :meth:`Pipeline._serve_fused`)."""

    __slots__ = ("row",)

    def __init__(self, row: int):
        self.row = row


class HoldLater(NamedTuple):
    """What the held store needs once a kernel call's predictions are known: the
    placeholders to settle (``pending``: ``(id, kernel row)``), or the instances to hold
    (``ids``, their rows ``X``, times ``ts`` and kernel rows ``kernel``)."""

    pending: list | None
    ids: list
    X: np.ndarray | None
    ts: list
    kernel: list
