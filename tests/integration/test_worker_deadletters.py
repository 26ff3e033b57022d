"""1,000 malformed messages interleaved with valid ones: each malformed one is in the
dead-letter topic with its reason and source coordinates, every valid one gets its
prediction (the same as without the malformed ones), and the worker stays up."""

from __future__ import annotations

import json
import math
import random

import msgpack
import pytest
from worker_support import (
    WorkerProc,
    assert_exact,
    make_streams,
    read_topic,
    scenario,
)

from schemas.deadletter import parse_deadletter_headers
from worker.tools.dev.produce import instance_values, make_producer

pytestmark = pytest.mark.kafka

MAX_BYTES = 4096


def _malformed(kind: str, stream: str, i: int, d: int, rng: random.Random) -> bytes:
    if kind == "random":
        # 0xc1 is never valid msgpack, so the bytes cannot parse by chance
        return b"\xc1" + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
    if kind == "schema":
        return msgpack.packb({"v": 1, "stream": stream, "id": f"bad{i}", "ts": 0,
                              "features": [0.1] * d})
    if kind == "nan":
        x = [0.5] * d
        x[i % d] = math.nan
        return msgpack.packb({"v": 1, "stream": stream, "id": f"nan{i}", "ts": 0, "x": x})
    if kind == "count":
        return msgpack.packb({"v": 1, "stream": stream, "id": f"cnt{i}", "ts": 0,
                              "x": [0.5] * (d + 1 + i % 3)})
    if kind == "oversized":
        return msgpack.packb({"v": 1, "stream": stream, "id": f"big{i}", "ts": 0,
                              "x": [0.5] * d, "y": "z" * (MAX_BYTES + 10)})
    raise ValueError(kind)


EXPECTED_CODE = {"random": "not_decodable", "schema": "missing_field", "nan": "non_finite",
                 "count": "feature_count", "oversized": "oversized"}


def test_malformed_messages_are_dead_lettered_and_processing_continues(kafka_bootstrap,
                                                                       tmp_path):
    sc = scenario(kafka_bootstrap, "dlq", "w1", streams=(2, 1500, 4), WORKER__MAX_MESSAGE_BYTES=str(MAX_BYTES))
    env, settings, streams = sc.env, sc.settings, sc.streams
    d = 5
    rng = random.Random(7)
    kinds = [k for k in EXPECTED_CODE for _ in range(200)]
    rng.shuffle(kinds)
    sent: dict[tuple[int, int], str] = {}  # (partition, offset) -> malformed kind
    errors = []

    def on_bad(kind):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                sent[(msg.partition(), msg.offset())] = kind
        return cb

    p = make_producer(kafka_bootstrap)
    topic = settings.topics.instances
    names = list(streams)
    valid = {s: instance_values(s, X, y, ts0=5_000) for s, (X, y) in streams.items()}
    k = 0
    for i in range(1500):
        for s in names:
            p.produce(topic, valid[s][i], s.encode())
            # malformed ones only after each stream's first (valid) instance fixed its width
            if i >= 1 and k < len(kinds) and rng.random() < 0.35:
                kind = kinds[k]
                p.produce(topic, _malformed(kind, s, k, d, rng), s.encode(),
                          on_delivery=on_bad(kind))
                k += 1
        p.poll(0)
    while k < len(kinds):  # the rest at the end
        kind = kinds[k]
        p.produce(topic, _malformed(kind, names[k % 2], k, d, rng), names[k % 2].encode(),
                  on_delivery=on_bad(kind))
        k += 1
    p.flush(60)
    assert not errors and len(sent) == 1000

    ref = sc.reference()
    w = WorkerProc(env, tmp_path, "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=3000,
                           timeout_s=180)
        dead = read_topic(kafka_bootstrap, settings.topics.deadletter, expected=1000,
                          timeout_s=60)
        assert w.alive(), w.log()[-3000:]
    finally:
        rc = w.terminate()
    assert rc == 0
    assert len(preds) == 3000
    assert_exact(ref, preds, streams)
    assert len(dead) == 1000
    seen = set()
    for m in dead:
        h = parse_deadletter_headers(m.headers())
        where = (h["partition"], h["offset"])
        assert where in sent, where
        assert h["topic"] == topic and h["version"]
        assert h["code"] == EXPECTED_CODE[sent[where]], (sent[where], h)
        assert h["reason"]
        seen.add(where)
        # the original record is kept whole
        assert m.key().decode() in names
    assert len(seen) == 1000


