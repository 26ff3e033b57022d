"""Per-stream pipeline: the segmenting engine that drives a stream's stages, test-then-train.

One :class:`Pipeline` serves one stream (the Kafka key of its instances). It is plain Python
around the numba learners of :mod:`models` and knows nothing about Kafka: the worker hands it
the decoded rows of one stream, in partition order, and turns what it returns into messages.

Semantics (the same for every learner, so that results never depend on how the input was
cut into polls)

* The stream's task (:mod:`worker.pipeline.tasks`) is its profile's, or fixed by its first
  labelled instance; the stages (:mod:`worker.pipeline.stages`) are built for that task.
* Every instance is predicted by the model as it stands (test-then-train). A predictor that
  learns row by row (the adaptive random forest, Gomes et al. 2017; the online random
  forest, Saffari et al. 2009; Hoeffding trees and naive Bayes, Domingos & Hulten 2000; the
  iSOUP tree and forest) learns each labelled row right after predicting it, in one call of
  its fused kernel per run of labelled rows (``predict_proba_learn_many``): every instance is
  predicted by a model that learned every earlier label, whatever the poll.
* Labelled instances are also appended to a pending buffer. When it holds ``batch_size``
  rows, a predictor defined on mini-batches learns it as one (``learn_many``): the forgetful
  learners (Yuan et al. 2023, Sec. 3: each mini-batch is tested before it is learned).
* The rankers learn the pending rows as their blocks complete, whatever the mini-batch: a
  ranker whose importances change only at the end of a block (``learn_every``: a block
  forest measures every ``stride`` rows) is fed that often, the others once per
  ``batch_size`` rows. A published ranking is thus the ranker's state after its last
  completed block.
* The per-row prequential loss (0/1 for classifiers) feeds the drift detectors (ADWIN, Bifet
  & Gavaldà 2007; DDM, Gama et al. 2004), which signal drifts and warning zones.
* Learners report events while learning (a forgetful forest whose trees forget all their
  rows, Yuan et al. 2023, Sec. 3.2). Each event and detector signal either becomes an alert
  from its source or is counted in ``StreamResult.events``, as its spec's alert rules say
  (:func:`~worker.pipeline.stages.alert_level`); rules that debounce keep their open
  episodes in the pipeline's state.
* Rankings (one per method of every ranker) are emitted every ``ranking_every`` instances and,
  as ``publish_rankings`` says, after every step of the rankers (``block``, the default: the
  published ranking is the ranker's state), after a step that changed the top-k order of a
  method (``top_k``), or at no other time (``interval``).

Input is processed in *segments* whose boundaries depend only on the stream itself (the
point where the buffer fills, the next ranking point), so an uninterrupted run, a run cut
into other polls and a run restored from a checkpoint give identical outputs.
"""

from __future__ import annotations

import operator
from functools import cached_property, lru_cache
from itertools import repeat
from typing import Any

import numpy as np

from models import registry
from models.registry import CLASSIFICATION, PREDICTOR, RANKER, REGRESSION, SELECTOR

from .config import AUTO, PipelineConfig, stream_seed
from .errors import PipelineError
from .held import REFUSALS, HeldInstances
from .planning import REFUSED, LabelledRows, Pending, Rows, SegmentPlanning, refuse_label
from .protocol import not_a_stream_of_features
from .results import Alert, PredictionBlock, RankingOut, StreamResult
from .stages import Stage, alert_level, detect
from .tasks import Task, make_task, task_of_label
from .whole_poll import DeferredRankings, PlannedSegments

STATE_VERSION = 2
#: unlabelled rows a stream holds for their labels, by default (``labels.held_rows``)
HELD_ROWS = 1000


def _own(a: np.ndarray) -> np.ndarray:
    """``a`` itself if it owns its data, else a copy."""
    return a if a.base is None else np.array(a)



@lru_cache(maxsize=64)
def _positional_names(n_features: int) -> tuple[str, ...]:
    """``x0, x1, ...``: the feature names of a stream that sends lists, built once per width
    (every ranking and alert names its features)."""
    return tuple(f"x{j}" for j in range(n_features))


