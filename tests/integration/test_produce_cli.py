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


def produce(env: dict[str, str], *args: str, source: tuple = ("hyperplane",),
            stdin: str | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "worker", "produce", *source, *args],
                          cwd=str(REPO), env=full, capture_output=True, text=True, timeout=120,
                          input=stdin)


def instances(bootstrap: str, topic: str, expected: int) -> list:
    """The topic's records as the worker decodes them: ``(key, Instance)``."""
    from schemas.instances import decode_instance

    msgs = read_topic(bootstrap, topic, expected=expected, idle_s=0.5)
    return [(m.key().decode(), decode_instance(m.value(), m.headers())) for m in msgs]


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


CSV = """id,temp,humidity,label
a1,21.5,0.4,UP
a2,22,0.45,DOWN
a3,-1e2,0.5,
"""

JSONL = """{"sensor": "s2", "n": 7, "temp": 20.5, "humidity": 1, "label": "UP"}

{"sensor": "s3", "n": 8, "temp": 19, "humidity": 0.3, "label": null}
"""


def test_produce_file_sends_csv_and_jsonl_rows_as_named_instances(kafka_bootstrap, tmp_path):
    env = worker_env(kafka_bootstrap, new_prefix("produce-file"), "p")
    settings = settings_from(env)
    create_topics(settings)
    (tmp_path / "rooms.csv").write_text(CSV)
    (tmp_path / "sensors.jsonl").write_text(JSONL)
    proc = produce(env, str(tmp_path / "rooms.csv"), "--label", "label", "--id", "id",
                   source=("file",))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (f"produced 3 instances (2 labelled) of stream 'rooms' to "
                                   f"{settings.topics.instances}")
    proc = produce(env, str(tmp_path / "sensors.jsonl"), "--stream-column", "sensor",
                   "--label", "label", "--id", "n", source=("file",))
    assert proc.returncode == 0, proc.stderr
    assert "produced 2 instances (1 labelled) of streams 's2', 's3'" in proc.stdout
    got = instances(kafka_bootstrap, settings.topics.instances, 5)
    by_id = {inst.id: (key, inst) for key, inst in got}
    assert sorted(by_id, key=str) == [7, 8, "a1", "a2", "a3"]
    key, a1 = by_id["a1"]
    assert key == "rooms" and a1.stream == "rooms"
    assert a1.x == {"temp": 21.5, "humidity": 0.4} and a1.y == "UP" and a1.ts == 0
    assert by_id["a3"][1].x == {"temp": -100.0, "humidity": 0.5} and by_id["a3"][1].y is None
    key, s2 = by_id[7]
    assert key == "s2" and s2.x == {"temp": 20.5, "humidity": 1.0} and s2.y == "UP"
    assert by_id[8][0] == "s3" and by_id[8][1].y is None and by_id[8][1].ts == 1


def test_produce_file_reads_stdin(kafka_bootstrap):
    env = worker_env(kafka_bootstrap, new_prefix("produce-stdin"), "p")
    settings = settings_from(env)
    create_topics(settings)
    rows = "f1,f2,cls,t\n1,2,0,1000\n3,4,1,2000\n"
    proc = produce(env, "-", "--format", "csv", "--stream", "piped", "--label", "cls",
                   "--ts", "t", source=("file",), stdin=rows)
    assert proc.returncode == 0, proc.stderr
    got = instances(kafka_bootstrap, settings.topics.instances, 2)
    assert [(k, i.id, i.ts, i.x, i.y) for k, i in got] == [
        ("piped", 0, 1000, {"f1": 1.0, "f2": 2.0}, 0), ("piped", 1, 2000, {"f1": 3.0, "f2": 4.0}, 1)]


def test_produce_file_refuses_a_bad_value_naming_its_line(kafka_bootstrap, tmp_path):
    env = worker_env(kafka_bootstrap, new_prefix("produce-bad"), "p")
    settings = settings_from(env)
    create_topics(settings)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,label\n1,2,x\n3,oops,y\n")
    proc = produce(env, str(bad), "--label", "label", source=("file",))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"streamforest produce file: {bad}, line 3: feature 'b' is "
                                   "not a number: 'oops'")
    # a value the worker would dead-letter (not finite) is refused up front too
    proc = produce(env, "-", "--format", "jsonl", "--stream", "s", source=("file",),
                   stdin='{"a": 1}\n{"a": 1e999}\n')
    assert proc.returncode == 2
    assert "line 2: the worker would refuse this row: non_finite at x['a']" in proc.stderr
    # so are the rows of a stream whose features differ from its first row's
    proc = produce(env, "-", "--format", "jsonl", "--stream", "s", source=("file",),
                   stdin='{"a": 1}\n{"b": 1}\n')
    assert proc.returncode == 2 and "line 2: the worker would refuse" in proc.stderr
    # and labels of another kind than the stream's first (a class, then regression targets)
    proc = produce(env, "-", "--format", "jsonl", "--stream-column", "s", "--label", "y",
                   source=("file",), stdin='{"s": "a", "x": 1, "y": "UP"}\n'
                   '{"s": "b", "x": 1, "y": [1.5]}\n{"s": "a", "x": 2, "y": [0.5]}\n')
    assert proc.returncode == 2
    assert "line 3: the worker would refuse this row: invalid_target" in proc.stderr
    assert "(the stream's first label is on line 1)" in proc.stderr
    assert read_topic(kafka_bootstrap, settings.topics.instances, idle_s=1.0) == []


def test_produce_dataset_sends_feature_names_unless_positional(kafka_bootstrap):
    env = worker_env(kafka_bootstrap, new_prefix("produce-ds"), "p")
    settings = settings_from(env)
    create_topics(settings)
    assert produce(env, "-n", "3", source=("dataset", "electricity")).returncode == 0
    assert produce(env, "-n", "2", "--positional", "--stream", "pos",
                   source=("dataset", "electricity")).returncode == 0
    got = instances(kafka_bootstrap, settings.topics.instances, 5)
    named = [i.x for k, i in got if k == "electricity"]
    positional = [i.x for k, i in got if k == "pos"]
    assert len(named) == 3 and all(isinstance(x, dict) and "nswprice" in x for x in named)
    assert len(positional) == 2 and all(isinstance(x, list) and len(x) == 7 for x in positional)
