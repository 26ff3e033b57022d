"""Decoding a partition's messages into per-stream rows, and encoding results (no broker:
confluent-kafka ``Message`` objects are built in memory)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from confluent_kafka import Message

from schemas import DriftAlert, Prediction, Ranking
from schemas.codec import decode
from schemas.deadletter import parse_deadletter_headers
from worker.intake import Caps, RecordDecoder
from worker.metrics import WorkerMetrics
from worker.output import Outbox, OutputEncoder
from worker.pipeline import PipelineConfig, Profiles
from worker.settings import load_settings
from worker.task import PartitionTask
from worker.tools.dev.produce import instance_values

CFG = PipelineConfig(predictor="forgetful_tree", rankers=[], batch_size=10)


def _messages(values_keys, first_offset=0, partition=0):
    return [Message(topic="in", partition=partition, offset=first_offset + i, key=k, value=v)
            for i, (v, k) in enumerate(values_keys)]


def _stream(stream, n, d=3, start=0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = [int(v) for v in X[:, 0] > 0.5]
    return X, y, [(v, stream.encode()) for v in
                  instance_values(stream, X, y, start_id=start, ts0=1000 + start)]


def _decoder(task, cfg=CFG, **caps):
    """A decoder for one partition."""
    return RecordDecoder(Profiles(cfg), Caps(**caps))


def _decode(dec, task, msgs, dead):
    offsets = np.array([m.offset() for m in msgs], dtype=np.int64)
    outbox = Outbox("test")
    rows = dec.read_instances(task, msgs, offsets, outbox, 1 << 20)
    dead.extend(outbox.dead)
    return rows


def _outcome(dec, task, msgs) -> tuple[dict, list]:
    """What decoding ``msgs`` (of streams of 3 features) gives: per stream its rows, labels,
    ids, times, offsets, LabelEvents' mask and first live row; the dead letters' codes and
    reasons."""
    dead: list = []
    rows = _decode(dec, task, msgs, dead)
    for sr in rows.values():
        sr.finish(3)
    return ({s: (sr.X.tolist(), sr.ys, list(sr.ids), list(sr.ts), list(sr.offsets),
                 None if sr.labels is None else sr.labels.tolist(), sr.live)
             for s, sr in rows.items()},
            [(d[3], parse_deadletter_headers(d[2])["reason"]) for d in dead])


def _recorded_bulk(monkeypatch) -> list:
    """Every result of the intake's bulk decoder from now on, in the list returned."""
    import worker.intake as intake

    decoded: list = []
    real = intake.decode_bulk
    monkeypatch.setattr(intake, "decode_bulk",
                        lambda *a: decoded.append(real(*a)) or decoded[-1])
    return decoded


def test_first_messages_create_streams_later_batches_decode_in_bulk():
    task = PartitionTask("g", "in", 0, "in.features")
    dec = _decoder(task)
    Xa, ya, a = _stream("a", 8, seed=1)
    Xb, yb, b = _stream("b", 8, seed=2)
    # interleaved: rows of each stream stay in partition order
    mixed = [m for pair in zip(a, b) for m in pair]
    dead: list = []
    rows = _decode(dec, task, _messages(mixed), dead)
    assert not dead and set(rows) == {"a", "b"} and set(task.pipelines) == {"a", "b"}
    for s, X, y in (("a", Xa, ya), ("b", Xb, yb)):
        sr = rows[s]
        sr.finish(3)
        np.testing.assert_array_equal(sr.X, X)
        assert sr.ys == y and list(sr.ids) == list(range(8)) and sr.live == 0
    assert rows["a"].offsets.tolist() == list(range(0, 16, 2))
    # the next batch: known streams of the right width, decoded in bulk with the same values
    Xa2, ya2, a2 = _stream("a", 6, start=8, seed=3)
    task.committed = 16 + 2  # the first two messages are replayed (state only)
    rows2 = _decode(dec, task, _messages(a2, first_offset=16), dead)
    sr = rows2["a"]
    assert sr.X is not None  # built from bulk columns, not row by row
    np.testing.assert_array_equal(sr.X, Xa2)
    assert sr.ys == ya2 and sr.live == 2 and sr.offsets.tolist() == list(range(16, 22))
    assert sr.ids.tolist() == list(range(8, 14)) and sr.ts.tolist() == list(range(1008, 1014))


