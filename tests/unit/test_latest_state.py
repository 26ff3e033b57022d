"""The latest-state topic without a broker (:mod:`worker.latest`).

* keys: JSON text a dashboard can parse, the same bytes for the same (stream, method) or
  (stream, source, level), whatever the stream's name holds;
* the encoder repeats the last ranking of each method and the last alert of each source and
  level of a poll, byte for byte as the rankings and drift topics got them, with the
  ``sf-kind`` header; the other topics' records are those of an encoder without it;
* the setting (empty turns it off), the topic's specification (compacted), the worker's
  preflight refusing a missing or uncompacted one, and ``tail latest``'s picture.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import msgpack
import pytest
from confluent_kafka import KafkaError, Message

from schemas.codec import decode
from schemas.messages import DriftAlert, Ranking
from tests.unit.drift_run import drift_run
from worker.latest import DRIFT_ALERT, RANKING, alert_key, parse_key, ranking_key
from worker.metrics import WorkerMetrics
from worker.output import Outbox, OutputEncoder
from worker.preflight import check_topics
from worker.settings import ConfigError, load_settings
from worker.task import PartitionTask
from worker.tools import tail as tail_module
from worker.tools.tail import UnknownTopic, render, resolve_topic
from worker.tools.topics import LATEST_CONFIG, topic_specs

JSON_HEADER = ("content-type", b"application/json")


# =========================================================================== keys


@pytest.mark.parametrize("stream", ["s1", "plant \"7\"", "d\u00e9bit/\u6d41", "a\x1fb", "{}"])
def test_keys_read_back_and_are_the_same_bytes_every_time(stream):
    rk, ak = ranking_key(stream, "block_mdi"), alert_key(stream, "adwin", "drift")
    assert parse_key(rk) == {"stream": stream, "kind": RANKING, "method": "block_mdi"}
    assert parse_key(ak) == {"stream": stream, "kind": DRIFT_ALERT, "source": "adwin",
                             "level": "drift"}
    assert rk == ranking_key(stream, "block_mdi") and ak == alert_key(stream, "adwin", "drift")
    # one key per (stream, method) and per (stream, source, level)
    assert len({rk, ranking_key(stream, "symrf"), ranking_key(stream + "x", "block_mdi"), ak,
                alert_key(stream, "adwin", "warning"), alert_key(stream, "ddm", "drift")}) == 6


def test_other_keys_are_not_latest_state_keys():
    for key in (None, b"s1", b"\xff", b"[1]", b'{"stream":1,"kind":"ranking"}',
                b'{"stream":"s1","kind":"prediction"}'):
        assert parse_key(key) is None


# =========================================================================== the encoder


@pytest.fixture(scope="module")
def stream_result():
    """One stream's results with several rankings of two methods and drift alerts."""
    pl, res, sr = drift_run()
    assert res.alerts and len({r.method for r in res.rankings}) == 2
    assert len(res.rankings) > 2 * 2  # several of each method: only the last ones are kept
    return pl, res, sr


def _encode(env: dict, stream_result, limits: dict | None = None) -> tuple[Outbox, object]:
    pl, res, sr = stream_result
    s = load_settings(env)
    enc = OutputEncoder(s.topics, WorkerMetrics(), limits, output=s.output)
    outbox = Outbox("test")
    enc.encode(PartitionTask("g", "sf.instances", 0, "sf.features"), "s", pl, res, sr, 0, outbox)
    return outbox, s


def _last_of_topic(outbox: Outbox, topic: str, contract, key_of) -> dict:
    """The last record of ``topic`` in the outbox per latest-state key: {key: value bytes}."""
    last = {}
    for group in outbox.records:
        if group[0] == topic:
            for value in group[2]:
                last[key_of(decode(value, contract))] = value
    return last


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_the_last_ranking_of_each_method_and_alert_of_each_source_and_level(stream_result, fmt):
    outbox, s = _encode({"STREAMFOREST_OUTPUT__FORMAT": fmt}, stream_result)
    want = _last_of_topic(outbox, s.topics.rankings, Ranking,
                          lambda r: ranking_key(r.stream, r.method))
    want.update(_last_of_topic(outbox, s.topics.drift, DriftAlert,
                               lambda a: alert_key(a.stream, a.source, a.level)))
    groups = outbox.latest_groups()
    # one record per key, the very bytes its own topic got last
    assert {g[1]: g[2] for g in groups} == {k: [v] for k, v in want.items()}
    for topic, key, _values, headers in groups:
        kind = parse_key(key)["kind"]
        assert topic == "sf.latest" and headers[-1] == ("sf-kind", kind.encode())
        assert headers[:-1] == ([JSON_HEADER] if fmt == "json" else [])


