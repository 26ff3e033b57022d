"""Pure logic of the worker's operations: checkpoint layout, faults, metrics, logs, CLI."""

from __future__ import annotations

import io
import json
import logging
import time
import urllib.request

import pytest

from schemas import DecodeError, StreamCheckpoint
from worker import checkpoint_store as ckpt
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


def test_keys_carry_group_and_input_topic():
    assert ckpt.chunk_key("g", "sf.instances", "s1", 0) == b"s\x00g\x00sf.instances\x00s1\x000"
    assert ckpt.chunk_key("g", "t", "s1", 10).endswith(b"\x0010")
    assert ckpt.manifest_key("g", "sf.instances", 3) == b"m\x00g\x00sf.instances\x003"
    # two deployments sharing the checkpoints topic write distinct keys
    assert ckpt.chunk_key("g1", "t", "s", 0) != ckpt.chunk_key("g2", "t", "s", 0)
    assert ckpt.manifest_key("g", "t1", 0) != ckpt.manifest_key("g", "t2", 0)


def _envelope(**over):
    import numpy as np

    fields = dict(group="g", topics=["t"], partition=1, stream="s",
                  config={"predictor": ["forgetful_tree"], "params": {}}, offsets={"t": 77},
                  state={"arrays": {"w": np.arange(5, dtype=np.float32)}, "n": 3}, ts=5)
    fields.update(over)
    return StreamCheckpoint(**fields)


def test_blob_envelope_is_the_contract_and_keeps_arrays():
    import numpy as np

    env = ckpt.decode_blob(ckpt.encode_blob(_envelope()))
    assert env == _envelope()
    assert env.offsets == {"t": 77} and env.stream == "s" and env.partition == 1
    assert env.state["arrays"]["w"].dtype == np.float32
    assert env.state["arrays"]["w"].tolist() == [0, 1, 2, 3, 4]


def test_envelope_offsets_name_exactly_the_input_topics():
    with pytest.raises(ValueError, match="input topics"):
        _envelope(offsets={"other": 3})


def test_manifest_round_trips_and_unknown_versions_are_refused():
    from schemas.codec import decode, encode, encode_state

    m = ckpt.empty_manifest("g", "sf.instances", 3, 1234)
    m = m.model_copy(update={"streams": {"a": [10, 2, 1500], "b": [12, 1, 7]}})
    value = encode(m)[0]
    assert decode(value, ckpt.Manifest, max_bytes=len(value)) == m
    with pytest.raises(DecodeError, match="version"):
        decode(encode_state({"v": 99}), ckpt.Manifest)


def test_restore_refuses_an_envelope_of_another_writer():
    m = ckpt.empty_manifest("g", "t", 1, 100)
    ckpt._verify(_envelope(), m, "s")  # the right one passes
    for bad, what in ((dict(group="other"), "group"), (dict(partition=2), "partition"),
                      (dict(offsets={"t": 101}), "offsets")):
        with pytest.raises(ckpt.CheckpointError, match=what):
            ckpt._verify(_envelope(**bad), m, "s")
    with pytest.raises(ckpt.CheckpointError, match="stream"):
        ckpt._verify(_envelope(), m, "other-stream")


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
    m.outputs.labels(kind="prediction").inc(3)
    m.lag.labels(partition=1).set(42)
    m.poll_latency.observe(0.003)
    m.poll_latency.observe(2.0)
    text = m.render()
    # the metric names of earlier versions, now exported by prometheus_client
    assert "# TYPE streamforest_instances_total counter" in text
    assert "streamforest_instances_total 5.0" in text
    assert 'streamforest_outputs_total{kind="prediction"} 3.0' in text
    assert 'streamforest_partition_lag{partition="1"} 42.0' in text
    assert 'streamforest_batch_seconds_bucket{le="0.005"} 1.0' in text
    assert 'streamforest_batch_seconds_bucket{le="+Inf"} 2.0' in text
    assert "streamforest_batch_seconds_count 2.0" in text
    assert "_created" not in text
    m.forget_partition(1)
    m.forget_partition(7)  # never set: nothing to forget
    assert "streamforest_partition_lag{" not in m.render()
    server = MetricsServer(m, 0, host="127.0.0.1", stale_s=60).start()
    try:
        def get(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}") as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, ""

        assert get("/metrics")[0] == 200 and "streamforest_instances_total 5.0" in get("/metrics")[1]
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
    from worker.tools.topics import topic_specs

    s = load_settings({}, topics={"partitions": 3})
    specs = {t.topic: t for t in topic_specs(s)}
    ck = specs[s.topics.checkpoints]
    assert ck.num_partitions == 3
    assert ck.config["cleanup.policy"] == "compact"
    assert ck.config["max.message.bytes"] == str(s.checkpoint.topic_max_message_bytes)
    assert specs[s.topics.deadletter].config["max.message.bytes"] == ck.config["max.message.bytes"]
    assert set(specs) == {s.topics.instances, s.topics.features, s.topics.predictions,
                          s.topics.drift, s.topics.rankings, s.topics.deadletter,
                          s.topics.checkpoints, s.topics.latest}


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def _worker_without_brokers(startup_timeout_s: float):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    port = _closed_port()
    env.update({"STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{port}",
                "STREAMFOREST_WORKER__STARTUP_TIMEOUT_S": str(startup_timeout_s),
                "STREAMFOREST_WORKER__METRICS_PORT": "0", "PYTHONUNBUFFERED": "1"})
    proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc, port