def test_bad_messages_become_dead_letters_with_their_code_unless_replayed():
    task = PartitionTask("g", "in", 3, "in.features")
    dec = _decoder(task)
    _, _, good = _stream("a", 3)
    pack = msgpack.packb
    bad = [
        (pack([1, 2, 3]), b"a"),  # not a map
        (b"\xc1", b"a"),  # not msgpack at all
        (pack({"v": 1, "stream": "a", "id": 9, "ts": 1, "x": [1.0, 2.0]}), b"a"),  # width
        (pack({"v": 1, "stream": "b", "id": 9, "ts": 1, "x": [1.0, 2.0, 3.0]}), b"a"),
        (pack({"v": 1, "stream": "c", "id": 9, "ts": 1, "x": []}), b"c"),  # no features
        (pack({"v": 1, "stream": "a", "id": 9, "ts": 1, "x": [1.0, 2.0, 3.0],
               "y": [1.0, 2.0]}), b"a"),  # targets in a classification stream
        (pack({"v": 1, "stream": "a", "id": 9, "ts": 1, "x": [1.0, 2.0, 3.0]}), b"\xff"),
    ]
    dead: list = []
    msgs = _messages(good + bad)
    rows = _decode(dec, task, msgs, dead)
    assert len(rows["a"]) == 3  # every valid message kept its row
    codes = [d[3] for d in dead]
    assert codes == ["not_an_object", "not_decodable", "feature_count", "key_mismatch", "feature_count",
                     "invalid_target", "invalid_key"]
    for (key, value, headers, _code), m in zip(dead, msgs[3:]):
        h = parse_deadletter_headers(headers)
        assert (key, value) == (m.key(), m.value())  # the original record, unchanged
        assert (h["topic"], h["partition"], h["offset"]) == ("in", 3, m.offset())
        assert h["reason"]
    # replayed messages were dead-lettered when they were live: not again
    task2 = PartitionTask("g", "in", 3, "in.features")
    task2.committed = len(msgs)
    dead2: list = []
    rows2 = _decode(_decoder(task2), task2, msgs, dead2)
    assert not dead2 and rows2["a"].live == 3


def test_output_encoder_writes_the_contracts_in_row_order():
    from worker.pipeline import Pipeline

    settings = load_settings({})
    enc = OutputEncoder(settings.topics, WorkerMetrics())
    task = PartitionTask("g", "in", 1, "in.features")
    X, y, vals = _stream("s", 60, seed=4)
    dec = _decoder(task, cfg=PipelineConfig(
        predictor="forgetful_tree", batch_size=10, ranking_every=20,
        rankers=["online_random_forest"], params={"online_random_forest": {"n_trees": 2}}))
    dead: list = []
    sr = _decode(dec, task, _messages(vals), dead)["s"]
    sr.finish(3)
    pl: Pipeline = task.pipelines["s"]
    res = pl.process(sr.X, sr.ys, sr.offsets)
    outbox = Outbox("test")
    enc.encode(task, "s", pl, res, sr, 0, outbox)
    by_topic: dict = {}
    for topic, key, values in outbox.records:
        assert key == b"s"
        by_topic.setdefault(topic, []).extend(values)
    preds = [decode(v, Prediction) for v in by_topic[settings.topics.predictions]]
    assert [p.id for p in preds] == list(range(60))
    assert [p.offset for p in preds] == list(range(60)) and {p.partition for p in preds} == {1}
    assert [p.y_true for p in preds] == y
    ranks = [decode(v, Ranking) for v in by_topic[settings.topics.rankings]]
    assert len(ranks) >= 3 and all(sorted(r.features) == ["x0", "x1", "x2"] for r in ranks)
    for v in by_topic.get(settings.topics.drift, []):
        assert decode(v, DriftAlert).stream == "s"


