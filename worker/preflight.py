"""Checks a worker makes before it joins its group: brokers reachable, topics fit for the job.

A worker that starts against brokers it cannot reach, an input topic that does not exist, or
a checkpoints topic the broker created on its own (one partition, ``cleanup.policy=delete``:
checkpoints expire with retention and restores fail) would otherwise retry forever or lose
state later. :func:`preflight` fails fast instead, with a message that says what to fix:

* the brokers answer a metadata request within ``worker.startup_timeout_s`` (asked in short
  rounds, so SIGTERM ends the wait at once): :class:`BrokersUnreachable`;
* the instances, features, output and dead-letter topics exist, the features topic has as
  many partitions as the instances topic (they are co-partitioned), the checkpoints topic is
  compacted and has at least as many partitions as the instances topic, the latest-state
  topic (when on) is compacted: :class:`TopicProblem`.

It also reads each output topic's ``max.message.bytes``, the largest record the broker will
take (:attr:`Preflight.max_bytes`): outputs that would exceed it are dead-lettered with reason
``output_too_large`` instead of failing the transaction forever. What works but costs the
operator (checkpoints stored uncompressed: :func:`checkpoint_warnings`) is a warning
(:attr:`Preflight.warnings`), logged at start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from .kafka_io import admin_config, producer_config

#: the broker's default ``message.max.bytes`` (Kafka 4.x), for topics that do not say
BROKER_DEFAULT_MAX_BYTES = 1_048_588


class BrokersUnreachable(RuntimeError):
    """No broker answered within the startup timeout."""


class TopicProblem(RuntimeError):
    """A topic is missing or unfit (the message says which and how to fix it)."""


@dataclass(frozen=True)
class Preflight:
    """What the checks found: partitions of the input topic, output topics' record limits."""

    partitions: int
    max_bytes: dict[str, int]
    warnings: tuple[str, ...] = ()


def metadata(client, settings, stopping=lambda: False):
    """The cluster's metadata through ``client`` (an AdminClient, Producer or Consumer),
    asked in short rounds for up to ``worker.startup_timeout_s`` so that ``stopping()`` ends
    the wait at once.

    Raises
    ------
    BrokersUnreachable
        With one line that names the brokers and what to check.
    """
    bootstrap, timeout_s = settings.kafka.bootstrap_servers, settings.worker.startup_timeout_s
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline and not stopping():
        try:
            return client.list_topics(timeout=min(2.0, max(0.1, deadline - time.monotonic())))
        except KafkaException as exc:
            last = exc
    why = "stopped while waiting" if stopping() else f"no answer within {timeout_s:g} s"
    cause = last.args[0] if last and last.args else last
    reason = cause.str() if hasattr(cause, "str") else str(cause)
    raise BrokersUnreachable(f"cannot reach the Kafka brokers at {bootstrap} ({why}"
                             f"{'; last error: ' + reason if last else ''}); check -b / "
                             "STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS and the network")


def _topic_configs(admin: AdminClient, names: list[str], timeout_s: float) -> dict[str, dict]:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    out = {}
    for res, fut in admin.describe_configs(resources, request_timeout=timeout_s).items():
        out[res.name] = {k: v.value for k, v in fut.result(timeout=timeout_s).items()}
    return out


def check_topics(settings, topics_md, configs: dict[str, dict]) -> list[str]:
    """Problems of the worker's topics as described by ``topics_md`` and ``configs``."""
    t = settings.topics
    hint = "create them with `streamforest topics create` (or your own tooling)"
    missing = [n for n in (t.instances, t.features, t.predictions, t.drift, t.rankings,
                           t.deadletter, t.checkpoints) if n not in topics_md]
    problems = [f"topic {n} does not exist; {hint}" for n in missing]
    problems += latest_problems(t.latest, topics_md, configs, hint)
    if t.instances in topics_md and t.features in topics_md:
        n_in = len(topics_md[t.instances].partitions)
        n_ft = len(topics_md[t.features].partitions)
        if n_ft != n_in:
            # partition p of both is one task: a feature must land where its instances are
            problems.append(
                f"topic {t.features} has {n_ft} partitions but {t.instances} has {n_in}: the "
                "two are co-partitioned (a stream's features must land in the partition of "
                "its instances) and need the same count; recreate one of them with "
                f"{n_in if n_ft < n_in else n_ft} partitions")
    if t.checkpoints in topics_md:
        policy = configs.get(t.checkpoints, {}).get("cleanup.policy", "")
        if "compact" not in policy:
            problems.append(
                f"topic {t.checkpoints} has cleanup.policy={policy or 'delete'}: checkpoints "
                "need a compacted topic (an auto-created topic is not one); delete it and "
                "create it with `streamforest topics create`")
        if t.instances in topics_md:
            n_in = len(topics_md[t.instances].partitions)
            n_ck = len(topics_md[t.checkpoints].partitions)
            if n_ck < n_in:
                problems.append(f"topic {t.checkpoints} has {n_ck} partitions but {t.instances} "
                                f"has {n_in}: it needs at least as many")
    return problems


