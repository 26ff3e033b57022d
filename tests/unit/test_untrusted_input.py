"""Any bytes a producer can send: both decoding paths agree, and whatever is accepted can be
written out, in every output format and into a checkpoint.

A record the worker accepts and then cannot encode is a poison pill: the worker dies on it,
restarts, reads it again and dies again, and the partition is stuck. So the property checked
here is end to end, through the worker's own decoder, pipelines and encoders (no broker: the
records are built in memory): for arbitrary JSON and msgpack values (strings with lone
surrogates, huge and tiny numbers, maps where lists belong, missing keys),

* the hot path (``worker.wire``) never accepts a record full validation refuses, and yields
  the same values;
* every record is either dead-lettered with a reason or gives outputs, and every output
  decodes with the contracts of ``schemas`` in both wire formats;
* every stream the records created checkpoints (``worker.checkpoint_store.encode_blob``).
"""

from __future__ import annotations

import json
import math

import msgpack
import numpy as np
import pytest
from confluent_kafka import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import DriftAlert, Prediction, Ranking
from schemas.checkpoint import StreamCheckpoint
from schemas.codec import decode
from schemas.errors import DecodeError
from schemas.instances import decode_instance, read_plain_instance
from worker.checkpoint_store import encode_blob
from worker.intake import Caps, RecordDecoder
from worker.metrics import WorkerMetrics
from worker.output import Outbox, OutputEncoder
from worker.pipeline import PipelineConfig, Profiles
from worker.settings import OutputSettings, load_settings
from worker.task import PartitionTask
from worker.wire import decode_bulk

MAX = 1 << 16
LONE = ["\ud800", "\udfff", "a\udc80b"]  # lone surrogates: Python text UTF-8 cannot encode

texts = st.one_of(st.text(max_size=4), st.sampled_from(LONE), st.sampled_from(["s1", "s2"]))
numbers = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([1e300, -1e300, 1.7976931348623157e308, 1e155, -1e154, 5e-324,
                                     1e100, -1e100, 9.99e99, -2.2250738585072014e-308]),
                    st.floats(min_value=-10, max_value=10))
labels = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["a", "b"]), texts, numbers,
                   st.lists(numbers, min_size=1, max_size=2))
rows = st.one_of(st.lists(numbers, min_size=1, max_size=3),
                 st.dictionaries(st.one_of(st.sampled_from(["f0", "f1", "f2"]), texts), numbers,
                                 min_size=1, max_size=3))


@st.composite
def instances(draw):
    """A near-valid instance map (so that most are accepted) with hostile parts."""
    d = {"v": 1, "stream": draw(st.one_of(st.sampled_from(["s1", "s2"]), texts)),
         "id": draw(st.one_of(st.integers(0, 50), texts)), "ts": draw(st.integers(0, 10)),
         "x": draw(rows)}
    if draw(st.booleans()):
        d["y"] = draw(labels)
    if draw(st.integers(0, 9)) == 0:
        d[draw(st.sampled_from(["weight", "extra"]))] = draw(numbers)
    return d


@st.composite
def label_events(draw):
    """A near-valid LabelEvent map (``sf-kind: label``) with hostile parts."""
    d = {"v": 1, "stream": draw(st.one_of(st.sampled_from(["s1", "s2"]), texts)),
         "id": draw(st.one_of(st.integers(0, 50), texts)), "ts": draw(st.integers(0, 10)),
         "y": draw(labels)}
    if draw(st.integers(0, 9)) == 0:
        d.pop(draw(st.sampled_from(["y", "id", "ts"])))
    return d


@st.composite
def records(draw):
    """``(key, value, headers)`` of one record: JSON or msgpack, keyed by its stream or not;
    an Instance, or now and then a LabelEvent."""
    label = draw(st.integers(0, 3)) == 0
    d = draw(label_events() if label else instances())
    as_json = draw(st.booleans())
    try:
        value = json.dumps(d).encode() if as_json else msgpack.packb(d)
    except (UnicodeEncodeError, ValueError, OverflowError):
        # msgpack cannot write lone surrogates: a producer can only send those in JSON
        value, as_json = json.dumps(d).encode(), True
    key_kind = draw(st.sampled_from(["stream", "stream", "stream", "none", "other"]))
    stream = d["stream"]
    key = None if key_kind == "none" else (
        "s2" if key_kind == "other" else stream).encode("utf-8", "surrogatepass")
    headers = [("content-type", b"application/json")] if as_json and draw(st.booleans()) else None
    if label:
        headers = [*(headers or []), ("sf-kind", b"label")]
    return key, value, headers


def _full(value, headers):
    try:
        return decode_instance(value, headers, max_bytes=MAX)
    except DecodeError:
        return None


