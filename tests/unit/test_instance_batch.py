"""InstanceBatch and PredictionBatch: the contracts, decoding a batch record into stream rows,
dead-lettering a batch for one bad row, and batched prediction output (no broker:
confluent-kafka ``Message`` objects are built in memory)."""

from __future__ import annotations

import json
import math

import msgpack
import numpy as np
import pytest
from confluent_kafka import Message
from pydantic import ValidationError

from schemas import Prediction
from schemas.batches import (
    BatchRowError,
    InstanceBatch,
    PredictionBatch,
    decode_instance_batch,
    is_instance_batch,
)
from schemas.codec import decode, encode, encode_state
from schemas.deadletter import parse_deadletter_headers
from schemas.instances import InstanceLimits
from schemas.kinds import INSTANCE_BATCH, KIND_HEADER
from worker.intake import Caps, RecordDecoder
from worker.metrics import WorkerMetrics
from worker.output import Outbox, OutputEncoder
from worker.pipeline import PipelineConfig, Profiles
from worker.settings import load_settings
from worker.step import learn_streams
from worker.task import PartitionTask
from worker.tools.dev.produce import BATCH_HEADERS, batch_values, instance_values

CFG = PipelineConfig(predictor="forgetful_tree", rankers=[], batch_size=10)


def _rows(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, [int(v) for v in X[:, 0] > 0.5]


# --------------------------------------------------------------------------- the contract


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_instance_batch_round_trips_bit_for_bit(fmt):
    X, y = _rows(7)
    y[2] = None
    b = InstanceBatch(stream="s1", X=X, y=y, ids=[f"r{i}" for i in range(7)], ts=list(range(7)),
                      features=["a", "b", "c"])
    value, headers = encode(b, fmt)
    back = decode_instance_batch(value, headers)
    assert back == b and back.X.dtype == np.float64
    assert back.X.tobytes() == X.tobytes()  # floats bit for bit in both formats
    assert back.row_labels() == y and back.row_ids()[2] == "r2"


def test_json_batches_may_be_typed_as_nested_lists_with_defaults():
    value = b'{"v":1,"stream":"s1","ts":9,"X":[[0.1,2],[0.3,0.4]],"y":["UP",null]}'
    b = decode_instance_batch(value)
    np.testing.assert_array_equal(b.X, [[0.1, 2.0], [0.3, 0.4]])
    assert b.row_ids() == [0, 1] and b.row_ts() == [9, 9] and b.row_labels() == ["UP", None]


@pytest.mark.parametrize("fields, code, where, row", [
    ({"X": [[0.1, 0.2], [0.3, math.nan]]}, "non_finite", "X[1]", 1),
    ({"X": [[0.1, 0.2], [0.3]]}, "feature_count", "X[1]", 1),
    ({"X": [[0.1], [0.2], [0.3]], "y": [1, True, 0]}, "invalid_field", "y[1]", 1),
    ({"X": [[0.1], [0.2], [0.3]], "y": [1, 0, []]}, "invalid_field", "y[2]", 2),
    ({"X": [[0.1], [0.2]], "ids": [1, 2.5]}, "invalid_field", "ids[1]", 1),
    ({"X": [[0.1], [0.2]], "ts": [1, -1]}, "invalid_field", "ts[1]", 1),
    ({"X": [[0.1], [0.2]], "y": [1]}, "invalid_field", "y", None),
    ({"X": [[0.1, 0.2]], "features": ["a"]}, "feature_count", "features", None),
    ({"X": [[0.1, 0.2]], "features": ["a", "a"]}, "invalid_field", "features", None),
    ({"X": []}, "invalid_field", "X", None),
    ({"X": [[0.1]], "extra": 1}, "invalid_field", "extra", None),
    ({"X": [[0.1]], "v": 7}, "unknown_version", "v", None),
])
def test_invalid_batches_name_the_row_and_the_reason(fields, code, where, row):
    d = {"v": 1, "stream": "s", "ts": 0, **fields}
    with pytest.raises(BatchRowError) as err:
        decode_instance_batch(json.dumps(d).encode())
    assert (err.value.code, err.value.where, err.value.row) == (code, where, row)
    assert err.value.reason
    with pytest.raises(ValidationError):  # the model refuses the same values
        InstanceBatch(**{k: v for k, v in d.items() if k != "extra"} | (
            {"extra": 1} if "extra" in d else {}))


def test_msgpack_matrix_with_nan_is_refused_at_its_row():
    X, y = _rows(20)
    X[13, 1] = math.inf
    with pytest.raises(BatchRowError) as err:
        decode_instance_batch(encode_state({"v": 1, "stream": "s", "ts": 0, "X": X, "y": y}))
    assert (err.value.code, err.value.row) == ("non_finite", 13)
    with pytest.raises(BatchRowError) as err:  # not a matrix
        decode_instance_batch(encode_state({"v": 1, "stream": "s", "ts": 0, "X": X[0]}))
    assert err.value.where == "X" and err.value.row is None


def test_limits_apply_per_row():
    X, _ = _rows(4)
    value = encode_state({"v": 1, "stream": "s", "ts": 0, "X": X, "y": [1, 0, "z" * 9, 1]})
    with pytest.raises(BatchRowError) as err:
        decode_instance_batch(value, limits=InstanceLimits(max_label_length=8))
    assert (err.value.code, err.value.row) == ("too_long", 2)
    with pytest.raises(BatchRowError) as err:
        decode_instance_batch(value, limits=InstanceLimits(max_features=2))
    assert err.value.code == "too_many_features"


def test_the_fast_path_agrees_with_full_validation():
    """Plain batches take the fast path; its result is the one validation gives."""
    X, y = _rows(30)
    d = {"v": 1, "stream": "s", "ts": list(range(30)), "X": X, "y": y, "ids": list(range(30))}
    fast = decode_instance_batch(encode_state(d))
    full = InstanceBatch.model_validate(d)
    assert fast == full
    # an int beyond 64 bits is not taken by the fast path, and refused by validation
    d["ids"] = [2**64 - 1] + d["ids"][1:]
    with pytest.raises(BatchRowError) as err:
        decode_instance_batch(encode_state(d))
    assert err.value.row == 0


def test_prediction_batch_checks_alignment_and_round_trips():
    p = PredictionBatch(stream="s", model="m", ids=[1, 2], y_pred=["a", None], classes=["a", "b"],
                        proba=[[0.9, 0.1], [0.0, 0.0]], y_true=["a", "b"], topic="t",
                        partition=0, offset=5, ts=[1, 2])
    for fmt in ("msgpack", "json"):
        value, headers = encode(p, fmt)
        assert decode(value, PredictionBatch, headers) == p
    with pytest.raises(ValidationError):
        PredictionBatch(**{**dict(p), "proba": np.zeros((2, 3))})
    with pytest.raises(ValidationError):
        PredictionBatch(**{**dict(p), "ts": [1]})


def test_the_kind_header_tells_batches_from_instances():
    assert is_instance_batch(BATCH_HEADERS)
    assert is_instance_batch([("content-type", b"application/json"), (KIND_HEADER,
                                                                       INSTANCE_BATCH.encode())])
    assert not is_instance_batch([(KIND_HEADER, b"instance")]) and not is_instance_batch(None)


def test_produce_batches_carry_consecutive_ids_and_timestamps():
    X, y = _rows(25)
    values = batch_values("s", X, y, size=10, start_id=100, ts0=7)
    batches = [decode_instance_batch(v) for v in values]
    assert [len(b) for b in batches] == [10, 10, 5]
    assert sum((b.row_ids() for b in batches), []) == list(range(100, 125))
    assert sum((b.row_ts() for b in batches), []) == list(range(7, 32))
    np.testing.assert_array_equal(np.concatenate([b.X for b in batches]), X)


# --------------------------------------------------------------------------- the worker side


def _decoder(cfg=CFG):
    return RecordDecoder(Profiles(cfg), Caps())


def _batch_messages(stream, X, y, size, first_offset=0, start_id=0):
    return [Message(topic="in", partition=0, offset=first_offset + i, key=stream.encode(),
                    value=v, headers=list(BATCH_HEADERS))
            for i, v in enumerate(batch_values(stream, X, y, size=size, start_id=start_id))]


def _single_messages(stream, X, y, first_offset=0, start_id=0):
    return [Message(topic="in", partition=0, offset=first_offset + i, key=stream.encode(), value=v)
            for i, v in enumerate(instance_values(stream, X, y, start_id=start_id))]


def _run(msgs, batches_out=True, committed=0):
    """Decode, learn and encode one partition's messages: (outputs, dead letters, task)."""
    task = PartitionTask("g", "in", 0, "in.features")
    task.committed = committed
    dec = _decoder()
    outbox = Outbox("test")
    offsets = np.array([m.offset() for m in msgs], dtype=np.int64)
    streams = dec.read_instances(task, msgs, offsets, outbox, 1 << 20)
    learned = learn_streams(task, streams)
    s = load_settings({"STREAMFOREST_OUTPUT__PREDICTION_BATCHES": str(batches_out).lower()})
    enc = OutputEncoder(s.topics, WorkerMetrics(), output=s.output)
    for stream, pl, sr, lo, res in learned.results:
        enc.encode(task, stream, pl, res, sr, lo, outbox)
    return outbox.records, outbox.dead, task, dec


def _predictions(outputs):
    return [decode(v, Prediction) for o in outputs for v in o[2]]


def test_batched_rows_give_the_predictions_of_the_same_rows_one_per_record():
    X, y = _rows(60)
    single = _predictions(_run(_single_messages("a", X, y))[0])
    out, dead, task, dec = _run(_batch_messages("a", X, y, 20), batches_out=False)
    batched = _predictions(out)
    assert not dead and len(batched) == 60
    assert [(p.id, p.y_pred, p.proba, p.y_true) for p in batched] == \
        [(p.id, p.y_pred, p.proba, p.y_true) for p in single]
    # rows share their record's offset; within it they are told apart by their id
    assert [p.offset for p in batched] == [i // 20 for i in range(60)]
    assert dec.extra_live_rows == 57  # 60 rows in 3 records


def test_prediction_batches_hold_the_rows_in_order():
    X, y = _rows(60)
    single = _predictions(_run(_single_messages("a", X, y))[0])
    out, dead, _, _ = _run(_batch_messages("a", X, y, 20))
    assert not dead and len(out) == 3
    pbs = []
    for topic, key, values, headers in out:
        assert topic == "sf.predictions" and key == b"a" and (KIND_HEADER, b"prediction-batch") in headers
        pbs += [decode(v, PredictionBatch, headers) for v in values]
    assert [pb.offset for pb in pbs] == [0, 1, 2]
    assert sum((pb.ids for pb in pbs), []) == list(range(60))
    assert sum((pb.y_pred for pb in pbs), []) == [p.y_pred for p in single]
    assert sum((pb.y_true for pb in pbs), []) == y
    # probabilities: those of the single predictions, in the columns of the batch's classes
    for pb in pbs[1:]:  # the first batch has rows predicted before any class was known
        for r, i in enumerate(pb.ids):
            p = single[i]
            assert dict(zip(pb.classes, pb.proba[r].tolist())) == dict(zip(p.classes, p.proba))
    first = pbs[0]
    known = [i for i, p in enumerate(single[:20]) if p.classes]
    assert all(not first.proba[r].any() for r in range(20) if r not in known)


def test_a_bad_row_dead_letters_its_batch_and_the_rest_goes_on():
    X, y = _rows(60)
    msgs = _batch_messages("a", X, y, 20)
    Xb = X[20:40].copy()
    Xb[7, 1] = math.nan
    msgs[1] = Message(topic="in", partition=0, offset=1, key=b"a", headers=list(BATCH_HEADERS),
                      value=encode_state({"v": 1, "stream": "a", "ts": 0, "X": Xb,
                                          "y": y[20:40]}))
    labels = list(y[40:60])
    labels[4] = [1.0, 2.0]  # targets in a classification stream
    msgs.append(Message(topic="in", partition=0, offset=3, key=b"a", headers=list(BATCH_HEADERS),
                        value=encode_state({"v": 1, "stream": "a", "ts": 0, "X": X[40:60],
                                            "y": labels})))
    msgs.append(Message(topic="in", partition=0, offset=4, key=b"a", headers=list(BATCH_HEADERS),
                        value=encode_state({"v": 1, "stream": "a", "ts": 0, "X": X[:2, :2]})))
    out, dead, task, _ = _run(msgs, batches_out=False)
    preds = _predictions(out)
    assert [p.offset for p in preds] == [0] * 20 + [2] * 20  # the other batches went on
    h = [parse_deadletter_headers(d[2]) for d in dead]
    assert [(x["offset"], x["code"], x.get("row")) for x in h] == [
        (1, "non_finite", 7), (3, "invalid_target", 4), (4, "feature_count", 0)]
    assert "X[7]" in h[0]["reason"] and "y[4]" in h[1]["reason"]
    assert [d[1] for d in dead] == [msgs[1].value(), msgs[3].value(), msgs[4].value()]
    assert task.pipelines["a"].n_instances == 40  # no row of a refused batch was learned


def test_a_refused_first_batch_creates_no_stream_and_replay_skips_it_quietly():
    X, _ = _rows(10)
    msgs = [Message(topic="in", partition=0, offset=0, key=b"a", headers=list(BATCH_HEADERS),
                    value=encode_state({"v": 1, "stream": "a", "ts": 0, "X": X,
                                        "y": [0] * 9 + [[1.0]]}))]
    out, dead, task, _ = _run(msgs)
    assert not out and [d[3] for d in dead] == ["invalid_target"] and not task.pipelines
    _, dead2, _, _ = _run(msgs, committed=1)  # replayed: dead-lettered before, not again
    assert not dead2


def test_batches_and_instances_mix_in_partition_order():
    X, y = _rows(60)
    msgs = (_single_messages("a", X[:10], y[:10])
            + _batch_messages("a", X[10:50], y[10:50], 20, first_offset=10, start_id=10)
            + _single_messages("a", X[50:], y[50:], first_offset=12, start_id=50))
    single = _predictions(_run(_single_messages("a", X, y))[0])
    out, dead, _, _ = _run(msgs)
    assert not dead
    kinds = [len(o) for o in out]
    assert kinds.count(4) == 2  # two PredictionBatch records, the rest plain predictions
    rows = []
    for o in out:
        if len(o) == 4:
            pb = decode(o[2][0], PredictionBatch, o[3])
            rows += list(zip(pb.ids, pb.y_pred))
        else:
            rows += [(p.id, p.y_pred) for p in (decode(v, Prediction) for v in o[2])]
    assert rows == [(i, p.y_pred) for i, p in enumerate(single)]


def test_a_new_stream_may_start_with_a_named_batch():
    X, y = _rows(30)
    value = encode_state({"v": 1, "stream": "n", "ts": 0, "X": X[:10], "y": y[:10],
                          "features": ["a", "b", "c"]})
    swapped = encode_state({"v": 1, "stream": "n", "ts": 0, "X": X[10:, ::-1].copy(),
                            "y": y[10:], "features": ["c", "b", "a"]})
    msgs = [Message(topic="in", partition=0, offset=i, key=b"n", value=v,
                    headers=list(BATCH_HEADERS)) for i, v in enumerate((value, swapped))]
    task = PartitionTask("g", "in", 0, "in.features")
    outbox = Outbox("test")
    streams = _decoder().read_instances(task, msgs, np.array([0, 1]), outbox, 1 << 20)
    assert not outbox and task.pipelines["n"].feature_names == ["a", "b", "c"]
    sr = streams["n"]
    sr.finish(3)
    np.testing.assert_array_equal(sr.X, X)  # columns put back in the stream's order


def test_json_msgpack_equivalence_of_prediction_batch_output():
    X, y = _rows(40)
    s = load_settings({"STREAMFOREST_OUTPUT__PREDICTION_BATCHES": "true",
                       "STREAMFOREST_OUTPUT__PREDICTIONS": "json"})
    task = PartitionTask("g", "in", 0, "in.features")
    dec = _decoder()
    msgs = _batch_messages("a", X, y, 20)
    outbox = Outbox("test")
    streams = dec.read_instances(task, msgs, np.array([0, 1]), outbox, 1 << 20)
    learned = learn_streams(task, streams)
    enc = OutputEncoder(s.topics, WorkerMetrics(), output=s.output)
    for stream, pl, sr, lo, res in learned.results:
        enc.encode(task, stream, pl, res, sr, lo, outbox)
    msgpack_out, _, _, _ = _run(_batch_messages("a", X, y, 20))
    for (_, _, [jv], jh), (_, _, [mv], mh) in zip(outbox.records, msgpack_out):
        assert ("content-type", b"application/json") in jh
        assert json.loads(jv)["proba"] is None or isinstance(json.loads(jv)["proba"], list)
        assert decode(jv, PredictionBatch, jh) == decode(mv, PredictionBatch, mh)
    assert msgpack.unpackb(mv, raw=False, ext_hook=lambda c, d: c)["proba"] == 1  # array ext


def test_tail_shows_batch_records_with_their_contract():
    from worker.tools.tail import render

    X, y = _rows(3)
    [value] = batch_values("s", X, y, size=3)
    m = Message(topic="sf.instances", partition=0, offset=4, key=b"s", value=value,
                headers=list(BATCH_HEADERS))
    out = render("instances", m, None)
    assert "error" not in out and out["format"] == "msgpack"
    assert out["value"]["X"] == X.tolist() and out["value"]["y"] == y
    out, _, _, _ = _run(_batch_messages("a", *_rows(40), 20))
    _, key, [value], headers = out[1]
    shown = render("predictions", Message(topic="sf.predictions", partition=0, offset=1,
                                          key=key, value=value, headers=headers), None)
    assert "error" not in shown and len(shown["value"]["proba"]) == 20
    # the same bytes without the header are checked as a Prediction, and refused
    assert "error" in render("predictions", Message(topic="sf.predictions", partition=0,
                                                    offset=1, key=key, value=value), None)
