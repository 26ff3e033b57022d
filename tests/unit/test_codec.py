"""Wire codec: round trips, format selection, error codes, and the fast instance path."""

from __future__ import annotations

import doctest
import json
import math

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import schemas
import schemas.labels
from schemas import (
    DecodeError,
    DriftAlert,
    FeatureArrival,
    Instance,
    LabelEvent,
    Ranking,
    StreamCheckpoint,
    decode,
    decode_instance,
    decode_state,
    encode,
    encode_state,
    instance_features,
    state_equal,
)
from schemas import instances as instances_module
from schemas.codec import load, validate
from schemas.messages import INT64_MAX, INT64_MIN

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- strategies

names = st.text(min_size=1, max_size=12)
int64 = st.integers(INT64_MIN, INT64_MAX)
timestamps = st.integers(0, INT64_MAX)
finite = st.floats(-1e100, 1e100)  # what a producer may send (schemas.values.MAX_MAGNITUDE)
labels = st.one_of(int64, st.text(max_size=10))
targets = st.one_of(labels, st.lists(finite, min_size=1, max_size=4))
rows = st.one_of(
    st.lists(finite, min_size=1, max_size=10),
    st.dictionaries(st.text(max_size=8), finite, min_size=1, max_size=10),
)

instances = st.builds(
    Instance,
    stream=names,
    id=labels,
    ts=timestamps,
    x=rows,
    y=st.none() | targets,
    weight=st.none() | st.floats(min_value=0.0, max_value=1e100),
)


@st.composite
def feature_arrivals(draw):
    if draw(st.booleans()):
        values = draw(st.dictionaries(st.text(max_size=8), finite, max_size=6))
        ids = None
    else:
        ids = draw(st.lists(labels, max_size=6, unique_by=str))  # distinct as text, as joined
        values = draw(st.lists(finite, min_size=len(ids), max_size=len(ids)))
    return FeatureArrival(
        stream=draw(names), feature=draw(names), values=values, ids=ids, ts=draw(timestamps)
    )


@st.composite
def predictions(draw):
    classes = draw(st.none() | st.lists(labels, max_size=5))
    proba = None
    if classes is not None and draw(st.booleans()):
        proba = draw(st.lists(st.floats(0, 1), min_size=len(classes), max_size=len(classes)))
    return schemas.Prediction(
        stream=draw(names),
        id=draw(labels),
        model=draw(names),
        y_pred=draw(st.none() | targets),
        classes=classes,
        proba=proba,
        y_true=draw(st.none() | targets),
        topic=draw(names),
        partition=draw(st.integers(0, 2**31 - 1)),
        offset=draw(timestamps),
        ts=draw(timestamps),
    )


drift_alerts = st.builds(
    DriftAlert,
    stream=names,
    source=names,
    level=st.sampled_from(["warning", "drift"]),
    position=timestamps,
    feature=st.none() | names,
    detail=st.text(max_size=30),
    ts=timestamps,
)


@st.composite
def rankings(draw):
    features = draw(st.lists(st.text(max_size=8), unique=True, max_size=6))
    scores = draw(st.lists(finite, min_size=len(features), max_size=len(features)))
    return Ranking(
        stream=draw(names),
        method=draw(st.sampled_from(["orf_mda", "orf_mdg", "symrf", "abfs", "feature_stream"])),
        features=features,
        scores=scores,
        n_seen=draw(timestamps),
        ts=draw(timestamps),
    )


DTYPES = [
    np.bool_,
    np.int8,
    np.uint8,
    np.int16,
    np.uint16,
    np.int32,
    np.uint32,
    np.int64,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    np.dtype("U3"),
    np.dtype("S4"),
    np.dtype("M8[ns]"),
]
arrays = hnp.arrays(
    dtype=st.sampled_from(DTYPES),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)