def _poison(stream: str, d: int) -> list[tuple[bytes | None, bytes, str]]:
    """``(key, value, expected code)`` of records that stopped a partition before: each must
    be one dead letter, the partition going on (JSON written by hand, as a producer could)."""
    base = {"v": 1, "stream": stream, "ts": 0, "x": [0.5] * d}

    def js(i: int, **over) -> bytes:
        return json.dumps({**base, "id": f"p{i}", **over}).encode()

    key = stream.encode()
    return [
        (key, js(0, y="\ud800"), "invalid_text"),  # a lone surrogate as the label
        (key, json.dumps({**base, "id": "\udfff"}).encode(), "invalid_text"),
        (key, js(2, x={"\ud800": 0.5, **{f"f{j}": 0.5 for j in range(1, d)}}), "invalid_text"),
        (None, js(3, stream="\ud800"), "missing_key"),
        (None, js(4), "missing_key"),  # a valid instance without its key: another partition's
        (key, js(5, x=[1e300] + [0.5] * (d - 1)), "out_of_range"),
        (key, js(6, x=[1.7976931348623157e308] * d), "out_of_range"),
        (key, js(7, x={f"f{j}": 0.5 for j in range(d)}), "unknown_feature"),  # names on a list stream
    ]


def test_poison_records_are_dead_lettered_once_and_survive_restarts(kafka_bootstrap, tmp_path):
    """Records that used to end the worker (and every restart of it) are dead letters now,
    the valid input gets the predictions of a run without them, a restart from the final
    checkpoint goes on, and ``streamforest tail deadletter`` prints every one."""
    import os
    import subprocess
    import sys

    sc = scenario(kafka_bootstrap, "poison", "w1", streams=(2, 600, 5), TOPICS__PARTITIONS="1")
    env, settings, streams = sc.env, sc.settings, sc.streams
    topic = settings.topics.instances
    p = make_producer(kafka_bootstrap)
    valid = {s: instance_values(s, X, y, ts0=5_000) for s, (X, y) in streams.items()}
    poison = [rec for s in streams for rec in _poison(s, 5)]
    for i in range(600):
        for s in streams:
            p.produce(topic, valid[s][i], s.encode())
        if i in (1, 300):  # after the first instances fixed the widths, and again mid-stream
            for key, value, _code in poison[: len(poison) // 2] if i == 1 else poison[len(poison) // 2:]:
                p.produce(topic, value, key, partition=0)
    p.flush(60)

    ref = sc.reference()
    w = WorkerProc(env, tmp_path, "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=1200,
                           timeout_s=180)
        dead = read_topic(kafka_bootstrap, settings.topics.deadletter, expected=len(poison),
                          timeout_s=60)
        assert w.alive(), w.log()[-3000:]
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    assert_exact(ref, preds, streams)
    codes = sorted(parse_deadletter_headers(m.headers())["code"] for m in dead)
    assert codes == sorted(code for *_, code in poison)

    # a second member restores the final checkpoint (the poisoned streams' state included)
    # and takes more input: no crash, no output twice
    more = make_streams(2, 50, seed=6)
    for s, (X, y) in more.items():
        for value in instance_values(s, X, y, start_id=10_000, ts0=9_000):
            p.produce(topic, value, s.encode())
    p.flush(60)
    w2 = WorkerProc(env, tmp_path, "w2")
    try:
        after = read_topic(kafka_bootstrap, settings.topics.predictions, expected=1300,
                           timeout_s=180)
        assert w2.alive(), w2.log()[-3000:]
    finally:
        assert w2.terminate() == 0, w2.log()[-3000:]
    assert len(after) == 1300

    tail = subprocess.run([sys.executable, "-m", "worker", "tail", "deadletter", "--max",
                           str(len(poison))], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=60)
    assert tail.returncode == 0, tail.stderr
    shown = [json.loads(line) for line in tail.stdout.splitlines()]
    assert sorted(r["deadletter"]["code"] for r in shown) == codes
    assert any("\\ud800" in r.get("value_text", "") for r in shown)  # the record as it came
