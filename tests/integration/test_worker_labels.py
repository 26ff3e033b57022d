"""LabelEvents on the real broker: an instance is predicted when it arrives and learned when
its label does; outputs equal an uninterrupted in-process run through crashes and restores,
and a label the stream cannot join is dead-lettered with its own reason."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from worker_support import (
    WorkerProc,
    assert_exact,
    assert_same_alerts_and_rankings,
    count_committed,
    crash_run,
    latest_of_result,
    read_topic,
    scenario,
    wait_for,
)

from schemas.deadletter import parse_deadletter_headers
from worker.pipeline import Pipeline
from worker.settings import stream_profiles
from worker.tools.dev.produce import (
    LABEL_HEADERS,
    delayed_label_values,
    label_value,
    make_producer,
    produce_values,
)

pytestmark = pytest.mark.kafka

DELAY = 25  # instances between an instance and its label
FAST_GROUP = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


def _records(streams: dict) -> dict:
    """Per stream, its records in order as ``(value, headers, kind, id, y)``: instances
    without labels, each label ``DELAY`` instances late."""
    out = {}
    for s, (X, y) in streams.items():
        values, headers = delayed_label_values(s, X, y, DELAY, ts0=1_000_000)
        recs, i = [], 0
        for k, v in enumerate(values):
            if k in headers:
                recs.append((v, headers[k], "label", None, None))
            else:
                recs.append((v, None, "instance", i, None))
                i += 1
        out[s] = recs
    return out


def _bad_labels(streams: dict) -> list:
    """``(stream, value, code)``: labels no stream can join, sent after everything else."""
    s0, s1 = sorted(streams)[:2]
    return [(s0, label_value(s0, 10_000_000, 1, 2_000_000), "label_unknown_id"),
            (s0, label_value(s0, 1490, 1, 2_000_000), "label_duplicate"),  # labelled already
            (s1, label_value(s1, "5", 1, 2_000_000), "label_unknown_id"),  # 5 is not "5"
            (s1, label_value(s1, 7, [1.0, 2.0], 2_000_000), "invalid_target")]


def _produce(bootstrap: str, topic: str, records: dict, bad: list, start: int = 0,
             stop: int | None = None) -> int:
    """Records ``start:stop`` of every stream (streams interleaved by chunks of 40), then
    ``bad``."""
    p = make_producer(bootstrap)
    n = 0
    longest = max(len(r) for r in records.values()) if stop is None else stop
    for a in range(start, longest, 40):
        for s, recs in records.items():
            chunk = recs[a:min(a + 40, longest)]
            if chunk:
                n += produce_values(p, topic, s, [r[0] for r in chunk],
                                    headers={k: r[1] for k, r in enumerate(chunk) if r[1]})
    for s, value, _code in bad:
        n += produce_values(p, topic, s, [value], headers={0: LABEL_HEADERS})
    assert p.flush(60) == 0
    return n


def _reference(settings, streams: dict) -> dict:
    """The worker's outputs for the same records, in process and uninterrupted."""
    profiles = stream_profiles(settings)
    ref = {}
    for s, (X, y) in streams.items():
        n = len(y)
        rows, ys, ids, ts, labels = [], [], [], [], []
        values, headers = delayed_label_values(s, X, y, DELAY, ts0=1_000_000)
        i = 0
        for k, v in enumerate(values):
            d = msgpack.unpackb(v)
            if k in headers:
                rows.append(np.zeros(X.shape[1]))
                ys.append(d["y"])
                labels.append(True)
            else:
                rows.append(X[i])
                ys.append(None)
                labels.append(False)
                i += 1
            ids.append(d["id"])
            ts.append(d["ts"])
        assert i == n
        p = Pipeline(s, profiles.for_stream(s), X.shape[1], held_rows=settings.learners.held_rows)
        res = p.process(np.array(rows), ys, ids=ids, ts=ts, labels=np.array(labels))
        assert not res.rejected
        is_label = np.array(labels)  # a block may cover LabelEvents' rows: not published
        preds = [(r, b.y_pred[r - b.start], b.proba[r - b.start].tolist() if b.classes else [])
                 for b in res.blocks for r in range(b.start, b.stop) if not is_label[r]]
        assert len(preds) == n
        ref[s] = preds
        ref["drift:" + s] = [(a.level, a.position) for a in res.alerts]
        ref["rank:" + s] = [(k.method, k.features, k.scores, k.n_seen) for k in res.rankings]
        ref["latest:" + s] = latest_of_result(res)
    return ref


