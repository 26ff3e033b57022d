"""Two workers share four partitions; a third joins and one leaves while input flows: every
prediction is committed exactly once and equals the uninterrupted reference run."""

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

FAST_GROUP = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


def test_join_and_leave_mid_stream_keep_outputs_exact(kafka_bootstrap, tmp_path):
    sc = scenario(kafka_bootstrap, "rebal", streams=(8, 1500, 5), KAFKA__EXTRA=FAST_GROUP,
                  TOPICS__PARTITIONS="4", WORKER__MAX_POLL_RECORDS="200", CHECKPOINT__EVERY_INSTANCES="500")
    envs = {m: sc.member_env(m) for m in ("w1", "w2", "w3")}
    settings, streams = sc.settings, sc.streams
    n = sum(len(y) for _, y in streams.values())
    ref = sc.reference()
    topic, pred = settings.topics.instances, settings.topics.predictions

    produce_streams(kafka_bootstrap, topic, streams, 0, 500)
    workers = {m: WorkerProc(envs[m], tmp_path, m) for m in ("w1", "w2")}
    try:
        wait_for(lambda: count_committed(kafka_bootstrap, pred) >= 8 * 300, 180, "phase 1")
        produce_streams(kafka_bootstrap, topic, streams, 500, 1000)
        workers["w3"] = WorkerProc(envs["w3"], tmp_path, "w3")  # joins while input flows
        wait_for(lambda: count_committed(kafka_bootstrap, pred) >= 8 * 800, 180, "phase 2")
        produce_streams(kafka_bootstrap, topic, streams, 1000, 1500)
        assert workers["w1"].terminate() == 0, workers["w1"].log()[-3000:]  # leaves
        preds = read_topic(kafka_bootstrap, pred, expected=n, timeout_s=240)
    finally:
        for w in workers.values():
            w.terminate()
    assert len(preds) == n
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)

    def assigned(m):
        return [e for e in workers[m].events("partitions assigned") if e.get("partitions")]

    assert assigned("w3"), "the joining worker never got a partition"
    revoked = workers["w1"].events("partitions revoked")
    assert revoked
    # partitions handed over were restored from checkpoints written at revoke time
    restores = [e for m in ("w2", "w3") for e in workers[m].log_events()
                if e.get("msg") == "partition restored" and e.get("checkpoint_offset")]
    assert restores
