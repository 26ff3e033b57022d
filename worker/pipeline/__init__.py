"""Stream pipelines: the stages of one stream's learners, driven test-then-train (no Kafka).

* :mod:`~worker.pipeline.engine`: :class:`Pipeline`, the segmenting engine;
* :mod:`~worker.pipeline.stages`: selector, predictor, rankers and detectors, met through
  the learner registry's declared capabilities;
* :mod:`~worker.pipeline.tasks`: classification and multi-target regression;
* :mod:`~worker.pipeline.config`: :class:`PipelineConfig` and its validation;
* :mod:`~worker.pipeline.profiles`: which configuration a stream id gets;
* :mod:`~worker.pipeline.results`: what a run of rows produces.
"""

from __future__ import annotations

from .config import PipelineConfig, check_config, stream_seed
from .engine import Pipeline
from .errors import PipelineError
from .profiles import Profiles
from .results import Alert, PredictionBlock, RankingOut, StreamResult

__all__ = ["Alert", "Pipeline", "PipelineConfig", "PipelineError", "PredictionBlock",
           "Profiles", "RankingOut", "StreamResult", "check_config", "stream_seed"]
