"""Worker configuration: one :class:`Settings` object read from a TOML file and ``STREAMFOREST_*``
variables.

Every field maps to an environment variable ``STREAMFOREST_<SECTION>__<FIELD>`` (case does
not matter), e.g. ``STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS=broker:9092`` or
``STREAMFOREST_LEARNERS__BATCH_SIZE=50``. Maps take JSON (``STREAMFOREST_KAFKA__EXTRA=
'{"fetch.wait.max.ms":"50"}'``), and ``kafka.extra`` also takes one key per variable
(``STREAMFOREST_KAFKA__EXTRA__FETCH.WAIT.MAX.MS=50``). A whole section can be given as one
JSON object (``STREAMFOREST_TOPICS='{"partitions": 8}'``).

Read the environment once, at start, with :func:`load_settings`; everything else takes the
:class:`Settings` object. It refuses unknown keys and bad values with a :class:`ConfigError`
that names each offending variable and says what to fix. pydantic-settings on its own ignores
unknown variables under the prefix (and reports nested mistakes by field path, not by
variable), so :func:`load_settings` scans the environment itself.

A TOML configuration file (``--config FILE`` or ``STREAMFOREST_CONFIG=FILE``) holds the same
sections, as tables (``[kafka]``, ``[learners]``, ``[[profiles]]`` ...), read with pydantic-settings'
``TomlConfigSettingsSource``. The environment overrides the file key by key, and ``-b``/``-X``
override both. :func:`load_settings` checks the file's keys as it checks the variables: a problem
is named ``FILE: section.key``.

``streamforest config`` prints the effective configuration as JSON, secrets masked.
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import json
import os
import re
import socket
import sys
import tomllib
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from models import registry
from schemas.messages import MAX_NAME_LENGTH

from .pipeline.config import PipelineConfig, check_config
from .pipeline.profiles import Profiles, pattern_problems

ENV_PREFIX = "STREAMFOREST_"
NESTED_DELIMITER = "__"
MASK = "**********"
#: the variable naming the configuration file (what ``--config`` gives on the command line)
CONFIG_ENV_VAR = "STREAMFOREST_CONFIG"

# Variables under the prefix that belong to other tools (the local broker, the test fixtures,
# the numba cache switch), not to the worker's settings: the scan leaves them alone.
OTHER_ENV_VARS = frozenset({"STREAMFOREST_HOME", "STREAMFOREST_NUMBA_CACHE", CONFIG_ENV_VAR})
#: settings renamed, (section, old key) -> new key: the old name fails with the new one
RENAMED = {("worker", "consume_batch"): "max_poll_records"}
OTHER_ENV_PREFIXES = ("STREAMFOREST_TEST_", "STREAMFOREST_BROKER_", "STREAMFOREST_LOCAL_KAFKA_")

# kafka.extra keys that would silently override a typed setting
_TYPED_LIBRDKAFKA_KEYS = {
    "bootstrap.servers": "bootstrap_servers",
    "group.id": "group_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "ssl.ca.location": "ssl_ca_location",
    "ssl.certificate.location": "ssl_certificate_location",
    "ssl.key.location": "ssl_key_location",
    "ssl.key.password": "ssl_key_password",
    "client.id": "client_id",
}
# librdkafka properties that can hold a secret (ssl.key.pem, ssl.keystore.password,
# sasl.oauthbearer.config, sasl.jaas.config, ...): masked in `config`, logs and errors
_SECRET_KEY = re.compile(r"pem|key|password|secret|token|oauthbearer|jaas|credential|private",
                         re.IGNORECASE)
# librdkafka properties whose override would weaken exactly-once or the worker's own offset
# handling: refused in kafka.extra, each with the reason
_GUARANTEE_KEYS = {
    "isolation.level": "the worker reads read_committed: outputs of aborted transactions must "
                       "never be learned from",
    "enable.auto.commit": "offsets are committed with the outputs, in the same transaction",
    "enable.auto.offset.store": "offsets are stored only for what was processed and committed",
    "enable.idempotence": "exactly-once and ordered retries need the idempotent producer",
    "transactional.id": "set STREAMFOREST_WORKER__TRANSACTIONAL_ID (or the member name) instead",
}
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_PROCESS_TAG = uuid.uuid4().hex[:8]


def _field_error(field: str, message: str) -> PydanticCustomError:
    """An error on ``field`` raised from a section's model validator."""
    return PydanticCustomError("setting", "{message}", {"field": field, "message": message})


