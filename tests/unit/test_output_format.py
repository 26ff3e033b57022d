"""Output formats and ``streamforest tail`` without a broker.

* ``output.*`` settings: msgpack predictions and JSON drift alerts and rankings by default,
  ``format`` for all three, a topic's own setting over it, bad values refused at start naming
  the variable (exit code 2);
* every output kind encoded as JSON decodes to the same contract as its msgpack encoding
  (floats bit for bit), JSON records carry ``content-type: application/json`` and msgpack
  ones stay without a header;
* ``tail``'s rendering of each topic's records and its stop rules (end offsets read at
  start, transaction markers, ``--max``), on in-memory records and a stand-in consumer.
"""

from __future__ import annotations

import doctest
import json
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import msgpack
import numpy as np
import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import CheckpointManifest, DriftAlert, Instance, Prediction, Ranking, StreamCheckpoint
from schemas.codec import decode, encode
from schemas.deadletter import deadletter_record
from schemas.errors import DecodeError
from tests.unit.drift_run import drift_run
from worker import wire
from worker.checkpoint_store import chunk_key, encode_blob, manifest_key
from worker.kafka_io import TransactionalProducer
from worker.metrics import WorkerMetrics
from worker.output import Outbox, OutputEncoder
from worker.pipeline.results import FeatureResult, HeldPredictions, RankingOut
from worker.settings import OUTPUT_KINDS, ConfigError, load_settings
from worker.task import PartitionTask
from worker.tools import tail as tail_module
from worker.tools.tail import UnknownTopic, checkpoint_summary, render, resolve_topic
from worker.wire import encode_predictions, encode_predictions_json

JSON_HEADER = [("content-type", b"application/json")]


# =========================================================================== settings


def _formats(env: dict) -> list[str]:
    return [load_settings(env).output.format_of(kind) for kind in OUTPUT_KINDS]


def test_drift_alerts_and_rankings_are_json_and_predictions_msgpack_unless_configured():
    assert _formats({}) == ["msgpack", "json", "json"]
    # format sets all three, whatever each one's default
    assert _formats({"STREAMFOREST_OUTPUT__FORMAT": "msgpack"}) == ["msgpack"] * 3
    assert _formats({"STREAMFOREST_OUTPUT__FORMAT": "json"}) == ["json"] * 3
    # a topic's own setting wins over format, which wins over the topic's default
    assert _formats({"STREAMFOREST_OUTPUT__PREDICTIONS": "JSON"}) == ["json"] * 3
    assert _formats({"STREAMFOREST_OUTPUT__DRIFT": "msgpack"}) == ["msgpack", "msgpack", "json"]
    assert _formats({"STREAMFOREST_OUTPUT__FORMAT": "msgpack", "STREAMFOREST_OUTPUT__RANKINGS": "json"}) == [
        "msgpack", "msgpack", "json"]
    assert _formats({"STREAMFOREST_OUTPUT__FORMAT": "json", "STREAMFOREST_OUTPUT__RANKINGS": "msgpack",
                     "STREAMFOREST_OUTPUT__DRIFT": ""}) == ["json", "json", "msgpack"]
    assert _formats({"STREAMFOREST_OUTPUT__FORMAT": ""}) == ["msgpack", "json", "json"]
    assert _formats({"STREAMFOREST_OUTPUT": '{"drift": "msgpack"}'}) == ["msgpack", "msgpack", "json"]
    # `streamforest config` prints each topic's effective format
    assert load_settings({}).masked_dict()["output"] == {
        "format": None, "predictions": "msgpack", "drift": "json", "rankings": "json",
        "prediction_batches": False}
    everything = load_settings({"STREAMFOREST_OUTPUT__FORMAT": "msgpack"}).masked_dict()["output"]
    assert [everything[k] for k in OUTPUT_KINDS] == ["msgpack"] * 3


def test_a_topics_own_format_in_the_file_wins_over_format_in_the_environment(tmp_path):
    # the environment overrides the file key by key; then the topic's own key wins over format
    path = tmp_path / "streamforest.toml"
    path.write_text('[output]\nformat = "json"\ndrift = "msgpack"\n')
    assert [load_settings({}, config_file=path).output.format_of(k) for k in OUTPUT_KINDS] == [
        "json", "msgpack", "json"]
    env = {"STREAMFOREST_OUTPUT__FORMAT": "msgpack"}
    assert [load_settings(env, config_file=path).output.format_of(k) for k in OUTPUT_KINDS] == [
        "msgpack", "msgpack", "msgpack"]
    path.write_text('[output]\nformat = "msgpack"\n')
    env = {"STREAMFOREST_OUTPUT__RANKINGS": "json"}
    assert [load_settings(env, config_file=path).output.format_of(k) for k in OUTPUT_KINDS] == [
        "msgpack", "msgpack", "json"]