class Pipeline(SegmentPlanning):
    """The stages of one stream (selector, predictor, rankers, detectors), test-then-train.

    Parameters
    ----------
    stream : str
        Stream id (the Kafka key).
    cfg : PipelineConfig
        What to build (the stream's profile).
    n_features : int
        Feature count, fixed by the stream's first message.
    feature_names : list of str, optional
        Names, when the first message carried ``x`` as a mapping; they fix the column order.
    max_classes : int, optional
        Distinct class labels the stream may have (more are refused by :meth:`check_label`).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((300, 3))
    >>> y = [int(v > 0.5) for v in X[:, 0]]
    >>> cfg = PipelineConfig(predictor="forgetful_tree", rankers=[], batch_size=50)
    >>> p = Pipeline("s1", cfg, n_features=3)
    >>> res = p.process(X, y)
    >>> p.task.name, p.n_instances, round(p.accuracy, 2) > 0.8
    ('classification', 300, True)
    """

    #: a stream of instances: it takes no FeatureArrivals
    #: (:class:`~worker.pipeline.feature_stream.FeatureStreamPipeline` does)
    arrivals = False
    #: the predictor's answers of the poll being processed (:meth:`_plan_poll`), and the
    #: rankers' rows and asks, made once it is through (:meth:`_defer_rankings`)
    _planned: PlannedSegments | None = None
    _deferred: DeferredRankings | None = None

    def __init__(self, stream: str, cfg: PipelineConfig, n_features: int,
                 feature_names: list[str] | None = None, max_classes: int | None = None,
                 held_rows: int = HELD_ROWS, held_age_ms: int = 0):
        self.stream = stream
        self.max_classes = max_classes
        self.cfg = cfg
        self.n_features = int(n_features)
        self.feature_names = list(feature_names) if feature_names else None
        self.seed = stream_seed(stream, cfg.seed)
        self.task: Task | None = None
        self.predictor: Stage | None = None
        self.selector: Stage | None = None
        self.rankers: list[Stage] = []
        self.detectors = [Stage.build(n, cfg.params_of(n), (), None) for n in cfg.detectors]
        self._pending_X: list[np.ndarray] = []
        self._pending_y: list = []
        self._pending_off: list[np.ndarray] = []
        self._pending_pos: list[np.ndarray] = []
        self.n_pending = 0
        self.n_ranked = 0  # leading pending rows the rankers have learned
        self._owned = 0  # leading pending arrays that own their data
        self.n_instances = 0
        self.n_labelled = 0
        self.loss_sum = 0.0
        self.next_ranking = cfg.ranking_every
        self.last_topk: dict[str, list] = {}
        self.n_events = 0
        # "source:kind" -> [position of the last event, level] of an alert rule's open episode
        self.episodes: dict[str, list] = {}
        # unlabelled instances waiting for a LabelEvent (rows held only when ids are given)
        self.held = HeldInstances(self.n_features, held_rows, held_age_ms)
        if cfg.task == CLASSIFICATION:  # a regression profile waits for the target count
            self._build(CLASSIFICATION, None)

    # -- the task and the stages ---------------------------------------------------------------

    def check_label(self, y: Any) -> None:
        """Refuse (:class:`PipelineError`) a label this stream cannot take; fix the task at the
        first label when the profile leaves it open."""
        if self.task is not None:
            self.task.check_label(y)
            return
        task = task_of_label(y)
        if self.cfg.task == REGRESSION and type(y) is int:  # a whole number: one target
            task = REGRESSION
        if self.cfg.task not in (AUTO, task):
            raise PipelineError(
                "invalid_target", f"stream {self.stream!r} is a {self.cfg.task} stream (its "
                f"profile {self.cfg.profile} says so) but y is a {task} label")
        if self.cfg.predictor_for(task) is None:
            raise PipelineError(
                "unsupported_task", f"stream {self.stream!r} sends {task} labels but its profile "
                f"({self.cfg.profile}) has no {task} predictor among "
                f"{', '.join(self.cfg.predictor) or 'none'}; name one in learners.predictor")
        self._build(task, y)
        self.task.check_label(y)

    def _build(self, task: str, first_label: Any) -> None:
        """Make the task object and the stages serving it (once per stream)."""
        cfg, stream = self.cfg, self.stream
        self.task = make_task(task, first_label, self.max_classes)
        pname = cfg.predictor_for(task)
        rankers = cfg.rankers_for(task)
        roles = (PREDICTOR, RANKER) if pname in rankers else (PREDICTOR,)
        self.predictor = Stage.build(pname, cfg.params_of(pname), roles, self.seed)
        sname = cfg.selector_for(task)
        if sname is not None:
            selector = Stage.build(sname, cfg.params_of(sname), (SELECTOR,),
                                   stream_seed(stream, cfg.seed, "selector"))
            # the predictor behind the selector as the selector's spec composes them (ABFS:
            # the reference's composition, Barddal et al. 2019: filtered to the subset, reset
            # and retrained on the selector's window after a feature drift)
            compose = selector.spec.composes
            self.predictor = Stage(pname, self.predictor.spec,
                                   compose(self.predictor.learner, selector.learner), roles)
            self.selector = self._selector_view(sname)
        self.rankers = []
        n_own = 0
        for name in rankers:
            if name == pname:
                self.rankers.append(self.predictor)
                continue
            salt = "importance" if n_own == 0 else f"importance:{name}"
            n_own += 1
            self.rankers.append(Stage.build(name, cfg.params_of(name), (RANKER,),
                                            stream_seed(stream, cfg.seed, salt)))
        for name in ("prequential", "rank_rows"):  # answered for the stages before these
            self.__dict__.pop(name, None)

    def _selector_view(self, name: str) -> Stage:
        """The selector inside the predictor's composition, as a stage of its own (its
        rankings, its alert rules); it learns with the predictor, never on its own."""
        return Stage(name, registry.get(name), self.predictor.learner.selector, (SELECTOR,))

    @property
    def names(self) -> list[str] | tuple[str, ...]:
        """Feature names used in rankings (``x0, x1, ...`` when the stream sends lists)."""
        if self.feature_names:
            return self.feature_names
        return _positional_names(self.n_features)

    @property
    def model_name(self) -> str:
        """Registry name of the predictor (the ``model`` of predictions)."""
        return self.predictor.name if self.predictor is not None else self.cfg.model_name

    # -- what the intake asks (worker.pipeline.protocol.StreamPipeline) ------------------------

    @property
    def fixed_columns(self) -> tuple[int, list[str] | None]:
        """Every instance has the columns of the stream's first one."""
        return self.n_features, self.feature_names

    @property
    def bulk_ready(self) -> bool:
        """The bulk kernels take class labels (integers or strings) unchecked:
        classification streams only."""
        return self.task is not None and self.task.name == CLASSIFICATION

    def check_instance_batch(self) -> None:
        """InstanceBatch records are taken."""

    def check_label_event(self, y: Any) -> None:
        """A LabelEvent's label is checked as an instance's (its instance is found when its
        turn comes: :meth:`process`)."""
        self.check_label(y)

    def check_arrival(self) -> None:
        """FeatureArrivals are refused: the stream learns from instances."""
        raise not_a_stream_of_features(self.stream)

    @property
    def classes(self) -> list:
        """Class labels known to the predictor (class-index order; empty for regression)."""
        if self.task is None or self.predictor is None:
            return []
        return self.task.classes(self.predictor.learner)

    @property
    def mean_loss(self) -> float:
        """Mean prequential loss of the labelled instances so far."""
        return self.loss_sum / self.n_labelled if self.n_labelled else float("nan")

    @property
    def accuracy(self) -> float:
        """Prequential accuracy so far (classification: 1 minus the mean 0/1 loss)."""
        return 1.0 - self.mean_loss

    # -- processing ----------------------------------------------------------------------------

    def process(self, X: np.ndarray, y: list, offsets: np.ndarray | None = None,
                emit: bool = True, ids: list | None = None, ts=None,
                labels: np.ndarray | None = None) -> StreamResult:
        """Test-then-train over consecutive rows of this stream.

        Parameters
        ----------
        X : ndarray of shape (n, n_features)
            Finite float64 rows, in stream order.
        y : list of length n
            Labels (checked with :meth:`check_label`), ``None`` for unlabelled rows.
        offsets : ndarray of int64, optional
            Source offsets of the rows (kept with pending rows, reported if a learn fails).
        emit : bool
            ``False`` while replaying input whose outputs were already committed: the state
            advances exactly as when emitting, but probabilities are not computed.
        ids, ts : list, optional
            The rows' instance ids and event times: an unlabelled row is then held for its
            label (:mod:`worker.pipeline.held`).
        labels : ndarray of bool, optional
            Which rows are label events (:class:`schemas.messages.LabelEvent`): ``ids`` names
            the instance each labels and ``y`` its label; their ``X`` rows are not read. A
            label event joins its held instance (the predictor learns the row, the detectors
            see the loss of the prediction served) or is refused in ``rejected``.
        """
        n = X.shape[0]
        if offsets is None:
            offsets = np.full(n, -1, dtype=np.int64)
        out = StreamResult()
        every_row = None not in y  # all labelled (the common case): no per-row test
        labelled = np.ones(n, dtype=bool) if every_row else \
            np.fromiter(map(operator.is_not, y, repeat(None)), dtype=bool, count=n)
        if self.task is None and labelled.any():
            self.check_label(y[int(np.argmax(labelled))])
        rows = Rows.of(n, self.n_instances, ids, ts, labels, offsets)
        dropped = self.held.dropped
        lab_idx = None if every_row else np.flatnonzero(labelled).tolist()
        losses: list[np.ndarray] = []  # prequential loss of the labelled rows, in row order
        loss_rows: list[np.ndarray] = []  # and their rows
        self._planned = self._plan_poll(X, y, labelled, rows, emit) or \
            self._plan_mixed(X, y, labelled, rows, emit, out)
        self._deferred = self._defer_rankings()
        try:
            i = 0
            while i < n:
                j = self._planned.next_end if self._planned is not None else \
                    self._segment_end(i, lab_idx, rows, self.n_pending - self.n_ranked,
                                      self.n_pending, self.n_instances, self.next_ranking)
                self._segment(X, y, labelled, rows, i, j, emit, out, losses, loss_rows)
                i = j
            if self._deferred is not None:
                self._deferred.flush(lambda *ranking: self._publish_ranking(out, *ranking))
        finally:
            self._planned = self._deferred = None
        if self.detectors and losses:
            # detectors only read the loss sequence, never feed the learners: one call over
            # the whole run gives the alerts the per-segment calls would
            self._detect(np.concatenate(losses), np.concatenate(loss_rows), rows.pos, out)
        # pending rows may be views of the caller's arrays, which it may reuse: keep copies
        # of the ones added by this call (a stream fed a row at a time holds up to a
        # mini-batch of them: copying them all again at every call cost more than learning)
        pX, pO = self._pending_X, self._pending_off
        for k in range(self._owned, len(pX)):
            pX[k], pO[k] = _own(pX[k]), _own(pO[k])
        self._owned = len(pX)
        out.held_dropped = self.held.dropped - dropped
        if labels is not None:  # the label events the held store did not refuse
            out.labels_joined = int(np.count_nonzero(labels)) - sum(
                getattr(exc, "code", None) in REFUSALS for _offsets, exc in out.rejected)
        return out

    def _defer_rankings(self) -> DeferredRankings | None:
        """Rankers that learn the poll's rows in one call once it is through, when every
        one gives its importances per measurement, declares no events and is not the
        predictor, and no selector publishes rankings between theirs
        (:class:`~worker.pipeline.whole_poll.DeferredRankings`); ``None`` otherwise."""
        if not self.rankers or self.selector is not None or any(
                s is self.predictor or s.spec.events
                or not getattr(s.learner, "ranks_while_learning", False) for s in self.rankers):
            return None
        return DeferredRankings(self.rankers)

    @cached_property
    def prequential(self) -> bool:
        """Whether the predictor learns row by row in its own test-then-train kernel: each
        instance is then predicted by the model that learned every earlier label (Gama et
        al. 2013), whatever the mini-batch; otherwise (the forgetful learners, defined on
        mini-batches, Yuan et al. 2023) it learns the pending mini-batch at once. Fixed
        once the stages are built (asked a few times per segment)."""
        return self.task is not None and self.task.prequential(self.predictor.learner)

    def _predict_learn(self, Xs, y, labelled, rows, i, j, emit, out: StreamResult) -> list:
        """Rows ``i:j`` test-then-train, labelled runs in the predictor's fused kernel and
        unlabelled runs predicted only; one prediction block per run. Returns ``y_pred``."""
        task, learner = self.task, self.predictor.learner
        lab = labelled[i:j]
        cuts = np.flatnonzero(lab[1:] != lab[:-1]) + 1
        y_pred: list = []
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), j - i]):
            if lab[a]:
                classes, yp, proba = task.predict_learn(learner, Xs[a:b], y[i + a:i + b], emit)
                # the run's events (each call reports its own): a row's where it names one,
                # else the run's last row
                self._learned(rows.pos[i + a:i + b], i + b - 1, out)
            else:
                classes, yp, proba = task.predict(learner, Xs[a:b], emit)
                rows.hold(self.held, Xs[a:b], yp, i + a, i + b)
            out.blocks.append(PredictionBlock(i + a, i + b, classes, yp, proba))
            y_pred += yp
        return y_pred

    def _learned(self, positions, row: int, out: StreamResult) -> None:
        """The events of the predictor's (and its selector's) last learning call on the rows
        at ``positions``, published at input row ``row``; the selector's ranking if it
        changed."""
        for stage in (self.selector, self.predictor):
            if stage is not None:
                self._publish_events(stage, positions, row, out, at=int(positions[-1]))
        if self.selector is not None:
            self._rank_selection(row, out)

    def _predict(self, Xs, y, labelled, rows, i, j, emit, out: StreamResult) -> list:
        """Rows ``i:j`` predicted (and learned, by a prequential predictor; unlabelled ones
        held for their labels). Returns ``y_pred``."""
        task = self.task
        if task is None:  # no label yet, nothing learned: no prediction
            classes, y_pred, proba = [], [None] * (j - i), (np.zeros((j - i, 0)) if emit else None)
            out.blocks.append(PredictionBlock(i, j, classes, y_pred, proba))
            rows.hold(self.held, Xs, y_pred, i, j)
            return y_pred
        if self.prequential:
            return self._predict_learn(Xs, y, labelled, rows, i, j, emit, out)
        classes, y_pred, proba = task.predict(self.predictor.learner, Xs, emit)
        out.blocks.append(PredictionBlock(i, j, classes, y_pred, proba))
        if rows.holding and not labelled[i:j].all():
            unl = np.flatnonzero(~labelled[i:j])
            rows.hold_some(self.held, Xs, y_pred, i, unl)
        return y_pred

    def _serve(self, X, y, labelled, rows, i, j, emit, out: StreamResult) -> LabelledRows:
        """Rows ``i:j`` predicted (their blocks in ``out``), from the poll's plan or
        (:meth:`_serve_rows`) by the segment itself. Returns the labelled rows to score and
        learn: for a joined label event the prediction served and the held row; a refused
        one is not among them."""
        if self._planned is not None:  # the segment's answers from the poll's one call
            blocks, calls, learned = self._planned.next_segment(i, j)
            for k, positions, row in calls:
                self.predictor.learner.select_segment(k)
                self._learned(positions, row, out)
            out.blocks += blocks
            return learned
        y_pred, Xs, lab = self._serve_rows(X, y, labelled, rows, i, j, emit, out)
        return LabelledRows.of(y, y_pred, Xs, lab, rows.offsets, i, j)

    def _serve_rows(self, X, y, labelled, rows, i, j, emit, out: StreamResult):
        """Rows ``i:j`` in runs: instances predicted (:meth:`_predict`), label events joined
        to their held instances (:meth:`_join`). Returns ``(y_pred, X rows, labelled)`` of
        the rows: for a joined label event the prediction served and the held row; a refused
        one is no longer labelled."""
        Xs = X[i:j]
        if rows.labels is None or not rows.labels[i:j].any():  # no label event: runs as ever
            return self._predict(Xs, y, labelled, rows, i, j, emit, out), Xs, labelled[i:j]
        if self.task is not None and self.prequential and getattr(
                self.predictor.learner, "predicts_unlabelled_rows", False):
            return self._serve_fused(Xs, y, labelled, rows, i, j, emit, out)
        kind = rows.labels[i:j]
        Xs = Xs.copy()  # label events' rows become their instances'
        lab = labelled[i:j].copy()
        cuts = np.flatnonzero(kind[1:] != kind[:-1]) + 1
        y_pred: list = []
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), j - i]):
            if kind[a]:
                y_pred += self._join(Xs, y, lab, rows, i, a, b, out)
            else:
                y_pred += self._predict(Xs[a:b], y, labelled, rows, i + a, i + b, emit, out)
        return y_pred, Xs, lab

    def _serve_fused(self, Xs, y, labelled, rows, i, j, emit, out: StreamResult):
        """:meth:`_serve` in one call of a predictor's test-then-train kernel that takes
        unlabelled rows (predicted only): instances in their order, each label event as its
        held row and label (learned; the prediction made for it is not used). The same
        outputs as one call per run of rows (the kernel's rows are its calls' rows), without
        a Python call per instance and label when they alternate. One prediction block covers
        the segment; a label event's row in it holds the prediction its instance was served
        (the encoder publishes instances' rows only)."""
        kind = rows.labels[i:j].tolist()
        lab = labelled[i:j].tolist()  # per-row Python: lists, not numpy scalars
        Xs = Xs.copy()  # label events' rows become their instances'
        served, later, rows_in = self._hold_and_join(rows, i, kind, Xs, lab, labelled, out)
        ys = [y[i + r] if lab[r] else None for r in rows_in]
        sel = np.array(rows_in, dtype=np.int64)
        quiet = np.array(kind, dtype=bool)[sel]
        y_pred, proba, classes, _ = self._call_segments(Xs[sel], ys, quiet)
        self._hold_later(later, y_pred)
        # every row's prediction: an instance's own, a label event's instance's (served)
        preds: list = [None] * (j - i)
        for k, r in enumerate(rows_in):
            preds[r] = y_pred[k]
        for r, pred in served.items():
            preds[r] = y_pred[pred.row] if isinstance(pred, Pending) else pred
        full = None
        if emit:
            full = np.zeros((j - i, proba.shape[1]))
            full[sel[~quiet]] = proba[~quiet]
        out.blocks.append(PredictionBlock(i, j, classes, preds, full))
        learned = [r for r in rows_in if lab[r]]
        if learned:
            at = np.asarray(learned, dtype=np.int64)
            self._learned(rows.pos[i + at], i + learned[-1], out)
        return preds, Xs, np.array(lab, dtype=bool)

    def _take(self, rows, i: int, r: int, Xs, lab, out: StreamResult):
        """The label event at row ``i + r`` takes its instance from the held store: its row
        into ``Xs[r]``, its served prediction returned; a refused one is reported in
        ``out.rejected``, unlabelled in ``lab`` (rows ``i:``) and answers :data:`REFUSED`."""
        try:
            row, pred = self.held.take(rows.ids[i + r], rows.ts[i + r])
        except PipelineError as exc:
            refuse_label(rows, i, r, lab, out, exc)
            return REFUSED
        Xs[r] = row
        return pred

    def _join(self, Xs, y, lab, rows, i, a, b, out: StreamResult) -> list:
        """Label events at rows ``i + a:i + b``: each takes its instance's row (into
        ``Xs``) and served prediction from the held store; a prequential predictor learns
        the joined rows. A refused event is reported in ``out.rejected`` and no longer
        labelled (in ``lab``, the rows ``i:`` of the segment)."""
        served, joined = [], []
        for r in range(a, b):
            pred = self._take(rows, i, r, Xs, lab, out)
            served.append(None if pred is REFUSED else pred)
            if pred is not REFUSED:
                joined.append(r)
        if joined and self.prequential:
            sel = np.asarray(joined)
            self.predictor.learner.learn_many(
                Xs[sel], self.task.learn_targets([y[i + r] for r in joined]))
            self._learned(rows.pos[i + sel], i + joined[-1], out)
        return served

    def _segment(self, X, y, labelled, rows, i, j, emit, out: StreamResult, losses: list,
                 loss_rows: list) -> None:
        """Rows ``i:j``: predicted (and learned, by a prequential predictor); then the
        mini-batch learned / rankings made if a boundary is hit."""
        task = self.task
        idx, y_true, preds, Xl, offs = self._serve(X, y, labelled, rows, i, j, emit, out)
        n_lab = len(y_true)
        if n_lab:
            loss = task.losses(preds, y_true)
            losses.append(loss)
            loss_rows.append(idx)
            out.scored.append((rows.pos[idx], preds, y_true))
            self.loss_sum += float(loss.sum())
            self.n_labelled += n_lab
            self._pending_X.append(Xl)
            self._pending_y.extend(y_true)
            self._pending_off.append(offs)
            self._pending_pos.append(rows.pos[idx])
            self.n_pending += n_lab
        self.n_instances += rows.instances(i, j)
        if ((not self.prequential and self.n_pending >= self.cfg.batch_size)
                or self.n_pending - self.n_ranked >= self.rank_rows):
            self._learn(j - 1, out)
        if self.cfg.ranking_every and self.n_instances >= self.next_ranking:
            if self.rankers:
                self._rank(j - 1, out, only_changed=False)
            every = self.cfg.ranking_every
            self.next_ranking = (self.n_instances // every + 1) * every

    def _detect(self, loss: np.ndarray, rows: np.ndarray, positions: np.ndarray,
                out: StreamResult) -> None:
        """Alerts of every detector, merged into ``out.alerts`` in row order.

        At a shared row, detectors' alerts come before events of learners (the order of one
        call per segment) and detectors keep their configured order.
        """
        new: list[Alert] = []
        for stage in self.detectors:
            new += self._published(stage, detect(stage, loss, rows, positions), out)
        if new:
            new.sort(key=lambda a: a.row)  # stable: detector order, warnings first
            merged = new + out.alerts
            merged.sort(key=lambda a: a.row)
            out.alerts[:] = merged

    def _published(self, stage: Stage, signals: list[Alert], out: StreamResult) -> list[Alert]:
        """The detector signals its alert rules publish (a signal's kind is its level)."""
        kept = []
        for a in signals:
            level = alert_level(stage, a.level, a.level, a.position, self.episodes)
            if level is None:
                out.count(stage.name, a.level)
            else:
                a.level = level
                kept.append(a)
        return kept

    @cached_property
    def rank_rows(self) -> int:
        """Labelled rows between two learning steps of the rankers: the smallest block of
        those whose answers change only at the end of a block (``learn_every``), else
        ``batch_size``. Fixed once the stages are built."""
        steps = [s.learner.learn_every or self.cfg.batch_size for s in self.rankers
                 if s is not self.predictor]
        return min(steps, default=self.cfg.batch_size)

    def _learn(self, row: int, out: StreamResult) -> None:
        """Learn what is due at ``row``.

        A complete mini-batch: a predictor defined on mini-batches learns every pending row
        (its selector inside it). A complete block of the rankers (:attr:`rank_rows` rows
        they have not learned): they learn it, and rankings are published as
        ``publish_rankings`` says. Each keeps its own cadence, counted in labelled rows
        from the stream's start; a pending row is dropped once every learner that waits
        for it has learned it.
        """
        full = not self.prequential and self.n_pending >= self.cfg.batch_size
        ranks = self.n_pending - self.n_ranked >= self.rank_rows
        pX, yp, pO, pP = self._pending_X, self._pending_y, self._pending_off, self._pending_pos
        Xp = pX[0] if len(pX) == 1 else np.concatenate(pX)
        positions = np.concatenate(pP)
        k = self.n_ranked
        learning = [(self.predictor, 0)] if full else []
        if ranks:
            learning += [(s, k) for s in self.rankers if s is not self.predictor]
        deferred = self._deferred
        try:
            for stage, first in learning:
                if deferred is not None and stage is not self.predictor:
                    deferred.feed(Xp[first:], self.task.learn_targets(yp[first:]))
                    break  # one feed for all the rankers
                stage.learner.learn_many(Xp[first:], self.task.learn_targets(yp[first:]))
        except ValueError as exc:
            self._clear_pending()
            out.rejected.append((np.concatenate(pO).astype(np.int64, copy=False),
                                 PipelineError("learner_rejected", str(exc))))
            return
        ranked = self.n_pending if ranks else k
        if full or self.prequential:  # only the rankers wait for the rows after ``ranked``
            self._keep_pending(Xp, positions, ranked)
        else:
            self.n_ranked = ranked
        if full and self.selector is not None:  # it learned inside the predictor
            self._publish_events(self.selector, positions, row, out)
        for stage, first in learning:
            self._publish_events(stage, positions[first:], row, out)
        if full and self.selector is not None:
            self._rank_selection(row, out)
        if ranks and self.rankers and self.cfg.publish_rankings != "interval":
            self._rank(row, out, only_changed=self.cfg.publish_rankings == "top_k")

    def _keep_pending(self, Xp: np.ndarray, positions: np.ndarray, first: int) -> None:
        """Drop the pending rows before ``first`` (every learner has learned them)."""
        if first >= self.n_pending:
            self._clear_pending()
            return
        offsets = np.concatenate(self._pending_off)
        self._pending_X, self._pending_off = [Xp[first:]], [offsets[first:]]
        self._pending_pos, self._pending_y = [positions[first:]], self._pending_y[first:]
        self.n_pending -= first
        self.n_ranked = self._owned = 0  # views, maybe of the caller's rows: copied if kept

    def _clear_pending(self) -> None:
        self._pending_X, self._pending_y, self._pending_off, self._pending_pos = [], [], [], []
        self.n_pending = self.n_ranked = self._owned = 0

    def _publish_events(self, stage: Stage, positions, row: int, out: StreamResult,
                        at: int | None = None) -> None:
        """The stage's events of its last learning call, as alerts or counts (its spec's
        rules); ``positions``: the stream positions of the rows it learned, for events of a
        row; others stand at ``at`` (default: the last instance)."""
        names = self.names
        last = self.n_instances - 1 if at is None else at
        for ev in stage.events():
            self.n_events += 1
            position = int(positions[ev.row]) if ev.row >= 0 and positions is not None else last
            level = alert_level(stage, ev.kind, ev.level, position, self.episodes)
            if level is None:
                out.count(stage.name, ev.kind)
                continue
            feature = names[ev.feature] if ev.feature >= 0 else None
            out.alerts.append(Alert(row, stage.name, level, position, ev.detail, feature))

    def _rank_selection(self, row: int, out: StreamResult) -> None:
        """A selector's ranking (selected columns in selection order) whenever it changes."""
        names = self.names
        for method, cols, scores in self.selector.selection_rankings():
            if self.last_topk.get(method, []) == cols:
                continue  # unchanged (or still nothing selected: no empty first ranking)
            self.last_topk[method] = cols
            out.rankings.append(RankingOut(row, method, [names[c] for c in cols], scores,
                                           int(self.selector.learner.n_seen)))

    def _rank(self, row: int, out: StreamResult, only_changed: bool) -> None:
        """Rankings of every method (all of them, or those whose top-k changed); made once
        the poll is through when the rankers learn it then (:meth:`_defer_rankings`)."""
        if self._deferred is not None:
            self._deferred.ask(row, only_changed)
            return
        for stage in self.rankers:
            self._publish_ranking(out, row, only_changed, stage, int(stage.learner.n_seen),
                                  stage.rankings())

    def _publish_ranking(self, out: StreamResult, row: int, only_changed: bool, stage: Stage,
                         n_seen: int, rankings: list) -> None:
        """The stage's ``rankings`` at input row ``row`` (``n_seen`` rows learned), each
        unless ``only_changed`` and its top-k is the last one published."""
        names = self.names
        for method, scores in rankings:
            # stable order: ties broken by column index, so rankings are reproducible
            order = np.argsort(-scores, kind="stable").tolist()
            top = order[: self.cfg.top_k]
            if only_changed and self.last_topk.get(method) == top:
                continue
            self.last_topk[method] = top
            if _published_at(out.rankings, row, method, n_seen):
                continue  # a block's ranking that is also the interval's: published once
            # one list per ranking of every feature: built from Python ints and floats
            # (a ranking follows every block, and wide streams have hundreds of features)
            out.rankings.append(RankingOut(
                row, method, [names[c] for c in order], scores[order].tolist(), n_seen))

    # -- state ---------------------------------------------------------------------------------

    @property
    def n_held(self) -> int:
        """Unlabelled instances held for their labels (:mod:`worker.pipeline.held`)."""
        return len(self.held)

    @property
    def nbytes(self) -> int:
        """Bytes of the learners' state, the rows waiting for the next mini-batch and the
        rows held for their labels."""
        # the selector is part of the predictor (its composition counts both)
        stages = {id(s): s for s in (self.predictor, *self.rankers, *self.detectors)
                  if s is not None}
        return (sum(s.learner.nbytes for s in stages.values())
                + sum(x.nbytes for x in self._pending_X) + self.held.nbytes)

    def to_state(self) -> dict:
        """Everything that decides the stream's future outputs, as plain values and arrays."""
        if self._pending_X:
            pX = np.ascontiguousarray(np.concatenate(self._pending_X))
            pO = np.concatenate(self._pending_off)
            pP = np.concatenate(self._pending_pos)
        else:
            pX = np.zeros((0, self.n_features))
            pO = np.zeros(0, dtype=np.int64)
            pP = np.zeros(0, dtype=np.int64)
        stages = {"detectors": [s.to_state() for s in self.detectors]}
        if self.predictor is not None:
            stages["predictor"] = self.predictor.to_state()
            stages["rankers"] = [None if s is self.predictor else s.to_state()
                                 for s in self.rankers]
        return {
            "v": STATE_VERSION,
            "stream": self.stream,
            "config": self.cfg.as_dict(),
            "n_features": self.n_features,
            "feature_names": self.feature_names,
            "task": None if self.task is None else self.task.to_state(),
            "max_classes": self.max_classes,
            "stages": stages,
            "pending_X": pX,
            "pending_y": list(self._pending_y),
            "pending_offsets": pO,
            "pending_positions": pP,
            "counters": [self.n_instances, self.n_labelled, self.next_ranking, self.n_events],
            "n_ranked": self.n_ranked,
            "loss_sum": self.loss_sum,
            "last_topk": {k: list(v) for k, v in self.last_topk.items()},
            "episodes": {k: list(v) for k, v in self.episodes.items()},
            **self._held_state(),
        }

    def _held_state(self) -> dict:
        """The held store and its bounds, when either says anything (states of streams that
        never held a row are what they were before rows were held)."""
        h = self.held
        if h.empty and (h.max_rows, h.max_age_ms) == (HELD_ROWS, 0):
            return {}
        return {"held": {**h.to_state(), "max_rows": h.max_rows, "max_age_ms": h.max_age_ms}}

    @classmethod
    def from_state(cls, state: dict) -> Pipeline:
        """Rebuild a pipeline that continues exactly where :meth:`to_state` left it."""
        if state.get("v") != STATE_VERSION:
            raise ValueError(f"pipeline state version {state.get('v')!r} is not supported")
        cfg = PipelineConfig.from_dict(state["config"])
        p = cls.__new__(cls)
        p.stream, p.cfg = state["stream"], cfg
        p.n_features = int(state["n_features"])
        p.feature_names = state["feature_names"]
        p.seed = stream_seed(p.stream, cfg.seed)
        p.task = Task.from_state(state["task"])
        p.max_classes = state["max_classes"]
        stages = state["stages"]
        p.detectors = [Stage.restore(e) for e in stages["detectors"]]
        p.predictor = Stage.restore(stages["predictor"]) if "predictor" in stages else None
        p.selector = None
        sname = cfg.selector_for(p.task.name) if p.task is not None else None
        if sname is not None and p.predictor is not None:
            if "selector" in stages:  # written before the predictor held its selector
                old = Stage.restore(stages["selector"])
                p.predictor.learner = old.spec.composes(p.predictor.learner, old.learner)
            p.selector = p._selector_view(sname)
        p.rankers = [p.predictor if e is None else Stage.restore(e)
                     for e in stages.get("rankers", [])]
        pX = np.asarray(state["pending_X"], dtype=np.float64).reshape(-1, p.n_features)
        p._pending_X, p._pending_y, p._pending_off, p._pending_pos = [], [], [], []
        p._owned = 0
        p.n_pending = int(pX.shape[0])
        # states written before the rankers learned per block: they had learned no pending row
        p.n_ranked = int(state.get("n_ranked", 0))
        if not 0 <= p.n_ranked <= p.n_pending:
            raise ValueError(f"n_ranked {p.n_ranked} is not within the {p.n_pending} pending rows")
        if p.n_pending:
            p._pending_X = [pX]
            p._pending_y = list(state["pending_y"])
            p._pending_off = [np.asarray(state["pending_offsets"], dtype=np.int64)]
            p._pending_pos = [np.asarray(state["pending_positions"], dtype=np.int64)]
            p._owned = 1
        p.n_instances, p.n_labelled, p.next_ranking, p.n_events = (
            int(v) for v in state["counters"])
        p.loss_sum = float(state["loss_sum"])
        p.last_topk = {k: [int(c) for c in v] for k, v in state["last_topk"].items()}
        # checkpoints written before alert rules debounced have no episodes: none is open
        p.episodes = {k: [int(v[0]), str(v[1])] for k, v in state.get("episodes", {}).items()}
        held = state.get("held")
        p.held = (HeldInstances(p.n_features, HELD_ROWS, 0) if held is None else
                  HeldInstances.from_state(held, p.n_features, int(held["max_rows"]),
                                           int(held["max_age_ms"]), check_served=(
                                               p.task.check_served if p.task is not None
                                               else _nothing_served)))
        return p


def _nothing_served(pred) -> None:
    """A stream with no task yet (no label so far) served its held instances nothing."""
    if pred is not None:
        raise ValueError(f"held instances: {pred!r} served by a stream that has no task yet")


def _published_at(rankings: list, row: int, method: str, n_seen: int) -> bool:
    """Whether ``rankings`` (of one call, in row order) ends with one of ``method`` at input
    row ``row`` after ``n_seen`` rows: the same ranking, which a stream publishes once."""
    for prev in reversed(rankings):
        if prev.row != row:
            return False
        if prev.method == method and prev.n_seen == n_seen:
            return True
    return False
