"""Worker settings: defaults, environment nesting, refusals, secrets, librdkafka properties."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading

import pytest
from confluent_kafka import Producer

from worker import settings as settings_module
from worker.settings import MASK, ConfigError, Settings, add_parser, load_settings, stream_profiles

SASL = {
    "STREAMFOREST_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "STREAMFOREST_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
    "STREAMFOREST_KAFKA__SASL_USERNAME": "alice",
    "STREAMFOREST_KAFKA__SASL_PASSWORD": "hunter2",
}


def problems(environ=None, **overrides) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        load_settings({} if environ is None else environ, **overrides)
    assert isinstance(info.value, ValueError)
    return info.value.problems


def test_defaults():
    s = load_settings({})
    assert s.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert s.kafka.group_id == "streamforest"
    assert s.kafka.security_protocol == "PLAINTEXT" and s.kafka.extra == {}
    assert (s.topics.instances, s.topics.features, s.topics.predictions) == (
        "sf.instances", "sf.features", "sf.predictions",
    )
    assert (s.topics.drift, s.topics.rankings, s.topics.deadletter, s.topics.checkpoints) == (
        "sf.drift", "sf.rankings", "sf.deadletter", "sf.checkpoints",
    )
    assert (s.topics.partitions, s.topics.replication_factor) == (4, 1)
    learners = s.learners
    assert (learners.task, learners.predictor, learners.rankers, learners.detectors) == (
        "auto", ["adaptive_random_forest", "isoup_symrf"],
        ["block_forest", "block_forest_regression", "isoup_symrf"],
        ["adwin"],
    )
    assert (learners.selector, learners.batch_size, s.profiles) == (None, 100, [])
    assert (learners.ranking_every, learners.top_k, learners.seed) == (1000, 5, 1)
    assert s.worker.state_budget_mb == 1024.0
    assert learners.params == {}
    c = s.checkpoint
    assert (c.every_instances, c.interval_s, c.max_message_bytes, c.topic_max_message_bytes) == (
        10_000, 30.0, 1_000_000, 8_388_608,
    )
    w = s.worker
    assert (w.max_poll_records, w.consume_timeout_s, w.max_poll_interval_ms) == (2000, 0.2, 300_000)
    assert (w.queued_max_messages_kbytes, w.metrics_port, w.max_message_bytes) == (65536, 9464, 1_048_576)
    assert (w.log_level, w.exactly_once, w.transactional_id, w.member_name) == ("INFO", True, None, None)


def test_derived_member_and_transactional_id():
    s = load_settings({})
    host, pid, tag = s.member_name.rsplit("-", 2)
    assert pid == str(os.getpid()) and len(tag) == 8
    assert s.transactional_id == f"streamforest-{s.member_name}"
    # containers on the host network share the hostname and run as PID 1: the random tag of
    # the process keeps two members from sharing a transactional id and fencing each other
    other = subprocess.run([sys.executable, "-c", "from worker.settings import load_settings;"
                            "print(load_settings({}).member_name)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert other.rsplit("-", 1)[1] != tag
    s = load_settings({"STREAMFOREST_WORKER__MEMBER_NAME": "w1", "STREAMFOREST_KAFKA__GROUP_ID": "g"})
    assert (s.member_name, s.transactional_id) == ("w1", "g-w1")
    s = load_settings({"STREAMFOREST_WORKER__TRANSACTIONAL_ID": "tx-7"})
    assert s.transactional_id == "tx-7"


def test_environment_nesting_and_case():
    s = load_settings(
        {
            "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS": "b1:9092,b2:9092",
            "streamforest_learners__batch_size": "7",  # names are case-insensitive
            "STREAMFOREST_LEARNERS__RANKERS": "none",
            "STREAMFOREST_LEARNERS__DETECTORS": "adwin, ddm",
            "STREAMFOREST_LEARNERS__PARAMS": '{"online_random_forest": {"n_tests": 5}}',
            "STREAMFOREST_WORKER__LOG_LEVEL": "debug",
            "STREAMFOREST_TOPICS": '{"partitions": 8, "instances": "in"}',  # a whole section
            "STREAMFOREST_KAFKA__EXTRA": '{"fetch.wait.max.ms": 50, "enable.partition.eof": true}',
            "STREAMFOREST_KAFKA__EXTRA__LINGER.MS": "5",  # one key per variable
            "PATH": "/usr/bin",  # other variables are not ours
        }
    )
    assert s.kafka.bootstrap_servers == "b1:9092,b2:9092"
    assert (s.learners.batch_size, s.learners.rankers, s.learners.detectors) == (
        7, [], ["adwin", "ddm"])
    assert s.learners.params == {"online_random_forest": {"n_tests": 5}}
    assert s.worker.log_level == "DEBUG"
    assert (s.topics.partitions, s.topics.instances, s.topics.predictions) == (8, "in", "sf.predictions")
    assert s.kafka.extra == {"fetch.wait.max.ms": "50", "enable.partition.eof": "true", "linger.ms": "5"}


def test_overrides_take_precedence():
    s = load_settings({"STREAMFOREST_KAFKA__GROUP_ID": "from-env"}, kafka={"group_id": "from-arg"})
    assert s.kafka.group_id == "from-arg"


def test_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("STREAMFOREST_TOPICS__PARTITIONS", "3")
    assert load_settings().topics.partitions == 3
    monkeypatch.setenv("STREAMFOREST_KAFKA__BOOTSTRP", "b:9092")
    with pytest.raises(ConfigError, match="STREAMFOREST_KAFKA__BOOTSTRP"):
        load_settings()


def test_a_given_mapping_replaces_os_environ(monkeypatch):
    monkeypatch.setenv("STREAMFOREST_TOPICS__PARTITIONS", "3")
    assert load_settings({}).topics.partitions == 4
    # and loads in other threads are not affected by each other's mapping
    results = {}

    def load(n):
        results[n] = load_settings({"STREAMFOREST_TOPICS__PARTITIONS": str(n)}).topics.partitions

    threads = [threading.Thread(target=load, args=(n,)) for n in (5, 6, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {5: 5, 6: 6, 7: 7}


def test_unknown_key_is_named():
    found = problems({"STREAMFOREST_KAFKA__BOOTSTRP": "b:9092"})
    assert found == [
        ("STREAMFOREST_KAFKA__BOOTSTRP", "unknown setting; did you mean STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS?")
    ]
    with pytest.raises(ConfigError) as info:
        load_settings({"STREAMFOREST_KAFKA__BOOTSTRP": "b:9092"})
    assert "STREAMFOREST_KAFKA__BOOTSTRP" in str(info.value)


def test_a_renamed_setting_names_its_new_name(tmp_path):
    # the poll's record count was ``consume_batch``: an old configuration fails at start
    # with the name to use, in the environment and in a configuration file alike
    assert problems({"STREAMFOREST_WORKER__CONSUME_BATCH": "100"}) == [
        ("STREAMFOREST_WORKER__CONSUME_BATCH", "renamed: set STREAMFOREST_WORKER__MAX_POLL_RECORDS")]
    path = tmp_path / "sf.toml"
    path.write_text("[worker]\nconsume_batch = 100\n")
    with pytest.raises(ConfigError) as info:
        load_settings({}, config_file=path)
    assert "renamed: set max_poll_records" in str(info.value)
    assert load_settings({"STREAMFOREST_WORKER__MAX_POLL_RECORDS": "100"}).worker.max_poll_records == 100


def test_pydantic_settings_alone_ignores_unknown_sections(monkeypatch):
    # why load_settings scans the environment itself: a misspelt section is silently dropped
    monkeypatch.setenv("STREAMFOREST_KAFK__BOOTSTRAP_SERVERS", "b:9092")
    assert Settings().kafka.bootstrap_servers == "127.0.0.1:9092"
    found = problems(dict(os.environ))
    assert found == [
        ("STREAMFOREST_KAFK__BOOTSTRAP_SERVERS",
         "unknown setting; did you mean STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS?")
    ]


@pytest.mark.parametrize(
    "name",
    [
        "STREAMFOREST_KAFKAA",
        "STREAMFOREST_KAFKA_BOOTSTRAP_SERVERS",  # single underscore
        "STREAMFOREST_WORKER__",
        "STREAMFOREST_LEARNERS__SEED__X",  # not a map
        "STREAMFOREST_LEARNERS__PARAMS__ORF__N_TESTS",  # params only as JSON (typed values)
    ],
)
def test_other_unknown_keys(name):
    [(key, text)] = problems({name: "1"})
    assert key == name and text


def test_other_tools_variables_are_left_alone():
    env = {
        "STREAMFOREST_HOME": "/tmp/sf",
        "STREAMFOREST_NUMBA_CACHE": "0",
        "STREAMFOREST_TEST_BOOTSTRAP": "127.0.0.1:9092",
        "STREAMFOREST_BROKER_TAG": "x",
        "STREAMFOREST_LOCAL_KAFKA_POM": "/tmp/pom.xml",
    }
    assert load_settings(env).topics.partitions == 4


def test_bad_values_name_the_variable_and_the_fix():
    found = dict(
        problems(
            {
                "STREAMFOREST_TOPICS__PARTITIONS": "zero",
                "STREAMFOREST_WORKER__METRICS_PORT": "70000",
                "STREAMFOREST_LEARNERS__BATCH_SIZE": "0",
                "STREAMFOREST_WORKER__CONSUME_TIMEOUT_S": "-1",
                "STREAMFOREST_TOPICS__DRIFT": "bad topic!",
            }
        )
    )
    assert "valid integer" in found["STREAMFOREST_TOPICS__PARTITIONS"]
    assert "'zero'" in found["STREAMFOREST_TOPICS__PARTITIONS"]
    assert "less than or equal to 65535" in found["STREAMFOREST_WORKER__METRICS_PORT"]
    assert "greater than or equal to 1" in found["STREAMFOREST_LEARNERS__BATCH_SIZE"]
    assert "greater than 0" in found["STREAMFOREST_WORKER__CONSUME_TIMEOUT_S"]
    assert "letters, digits" in found["STREAMFOREST_TOPICS__DRIFT"]
    assert len(found) == 5
    # learner choices are checked against the registry beside the other sections' problems
    found = dict(problems({"STREAMFOREST_TOPICS__PARTITIONS": "zero",
                           "STREAMFOREST_LEARNERS__PREDICTOR": "forest"}))
    from models import registry

    predictors = ", ".join(registry.names(role=registry.PREDICTOR))
    assert f"unknown learner 'forest'; the predictors are: {predictors}" in found[
        "STREAMFOREST_LEARNERS__PREDICTOR"
    ]
    assert "valid integer" in found["STREAMFOREST_TOPICS__PARTITIONS"]


def test_cross_field_rules():
    [(key, text)] = problems({"STREAMFOREST_KAFKA__SECURITY_PROTOCOL": "SASL_SSL"})
    assert key == "STREAMFOREST_KAFKA__SASL_MECHANISM" and "required with security_protocol SASL_SSL" in text
    env = {**SASL}
    del env["STREAMFOREST_KAFKA__SASL_PASSWORD"]
    [(key, text)] = problems(env)
    assert key == "STREAMFOREST_KAFKA__SASL_PASSWORD"
    [(key, text)] = problems({"STREAMFOREST_TOPICS__DRIFT": "sf.predictions"})
    assert key == "STREAMFOREST_TOPICS__DRIFT" and "already used for predictions" in text
    [(key, text)] = problems({"STREAMFOREST_CHECKPOINT__MAX_MESSAGE_BYTES": "10000000"})
    assert key == "STREAMFOREST_CHECKPOINT__MAX_MESSAGE_BYTES" and "does not fit" in text
    [(key, text)] = problems({"STREAMFOREST_KAFKA__EXTRA": '{"group.id": "g"}'})
    assert key == "STREAMFOREST_KAFKA__EXTRA" and "use kafka.group_id" in text


@pytest.mark.parametrize("key", ["isolation.level", "enable.auto.commit",
                                 "enable.auto.offset.store", "transactional.id",
                                 "enable.idempotence"])
def test_overrides_that_weaken_exactly_once_are_refused(key):
    [(where, text)] = problems({"STREAMFOREST_KAFKA__EXTRA": json.dumps({key: "x"})})
    assert where == "STREAMFOREST_KAFKA__EXTRA" and f"'{key}' cannot be overridden" in text


def test_static_membership_needs_a_stable_member_name():
    from worker.kafka_io import consumer_config, producer_config

    [(key, text)] = problems({"STREAMFOREST_WORKER__STATIC_MEMBERSHIP": "true"})
    assert key == "STREAMFOREST_WORKER__MEMBER_NAME" and "stable member name" in text
    [(key, text)] = problems({"STREAMFOREST_KAFKA__EXTRA": '{"group.instance.id": "pod-0"}'})
    assert key == "STREAMFOREST_KAFKA__EXTRA" and "STREAMFOREST_WORKER__STATIC_MEMBERSHIP" in text
    s = load_settings({"STREAMFOREST_WORKER__STATIC_MEMBERSHIP": "true",
                       "STREAMFOREST_WORKER__MEMBER_NAME": "pod-0"})
    assert consumer_config(s)["group.instance.id"] == "pod-0"
    # the group-less reader and the producer never join as that member
    assert "group.instance.id" not in consumer_config(s, group=False)
    assert "group.instance.id" not in producer_config(s, "t")
    plain = load_settings({"STREAMFOREST_WORKER__MEMBER_NAME": "pod-0"})
    assert "group.instance.id" not in consumer_config(plain)


def test_learner_lists_take_json_or_commas():
    for value, want in (('["adwin", "ddm"]', ["adwin", "ddm"]), ("adwin,ddm", ["adwin", "ddm"]),
                        ("none", []), ("", []), ("ddm", ["ddm"])):
        assert load_settings({"STREAMFOREST_LEARNERS__DETECTORS": value}).learners.detectors == want
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__DETECTORS": '["adwin"'})
    assert key == "STREAMFOREST_LEARNERS__DETECTORS" and "JSON list" in text


def test_learners_and_parameters_are_checked_against_the_registry_at_start():
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__PARAMS":
                              '{"forgetful_forest": {"n_treez": 3}}'})
    assert key == "STREAMFOREST_LEARNERS__PARAMS (field forgetful_forest.n_treez)"
    assert "unknown parameter of forgetful_forest; did you mean n_trees?" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__PARAMS": '{"forgetful_forest": {"n_trees": "3"}}'})
    assert key.endswith("(field forgetful_forest.n_trees)") and "must be an integer" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__PARAMS": '{"forgetful_forest": {"n_trees": 0}}'})
    assert key.endswith("(field forgetful_forest.n_trees)") and "must be in [1, 1000], got 0" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__PARAMS": '{"forgetful_forest": {"t_threshold": 2}}'})
    assert "refuses these parameters: t_threshold must be in [0, 1]" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__PARAMS": '{"forest": {"n_trees": 3}}'})
    assert key.endswith("(field forest)") and "unknown learner 'forest'" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__PARAMS": '{"adwin": {"seed": 3}}'})
    assert "unknown parameter of adwin" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__PARAMS": '{"forgetful_tree": {"seed": 3}}'})
    assert "seed comes from learners.seed" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__RANKERS": "forgetful_forest"})
    assert key == "STREAMFOREST_LEARNERS__RANKERS" and "forgetful_forest cannot be a ranker" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__SELECTOR": "adwin"})
    assert key == "STREAMFOREST_LEARNERS__SELECTOR" and "adwin cannot be a selector" in text
    [(key, text)] = problems({"STREAMFOREST_LEARNERS__RANKERS": "online_random_forest",
                              "STREAMFOREST_LEARNERS__PARAMS":
                              '{"online_random_forest": {"track_importance": false}}'})
    assert "must be true when online_random_forest is a ranker" in text


def test_profiles_first_match_wins_and_inherit_the_default():
    s = load_settings({
        "STREAMFOREST_LEARNERS__PARAMS": '{"online_random_forest": {"n_trees": 5, "n_tests": 4}}',
        "STREAMFOREST_PROFILES": json.dumps([
            {"match": "sensor-*", "name": "sensors", "predictor": "forgetful_tree",
             "params": {"online_random_forest": {"n_trees": 3}}},
            {"match": "sensor-7*", "predictor": "online_random_forest"},
            {"match": "web-?", "detectors": "ddm", "batch_size": 10},
        ]),
    })
    profiles = stream_profiles(s)
    sensor = profiles.for_stream("sensor-71")
    assert sensor.profile == "sensors" and sensor.predictor == ("forgetful_tree",)
    assert sensor.params["online_random_forest"] == {"n_trees": 3, "n_tests": 4}  # merged
    assert sensor.rankers == ("block_forest", "block_forest_regression", "isoup_symrf")
    assert sensor.batch_size == 100
    web = profiles.for_stream("web-1")
    assert web.detectors == ("ddm",) and web.batch_size == 10 and web.predictor == ("adaptive_random_forest", "isoup_symrf")
    other = profiles.for_stream("web-12")
    assert other.profile == "default" and other.params["online_random_forest"]["n_trees"] == 5


def test_profile_problems_name_the_profile_and_the_field():
    found = problems({"STREAMFOREST_PROFILES": json.dumps([
        {"match": "*"},
        {"match": "a-*", "predictor": "nope"},
        {"match": ""},
        {"match": "b-*", "task": "regression", "predictor": "forgetful_forest"},
        {"match": "c-*", "params": {"forgetful_tree": {"increase_rat": 0.5}}},
    ])})
    text = "\n".join(f"{k}: {v}" for k, v in found)
    assert "STREAMFOREST_PROFILES (profile 1 'a-*', field match): never used" in text
    assert "STREAMFOREST_PROFILES (profile 1 'a-*', field predictor): unknown learner 'nope'" in text
    assert "STREAMFOREST_PROFILES (profile 2 '', field match): an empty pattern" in text
    assert ("STREAMFOREST_PROFILES (profile 3 'b-*', field predictor): the profile's task is "
            "regression but none of forgetful_forest serves it") in text
    assert "field params.forgetful_tree.increase_rat): unknown parameter" in text
    # a literal pattern longer than any stream id can be matches nothing valid
    from schemas.messages import MAX_NAME_LENGTH

    [(key, text)] = problems({"STREAMFOREST_PROFILES": json.dumps([{"match": "s" * (MAX_NAME_LENGTH + 1)}])})
    assert key == "STREAMFOREST_PROFILES (profile 0 '" + "s" * (MAX_NAME_LENGTH + 1) + "', field match)"
    assert f"matches no stream id: stream ids have at most {MAX_NAME_LENGTH} characters" in text
    [(key, text)] = problems({"STREAMFOREST_PROFILES": '[{"predictor": "forgetful_tree"}]'})
    assert key.startswith("STREAMFOREST_PROFILES") and "required" in text.lower()
    [(key, text)] = problems({"STREAMFOREST_PROFILES": '{"match": "x"}'})
    assert key == "STREAMFOREST_PROFILES"
    [(key, text)] = problems({"STREAMFOREST_PROFILES__MATCH": "x"})
    assert "unknown setting" in text


def test_bad_json_and_section_fields():
    [(key, text)] = problems({"STREAMFOREST_KAFKA__EXTRA": "{bad"})
    assert key == "STREAMFOREST_KAFKA__EXTRA" and "not valid JSON" in text
    [(key, text)] = problems({"STREAMFOREST_TOPICS": '{"partitions": 0}'})
    assert key == "STREAMFOREST_TOPICS (field partitions)" and "greater than or equal to 1" in text


def test_bad_overrides_are_named_as_arguments():
    found = problems(kafka={"bootstrap_servers": ""}, topicz={})
    assert found[0][0] == "kafka.bootstrap_servers (argument)"
    assert found[1] == ("topicz (argument)", "unknown setting")


def test_secrets_are_masked_and_never_echoed():
    s = load_settings({**SASL, "STREAMFOREST_KAFKA__EXTRA": '{"sasl.oauthbearer.client.secret": "s3"}'})
    shown = json.dumps(s.masked_dict())
    assert "hunter2" not in shown and "s3" not in shown
    assert s.masked_dict()["kafka"]["sasl_password"] == MASK
    assert s.masked_dict()["kafka"]["extra"]["sasl.oauthbearer.client.secret"] == MASK
    assert "hunter2" not in repr(s) and "hunter2" not in str(s)
    assert set(s.secret_values()) == {"hunter2", "s3"}
    # a bad secret value is not repeated in the error
    with pytest.raises(ConfigError) as info:
        load_settings({**SASL}, kafka={"sasl_password": 12345})
    assert "12345" not in str(info.value)


# (sasl.password and ssl.key.password have typed settings, SecretStr: see the test above)
SECRET_PROPERTIES = ["ssl.key.pem", "sasl.oauthbearer.config", "ssl.keystore.password",
                     "sasl.jaas.config", "sasl.oauthbearer.client.secret", "ssl.keystore.key",
                     "sasl.oauthbearer.token.endpoint.url.secret", "ssl.certificate.pem"]


@pytest.mark.parametrize("key", SECRET_PROPERTIES)
def test_every_secret_property_is_masked_in_config_repr_logs_and_errors(key, capsys):
    import io
    import logging

    from worker.logs import JsonFormatter

    sentinel = f"SENTINEL-{key}-a1b2c3\n\"quoted\""
    s = load_settings({"STREAMFOREST_KAFKA__EXTRA": json.dumps({key: sentinel})})
    assert sentinel not in json.dumps(s.masked_dict()) and sentinel not in repr(s)
    assert s.masked_dict()["kafka"]["extra"][key] == MASK
    assert s.kafka.as_librdkafka_dict()[key] == sentinel  # the client still gets it
    # a log line that quotes the secret (an error text of a client library) is redacted
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter(s.secret_values()))
    log = logging.getLogger("streamforest.secret-test")
    log.addHandler(handler)
    try:
        log.error("client failed with %s=%s", key, sentinel, extra={"fields": {"conf": sentinel}})
    finally:
        log.removeHandler(handler)
    line = buf.getvalue()
    assert "SENTINEL" not in line and line.count(MASK) == 2
    # the config command shows it masked
    code, out, err = _config_with(capsys, {"STREAMFOREST_KAFKA__EXTRA": json.dumps({key: sentinel})})
    assert code == 0 and "SENTINEL" not in out + err
    # and a value of the wrong type in a secret property is not echoed in the error
    with pytest.raises(ConfigError) as info:
        load_settings({}, kafka={"extra": {key: ["SENTINEL-list"]}})
    assert "SENTINEL" not in str(info.value)


def _config_with(capsys, env):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["config"])
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return args.func(args), *capsys.readouterr()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_librdkafka_dict():
    s = load_settings({**SASL, "STREAMFOREST_KAFKA__EXTRA": '{"fetch.wait.max.ms": "50"}'})
    assert s.kafka.as_librdkafka_dict() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "group.id": "streamforest",
        "client.id": "streamforest",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "hunter2",
        "fetch.wait.max.ms": "50",
    }
    tls = load_settings(
        {
            "STREAMFOREST_KAFKA__SECURITY_PROTOCOL": "ssl",
            "STREAMFOREST_KAFKA__SSL_CA_LOCATION": "/etc/ca.pem",
            "STREAMFOREST_KAFKA__SSL_KEY_PASSWORD": "k",
        }
    ).kafka.as_librdkafka_dict()
    assert tls["security.protocol"] == "ssl" and tls["ssl.ca.location"] == "/etc/ca.pem"
    assert tls["ssl.key.password"] == "k"


def test_librdkafka_accepts_the_properties():
    # creating a client checks every property name and value (it does not connect yet)
    conf = load_settings({**SASL, "STREAMFOREST_KAFKA__EXTRA": '{"linger.ms": 5}'}).kafka.as_librdkafka_dict()
    conf.pop("group.id")  # consumer-only
    Producer(conf)
    with pytest.raises(Exception, match="No such configuration property"):
        Producer({**conf, "lingr.ms": "5"})


def run_config(monkeypatch, capsys, env):
    for key in [k for k in os.environ if k.upper().startswith("STREAMFOREST_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["config"])
    try:
        code = args.func(args)
    except SystemExit as stop:  # the one helper every command loads its settings with
        code = stop.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_config_command_prints_masked_json(monkeypatch, capsys):
    code, out, err = run_config(monkeypatch, capsys, {**SASL, "STREAMFOREST_LEARNERS__BATCH_SIZE": "3"})
    assert code == 0 and err == ""
    shown = json.loads(out)
    assert shown["learners"]["batch_size"] == 3
    assert shown["kafka"]["sasl_password"] == "**********"
    assert "hunter2" not in out


def test_config_command_fails_readably(monkeypatch, capsys):
    code, out, err = run_config(monkeypatch, capsys, {"STREAMFOREST_KAFKA__BOOTSTRP": "b:9092"})
    assert code == 2 and out == ""
    assert err.strip() == (
        "invalid streamforest settings (1 problem):\n"
        "  STREAMFOREST_KAFKA__BOOTSTRP: unknown setting; did you mean STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS?"
    )


@pytest.mark.parametrize("command", [["run"], ["topics", "create"], ["config"],
                                     ["produce", "hyperplane", "-n", "1"]])
def test_every_command_refuses_bad_settings_on_stderr_with_code_2(command):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAMFOREST_")}
    env["STREAMFOREST_LEARNERS__PARAMS"] = '{"forgetful_forest": {"n_treez": 3}}'
    proc = subprocess.run([sys.executable, "-m", "worker", *command], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert ("STREAMFOREST_LEARNERS__PARAMS (field forgetful_forest.n_treez): unknown parameter "
            "of forgetful_forest; did you mean n_trees?") in proc.stderr
    assert "Traceback" not in proc.stderr


def test_docstring_examples():
    import doctest

    result = doctest.testmod(settings_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