def _librdkafka_value(value: Any) -> Any:
    """librdkafka takes strings; accept JSON numbers and booleans too."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class Section(BaseModel):
    """A settings section: closed (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


Positive = Annotated[int, Field(ge=1)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class KafkaSettings(Section):
    """Connection to the cluster (``STREAMFOREST_KAFKA__*``).

    Examples: ``STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS=b1:9092,b2:9092``,
    ``STREAMFOREST_KAFKA__SECURITY_PROTOCOL=SASL_SSL``,
    ``STREAMFOREST_KAFKA__SASL_MECHANISM=SCRAM-SHA-512``,
    ``STREAMFOREST_KAFKA__SASL_PASSWORD=...``,
    ``STREAMFOREST_KAFKA__EXTRA='{"fetch.wait.max.ms":"50"}'``.
    """

    bootstrap_servers: str = Field("127.0.0.1:9092", min_length=1, description="host:port list")
    group_id: str = Field("streamforest", min_length=1, description="consumer group")
    security_protocol: Annotated[
        Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], BeforeValidator(_upper)
    ] = "PLAINTEXT"
    sasl_mechanism: (
        Annotated[
            Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"],
            BeforeValidator(_upper),
        ]
        | None
    ) = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: SecretStr | None = None
    client_id: str = Field("streamforest", min_length=1)
    extra: dict[str, Annotated[str | SecretStr, BeforeValidator(_librdkafka_value)]] = Field(
        default_factory=dict, description="other librdkafka properties, passed through"
    )

    @field_validator("extra")
    @classmethod
    def _hide_secrets(cls, extra: dict) -> dict:
        """Properties that can hold a secret are kept as SecretStr: never shown by repr."""
        return {k: SecretStr(v) if _SECRET_KEY.search(k) and isinstance(v, str) else v
                for k, v in extra.items()}

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        for key in self.extra:
            if key in _TYPED_LIBRDKAFKA_KEYS:
                raise _field_error(
                    "extra",
                    f"'{key}' has its own setting: use kafka.{_TYPED_LIBRDKAFKA_KEYS[key]} "
                    f"(STREAMFOREST_KAFKA__{_TYPED_LIBRDKAFKA_KEYS[key].upper()})",
                )
        for key in self.extra:
            if key in _GUARANTEE_KEYS:
                raise _field_error("extra", f"'{key}' cannot be overridden: "
                                            f"{_GUARANTEE_KEYS[key]}")
        if "group.instance.id" in self.extra:
            # the member name also names the transactional id: keep both in one place
            raise _field_error(
                "extra",
                "'group.instance.id' comes from the member name: set "
                "STREAMFOREST_WORKER__STATIC_MEMBERSHIP=true and STREAMFOREST_WORKER__MEMBER_NAME",
            )
        sasl = self.security_protocol.startswith("SASL")
        if sasl and self.sasl_mechanism is None:
            raise _field_error(
                "sasl_mechanism", f"required with security_protocol {self.security_protocol}"
            )
        if not sasl and self.sasl_mechanism is not None:
            raise _field_error(
                "sasl_mechanism",
                f"needs security_protocol SASL_PLAINTEXT or SASL_SSL, not {self.security_protocol}",
            )
        if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            for name in ("sasl_username", "sasl_password"):
                if getattr(self, name) is None:
                    raise _field_error(name, f"required with sasl_mechanism {self.sasl_mechanism}")
        return self

    def as_librdkafka_dict(self) -> dict[str, str]:
        """librdkafka properties for confluent-kafka clients (secrets revealed here only).

        Contains the connection properties, ``group.id``, ``client.id`` and ``extra``;
        producers drop the consumer-only ``group.id``.
        """
        conf = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol.lower(),
        }
        optional = {
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": self.sasl_password,
            "ssl.ca.location": self.ssl_ca_location,
            "ssl.certificate.location": self.ssl_certificate_location,
            "ssl.key.location": self.ssl_key_location,
            "ssl.key.password": self.ssl_key_password,
        }
        for key, value in optional.items():
            if value is not None:
                conf[key] = value.get_secret_value() if isinstance(value, SecretStr) else value
        conf.update({k: v.get_secret_value() if isinstance(v, SecretStr) else v
                     for k, v in self.extra.items()})
        return conf


#: the product's topics by their logical names (the fields of :class:`TopicSettings`)
TOPIC_KINDS = ("instances", "features", "predictions", "drift", "rankings", "deadletter",
               "checkpoints", "latest")


def _optional_topic(value: Any) -> Any:
    """An optional topic: empty (``VAR=`` in a shell, ``""`` in TOML) turns it off."""
    return None if isinstance(value, str) and value.strip() == "" else value


class TopicSettings(Section):
    """Topic names and the layout ``streamforest topics create`` uses (``STREAMFOREST_TOPICS__*``).

    ``latest`` is the compacted topic of the latest ranking and alert state
    (:mod:`worker.latest`); empty turns it off (None).

    Examples
    --------
    >>> load_settings({"STREAMFOREST_TOPICS__LATEST": ""}).topics.latest is None
    True
    """

    instances: str = "sf.instances"
    features: str = "sf.features"
    predictions: str = "sf.predictions"
    drift: str = "sf.drift"
    rankings: str = "sf.rankings"
    deadletter: str = "sf.deadletter"
    checkpoints: str = "sf.checkpoints"
    latest: Annotated[str | None, BeforeValidator(_optional_topic)] = Field(
        "sf.latest", description="compacted topic of the latest ranking per stream and method "
        "and the latest alert per stream, detector and level; empty: not written")
    partitions: Positive = 4
    replication_factor: Positive = 1

    @field_validator(*TOPIC_KINDS)
    @classmethod
    def _legal_name(cls, name: str | None) -> str | None:
        if name is None:  # an optional topic turned off
            return name
        if not _TOPIC_NAME.match(name) or name in (".", ".."):
            raise ValueError(
                "a topic name is 1 to 249 characters among letters, digits, '.', '_' and '-'"
            )
        return name

    @model_validator(mode="after")
    def _distinct(self) -> TopicSettings:
        seen: dict[str, str] = {}
        for field in TOPIC_KINDS:
            name = getattr(self, field)
            if name is None:
                continue
            if name in seen:
                raise _field_error(field, f"topic {name!r} is already used for {seen[name]}")
            seen[name] = field
        return self

    def named(self, name: str) -> str:
        """The configured topic of a logical name (``predictions``); any other name as given."""
        return getattr(self, name) if name in TOPIC_KINDS else name


