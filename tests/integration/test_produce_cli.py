"""``streamforest produce`` says what reached the broker, on a real broker.

It succeeds only when the broker acknowledged every record; to a topic that does not exist,
or with no broker at all, it exits 1 with one line that says what to fix, without librdkafka's
own log lines.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from worker_support import REPO, new_prefix, read_topic, settings_from, worker_env

from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka


def produce(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "worker", "produce", "hyperplane", *args],
                          cwd=str(REPO), env=full, capture_output=True, text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_produce_reports_the_records_the_broker_acknowledged(kafka_bootstrap):
    env = worker_env(kafka_bootstrap, new_prefix("produce"), "p")
    settings = settings_from(env)
    create_topics(settings)
    proc = produce(env, "-n", "25")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (f"produced 25 instances of stream 'hyperplane' to "
                                   f"{settings.topics.instances}")
    assert len(read_topic(kafka_bootstrap, settings.topics.instances, expected=25,
                          idle_s=0.5)) == 25


def test_produce_to_a_topic_that_does_not_exist_fails_with_what_to_do(kafka_bootstrap):
    env = worker_env(kafka_bootstrap, new_prefix("produce-none"), "p")  # topics not created
    proc = produce(env, "-n", "10")
    assert proc.returncode == 1
    assert "produced" not in proc.stdout
    assert proc.stderr.strip().splitlines() == [
        f"error: topic {settings_from(env).topics.instances!r} does not exist (create it: "
        "streamforest topics create)"]


def test_produce_without_a_broker_fails_in_one_line():
    env = worker_env(f"127.0.0.1:{_free_port()}", new_prefix("produce-nobroker"), "p")
    proc = produce(env, "-n", "10")
    assert proc.returncode == 1
    assert "produced" not in proc.stdout
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: no broker answered within 10 s")
    assert "KAFKA__BOOTSTRAP_SERVERS" in line


def test_produce_with_late_labels_writes_label_events_after_their_instances(kafka_bootstrap):
    from schemas.kinds import LABEL, record_kind

    env = worker_env(kafka_bootstrap, new_prefix("produce-late"), "p")
    settings = settings_from(env)
    create_topics(settings)
    proc = produce(env, "-n", "30", "--label-delay", "5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("each label 5 instances late")
    msgs = read_topic(kafka_bootstrap, settings.topics.instances, expected=60, idle_s=0.5)
    kinds = [record_kind(m.headers()) for m in msgs]
    assert kinds.count(LABEL) == 30 and len(msgs) == 60
    assert kinds[:6] == ["instance"] * 6 and kinds[6] == LABEL  # the label of 0 after 5
    assert produce(env, "--label-delay", "-1").returncode == 2
    assert produce(env, "--label-delay", "3", "--batch", "10").returncode == 2
