"""The TOML configuration file (``--config FILE`` or ``STREAMFOREST_CONFIG``): its sections, its place
under the environment and ``-b``/``-X``, its errors (exit 2 through ``python -m worker``, naming the file
and the key), its secrets masked, and ``evaluate --configs`` reading the same file."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker.cli import run_command
from worker.settings import MASK, ConfigError, load_settings, settings_or_exit, stream_profiles
from worker.tools.evaluate import configs as evaluate_configs

REPO = Path(__file__).resolve().parents[2]

FILE = """
[kafka]
bootstrap_servers = "file:9092"
group_id = "file-group"
security_protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-512"
sasl_username = "alice"
sasl_password = "file-secret-42"
extra = { "linger.ms" = 5, "ssl.keystore.password" = "keystore-pw-7" }

[topics]
instances = "file.instances"
partitions = 8

[learners]
predictor = ["online_random_forest"]
rankers = ["online_random_forest"]
batch_size = 50
params = { online_random_forest = { n_trees = 20 } }

[[profiles]]
match = "reg-*"
name = "regression streams"
task = "regression"
predictor = "isoup_symrf"
rankers = "isoup_symrf"

[worker]
log_level = "debug"

[output]
format = "json"

[checkpoint]
every_instances = 500
"""

#: every command that loads the settings (broker check talks to Kafka without them)
SETTINGS_COMMANDS = [("run",), ("produce", "hyperplane"), ("topics", "create"), ("tail", "drift"),
                     ("evaluate",), ("config",)]


def cli(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    base["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "worker", *args], cwd=str(cwd), env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def config_file(tmp_path) -> Path:
    path = tmp_path / "streamforest.toml"
    path.write_text(FILE)
    return path


def test_every_section_is_read_from_the_file(config_file):
    s = load_settings({}, config_file=config_file)
    assert (s.kafka.bootstrap_servers, s.kafka.group_id, s.kafka.sasl_mechanism) == (
        "file:9092", "file-group", "SCRAM-SHA-512")
    assert s.kafka.sasl_password.get_secret_value() == "file-secret-42"
    assert s.kafka.as_librdkafka_dict()["linger.ms"] == "5"
    assert (s.topics.instances, s.topics.partitions, s.topics.features) == ("file.instances", 8, "sf.features")
    assert (s.learners.predictor, s.learners.batch_size) == (["online_random_forest"], 50)
    assert s.learners.params == {"online_random_forest": {"n_trees": 20}}
    assert (s.worker.log_level, s.output.format, s.checkpoint.every_instances) == ("DEBUG", "json", 500)
    (profile,) = s.profiles
    assert (profile.match, profile.task, profile.predictor) == ("reg-*", "regression", ["isoup_symrf"])
    profiles = stream_profiles(s)
    assert profiles.for_stream("reg-1").predictor == ("isoup_symrf",)
    assert profiles.for_stream("other").predictor == ("online_random_forest",)


def test_environment_overrides_the_file_and_arguments_override_both(config_file):
    env = {"STREAMFOREST_KAFKA__GROUP_ID": "env-group", "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS": "env:9092",
           "STREAMFOREST_LEARNERS__BATCH_SIZE": "70"}
    s = load_settings(env, config_file=config_file, kafka={"bootstrap_servers": "arg:9092"})
    # key by key: what neither the environment nor the arguments set stays the file's
    assert (s.kafka.bootstrap_servers, s.kafka.group_id, s.kafka.sasl_username) == ("arg:9092", "env-group", "alice")
    assert (s.learners.batch_size, s.learners.predictor) == (70, ["online_random_forest"])

    # the same through the command line: file < STREAMFOREST_* < -b/-X
    proc = cli("config", "--config", str(config_file), "-b", "arg:9092", "-X", "client.id=arg-client",
               env={"STREAMFOREST_KAFKA__GROUP_ID": "env-group", "STREAMFOREST_KAFKA__CLIENT_ID": "env-client"})
    assert proc.returncode == 0, proc.stderr
    kafka = json.loads(proc.stdout)["kafka"]
    assert (kafka["bootstrap_servers"], kafka["group_id"], kafka["client_id"], kafka["sasl_username"]) == (
        "arg:9092", "env-group", "arg-client", "alice")


def test_streamforest_config_names_the_file_and_config_wins_over_it(config_file, tmp_path):
    assert load_settings({"STREAMFOREST_CONFIG": str(config_file)}).kafka.group_id == "file-group"
    assert load_settings({"STREAMFOREST_CONFIG": ""}).kafka.group_id == "streamforest"
    other = tmp_path / "other.toml"
    other.write_text('[kafka]\ngroup_id = "other-group"\n')
    proc = cli("config", env={"STREAMFOREST_CONFIG": str(config_file)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kafka"]["group_id"] == "file-group"
    proc = cli("config", "--config", str(other), env={"STREAMFOREST_CONFIG": str(config_file)})
    assert json.loads(proc.stdout)["kafka"]["group_id"] == "other-group"


@pytest.mark.parametrize("command", SETTINGS_COMMANDS, ids=" ".join)
def test_every_command_that_loads_settings_takes_config(command, tmp_path):
    assert "--config FILE" in cli(*command, "--help").stdout
    # a missing file stops the command before it connects anywhere
    proc = cli(*command, "--config", str(tmp_path / "absent.toml"))
    assert proc.returncode == 2, proc.stderr
    assert f"{tmp_path / 'absent.toml'}: cannot read the configuration file" in proc.stderr


@pytest.mark.parametrize(("text", "expected"), [
    ('[kafka]\nbootstrp_servers = "b:9092"\n', "kafka.bootstrp_servers: unknown setting; did you mean bootstrap_servers?"),
    ('[learner]\nbatch_size = 5\n', "learner: unknown setting; did you mean learners?"),
    ('[[profiles]]\nmach = "a-*"\n', "profiles[0].mach: unknown setting; did you mean match?"),
    ('[learners]\nbatch_size = 0\n', "learners.batch_size: input should be greater than or equal to 1 (got 0)"),
    ('[[profiles]]\nmatch = "a-*"\nbatch_size = -1\n', "profiles[0].batch_size: input should be greater than"),
    ('[learners]\npredictor = "nope_forest"\n', "learners.predictor: unknown learner 'nope_forest'"),
    ('[topics]\npartitions = "many"\n', "topics.partitions: input should be a valid integer"),
    ('[kafka]\nsecurity_protocol = "SASL_SSL"\nsasl_mechanism = "PLAIN"\nsasl_username = "u"\n',
     "kafka.sasl_password: required with sasl_mechanism PLAIN"),
    ('[[configuration]]\nname = "x"\n', "configuration: unknown setting: a list of candidate configurations is "
                                        "for `streamforest evaluate --configs`"),
    ("learners = = 1\n", "is not valid TOML: Invalid value (at line 1, column 12)"),
])
def test_a_bad_file_exits_2_naming_the_file_and_the_key(tmp_path, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = cli("config", "--config", str(path))
    assert proc.returncode == 2
    assert "invalid streamforest settings" in proc.stderr
    assert f"  {path}: {expected}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not proc.stdout


def test_a_missing_or_unreadable_file_exits_2(tmp_path):
    proc = cli("run", env={"STREAMFOREST_CONFIG": "absent.toml"}, cwd=tmp_path)
    assert proc.returncode == 2
    assert "absent.toml: cannot read the configuration file: No such file or directory" in proc.stderr
    proc = cli("config", "--config", str(tmp_path))  # a directory: unreadable as a file
    assert proc.returncode == 2
    assert f"{tmp_path}: cannot read the configuration file: Is a directory" in proc.stderr
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe[kafka]")
    proc = cli("config", "--config", str(tmp_path / "binary.toml"))
    assert proc.returncode == 2 and "binary.toml: is not valid TOML" in proc.stderr
    with pytest.raises(ConfigError) as info:
        load_settings({}, config_file=tmp_path / "absent.toml")
    assert info.value.problems == [(str(tmp_path / "absent.toml"),
                                    "cannot read the configuration file: No such file or directory")]


def test_secrets_of_the_file_are_masked(config_file, tmp_path):
    proc = cli("config", "--config", str(config_file))
    assert proc.returncode == 0, proc.stderr
    kafka = json.loads(proc.stdout)["kafka"]
    assert kafka["sasl_password"] == MASK and kafka["extra"]["ssl.keystore.password"] == MASK
    assert "file-secret-42" not in proc.stdout and "keystore-pw-7" not in proc.stdout

    # a refused secret is not repeated
    bad = tmp_path / "bad.toml"
    bad.write_text(FILE.replace('sasl_mechanism = "SCRAM-SHA-512"', 'sasl_mechanism = "SCRAM-SHA-512"\n'
                                'ssl_key_password = ["file-secret-43"]'))
    proc = cli("config", "--config", str(bad))
    assert proc.returncode == 2 and f"{bad}: kafka.ssl_key_password" in proc.stderr
    assert "file-secret-43" not in proc.stderr

    # a failure whose text quotes a secret of the file: masked like one of the environment
    def fails(args):
        settings_or_exit(args)
        raise RuntimeError("the broker said: bad password file-secret-42 for alice")

    args = argparse.Namespace(config=str(config_file), kafka_properties=[], bootstrap_servers=None,
                              func=fails, command="run", command_name="streamforest run")
    err = tmp_path / "stderr"
    with open(err, "w") as f:
        saved, sys.stderr = sys.stderr, f
        try:
            assert run_command(args) == 1
        finally:
            sys.stderr = saved
    assert err.read_text() == f"streamforest run: the broker said: bad password {MASK} for alice\n"


# ------------------------------------------------------------------------------ evaluate --configs


def _same(a, b) -> bool:
    """Two pipeline configurations equal but for their names."""
    return dataclasses.replace(a, profile="") == dataclasses.replace(b, profile="")


def test_evaluate_reads_the_worker_configuration_file_as_one_candidate(config_file):
    running = load_settings({})
    ((name, profiles),) = evaluate_configs.load(config_file, running)
    assert name == "streamforest.toml"
    # exactly what `streamforest run --config FILE` uses, per-stream profiles included
    expected = stream_profiles(load_settings(config_file=config_file))
    assert [p for p, _ in profiles.rules] == ["reg-*"]
    assert all(_same(a, b) for a, b in zip(profiles.configs(), expected.configs(), strict=True))
    assert profiles.for_stream("reg-7").task == "regression"
    assert profiles.for_stream("s").params["online_random_forest"]["n_trees"] == 20


def test_a_configuration_entry_is_the_file_with_its_fields_under_learners(tmp_path):
    fields = ('predictor = "online_random_forest"\nrankers = ["online_random_forest"]\nbatch_size = 25\n'
              'params = { online_random_forest = { n_trees = 12 } }\n')
    entries = tmp_path / "candidates.toml"
    entries.write_text('[[configuration]]\nname = "default"\n\n[[configuration]]\nname = "orf"\n' + fields)
    deployable = tmp_path / "orf.toml"
    deployable.write_text("[learners]\n" + fields)
    running = load_settings({})
    (_, default), (_, orf) = evaluate_configs.load(entries, running)
    ((name, from_file),) = evaluate_configs.load(deployable, running)
    assert name == "orf.toml" and _same(orf.default, from_file.default)
    assert not _same(default.default, from_file.default)
    # several files: each is a candidate (or several), names unique
    loaded = evaluate_configs.load_all([entries, deployable], running)
    assert [n for n, _ in loaded] == ["default", "orf", "orf.toml"]
    with pytest.raises(evaluate_configs.ConfigFileError, match="also in"):
        evaluate_configs.load_all([deployable, deployable], running)


def test_evaluate_refuses_a_bad_configuration_file_with_exit_2(tmp_path):
    bad = tmp_path / "cand.toml"
    bad.write_text('[learners]\nbatch_size = 0\n')
    proc = cli("evaluate", "--configs", str(bad), "-b", "127.0.0.1:1", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert f"{bad}: learners.batch_size: input should be greater than or equal to 1" in proc.stderr
    assert "Traceback" not in proc.stderr
