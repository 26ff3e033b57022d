"""The latest-state topic on the real broker: a subscriber that starts after the worker ran
reads the compacted topic from the beginning, keeps the last value of each key, and sees
exactly the last ranking of each (stream, method) and the last alert of each (stream, source,
level) that the rankings and drift topics hold; ``streamforest tail latest`` prints that
picture. (Crashes and rebalances: every fault test compares the latest state with the
uninterrupted run through ``worker_support.assert_same_alerts_and_rankings``.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from confluent_kafka.admin import ConfigResource
from worker_support import (
    REPO,
    WorkerProc,
    assert_same_alerts_and_rankings,
    read_topic,
    scenario,
)

from schemas.codec import load
from worker.latest import alert_key, ranking_key

pytestmark = pytest.mark.kafka


def _flipping_stream(n: int, seed: int):
    """Labels that flip halfway: the detector must fire."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = [int(v) if i < n // 2 else 1 - int(v) for i, v in enumerate(X[:, 0] > 0.5)]
    return X, y


def _last_per_key(msgs, key_of=None) -> dict[bytes, bytes]:
    """The last value of each key in offset order; ``key_of(record)`` names the key of an
    output topic's record (the latest-state key it feeds)."""
    last = {}
    for m in msgs:
        key = m.key() if key_of is None else key_of(load(m.value(), m.headers()))
        last[key] = m.value()
    return last


def test_a_new_subscriber_sees_the_last_ranking_and_alert_of_each_key(kafka_bootstrap, tmp_path,
                                                                      admin):
    sc = scenario(kafka_bootstrap, "latest", streams=(2, 1500, 5))
    env, settings, streams = sc.env, sc.settings, sc.streams
    streams["flip"] = _flipping_stream(1500, seed=5)
    n = sc.produce()
    ref = sc.reference()
    assert ref["drift:flip"], "the reference run raised no alert: nothing to compare"
    methods = [r[0] for s in streams for r in ref["rank:" + s]]
    assert len(methods) > len(set(methods)), "one ranking per method: nothing superseded"
    t = settings.topics
    (res,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t.latest)]).values()
    assert res.result()["cleanup.policy"].value == "compact"

    w = WorkerProc(env, tmp_path, "w1")
    try:
        assert len(read_topic(kafka_bootstrap, t.predictions, expected=n, timeout_s=180)) == n
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]

    # the very records the rankings and drift topics hold last, key by key
    want = _last_per_key(read_topic(kafka_bootstrap, t.rankings, idle_s=2.0),
                         lambda r: ranking_key(r["stream"], r["method"]))
    want.update(_last_per_key(read_topic(kafka_bootstrap, t.drift, idle_s=2.0),
                              lambda a: alert_key(a["stream"], a["source"], a["level"])))
    latest = read_topic(kafka_bootstrap, t.latest, idle_s=2.0)
    assert _last_per_key(latest) == want
    for m in latest:
        kind = json.loads(m.key())["kind"]
        assert dict(m.headers())["sf-kind"] == kind.encode()
    # and they are the uninterrupted in-process run's
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)

    # `tail latest` prints that picture: one line per key, in key order
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    proc = subprocess.run([sys.executable, "-m", "worker", "tail", "latest"], cwd=str(REPO),
                          env={**full, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["key"].encode() for r in lines] == sorted(want, key=lambda k: k.decode())
    for r in lines:
        assert "error" not in r and r["value"] == load(want[r["key"].encode()])
