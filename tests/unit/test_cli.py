"""The command line as users meet it, through ``python -m worker`` (no broker needed here).

Every command that talks to Kafka takes kcat's ``-b`` and ``-X``; a malformed ``-X`` is a
usage error (exit 2) that does not repeat the argument. No command ends with a traceback:
usage errors exit 2 with one message, a closed stdout ends a command quietly with exit 0.
``--help`` shows plain text and no test-only options; ``learners`` says what each parameter
means. Broker-facing behaviour (``-b`` over the settings, unreachable brokers, librdkafka's
lines) is in tests/integration/test_cli_kafka.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: every command that talks to Kafka, with the arguments it needs besides -b and -X
KAFKA_COMMANDS = [
    ("run",), ("produce", "hyperplane"), ("produce", "dataset", "electricity"),
    ("produce", "file", "rows.csv"),
    ("topics", "create"), ("tail", "drift"), ("evaluate",), ("config",), ("broker", "check"),
]


def cli(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    return subprocess.run([sys.executable, "-m", "worker", *args], cwd=str(REPO), env=env,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.parametrize("command", KAFKA_COMMANDS, ids=" ".join)
def test_every_kafka_command_takes_b_and_x(command):
    out = cli(*command, "--help").stdout
    assert "-b HOST:PORT[,...], --bootstrap-servers HOST:PORT[,...]" in out
    assert "-X KEY=VALUE" in out


@pytest.mark.parametrize("command", KAFKA_COMMANDS, ids=" ".join)
def test_a_malformed_x_is_a_usage_error_that_does_not_repeat_it(command):
    proc = cli(*command, "-X", "sasl.passwordhunter2")
    assert proc.returncode == 2
    assert "argument -X: expected KEY=VALUE" in proc.stderr
    assert "hunter2" not in proc.stderr and "Traceback" not in proc.stderr


def test_x_sets_typed_settings_and_extra_properties_and_secrets_stay_masked():
    proc = cli("config", "-b", "b1:9092", "-X", "security.protocol=sasl_ssl",
               "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=u",
               "-X", "sasl.password=hunter2", "-X", "ssl.keystore.password=pw-42",
               "-X", "linger.ms=5")
    assert proc.returncode == 0, proc.stderr
    kafka = json.loads(proc.stdout)["kafka"]
    assert kafka["bootstrap_servers"] == "b1:9092"
    assert (kafka["security_protocol"], kafka["sasl_mechanism"]) == ("SASL_SSL", "PLAIN")
    assert kafka["sasl_password"] == "**********"
    assert kafka["extra"] == {"ssl.keystore.password": "**********", "linger.ms": "5"}
    assert "hunter2" not in proc.stdout + proc.stderr and "pw-42" not in proc.stdout


def test_x_cannot_weaken_exactly_once():
    proc = cli("config", "-X", "isolation.level=read_uncommitted")
    assert proc.returncode == 2
    assert "'isolation.level' cannot be overridden" in proc.stderr


def test_a_property_librdkafka_refuses_is_a_usage_error_with_its_secret_masked():
    proc = cli("topics", "create", "-X", "security.protocol=hunter2")  # checked by settings
    assert proc.returncode == 2 and "security_protocol" in proc.stderr
    proc = cli("broker", "check", "-b", "127.0.0.1:1", "-X", "nonsense.property=1")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ('streamforest broker check: invalid Kafka client '
                                   'configuration (-X or STREAMFOREST_KAFKA__*): No such '
                                   'configuration property: "nonsense.property"')
    proc = cli("broker", "check", "-b", "127.0.0.1:1", "-X", "sasl.password=hunter2",
               "-X", "security.protocol=hunter2")  # librdkafka quotes the value it refuses
    assert proc.returncode == 2
    assert "hunter2" not in proc.stderr and '"**********"' in proc.stderr


@pytest.mark.parametrize("args, message", [
    (("produce", "dataset", "nosuch"),
     "streamforest produce dataset: unknown dataset 'nosuch'; choose one of electricity"),
    (("produce", "dataset", "scm20d", "--data-dir", "/nonexistent"),
     "streamforest produce dataset: dataset file scm20d.arff not found in /nonexistent"),
    (("produce", "hyperplane", "--label-delay", "3", "--batch", "10"),
     "streamforest produce hyperplane: --label-delay sends one Instance per record"),
    (("tail", "drift", "--max", "abc"),
     "streamforest tail: error: argument --max: 'abc' is not a whole number of 1 or more"),
    (("schemas", "predictions"),
     "streamforest schemas: no contract matches 'predictions'; contracts: instance, label-event"),
])
def test_usage_errors_are_one_message_and_exit_2(args, message):
    proc = cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [("learners", "--json"), ("config",), ("schemas",)], ids=" ".join)
def test_a_closed_stdout_ends_a_command_quietly(args):
    # the reader is gone before the command writes: every write meets a closed pipe
    read, write = os.pipe()
    os.close(read)
    try:
        proc = cli(*args, stdout=write)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, "")


def test_help_is_plain_text_without_test_options():
    run = cli("run", "--help").stdout
    assert "--test-fault" not in run
    assert "Run one member of the worker group" in run
    assert "List the learner families" in cli("learners", "--help").stdout
    assert "Compile every numba kernel" in cli("warmup", "--help").stdout
    evaluate = cli("evaluate", "--help").stdout
    assert "Replay a bounded range of a topic" in evaluate
    for markup in ("``", ":func:", ":mod:", ":class:"):
        assert markup not in evaluate


def test_learners_say_what_each_parameter_means():
    lines = cli("learners").stdout.splitlines()
    arf = lines.index(next(x for x in lines if x.startswith("adaptive_random_forest")))
    assert lines[arf + 2] == "    parameters (set them in learners.params):"
    assert lines[arf + 3] == "      n_models=10: Number of trees (ARF-10)."
    rows = {r["name"]: r for r in json.loads(cli("learners", "--json").stdout)}
    assert rows["adwin"]["descriptions"]["delta"].startswith("Significance of the cut test")
    assert all(not set(r["descriptions"]) - set(r["parameters"]) for r in rows.values())
