"""Message contracts, checkpoint envelope and dead-letter headers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from schemas import (
    MESSAGE_TYPES,
    CheckpointManifest,
    DecodeError,
    DriftAlert,
    FeatureArrival,
    Instance,
    Prediction,
    Ranking,
    StreamCheckpoint,
    deadletter_headers,
    deadletter_record,
    decode_state,
    encode_state,
    parse_deadletter_headers,
    state_equal,
)
from schemas import deadletter as dl


def error_types(exc: ValidationError) -> list[tuple[str, tuple]]:
    return [(e["type"], e["loc"]) for e in exc.errors()]


def test_every_contract_is_versioned_and_closed():
    for model in (*MESSAGE_TYPES, StreamCheckpoint, CheckpointManifest):
        assert model.model_fields["v"].default == 1
        assert model.model_config["extra"] == "forbid"
        assert model.model_config["strict"] is True


def test_an_empty_row_is_a_contract_instance():
    """Streams of features start with no column: the contract takes an empty x, and the
    worker refuses it for other streams (tests/integration/test_worker_features.py)."""
    assert Instance(stream="s1", id=1, ts=0, x={}).x == {}
    assert Instance(stream="s1", id=1, ts=0, x=[]).x == []


def test_instance_defaults_and_forms():
    inst = Instance(stream="s1", id="a-1", ts=5, x={"t": 1.0, "h": 2.0})
    assert (inst.v, inst.y, inst.weight) == (1, None, None)
    assert Instance(stream="s1", id=1, ts=0, x=[1, 2], y=[0.5, 1.5]).x == [1.0, 2.0]


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({"id": True}, ("wrong_type", ("id",))),  # a boolean is not an id
        ({"ts": "5"}, ("int_type", ("ts",))),  # no parsing of numbers from strings
        ({"x": [1.0, "2"]}, ("float_type", ("x", "list", 1))),
        ({"x": [1.0, math.nan]}, ("finite_number", ("x", "list", 1))),
        ({"y": True}, ("wrong_type", ("y",))),  # a boolean is neither a label nor targets
        ({"y": []}, ("too_short", ("y", "list"))),
        ({"weight": -0.5}, ("greater_than_equal", ("weight",))),
        ({"stream": ""}, ("string_too_short", ("stream",))),
        ({"v": 3}, ("unknown_version", ("v",))),
        ({"labels": 1}, ("extra_forbidden", ("labels",))),
    ],
)
def test_instance_is_strict(changes, expected):
    base = {"stream": "s1", "id": 1, "ts": 0, "x": [1.0]}
    with pytest.raises(ValidationError) as info:
        Instance(**{**base, **changes})
    assert error_types(info.value) == [expected]


def test_feature_arrival_forms():
    by_id = FeatureArrival(stream="s", feature="f9", values={"1": 0.5, "k": 0.25}, ts=0)
    assert by_id.ids is None
    aligned = FeatureArrival(stream="s", feature="f9", values=[0.5, 0.25], ids=[1, "k"], ts=0)
    assert aligned.ids == [1, "k"]
    # 1 and "1" are one id: the join reads ids as text
    with pytest.raises(ValidationError, match="duplicate ids"):
        FeatureArrival(stream="s", feature="f9", values=[0.5, 0.25], ids=[1, "1"], ts=0)
    bad = [
        ({"values": [0.5]}, "required when 'values' is a list"),
        ({"values": [0.5], "ids": [1, 2]}, "has 2 ids but 'values' has 1 values"),
        ({"values": {"1": 0.5}, "ids": [1]}, "must be omitted when 'values' is a map"),
        ({"values": [0.5, 0.5], "ids": [3, 3]}, "duplicate ids"),
    ]
    for changes, words in bad:
        with pytest.raises(ValidationError, match=words):
            FeatureArrival(stream="s", feature="f", ts=0, **changes)


def test_prediction_alignment():
    base = dict(stream="s", id=1, model="forgetful_forest", topic="sf.instances", partition=0, offset=9, ts=0)
    p = Prediction(**base, y_pred="UP", classes=["UP", "DOWN"], proba=[0.75, 0.25], y_true="DOWN")
    assert p.proba == [0.75, 0.25]
    assert Prediction(**base, y_pred=None).classes is None  # before any label
    with pytest.raises(ValidationError, match="has 1 values but 'classes' has 2"):
        Prediction(**base, y_pred="UP", classes=["UP", "DOWN"], proba=[1.0])
    with pytest.raises(ValidationError, match="required when 'proba' is given"):
        Prediction(**base, y_pred="UP", proba=[1.0])
    with pytest.raises(ValidationError):
        Prediction(**{**base, "partition": -1}, y_pred="UP")


def test_drift_alert_levels():
    alert = DriftAlert(stream="s", source="adwin:error", level="warning", position=100, ts=0)
    assert alert.detail == "" and alert.feature is None
    with pytest.raises(ValidationError):
        DriftAlert(stream="s", source="adwin:error", level="alarm", position=100, ts=0)


def test_ranking_alignment():
    r = Ranking(stream="s", method="orf_mda", features=["a", "b"], scores=[0.5, -0.1], n_seen=10, ts=0)
    assert r.features[0] == "a"
    with pytest.raises(ValidationError, match="has 1 values but 'features' has 2"):
        Ranking(stream="s", method="orf_mda", features=["a", "b"], scores=[0.5], n_seen=10, ts=0)
    with pytest.raises(ValidationError, match="duplicate names"):
        Ranking(stream="s", method="orf_mda", features=["a", "a"], scores=[1.0, 2.0], n_seen=1, ts=0)
    with pytest.raises(ValidationError):
        Ranking(stream="s", method="abfs", features=["a"], scores=[math.inf], n_seen=1, ts=0)


# --------------------------------------------------------------------------- checkpoint


def make_state():
    return {
        "kind": "online_random_forest",
        "params": {"n_models": 3, "seed": 1, "max_features": None},
        "extra": {"classes": ["UP", "DOWN"], "feature_names": ["a", "b"]},
        "arrays": {
            "node_feature": np.array([[0, -1, -1]], dtype=np.int32),
            "rng_state": np.array([1, 2, 3], dtype=np.uint64),
            "n_seen": np.array([42], dtype=np.int64),
        },
    }


def _checkpoint(**over):
    fields = dict(group="g", topics=["t"], partition=0, stream="s", config={}, offsets={"t": 1},
                  state={}, ts=0)
    fields.update(over)
    return StreamCheckpoint(**fields)


def test_checkpoint_carries_a_pipeline_state_and_what_it_covers():
    pipeline = {"stages": {"predictor": make_state(), "detectors": [{"arrays": {"w": np.zeros(3)}}]}}
    cp = _checkpoint(state=pipeline, config={"predictor": ["online_random_forest"],
                                             "params": {"online_random_forest": {"n_trees": 3}}},
                     offsets={"t": 43}, partition=2)
    assert cp.state["stages"]["predictor"]["arrays"]["n_seen"][0] == 42
    assert cp.offsets == {"t": 43} and cp.partition == 2
    # the state survives the state codec exactly, dtypes included
    assert state_equal(decode_state(encode_state(cp.state)), pipeline)


def test_checkpoint_equality_compares_arrays_exactly():
    a = _checkpoint(state={"w": np.zeros(2)})
    b = a.model_copy(update={"state": {"w": np.zeros(2)}})
    c = a.model_copy(update={"state": {"w": np.zeros(2, dtype=np.float32)}})
    assert a == b and a != c


def test_checkpoint_refuses_unstorable_values_and_bad_coverage():
    with pytest.raises(ValidationError, match=r"state\['w'\]: dtype object cannot be stored"):
        _checkpoint(state={"w": np.array([None], dtype=object)})
    with pytest.raises(ValidationError, match=r"state\['fn'\]: values of type function"):
        _checkpoint(state={"fn": lambda: 0})
    with pytest.raises(ValidationError):
        _checkpoint(offsets={"t": -1})
    with pytest.raises(ValidationError, match="input topics"):
        _checkpoint(offsets={"t": 1, "u": 2})
    with pytest.raises(ValidationError):
        _checkpoint(topics=[])


def test_manifest_names_chunk_spans():
    m = CheckpointManifest(group="g", topics=["t"], partition=1, offsets={"t": 9}, ts=0,
                           streams={"s": [3, 2, 100]})
    assert m.streams["s"] == [3, 2, 100]
    with pytest.raises(ValidationError):
        m.model_validate({**m.model_dump(), "streams": {"s": [3, 2]}})


def test_state_equal_is_exact():
    assert state_equal({"a": [1, 2.0, "x"]}, {"a": (1, 2.0, "x")})
    assert not state_equal(1, 1.0)
    assert not state_equal(True, 1)
    assert state_equal(math.nan, math.nan)
    assert not state_equal(np.float32(1), np.float64(1))
    assert not state_equal(np.zeros(2), np.zeros((1, 2)))
    assert not state_equal({"a": 1}, {"a": 1, "b": 2})


# --------------------------------------------------------------------------- dead letters


def test_deadletter_headers_round_trip():
    headers = deadletter_headers(
        "DecodeError", "non_finite at x[3]: must be a finite number, got nan", "sf.instances", 3, 1234, "0.1.0",
        code="non_finite",
    )
    assert headers[0] == ("sf-error-class", b"DecodeError")
    assert all(isinstance(k, str) and isinstance(v, bytes) for k, v in headers)
    assert parse_deadletter_headers(headers) == {
        "error_class": "DecodeError",
        "code": "non_finite",
        "reason": "non_finite at x[3]: must be a finite number, got nan",
        "topic": "sf.instances",
        "partition": 3,
        "offset": 1234,
        "version": "0.1.0",
    }
    names = {dl.ERROR_CLASS, dl.REASON, dl.SOURCE_TOPIC, dl.SOURCE_PARTITION, dl.SOURCE_OFFSET, dl.WORKER_VERSION}
    assert names == {
        "sf-error-class", "sf-reason", "sf-source-topic", "sf-source-partition", "sf-source-offset",
        "sf-worker-version",
    }
    # without a code there is no code header
    assert "code" not in parse_deadletter_headers(deadletter_headers("KeyError", "k", "t", 0, 0, "1"))


def test_deadletter_reason_is_clipped():
    headers = deadletter_headers("ValueError", "x" * 10_000, "t", 0, 0, "1")
    reason = parse_deadletter_headers(headers)["reason"]
    assert len(reason) == dl.MAX_REASON_CHARS and reason.endswith("...")


def test_deadletter_record_keeps_the_original_bytes():
    err = DecodeError("feature_count", "the stream has 5 features, this instance has 4", "x")
    original = [("content-type", b"application/msgpack"), ("trace", b"abc"), ("sf-reason", b"old")]
    key, value, headers = deadletter_record(b"s1", b"\x81\xa1x\x01", original, err, "sf.instances", 0, 7, "0.1.0")
    assert (key, value) == (b"s1", b"\x81\xa1x\x01")
    assert headers[:2] == original[:2]  # original headers first, an earlier explanation dropped
    parsed = parse_deadletter_headers(headers)
    assert parsed["code"] == "feature_count" and parsed["offset"] == 7
    assert parsed["reason"] == "feature_count at x: the stream has 5 features, this instance has 4"
    assert parsed["error_class"] == "DecodeError"


def test_parse_deadletter_headers_accepts_dicts_and_refuses_bad_numbers():
    assert parse_deadletter_headers({"sf-source-offset": "5", "other": b"x"}) == {"offset": 5}
    assert parse_deadletter_headers(None) == {}
    with pytest.raises(ValueError, match="sf-source-offset is not an integer"):
        parse_deadletter_headers([("sf-source-offset", b"five")])


def test_decode_error_attributes_and_pickling():
    import pickle

    err = DecodeError("oversized", "the message is 10 bytes, the limit is 5 bytes")
    assert isinstance(err, ValueError)
    assert str(err) == "oversized: the message is 10 bytes, the limit is 5 bytes"
    back = pickle.loads(pickle.dumps(err))
    assert (back.code, back.reason, back.where) == (err.code, err.reason, err.where)


def test_a_regression_prediction_as_the_worker_writes_it_is_valid():
    """Regression predictions carry no classes and an empty proba (worker/wire.py)."""
    p = Prediction(stream="r", id=1, model="isoup_symrf", y_pred=[0.5, 1.5], classes=None,
                   proba=[], y_true=[0.4, 1.6], topic="t", partition=0, offset=3, ts=0)
    assert p.proba == [] and p.classes is None
    with pytest.raises(ValidationError):
        Prediction(stream="r", id=1, model="m", y_pred=1, classes=None, proba=[0.5, 0.5],
                   topic="t", partition=0, offset=3, ts=0)