np_scalars = arrays.filter(lambda a: a.size > 0).map(lambda a: a.reshape(-1)[0])
plain_scalars = st.one_of(
    st.none(),
    st.booleans(),
    int64,
    st.floats(),  # NaN and infinities included: the state codec carries them
    st.text(max_size=10),
    st.binary(max_size=10),
)
state_trees = st.recursive(
    st.one_of(plain_scalars, arrays, np_scalars),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@st.composite
def checkpoints(draw):
    topic = draw(names)
    return StreamCheckpoint(
        group=draw(names),
        topics=[topic],
        partition=draw(st.integers(0, 1000)),
        stream=draw(names),
        config=draw(st.dictionaries(st.text(max_size=6), plain_scalars, max_size=4)),
        offsets={topic: draw(timestamps)},
        state=draw(st.dictionaries(st.text(max_size=6), state_trees, max_size=4)),
        ts=draw(timestamps),
    )


MESSAGES = {
    "instance": instances,
    "feature_arrival": feature_arrivals(),
    "prediction": predictions(),
    "drift_alert": drift_alerts,
    "ranking": rankings(),
}


def raises(fn, *args, **kwargs) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        fn(*args, **kwargs)
    return info.value


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
@pytest.mark.parametrize("kind", list(MESSAGES))
def test_contract_round_trip(kind, fmt):
    @FAST
    @given(MESSAGES[kind])
    def check(msg):
        value, headers = encode(msg, fmt)
        back = decode(value, type(msg), headers)
        assert back == msg
        assert back.model_dump() == msg.model_dump()
        # without the header the format is sniffed
        assert decode(value, type(msg)) == msg

    check()


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_checkpoint_round_trip(fmt):
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(checkpoints())
    def check(cp):
        value, headers = encode(cp, fmt)
        back = decode(value, StreamCheckpoint, headers, max_bytes=len(value))
        assert back == cp  # StreamCheckpoint.__eq__ compares arrays by dtype, shape and bytes
        assert state_equal(back.state, cp.state)

    check()


@settings(max_examples=150, deadline=None)
@given(state_trees)
def test_state_round_trip(tree):
    assert state_equal(decode_state(encode_state(tree)), tree)


@settings(max_examples=60, deadline=None)
@given(arrays)
def test_array_round_trip_keeps_dtype_shape_and_bytes(arr):
    back = decode_state(encode_state({"a": arr}))["a"]
    assert back.dtype == arr.dtype and back.shape == arr.shape
    assert back.tobytes() == arr.tobytes()


def test_state_edge_cases():
    tree = {
        "zero_d": np.array(3.5),
        "empty": np.zeros((0, 3), dtype=np.int32),
        "fortran": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        "strided": np.arange(10.0)[::3],
        "scalar32": np.float32(1.25),
        "scalar_bool": np.bool_(True),
        "int_keys": {1: "a", -2: [1, 2]},
        "nan": math.nan,
        "bytes": b"\x00\xff",
        "nested": [{"arrays": {"w": np.ones((2, 2), dtype=np.float32)}}],
    }
    back = decode_state(encode_state(tree))
    assert state_equal(back, tree)
    assert type(back["scalar32"]) is np.float32 and type(back["scalar_bool"]) is np.bool_
    assert back["zero_d"].shape == () and back["empty"].shape == (0, 3)
    assert back["fortran"].flags.c_contiguous
    np.testing.assert_array_equal(back["fortran"], tree["fortran"])


def test_big_endian_arrays_arrive_little_endian_with_the_same_values():
    arr = np.arange(5, dtype=">f8") / 3
    back = decode_state(encode_state(arr))
    assert back.dtype == np.dtype("<f8")
    np.testing.assert_array_equal(back, arr)
    # the wire bytes are little-endian
    raw = msgpack.unpackb(msgpack.unpackb(encode_state(arr)).data)
    assert raw[0] == "<f8" and raw[2] == arr.astype("<f8").tobytes()


def test_state_refuses_objects_and_pickle_free():
    with pytest.raises(TypeError, match="dtype object"):
        encode_state(np.array([object()], dtype=object))
    with pytest.raises(TypeError, match="cannot encode a value of type set"):
        encode_state({"s": {1, 2}})


def test_state_refuses_malformed_bytes():
    assert raises(decode_state, b"\xc1").code == "not_decodable"
    bad_length = msgpack.packb(msgpack.ExtType(1, msgpack.packb(["<f8", [2], b"\x00" * 15])))
    err = raises(decode_state, bad_length)
    assert err.code == "not_decodable" and "needs 16 bytes, got 15" in err.reason
    objects = msgpack.packb(msgpack.ExtType(1, msgpack.packb(["|O", [1], b"\x00" * 8])))
    assert "not accepted" in raises(decode_state, objects).reason
    unknown = msgpack.packb(msgpack.ExtType(42, b""))
    assert "extension type 42" in raises(decode_state, unknown).reason


def test_json_checkpoint_is_plain_json_with_tagged_arrays():
    cp = StreamCheckpoint(
        group="g",
        topics=["sf.instances"],
        partition=0,
        stream="s1",
        config={"detectors": ["adwin"]},
        offsets={"sf.instances": 7},
        state={"w": np.array([1.0, 2.0]), "raw": b"ab", "nan": math.nan},
        ts=1,
    )
    value, headers = encode(cp, "json")
    doc = json.loads(value)
    assert doc["state"]["w"] == {"__ndarray__": "<f8", "shape": [2], "data": "AAAAAAAA8D8AAAAAAAAAQA=="}
    assert doc["state"]["raw"] == {"__bytes__": "YWI="} and doc["state"]["nan"] == {"__float__": "nan"}
    assert headers == [("content-type", b"application/json")]
    assert decode(value, StreamCheckpoint) == cp


# --------------------------------------------------------------------------- format


def test_kcat_line_decodes():
    line = b'{"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,0.2],"y":"UP"}'
    inst = decode(line, Instance)
    assert inst == Instance(stream="s1", id=1, ts=0, x=[0.1, 0.2], y="UP")
    assert decode_instance(line) == inst
    assert decode_instance(b"  " + line + b"\n") == inst  # blank around a typed line


def test_json_output_is_compact_and_typeable():
    value, _ = encode(Instance(stream="s1", id=1, ts=0, x=[0.1, 0.2], y="UP"), "json")
    assert value == b'{"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,0.2],"y":"UP","weight":null}'
    assert value.isascii()


def test_headers_choose_the_format():
    msg = DriftAlert(stream="s", source="adwin:error", level="drift", position=3, ts=0)
    value, headers = encode(msg)
    assert headers == [("content-type", b"application/msgpack")]
    assert value[0] & 0xF0 == 0x80  # a msgpack fixmap
    assert decode(value, DriftAlert, {"Content-Type": "application/x-msgpack"}) == msg
    jvalue, _ = encode(msg, "json")
    assert decode(jvalue, DriftAlert, [("content-type", b"application/json; charset=utf-8")]) == msg
    # a header that contradicts the bytes wins, and the bytes do not parse
    assert raises(decode, jvalue, DriftAlert, [("content-type", b"application/msgpack")]).code == (
        "not_decodable"
    )
    err = raises(decode, jvalue, DriftAlert, [("content-type", b"text/plain")])
    assert err.code == "not_decodable" and "unsupported content-type 'text/plain'" in err.reason
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        encode(msg, "xml")


# --------------------------------------------------------------------------- errors

OK = {"v": 1, "stream": "s1", "id": 1, "ts": 0, "x": [0.5, 1.5, 2.5, 3.5], "y": "UP"}


def pack(**changes):
    d = {k: v for k, v in {**OK, **changes}.items() if v is not ...}
    return msgpack.packb(d)


BAD_CASES = [
    # (value, code, where, words in the reason)
    (b"\x00\x01\x02", "not_decodable", "", "extra bytes"),
    (b"\xc1", "not_decodable", "", "invalid msgpack"),
    (b'{"stream": "s1", "x": [1.0,', "not_decodable", "", "not valid JSON"),
    (b"", "not_decodable", "", "empty"),
    (b"[1, 2]", "not_an_object", "", "got an array"),
    (msgpack.packb("text"), "not_an_object", "", "got a string"),
    (msgpack.packb([1.0]), "not_an_object", "", "got an array"),
    (pack(v=2), "unknown_version", "v", "schema version 2 is not supported"),
    (pack(v=2, x=...), "unknown_version", "v", "reads 1"),
    (pack(x=...), "missing_field", "x", "required"),
    (pack(stream=...), "missing_field", "stream", "required"),
    (pack(ts="0"), "invalid_field", "ts", "valid integer"),
    (pack(ts=-1), "invalid_field", "ts", "greater than or equal to 0"),
    (pack(id=1.5), "invalid_field", "id", "integer or a string"),
    (pack(id=True), "invalid_field", "id", "integer or a string"),
    (pack(id=2**63), "invalid_field", "id", "less than or equal"),
    (pack(x=[1.0, "a"]), "invalid_field", "x[1]", "valid number"),
    (pack(x=[1.0, True]), "invalid_field", "x[1]", "valid number"),
    (pack(x="1,2"), "invalid_field", "x", "list of numbers or a map"),
    (pack(y=True), "invalid_field", "y", "class label"),
    (pack(y=[1.0, None]), "invalid_field", "y[1]", "valid number"),
    (pack(weight=-1.0), "invalid_field", "weight", "greater than or equal to 0"),
    (pack(weigth=1.0), "invalid_field", "weigth", "unknown field"),
    (pack(x=[0.5, math.nan, 1.0]), "non_finite", "x[1]", "got nan"),
    (pack(x=[0.5, 1.0, -math.inf]), "non_finite", "x[2]", "got -inf"),
    (pack(x={"a": 1.0, "temp": math.inf}), "non_finite", "x['temp']", "got inf"),
    (b'{"stream":"s1","id":1,"ts":0,"x":[0.1,NaN]}', "non_finite", "x[1]", "got nan"),
    (b'{"stream":"s1","id":1,"ts":0,"x":[1e999]}', "non_finite", "x[0]", "got inf"),
    (pack(y=[1.0, math.nan]), "non_finite", "y[1]", "finite"),
    (pack(weight=math.inf), "non_finite", "weight", "finite"),
    (msgpack.packb({**OK, "x": msgpack.ExtType(5, b"")}), "invalid_field", "x", "list of numbers"),
]


@pytest.mark.parametrize("value,code,where,words", BAD_CASES)
def test_bad_instances(value, code, where, words):
    for fn in (lambda v: decode(v, Instance), decode_instance):
        err = raises(fn, value)
        assert (err.code, err.where) == (code, where), str(err)
        assert words in err.reason, str(err)
        assert str(err) == (f"{code} at {where}: {err.reason}" if where else f"{code}: {err.reason}")


def test_oversized_says_size_and_limit():
    value = pack()
    err = raises(decode_instance, value, max_bytes=len(value) - 1)
    assert err.code == "oversized"
    assert err.reason == f"the message is {len(value)} bytes, the limit is {len(value) - 1} bytes"
    assert decode_instance(value, max_bytes=len(value)).id == 1


def test_several_problems_are_counted():
    err = raises(decode, msgpack.packb({"v": 1}), Instance)
    assert err.code == "missing_field" and err.where == "stream"
    assert "(and 3 more problems)" in err.reason


def test_tombstone_and_non_bytes():
    assert raises(decode, None, Instance).code == "not_decodable"
    err = raises(decode_instance, '{"stream": "s1"}')
    assert err.code == "not_decodable" and "bytes, got str" in err.reason
    assert decode_instance(memoryview(pack())).id == 1


def test_feature_count_and_names():
    value = pack()
    assert decode_instance(value, n_features=4).x == OK["x"]
    err = raises(decode_instance, value, n_features=5)
    assert (err.code, err.where) == ("feature_count", "x")
    assert err.reason == "the stream has 5 features, this instance has 4"
    err = raises(decode_instance, value, feature_names=["a", "b", "c"])
    assert err.code == "feature_count" and "has 3 features" in err.reason

    named = pack(x={"b": 2.0, "a": 1.0})
    inst = decode_instance(named, feature_names=["a", "b"])
    assert instance_features(inst, ["a", "b"]) == [1.0, 2.0]
    assert instance_features(inst) == [2.0, 1.0]  # a new stream takes the map's order
    err = raises(decode_instance, named, feature_names=["a", "b", "c"])
    assert (err.code, err.where) == ("missing_feature", "x['c']")
    assert "feature 'c' of the stream is missing" in err.reason
    err = raises(decode_instance, named, feature_names=["a"])
    assert (err.code, err.where) == ("unknown_feature", "x['b']")
    assert "not one of the stream's 1 features (a)" in err.reason
    err = raises(decode_instance, named, n_features=3)
    assert err.code == "feature_count"


def test_other_contracts_report_cross_field_errors():
    fa = {"v": 1, "stream": "s", "feature": "f", "values": [1.0, 2.0], "ts": 0}
    err = raises(decode, msgpack.packb(fa), FeatureArrival)
    assert (err.code, err.where) == ("missing_field", "ids")
    err = raises(decode, msgpack.packb({**fa, "ids": [1]}), FeatureArrival)
    assert (err.code, err.where) == ("invalid_field", "ids")
    assert "has 1 ids but 'values' has 2 values" in err.reason
    rk = {"stream": "s", "method": "abfs", "features": ["a"], "scores": [1.0, 2.0], "n_seen": 0, "ts": 0}
    err = raises(decode, msgpack.packb(rk), Ranking)
    assert (err.code, err.where) == ("invalid_field", "scores")


# --------------------------------------------------------------------------- fast path

# values of every type a decoder can produce, to mutate valid instances with
wild_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),  # what msgpack carries
    st.floats(),
    st.floats(-2.0, 2.0),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.lists(st.one_of(st.floats(), st.integers(-5, 5), st.booleans(), st.text(max_size=2)), max_size=4),
    st.dictionaries(st.text(max_size=3), st.one_of(st.floats(), st.integers(-5, 5), st.text(max_size=2)), max_size=3),
)
field_names = st.sampled_from([*Instance.model_fields, "extra_field"])


