"""``streamforest topics create``: every topic the worker uses, with the right settings.

* instances, features, predictions, drift, rankings: ``topics.partitions`` partitions;
* checkpoints: as many partitions as the instances topic (checkpoint partition = input
  partition), ``cleanup.policy=compact`` (only the latest chunk of each stream and the latest
  manifest matter) and ``max.message.bytes = checkpoint.topic_max_message_bytes``;
* dead letters: the same larger ``max.message.bytes``, so an oversized instance can be kept
  whole next to its reason;
* latest state (unless ``topics.latest`` is empty): ``topics.partitions`` partitions,
  ``cleanup.policy=compact`` (a subscriber reads the last record of each key,
  :mod:`worker.latest`), segments rolled hourly so that superseded records are cleaned
  within about an hour even when few are written.

Creating topics that exist already is not an error; a checkpoints topic with fewer
partitions than the instances topic is (recovery could not find a partition's state).
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ..kafka_io import admin_config, quiet_client_logs
from ..preflight import metadata
from ..settings import add_kafka_arguments

#: the latest-state topic's configuration: compacted; the log cleaner never touches the active
#: segment, so an hourly roll bounds how long superseded records stay (the default is a week)
LATEST_CONFIG = {"cleanup.policy": "compact", "segment.ms": str(3_600_000),
                 "min.cleanable.dirty.ratio": "0.2"}


def topic_specs(settings, partitions: int | None = None) -> list[NewTopic]:
    t = settings.topics
    n = partitions or t.partitions
    rf = t.replication_factor
    big = str(settings.checkpoint.topic_max_message_bytes)
    plain = [t.instances, t.features, t.predictions, t.drift, t.rankings]
    specs = [NewTopic(name, n, rf) for name in plain]
    specs.append(NewTopic(t.deadletter, n, rf, config={"max.message.bytes": big}))
    specs.append(NewTopic(t.checkpoints, n, rf, config={
        "cleanup.policy": "compact",
        "max.message.bytes": big,
        # roll and clean often enough that restores read little superseded state
        "segment.bytes": str(64 * 1024 * 1024),
        "min.cleanable.dirty.ratio": "0.2",
    }))
    if t.latest is not None:
        specs.append(NewTopic(t.latest, n, rf, config=LATEST_CONFIG))
    return specs


def create_topics(settings, partitions: int | None = None, timeout_s: float = 30.0,
                  admin: AdminClient | None = None) -> dict[str, str]:
    """Create the worker's topics; returns ``{name: "created" | "exists"}``."""
    admin = admin or AdminClient(admin_config(settings))
    specs = topic_specs(settings, partitions)
    futures = admin.create_topics(specs, operation_timeout=timeout_s, request_timeout=timeout_s)
    result = _outcomes(futures, "created", KafkaError.TOPIC_ALREADY_EXISTS, "exists")
    check_partitions(settings, admin, timeout_s)
    return result


def delete_topics(settings, timeout_s: float = 30.0,
                  admin: AdminClient | None = None) -> dict[str, str]:
    """Delete the worker's topics (those :func:`create_topics` creates), waiting until the
    brokers did; returns ``{name: "deleted" | "absent"}``."""
    admin = admin or AdminClient(admin_config(settings))
    names = [spec.topic for spec in topic_specs(settings, 1)]
    futures = admin.delete_topics(names, operation_timeout=timeout_s, request_timeout=timeout_s)
    return _outcomes(futures, "deleted", KafkaError.UNKNOWN_TOPIC_OR_PART, "absent")


def delete_groups(settings, groups: list[str], timeout_s: float = 30.0) -> dict[str, str]:
    """Delete consumer groups whose members have left (the demo's workers and live view);
    returns ``{group: "deleted" | "absent"}``. A group is still "not empty" for a moment after
    its last member left (the coordinator completes the rebalance the leave started): it is
    asked again until ``timeout_s``."""
    admin = AdminClient(admin_config(settings))
    deadline = time.monotonic() + timeout_s
    left, result = list(groups), {}
    while left:
        futures = admin.delete_consumer_groups(left, request_timeout=timeout_s)
        busy = []
        for group, fut in futures.items():
            try:
                result.update(_outcomes({group: fut}, "deleted", KafkaError.GROUP_ID_NOT_FOUND,
                                        "absent"))
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.NON_EMPTY_GROUP or \
                        time.monotonic() > deadline:
                    raise
                busy.append(group)
        left = busy
        if left:
            time.sleep(0.5)
    return result


def _outcomes(futures: dict, done: str, benign: int, benign_word: str) -> dict[str, str]:
    """``{topic: done}`` once each admin future completed, ``benign_word`` for a topic whose
    request failed with the ``benign`` error code (already there, already gone); any other
    error is raised."""
    result: dict[str, str] = {}
    for name, fut in futures.items():
        try:
            fut.result()
            result[name] = done
        except KafkaException as exc:
            if exc.args[0].code() != benign:
                raise
            result[name] = benign_word
    return result


def check_partitions(settings, admin: AdminClient, timeout_s: float = 30.0) -> None:
    """Refuse a checkpoints topic with fewer partitions than the instances topic."""
    t = settings.topics
    md = admin.list_topics(timeout=timeout_s).topics
    if t.instances in md and t.checkpoints in md:
        n_in = len(md[t.instances].partitions)
        n_ck = len(md[t.checkpoints].partitions)
        if n_ck < n_in:
            raise RuntimeError(
                f"topic {t.checkpoints} has {n_ck} partitions but {t.instances} has {n_in}: "
                f"the checkpoints topic needs at least as many (one per input partition)")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("topics", help="manage the worker's Kafka topics")
    sub = p.add_subparsers(dest="topics_command", metavar="ACTION")
    c = sub.add_parser("create", help="create every topic (checkpoints and latest state compacted)")
    c.add_argument("--partitions", type=int, default=None,
                   help="partitions per topic (default: topics.partitions)")
    add_kafka_arguments(c)
    c.set_defaults(func=_cmd_create)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _cmd_create(args) -> int:
    from ..settings import settings_or_exit

    settings = settings_or_exit(args)
    quiet_client_logs()  # a failure is one line (the CLI's), not librdkafka's retries
    admin = AdminClient(admin_config(settings))
    metadata(admin, settings)  # no broker: one line and exit 1 once startup_timeout_s passed
    for name, status in create_topics(settings, args.partitions, admin=admin).items():
        print(f"{name}: {status}")
    return 0