def test_a_batch_with_consumer_errors_is_split_and_the_errors_reported():
    """A KafkaError cannot be compared with None: a batch mixing errors and records must still
    split (errors go to the callback, end-of-partition events are dropped)."""
    from confluent_kafka import KafkaError, Message

    from worker.poll import split_poll
    from worker.task import PartitionTask

    task = PartitionTask("g", "in", 0, "in.features")
    task.ready = True
    msgs = [Message(topic="in", partition=0, offset=0, key=b"s", value=b"v", timestamp=(1, 5)),
            Message(topic="in", partition=0, offset=1,
                    error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)),
            Message(topic="in", partition=0, offset=2, error=KafkaError(KafkaError._PARTITION_EOF)),
            Message(topic="in.features", partition=0, offset=7, key=b"s", value=b"f",
                    timestamp=(1, 6))]
    seen = []
    per_part, n_ok = split_poll(msgs, {0: task}, "in.features", seen.append)
    assert n_ok == 2 and [e.code() for e in seen] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    inst, feat = per_part[0]
    assert inst.offsets.tolist() == [0] and inst.ts.tolist() == [5]
    assert feat.offsets.tolist() == [7] and feat.ts.tolist() == [6]


def _label_poll(stream: str, seed: int, bad: bool):
    """Instances of two known streams, half of them unlabelled with a LabelEvent two
    instances later; ``bad``: a label of a new class past the cap, a label of a string, a
    LabelEvent with an ``x`` and an undecodable record among them."""
    from worker.tools.dev.produce import delayed_label_values

    X = np.random.default_rng(seed).random((12, 3))
    values, headers = delayed_label_values(stream, X, [int(v > 0.5) for v in X[:, 0]], 2,
                                           start_id=100, every=2)
    out = [(v, headers.get(k)) for k, v in enumerate(values)]
    if bad:
        label = [("sf-kind", b"label")]
        out[3:3] = [(msgpack.packb({"stream": stream, "id": 101, "y": 7, "ts": 1}), label),
                    (msgpack.packb({"stream": stream, "id": 103, "y": "UP", "ts": 1}), label),
                    (msgpack.packb({"stream": stream, "id": 105, "y": 1, "ts": 1,
                                    "x": [0.5]}), label), (b"\xc1", None)]
    return out


def test_label_events_read_in_bulk_give_the_rows_and_dead_letters_of_the_long_way(monkeypatch):
    """A LabelEvent sent as ``produce`` sends it (its kind's header alone, an integer label)
    is read in bulk with the poll's instances: the rows, labels and dead letters are those of
    reading every record on its own."""
    import worker.intake as intake

    def run():
        task = PartitionTask("g", "in", 0, "in.features")
        dec = _decoder(task, max_classes=2)
        first = [(v, None) for v, _k in _stream("a", 4)[2] + _stream("b", 4)[2]]
        _decode(dec, task, [Message(topic="in", partition=0, offset=k, key=v[0] and
                                    msgpack.unpackb(v[0])["stream"].encode(), value=v[0])
                            for k, v in enumerate(first)], [])
        outs = []
        for bad in (False, True):
            polls = _label_poll("a", 1, bad) + _label_poll("b", 2, False)
            msgs = [Message(topic="in", partition=0, offset=100 * (bad + 1) + k,
                            key=(b"a" if k < len(_label_poll("a", 1, bad)) else b"b"),
                            value=v, headers=h) for k, (v, h) in enumerate(polls)]
            outs.append(_outcome(dec, task, msgs))
        return outs

    decoded = _recorded_bulk(monkeypatch)
    bulk = run()
    assert sum(int((d.ok & d.label).sum()) for d in decoded) >= 12  # read in bulk
    monkeypatch.setattr(intake, "_label_mask", lambda headers: np.zeros(len(headers), bool))
    assert run() == bulk
    assert any(row[5] for row in bulk[0][0].values())  # the polls hold label events
    assert [code for code, _r in bulk[1][1]] == [
        "too_many_classes", "too_many_classes", "invalid_field", "not_decodable"]


