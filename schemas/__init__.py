"""Message contracts of streamforest's topics and their wire codec.

* :mod:`schemas.messages`: the versioned contracts (:class:`Instance`, :class:`FeatureArrival`,
  :class:`Prediction`, :class:`DriftAlert`, :class:`Ranking`).
* :mod:`schemas.batches`: :class:`InstanceBatch` (many rows of one stream in one record) and
  :class:`PredictionBatch` (the worker's predictions for them).
* :mod:`schemas.checkpoint`: :class:`StreamCheckpoint` (one stream's state and the input it
  covers) and :class:`CheckpointManifest` (where a partition's latest checkpoint is).
* :mod:`schemas.deadletter`: headers of dead-lettered records.
* :mod:`schemas.codec`: msgpack/JSON encoding and validating decoding.
* :mod:`schemas.records`: any record of the instances topic in one call (:func:`read_record`),
  handed to its kind's reader: :mod:`schemas.instances` (an Instance, its limits and columns),
  :mod:`schemas.batches` (an InstanceBatch), :mod:`schemas.labels` (a LabelEvent).
* :mod:`schemas.errors`: :class:`DecodeError`, the one error of decoding.
* :mod:`schemas.values`: what every value that enters must be (text, finite and bounded numbers).
"""

from __future__ import annotations

from .batches import InstanceBatch, PredictionBatch, decode_instance_batch
from .checkpoint import CheckpointManifest, StreamCheckpoint, state_equal
from .codec import (
    CONTENT_TYPE,
    DEFAULT_MAX_BYTES,
    JSON,
    MSGPACK,
    decode,
    decode_state,
    encode,
    encode_state,
)
from .deadletter import (
    ERROR_CLASS,
    ERROR_CODE,
    REASON,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    WORKER_VERSION,
    deadletter_headers,
    deadletter_record,
    parse_deadletter_headers,
)
from .errors import CODES, DecodeError
from .instances import decode_instance, instance_features
from .messages import (
    MESSAGE_TYPES,
    SCHEMA_VERSIONS,
    Contract,
    DriftAlert,
    FeatureArrival,
    Instance,
    LabelEvent,
    Prediction,
    Ranking,
)

__all__ = [
    "CODES",
    "CONTENT_TYPE",
    "DEFAULT_MAX_BYTES",
    "ERROR_CLASS",
    "ERROR_CODE",
    "JSON",
    "MESSAGE_TYPES",
    "MSGPACK",
    "REASON",
    "SCHEMA_VERSIONS",
    "SOURCE_OFFSET",
    "SOURCE_PARTITION",
    "SOURCE_TOPIC",
    "WORKER_VERSION",
    "CheckpointManifest",
    "Contract",
    "DecodeError",
    "DriftAlert",
    "FeatureArrival",
    "Instance",
    "LabelEvent",
    "InstanceBatch",
    "Prediction",
    "PredictionBatch",
    "Ranking",
    "StreamCheckpoint",
    "deadletter_headers",
    "deadletter_record",
    "decode",
    "decode_instance",
    "decode_instance_batch",
    "decode_state",
    "encode",
    "encode_state",
    "instance_features",
    "parse_deadletter_headers",
    "state_equal",
]
