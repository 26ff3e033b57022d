"""Per-stream profiles on the real broker: streams of one worker matched by different profiles
run different predictors, rankers and detectors; each stream's outputs equal its profile's
in-process run; a stream whose labels no profile can serve is dead-lettered with the reason."""

from __future__ import annotations

import msgpack
import pytest
from confluent_kafka import Producer
from worker_support import (
    WorkerProc,
    assert_exact,
    make_streams,
    new_prefix,
    produce_streams,
    read_topic,
    reference_outputs,
    settings_from,
    unpack,
    worker_env,
)

from schemas import parse_deadletter_headers
from worker.settings import stream_profiles
from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka

PROFILES = [
    {"match": "orf-*", "name": "orf", "predictor": "online_random_forest",
     "rankers": ["online_random_forest"], "detectors": "ddm"},
    {"match": "tree-*", "name": "trees", "predictor": "forgetful_tree", "rankers": "none"},
]


def test_two_streams_under_different_profiles_run_different_predictors(kafka_bootstrap, tmp_path):
    prefix = new_prefix("profiles")
    env = worker_env(kafka_bootstrap, prefix, "w1", PROFILES=PROFILES, TOPICS__PARTITIONS="1")
    settings = settings_from(env)
    create_topics(settings)
    profiles = stream_profiles(settings)
    base = make_streams(3, 900, seed=4)
    streams = dict(zip(("orf-a", "tree-b", "plain-c"), base.values()))
    assert [profiles.for_stream(s).profile for s in streams] == ["orf", "trees", "default"]
    n = produce_streams(kafka_bootstrap, settings.topics.instances, streams)
    # a regression instance: no profile names a regression predictor
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    bad = {"v": 1, "stream": "orf-z", "id": 0, "ts": 1, "x": [0.1] * 5, "y": [1.0, 2.0]}
    p.produce(settings.topics.instances, msgpack.packb(bad), b"orf-z")
    p.flush(30)
    ref = reference_outputs(settings, streams)

    w = WorkerProc(env, tmp_path, "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n, timeout_s=180)
        drift = read_topic(kafka_bootstrap, settings.topics.drift, timeout_s=30, idle_s=2)
        ranks = read_topic(kafka_bootstrap, settings.topics.rankings, timeout_s=30, idle_s=2)
        dead = read_topic(kafka_bootstrap, settings.topics.deadletter, expected=1, timeout_s=60,
                          idle_s=1)
        assert w.alive(), w.log()[-3000:]
    finally:
        assert w.terminate() == 0
    assert len(preds) == n
    assert_exact(ref, preds, streams)
    models = {}
    for m in preds:
        d = unpack(m)
        models.setdefault(d["stream"], set()).add(d["model"])
    assert models == {"orf-a": {"online_random_forest"}, "tree-b": {"forgetful_tree"},
                      "plain-c": {"forgetful_tree"}}  # worker_env's default predictor
    by_stream = {}
    for m in ranks:
        d = unpack(m)
        by_stream.setdefault(d["stream"], set()).add(d["method"])
    assert by_stream["orf-a"] == {"orf_mda", "orf_mdg"} and "tree-b" not in by_stream
    assert by_stream["plain-c"] == {"block_mdi"}  # the default ranker
    alerts = [unpack(m) for m in drift]
    assert {a["stream"] for a in alerts if a["source"] == "ddm"} <= {"orf-a"}
    for s in streams:  # each stream's alerts are those of its profile's in-process run
        assert [(a["level"], a["position"]) for a in alerts if a["stream"] == s] == ref["drift:" + s]
    [record] = dead
    h = parse_deadletter_headers(record.headers())
    assert h["code"] == "unsupported_task" and "no regression predictor" in h["reason"]
