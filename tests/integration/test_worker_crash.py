"""kill -9 at several points (before a commit, inside a checkpoint, right after a commit, at
an arbitrary moment), restart: a read_committed reader sees every prediction exactly once,
identical to an uninterrupted run with the same seeds."""

from __future__ import annotations

import time

import pytest
from worker_support import (
    WorkerProc,
    assert_exact,
    assert_same_alerts_and_rankings,
    count_committed,
    read_topic,
    regression_stream,
    scenario,
    wait_for,
)

pytestmark = pytest.mark.kafka

FAST_GROUP = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


def _crash_run(env, tmp_path, fault, name):
    w = WorkerProc(env, tmp_path, name, fault=fault)
    rc = w.wait(180)
    assert rc == -9, f"{fault}: expected a SIGKILL, got {rc}\n{w.log()[-3000:]}"
    return w


def test_crashes_at_several_points_leave_no_gap_and_no_duplicate(kafka_bootstrap, tmp_path):
    sc = scenario(kafka_bootstrap, "crash", streams=(4, 3000, 3), KAFKA__EXTRA=FAST_GROUP,
                  CHECKPOINT__EVERY_INSTANCES="700", LEARNERS__PREDICTOR="forgetful_tree,isoup_symrf",
                  # one stream runs ABFS in front of a Hoeffding tree: the selector's state,
                  # retrains and abfs rankings must survive the crashes too
                  PROFILES=[{"match": "stream-1", "name": "selected", "selector": "abfs",
                             "predictor": "hoeffding_tree",
                             "params": {"abfs": {"grace_period": 100,
                                                 "selection_threshold": 0.05}}}])
    env, settings, streams = sc.env, sc.settings, sc.streams
    streams["reg-0"] = regression_stream(3000, seed=3)  # multi-target regression (iSOUP-SymRF)
    n = sc.produce()
    ref = sc.reference()
    assert any(r[0] == "abfs" for r in ref["rank:stream-1"])  # the selector is exercised
    assert any(r[0] == "symrf" for r in ref["rank:reg-0"])  # and the regression forest
    topic = settings.topics.predictions

    runs = []
    # 1. outputs produced and flushed, transaction not committed
    runs.append(_crash_run(env, tmp_path, "crash_before_commit=4", "before-commit"))
    c1 = count_committed(kafka_bootstrap, topic)
    assert 0 < c1 < n
    # 2. in the middle of writing a checkpoint (after 3 chunks of this process)
    w = _crash_run(env, tmp_path, "crash_after_chunks=3", "in-checkpoint")
    runs.append(w)
    assert any(e.get("msg") == "partition restored" for e in w.log_events())
    c2 = count_committed(kafka_bootstrap, topic)
    assert c2 > c1
    # 3. right after a commit
    runs.append(_crash_run(env, tmp_path, "crash_after_commit=3", "after-commit"))
    c3 = count_committed(kafka_bootstrap, topic)
    assert c3 > c2
    # 4. at an arbitrary moment while processing
    w = WorkerProc(env, tmp_path, "external")
    runs.append(w)
    wait_for(lambda: any(e.get("msg") == "partition caught up" for e in w.log_events()), 120,
             "restore")
    time.sleep(1.0)
    w.kill()
    c4 = count_committed(kafka_bootstrap, topic)
    assert c3 <= c4 < n, "the worker finished before it could be killed: test too small"
    # 5. run to the end
    w = WorkerProc(env, tmp_path, "final")
    runs.append(w)
    try:
        preds = read_topic(kafka_bootstrap, topic, expected=n, timeout_s=240)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    restored = [e for e in w.log_events() if e.get("msg") == "partition restored"]
    assert restored and any(e.get("checkpoint_offset") is not None for e in restored)
    assert len(preds) == n
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)
    # recoveries did replay input between a checkpoint and the committed offset
    restores = [e for r in runs for e in r.log_events() if e.get("msg") == "partition restored"]
    assert any(e["start"] < e["committed"] for e in restores), restores