@pytest.mark.parametrize("env, where, text", [
    ({"STREAMFOREST_OUTPUT__FORMAT": "xml"}, "STREAMFOREST_OUTPUT__FORMAT",
     "input should be 'msgpack' or 'json' (got 'xml')"),
    ({"STREAMFOREST_OUTPUT__RANKINGS": "avro"}, "STREAMFOREST_OUTPUT__RANKINGS",
     "input should be 'msgpack' or 'json' (got 'avro')"),
    ({"STREAMFOREST_OUTPUT__PREDICTION": "json"}, "STREAMFOREST_OUTPUT__PREDICTION",
     "unknown setting; did you mean STREAMFOREST_OUTPUT__PREDICTIONS?"),
    ({"STREAMFOREST_OUTPUT": '{"format": "yaml"}'}, "STREAMFOREST_OUTPUT (field format)",
     "input should be 'msgpack' or 'json' (got 'yaml')"),
])
def test_a_bad_output_format_names_the_variable(env, where, text):
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert info.value.problems == [(where, text)]


@pytest.mark.parametrize("command", [["worker", "run"], ["worker", "config"],
                                     ["worker.tools.tail", "predictions"]])
def test_a_bad_output_format_stops_commands_with_exit_code_2(command):
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAMFOREST_")}
    env["STREAMFOREST_OUTPUT__FORMAT"] = "xml"
    proc = subprocess.run([sys.executable, "-m", *command], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("invalid streamforest settings (1 problem):\n"
                                   "  STREAMFOREST_OUTPUT__FORMAT: input should be 'msgpack' or "
                                   "'json' (got 'xml')")


# =========================================================================== predictions

CONST = {"v": 1, "stream": "s1", "model": "adaptive_random_forest", "topic": "sf.instances",
         "partition": 3}


def _prediction(value, headers=None):
    """The contract of a value, or how the contract refused it."""
    try:
        return decode(value, Prediction, headers)
    except DecodeError as exc:
        return ("refused", exc.code, exc.where, exc.reason)


def _same_predictions(const, ids, y_pred, y_true, proba, offsets, ts):
    """Both encodings of the rows: equal maps, equal contracts, floats bit for bit."""
    packed = encode_predictions(const, ids, y_pred, y_true, proba, offsets, ts)
    text = encode_predictions_json(const, ids, y_pred, y_true, proba, offsets, ts)
    assert len(packed) == len(text) == len(ids)
    for p, j in zip(packed, text):
        a, b = msgpack.unpackb(p), json.loads(j)
        assert b == a
        assert np.array(b["proba"], dtype=float).tobytes() == np.array(a["proba"], dtype=float).tobytes()
        assert _prediction(j, JSON_HEADER) == _prediction(p)
    return text


def test_json_predictions_decode_to_the_msgpack_contracts():
    rng = np.random.default_rng(0)
    n = 40
    ids, offsets, ts = np.arange(100, 100 + n), np.arange(n) * 2, 1_700_000_000_000 + np.arange(n)
    proba = rng.random((n, 2))
    proba[0] = [1e-320, 1.0]  # a subnormal and exact values survive the text
    labels = [int(v) for v in rng.integers(0, 2, n)]
    truth = [None if i % 5 == 0 else v for i, v in enumerate(labels)]
    _same_predictions({**CONST, "classes": [0, 1]}, ids, labels, truth, proba, offsets, ts)
    # string labels, string ids, non-ASCII text
    names = ["UP", "DOWN", "ünïcødé"]
    proba3 = rng.random((n, 3))
    ys = [names[i % 3] for i in range(n)]
    _same_predictions({**CONST, "stream": "straße", "classes": names}, [f"id-{i}" for i in range(n)],
                      ys, ys[::-1], proba3, offsets.tolist(), ts.tolist())
    # no class seen yet: classes [] and proba []
    _same_predictions({**CONST, "classes": []}, ids[:3], [None] * 3, [1, None, 0], None,
                      offsets[:3], ts[:3])
    # more than 15 classes (msgpack's plain path) and a stream of features' n_features
    many = list(range(20))
    _same_predictions({**CONST, "classes": many, "n_features": 4}, ids[:5], [3] * 5, [3] * 5,
                      rng.random((5, 20)), offsets[:5], ts[:5])
    # regression targets
    targets = [[float(v) for v in row] for row in rng.normal(size=(n, 3))]
    _same_predictions({**CONST, "classes": None}, ids, targets, [None] * (n - 1) + [targets[0]],
                      None, offsets, ts)
    assert encode_predictions_json(CONST, [], [], [], None, [], []) == []


def test_a_percent_sign_in_a_name_is_text_not_a_format():
    const = {**CONST, "stream": "100%s", "model": "m%d", "classes": ["%(x)s", "50%"]}
    [value] = _same_predictions(const, [1], ["50%"], ["%(x)s"], np.array([[0.5, 0.5]]), [0], [0])
    assert json.loads(value)["stream"] == "100%s"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_json_and_msgpack_predictions_agree_on_any_values(data):
    n = data.draw(st.integers(1, 6))
    k = data.draw(st.integers(0, 4))
    label = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=6))
    classes = data.draw(st.lists(label, min_size=k, max_size=k, unique=True))
    floats = st.floats(allow_nan=False, allow_infinity=False)
    proba = np.array(data.draw(st.lists(st.lists(floats, min_size=k, max_size=k),
                                        min_size=n, max_size=n)), dtype=float).reshape(n, k)
    ids = data.draw(st.one_of(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n),
                              st.lists(st.text(max_size=4), min_size=n, max_size=n)))
    y_pred = data.draw(st.lists(label, min_size=n, max_size=n))
    y_true = data.draw(st.lists(st.one_of(st.none(), label), min_size=n, max_size=n))
    counts = st.lists(st.integers(0, 2**63 - 1), min_size=n, max_size=n)
    _same_predictions({**CONST, "classes": classes}, ids, y_pred, y_true, proba if k else None,
                      data.draw(counts), data.draw(counts))


