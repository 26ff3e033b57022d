"""Consumer errors: counted, logged, and the ones that must end the worker.

A fatal consumer error (a failed authorization, say) ends the worker at once. An input topic
reported unknown may be a passing error (a topic being created): :class:`InputWatch` ends the
worker only when it is still missing after ``startup_timeout_s``, naming the topic and the
setting to fix.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException

from . import consume_errors
from .failure import WorkerFailed
from .logs import event

log = logging.getLogger("streamforest.worker")


class InputWatch:
    """Watches the consumer's errors and the input topics (see the module doc).

    Parameters
    ----------
    topics : worker.settings.TopicSettings
        The input topic names.
    metrics : worker.metrics.WorkerMetrics
        Consumer errors by code.
    bound_s : float
        Seconds an input topic may stay unknown.
    """

    def __init__(self, topics, metrics, bound_s: float):
        self.topics = topics
        self.metrics = metrics
        self.bound_s = bound_s
        self.unknown_since: float | None = None

    def consume_error(self, err) -> None:
        """Count and log a consumer error; raise :class:`WorkerFailed` for fatal ones."""
        self.metrics.consume_errors.labels(code=err.name()).inc()
        event(log, logging.WARNING, "consume error", error=str(err), code=err.name())
        what = consume_errors.consumer_error_kind(err)
        if what == "fatal":
            raise WorkerFailed(f"fatal consumer error: {err}")
        if what == "unknown_topic" and self.unknown_since is None:
            self.unknown_since = time.monotonic()

    def restore_error(self, exc: Exception) -> None:
        """A restore failed: an unknown topic starts the clock as a consumer error does."""
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if isinstance(err, KafkaError) and err.code() in consume_errors.UNKNOWN_TOPIC:
            self.unknown_since = self.unknown_since or time.monotonic()

    def delivered(self) -> None:
        """Records came: the input topic is there."""
        self.unknown_since = None

    def check(self, consumer) -> None:
        """An input topic reported unknown and never came back within the bound: exit."""
        if self.unknown_since is None:
            return
        gone = time.monotonic() - self.unknown_since
        if gone <= self.bound_s:
            return
        missing = []
        for topic, var in ((self.topics.instances, "INSTANCES"),
                           (self.topics.features, "FEATURES")):
            try:
                md = consumer.list_topics(topic, timeout=5.0).topics.get(topic)
            except Exception:  # noqa: BLE001 (brokers unreachable: not this check's business)
                return
            if md is None or md.error is not None or not md.partitions:
                missing.append((topic, var))
        if not missing:
            self.unknown_since = None  # it was a passing error (a topic being created)
            return
        topic, var = missing[0]
        raise WorkerFailed(f"the input topic {topic} has been unknown for {gone:.0f} s "
                           f"(deleted?): create it, or point STREAMFOREST_TOPICS__{var} at "
                           "an existing topic")
