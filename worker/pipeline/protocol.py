"""What the runtime asks of a stream pipeline, whichever its kind.

Both kinds, :class:`~worker.pipeline.engine.Pipeline` (a stream of instances) and
:class:`~worker.pipeline.feature_stream.FeatureStreamPipeline` (a stream of features),
meet :class:`StreamPipeline`. The intake (:mod:`worker.intake`) asks the pipeline what an
instance must look like (:attr:`~StreamPipeline.fixed_columns`), whether a row may take
the bulk kernel (:attr:`~StreamPipeline.bulk_ready`), and whether an InstanceBatch or a
FeatureArrival may be sent to it (:meth:`~StreamPipeline.check_instance_batch`,
:meth:`~StreamPipeline.check_arrival`), instead of asking which kind it is; only the step
(:mod:`worker.step`), which feeds the two kinds differently (rows alone, or rows and
arrivals in merged order), reads :attr:`~StreamPipeline.arrivals`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .config import PipelineConfig
from .errors import PipelineError


@runtime_checkable
class StreamPipeline(Protocol):
    """One stream's learners, test-then-train (see the module doc)."""

    #: the stream's FeatureArrivals go to it (a stream of features)
    arrivals: bool
    stream: str
    cfg: PipelineConfig
    task: Any
    n_instances: int

    @property
    def model_name(self) -> str:
        """Registry name of the predictor (the ``model`` of predictions)."""

    @property
    def feature_names(self) -> list[str] | None:
        """Names of the stream's columns (``None``: a stream that sends lists)."""

    @property
    def n_features(self) -> int:
        """Columns of the stream now."""

    @property
    def fixed_columns(self) -> tuple[int, list[str] | None] | None:
        """``(n_features, feature_names)`` every instance must have, or ``None`` when the
        stream's columns grow as features arrive (an instance is checked by the pipeline
        when its turn comes)."""

    @property
    def n_held(self) -> int:
        """Unlabelled instances held for their LabelEvents (the worker's gauge)."""

    @property
    def bulk_ready(self) -> bool:
        """Rows may be taken by the bulk decoding kernels (integer labels unchecked)."""

    def check_label(self, y: Any) -> None:
        """Refuse (:class:`PipelineError`) a label the stream cannot take."""

    def check_instance_batch(self) -> None:
        """Refuse (:class:`PipelineError`) InstanceBatch records, if the stream takes none."""

    def check_label_event(self, y: Any) -> None:
        """Refuse (:class:`PipelineError`) a LabelEvent the stream cannot take: its label
        (:meth:`check_label`), or any, if the stream takes none."""

    def check_arrival(self) -> None:
        """Refuse (:class:`PipelineError`) FeatureArrivals, if the stream takes none."""

    def to_state(self) -> dict:
        """The state a checkpoint holds (continues exactly)."""


def not_a_stream_of_features(stream: str) -> PipelineError:
    """The error of a FeatureArrival for a stream whose profile learns from instances."""
    return PipelineError(
        "no_feature_profile", f"stream {stream!r} is not a stream of features: give it a "
        "profile with predictor feature_stream (STREAMFOREST_PROFILES) to send it "
        "FeatureArrivals")


def no_instance_batches(stream: str) -> PipelineError:
    """The error of an InstanceBatch for a stream of features."""
    return PipelineError("batch_not_supported", f"stream {stream!r} is a stream of "
                         "features: send its instances one per record")
