"""Every message contract survives a trip through a real broker: encode -> produce -> consume -> decode gives
back an equal message, in msgpack and in JSON, with and without the content-type header (sniffing). Dead
letters keep the refused record's exact bytes and original headers, plus readable dead-letter headers."""

from __future__ import annotations

import numpy as np
import pytest
from confluent_kafka import Producer
from worker_support import read_partition_to_end

from schemas import (
    CheckpointManifest,
    DriftAlert,
    FeatureArrival,
    Instance,
    Prediction,
    Ranking,
    StreamCheckpoint,
)
from schemas.codec import decode, encode
from schemas.deadletter import deadletter_headers, deadletter_record, parse_deadletter_headers
from schemas.errors import DecodeError

pytestmark = pytest.mark.kafka

TIMEOUT_S = 30.0
TS = 1_700_000_000_000


def _samples() -> list[object]:
    """At least one message of every contract, covering the alternative shapes of their fields."""
    rng = np.random.default_rng(7)
    return [
        Instance(stream="s1", id=1, ts=TS, x=[0.1, -2.5, 3e-12], y="UP"),
        Instance(stream="s-2", id="row-9", ts=TS + 1, x={"temp": 21.5, "wind": 0.0}, y=[1.5, -0.25], weight=2.0),
        Instance(stream="s1", id=2, ts=TS + 2, x=[1.0, 2.0, 3.0]),  # unlabelled
        FeatureArrival(stream="s1", feature="f9", values={"1": 0.5, "2": 0.75}, ts=TS),
        FeatureArrival(stream="s1", feature="f10", values=[0.5, 0.7], ids=[1, "b"], ts=TS),
        Prediction(
            stream="s1", id=1, model="forgetful_forest", y_pred="UP", classes=["DOWN", "UP"], proba=[0.25, 0.75],
            y_true="DOWN", topic="sf.instances", partition=3, offset=123456789, ts=TS,
        ),  # fmt: skip
        Prediction(
            stream="s-2", id="row-9", model="orf", y_pred=[1.25, 0.5], classes=None, proba=None,
            topic="sf.instances", partition=0, offset=0, ts=TS,
        ),  # fmt: skip
        DriftAlert(
            stream="s1", source="adwin", level="drift", position=1023, detail="error rate 0.31 -> 0.48", ts=TS
        ),
        DriftAlert(stream="s1", source="forgetful_forest", level="warning", position=7, feature="f3", ts=TS),
        Ranking(
            stream="s1", method="orf_mda", features=["f2", "f0", "f1"], scores=[0.5, 0.25, -0.125], n_seen=1000, ts=TS
        ),
        StreamCheckpoint(
            group="streamforest",
            topics=["sf.instances"],
            partition=2,
            stream="s1",
            config={"predictor": ["forgetful_forest"], "params": {"forgetful_forest": {"n_trees": 3}}},
            offsets={"sf.instances": 10_000},
            state={
                "node_feature": rng.integers(-1, 10, size=(3, 64)).astype(np.int32),
                "threshold": rng.normal(size=(3, 64)),
                "counts": rng.random((3, 64, 2), dtype=np.float32),
                "rng_state": np.array([2**64 - 1, 0, 12345], dtype=np.uint64),
                "n_seen": np.array([10_000], dtype=np.int64),
                "empty": np.zeros((0, 4)),
                "flags": np.array([True, False]),
                "classes": ["DOWN", "UP"],
                "detector": {"kind": "adwin", "arrays": {"window": np.arange(5, dtype=np.float64)}},
            },
            ts=TS,
        ),
        CheckpointManifest(
            group="streamforest", topics=["sf.instances"], partition=2, offsets={"sf.instances": 10_000},
            ts=TS, streams={"s1": [17, 3, 2_900_000]},
        ),
    ]


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, list]], **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **config})
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers)
    assert producer.flush(TIMEOUT_S) == 0


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_every_contract_round_trips_through_kafka(kafka_bootstrap, make_topic, fmt: str) -> None:
    topic = make_topic()
    messages = _samples()
    encoded = [encode(msg, fmt) for msg in messages]
    keys = [getattr(msg, "stream", "manifest").encode() for msg in messages]
    _produce(kafka_bootstrap, topic, [(key, *wire) for key, wire in zip(keys, encoded, strict=True)])
    records = read_partition_to_end(kafka_bootstrap, topic, timeout_s=TIMEOUT_S)
    assert len(records) == len(messages)
    content_type = b"application/msgpack" if fmt == "msgpack" else b"application/json"
    for msg, key, (value, _), record in zip(messages, keys, encoded, records, strict=True):
        model = type(msg)
        assert record.key() == key
        assert record.value() == value  # the broker hands back the exact bytes
        assert dict(record.headers())["content-type"] == content_type
        decoded = decode(record.value(), model, record.headers(), max_bytes=len(record.value()))
        assert type(decoded) is model
        assert decoded == msg, f"{model.__name__} changed on the way through Kafka ({fmt})"
        # a producer that sends no headers (kcat, another language) is decoded by sniffing the bytes
        assert decode(record.value(), model, None, max_bytes=len(record.value())) == msg


