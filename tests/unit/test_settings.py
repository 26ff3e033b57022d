"""Worker settings: defaults, environment nesting, refusals, secrets, librdkafka properties."""

from __future__ import annotations

import argparse
import json
import os
import threading

import pytest
from confluent_kafka import Producer

from worker import settings as settings_module
from worker.settings import MASK, ConfigError, Settings, add_parser, load_settings

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
    assert (learners.task, learners.predictor, learners.importance, learners.drift_detector) == (
        "classification", "forgetful_forest", True, "adwin",
    )
    assert (learners.batch_size, learners.n_trees, learners.orf_trees) == (100, 20, 10)
    assert (learners.ranking_every, learners.top_k, learners.max_streams, learners.seed) == (1000, 5, 1000, 1)
    assert learners.params == {}
    c = s.checkpoint
    assert (c.every_instances, c.interval_s, c.max_message_bytes, c.topic_max_message_bytes) == (
        10_000, 30.0, 1_000_000, 8_388_608,
    )
    w = s.worker
    assert (w.consume_batch, w.consume_timeout_s, w.max_poll_interval_ms) == (2000, 0.2, 300_000)
    assert (w.queued_max_messages_kbytes, w.metrics_port, w.max_message_bytes) == (65536, 9464, 1_048_576)
    assert (w.log_level, w.exactly_once, w.transactional_id, w.member_name) == ("INFO", True, None, None)


def test_derived_member_and_transactional_id():
    s = load_settings({})
    assert s.member_name.endswith(f"-{os.getpid()}")
    assert s.transactional_id == f"streamforest-{s.member_name}"
    s = load_settings({"STREAMFOREST_WORKER__MEMBER_NAME": "w1", "STREAMFOREST_KAFKA__GROUP_ID": "g"})
    assert (s.member_name, s.transactional_id) == ("w1", "g-w1")
    s = load_settings({"STREAMFOREST_WORKER__TRANSACTIONAL_ID": "tx-7"})
    assert s.transactional_id == "tx-7"


def test_environment_nesting_and_case():
    s = load_settings(
        {
            "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS": "b1:9092,b2:9092",
            "streamforest_learners__n_trees": "7",  # names are case-insensitive
            "STREAMFOREST_LEARNERS__IMPORTANCE": "false",
            "STREAMFOREST_LEARNERS__PARAMS": '{"online_random_forest": {"n_tests": 5}}',
            "STREAMFOREST_WORKER__LOG_LEVEL": "debug",
            "STREAMFOREST_TOPICS": '{"partitions": 8, "instances": "in"}',  # a whole section
            "STREAMFOREST_KAFKA__EXTRA": '{"fetch.wait.max.ms": 50, "enable.partition.eof": true}',
            "STREAMFOREST_KAFKA__EXTRA__LINGER.MS": "5",  # one key per variable
            "PATH": "/usr/bin",  # other variables are not ours
        }
    )
    assert s.kafka.bootstrap_servers == "b1:9092,b2:9092"
    assert (s.learners.n_trees, s.learners.importance) == (7, False)
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
                "STREAMFOREST_LEARNERS__PREDICTOR": "forest",
                "STREAMFOREST_LEARNERS__BATCH_SIZE": "0",
                "STREAMFOREST_WORKER__CONSUME_TIMEOUT_S": "-1",
                "STREAMFOREST_TOPICS__DRIFT": "bad topic!",
            }
        )
    )
    assert "valid integer" in found["STREAMFOREST_TOPICS__PARTITIONS"]
    assert "'zero'" in found["STREAMFOREST_TOPICS__PARTITIONS"]
    assert "less than or equal to 65535" in found["STREAMFOREST_WORKER__METRICS_PORT"]
    assert "'forgetful_forest', 'forgetful_tree' or 'online_random_forest'" in found[
        "STREAMFOREST_LEARNERS__PREDICTOR"
    ]
    assert "greater than or equal to 1" in found["STREAMFOREST_LEARNERS__BATCH_SIZE"]
    assert "greater than 0" in found["STREAMFOREST_WORKER__CONSUME_TIMEOUT_S"]
    assert "letters, digits" in found["STREAMFOREST_TOPICS__DRIFT"]
    assert len(found) == 6


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
    # a bad secret value is not repeated in the error
    with pytest.raises(ConfigError) as info:
        load_settings({**SASL}, kafka={"sasl_password": 12345})
    assert "12345" not in str(info.value)


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
    code = args.func(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_config_command_prints_masked_json(monkeypatch, capsys):
    code, out, err = run_config(monkeypatch, capsys, {**SASL, "STREAMFOREST_LEARNERS__N_TREES": "3"})
    assert code == 0 and err == ""
    shown = json.loads(out)
    assert shown["learners"]["n_trees"] == 3
    assert shown["kafka"]["sasl_password"] == "**********"
    assert "hunter2" not in out


def test_config_command_fails_readably(monkeypatch, capsys):
    code, out, err = run_config(monkeypatch, capsys, {"STREAMFOREST_KAFKA__BOOTSTRP": "b:9092"})
    assert code == 2 and out == ""
    assert err.strip() == (
        "invalid streamforest settings (1 problem):\n"
        "  STREAMFOREST_KAFKA__BOOTSTRP: unknown setting; did you mean STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS?"
    )


def test_docstring_examples():
    import doctest

    result = doctest.testmod(settings_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