@st.composite
def instance_maps(draw):
    """Valid instance maps, sometimes with fields removed or replaced by anything."""
    d = dict(draw(instances))
    if draw(st.booleans()):
        del d["v"]
    for _ in range(draw(st.integers(0, 3))):
        key = draw(field_names)
        if draw(st.integers(0, 4)) == 0:
            d.pop(key, None)
        else:
            d[key] = draw(wild_values)
    return d


def outcome(fn, value):
    try:
        inst = fn(value)
    except DecodeError as err:
        return ("error", err.code, err.where, err.reason)
    return ("ok", inst.model_dump(), inst.model_fields_set, repr(inst))


def same_as_validation(d: dict, fmt: str, read, model):
    """``d`` sent as ``fmt`` is read by ``read`` as full validation reads it as ``model``:
    the same value or error; returns the encoded value and validation's outcome (``None``
    for a map JSON cannot hold)."""
    if fmt == "msgpack":
        value = msgpack.packb(d)
    else:
        try:
            value = json.dumps(d).encode()
        except (TypeError, ValueError):  # bytes are not JSON
            return None
    full = outcome(lambda v: decode(v, model), value)
    assert outcome(read, value) == full
    if full[0] == "ok":
        assert read(value) == decode(value, model)
    return value, full


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_fast_path_matches_full_validation(fmt):
    @settings(max_examples=300, deadline=None)
    @given(instance_maps())
    def check(d):
        same_as_validation(d, fmt, decode_instance, Instance)

    check()


