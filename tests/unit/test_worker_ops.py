"""Pure logic of the worker's operations: checkpoint layout, faults, metrics, logs, CLI."""

from __future__ import annotations

import io
import json
import logging
import urllib.request

import pytest

from worker import checkpoint as ckpt
from worker.app import Faults
from worker.cli import build_parser
from worker.logs import JsonFormatter, event
from worker.metrics import MetricsServer, WorkerMetrics


def test_split_covers_the_blob_in_order():
    blob = bytes(range(256)) * 40
    for size in (1, 100, 10239, 10240, 10241, 10**6):
        parts = ckpt.split(blob, size)
        assert b"".join(parts) == blob
        assert all(len(p) <= size for p in parts)
        assert len(parts) == -(-len(blob) // size)
    assert ckpt.split(b"", 10) == [b""]


def test_keys_and_manifest_round_trip():
    assert ckpt.chunk_key("s1", 0) == b"s\x00s1\x000"
    assert ckpt.chunk_key("s1", 10).endswith(b"\x0010")
    assert ckpt.manifest_key("sf.instances", 3) == b"m\x00sf.instances\x003"
    m = ckpt.Manifest("sf.instances", 3, 1234, 99, {"a": [10, 2, 1500], "b": [12, 1, 7]})
    back = ckpt.Manifest.decode(m.encode())
    assert back == m


def test_blob_envelope_keeps_arrays_and_offset():
    import numpy as np

    state = {"arrays": {"w": np.arange(5, dtype=np.float32)}, "n": 3}
    env = ckpt.decode_blob(ckpt.encode_blob("s", "t", 1, 77, state))
    assert env["offset"] == 77 and env["stream"] == "s" and env["partition"] == 1
    assert env["state"]["arrays"]["w"].dtype == np.float32
    assert env["state"]["arrays"]["w"].tolist() == [0, 1, 2, 3, 4]


def test_manifest_of_an_unknown_version_is_refused():
    from schemas.codec import encode_state

    with pytest.raises(ValueError, match="version"):
        ckpt.Manifest.decode(encode_state({"v": 99}))


def test_faults_parse_and_refuse_unknown_names():
    f = Faults("crash_after_chunks=3,crash_before_commit=2")
    assert f.get("crash_after_chunks") == 3 and f.get("crash_before_commit") == 2
    assert f.get("crash_after_commit") is None
    assert Faults(None).values == {}
    with pytest.raises(ValueError, match="unknown fault"):
        Faults("explode=1")


def test_metrics_text_format_and_endpoints():
    m = WorkerMetrics()
    m.instances_in.inc(5)
    m.outputs.inc(3, kind="prediction")
    m.lag.set(42, partition=1)
    m.batch_latency.observe(0.003)
    m.batch_latency.observe(2.0)
    text = m.registry.render()
    assert "# TYPE streamforest_instances_total counter" in text
    assert "streamforest_instances_total 5" in text
    assert 'streamforest_outputs_total{kind="prediction"} 3' in text
    assert 'streamforest_partition_lag{partition="1"} 42' in text
    assert 'streamforest_batch_seconds_bucket{le="0.005"} 1' in text
    assert 'streamforest_batch_seconds_bucket{le="+Inf"} 2' in text
    assert "streamforest_batch_seconds_count 2" in text
    server = MetricsServer(m, 0, host="127.0.0.1", stale_s=60).start()
    try:
        def get(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}") as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, ""

        assert get("/metrics")[0] == 200 and "streamforest_instances_total 5" in get("/metrics")[1]
        assert get("/healthz")[0] == 200
        assert get("/readyz")[0] == 503
        m.ready = True
        assert get("/readyz")[0] == 200
        m.heartbeat -= 120  # the loop stopped turning two minutes ago
        assert get("/healthz")[0] == 503
        assert get("/nope")[0] == 404
    finally:
        server.stop()


def test_logs_are_one_json_object_per_line():
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("streamforest.test")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        event(log, logging.INFO, "partition restored", partition=2, seconds=0.5)
        log.warning("plain")
    finally:
        log.removeHandler(handler)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert lines[0]["msg"] == "partition restored" and lines[0]["partition"] == 2
    assert lines[0]["level"] == "info" and lines[0]["ts"].endswith("Z")
    assert lines[1]["level"] == "warning" and lines[1]["logger"] == "streamforest.test"


def test_cli_has_the_worker_commands():
    parser = build_parser()
    for argv in (["run"], ["topics", "create"], ["demo", "--rows", "10"],
                 ["produce", "hyperplane", "-n", "5"], ["run", "--test-fault",
                                                        "crash_after_commit=1"]):
        args = parser.parse_args(argv)
        assert callable(args.func)


def test_topic_specs_compact_the_checkpoints():
    from worker.settings import load_settings
    from worker.topics import topic_specs

    s = load_settings({}, topics={"partitions": 3})
    specs = {t.topic: t for t in topic_specs(s)}
    ck = specs[s.topics.checkpoints]
    assert ck.num_partitions == 3
    assert ck.config["cleanup.policy"] == "compact"
    assert ck.config["max.message.bytes"] == str(s.checkpoint.topic_max_message_bytes)
    assert specs[s.topics.deadletter].config["max.message.bytes"] == ck.config["max.message.bytes"]
    assert set(specs) == {s.topics.instances, s.topics.features, s.topics.predictions,
                          s.topics.drift, s.topics.rankings, s.topics.deadletter,
                          s.topics.checkpoints}
