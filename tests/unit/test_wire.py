"""The hot-path codec of the worker agrees with the contracts' full codec."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import Prediction
from schemas.codec import decode
from schemas.errors import DecodeError
from schemas.instances import decode_instance, read_plain_instance
from schemas.labels import decode_label_event
from worker.wire import decode_bulk, encode_predictions, merge_blocks

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
    fast = read_plain_instance(value, MAX)
    full = _full(value)
    if fast is not None:
        assert full is not None
        stream, ident, ts, x, y = fast
        assert (stream, ident, ts, x, y) == (full.stream, full.id, full.ts, full.x, full.y)
        assert all(type(v) is float for v in x) and type(ident) is type(full.id)


def test_fast_decode_accepts_the_plain_case_and_declines_the_rest():
    ok = {"v": 1, "stream": "s1", "id": 7, "ts": 3, "x": [0.5, 1.5], "y": "UP"}
    assert read_plain_instance(msgpack.packb(ok), MAX) == ("s1", 7, 3, [0.5, 1.5], "UP")
    assert read_plain_instance(msgpack.packb({**ok, "y": None}), MAX)[4] is None
    for bad in ({**ok, "x": [0.5, math.nan]}, {**ok, "x": [1, 2.0]}, {**ok, "v": True},
                {**ok, "weight": 1.0}, {**ok, "x": {"a": 1.0}}, {**ok, "y": True},
                {**ok, "y": [1.0]}, {**ok, "ts": -1}):
        assert read_plain_instance(msgpack.packb(bad), MAX) is None
    assert read_plain_instance(msgpack.packb(ok), 10) is None  # over the size limit
    assert read_plain_instance(b"\xc1", MAX) is None
    assert read_plain_instance(b'{"v":1}', MAX) is None  # JSON goes the full way


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


# --- bulk decoding -------------------------------------------------------------------------------


def _key(value):
    """The message key a producer would send: the stream if there is one, else odd bytes."""
    try:
        d = msgpack.unpackb(value)
        s = d.get("stream") if isinstance(d, dict) else None
    except Exception:
        s = None
    return s.encode("utf-8", "surrogatepass") if isinstance(s, str) else b"\xff"


def _check_bulk(values, keys, max_bytes=MAX):
    """Rows accepted in bulk are accepted by full validation, with the same values."""
    d = decode_bulk(values, keys, max_bytes)
    for i, value in enumerate(values):
        if not d.ok[i]:
            continue
        full = decode_instance(value, max_bytes=max_bytes)  # raises if it refuses
        assert keys[i] == full.stream.encode()
        ident = d.ident_of(i)  # an integer or a string, as validation gives it
        assert ident == full.id and type(ident) is type(full.id) and d.ts[i] == full.ts
        assert d.has_y[i] == (full.y is not None)
        label = d.label_of(i)  # an integer or a string class label, as validation gives it
        assert label == full.y and type(label) is type(full.y) and type(label) in (int, str,
                                                                                  type(None))
        row = d.rows(np.array([i]), len(full.x))[0]
        assert d.nx[i] == len(full.x) and row.tolist() == full.x
        # and the per-message fast path, where it takes the message, agrees
        fast = read_plain_instance(value, max_bytes)
        if fast is not None:
            assert fast == (full.stream, full.id, full.ts, full.x, full.y)
    return d


int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)


#: ids and class labels that are strings, in each msgpack str form the bulk decoder reads
#: (fixstr, str 8, str 16) and in more than one byte per character
texts = st.one_of(st.text(max_size=4), st.text(min_size=30, max_size=40),
                   st.just("é" * 140), st.sampled_from(["UP", "DOWN", ""]))


@st.composite
def plain_messages(draw):
    """Valid instances in every integer width and key order (the bulk decoder's case)."""
    d = {"stream": draw(st.text(min_size=1, max_size=4)), "id": draw(st.one_of(int64s, texts)),
         "ts": draw(st.integers(min_value=0, max_value=2**63 - 1)),
         "x": draw(st.lists(st.floats(-1e100, 1e100), min_size=1, max_size=17))}
    if draw(st.booleans()):
        d["v"] = 1
    y = draw(st.one_of(st.none(), int64s, st.just("missing"), texts))
    if y != "missing":
        d["y"] = y
    keys = draw(st.permutations(sorted(d)))
    return msgpack.packb({k: d[k] for k in keys})


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(messages(), plain_messages()), min_size=1, max_size=6),
       st.integers(0, 3))
def test_bulk_decode_accepts_only_what_the_fast_path_accepts(values, flip):
    keys = [_key(v) for v in values]
    if flip < len(keys):
        keys[flip] = keys[flip] + b"!"  # a key that differs from the stream is declined
    d = _check_bulk(values, keys)
    if flip < len(keys):
        assert not d.ok[flip]