def latest_problems(topic: str | None, topics_md, configs: dict[str, dict], hint: str) -> list[str]:
    """Problems of the latest-state topic: missing, or not compacted (its records would expire
    with retention, and a new subscriber would not see the streams that were quiet since)."""
    if topic is None:
        return []
    off = "; or set STREAMFOREST_TOPICS__LATEST= (empty) to not write the latest state"
    if topic not in topics_md:
        return [f"topic {topic} does not exist; {hint}{off}"]
    policy = configs.get(topic, {}).get("cleanup.policy", "")
    if "compact" not in policy:
        return [f"topic {topic} has cleanup.policy={policy or 'delete'}: the latest state needs a "
                "compacted topic (an auto-created topic is not one); delete it and create it with "
                f"`streamforest topics create`{off}"]
    return []


def checkpoint_warnings(settings, configs: dict[str, dict]) -> list[str]:
    """A warning when checkpoints would be stored uncompressed: the worker leaves them to
    its producer (``checkpoint.compression_level=0``), and the producer does not compress
    (``compression.type=none`` in ``kafka.extra``) or the checkpoints topic stores records
    uncompressed (``compression.type=uncompressed``). The states then take three to five
    times the broker's disk and the restores' reads.

    Examples
    --------
    >>> from worker.settings import Settings
    >>> s = Settings(kafka={"extra": {"compression.type": "none"}})
    >>> checkpoint_warnings(s, {})[0][:60]
    'checkpoints are stored uncompressed: checkpoint.compression_'
    >>> checkpoint_warnings(Settings(), {"sf.checkpoints": {"compression.type": "producer"}})
    []
    """
    if settings.checkpoint.compression_level:
        return []
    topic = configs.get(settings.topics.checkpoints, {}).get("compression.type") or "producer"
    conf = producer_config(settings, None)
    codec = str(conf.get("compression.codec", conf.get("compression.type", "none"))).lower()
    if topic == "uncompressed":
        why = f"topic {settings.topics.checkpoints} has compression.type=uncompressed"
    elif topic == "producer" and codec == "none":
        why = "the producer's compression.type is none (kafka.extra)"
    else:
        return []
    return [f"checkpoints are stored uncompressed: checkpoint.compression_level is 0 (the "
            f"producer compresses them) and {why}; set STREAMFOREST_CHECKPOINT__COMPRESSION_LEVEL"
            "=1 to compress them in the worker, or let the producer and the topic compress"]


def preflight(settings, stopping=lambda: False, admin: AdminClient | None = None) -> Preflight:
    """Run the checks of the module doc; raise :class:`BrokersUnreachable` or :class:`TopicProblem`."""
    t = settings.topics
    w = settings.worker
    admin = admin or AdminClient(admin_config(settings))
    md = metadata(admin, settings, stopping)
    outputs = [n for n in (t.predictions, t.drift, t.rankings, t.deadletter, t.latest)
               if n in md.topics]
    present = outputs + ([t.checkpoints] if t.checkpoints in md.topics else [])
    configs = _topic_configs(admin, present, w.startup_timeout_s) if present else {}
    problems = check_topics(settings, md.topics, configs)
    if problems:
        raise TopicProblem("; ".join(problems))
    max_bytes = {n: int(configs[n].get("max.message.bytes") or BROKER_DEFAULT_MAX_BYTES)
                 for n in outputs}
    return Preflight(len(md.topics[t.instances].partitions), max_bytes,
                     tuple(checkpoint_warnings(settings, configs)))