def test_the_other_topics_records_are_those_of_an_encoder_without_it(stream_result):
    on, _ = _encode({}, stream_result)
    off, _ = _encode({"STREAMFOREST_TOPICS__LATEST": ""}, stream_result)
    assert on.records == off.records and not on.dead and not off.dead
    assert len(on.latest_groups()) == 3 and off.latest is None and off.latest_groups() == []


def test_a_record_too_large_for_the_latest_state_dead_letters_its_input(stream_result):
    _pl, res, _sr = stream_result
    outbox, s = _encode({}, stream_result, limits={"sf.latest": OutputEncoder.RECORD_OVERHEAD + 50})
    # every ranking and alert is still published; their inputs say why no latest state
    assert sum(len(g[2]) for g in outbox.records if g[0] == s.topics.rankings) == len(res.rankings)
    assert outbox.latest is None
    assert outbox.refused_codes() == ["output_too_large"] * (len(res.rankings) + len(res.alerts))
    assert b"sf.latest" in dict(outbox.dead[0][2])["sf-reason"]


# =========================================================================== settings and topics


def test_the_setting_defaults_to_sf_latest_and_empty_turns_it_off():
    assert load_settings({}).topics.latest == "sf.latest"
    assert load_settings({"STREAMFOREST_TOPICS__LATEST": " "}).topics.latest is None
    with pytest.raises(ConfigError, match="already used for rankings"):
        load_settings({"STREAMFOREST_TOPICS__LATEST": "sf.rankings"})
    with pytest.raises(ConfigError, match="letters, digits"):
        load_settings({"STREAMFOREST_TOPICS__LATEST": "latest state"})


def test_topics_create_makes_it_compacted_unless_it_is_off():
    s = load_settings({}, topics={"partitions": 3})
    latest = {t.topic: t for t in topic_specs(s)}["sf.latest"]
    assert latest.num_partitions == 3 and latest.config == LATEST_CONFIG
    assert LATEST_CONFIG["cleanup.policy"] == "compact"
    off = load_settings({"STREAMFOREST_TOPICS__LATEST": ""})
    assert "sf.latest" not in {t.topic for t in topic_specs(off)}
    assert len(topic_specs(off)) == len(topic_specs(s)) - 1


def _present(settings, *names):
    md = SimpleNamespace(partitions={0: None})
    return {getattr(settings.topics, n): md for n in names}


_ALL = ("instances", "features", "predictions", "drift", "rankings", "deadletter", "checkpoints")


@pytest.mark.parametrize("policy, problem", [
    ("compact", None), ("compact,delete", None), ("delete", "cleanup.policy=delete"),
    (None, "does not exist"),
])
def test_the_worker_refuses_a_missing_or_uncompacted_latest_topic(policy, problem):
    s = load_settings({})
    configs = {t: {"cleanup.policy": "compact"} for t in ("sf.checkpoints",)}
    names = _ALL if policy is None else (*_ALL, "latest")
    if policy is not None:
        configs["sf.latest"] = {"cleanup.policy": policy}
    problems = check_topics(s, _present(s, *names), configs)
    if problem is None:
        assert problems == []
    else:
        [text] = problems
        assert problem in text and "sf.latest" in text and "STREAMFOREST_TOPICS__LATEST=" in text
    # turned off, it is not looked for
    off = load_settings({"STREAMFOREST_TOPICS__LATEST": ""})
    assert check_topics(off, _present(off, *_ALL), configs) == []


# =========================================================================== tail latest


def _record(value: dict, kind: str, key: bytes, fmt=msgpack.packb, partition=0, offset=0,
            headers=None):
    raw = None if value is None else fmt(value)
    hdr = [("sf-kind", kind.encode())] if headers is None else headers
    return Message(topic="sf.latest", partition=partition, offset=offset, key=key, value=raw,
                   headers=hdr, timestamp=(1, 5))


def _ranking(stream, method, n_seen):
    return {"v": 1, "stream": stream, "method": method, "features": ["a", "b"],
            "scores": [0.6, 0.4], "n_seen": n_seen, "ts": 7}


def _alert(stream, level, position):
    return {"v": 1, "stream": stream, "source": "adwin", "level": level, "position": position,
            "ts": 7}