@settings(max_examples=200, deadline=None)
@given(st.lists(plain_messages(), min_size=1, max_size=8))
def test_bulk_decode_accepts_every_plain_instance(values):
    d = _check_bulk(values, [_key(v) for v in values])
    assert d.ok.all()


def test_bulk_decode_takes_the_plain_layouts():
    ok = {"v": 1, "stream": "s1", "id": 7, "ts": 3, "x": [0.5, -1e100], "y": 2}
    variants = [ok, {**ok, "y": None}, {k: v for k, v in ok.items() if k not in ("v", "y")},
                {**ok, "id": -(2**63), "ts": 2**63 - 1, "y": -1},
                {**ok, "id": 2**40, "ts": 200, "y": 70000}, {**ok, "id": -33, "y": -200},
                {**ok, "x": [0.25] * 20}, {**ok, "stream": "é" * 40}, {**ok, "y": "UP"},
                {**ok, "y": ""}, {**ok, "y": "é" * 140}, {**ok, "id": "a"},
                {**ok, "id": "txn-" + "9" * 40}]
    values = [msgpack.packb(v) for v in variants]
    d = _check_bulk(values, [v["stream"].encode() for v in variants])
    assert d.ok.all()
    assert d.rows(np.arange(2), 2).tolist() == [[0.5, -1e100]] * 2
    assert d.labels(np.arange(len(variants))) == [v.get("y") for v in variants]
    assert d.idents(np.arange(len(variants))) == [v["id"] for v in variants]
    ints = decode_bulk(values[:2], [b"s1"] * 2, MAX)  # integer ids only: one array
    assert ints.idents(np.arange(2)).dtype == np.int64


def test_bulk_decode_holds_string_ids_and_labels_to_their_limit_in_characters():
    """A string id or label longer than ``max_label_length`` characters is left to the
    per-message way (which refuses it as too long); one of as many characters in more bytes
    is taken."""
    ok = {"v": 1, "stream": "s1", "id": 7, "ts": 3, "x": [0.5], "y": "UP"}
    values = [msgpack.packb({**ok, "y": y}) for y in ("UP", "UPS", "éé", "", 5)]
    values += [msgpack.packb({**ok, "id": i}) for i in ("ab", "abc", "éé")]
    d = decode_bulk(values, [b"s1"] * len(values), MAX, max_label_length=2)
    assert d.ok.tolist() == [True, False, True, True, True, True, False, True]
    assert [d.label_of(i) for i in (0, 2, 3, 4)] == ["UP", "éé", "", 5]
    assert [d.ident_of(i) for i in (0, 5, 7)] == [7, "ab", "éé"]


def test_bulk_decode_declines_the_rest():
    ok = {"v": 1, "stream": "s1", "id": 7, "ts": 3, "x": [0.5, 1.5], "y": 2}
    bad = [{**ok, "y": b"UP"}, {**ok, "id": b"a"}, {**ok, "x": [0.5, math.inf]},
           {**ok, "x": [0.5, math.nan]}, {**ok, "x": [1, 2.0]}, {**ok, "v": True},
           {**ok, "v": 2}, {**ok, "weight": 1.0}, {**ok, "x": {"a": 1.0}}, {**ok, "y": True},
           {**ok, "ts": -1}, {**ok, "id": 2**63}, {**ok, "x": []},
           {k: v for k, v in ok.items() if k != "ts"}]
    values = [msgpack.packb(v) for v in bad]
    # a label or an id whose bytes are no UTF-8 (an encoded surrogate): msgpack refuses it
    values.append(msgpack.packb({**ok, "y": "AB"}).replace(b"\xa2AB", b"\xa2\xed\xa0"))
    values.append(msgpack.packb({**ok, "id": "AB"}).replace(b"\xa2AB", b"\xa2\xed\xa0"))
    values += [msgpack.packb(ok, use_single_float=True),  # float 32 goes the per-message way
               msgpack.packb(ok) + b"\x00",  # trailing bytes
               msgpack.packb(ok)[:-3], b"", None, b"\xc1", b'{"v":1}']
    # a repeated key (msgpack readers keep the last value): left to the per-message way
    plain = msgpack.packb({"stream": "s1", "id": 7, "ts": 3, "x": [0.5]})
    values.append(b"\x85" + plain[1:] + msgpack.packb("ts") + msgpack.packb(4))
    assert read_plain_instance(values[-1], MAX) == ("s1", 7, 4, [0.5], None)
    keys = [b"s1"] * len(values)
    d = _check_bulk(values, keys)
    assert not d.ok.any()
    assert not decode_bulk([msgpack.packb(ok)], [None], MAX).ok[0]
    assert not decode_bulk([msgpack.packb(ok)], [b"s1"], 10).ok[0]  # over the size limit
    assert decode_bulk([msgpack.packb(ok)], [b"s1"], MAX).ok[0]


