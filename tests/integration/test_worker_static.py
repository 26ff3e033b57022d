"""Static membership: a worker restarted under its name gets its partitions back without a
rebalance of the group, and the outputs stay exact."""

from __future__ import annotations

import pytest
from worker_support import (
    WorkerProc,
    assert_exact,
    assert_same_alerts_and_rankings,
    count_committed,
    produce_streams,
    read_topic,
    scenario,
    wait_for,
)

pytestmark = pytest.mark.kafka

# long enough for a restart; static members do not leave the group when they close
GROUP = {"session.timeout.ms": "45000", "heartbeat.interval.ms": "1000"}


def _assigned(worker) -> list[list[int]]:
    return [e["partitions"] for e in worker.events("partitions assigned") if e.get("partitions")]


def _revoked(worker) -> list[list[int]]:
    return [e["partitions"] for e in worker.events("partitions revoked") if e.get("partitions")]


def _holding(worker) -> set[int]:
    """Partitions a worker holds now, from its assign and revoke log events in order."""
    held: set[int] = set()
    for e in worker.log_events():
        if e.get("msg") == "partitions assigned":
            held |= set(e.get("partitions") or [])
        elif e.get("msg") == "partitions revoked":
            held -= set(e.get("partitions") or [])
    return held


def test_restart_under_the_same_name_keeps_the_assignment(kafka_bootstrap, tmp_path):
    sc = scenario(kafka_bootstrap, "static", "pod-0", streams=(8, 1200, 7), KAFKA__EXTRA=GROUP,
                  TOPICS__PARTITIONS="4", WORKER__MAX_POLL_RECORDS="200", CHECKPOINT__EVERY_INSTANCES="500",
                  WORKER__STATIC_MEMBERSHIP="true")
    envs = {m: sc.member_env(m) for m in ("pod-0", "pod-1")}
    settings, streams = sc.settings, sc.streams
    n = sum(len(y) for _, y in streams.values())
    ref = sc.reference()
    topic, pred = settings.topics.instances, settings.topics.predictions

    produce_streams(kafka_bootstrap, topic, streams, 0, 400)
    # pod-1 joins first (it leads the group), then pod-0; wait until both hold partitions
    stay = WorkerProc(envs["pod-1"], tmp_path, "pod-1")
    first = restarted = None
    try:
        wait_for(lambda: _assigned(stay), 120, "pod-1 assigned")
        first = WorkerProc(envs["pod-0"], tmp_path, "pod-0")
        wait_for(lambda: _assigned(first), 120, "pod-0 assigned")
        wait_for(lambda: count_committed(kafka_bootstrap, pred) >= 8 * 300, 180, "phase 1")
        held = _holding(first)
        stay_events = (len(_assigned(stay)), len(_revoked(stay)))
        assert first.terminate() == 0, first.log()[-3000:]
        produce_streams(kafka_bootstrap, topic, streams, 400, 800)
        restarted = WorkerProc(envs["pod-0"], tmp_path, "pod-0-again")
        wait_for(lambda: _assigned(restarted), 120, "pod-0 back")
        produce_streams(kafka_bootstrap, topic, streams, 800, 1200)
        preds = read_topic(kafka_bootstrap, pred, expected=n, timeout_s=240)
        # the coordinator handed the same partitions back; the other member never moved
        assert _holding(restarted) == held and held
        assert (len(_assigned(stay)), len(_revoked(stay))) == stay_events
    finally:
        for w in (stay, first, restarted):
            if w is not None:
                w.terminate()
    assert len(preds) == n
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)