def test_non_finite_values_are_refused_by_the_contract_in_both_formats():
    # msgpack carries NaN as a float; JSON writes NaN: neither fails the batch, both are
    # refused alike by a reader that validates the contract
    const = {**CONST, "classes": None}
    for encoder in (encode_predictions, encode_predictions_json):
        [value] = encoder(const, [1], [[math.nan]], [None], None, [0], [0])
        with pytest.raises(DecodeError, match="non_finite"):
            decode(value, Prediction)


# =========================================================================== the encoder


def _pipeline_result():
    """A stream's outputs with predictions, a drift alert and rankings."""
    pl, res, sr = drift_run(unlabelled_every=7, first_id=10)
    assert res.alerts and res.rankings
    return pl, res, sr


def _encoded(encoder: OutputEncoder, encode_call) -> dict[str, list]:
    """Contracts per topic of what ``encode_call(encoder, outbox)`` produced."""
    models = {"sf.predictions": Prediction, "sf.drift": DriftAlert, "sf.rankings": Ranking}
    outbox = Outbox("test")
    encode_call(encoder, outbox)
    assert not outbox.dead
    out: dict[str, list] = {}
    for topic, key, values in outbox.records:  # the groups keep their shape: (topic, key, values)
        assert type(key) is bytes
        headers = encoder.headers.get(topic)
        for v in values:
            assert (v[:1] == b"{") == (headers == JSON_HEADER)
            out.setdefault(topic, []).append(decode(v, models[topic], headers))
    return out


def _encoder(env: dict) -> OutputEncoder:
    s = load_settings(env)
    return OutputEncoder(s.topics, WorkerMetrics(), output=s.output)


def test_every_output_kind_in_json_equals_its_msgpack():
    pl, res, sr = _pipeline_result()
    task = PartitionTask("g", "sf.instances", 1, "sf.features")

    def call(enc, outbox):
        enc.encode(task, "s", pl, res, sr, 0, outbox)

    packed = _encoder({"STREAMFOREST_OUTPUT__FORMAT": "msgpack"})
    assert packed.headers == {}
    default = _encoder({})
    assert default.headers == {"sf.drift": JSON_HEADER, "sf.rankings": JSON_HEADER}
    everything = _encoder({"STREAMFOREST_OUTPUT__FORMAT": "json"})
    assert everything.headers == {t: JSON_HEADER for t in ("sf.predictions", "sf.drift", "sf.rankings")}
    mixed = _encoder({"STREAMFOREST_OUTPUT__PREDICTIONS": "json", "STREAMFOREST_OUTPUT__RANKINGS": "msgpack"})
    assert mixed.headers == {"sf.predictions": JSON_HEADER, "sf.drift": JSON_HEADER}
    want = _encoded(packed, call)
    assert {k: len(v) for k, v in want.items()} == {
        "sf.predictions": 600, "sf.drift": len(res.alerts), "sf.rankings": len(res.rankings)}
    assert _encoded(default, call) == want
    assert _encoded(everything, call) == want
    assert _encoded(mixed, call) == want