def _names(value: Any) -> Any:
    """Learner names: a JSON list, or names separated by commas (``none`` or empty: none)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise ValueError(f"is not a valid JSON list ({exc})") from None
        if text.lower() in ("", "none"):
            return []
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


Names = Annotated[list[str], NoDecode, BeforeValidator(_names)]


def _optional_name(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("", "none"):
        return None
    return value


class LearnerSettings(Section):
    """What each stream learns: the default profile (``STREAMFOREST_LEARNERS__*``).

    Learners are named as in :mod:`models.registry` (``streamforest learners`` lists them).
    ``predictor`` lists candidates: a stream uses the first that serves its task;
    ``rankers`` and ``detectors`` list every one to run (``none`` for none); lists are JSON
    or comma-separated. ``params`` passes constructor arguments per learner, as JSON:
    ``STREAMFOREST_LEARNERS__PARAMS='{"adaptive_random_forest": {"n_models": 20}}'``.
    """

    task: Literal["auto", "classification", "regression"] = Field(
        "auto", description="auto: fixed by a stream's first labelled instance")
    predictor: Names = Field(default_factory=lambda: list(registry.DEFAULT_PREDICTORS))
    selector: Annotated[str | None, BeforeValidator(_optional_name)] = None
    rankers: Names = Field(default_factory=lambda: list(registry.DEFAULT_RANKERS))
    detectors: Names = Field(default_factory=lambda: list(registry.DEFAULT_DETECTORS))
    batch_size: Positive = Field(100, description="labelled rows per mini-batch")
    ranking_every: Positive = Field(1000, description="instances between rankings")
    publish_rankings: Literal["block", "top_k", "interval"] = Field(
        "block", description="besides every ranking_every instances, publish rankings after "
        "every block of the rankers (block), after a block that changed the top-k order "
        "(top_k), or never (interval)")
    top_k: Positive = 5
    feature_stream_rows: Positive = Field(
        100_000, description="instances a stream of features holds (its row store); more are "
        "dead-lettered with reason row_store_full")
    held_rows: int = Field(
        1000, ge=0, le=10_000_000, description="unlabelled instances a stream holds for their "
        "LabelEvents (the oldest falls out first; its label is then dead-lettered with reason "
        "label_expired); 0: none is held")
    held_age_ms: int = Field(
        0, ge=0, le=2**63 - 1, description="event-time age after which a held instance falls "
        "out (0: no age bound)")
    seed: int = Field(1, ge=0, le=2**63 - 1)
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)


#: fields a profile may set (everything else is per worker)
PROFILE_FIELDS = ("task", "predictor", "selector", "rankers", "detectors", "batch_size",
                  "ranking_every", "publish_rankings", "top_k", "seed", "params")


class ProfileSettings(Section):
    """One per-stream profile: streams whose id matches ``match`` (a glob) get these learners.

    Fields left out are the default profile's (``learners``); ``params`` are merged per
    learner, the profile's values winning.
    """

    match: str = Field(description="glob pattern of stream ids: *, ?, [seq]")
    name: str | None = Field(None, min_length=1, description="shown in messages and metrics")
    task: Literal["auto", "classification", "regression"] | None = None
    predictor: Names | None = None
    selector: Annotated[str | None, BeforeValidator(_optional_name)] = None
    rankers: Names | None = None
    detectors: Names | None = None
    batch_size: Positive | None = None
    ranking_every: Positive | None = None
    publish_rankings: Literal["block", "top_k", "interval"] | None = None
    top_k: Positive | None = None
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    params: dict[str, dict[str, Any]] | None = None


class CheckpointSettings(Section):
    """When and how learner states are written (``STREAMFOREST_CHECKPOINT__*``)."""

    every_instances: Positive = 10_000
    interval_s: PositiveFloat = 30.0
    max_message_bytes: int = Field(
        1_000_000, ge=1024, description="chunk size: larger states are split into chunks"
    )
    topic_max_message_bytes: int = Field(8_388_608, ge=1024)
    rows_per_stream: int = Field(
        10, ge=0, description="a due checkpoint waits until the partition's changed streams "
        "learned this many rows each on average (0: no wait)")
    transaction_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="checkpoint bytes one transaction writes at most; "
        "further due partitions are checkpointed in the next transactions")
    compression_level: int = Field(
        0, ge=0, le=9, description="zlib level of checkpoint states, spent in the worker's "
        "thread (0: none; the producer's compression.type, lz4 unless kafka.extra says "
        "otherwise, compresses them in librdkafka's threads, up to 25% larger than level 1)"
    )

    @model_validator(mode="after")
    def _chunk_fits(self) -> CheckpointSettings:
        if self.max_message_bytes > self.topic_max_message_bytes:
            raise _field_error(
                "max_message_bytes",
                f"a chunk of {self.max_message_bytes} bytes does not fit the checkpoint topic's "
                f"limit topic_max_message_bytes={self.topic_max_message_bytes}",
            )
        return self


_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def _bind_host(host: str) -> str:
    """An IP address (v4 or v6) or a host name (RFC 1123), kept as given.

    Only the form is checked: a name is resolved when the server binds, on the machine that
    runs the worker, not wherever the settings are read (``streamforest config``).
    """
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    # an all-numeric last label is a mistyped address (999.1.1.1), never a top-level domain
    if (len(host) > 253 or not all(_HOST_LABEL.match(label) for label in labels)
            or labels[-1].isdigit()):
        raise ValueError("expected an IP address (0.0.0.0, 127.0.0.1, ::) or a host name, "
                         "without a port (the port is metrics_port)")
    return host


def _optional_format(value: Any) -> Any:
    """A wire format name in any case, or empty for "not set" (``VAR=`` in a shell)."""
    value = value.strip().lower() if isinstance(value, str) else value
    return None if value == "" else value


OptionalFormat = Annotated[Literal["msgpack", "json"] | None, BeforeValidator(_optional_format)]

#: output topics whose wire format is configurable (dead letters keep the bytes they refused,
#: checkpoints stay msgpack: only the worker reads them back)
OUTPUT_KINDS = ("predictions", "drift", "rankings")

#: each output topic's format when neither its own setting nor ``output.format`` is set. Drift
#: alerts and rankings are few records that people and tools read: JSON, which kcat, ksqlDB,
#: Kafka Connect and Kafka UIs show as text. Predictions are one record per instance: JSON costs
#: the worker 6-17% of its CPU per row in process on the default pipeline and 10-58% on the
#: lightest, so they stay msgpack (tests/benchmarks/service/results/output_format.md).
DEFAULT_FORMATS = {"predictions": "msgpack", "drift": "json", "rankings": "json"}


class OutputSettings(Section):
    """Wire format of the output topics (``STREAMFOREST_OUTPUT__*``).

    Each topic's format is, first to last: its own setting (``predictions``, ``drift``,
    ``rankings``), then ``format`` (all three at once), then its default
    (:data:`DEFAULT_FORMATS`: msgpack predictions, JSON drift alerts and rankings). So
    ``STREAMFOREST_OUTPUT__FORMAT=msgpack`` makes all three msgpack, and
    ``STREAMFOREST_OUTPUT__FORMAT=json`` all three JSON. Loading resolves the three fields, so
    they hold each topic's effective format (what ``streamforest config`` prints; a copy made
    with ``model_copy(update=...)`` is not resolved again: build a new one instead). msgpack
    records carry no header (as they always have); JSON records carry ``content-type:
    application/json``. Readers that use :func:`schemas.codec.decode` read either.

    Examples
    --------
    >>> [load_settings({}).output.format_of(kind) for kind in OUTPUT_KINDS]
    ['msgpack', 'json', 'json']
    >>> s = load_settings({"STREAMFOREST_OUTPUT__FORMAT": "json",
    ...                    "STREAMFOREST_OUTPUT__RANKINGS": "msgpack"})
    >>> [s.output.format_of(kind) for kind in OUTPUT_KINDS]
    ['json', 'json', 'msgpack']
    """

    format: OptionalFormat = Field(
        None, description="predictions, drift and rankings at once; unset: each topic's default")
    predictions: OptionalFormat = Field(None, description="default: format, else msgpack")
    drift: OptionalFormat = Field(None, description="default: format, else json")
    rankings: OptionalFormat = Field(None, description="default: format, else json")
    prediction_batches: bool = Field(
        False, description="one PredictionBatch per input InstanceBatch (rows in input order) "
        "instead of one Prediction per row")

    @model_validator(mode="after")
    def _resolve(self) -> OutputSettings:
        """Each topic's effective format: its own, else ``format``, else its default."""
        for kind in OUTPUT_KINDS:
            if getattr(self, kind) is None:
                object.__setattr__(self, kind, self.format or DEFAULT_FORMATS[kind])
        return self

    def format_of(self, kind: str) -> str:
        """``"msgpack"`` or ``"json"``: the format of output ``kind`` (one of OUTPUT_KINDS)."""
        return getattr(self, kind)


