"""The hot-path codec of the worker agrees with the contracts' full codec."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import Prediction
from schemas.codec import decode, decode_instance
from schemas.errors import DecodeError
from worker.wire import decode_fast, encode_predictions

MAX = 4096

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.binary(max_size=3),
)
rows = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(max_size=3), st.floats(), max_size=2),
    scalars,
)
fields = {
    "v": st.one_of(st.just(1), st.just(2), st.just(True), scalars),
    "stream": st.one_of(st.text(min_size=0, max_size=3), st.just("s" * 1025), scalars),
    "id": st.one_of(st.integers(min_value=-(2**64), max_value=2**64), st.text(max_size=3),
                    scalars),
    "ts": st.one_of(st.integers(min_value=-5, max_value=2**64), scalars),
    "x": rows,
    "y": st.one_of(st.none(), st.integers(min_value=-(2**64), max_value=2**64),
                   st.text(max_size=3), st.lists(st.floats(), max_size=2), scalars),
    "weight": st.one_of(st.floats(), scalars),
    "extra": scalars,
}


@st.composite
def messages(draw):
    keys = draw(st.sets(st.sampled_from(sorted(fields)), max_size=len(fields)))
    # mostly near-valid maps, so both accept and reject paths are exercised
    if draw(st.booleans()):
        keys |= {"stream", "id", "ts", "x"}
        keys -= {"extra", "weight"}
    d = {k: draw(fields[k]) for k in sorted(keys)}
    try:
        return msgpack.packb(d)
    except (OverflowError, TypeError, ValueError):
        return msgpack.packb({"stream": "s"})


def _full(value):
    try:
        inst = decode_instance(value, max_bytes=MAX)
    except DecodeError:
        return None
    return inst


@settings(max_examples=600, deadline=None)
@given(messages())
def test_fast_decode_never_accepts_what_full_validation_refuses(value):
    fast = decode_fast(value, MAX)
    full = _full(value)
    if fast is not None:
        assert full is not None
        stream, ident, ts, x, y = fast
        assert (stream, ident, ts, x, y) == (full.stream, full.id, full.ts, full.x, full.y)
        assert all(type(v) is float for v in x) and type(ident) is type(full.id)


def test_fast_decode_accepts_the_plain_case_and_declines_the_rest():
    ok = {"v": 1, "stream": "s1", "id": 7, "ts": 3, "x": [0.5, 1.5], "y": "UP"}
    assert decode_fast(msgpack.packb(ok), MAX) == ("s1", 7, 3, [0.5, 1.5], "UP")
    assert decode_fast(msgpack.packb({**ok, "y": None}), MAX)[4] is None
    for bad in ({**ok, "x": [0.5, math.nan]}, {**ok, "x": [1, 2.0]}, {**ok, "v": True},
                {**ok, "weight": 1.0}, {**ok, "x": {"a": 1.0}}, {**ok, "y": True},
                {**ok, "y": [1.0]}, {**ok, "ts": -1}):
        assert decode_fast(msgpack.packb(bad), MAX) is None
    assert decode_fast(msgpack.packb(ok), 10) is None  # over the size limit
    assert decode_fast(b"\xc1", MAX) is None
    assert decode_fast(b'{"v":1}', MAX) is None  # JSON goes the full way


@pytest.mark.parametrize("labels", [[0, 1], ["DOWN", "UP"], [3, "x", 10**12]])
@pytest.mark.parametrize("k", [0, 2, 3])
def test_encoded_predictions_decode_like_plain_maps(labels, k):
    rng = np.random.default_rng(k)
    n = 37
    classes = labels[:k] if k else []
    k = len(classes)
    const = {"v": 1, "stream": "st", "model": "forgetful_tree", "classes": classes,
             "topic": "sf.instances", "partition": 3}
    ids = [int(i) * 1000 - 5 for i in range(n)]
    y_pred = [classes[i % len(classes)] if classes else None for i in range(n)]
    y_true = [labels[i % len(labels)] if i % 4 else None for i in range(n)]
    proba = rng.random((n, k)) if k else None
    offsets = list(range(100, 100 + n))
    ts = [2**40 + i for i in range(n)]
    values = encode_predictions(const, ids, y_pred, y_true, proba, offsets, ts)
    assert len(values) == n
    for r, v in enumerate(values):
        want = {**const, "id": ids[r], "y_pred": y_pred[r], "y_true": y_true[r],
                "proba": proba[r].tolist() if k else [], "offset": offsets[r], "ts": ts[r]}
        assert msgpack.unpackb(v) == want
        msg = decode(v, Prediction)
        assert msg.id == ids[r] and msg.proba == want["proba"] and msg.y_pred == y_pred[r]


def test_string_ids_take_the_plain_path():
    const = {"v": 1, "stream": "st", "model": "m", "classes": [0, 1], "topic": "t",
             "partition": 0}
    values = encode_predictions(const, ["a", "b"], [0, 1], [1, None],
                                np.array([[0.2, 0.8], [0.6, 0.4]]), [1, 2], [5, 6])
    assert [msgpack.unpackb(v)["id"] for v in values] == ["a", "b"]
    assert decode(values[1], Prediction).y_true is None
