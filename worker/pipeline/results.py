"""What a pipeline returns for a run of rows: prediction blocks, alerts, rankings, rejections."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PredictionBlock:
    """Predictions of rows ``start:stop`` of the input, made by the same model.

    ``classes`` and ``proba`` (``(stop - start, len(classes))``, ``None`` when not asked for)
    belong to classifiers; a regression block has ``classes = None`` and lists of floats (or
    ``None`` before anything was learned) in ``y_pred``. A block may cover rows that are
    LabelEvents (``labels`` of :meth:`worker.pipeline.Pipeline.process`): theirs is the
    prediction served for the instance they label (zeros in ``proba``), not a prediction to
    publish.
    """

    start: int
    stop: int
    classes: list | None
    y_pred: list
    proba: np.ndarray | None


@dataclass
class Alert:
    """A drift alert: a detector fired on the loss, or a learner reported an event."""

    row: int  # input row that triggered it (its timestamp is used)
    source: str  # registry name of the detector or learner
    level: str  # "warning" | "drift"
    position: int  # stream position (0-based instance index)
    detail: str = ""
    feature: str | None = None


@dataclass
class RankingOut:
    """One ranking of every feature by one method, best first."""

    row: int
    method: str
    features: list
    scores: list
    n_seen: int


@dataclass
class StreamResult:
    """What :meth:`worker.pipeline.Pipeline.process` produced for one run of rows."""

    blocks: list = field(default_factory=list)
    alerts: list = field(default_factory=list)
    rankings: list = field(default_factory=list)
    rejected: list = field(default_factory=list)  # (row offsets, PipelineError) of a failed learn
    #: the labelled rows learned, per segment: ``(stream positions, predictions served,
    #: labels)``; a late label is scored here against the prediction its instance was served
    scored: list = field(default_factory=list)
    #: unlabelled instances that fell out of the held store during the call
    held_dropped: int = 0
    #: label events of the call that joined the instance they name (held before, or earlier
    #: in the call): scored against its served prediction and learned as a labelled row; the
    #: others are in ``rejected``
    labels_joined: int = 0
    #: learner events and detector signals not published as alerts (their specs' alert rules
    #: hold them back): ``(source, kind) -> count``, for the worker's metrics
    events: dict = field(default_factory=dict)

    def count(self, source: str, kind: str) -> None:
        """One more unpublished event of ``source`` and ``kind``."""
        self.events[source, kind] = self.events.get((source, kind), 0) + 1


@dataclass
class HeldPredictions:
    """Predictions of rows a stream of features holds, all by the same model.

    ``offsets`` and ``ts`` (int64) are those of the instances the rows came from;
    ``proba`` has shape ``(len(ids), len(classes))``; ``n_features`` is the number of
    columns the scoring model used (the columns known at its latest generation).
    """

    ids: list
    y_true: list  # the rows' labels (None for unlabelled rows)
    offsets: np.ndarray
    ts: np.ndarray
    classes: list
    y_pred: list
    proba: np.ndarray
    n_features: int


@dataclass
class FeatureResult:
    """What :class:`worker.pipeline.FeatureStreamPipeline` produced for one call."""

    predictions: HeldPredictions | None = None
    ranking: RankingOut | None = None  # after a generation (row -1: no input row caused it)
    rejected: list = field(default_factory=list)  # (offsets, PipelineError) of refused rows
    unknown_ids: list = field(default_factory=list)  # arrival ids no held row has