def test_streams_of_features_outputs_in_json_equal_their_msgpack():
    held = HeldPredictions(ids=[7, 8], y_true=[None, 1], offsets=np.array([4, 9]),
                           ts=np.array([100, 101]), classes=[1, 0], y_pred=[0, 1],
                           proba=np.array([[0.25, 0.75], [0.6, 0.4]]), n_features=2)
    res = FeatureResult(predictions=held, ranking=RankingOut(
        method="feature_stream", features=["a", "b"], scores=[0.7, 0.3], n_seen=2, row=-1))
    task = PartitionTask("g", "sf.instances", 0, "sf.features")
    pl = SimpleNamespace(model_name="feature_stream")

    def call(enc, outbox):
        enc.encode_features(task, "cust", pl, res, 555, 12, outbox)

    want = _encoded(_encoder({}), call)
    assert [p.n_features for p in want["sf.predictions"]] == [2, 2] and want["sf.rankings"][0].ts == 555
    assert _encoded(_encoder({"STREAMFOREST_OUTPUT__FORMAT": "json"}), call) == want


class _RecordingProducer:
    def __init__(self):
        self.calls = []

    def produce(self, topic, value, key, partition=-1, **kwargs):
        self.calls.append((topic, value, key, kwargs.get("headers")))


def test_produce_many_adds_headers_to_json_topics_only():
    producer = TransactionalProducer.__new__(TransactionalProducer)
    producer._p = _RecordingProducer()
    groups = [("preds", b"s", [b"{1}", b"{2}"]), ("ranks", b"s", [b"\x81"])]
    producer.produce_many(groups, {"preds": JSON_HEADER})
    assert producer._p.calls == [("preds", b"{1}", b"s", JSON_HEADER),
                                 ("preds", b"{2}", b"s", JSON_HEADER), ("ranks", b"\x81", b"s", None)]
    producer._p.calls.clear()
    producer.produce_many(groups)  # msgpack everywhere: the plain loop, no headers at all
    assert [c[3] for c in producer._p.calls] == [None, None, None]


# =========================================================================== tail: one record


def _msg(value, key=b"s1", headers=None, topic="sf.x", partition=0, offset=0):
    return Message(topic=topic, partition=partition, offset=offset, key=key, value=value,
                   headers=headers, timestamp=(1, 1_700_000_000_123))


def test_records_of_each_contract_topic_render_the_same_from_either_format():
    inst = Instance(stream="s1", id=1, ts=5, x={"temp": 0.1}, y="UP")
    for fmt in ("msgpack", "json"):
        value, headers = encode(inst, fmt)
        for hdr in (headers, None):  # by header, or sniffed
            rec = render("instances", _msg(value, headers=hdr, offset=9))
            assert list(rec) == ["topic", "partition", "offset", "timestamp", "key", "format",
                                 "value"]
            assert rec["format"] == fmt and rec["offset"] == 9 and rec["timestamp"] == 1_700_000_000_123
            assert rec["value"] == dict(inst)
    pred = msgpack.packb({**CONST, "classes": ["a"], "stream": "s1", "id": 1, "y_pred": "a",
                          "proba": [1.0], "y_true": None, "offset": 3, "ts": 4})
    assert render("predictions", _msg(pred))["value"]["proba"] == [1.0]


def test_a_record_that_breaks_its_contract_shows_the_error():
    bad = msgpack.packb({"v": 1, "stream": "s1", "id": 1, "ts": 0, "x": [1.0, math.nan],
                         "blob": b"\x00\x01"})
    rec = render("instances", _msg(bad))
    assert rec["value"]["x"] == [1.0, {"__float__": "nan"}] and rec["value"]["blob"] == {"__bytes__": "AAE="}
    assert rec["error"]["code"] in ("non_finite", "invalid_field")
    json.loads(tail_module.dumps(rec))  # strict JSON: no NaN in the line
    junk = render("drift", _msg(b"\xc1\xc1", key=b"\xff\xfe"))
    assert (junk["key"], junk["key_base64"], junk["format"], junk["value"]) == (None, "//4=", None, None)
    assert junk["value_base64"] == "wcE=" and junk["error"]["code"] == "not_decodable"
    tomb = render("rankings", _msg(None))
    assert tomb["value"] is None and "value_base64" not in tomb and tomb["error"]["code"] == "not_decodable"


