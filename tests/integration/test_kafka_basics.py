"""The broker features the worker relies on, checked on a real broker: topic creation with configs, and
transactions that carry consumer offsets (KIP-447 style ``send_offsets_to_transaction`` with a group member's
metadata), committed or aborted, as seen by ``read_committed`` and ``read_uncommitted`` consumers."""

from __future__ import annotations

import shutil
import time
import uuid

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource
from worker_support import read_partition_to_end

from worker.tools.dev.broker import BrokerError, LocalBroker, free_port, pid_alive
from worker.tools.dev.broker import main as broker_cli

pytestmark = pytest.mark.kafka

TIMEOUT_S = 30.0


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(TIMEOUT_S) == 0


def _transactional_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"sf-test-{uuid.uuid4().hex}"})
    producer.init_transactions(TIMEOUT_S)
    return producer


def _values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    return [m.value() for m in read_partition_to_end(bootstrap, topic, isolation, TIMEOUT_S)]


def _committed_offset(admin, group: str, topic: str) -> int:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=TIMEOUT_S)
    (partition,) = result.topic_partitions
    assert partition.error is None, partition.error
    return partition.offset


def _consume_as_member(bootstrap: str, topic: str, group: str, n: int) -> Consumer:
    """A subscribed group member that has consumed the first ``n`` records of ``topic`` (not committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < n and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=n - got, timeout=0.5):
            assert not msg.error(), msg.error()
            got += 1
    assert got == n, f"consumed {got} of {n} input records"
    return consumer


def test_create_topics_with_partitions_and_config(make_topic, admin) -> None:
    plain = make_topic()
    compacted = make_topic(partitions=3, config={"cleanup.policy": "compact", "max.message.bytes": "8388608"})
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    assert len(topics[plain].partitions) == 1
    assert len(topics[compacted].partitions) == 3
    resource = ConfigResource(ConfigResource.Type.TOPIC, compacted)
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["max.message.bytes"].value == "8388608"


def test_committed_transaction_carries_outputs_and_offsets(
    kafka_bootstrap, make_topic, unique_group, admin
) -> None:
    source, sink = make_topic(), make_topic()
    inputs = [f"in-{i}".encode() for i in range(10)]
    _produce(kafka_bootstrap, source, inputs)
    group = unique_group()
    consumer = _consume_as_member(kafka_bootstrap, source, group, len(inputs))
    producer = _transactional_producer(kafka_bootstrap)
    try:
        producer.begin_transaction()
        for value in inputs:
            producer.produce(sink, value=value.replace(b"in-", b"out-"))
        producer.flush(TIMEOUT_S)
        # an open transaction is invisible to read_committed consumers, visible to read_uncommitted ones
        assert _values(kafka_bootstrap, sink, "read_committed") == []
        assert len(_values(kafka_bootstrap, sink, "read_uncommitted")) == len(inputs)
        positions = consumer.position(consumer.assignment())
        assert [(tp.topic, tp.partition, tp.offset) for tp in positions] == [(source, 0, len(inputs))]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
        assert _committed_offset(admin, group, source) == OFFSET_INVALID  # not before the commit
        producer.commit_transaction(TIMEOUT_S)
    finally:
        consumer.close()
    assert _values(kafka_bootstrap, sink, "read_committed") == [f"out-{i}".encode() for i in range(10)]
    assert _committed_offset(admin, group, source) == len(inputs)


def test_aborted_transaction_is_invisible_to_read_committed(
    kafka_bootstrap, make_topic, unique_group, admin
) -> None:
    source, sink = make_topic(), make_topic()
    _produce(kafka_bootstrap, source, [b"a", b"b", b"c"])
    group = unique_group()
    consumer = _consume_as_member(kafka_bootstrap, source, group, 3)
    producer = _transactional_producer(kafka_bootstrap)
    aborted = [f"aborted-{i}".encode() for i in range(5)]
    committed = [f"committed-{i}".encode() for i in range(3)]
    try:
        producer.begin_transaction()
        for value in aborted:
            producer.produce(sink, value=value)
        producer.flush(TIMEOUT_S)  # the records reach the log: only the abort marker hides them
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), TIMEOUT_S
        )
        producer.abort_transaction(TIMEOUT_S)
        assert _committed_offset(admin, group, source) == OFFSET_INVALID  # aborted offsets are not committed
        producer.begin_transaction()
        for value in committed:
            producer.produce(sink, value=value)
        producer.commit_transaction(TIMEOUT_S)
    finally:
        consumer.close()
    assert _values(kafka_bootstrap, sink, "read_committed") == committed
    # the same log read without isolation does contain the aborted records: the check above is not vacuous
    assert _values(kafka_bootstrap, sink, "read_uncommitted") == aborted + committed


# ---------------------------------------------------------------------------------------------------------
# the local broker's life cycle through its command line (a second broker, separate from the session's)


@pytest.mark.skipif(shutil.which("java") is None, reason="the local broker needs java")
def test_local_broker_cli_start_twice_status_stop(tmp_path, capsys) -> None:
    port = free_port()
    args = ["--port", str(port), "--controller-port", str(free_port(exclude=[port])), "--data-dir", str(tmp_path)]
    broker = LocalBroker(port=port, data_dir=tmp_path)
    assert broker_cli(["start", *args]) == 0
    pid = broker.pid()
    assert pid is not None and capsys.readouterr().out.strip() == f"127.0.0.1:{port}"
    try:
        assert broker_cli(["start", *args]) == 0  # harmless: the running broker is reused
        assert broker.pid() == pid
        assert broker_cli(["status", *args]) == 0
        assert "answers: True" in capsys.readouterr().out
        assert broker_cli(["check", *args]) == 0
        assert "ok" in capsys.readouterr().out
    finally:
        assert broker_cli(["stop", *args]) == 0
    assert capsys.readouterr().out.strip() == "stopped"
    assert not pid_alive(pid)
    assert not broker.pid_file.exists() and broker.pid() is None
    assert broker_cli(["status", *args]) == 3  # nothing answers any more
    assert broker_cli(["stop", *args]) == 0
    assert capsys.readouterr().out.strip().endswith("not running")


def test_missing_java_or_maven_is_reported_clearly(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: neither java nor mvn
    port = free_port()
    broker = LocalBroker(
        port=port, controller_port=free_port(exclude=[port]), data_dir=tmp_path / "d", home=tmp_path / "h"
    )
    with pytest.raises(BrokerError, match=r"`java` was not found on PATH: .*Java 17"):
        broker.start(timeout=5)
    with pytest.raises(BrokerError, match=r"`mvn` was not found on PATH: .*Maven"):
        broker.fetch()