class WorkerSettings(Section):
    """The consume loop and operations (``STREAMFOREST_WORKER__*``)."""

    max_poll_records: Positive = Field(
        2000, description="records one poll of the consumer returns at most (Kafka's "
        "max.poll.records): the worker's unit of work between two transactions")
    consume_timeout_s: PositiveFloat = 0.2
    max_poll_interval_ms: int = Field(300_000, ge=1, le=86_400_000)
    queued_max_messages_kbytes: int = Field(65_536, ge=1, le=2_097_151)
    metrics_port: int = Field(9464, ge=0, le=65_535, description="0 disables the endpoint")
    progress_log_s: float = Field(
        60.0, ge=0, le=86_400, allow_inf_nan=False, description="seconds between the worker's "
        "throughput log lines (instances, instances/s, streams, dead letters); 0 turns them off")
    metrics_host: Annotated[str, AfterValidator(_bind_host)] = Field(
        "0.0.0.0", description="address the /metrics, /healthz and /readyz server binds: every "
        "interface by default, because the kubelet probes and Prometheus scrapes the pod IP; "
        "127.0.0.1 keeps it to the host (the image's HEALTHCHECK asks 127.0.0.1, so a "
        "specific other address breaks it)")
    max_message_bytes: Positive = Field(1_048_576, description="larger instances are dead-lettered")
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_upper)
    ] = "INFO"
    state_budget_mb: PositiveFloat = Field(
        1024.0, description="memory for the streams' learners; past it the least recently "
        "used streams are passivated (dropped, restored from their checkpoint when they come)")
    exactly_once: bool = True
    transactional_id: str | None = Field(
        None, min_length=1, description="default: <group_id>-<member_name>"
    )
    member_name: str | None = Field(
        None, min_length=1, description="default: <hostname>-<pid>-<random tag of the process>")
    static_membership: bool = Field(
        False, description="join as group.instance.id=<member_name>: a member restarted under "
        "the same name within session.timeout.ms gets its partitions back without a rebalance",
    )
    max_task_idle_ms: int = Field(
        0, ge=0, le=3_600_000, description="how long a partition whose other topic (instances "
        "or features) has nothing buffered waits for it once that topic is caught up; see "
        "worker/merge.py")
    startup_timeout_s: PositiveFloat = Field(
        60.0, description="how long to wait for the brokers at start before giving up")
    shutdown_timeout_s: PositiveFloat = Field(
        20.0, description="bound on the final checkpoint of a revoke or a SIGTERM; past it the "
        "worker leaves without it (the next owner restores the last committed checkpoint)")
    # input caps: every output stays far below the broker's default message size (1 MB)
    max_label_length: Positive = Field(
        256, description="longest class label or string instance id, in characters")
    max_classes: Positive = Field(1000, description="classes one stream may have")
    max_features: Positive = Field(2000, description="features of one stream")
    max_feature_name_length: Positive = Field(256, description="longest feature name")

    @model_validator(mode="after")
    def _stable_name(self) -> WorkerSettings:
        if self.static_membership and self.member_name is None:
            # <hostname>-<pid> changes with every restart: a static member needs a stable name
            raise _field_error(
                "member_name",
                "static_membership needs a stable member name: set "
                "STREAMFOREST_WORKER__MEMBER_NAME (for example to the pod name)",
            )
        return self


