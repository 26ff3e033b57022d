"""Stream pipelines: the stages of one stream's learners, driven test-then-train (no Kafka).

* :mod:`~worker.pipeline.protocol`: :class:`StreamPipeline`, what the runtime asks of
  either kind;
* :mod:`~worker.pipeline.engine`: :class:`Pipeline`, the segmenting engine of a stream of
  instances;
* :mod:`~worker.pipeline.feature_stream`: :class:`FeatureStreamPipeline`, a stream of
  features (held instances, columns that arrive later);
* :mod:`~worker.pipeline.stages`: selector, predictor, rankers and detectors, met through
  the learner registry's declared capabilities;
* :mod:`~worker.pipeline.tasks`: classification and multi-target regression;
* :mod:`~worker.pipeline.config`: :class:`PipelineConfig` and its validation;
* :mod:`~worker.pipeline.profiles`: which configuration a stream id gets;
* :mod:`~worker.pipeline.results`: what a run of rows or an arrival produces.

:func:`make_pipeline` and :func:`pipeline_from_state` choose between the two kinds of
pipeline (by the profile's first predictor, or by the state's ``kind``).
"""

from __future__ import annotations

from models import registry

from .config import PipelineConfig, check_config, stream_seed
from .engine import HELD_ROWS, Pipeline
from .errors import PipelineError
from .feature_stream import FeatureStreamPipeline
from .profiles import Profiles
from .protocol import StreamPipeline
from .results import (
    Alert,
    FeatureResult,
    HeldPredictions,
    PredictionBlock,
    RankingOut,
    StreamResult,
)

__all__ = ["Alert", "FeatureResult", "FeatureStreamPipeline", "HeldPredictions", "Pipeline",
           "PipelineConfig", "PipelineError", "PredictionBlock", "Profiles", "RankingOut",
           "StreamPipeline", "StreamResult", "check_config", "make_pipeline", "pipeline_from_state",
           "stream_seed"]


def make_pipeline(stream: str, cfg: PipelineConfig, n_features: int,
                  feature_names: list[str] | None = None, max_classes: int | None = None,
                  max_rows: int = 100_000,
                  max_features: int = 2000, held_rows: int = HELD_ROWS,
                  held_age_ms: int = 0) -> StreamPipeline:
    """The pipeline of a new stream: of features when the profile's first predictor learns
    from feature arrivals, of instances otherwise.

    ``n_features`` and ``feature_names`` come from the stream's first instance; a stream of
    features takes them as its base features (``x0, x1, ...`` for a list). ``max_rows`` and
    ``max_features`` bound a stream of features only; ``held_rows`` and ``held_age_ms`` the
    unlabelled instances a stream of instances holds for their labels
    (:mod:`worker.pipeline.held`).

    Examples
    --------
    >>> make_pipeline("s1", PipelineConfig(predictor="feature_stream"), 2).feature_names
    ['x0', 'x1']
    >>> make_pipeline("s1", PipelineConfig(), 2).arrivals
    False
    """
    if cfg.arrivals:
        names = list(feature_names) if feature_names else [f"x{j}" for j in range(n_features)]
        return FeatureStreamPipeline(stream, cfg, names, max_classes=max_classes,
                                     max_rows=max_rows, max_features=max_features)
    return Pipeline(stream, cfg, n_features, feature_names, max_classes=max_classes,
                    held_rows=held_rows, held_age_ms=held_age_ms)


def pipeline_from_state(state: dict) -> StreamPipeline:
    """The pipeline a ``to_state()`` of either kind describes, continuing exactly.

    A stream of features' state has a ``kind`` (its forest's registry name); a stream of
    instances' state has none.
    """
    kind = state.get("kind")
    if kind is None:
        return Pipeline.from_state(state)
    spec = registry.REGISTRY.get(kind)
    if spec is None or not spec.arrivals:
        raise ValueError(f"pipeline state of unknown kind {kind!r}")
    return FeatureStreamPipeline.from_state(state)
