"""The command line against a real broker: ``-b`` and ``-X`` over the settings, one line when
no broker answers, and no raw librdkafka line on stderr.

Every command here runs as users run it (``python -m worker ...``). The settings name a port
where nothing listens, so a command reaches the broker only through ``-b``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from worker_support import REPO, new_prefix, read_topic, settings_from, worker_env

pytestmark = pytest.mark.kafka

SECRET = "hunter2-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(prefix: str, **over) -> dict[str, str]:
    """Settings whose brokers do not answer (a free port), waiting 2 s for them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    env.update(worker_env(f"127.0.0.1:{_free_port()}", prefix, "m",
                          WORKER__STARTUP_TIMEOUT_S="2", **over))
    return env


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker", *args], cwd=str(REPO), env=env,
                          capture_output=True, text=True, timeout=timeout)


def _one_line(proc: subprocess.CompletedProcess, start: str) -> str:
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(start), line
    assert SECRET not in proc.stdout + proc.stderr
    return line


def test_b_points_topics_produce_and_tail_at_the_broker(kafka_bootstrap):
    env = _env(new_prefix("cli-b"))
    settings = settings_from({k: v for k, v in env.items() if k.startswith("STREAMFOREST_")})
    b = ("-b", kafka_bootstrap, "-X", "socket.timeout.ms=10000")
    created = cli(env, "topics", "create", *b)
    assert created.returncode == 0, created.stderr
    assert f"{settings.topics.instances}: created" in created.stdout.splitlines()
    assert created.stderr == ""
    produced = cli(env, "produce", "hyperplane", "-n", "20", *b)
    assert produced.returncode == 0, produced.stderr
    assert len(read_topic(kafka_bootstrap, settings.topics.instances, expected=20,
                          idle_s=0.5)) == 20
    tailed = cli(env, "tail", "instances", "--max", "3", *b)
    assert tailed.returncode == 0, tailed.stderr
    records = [json.loads(x) for x in tailed.stdout.splitlines()]
    assert [r["topic"] for r in records] == [settings.topics.instances] * 3
    assert tailed.stderr == ""


@pytest.mark.parametrize("command, start", [
    (("topics", "create"), "streamforest topics create: cannot reach the Kafka brokers at "),
    (("tail", "drift"), "streamforest tail: cannot read "),
    (("evaluate", "--no-progress"), "streamforest evaluate: cannot reach the Kafka brokers at "),
], ids=lambda c: " ".join(c) if isinstance(c, tuple) else "")
def test_no_broker_is_one_line_and_exit_1(command, start):
    env = _env(new_prefix("cli-none"))
    began = time.monotonic()
    proc = cli(env, *command, "-X", f"sasl.password={SECRET}", "-X", "sasl.username=u")
    assert proc.returncode == 1, proc.stderr
    line = _one_line(proc, start)
    assert "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS" in line
    assert time.monotonic() - began < 30


def test_broker_check_goes_where_b_points(kafka_bootstrap):
    ok = cli(_env("unused"), "broker", "check", "-b", kafka_bootstrap, "--timeout", "30")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"round trip through {kafka_bootstrap}: ok")
    assert _check_topics(kafka_bootstrap) == []  # its probe topic is gone when it returns
    port = _free_port()
    proc = cli(_env("unused"), "broker", "check", "-b", f"127.0.0.1:{port}", "--timeout", "2",
               "-X", f"sasl.password={SECRET}")
    assert proc.returncode == 1
    _one_line(proc, f"streamforest broker check: no broker answered at 127.0.0.1:{port} "
                    "within 2 s")


def _check_topics(bootstrap: str) -> list[str]:
    """The probe topics of ``broker check`` (``sf-check-*``) on the broker."""
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return sorted(t for t in topics if t.startswith("sf-check-"))


def test_run_logs_librdkafka_in_its_json_log(kafka_bootstrap):
    """A deprecated property makes every client warn (CONFWARN): the warning is a line of
    the worker's JSON log, like every other line on stderr. A property of one role reaches
    the clients of that role only (no warning), and a producer that does not compress gets
    the worker's own warning about uncompressed checkpoints."""
    env = _env(new_prefix("cli-run"), WORKER__LOG_LEVEL="INFO")
    settings = settings_from({k: v for k, v in env.items() if k.startswith("STREAMFOREST_")})
    from worker.tools.topics import create_topics

    create_topics(settings.model_copy(update={"kafka": settings.kafka.model_copy(
        update={"bootstrap_servers": kafka_bootstrap})}))
    proc = subprocess.Popen([sys.executable, "-m", "worker", "run", "-b", kafka_bootstrap,
                             "-X", "socket.blocking.max.ms=100", "-X", "fetch.min.bytes=1",
                             "-X", "compression.type=none", "-X", f"sasl.password={SECRET}"],
                            cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if '"partitions assigned"' in line:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    records = [json.loads(x) for x in lines + rest.splitlines() if x.strip()]  # JSON only
    assert proc.returncode == 0, records
    warned = [r for r in records if r["logger"] == "streamforest.librdkafka"]
    assert any("socket.blocking.max.ms" in r["msg"] and "CONFWARN" in r["msg"] for r in warned), records
    assert not any("property and will be ignored" in r["msg"] for r in warned), warned
    assert any(r["logger"] == "streamforest.worker" and r["level"] == "warning"
               and r["msg"].startswith("checkpoints are stored uncompressed") for r in records), records
    assert SECRET not in "".join(lines) + rest