@settings(max_examples=400, deadline=None)
@given(records())
def test_the_hot_path_never_accepts_what_full_validation_refuses(record):
    key, value, headers = record
    if headers and ("sf-kind", b"label") in headers:
        return  # a LabelEvent never takes the hot path (it has a header)
    full = _full(value, headers)
    if headers is None:
        fast = read_plain_instance(value, MAX)
        if fast is not None:
            assert full is not None
            assert fast == (full.stream, full.id, full.ts, full.x, full.y)
        bulk = decode_bulk([value], [key], MAX)
        if bulk.ok[0]:
            assert full is not None and full.stream.encode() == key
            ident = bulk.ident_of(0)
            assert ident == full.id and type(ident) is type(full.id)
            assert int(bulk.ts[0]) == full.ts
            label = bulk.label_of(0)
            assert label == full.y and type(label) is type(full.y)


def _worker_pass(batch, output_format):
    """Decode, learn and encode ``batch`` as the worker does; return outputs, dead, task."""
    settings = load_settings({})
    task = PartitionTask("g", "in", 0, "in.features")
    decoder = RecordDecoder(Profiles(PipelineConfig(batch_size=2)), Caps())
    output = OutputSettings(format=output_format)
    encoder = OutputEncoder(settings.topics, WorkerMetrics(), output=output)
    msgs = [Message(topic="in", partition=0, offset=i, key=k, value=v, headers=h)
            for i, (k, v, h) in enumerate(batch)]
    outbox = Outbox("test")
    offsets = np.arange(len(msgs), dtype=np.int64)
    for s, sr in decoder.read_instances(task, msgs, offsets, outbox, MAX).items():
        pl = task.pipelines[s]
        sr.finish(pl.n_features) if not pl.arrivals else None
        res = pl.process(sr.X, sr.ys, sr.offsets, ids=sr.ids, ts=sr.ts, labels=sr.labels)
        encoder.encode(task, s, pl, res, sr, 0, outbox)
    return outbox.records, outbox.dead, task


CONTRACTS = {"sf.predictions": Prediction, "sf.drift": DriftAlert, "sf.rankings": Ranking}


