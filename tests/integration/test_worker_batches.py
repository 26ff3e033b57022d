"""InstanceBatch records on the real broker: the rows of a batch get the predictions the same
rows get one per record, exactly once through crashes and restores; a bad row dead-letters
its batch (with the row's index) and the worker goes on; with prediction batches on, one
PredictionBatch per InstanceBatch, rows in input order."""

from __future__ import annotations

import math

import numpy as np
import pytest
from worker_support import (
    WorkerProc,
    assert_exact,
    assert_same_alerts_and_rankings,
    count_committed,
    crash_run,
    read_topic,
    scenario,
    unpack,
)

from schemas.batches import PredictionBatch
from schemas.codec import decode, encode_state
from schemas.deadletter import parse_deadletter_headers
from worker.tools.dev.produce import BATCH_HEADERS, batch_values, make_producer, produce_values

pytestmark = pytest.mark.kafka

FAST_GROUP = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


def _produce_batches(bootstrap: str, topic: str, streams: dict, size: int,
                     extra: dict | None = None) -> int:
    """Every stream as InstanceBatch records of ``size`` rows, streams interleaved by batch;
    ``extra`` maps ``(stream, batch index)`` to a record value sent right after that batch.
    Returns the number of records."""
    p = make_producer(bootstrap)
    n = 0
    longest = max(len(y) for _, y in streams.values())
    for k, a in enumerate(range(0, longest, size)):
        for s, (X, y) in streams.items():
            if a >= len(y):
                continue
            vals = batch_values(s, X[a:a + size], y[a:a + size], size=size, start_id=a,
                                ts0=1_000_000 + a)
            if extra and (s, k) in extra:
                vals.append(extra[(s, k)])
            n += produce_values(p, topic, s, vals, headers={i: BATCH_HEADERS
                                                            for i in range(len(vals))})
    p.flush(60)
    return n


def test_batched_rows_get_the_predictions_of_single_rows_exactly_once_through_crashes(
        kafka_bootstrap, tmp_path):
    # a transaction every few records: crashes land between batches of one stream
    sc = scenario(kafka_bootstrap, "batch", streams=(3, 3000, 8),  # every 11th row unlabelled
                  KAFKA__EXTRA=FAST_GROUP, WORKER__MAX_POLL_RECORDS="6", CHECKPOINT__EVERY_INSTANCES="700")
    env, settings, streams = sc.env, sc.settings, sc.streams
    n_records = _produce_batches(kafka_bootstrap, settings.topics.instances, streams, 100)
    assert n_records == 90
    n = sum(len(y) for _, y in streams.values())
    ref = sc.reference()  # the rows one by one, uninterrupted
    topic = settings.topics.predictions

    runs = [crash_run(env, tmp_path, "crash_before_commit=4", "before-commit")]
    c1 = count_committed(kafka_bootstrap, topic)
    assert 0 < c1 < n and c1 % 100 == 0  # a batch is committed whole or not at all
    runs.append(crash_run(env, tmp_path, "crash_after_commit=3", "after-commit"))
    c2 = count_committed(kafka_bootstrap, topic)
    assert c1 < c2 < n
    w = WorkerProc(env, tmp_path, "final")
    runs.append(w)
    try:
        preds = read_topic(kafka_bootstrap, topic, expected=n, timeout_s=240)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    assert len(preds) == n
    assert_exact(ref, preds, streams)  # ids 0..n-1 per stream, no gap, no duplicate, same values
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)
    # every row carries its batch's offset: 100 predictions per (partition, offset)
    per_record: dict = {}
    for m in preds:
        d = unpack(m)
        per_record[(d["partition"], d["offset"])] = per_record.get(
            (d["partition"], d["offset"]), 0) + 1
    assert len(per_record) == 90 and set(per_record.values()) == {100}
    restores = [e for r in runs for e in r.log_events() if e.get("msg") == "partition restored"]
    assert any(e.get("checkpoint_offset") is not None for e in restores), restores
    assert not read_topic(kafka_bootstrap, settings.topics.deadletter, idle_s=1)


def test_a_bad_row_dead_letters_its_batch_and_prediction_batches_follow_the_input(
        kafka_bootstrap, tmp_path):
    sc = scenario(kafka_bootstrap, "pbatch", streams=(2, 1000, 9), OUTPUT__PREDICTION_BATCHES="true")
    env, settings, streams = sc.env, sc.settings, sc.streams
    X0 = streams["stream-0"][0]
    nan = X0[:50].copy()
    nan[17, 2] = math.nan
    targets = list(streams["stream-1"][1][:50])
    targets[3] = [1.0, 2.0]  # regression targets in a classification stream
    bad = {("stream-0", 4): encode_state({"v": 1, "stream": "stream-0", "ts": 0, "X": nan}),
           ("stream-1", 7): encode_state({"v": 1, "stream": "stream-1", "ts": 0,
                                          "X": streams["stream-1"][0][:50], "y": targets}),
           ("stream-1", 12): encode_state({"v": 1, "stream": "stream-1", "ts": 0,
                                           "X": np.zeros((5, 4))})}
    _produce_batches(kafka_bootstrap, settings.topics.instances, streams, 50, extra=bad)
    ref = sc.reference()
    w = WorkerProc(env, tmp_path, "w1")
    try:
        records = read_topic(kafka_bootstrap, settings.topics.predictions, expected=40,
                             timeout_s=180)
        dead = read_topic(kafka_bootstrap, settings.topics.deadletter, expected=3, timeout_s=60)
        assert w.alive(), w.log()[-3000:]
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]

    # the refused batches: each once, with its row, code and source offset
    got = sorted(((m.key().decode(), parse_deadletter_headers(m.headers())) for m in dead),
                 key=lambda g: (g[0], g[1]["offset"]))
    assert [(s, h["code"], h.get("row")) for s, h in got] == [
        ("stream-0", "non_finite", 17), ("stream-1", "invalid_target", 3),
        ("stream-1", "feature_count", 0)]
    assert all(h["reason"] and h["topic"] == settings.topics.instances for _, h in got)

    # one PredictionBatch per valid InstanceBatch; the rows are those of the reference run
    assert len(records) == 40
    by_stream: dict[str, list[PredictionBatch]] = {}
    for m in records:
        pb = decode(m.value(), PredictionBatch, m.headers())
        assert len(pb) == 50 and pb.stream == m.key().decode()
        by_stream.setdefault(pb.stream, []).append(pb)
    for s, (_X, y) in streams.items():
        pbs = by_stream[s]
        assert [pb.offset for pb in pbs] == sorted(pb.offset for pb in pbs)
        assert sum((pb.ids for pb in pbs), []) == list(range(1000))
        assert sum((pb.y_true for pb in pbs), []) == list(y)
        assert sum((pb.y_pred for pb in pbs), []) == [r[1] for r in ref[s]]
        assert pbs[0].proba is None and pbs[0].classes is None  # nothing learned yet
        assert all(ref[s][i][2] == [] for i in pbs[0].ids)
        for pb in pbs[1:]:
            for r, i in enumerate(pb.ids):
                want = ref[s][i][2]  # a row predicted before a class appeared has 0 for it
                row = pb.proba[r].tolist()
                assert row[:len(want)] == want and not any(row[len(want):]), (s, i)