def test_late_labels_are_learned_exactly_once_through_crashes_and_bad_ones_dead_lettered(
        kafka_bootstrap, tmp_path):
    sc = scenario(kafka_bootstrap, "labels", streams=(3, 1500, 4), KAFKA__EXTRA=FAST_GROUP,
                  WORKER__MAX_POLL_RECORDS="50", CHECKPOINT__EVERY_INSTANCES="300")
    env, settings = sc.env, sc.settings
    # every instance labelled, late (make_streams leaves some unlabelled: those get none)
    streams = sc.streams
    records = _records(streams)
    bad = _bad_labels(streams)
    _produce(kafka_bootstrap, settings.topics.instances, records, bad)
    n = sum(len(y) for _, y in streams.values())
    ref = _reference(settings, streams)
    topic = settings.topics.predictions

    runs = [crash_run(env, tmp_path, "crash_before_commit=12", "before-commit")]
    c1 = count_committed(kafka_bootstrap, topic)
    assert 0 < c1 < n
    runs.append(crash_run(env, tmp_path, "crash_after_commit=10", "after-commit"))
    assert c1 < count_committed(kafka_bootstrap, topic) < n
    w = WorkerProc(env, tmp_path, "final")
    runs.append(w)
    try:
        preds = read_topic(kafka_bootstrap, topic, expected=n, timeout_s=240)
        dead = read_topic(kafka_bootstrap, settings.topics.deadletter, expected=len(bad),
                          timeout_s=60, idle_s=1.0)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    assert_exact(ref, preds, streams)  # one prediction per instance, the reference's
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)
    restores = [e for r in runs for e in r.log_events() if e.get("msg") == "partition restored"]
    assert any(e.get("checkpoint_offset") is not None for e in restores), restores
    codes = sorted(parse_deadletter_headers(m.headers())["code"] for m in dead)
    assert codes == sorted(code for *_, code in bad)


def test_late_labels_join_instances_held_by_passivated_streams(kafka_bootstrap, tmp_path):
    """A state budget smaller than one stream: after every checkpoint the streams, their held
    instances with them, leave memory and come back from the checkpoints topic when their next
    record comes (a label, often), through a crash. Outputs equal an uninterrupted run's."""
    sc = scenario(kafka_bootstrap, "labels-passivate", streams=(3, 900, 6), KAFKA__EXTRA=FAST_GROUP,
                  WORKER__STATE_BUDGET_MB="0.05", TOPICS__PARTITIONS="2",
                  WORKER__MAX_POLL_RECORDS="40", CHECKPOINT__EVERY_INSTANCES="200",
                  WORKER__LOG_LEVEL="DEBUG")
    env, settings, streams = sc.env, sc.settings, sc.streams
    _produce(kafka_bootstrap, settings.topics.instances, _records(streams), [])
    n = sum(len(y) for _, y in streams.values())
    ref = _reference(settings, streams)
    crashed = crash_run(env, tmp_path, "crash_after_commit=12", "passivate-crash")
    assert crashed.events("streams passivated"), crashed.log()[-3000:]
    w = WorkerProc(env, tmp_path, "passivate-final")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n,
                           timeout_s=240)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    assert sum(e["streams"] for e in w.events("streams restored")) > 0
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)
    assert not read_topic(kafka_bootstrap, settings.topics.deadletter, idle_s=1)


def test_late_labels_stay_exact_when_workers_join_and_leave(kafka_bootstrap, tmp_path):
    """A second worker joins while instances and their late labels flow, then the first
    leaves: held instances move with their partitions' checkpoints, outputs stay exact."""
    sc = scenario(kafka_bootstrap, "labels-rebal", streams=(6, 900, 7), KAFKA__EXTRA=FAST_GROUP,
                  TOPICS__PARTITIONS="4", WORKER__MAX_POLL_RECORDS="100",
                  CHECKPOINT__EVERY_INSTANCES="300")
    settings, streams = sc.settings, sc.streams
    records = _records(streams)
    n = sum(len(y) for _, y in streams.values())
    ref = _reference(settings, streams)
    topic, pred = settings.topics.instances, settings.topics.predictions
    half = max(len(r) for r in records.values()) // 2
    _produce(kafka_bootstrap, topic, records, [], 0, half)
    workers = {"w1": WorkerProc(sc.member_env("w1"), tmp_path, "w1")}
    try:
        wait_for(lambda: count_committed(kafka_bootstrap, pred) >= n // 4, 180, "phase 1")
        workers["w2"] = WorkerProc(sc.member_env("w2"), tmp_path, "w2")  # joins
        _produce(kafka_bootstrap, topic, records, [], half)
        wait_for(lambda: any(e.get("partitions") for e in workers["w2"].events(
            "partitions assigned")), 120, "w2 assigned")
        assert workers["w1"].terminate() == 0, workers["w1"].log()[-3000:]  # leaves
        preds = read_topic(kafka_bootstrap, pred, expected=n, timeout_s=240)
    finally:
        for w in workers.values():
            w.terminate()
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)
    assert workers["w1"].events("partitions revoked")
