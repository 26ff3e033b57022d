"""``kafka.extra`` serves every Kafka client of a worker; each client takes the properties of
its own role only (:mod:`worker.kafka_io`), so that librdkafka starts none of them with a
CONFWARN line about a property of the other role. Checked on real librdkafka clients (they
are built and polled; no broker is needed for the configuration's warnings)."""

from __future__ import annotations

import json
import logging

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from worker import kafka_io
from worker.kafka_io import admin_config, consumer_config, producer_config
from worker.settings import load_settings

# a value librdkafka takes for each property (a number of milliseconds, bytes or messages
# for the others)
VALUES = {"transactional.id": "t", "enable.idempotence": "true", "enable.gapless.guarantee": "false",
          "compression.codec": "zstd", "compression.type": "zstd", "compression.level": "3",
          "partitioner": "murmur2", "delivery.report.only.error": "false", "acks": "all",
          "request.required.acks": "all", "group.id": "g", "group.instance.id": "i",
          "group.protocol": "classic", "group.protocol.type": "consumer",
          "group.remote.assignor": "uniform", "partition.assignment.strategy": "range",
          "isolation.level": "read_committed", "auto.offset.reset": "earliest",
          "enable.auto.commit": "false", "enable.auto.offset.store": "false",
          "enable.partition.eof": "true", "check.crcs": "false", "offset.store.method": "broker",
          "produce.offset.report": "false"}


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _role_warnings(make, conf: dict, logger: logging.Logger) -> list[str]:
    """The CONFWARN lines about the other role's properties of a client built from ``conf``."""
    lines = Lines()
    logger.addHandler(lines)
    try:
        client = make({**conf, "logger": logger})
        client.poll(0.2)
        if isinstance(client, Consumer):
            client.close()
    finally:
        logger.removeHandler(lines)
    return [m for m in lines.lines if "CONFWARN" in m and "property and will be ignored" in m]


@pytest.mark.parametrize("key, make", [
    *((k, Consumer) for k in sorted(kafka_io._PRODUCER_ONLY)),
    *((k, Producer) for k in sorted(kafka_io._CONSUMER_ONLY)),
])
def test_librdkafka_names_each_listed_property_one_of_the_other_role(key, make):
    """Each property the lists hold is one librdkafka ignores, with a warning, in a client of
    the other role: the lists leave out nothing a client uses."""
    conf = {"bootstrap.servers": "127.0.0.1:1", key: VALUES.get(key, "1000")}
    if make is Consumer and key != "group.id":
        conf["group.id"] = "g"
    logger = logging.getLogger(f"test.roles.{key}")
    logger.propagate = False
    assert _role_warnings(make, conf, logger), key


def test_a_worker_client_takes_its_own_role_of_kafka_extra_and_warns_of_none():
    extra = {"linger.ms": "7", "compression.type": "zstd", "acks": "all",
             "message.timeout.ms": "10000", "fetch.min.bytes": "2", "fetch.max.bytes": "60000000",
             "queued.min.messages": "5000", "heartbeat.interval.ms": "2000",
             "max.poll.interval.ms": "400000", "socket.keepalive.enable": "true"}
    s = load_settings({"STREAMFOREST_KAFKA__EXTRA": json.dumps(extra)})
    consumer, reader = consumer_config(s), consumer_config(s, group=False)
    producer, admin = producer_config(s, "t"), admin_config(s)
    for conf in (consumer, reader):
        assert conf["fetch.min.bytes"] == "2" and "linger.ms" not in conf
        assert "compression.type" not in conf and conf["socket.keepalive.enable"] == "true"
    assert producer["linger.ms"] == "7" and producer["compression.type"] == "zstd"
    assert "fetch.min.bytes" not in producer and "heartbeat.interval.ms" not in producer
    assert "fetch.min.bytes" not in admin and admin["socket.keepalive.enable"] == "true"
    logger = logging.getLogger("test.roles.worker")
    logger.propagate = False
    for make, conf in ((Consumer, consumer), (Consumer, reader), (Producer, producer),
                       (AdminClient, admin)):
        conf = {k: v for k, v in conf.items() if k != "logger"}
        assert _role_warnings(make, conf, logger) == [], make.__name__


@pytest.mark.parametrize("name, alias", sorted(kafka_io._ALIASES.items()))
def test_each_alias_is_librdkafkas_other_name_of_the_property(name, alias):
    """librdkafka reports a property by one name whichever name set it: the two are one."""
    make = Consumer if name in kafka_io._PRODUCER_ONLY else Producer
    logger = logging.getLogger(f"test.roles.alias.{name}")
    logger.propagate = False
    said = []
    for key in (name, alias):
        conf = {"bootstrap.servers": "127.0.0.1:1", key: VALUES.get(key, "1000")}
        if make is Consumer:
            conf["group.id"] = "g"
        [line] = [m for m in _role_warnings(make, conf, logger) if "property" in m]
        said.append(line.split("Configuration property ")[1].split()[0])
    assert said[0] == said[1] and said[0] in (name, alias)


def test_a_kafka_extra_setting_under_an_alias_wins_over_the_workers_default():
    extra = {"queue.buffering.max.ms": "5", "compression.codec": "zstd",
             "max.partition.fetch.bytes": "2000000"}
    s = load_settings({"STREAMFOREST_KAFKA__EXTRA": json.dumps(extra)})
    producer, consumer = producer_config(s, "t"), consumer_config(s)
    assert producer["queue.buffering.max.ms"] == "5" and "linger.ms" not in producer
    assert producer["compression.codec"] == "zstd" and "compression.type" not in producer
    assert consumer["max.partition.fetch.bytes"] == "2000000"
    assert "fetch.message.max.bytes" not in consumer