@pytest.mark.parametrize("output_format", ["msgpack", "json"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(records(), min_size=1, max_size=12))
def test_every_accepted_record_encodes_and_checkpoints(output_format, batch):
    outputs, dead, task = _worker_pass(batch, output_format)
    headers = [("content-type", b"application/json")] if output_format == "json" else None
    n_predictions = 0
    for topic, key, values in outputs:
        for v in values:
            got = decode(v, CONTRACTS[topic], headers)  # finite, valid text, the contract's shape
            if topic == "sf.predictions":
                n_predictions += 1
                assert got.stream == key.decode()
    # every record is accounted for: an instance by a prediction or a dead letter (never
    # both, never neither), a LabelEvent by its join or a dead letter
    refused = {int(dict(h)["sf-source-offset"]) for _k, _v, h, _c in dead}
    assert len(refused) == len(dead)
    instances = [i for i, (_k, _v, h) in enumerate(batch) if not h or ("sf-kind", b"label")
                 not in h]
    assert n_predictions + len(refused & set(instances)) == len(instances)
    for _key, _value, dl_headers, code in dead:
        assert code and dict(dl_headers)["sf-reason"]
    for stream, pl in task.pipelines.items():
        env = StreamCheckpoint(group="g", topics=["in", "in.features"], partition=0, stream=stream,
                               config=pl.cfg.as_dict(), offsets={"in": len(batch), "in.features": 0},
                               state=pl.to_state(), ts=0)
        assert encode_blob(env)


def test_a_lone_surrogate_is_dead_lettered_wherever_it_is():
    """The records a tester used to stop a partition, each dead-lettered with its reason."""
    base = {"v": 1, "stream": "s1", "id": 1, "ts": 0, "x": [0.5, 0.25], "y": "a"}
    poison = [  # (instance, key, expected code, where)
        ({**base, "y": "\ud800"}, b"s1", "invalid_text", "y"),
        ({**base, "id": "\ud800"}, b"s1", "invalid_text", "id"),
        ({**base, "x": {"\ud800": 0.5, "f1": 0.25}}, b"s1", "invalid_text", "x"),
        ({**base, "stream": "\ud800"}, b"s1", "invalid_text", "stream"),
        ({**base, "stream": "\ud800"}, None, "missing_key", ""),
        ({**base, "stream": "\ud800"}, "\ud800".encode("utf-8", "surrogatepass"), "invalid_key", ""),
    ]
    batch = [(b"s1", msgpack.packb({**base, "id": 0}), None)]
    batch += [(k, json.dumps(d).encode(), None) for d, k, _, _ in poison]
    outputs, dead, task = _worker_pass(batch, "msgpack")
    assert sum(len(v) for t, _, v in outputs if t == "sf.predictions") == 1
    assert [code for *_, code in dead] == [code for _, _, code, _ in poison]
    for (_d, _k, _code, where), (_, _, headers, _) in zip(poison, dead):
        assert where in dict(headers)["sf-reason"].decode()


@pytest.mark.parametrize("value", [1e300, -1.7976931348623157e308, 1e155])
def test_values_whose_squares_overflow_are_refused(value):
    """Statistics square feature values and targets: a finite input must not make them
    infinite (and the outputs NaN), so values beyond the bound are dead-lettered."""
    ok = {"v": 1, "stream": "s1", "id": 0, "ts": 0, "x": [0.5, 0.25], "y": "a"}
    bad = [{**ok, "id": 1, "x": [value, 0.25]}, {**ok, "id": 2, "weight": abs(value)}]
    batch = [(b"s1", msgpack.packb(ok), None)] + [(b"s1", msgpack.packb(d), None) for d in bad]
    _outputs, dead, _task = _worker_pass(batch, "msgpack")
    assert [code for *_, code in dead] == ["out_of_range"] * 2
    assert not math.isfinite(value * value) or abs(value) > 1e100
    regression = {**ok, "y": [1.0, value]}
    _outputs, dead, _task = _worker_pass([(b"s1", msgpack.packb({**ok, "y": [1.0, 2.0]}), None),
                                          (b"s1", msgpack.packb(regression), None)], "msgpack")
    assert [code for *_, code in dead] == ["out_of_range"]


def test_a_record_without_its_stream_as_key_is_dead_lettered():
    ok = {"v": 1, "stream": "s1", "id": 0, "ts": 0, "x": [0.5, 0.25], "y": "a"}
    batch = [(b"s1", msgpack.packb(ok), None), (None, msgpack.packb({**ok, "id": 1}), None),
             (b"s2", msgpack.packb({**ok, "id": 2}), None)]
    _outputs, dead, _task = _worker_pass(batch, "msgpack")
    assert [code for *_, code in dead] == ["missing_key", "key_mismatch"]


def test_a_map_on_a_stream_of_lists_is_refused():
    ok = {"v": 1, "stream": "s1", "id": 0, "ts": 0, "x": [0.5, 0.25], "y": "a"}
    batch = [(b"s1", msgpack.packb(ok), None),
             (b"s1", msgpack.packb({**ok, "id": 1, "x": {"b": 0.5, "a": 0.25}}), None)]
    _outputs, dead, _task = _worker_pass(batch, "msgpack")
    assert [code for *_, code in dead] == ["unknown_feature"]


def test_arrival_ids_are_distinct_as_text():
    """A FeatureArrival joins its values by the string form of each id (a map's keys are
    strings): ids 1 and "1" name one instance, so the distinct-ids check compares them so."""
    from schemas.messages import FeatureArrival

    value = json.dumps({"v": 1, "stream": "s1", "feature": "f9", "values": [0.5, 0.7],
                        "ids": [1, "1"], "ts": 0}).encode()
    with pytest.raises(DecodeError) as err:
        decode(value, FeatureArrival)
    assert err.value.where == "ids" and "duplicate" in err.value.reason
    ok = decode(value.replace(b'"1"]', b'"2"]'), FeatureArrival)
    assert ok.ids == [1, "2"]


@pytest.mark.parametrize(("batch", "code", "where"), [
    ({"X": [[0.5, 1e101]]}, "out_of_range", "X[0]"),
    ({"X": [[0.5, 0.5]], "y": ["\ud800"]}, "invalid_text", "y[0]"),
    ({"X": [[0.5, 0.5]], "ids": ["\udc00"]}, "invalid_text", "ids[0]"),
    ({"X": [[0.5, 0.5]], "y": [[1.0, -1e200]]}, "out_of_range", "y[0]"),
    ({"X": [[0.5, 0.5]], "features": ["a", "\ud800"]}, "invalid_text", "features[1]"),
])
def test_instance_batches_hold_the_same_rules(batch, code, where):
    from schemas.batches import InstanceBatch

    value = json.dumps({"v": 1, "stream": "s1", "ts": 0, **batch}).encode()
    with pytest.raises(DecodeError) as err:
        decode(value, InstanceBatch)
    assert (err.value.code, err.value.where) == (code, where)


def test_a_named_batch_on_a_stream_of_lists_is_refused():
    from schemas.kinds import INSTANCE_BATCH, KIND_HEADER

    ok = {"v": 1, "stream": "s1", "id": 0, "ts": 0, "x": [0.5, 0.25], "y": "a"}
    named = {"v": 1, "stream": "s1", "ts": 0, "X": [[0.5, 0.25]], "features": ["b", "a"], "y": ["a"]}
    batch = [(b"s1", msgpack.packb(ok), None),
             (b"s1", json.dumps(named).encode(), [(KIND_HEADER, INSTANCE_BATCH.encode())])]
    _outputs, dead, _task = _worker_pass(batch, "msgpack")
    assert [code for *_, code in dead] == ["unknown_feature"]
