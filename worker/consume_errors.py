"""Which consumer errors the worker survives and which end it.

A consumer error no retry can fix (authorization, a fenced static member, a fatal client
error) ends the member with a non-zero status, so its orchestrator restarts it and says so,
instead of a worker that logs the error forever while ``/healthz`` stays green. An unknown
input topic is tolerated for ``worker.startup_timeout_s`` (a topic being created) and checked
against the metadata before the worker gives up (see ``Worker._check_input_topic``).

Examples
--------
>>> from confluent_kafka import KafkaError
>>> consumer_error_kind(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
'fatal'
>>> consumer_error_kind(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
'unknown_topic'
>>> consumer_error_kind(KafkaError(KafkaError._TRANSPORT))
'transient'
"""

from __future__ import annotations

from confluent_kafka import KafkaError

FATAL = frozenset({
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._AUTHENTICATION, KafkaError._FENCED, KafkaError.FENCED_INSTANCE_ID,
})
UNKNOWN_TOPIC = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                           KafkaError._UNKNOWN_PARTITION})


def consumer_error_kind(err: KafkaError) -> str:
    """``"fatal"``, ``"unknown_topic"`` or ``"transient"``."""
    if err.fatal() or err.code() in FATAL:
        return "fatal"
    if err.code() in UNKNOWN_TOPIC:
        return "unknown_topic"
    return "transient"