def test_json_typed_by_a_person_is_decoded(kafka_bootstrap, make_topic) -> None:
    topic = make_topic()
    typed = b'{"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,0.2],"y":"UP"}'
    _produce(kafka_bootstrap, topic, [(b"s1", typed, [])])
    (record,) = read_partition_to_end(kafka_bootstrap, topic, timeout_s=TIMEOUT_S)
    expected = Instance(stream="s1", id=1, ts=0, x=[0.1, 0.2], y="UP")
    assert decode(record.value(), Instance, record.headers()) == expected


def test_checkpoint_larger_than_the_default_message_size(kafka_bootstrap, make_topic) -> None:
    # the checkpoints topic may be created with a larger max.message.bytes than the broker default (1 MiB)
    limit = 8 * 1024 * 1024
    topic = make_topic(config={"cleanup.policy": "compact", "max.message.bytes": str(limit)})
    state = np.random.default_rng(3).normal(size=400_000)  # 3.2 MB of float64
    cp = StreamCheckpoint(
        group="g", topics=["sf.instances"], partition=0, stream="big", config={}, offsets={"sf.instances": 1},
        state={"w": state}, ts=TS,
    )
    value, headers = encode(cp, "msgpack")
    assert 3_000_000 < len(value) < limit
    _produce(kafka_bootstrap, topic, [(b"big", value, headers)], **{"message.max.bytes": limit})
    (record,) = read_partition_to_end(kafka_bootstrap, topic, timeout_s=TIMEOUT_S)
    decoded = decode(record.value(), StreamCheckpoint, record.headers(), max_bytes=limit)
    assert decoded == cp
    assert np.array_equal(decoded.state["w"], state)


def test_dead_letter_keeps_bytes_and_explains(kafka_bootstrap, make_topic) -> None:
    topic = make_topic()
    bad_value = b'{"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,NaN]}'
    original_headers = [("trace-id", b"abc-123"), ("content-type", b"application/json")]
    with pytest.raises(DecodeError) as refused:
        decode(bad_value, Instance, original_headers)
    key, value, headers = deadletter_record(
        b"s1", bad_value, original_headers, refused.value, "sf.instances", 5, 4242, "0.1.0"
    )
    garbage = bytes(range(256))  # not msgpack, not JSON
    _produce(
        kafka_bootstrap,
        topic,
        [
            (key, value, headers),
            (None, garbage, deadletter_headers("DecodeError", "not valid msgpack", "sf.instances", 0, 7, "0.1.0")),
        ],
    )
    first, second = read_partition_to_end(kafka_bootstrap, topic, timeout_s=TIMEOUT_S)
    assert first.key() == b"s1" and first.value() == bad_value
    assert ("trace-id", b"abc-123") in first.headers()
    parsed = parse_deadletter_headers(first.headers())
    assert parsed == {
        "error_class": "DecodeError",
        "code": "non_finite",
        "reason": str(refused.value),
        "topic": "sf.instances",
        "partition": 5,
        "offset": 4242,
        "version": "0.1.0",
    }
    assert "x[1]" in parsed["reason"]
    assert second.key() is None and second.value() == garbage
    assert parse_deadletter_headers(second.headers()) == {
        "error_class": "DecodeError",
        "reason": "not valid msgpack",
        "topic": "sf.instances",
        "partition": 0,
        "offset": 7,
        "version": "0.1.0",
    }