# Set by load_settings for the duration of one construction: the mapping to read instead of
# os.environ. A context variable keeps concurrent loads (threads, tests) apart.
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("streamforest_environ", default=None)
# likewise the configuration file to read under the environment (None: no file)
_CONFIG_FILE: ContextVar[Path | None] = ContextVar("streamforest_config_file", default=None)


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading a given mapping."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._environ.items()}


class Settings(BaseSettings):
    """Everything the worker is configured with.

    Built from ``STREAMFOREST_<SECTION>__<FIELD>`` environment variables over the defaults;
    use :func:`load_settings` for the checked, readable errors.

    Examples
    --------
    >>> s = load_settings({"STREAMFOREST_LEARNERS__BATCH_SIZE": "50"})
    >>> s.learners.batch_size, s.learners.predictor, s.topics.instances
    (50, ['adaptive_random_forest', 'isoup_symrf'], 'sf.instances')
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=NESTED_DELIMITER,
        extra="forbid",
        case_sensitive=False,
        validate_default=True,
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    learners: LearnerSettings = Field(default_factory=LearnerSettings)
    checkpoint: CheckpointSettings = Field(default_factory=CheckpointSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)
    profiles: list[ProfileSettings] = Field(
        default_factory=list, description="per-stream profiles, first match wins (JSON list)")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        environ = _ENVIRON.get()
        if environ is not None:
            env_settings = _MappingEnvSource(settings_cls, environ)
        # no .env files or secret directories: arguments over the environment over the file
        config_file = _CONFIG_FILE.get()
        if config_file is None:
            return init_settings, env_settings
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls, config_file)

    @property
    def member_name(self) -> str:
        """``worker.member_name``, or ``<hostname>-<pid>-<tag>`` with a random tag drawn once per
        process: containers on the host network share a hostname and all run as PID 1, and two
        members with one transactional id would fence each other in a loop."""
        return self.worker.member_name or f"{socket.gethostname()}-{os.getpid()}-{_PROCESS_TAG}"

    @property
    def transactional_id(self) -> str:
        """``worker.transactional_id`` or ``<group_id>-<member_name>``."""
        return self.worker.transactional_id or f"{self.kafka.group_id}-{self.member_name}"

    def masked_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values, secrets replaced by ``**********``."""
        return self.model_dump(mode="json")

    def secret_values(self) -> list[str]:
        """Every secret this configuration holds (for redacting logs and error messages)."""
        k = self.kafka
        found = [v for v in (k.sasl_password, k.ssl_key_password, *k.extra.values())
                 if isinstance(v, SecretStr)]
        return [v.get_secret_value() for v in found if v.get_secret_value()]


# =========================================================================== loading