def test_a_dead_letter_shows_the_refused_record_and_why():
    err = DecodeError("missing_field", "required field is missing", "x")
    original = b'{"v":1,"stream":"s1","id":1,"ts":0}'
    key, value, headers = deadletter_record(b"s1", original, JSON_HEADER, err, "sf.instances", 2,
                                            41, "0.1.0")
    rec = render("deadletter", _msg(value, key, headers))
    assert rec["format"] == "json" and rec["value"] == {"v": 1, "stream": "s1", "id": 1, "ts": 0}
    assert rec["deadletter"] == {"error_class": "DecodeError", "code": "missing_field",
                                 "reason": "missing_field at x: required field is missing",
                                 "topic": "sf.instances", "partition": 2, "offset": 41,
                                 "version": "0.1.0"}
    _k, value, headers = deadletter_record(b"s1", b"\xc1junk", None, err, "sf.instances", 0, 1, "v")
    rec = render("deadletter", _msg(value, headers=headers))
    assert rec["value"] is None and rec["value_base64"] == "wWp1bms=" and "error" not in rec


def test_checkpoints_are_summarised_without_their_state():
    cp = StreamCheckpoint(group="g", topics=["sf.instances"], partition=1, stream="s1",
                          config={"predictor": ["forgetful_tree"]}, offsets={"sf.instances": 10},
                          state={"arrays": np.arange(50.0), "by_class": {7: 3}}, ts=99)
    blob = encode_blob(cp)
    whole = render("checkpoints", _msg(blob, chunk_key("g", "sf.instances", "s1", 0)))
    assert whole["value"] is None and whole["format"] is None
    assert whole["checkpoint"] == {"kind": "chunk", "group": "g", "input_topic": "sf.instances",
                                   "stream": "s1", "index": 0, "bytes": len(blob),
                                   "offsets": {"sf.instances": 10}, "ts": 99,
                                   "config": {"predictor": ["forgetful_tree"]}}
    part = checkpoint_summary(chunk_key("g", "sf.instances", "s1", 2), blob[100:200])
    assert part == {"kind": "chunk", "group": "g", "input_topic": "sf.instances", "stream": "s1",
                    "index": 2, "bytes": 100}
    manifest = CheckpointManifest(group="g", topics=["sf.instances"], partition=1,
                                  offsets={"sf.instances": 10}, ts=5,
                                  streams={"s1": [40, 2, 900], "t7": [42, 1, 10]})
    value = encode(manifest)[0]
    m = render("checkpoints", _msg(value, manifest_key("g", "sf.instances", 1)))["checkpoint"]
    assert m == {"kind": "manifest", "group": "g", "input_topic": "sf.instances", "partition": 1,
                 "bytes": len(value), "offsets": {"sf.instances": 10}, "ts": 5,
                 "streams": {"s1": {"offset": 40, "chunks": 2, "bytes": 900},
                             "t7": {"offset": 42, "chunks": 1, "bytes": 10}}}
    # --stream: chunks of matching streams, manifests cut to them
    assert render("checkpoints", _msg(blob, chunk_key("g", "t", "s1", 0)), "t*") is None
    cut = render("checkpoints", _msg(value, manifest_key("g", "sf.instances", 1)), "t*")
    assert list(cut["checkpoint"]["streams"]) == ["t7"]
    assert render("checkpoints", _msg(value, manifest_key("g", "sf.instances", 1)), "x*") is None


def test_stream_filter_is_a_glob_on_the_key():
    value = encode(Instance(stream="plant-7", id=1, ts=0, x=[1.0]))[0]
    assert render("instances", _msg(value, b"plant-7"), "plant-*") is not None
    assert render("instances", _msg(value, b"plant-7"), "plant-[0-6]") is None
    assert render("instances", _msg(value, None), "*") is None  # no key: no stream to match


