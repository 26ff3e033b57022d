"""What the worker's preflight warns about without refusing to start: checkpoints that would be
stored uncompressed (:func:`worker.preflight.checkpoint_warnings`), and the producer's
compression as ``kafka.extra`` sets it, under either of librdkafka's names."""

from __future__ import annotations

import pytest

from worker.kafka_io import producer_config
from worker.preflight import checkpoint_warnings
from worker.settings import load_settings

TOPIC = "sf.checkpoints"


def _settings(level: int = 0, **extra: str):
    env = {"STREAMFOREST_CHECKPOINT__COMPRESSION_LEVEL": str(level)}
    for key, value in extra.items():
        env[f"STREAMFOREST_KAFKA__EXTRA__{key.replace('_', '.').upper()}"] = value
    return load_settings(env)


@pytest.mark.parametrize("level, extra, topic, warned", [
    (0, {}, "producer", None),  # the default: lz4 in the producer, kept by the topic
    (0, {}, None, None),  # a topic whose configs were not read
    (0, {}, "zstd", None),
    (0, {"compression_type": "none"}, "producer", "the producer's compression.type is none"),
    (0, {"compression_codec": "none"}, "producer", "the producer's compression.type is none"),
    (0, {"compression_type": "none"}, "gzip", None),  # the broker compresses
    (0, {}, "uncompressed", f"topic {TOPIC} has compression.type=uncompressed"),
    (1, {"compression_type": "none"}, "uncompressed", None),  # zlib in the worker
    (0, {"compression_type": "zstd"}, "producer", None),
])
def test_checkpoints_stored_uncompressed_are_warned_about(level, extra, topic, warned):
    s = _settings(level, **extra)
    configs = {} if topic is None else {TOPIC: {"compression.type": topic}}
    warnings = checkpoint_warnings(s, configs)
    if warned is None:
        assert warnings == []
    else:
        [text] = warnings
        assert warned in text and "STREAMFOREST_CHECKPOINT__COMPRESSION_LEVEL=1" in text


@pytest.mark.parametrize("key", ["compression.type", "compression.codec"])
def test_the_producer_compresses_as_kafka_extra_says_under_either_name(key):
    """``compression.codec`` is librdkafka's alias of ``compression.type``: the worker's lz4
    set after it would win, so it is not set then."""
    s = _settings(**{key.replace(".", "_"): "zstd"})
    conf = producer_config(s, None)
    assert conf[key] == "zstd"
    assert conf.get("compression.type", "zstd") == "zstd"
    assert producer_config(_settings(), None)["compression.type"] == "lz4"
