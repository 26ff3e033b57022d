"""The worker's preflight against a real broker: topics made by ``topics create`` pass without
a warning, and checkpoints that would be stored uncompressed are warned about, from the
checkpoints topic's own ``compression.type`` as the broker describes it or from the
producer's."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from worker_support import new_prefix, settings_from, worker_env

from worker.preflight import preflight
from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka


def _uncompressed(admin, topic: str) -> None:
    """Set ``compression.type=uncompressed`` on ``topic`` (the broker then stores its
    records uncompressed whatever the producer sends)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("compression.type", "uncompressed",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def test_uncompressed_checkpoints_are_warned_about_at_start(kafka_bootstrap, admin):
    prefix = new_prefix("preflight")
    settings = settings_from(worker_env(kafka_bootstrap, prefix, "p1"))
    create_topics(settings)
    assert preflight(settings).warnings == ()
    # the producer does not compress: the worker's level 0 leaves the states as they are
    plain = settings_from(worker_env(kafka_bootstrap, prefix, "p1",
                                     KAFKA__EXTRA={"compression.type": "none"}))
    [warning] = preflight(plain).warnings
    assert "the producer's compression.type is none" in warning
    assert "STREAMFOREST_CHECKPOINT__COMPRESSION_LEVEL=1" in warning
    # compressed in the worker: nothing to warn about
    zlib = settings_from(worker_env(kafka_bootstrap, prefix, "p1", CHECKPOINT__COMPRESSION_LEVEL="1",
                                    KAFKA__EXTRA={"compression.type": "none"}))
    assert preflight(zlib).warnings == ()
    # the topic stores uncompressed whatever the producer sends
    _uncompressed(admin, settings.topics.checkpoints)
    [warning] = preflight(settings).warnings
    assert f"topic {settings.topics.checkpoints} has compression.type=uncompressed" in warning