def test_topics_by_logical_or_configured_name():
    topics = load_settings({"STREAMFOREST_TOPICS__DEADLETTER": "dlq"}).topics
    assert resolve_topic(topics, "deadletter") == ("deadletter", "dlq")
    assert resolve_topic(topics, "dlq") == ("deadletter", "dlq")
    assert resolve_topic(topics, "sf.checkpoints") == ("checkpoints", "sf.checkpoints")
    # what evaluate --publish backfill writes
    assert resolve_topic(topics, "backfill.rankings") == ("rankings", "backfill.rankings")
    for name in ("sf.deadletter", "dead", "other.topic", "backfill.deadletter"):
        with pytest.raises(UnknownTopic, match="unknown topic"):
            resolve_topic(topics, name)


# =========================================================================== tail: the reading


class _Consumer:
    """A stand-in consumer: fixed watermarks, then the given batches (records and EOFs)."""

    def __init__(self, topic, marks: dict[int, tuple[int, int]], batches: list[list]):
        self.topic, self.marks, self.batches = topic, marks, list(batches)
        self.assigned = None

    def list_topics(self, timeout):
        md = SimpleNamespace(error=None, partitions=dict.fromkeys(self.marks))
        return SimpleNamespace(topics={self.topic: md})

    def get_watermark_offsets(self, tp, timeout):
        return self.marks[tp.partition]

    def assign(self, tps):
        self.assigned = [(tp.partition, tp.offset) for tp in tps]

    def consume(self, n, timeout):
        assert self.batches, "read past the end offsets it was told to stop at"
        return self.batches.pop(0)


def _drift(p, offset, stream="s1"):
    value = msgpack.packb({"v": 1, "stream": stream, "source": "adwin", "level": "drift",
                           "position": offset, "ts": 0})
    return _msg(value, stream.encode(), topic="sf.drift", partition=p, offset=offset)


def _eof(p, offset):
    return Message(topic="sf.drift", partition=p, offset=offset,
                   error=KafkaError(KafkaError._PARTITION_EOF))


def _run_tail(consumer, **kw):
    out = []
    n = tail_module.tail(consumer, "drift", "sf.drift", out.append, **kw)
    assert n == len(out)
    return [(r["partition"], r["offset"]) for r in map(json.loads, out)]


def test_tail_stops_at_the_end_offsets_read_at_start():
    # partition 0 ends with a transaction marker at offset 2 (never delivered: its end event
    # says it was reached); partition 1 gets a record after the start, which is not shown;
    # partition 2 is empty
    batches = [[_drift(0, 0), _drift(1, 0), _drift(0, 1)], [_drift(1, 1), _drift(1, 2)],
               [_eof(0, 3)]]
    consumer = _Consumer("sf.drift", {0: (0, 3), 1: (0, 2), 2: (5, 5)}, batches)
    assert _run_tail(consumer) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert consumer.assigned == [(0, OFFSET_BEGINNING), (1, OFFSET_BEGINNING), (2, OFFSET_BEGINNING)]
    assert consumer.batches == []


def test_tail_max_stream_and_from_end():
    batches = [[_drift(0, 0, "a"), _drift(0, 1, "b"), _drift(0, 2, "b"), _drift(0, 3, "b")]]
    assert _run_tail(_Consumer("sf.drift", {0: (0, 4)}, batches), pattern="b", limit=2) == [(0, 1), (0, 2)]
    # from the end without --follow: nothing to show, nothing read
    consumer = _Consumer("sf.drift", {0: (0, 4)}, [])
    assert _run_tail(consumer, from_end=True) == [] and consumer.assigned is None
    # from the end, following: only what comes after
    consumer = _Consumer("sf.drift", {0: (0, 4)}, [[_drift(0, 4)], [_drift(0, 5)]])
    assert _run_tail(consumer, from_end=True, follow=True, limit=2) == [(0, 4), (0, 5)]
    assert consumer.assigned == [(0, 4)]


def test_tail_of_a_missing_topic_is_an_unknown_topic():
    with pytest.raises(UnknownTopic, match="does not exist"):
        tail_module.tail(_Consumer("other", {0: (0, 0)}, []), "drift", "sf.drift", print)


def test_docstring_examples():
    for module in (tail_module, wire):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0


def test_output_records_take_the_field_order_of_their_contracts():
    from schemas.batches import PredictionBatch
    from worker.output import record

    for contract in (Prediction, PredictionBatch, DriftAlert, Ranking):
        fields = {k: None for k in reversed(contract.model_fields) if k != "v"}
        assert list(record(contract, **fields)) == list(contract.model_fields)
    with pytest.raises(TypeError, match="no field"):
        record(Ranking, stream="s", colour="red")