@st.composite
def plain_label_messages(draw):
    """LabelEvents in every integer width and key order, with ids and labels that are
    integers or strings, some of them not plain (a label that is nil or missing, an ``x``):
    the bulk decoder's LabelEvent case."""
    d = {"stream": draw(st.text(min_size=1, max_size=4)), "id": draw(st.one_of(int64s, texts)),
         "ts": draw(st.integers(min_value=0, max_value=2**63 - 1))}
    if draw(st.booleans()):
        d["v"] = 1
    y = draw(st.one_of(int64s, int64s, st.none(), st.just("missing"), texts))
    if y != "missing":
        d["y"] = y
    if draw(st.integers(0, 5)) == 0:
        d["x"] = [0.5]
    keys = draw(st.permutations(sorted(d)))
    return msgpack.packb({k: d[k] for k in keys})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(plain_label_messages(), messages(), plain_messages()), min_size=1,
                max_size=6))
def test_bulk_decode_reads_a_label_event_as_full_validation_does(values):
    """Read as LabelEvents, messages are accepted only if full validation accepts them as
    one, with the same values and label (an integer or a string); a plain one always is."""
    keys = [_key(v) for v in values]
    d = decode_bulk(values, keys, MAX, np.ones(len(values), dtype=bool))
    for i, value in enumerate(values):
        try:
            full = decode_label_event(value, max_bytes=MAX)
        except DecodeError:
            assert not d.ok[i]
            continue
        plain = type(full.id) in (int, str) and type(full.y) in (int, str) and \
            full.stream.encode() == keys[i]
        plain = plain and set(msgpack.unpackb(value)) <= {"v", "stream", "id", "y", "ts"}
        if not d.ok[i]:
            assert not plain or not value[0] <= 0x8F  # only maps of over 15 keys decline
            continue
        assert (d.ident_of(i), d.ts[i], d.label_of(i), d.nx[i]) == (full.id, full.ts, full.y, 0)
        assert d.has_y[i] and type(d.label_of(i)) is type(full.y)
        assert type(d.ident_of(i)) is type(full.id)
        assert d.rows(np.array([i]), 3).tolist() == [[0.0, 0.0, 0.0]]


@pytest.mark.parametrize("labelled", ["all", "some"])
def test_array_columns_encode_like_lists(labelled):
    """Bulk-decoded ids, offsets and timestamps arrive as int64 arrays: same bytes."""
    n = 23
    const = {"v": 1, "stream": "st", "model": "m", "classes": [0, 1], "topic": "t",
             "partition": 1}
    ids = [i * 7 - 3 for i in range(n)]
    y_pred = [i % 2 for i in range(n)]
    y_true = [(i + 1) % 2 if labelled == "all" or i % 3 else None for i in range(n)]
    proba = np.random.default_rng(0).random((n, 2))
    offsets, ts = list(range(50, 50 + n)), [2**33 + i for i in range(n)]
    plain = encode_predictions(const, ids, y_pred, y_true, proba, offsets, ts)
    arrays = encode_predictions(const, np.array(ids), y_pred, y_true, proba,
                                np.array(offsets), np.array(ts))
    assert arrays == plain
    # the plain-packb path (string labels) takes arrays too
    s_pred = ["a" if v else "b" for v in y_pred]
    assert (encode_predictions({**const, "classes": ["b", "a"]}, np.array(ids), s_pred,
                               y_true, proba, np.array(offsets), np.array(ts))
            == encode_predictions({**const, "classes": ["b", "a"]}, ids, s_pred, y_true,
                                  proba, offsets, ts))


def test_merge_blocks_joins_adjacent_blocks_with_the_same_classes():
    from worker.pipeline import PredictionBlock

    p = np.arange(20, dtype=np.float64).reshape(10, 2)
    blocks = [PredictionBlock(0, 2, [], [None, None], np.zeros((2, 0))),
              PredictionBlock(2, 5, [0, 1], [0, 1, 1], p[2:5]),
              PredictionBlock(5, 7, [0, 1], [1, 0], p[5:7]),
              PredictionBlock(7, 10, [0, 1, 2], [2, 2, 0], np.ones((3, 3)))]
    got = list(merge_blocks(blocks))
    assert [(a, b, c) for a, b, c, _, _ in got] == [(0, 2, []), (2, 7, [0, 1]),
                                                    (7, 10, [0, 1, 2])]
    assert got[0][3:] == ([None, None], None)
    assert got[1][3] == [0, 1, 1, 1, 0] and np.array_equal(got[1][4], p[2:7])
    assert got[2][4] is blocks[3].proba