def test_fast_path_takes_the_common_case():
    # guards the speed: a well-typed instance must not fall back to full validation
    d = load(pack())
    assert instances_module._fast_instance(d) == validate(d, Instance)
    d = load(pack(x={"a": 1.0, "b": 2.0}, y=[1.0, 2.0], weight=0.5, id="k"))
    assert instances_module._fast_instance(d) is not None
    # ints in x need coercion to float: left to full validation, same result
    d = load(b'{"stream":"s1","id":1,"ts":0,"x":[1,2]}')
    assert instances_module._fast_instance(d) is None
    assert decode_instance(b'{"stream":"s1","id":1,"ts":0,"x":[1,2]}').x == [1.0, 2.0]


label_field_names = st.sampled_from([*LabelEvent.model_fields, "x", "extra_field"])


@st.composite
def label_maps(draw):
    """Valid LabelEvent maps (labels and regression targets), sometimes with fields removed
    or replaced by anything."""
    d = draw(st.builds(LabelEvent, stream=names, id=labels, y=targets, ts=timestamps)).model_dump()
    if draw(st.booleans()):
        del d["v"]
    for _ in range(draw(st.integers(0, 3))):
        key = draw(label_field_names)
        if draw(st.integers(0, 4)) == 0:
            d.pop(key, None)
        else:
            d[key] = draw(wild_values)
    return d


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_the_label_events_fast_path_matches_full_validation(fmt):
    """A LabelEvent the plain checks take is the one validation gives (its fields, the
    fields it was sent with); anything else gets validation's error."""
    limits = instances_module.InstanceLimits(max_label_length=6)

    @settings(max_examples=300, deadline=None)
    @given(label_maps())
    def check(d):
        read = same_as_validation(d, fmt, schemas.labels.decode_label_event, LabelEvent)
        if read is not None and read[1][0] == "ok":
            value = read[0]
            event = decode(value, LabelEvent)
            try:
                schemas.labels.decode_label_event(value, limits=limits)
            except DecodeError as err:
                assert err.code == "too_long" and any(
                    type(v) is str and len(v) > 6 for v in (event.id, event.y))

    check()


def test_the_label_events_fast_path_takes_the_common_case():
    d = load(msgpack.packb({"v": 1, "stream": "s1", "id": 7, "y": "UP", "ts": 90}))
    assert schemas.labels._fast_label_event(d) == validate(d, LabelEvent)
    assert schemas.labels._fast_label_event({**d, "y": [0.5, 1.5]}) is not None
    assert schemas.labels._fast_label_event({k: v for k, v in d.items() if k != "y"}) is None


# --------------------------------------------------------------------------- docs


def test_docstring_examples():
    for module in (schemas.codec, schemas.instances, schemas.labels, schemas.errors, schemas.messages,
                   schemas.checkpoint, schemas.deadletter):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__