def _has_kafka_clients(pid: int) -> bool:
    """Whether process ``pid`` runs librdkafka's threads (named ``rdk:...``)."""
    from pathlib import Path

    names = []
    for comm in Path(f"/proc/{pid}/task").glob("*/comm"):
        try:
            names.append(comm.read_text())
        except OSError:  # a thread that ended meanwhile
            continue
    return any(name.startswith("rdk:") for name in names)


def test_unreachable_brokers_are_said_plainly_and_sigterm_ends_the_wait():
    import signal
    import time

    proc, port = _worker_without_brokers(120)
    deadline = time.monotonic() + 60
    while not _has_kafka_clients(proc.pid):  # the worker exists; it now waits for the brokers
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0].decode()
    assert time.monotonic() - t0 < 10, "SIGTERM took too long while waiting for the brokers"
    assert proc.returncode == 1, out
    assert f"cannot reach the Kafka brokers at 127.0.0.1:{port} (stopped while waiting" in out


def _can_be_pid_1() -> bool:
    import subprocess

    try:
        return subprocess.run(["unshare", "--pid", "--fork", "true"],
                              capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def _handles(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its SigCgt mask)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    return bool(caught >> (signum - 1) & 1)


@pytest.mark.skipif(not _can_be_pid_1(), reason="needs a PID namespace (unshare --pid)")
def test_a_stop_while_a_pid_1_worker_starts_ends_it():
    """In a container the worker is PID 1, and the kernel drops a signal PID 1 has no handler
    for: a stop during the first second of imports was lost, and the member went on to join
    the group until the SIGKILL. The command line catches SIGTERM before those imports."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    env.update({"STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{_closed_port()}",
                "STREAMFOREST_WORKER__STARTUP_TIMEOUT_S": "120",
                "STREAMFOREST_WORKER__METRICS_PORT": "0"})
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sys.executable,
                             "-m", "worker", "run"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        pid = None
        while pid is None or not _handles(pid, signal.SIGTERM):
            assert time.monotonic() < deadline and proc.poll() is None, "the worker never began"
            if pid is None:
                children = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
                pid = int(children[0]) if children else None
            time.sleep(0.002)
        os.kill(pid, signal.SIGTERM)  # from outside its namespace, as podman and kubelet send it
        out = proc.communicate(timeout=30)[0].decode()
    finally:
        proc.kill()
    assert proc.returncode == 143, out  # ended during the imports, before the worker existed
    assert "cannot reach the Kafka brokers" not in out


def test_sigterm_during_a_commands_imports_ends_it_with_143(monkeypatch):
    import os
    import signal

    from worker import cli

    real = cli.build_parser

    def terminated_while_importing():
        os.kill(os.getpid(), signal.SIGTERM)
        return real()

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cli, "build_parser", terminated_while_importing)
    assert cli.main(["schemas", "--list"]) == cli.EXIT_TERMINATED == 143
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back


def test_sigterm_while_the_worker_is_made_stops_it_before_it_consumes(monkeypatch):
    import os
    import signal

    from worker import run_command

    class Made:
        """Stands in for the worker's construction (its clients, its metrics server)."""

        def __init__(self, settings, faults):
            os.kill(os.getpid(), signal.SIGTERM)
            self.stops = 0

        def request_stop(self, *_args):
            self.stops += 1

    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    monkeypatch.setattr(run_command, "Worker", Made)
    try:
        made = run_command._stoppable_worker(None, None)
        assert made.stops == 1
        assert signal.getsignal(signal.SIGTERM) == made.request_stop
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_unreachable_brokers_end_the_start_within_its_bound():
    proc, port = _worker_without_brokers(3)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 1, out
    assert f"cannot reach the Kafka brokers at 127.0.0.1:{port} (no answer within 3 s" in out
    assert "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS" in out


def test_a_producer_fenced_again_and_again_ends_the_worker():
    from worker.app import Worker, WorkerFailed
    from worker.settings import load_settings

    w = Worker(load_settings({"STREAMFOREST_WORKER__TRANSACTIONAL_ID": "shared-id"}))
    w.txn.check_fencing_loop()
    w.txn.check_fencing_loop()  # twice: a restart or a zombie, not yet a loop
    with pytest.raises(WorkerFailed, match="another process uses transactional.id 'shared-id'"):
        w.txn.check_fencing_loop()


def test_a_failed_transactional_step_is_aborted_and_says_so_and_other_errors_go_on():
    """The worker's step runs in the ``with`` body of ``Transactions.step``: an abortable
    failure aborts the open transaction and the outcome tells the worker to rewind; an error
    that is not the producer's is not swallowed. (The aborts on a real broker are the fault
    tests'.)"""
    import threading

    from worker.app import Faults
    from worker.kafka_io import AbortableError
    from worker.settings import load_settings
    from worker.transactions import Transactions

    class Producer:  # records what the step asks of it
        aborts = 0

        def abort(self):
            self.aborts += 1

    metrics = WorkerMetrics()
    txn = Transactions(load_settings({}), metrics, Faults(), threading.Event())
    txn.producer = Producer()
    with txn.step() as ok:
        pass
    with txn.step() as failed:
        raise AbortableError("the broker refused the transaction")
    assert (ok.aborted, failed.aborted, txn.producer.aborts) == (False, True, 1)
    assert metrics.registry.get_sample_value("streamforest_transactions_aborted_total") == 1
    with pytest.raises(KeyError), txn.step() as other:
        raise KeyError("not the producer's")
    assert not other.aborted and txn.producer.aborts == 1


def test_the_watchdog_ends_an_overdue_step_and_not_a_finished_one():
    import threading

    from worker.watchdog import EXIT_OVERDUE, Watchdog

    fired = threading.Event()
    codes = []
    dog = Watchdog(0.05, exit_fn=lambda code: (codes.append(code), fired.set()))
    dog.arm("revoke")
    dog.disarm()  # the step ended in time
    assert not fired.wait(0.2) and codes == []
    dog.arm("shutdown")
    dog.arm("revoke")  # a revoke inside the shutdown keeps the shutdown's deadline
    assert fired.wait(2.0) and codes == [EXIT_OVERDUE]


class _Consumer:
    """Stands in for the consumer the rebalance callbacks receive (no broker involved)."""

    def incremental_unassign(self, partitions):
        self.unassigned = partitions

    def pause(self, partitions):
        self.paused = partitions


def test_lost_partitions_make_the_worker_unready_until_the_next_assignment():
    from worker.app import Worker
    from worker.settings import load_settings
    from worker.task import PartitionTask

    w = Worker(load_settings({}))
    w.joined = True
    w.metrics.ready = True
    w.tasks[0] = PartitionTask("g", "t", 0, "t.features")
    w._on_lost(_Consumer(), [])
    assert not w.joined and not w.metrics.ready
    assert w.tasks[0] is not None  # the empty list lost nothing


def test_a_rewind_or_a_lost_partition_hands_the_frozen_objects_back_to_the_collector():
    import gc

    from confluent_kafka import TopicPartition

    from worker.app import Worker
    from worker.settings import load_settings
    from worker.task import PartitionTask

    w = Worker(load_settings({}))
    w.consumer = _Consumer()
    try:
        for p in (0, 1):
            w.tasks[p] = PartitionTask("g", "t", p, "t.features")
        for drop in (w._rewind, lambda: w._on_lost(_Consumer(), [TopicPartition("t", 0)])):
            assert w.heap.settle(2) and gc.get_freeze_count() > 0
            drop()  # the state it dropped may be in a cycle: the collector sees all again
            assert gc.get_freeze_count() == 0 and w.heap.streams == -1
        assert list(w.tasks) == [1] and w.to_restore == {1}
        assert w.heap.settle(1)
        w._on_lost(_Consumer(), [TopicPartition("t", 7)])  # none of this member's
        assert gc.get_freeze_count() > 0 and w.heap.streams == 1
    finally:
        gc.unfreeze()


def test_fault_metrics_are_exported():
    m = WorkerMetrics()
    m.restore_fallbacks.labels(kind="older").inc()
    m.checkpoints_refused.inc(2)
    m.consecutive_aborts.set(3)
    m.producer_rebuilds.inc()
    m.consume_errors.labels(code="UNKNOWN_TOPIC_OR_PART").inc()
    m.restore_failures.inc()
    text = m.render()
    for line in ('streamforest_restore_fallbacks_total{kind="older"} 1.0',
                 "streamforest_checkpoints_refused_total 2.0",
                 "streamforest_consecutive_aborts 3.0", "streamforest_producer_rebuilds_total 1.0",
                 'streamforest_consume_errors_total{code="UNKNOWN_TOPIC_OR_PART"} 1.0',
                 "streamforest_restore_failures_total 1.0"):
        assert line in text


def test_a_checkpoint_produces_each_stream_before_the_next_is_encoded():
    """The writer takes ``(stream, blob)`` pairs as a worker encodes them: a stream's chunks
    go to the producer before the next stream's blob exists, so a partition's checkpoint is
    never held whole; the manifest names each stream's first chunk, as with a dict."""
    events = []

    class Recorder:  # the producer's calls, delivered at once (a unit test: no broker here)
        def __init__(self):
            self.offset = 0

        def produce(self, topic, value, key, partition, on_delivery=None):
            events.append(("produced", key))
            if on_delivery is not None:
                msg = type("Msg", (), {"offset": lambda _self, o=self.offset: o})()
                on_delivery(None, msg)
            self.offset += 1

        def flush(self, *_args):
            return 0

    def encoded(streams):
        for s in streams:
            events.append(("encoded", s))
            yield s, ckpt.encode_blob(_envelope(stream=s))

    manifest = ckpt.empty_manifest("g", "t", 1, 0, "f", 0)
    written = ckpt.CheckpointWriter(Recorder(), "ck", 1 << 20).write(manifest, encoded("abc"))
    kinds = [kind for kind, _key in events]
    assert kinds == ["encoded", "produced"] * 3 + ["produced"]  # the manifest last
    assert {s: first for s, (first, _n, _size) in written.manifest.streams.items()} == {
        "a": 0, "b": 1, "c": 2}


def test_checkpoints_compressed_by_the_worker_and_plain_ones_read_alike():
    import zlib

    import numpy as np

    env = _envelope(state={"arrays": {"w": np.zeros(50_000)}, "n": 3})
    packed, plain = ckpt.encode_blob(env, level=1), ckpt.encode_blob(env)
    assert packed[0] == 0x78  # a zlib stream
    assert plain[0] in (0xDE, 0xDF) or 0x80 <= plain[0] <= 0x8F  # a msgpack map
    assert len(packed) < len(plain) / 100  # 400 kB of zeros: a few hundred bytes
    # both read back to the same envelope: checkpoints written before compression still load
    assert ckpt.decode_blob(packed) == ckpt.decode_blob(plain) == env
    with pytest.raises(ValueError, match="truncated"):
        ckpt.decode_blob(packed[:-10])
    with pytest.raises(ValueError, match="corrupt"):
        ckpt.decode_blob(b"\x78" + b"\x00" * 20)
    # a record that would inflate past its limit is refused, not expanded
    bomb = zlib.compress(b"\x00" * (ckpt._MAX_STATE_BYTES // 1024 + 1))
    with pytest.raises(ValueError, match="inflates past"):
        ckpt.inflate(bomb, ckpt._MAX_STATE_BYTES // 1024)


@pytest.mark.parametrize("module", ["worker.consume_errors", "worker.metrics", "worker.checkpoint_store",
                                    "worker.residency"])
def test_docstring_examples_of_runtime_modules(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


class _Metadata:
    """Cluster metadata with some topics missing (no broker involved)."""

    def __init__(self, present):
        self.topics = {t: type("T", (), {"error": None, "partitions": {0: None}})()
                       for t in present}


class _Lister:
    def __init__(self, present):
        self.present = present

    def list_topics(self, topic, timeout):
        return _Metadata([t for t in self.present if t == topic])


@pytest.mark.parametrize("gone", ["instances", "features"])
def test_a_vanished_input_topic_ends_the_worker_naming_it(gone):
    """Either input topic reported unknown for longer than the start-up bound ends the
    worker with the topic's name and its setting; once both are back the alarm is off."""
    from worker.app import Worker, WorkerFailed
    from worker.settings import load_settings

    w = Worker(load_settings({"STREAMFOREST_WORKER__STARTUP_TIMEOUT_S": "1"}))
    t = w.topics
    other = t.features if gone == "instances" else t.instances
    w.consumer = _Lister([other])
    w.inputs.unknown_since = time.monotonic() - 5
    with pytest.raises(WorkerFailed, match=f"input topic {getattr(t, gone)} .*"
                                           f"STREAMFOREST_TOPICS__{gone.upper()}"):
        w.inputs.check(w.consumer)
    w.consumer = _Lister([t.instances, t.features])
    w.inputs.check(w.consumer)
    assert w.inputs.unknown_since is None