class ConfigError(ValueError):
    """Invalid configuration; ``problems`` lists (key, what to fix) pairs.

    ``str()`` is a readable multi-line message naming each key, e.g.::

        invalid streamforest settings (1 problem):
          STREAMFOREST_KAFKA__BOOTSTRP: unknown setting; did you mean
          STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS?
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        n = len(problems)
        lines = [f"invalid streamforest settings ({n} problem{'s' if n != 1 else ''}):"]
        lines += [f"  {key}: {text}" for key, text in problems]
        super().__init__("\n".join(lines))


def _env_name(*parts: str) -> str:
    return ENV_PREFIX + NESTED_DELIMITER.join(p.upper() for p in parts)


def _sections() -> dict[str, type[BaseModel] | None]:
    """Top-level settings: sections (models) by name; ``None`` for a list (``profiles``)."""
    return {name: f.annotation if isinstance(f.annotation, type) else None
            for name, f in Settings.model_fields.items()}


def _known_env_names() -> list[str]:
    names = []
    for section, model in _sections().items():
        names.append(_env_name(section))
        if model is not None:
            names += [_env_name(section, field) for field in model.model_fields]
    return names


def _scan_environ(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """Unknown ``STREAMFOREST_*`` variables and unparsable JSON values, with what to fix."""
    problems = []
    sections = _sections()
    known = _known_env_names()
    for key, value in environ.items():
        name = key.upper()
        if not name.startswith(ENV_PREFIX) or name in OTHER_ENV_VARS:
            continue
        if name.startswith(OTHER_ENV_PREFIXES):
            continue
        parts = name[len(ENV_PREFIX):].lower().split(NESTED_DELIMITER)
        model = sections.get(parts[0])
        field = model.model_fields.get(parts[1]) if model is not None and len(parts) > 1 else None
        if len(parts) == 2 and (parts[0], parts[1]) in RENAMED:
            problems.append((key, f"renamed: set {_env_name(parts[0], RENAMED[parts[0], parts[1]])}"))
            continue
        if (parts[0] not in sections or (len(parts) > 1 and field is None) or "" in parts):
            hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            fix = f"did you mean {hint[0]}?" if hint else "see `streamforest config` for the keys"
            problems.append((key, f"unknown setting; {fix}"))
            continue
        if len(parts) > 2:
            if (parts[0], parts[1]) != ("kafka", "extra"):
                problems.append(
                    (key, f"{parts[0]}.{parts[1]} cannot be nested further; set "
                          f"{_env_name(*parts[:2])} (as JSON if it is a map)")
                )
            continue
        if len(parts) == 1 or _is_map(field.annotation):
            expected = "a JSON list" if model is None else "a JSON object"
            try:
                json.loads(value)
            except ValueError as exc:
                problems.append((key, f"is not valid JSON ({exc}); expected {expected}"))
    return problems


def _is_map(annotation: Any) -> bool:
    return getattr(annotation, "__origin__", None) is dict or annotation is dict


class ConfigFile:
    """A configuration file as read: its path (as given) and its tables."""

    def __init__(self, path: str | os.PathLike, data: dict[str, Any]) -> None:
        self.path = Path(path)
        self.data = data

    @classmethod
    def read(cls, path: str | os.PathLike) -> ConfigFile:
        """Read and parse ``path`` (TOML); a missing, unreadable or malformed file is a
        :class:`ConfigError` naming it."""
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except OSError as exc:
            raise ConfigError([(str(path), f"cannot read the configuration file: "
                                           f"{exc.strerror or exc}")]) from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError([(str(path), f"is not valid TOML: {exc}")]) from None
        return cls(path, data)

    def key(self, path: tuple) -> str:
        """``FILE: section.key`` (``profiles[0].match`` for an entry of a list)."""
        text = ""
        for part in path:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
        return f"{self.path}: {text}" if text else str(self.path)

    def holds(self, path: tuple) -> int:
        """How many leading parts of ``path`` the file sets (0: none of it)."""
        node: Any = self.data
        for depth, part in enumerate(path):
            if isinstance(part, int):
                if not isinstance(node, list) or not 0 <= part < len(node):
                    return depth
            elif not isinstance(node, dict) or part not in node:
                return depth
            node = node[part]
        return len(path)


def _scan_file(file: ConfigFile) -> list[tuple[str, str]]:
    """Unknown sections and keys of a configuration file, with the closest known name."""
    problems = []
    sections = _sections()

    def unknown(where: tuple, name: str, known: list[str]) -> None:
        hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        fix = f"did you mean {hint[0]}?" if hint else "see `streamforest config` for the keys"
        problems.append((file.key(where), f"unknown setting; {fix}"))

    for section, value in file.data.items():
        if section not in sections:
            if section in ("configuration", "configurations"):
                problems.append((file.key((section,)), "unknown setting: a list of candidate "
                                 "configurations is for `streamforest evaluate --configs`; "
                                 "a configuration file sets [learners] and [[profiles]]"))
            else:
                unknown((section,), section, list(sections))
            continue
        model = sections[section]
        if model is not None:
            entries = [((section,), value)]
        else:  # profiles: a list of tables
            entries = list(enumerate(value)) if isinstance(value, list) else []
            entries = [((section, i), v) for i, v in entries]
        fields = list((model or ProfileSettings).model_fields)
        for where, table in entries:
            if not isinstance(table, dict):
                continue  # a section of the wrong type: validation says what it expects
            for key in table:
                if (where[0], key) in RENAMED:
                    problems.append((file.key((*where, key)),
                                     f"renamed: set {RENAMED[where[0], key]}"))
                elif key not in fields:
                    unknown((*where, key), key, fields)
    return problems


def _locate(loc: tuple, environ: Mapping[str, str], overrides: Mapping[str, Any],
            file: ConfigFile | None = None) -> str:
    """The variable, argument or file key a validation error location came from."""
    path = [p for p in loc if isinstance(p, str)]
    node: Any = overrides
    for i, part in enumerate(path):
        if not isinstance(node, Mapping) or part not in node:
            break
        node = node[part]
        if i == len(path) - 1 or not isinstance(node, Mapping):
            return ".".join(path) + " (argument)"
    by_upper = {k.upper(): k for k in environ}
    for depth in range(len(path), 0, -1):
        found = by_upper.get(_env_name(*path[:depth]))
        if found is not None:
            inner = ".".join(path[depth:])
            return found + (f" (field {inner})" if inner else "")
    if file is not None:
        # the file's key, or (a required key left out) where it goes in the file
        return file.key(tuple(loc))
    # nothing was set: name the variable that would fix it
    return _env_name(*path) if path else "settings"


def _describe(err: dict, secret: bool) -> str:
    msg = err["msg"]
    if err["type"] == "setting":
        return err["ctx"]["message"]
    if err["type"] == "extra_forbidden":
        return "unknown setting"
    text = msg[0].lower() + msg[1:]
    if err["type"] != "missing" and not secret and "input" in err:
        value = err["input"]
        if isinstance(value, str | int | float | bool) or value is None:
            text = f"{text} (got {value!r})"
    return text


def load_settings(environ: Mapping[str, str] | None = None,
                  config_file: str | os.PathLike | None = None, **overrides: Any) -> Settings:
    """Read and check the settings.

    Parameters
    ----------
    environ : mapping, optional
        Environment to read (``os.environ`` by default).
    config_file : path, optional
        TOML configuration file under the environment (default: ``STREAMFOREST_CONFIG`` of
        ``environ``; none when it is unset or empty).
    **overrides
        Section values that take precedence over the environment and the file, e.g.
        ``load_settings(kafka={"bootstrap_servers": "b:9092"})``.

    Raises
    ------
    ConfigError
        Listing every unknown ``STREAMFOREST_*`` variable or file key (with the closest known
        name) and every bad value (with the variable or ``FILE: section.key`` it came from and
        the expected form); a missing, unreadable or malformed file.

    Examples
    --------
    >>> load_settings({"STREAMFOREST_KAFKA__BOOTSTRP": "b:9092"})
    Traceback (most recent call last):
    ...
    worker.settings.ConfigError: invalid streamforest settings (1 problem):
      STREAMFOREST_KAFKA__BOOTSTRP: unknown setting; did you mean STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS?
    """
    environ = os.environ if environ is None else environ
    if config_file is None:
        config_file = environ.get(CONFIG_ENV_VAR) or None
    file = ConfigFile.read(config_file) if config_file is not None else None
    problems = _scan_environ(environ) + (_scan_file(file) if file is not None else [])
    if problems:
        raise ConfigError(problems)
    token = _ENVIRON.set(environ)
    file_token = _CONFIG_FILE.set(file.path if file is not None else None)
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc = tuple(err["loc"])
            if err["type"] == "setting":
                loc = (*loc, err["ctx"]["field"])
            secret = any(isinstance(p, str) and _SECRET_KEY.search(p) for p in loc)
            problems.append((_locate(loc, environ, overrides, file), _describe(err, secret)))
        problems += _learner_problems_beside(exc, environ, overrides, file)
        raise ConfigError(problems) from None
    except SettingsError as exc:  # a value pydantic-settings could not parse
        raise ConfigError([("environment", str(exc))]) from None
    finally:
        _CONFIG_FILE.reset(file_token)
        _ENVIRON.reset(token)
    problems = _learner_problems(settings, environ, overrides, file)
    if problems:
        raise ConfigError(problems)
    return settings


def _learner_problems_beside(exc: ValidationError, environ: Mapping[str, str],
                             overrides: Mapping[str, Any],
                             file: ConfigFile | None = None) -> list[tuple[str, str]]:
    """The learner problems too, when other sections failed but the learners' are valid.

    Failed sections are replaced by their defaults for this check, so every problem is
    reported at once (called while the environment mapping is set).
    """
    failed = {err["loc"][0] for err in exc.errors() if err["loc"]}
    if failed & {"learners", "profiles"} or not failed <= set(Settings.model_fields):
        return []
    # init arguments win over the environment key by key: a whole default section does
    fallback = {**overrides, **{name: Settings.model_fields[name].default_factory().model_dump()
                                for name in failed}}
    try:
        partial = Settings(**fallback)
    except (ValidationError, SettingsError):
        return []
    return _learner_problems(partial, environ, overrides, file)


# =========================================================================== profiles


def pipeline_config(learners: LearnerSettings,
                    profile: ProfileSettings | None = None) -> PipelineConfig:
    """The pipeline configuration of the default profile, or of ``profile`` over it."""
    values = {f: getattr(learners, f) for f in PROFILE_FIELDS}
    name = "default"
    if profile is not None:
        name = profile.name or profile.match
        for f in PROFILE_FIELDS:
            mine = getattr(profile, f)
            if f == "params" and mine is not None:
                merged = {k: dict(v) for k, v in values["params"].items()}
                for learner, params in mine.items():
                    merged[learner] = {**merged.get(learner, {}), **params}
                values["params"] = merged
            elif f in profile.model_fields_set:
                values[f] = mine
    return PipelineConfig(**values, profile=name)


def stream_profiles(settings: Settings) -> Profiles:
    """Which pipeline configuration each stream id gets (first matching profile wins)."""
    default = pipeline_config(settings.learners)
    return Profiles(default, [(p.match, pipeline_config(settings.learners, p))
                              for p in settings.profiles])


def _learner_problems(settings: Settings, environ: Mapping[str, str],
                      overrides: Mapping[str, Any],
                      file: ConfigFile | None = None) -> list[tuple[str, str]]:
    """Learner choices and parameters checked against the registry, by variable."""
    problems = []
    default = pipeline_config(settings.learners)
    seen = set()
    for field, text in check_config(default):
        top, _, inner = field.partition(".")
        where = _locate(("learners", top), environ, overrides, file)
        if inner:
            where = f"{where[:-1]}.{inner})" if where.endswith(")") else f"{where} (field {inner})"
        problems.append((where, text))
        seen.add((field, text))
    patterns = [p.match for p in settings.profiles]
    bad_patterns = dict(pattern_problems(patterns, MAX_NAME_LENGTH))
    for i, profile in enumerate(settings.profiles):
        base = _locate(("profiles",), environ, overrides, file)
        label = f"profile {i} {profile.match!r}"
        if i in bad_patterns:
            problems.append((f"{base} ({label}, field match)", bad_patterns[i]))
        for field, text in check_config(pipeline_config(settings.learners, profile)):
            top = field.partition(".")[0]
            if (field, text) in seen and top not in profile.model_fields_set:
                continue  # the default profile's problem, already reported
            problems.append((f"{base} ({label}, field {field})", text))
    return problems


# =========================================================================== CLI


# secrets of the settings this process loaded: the command line's error handler masks them
# in any message it prints (a client library's error text can quote a property's value)
_LOADED_SECRETS: list[str] = []


def is_secret_key(key: str) -> bool:
    """Whether a librdkafka property can hold a secret (its value is never shown).

    >>> is_secret_key("sasl.password"), is_secret_key("linger.ms")
    (True, False)
    """
    return _SECRET_KEY.search(key) is not None


def librdkafka_property(text: str) -> tuple[str, str]:
    """One ``-X KEY=VALUE`` argument: ``(key, value)``.

    The message of a malformed argument does not repeat it: it may hold a secret.

    Examples
    --------
    >>> librdkafka_property("security.protocol=SSL")
    ('security.protocol', 'SSL')
    >>> librdkafka_property("linger.ms")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected KEY=VALUE, a librdkafka property such as -X security.protocol=SSL
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            "expected KEY=VALUE, a librdkafka property such as -X security.protocol=SSL")
    return key.strip(), value


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` and kcat's ``-b`` and ``-X`` on a command that loads the settings
    (``-b``/``-X`` override the ``STREAMFOREST_KAFKA__*`` settings and the file's ``[kafka]``;
    :func:`settings_or_exit` applies them)."""
    parser.add_argument("--config", metavar="FILE", default=None,
                        help=f"TOML configuration file ([kafka], [learners], [[profiles]] ...; "
                        f"default: ${CONFIG_ENV_VAR}); STREAMFOREST_* variables override it")
    group = parser.add_argument_group("Kafka connection (overrides STREAMFOREST_KAFKA__*)")
    group.add_argument("-b", "--bootstrap-servers", metavar="HOST:PORT[,...]", default=None,
                       help="the brokers to connect to")
    group.add_argument("-X", dest="kafka_properties", metavar="KEY=VALUE", action="append",
                       type=librdkafka_property, default=[],
                       help="a librdkafka property, repeatable (-X security.protocol=SASL_SSL "
                       "-X sasl.mechanism=PLAIN ...); secrets are never printed")


def kafka_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``kafka`` section values ``-b`` and ``-X`` give (``{}``: none).

    A property with a setting of its own (``sasl.password``, ``security.protocol`` ...) sets
    that setting, so it is checked and masked as when it comes from the environment; any
    other goes to ``kafka.extra``. ``-b`` wins over ``-X bootstrap.servers``.

    Examples
    --------
    >>> ns = argparse.Namespace(bootstrap_servers="b:9092",
    ...                         kafka_properties=[("sasl.password", "s"), ("linger.ms", "5")])
    >>> kafka_overrides(ns)
    {'sasl_password': 's', 'extra': {'linger.ms': '5'}, 'bootstrap_servers': 'b:9092'}
    """
    out: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for key, value in getattr(args, "kafka_properties", None) or ():
        field = _TYPED_LIBRDKAFKA_KEYS.get(key)
        if field is None:
            extra[key] = value
        else:
            out[field] = value
    if extra:
        out["extra"] = extra
    if getattr(args, "bootstrap_servers", None):
        out["bootstrap_servers"] = args.bootstrap_servers
    return out


def settings_or_exit(args: argparse.Namespace | None = None) -> Settings:
    """The settings of a command, ``-b`` and ``-X`` of ``args`` over the environment over the
    configuration file (``--config``, else ``STREAMFOREST_CONFIG``): on a configuration
    problem, say what to fix on stderr and exit with code 2 (before anything connects or
    consumes)."""
    kafka = kafka_overrides(args) if args is not None else {}
    config_file = getattr(args, "config", None) or None
    try:
        settings = load_settings(config_file=config_file, **({"kafka": kafka} if kafka else {}))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    _LOADED_SECRETS[:] = settings.secret_values()
    return settings


def loaded_secrets() -> list[str]:
    """The secrets of the settings :func:`settings_or_exit` loaded (to mask in messages)."""
    return list(_LOADED_SECRETS)


def _config_command(args: argparse.Namespace) -> int:
    settings = settings_or_exit(args)
    print(json.dumps(settings.masked_dict(), indent=2))
    return 0


def add_parser(subparsers) -> None:
    """Register ``streamforest config``."""
    p = subparsers.add_parser(
        "config",
        help="print the effective configuration (configuration file and STREAMFOREST_* "
        "variables) as JSON",
        description="Print the effective configuration as JSON, secrets masked: the defaults, "
        "under the configuration file (--config), under STREAMFOREST_* variables, under -b/-X. "
        "Exit code 2 with the list of problems when the configuration is invalid.",
    )
    add_kafka_arguments(p)
    p.set_defaults(func=_config_command)
