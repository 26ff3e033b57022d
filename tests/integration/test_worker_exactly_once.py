"""One worker on the real broker: one committed prediction per instance, in input order,
equal to the in-process reference run; drift alerts and rankings too; metrics and health
endpoints; a graceful SIGTERM leaves the committed offsets at the end of what it processed."""

from __future__ import annotations

import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition
from worker_support import (
    WorkerProc,
    assert_exact,
    produce_streams,
    read_topic,
    reference_outputs,
    scenario,
    unpack,
    wait_for,
)

from worker.tools.dev.broker import free_port

pytestmark = pytest.mark.kafka


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _committed(bootstrap, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    tps = c.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in partitions]
    c.close()
    # a partition that received nothing has no committed offset: count it as 0
    return [max(tp.offset, 0) for tp in tps], ends


def test_one_prediction_per_instance_in_order_and_graceful_stop(kafka_bootstrap, tmp_path):
    port = free_port()
    sc = scenario(kafka_bootstrap, "eos", streams=(3, 1200, 1), WORKER__METRICS_PORT=str(port))
    env, settings, streams = sc.env, sc.settings, sc.streams
    n = sc.produce()
    ref = sc.reference()

    w = WorkerProc(env, tmp_path, "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n,
                           timeout_s=180)
        assert w.alive(), w.log()[-3000:]
        assert len(preds) == n
        assert_exact(ref, preds, streams)
        # per partition, predictions follow the input offsets
        offs = {}
        for m in preds:
            d = unpack(m)
            offs.setdefault(d["stream"], []).append(d["offset"])
        for s, o in offs.items():
            assert o == sorted(o), s

        # drift alerts and rankings are those of the reference run, in order
        for topic, tag in ((settings.topics.drift, "drift:"), (settings.topics.rankings, "rank:")):
            want = sum(len(ref[tag + s]) for s in streams)
            got = read_topic(kafka_bootstrap, topic, expected=want, timeout_s=30, idle_s=1)
            by = {}
            for m in got:
                d = unpack(m)
                if tag == "drift:":
                    by.setdefault(d["stream"], []).append((d["level"], d["position"]))
                else:
                    by.setdefault(d["stream"], []).append(
                        (d["method"], d["features"], d["scores"], d["n_seen"]))
            for s in streams:
                assert by.get(s, []) == ref[tag + s], f"{tag}{s}"
        assert sum(len(ref["rank:" + s]) for s in streams) > 0

        # operations endpoints
        assert _get(port, "/healthz")[0] == 200
        wait_for(lambda: _get(port, "/readyz")[0] == 200, 20, "readiness")
        code, text = _get(port, "/metrics")
        assert code == 200
        assert f"streamforest_instances_total {n}" in text
        assert "streamforest_partition_lag" in text or "streamforest_batch_seconds" in text
        assert 'streamforest_outputs_total{kind="prediction"} ' + str(n) in text
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    events = [e["msg"] for e in w.log_events()]
    assert "worker stopped" in events
    # graceful stop: committed offsets are the end of the input (everything was processed)
    committed, ends = _committed(kafka_bootstrap, settings.kafka.group_id,
                                 settings.topics.instances, [0, 1])
    assert committed == ends
    assert not read_topic(kafka_bootstrap, settings.topics.deadletter, idle_s=1)


def test_sigterm_mid_stream_commits_what_was_processed(kafka_bootstrap, tmp_path):
    """Stop while input is still arriving: offsets committed = positions of the last batch,
    and every committed prediction's instance is below those offsets (and vice versa)."""
    sc = scenario(kafka_bootstrap, "term", "w1", streams=(2, 3000, 2), WORKER__MAX_POLL_RECORDS="100")
    env, settings, streams = sc.env, sc.settings, sc.streams
    produce_streams(kafka_bootstrap, settings.topics.instances, streams, 0, 1500)
    w = WorkerProc(env, tmp_path, "w1")
    try:
        wait_for(lambda: len(read_topic(kafka_bootstrap, settings.topics.predictions,
                                        timeout_s=20, idle_s=0.5)) > 500, 120, "progress")
        produce_streams(kafka_bootstrap, settings.topics.instances, streams, 1500, 3000)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    committed, ends = _committed(kafka_bootstrap, settings.kafka.group_id,
                                 settings.topics.instances, [0, 1])
    preds = read_topic(kafka_bootstrap, settings.topics.predictions, idle_s=1.5)
    per_part = {0: 0, 1: 0}
    for m in preds:
        d = unpack(m)
        per_part[d["partition"]] = max(per_part[d["partition"]], d["offset"] + 1)
        assert d["offset"] < committed[d["partition"]]
    # the last prediction of each partition is the instance just before the committed offset
    for p in (0, 1):
        if committed[p] > 0:
            assert per_part[p] == committed[p], (p, per_part, committed, ends)
    assert len(preds) == sum(c for c in committed if c > 0)


def test_at_least_once_mode_processes_everything(kafka_bootstrap, tmp_path):
    """``worker.exactly_once=false``: plain idempotent producer, offsets committed after the
    outputs are flushed; without a crash every instance still has exactly one prediction."""
    sc = scenario(kafka_bootstrap, "alo", "w1", streams=(2, 800, 6), WORKER__EXACTLY_ONCE="false")
    env, settings, streams = sc.env, sc.settings, sc.streams
    n = sc.produce()
    w = WorkerProc(env, tmp_path, "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n,
                           timeout_s=120, committed=False)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    assert_exact(reference_outputs(settings, streams), preds, streams)
    committed, ends = _committed(kafka_bootstrap, settings.kafka.group_id,
                                 settings.topics.instances, [0, 1])
    assert committed == ends