def test_a_class_past_the_cap_is_refused_when_a_bad_record_sends_the_poll_the_long_way():
    """Rows decoded in bulk keep their labels checked when another record of the poll sends
    it message by message: a new class past ``max_classes`` is dead-lettered."""
    task = PartitionTask("g", "in", 0, "in.features")
    dec = _decoder(task, max_classes=2)
    X = np.random.default_rng(4).random((4, 2))
    first = _messages([(v, b"s") for v in instance_values("s", X, [0, 1, 0, 1])])
    rows = _decode(dec, task, first, [])
    rows["s"].finish(2)
    task.pipelines["s"].process(rows["s"].X, rows["s"].ys)
    dead: list = []
    poll = [(v, b"s") for v in instance_values("s", X[:2], [2, 0], start_id=10)] + [
        (b"\xc1", b"s")]
    rows = _decode(dec, task, _messages(poll, first_offset=4), dead)
    assert rows["s"].ys == [0] and [d[3] for d in dead] == ["too_many_classes", "not_decodable"]


@pytest.mark.parametrize("ids", ["integers", "strings"])
def test_string_labels_read_in_bulk_give_the_rows_and_dead_letters_of_the_long_way(
        monkeypatch, ids):
    """Class labels that are strings, and ids that are integers or strings (instances and
    LabelEvents), are read in bulk: the rows, labels, ids and dead letters are those of
    reading every record on its own, a label or an id too long, one that is no UTF-8 and a
    class past the cap included."""
    import worker.intake as intake
    from schemas.instances import InstanceLimits
    from worker.tools.dev.produce import delayed_label_values

    def poll(stream: str, seed: int):
        X = np.random.default_rng(seed).random((12, 3))
        values, headers = delayed_label_values(
            stream, X, ["UP" if v > 0.5 else "DOWN" for v in X[:, 0]], 2, start_id=100, every=2)
        if ids == "strings":
            values = [msgpack.packb({**d, "id": f"i{d['id']}"})
                      for d in map(msgpack.unpackb, values)]
        return [(v, headers.get(k)) for k, v in enumerate(values)]

    def run():
        task = PartitionTask("g", "in", 0, "in.features")
        dec = _decoder(task, max_classes=2, instance=InstanceLimits(max_label_length=4))
        outs = []
        for k, records in enumerate([poll("a", 1)[:2], poll("a", 2)]):
            if k:  # a label or an id too long or no UTF-8, a third class
                inst = {"stream": "a", "id": 900, "ts": 5, "x": [0.5, 0.5, 0.5]}
                not_text = msgpack.packb({**inst, "y": "AB"}).replace(b"\xa2AB", b"\xa2\xed\xa0")
                records[4:4] = [(msgpack.packb({**inst, "y": "SIDEWAYS"}), None),
                                (not_text, None), (msgpack.packb({**inst, "y": "FLAT"}), None),
                                (msgpack.packb({**inst, "id": "i90000", "y": "UP"}), None),
                                (msgpack.packb({**inst, "id": "AB", "y": "UP"}).replace(
                                    b"\xa2AB", b"\xa2\xed\xa0"), None)]
            msgs = [Message(topic="in", partition=0, offset=100 * k + i, key=b"a", value=v,
                            headers=h) for i, (v, h) in enumerate(records)]
            outs.append(_outcome(dec, task, msgs))
        return outs

    real = intake.decode_bulk
    decoded = _recorded_bulk(monkeypatch)
    bulk = run()
    assert sum(len(d.label_texts) for d in decoded) >= 12  # string labels read in bulk
    assert sum(len(d.id_texts) for d in decoded) >= (12 if ids == "strings" else 0)

    def none_in_bulk(*a):
        d = real(*a)
        d.ok[:] = False
        return d

    monkeypatch.setattr(intake, "decode_bulk", none_in_bulk)
    assert run() == bulk
    assert {y for y in bulk[1][0]["a"][1] if y is not None} == {"UP", "DOWN"}
    assert [code for code, _r in bulk[1][1]] == ["too_long", "not_decodable",
                                                 "too_many_classes", "too_long", "not_decodable"]
    assert {type(i) for i in bulk[1][0]["a"][2]} == {str if ids == "strings" else int}