def test_tail_reads_each_record_by_the_contract_its_kind_names():
    topics = load_settings({}).topics
    assert resolve_topic(topics, "latest") == resolve_topic(topics, "sf.latest") == ("latest", "sf.latest")
    rank = render("latest", _record(_ranking("s1", "gini", 3), RANKING, ranking_key("s1", "gini")))
    assert "error" not in rank and rank["value"]["n_seen"] == 3
    assert json.loads(rank["key"]) == {"stream": "s1", "kind": "ranking", "method": "gini"}
    alert = render("latest", _record(_alert("s1", "drift", 9), DRIFT_ALERT,
                                      alert_key("s1", "adwin", "drift"),
                                      fmt=lambda v: json.dumps(v).encode()))
    assert "error" not in alert and alert["format"] == "json"
    # a ranking named a drift alert breaks its contract; no kind at all is an unknown kind
    wrong = render("latest", _record(_ranking("s1", "gini", 3), DRIFT_ALERT, b"k"))
    assert wrong["error"]["code"] in ("missing_field", "invalid_field")
    unnamed = render("latest", _record(_ranking("s1", "gini", 3), RANKING, b"k", headers=[]))
    assert unnamed["error"]["code"] == "unknown_kind" and unnamed["value"]["method"] == "gini"
    # a deleted key (null value) is no error
    tomb = render("latest", _record(None, RANKING, ranking_key("s1", "gini")))
    assert tomb["value"] is None and "error" not in tomb
    # --stream matches the stream the key names
    assert render("latest", _record(_ranking("p-7", "gini", 3), RANKING,
                                    ranking_key("p-7", "gini")), "p-*") is not None
    assert render("latest", _record(_ranking("s1", "gini", 3), RANKING,
                                    ranking_key("s1", "gini")), "p-*") is None


def test_tail_latest_when_it_is_off_is_an_unknown_topic():
    with pytest.raises(UnknownTopic, match="turned off"):
        resolve_topic(load_settings({"STREAMFOREST_TOPICS__LATEST": ""}).topics, "latest")


class _Consumer:
    """A stand-in consumer: fixed watermarks, then the given batches."""

    def __init__(self, marks: dict[int, tuple[int, int]], batches: list[list]):
        self.marks, self.batches = marks, list(batches)

    def list_topics(self, timeout):
        md = SimpleNamespace(error=None, partitions=dict.fromkeys(self.marks))
        return SimpleNamespace(topics={"sf.latest": md})

    def get_watermark_offsets(self, tp, timeout):
        return self.marks[tp.partition]

    def assign(self, tps):
        pass

    def consume(self, n, timeout):
        assert self.batches, "read past the end offsets it was told to stop at"
        return self.batches.pop(0)


def _history():
    """Two partitions of history: s2's gini ranked three times, s1's twice, s1's drift once,
    and a ranking method of s3 deleted by hand."""
    r, a = ranking_key, alert_key
    p0 = [_record(_ranking("s2", "gini", n), RANKING, r("s2", "gini"), offset=i)
          for i, n in enumerate((1, 2, 3))]
    p1 = [_record(_ranking("s1", "gini", 10), RANKING, r("s1", "gini"), partition=1, offset=0),
          _record(_ranking("s3", "gini", 4), RANKING, r("s3", "gini"), partition=1, offset=1),
          _record(_alert("s1", "drift", 12), DRIFT_ALERT, a("s1", "adwin", "drift"),
                  partition=1, offset=2),
          _record(_ranking("s1", "gini", 20), RANKING, r("s1", "gini"), partition=1, offset=3),
          _record(None, RANKING, r("s3", "gini"), partition=1, offset=4)]
    return p0, p1


def _picture(lines: list[bytes]) -> list[tuple]:
    out = []
    for rec in map(json.loads, lines):
        key, v = parse_key(rec["key"].encode()), rec["value"]
        out.append((key["stream"], key["kind"], v.get("n_seen", v.get("position"))))
    return out


def test_tail_latest_prints_the_last_record_of_each_key_in_key_order():
    p0, p1 = _history()
    lines = []
    eof = Message(topic="sf.latest", partition=0, offset=3,
                  error=KafkaError(KafkaError._PARTITION_EOF))
    consumer = _Consumer({0: (0, 3), 1: (0, 5)}, [[p1[0], p0[0], p1[1]], [p0[1], p0[2], eof],
                                                  p1[2:]])
    n = tail_module.tail(consumer, "latest", "sf.latest", lines.append)
    assert n == len(lines) and consumer.batches == []
    assert _picture(lines) == [("s1", "drift-alert", 12), ("s1", "ranking", 20),
                               ("s2", "ranking", 3)]


def test_tail_latest_follows_after_the_picture():
    p0, p1 = _history()
    later = _record(_ranking("s2", "gini", 4), RANKING, ranking_key("s2", "gini"), offset=3)
    lines = []
    consumer = _Consumer({0: (0, 3), 1: (0, 5)}, [p0 + p1, [later], [later]])
    n = tail_module.tail(consumer, "latest", "sf.latest", lines.append, follow=True, limit=4)
    assert n == 4 and len(consumer.batches) == 1
    assert _picture(lines) == [("s1", "drift-alert", 12), ("s1", "ranking", 20),
                               ("s2", "ranking", 3), ("s2", "ranking", 4)]
    # --max cuts the picture too
    lines = []
    tail_module.tail(_Consumer({0: (0, 3), 1: (0, 5)}, [p0 + p1]), "latest", "sf.latest",
                     lines.append, limit=2)
    assert _picture(lines) == [("s1", "drift-alert", 12), ("s1", "ranking", 20)]
