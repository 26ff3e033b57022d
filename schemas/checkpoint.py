"""Checkpoint contracts: one stream's state, and the manifest of a partition's checkpoint.

What the worker writes to the compacted checkpoints topic, and reads back on restore:

* :class:`StreamCheckpoint`: the envelope of one stream's pipeline state: the consumer group,
  the input topic(s) and partition, the stream, its learners by role with their parameters
  (``config``), the input offsets the state covers (the next offset to process, per input
  topic), and the state itself (plain values and numpy arrays). Large envelopes are cut into
  chunks on the topic (:mod:`worker.checkpoint_store`).
* :class:`CheckpointManifest`: the last record of a partition's checkpoint: the offsets it
  covers and, for every stream, where the chunks of its latest envelope are.

Restore checks that an envelope's group, topics, partition, stream and offsets are the ones
the manifest it was found through names, so a record of another writer is never taken.

Arrays travel as (dtype, shape, bytes) through the codec (:mod:`schemas.codec`), never pickled.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .codec import ARRAY_KINDS, decode_state, encode_state
from .messages import Contract, Count, Name, Timestamp, cross_field_error

__all__ = ["CheckpointManifest", "StreamCheckpoint", "decode_state", "encode_state",
           "state_equal"]

_SCALARS = (str, int, float, bool, bytes, type(None))
Partition = Annotated[int, Field(ge=0, le=2**31 - 1)]


def _check_plain(value: Any, where: str) -> None:
    """Refuse values the state codec cannot carry, naming the first one."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str | int):
                raise PydanticCustomError(
                    "not_plain", "{where}: map keys must be strings or ints", {"where": where}
                )
            _check_plain(v, f"{where}[{k!r}]")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_plain(v, f"{where}[{i}]")
    elif isinstance(value, np.ndarray | np.generic):
        if value.dtype.kind not in ARRAY_KINDS or value.dtype.fields is not None:
            raise PydanticCustomError(
                "not_plain", "{where}: dtype {dtype} cannot be stored",
                {"where": where, "dtype": str(value.dtype)},
            )
    elif not isinstance(value, _SCALARS):
        raise PydanticCustomError(
            "not_plain", "{where}: values of type {type} cannot be stored",
            {"where": where, "type": type(value).__name__},
        )


class _Covering(Contract):
    """Fields of every checkpoint record: who wrote it and which input it covers."""

    group: Name
    topics: Annotated[list[Name], Field(min_length=1)]
    partition: Partition
    offsets: dict[str, Count]
    ts: Timestamp

    @model_validator(mode="after")
    def _offsets_per_topic(self):
        if sorted(self.offsets) != sorted(self.topics):
            raise cross_field_error("offsets", "must name exactly the input topics {topics}",
                           topics=", ".join(self.topics))
        return self


class StreamCheckpoint(_Covering):
    """One stream's pipeline state at input offsets (see the module doc).

    Parameters
    ----------
    v : int
        Schema version (1).
    group : str
        Consumer group of the worker that wrote it.
    topics : list of str
        Input topic(s) of the partition.
    partition : int
        Input partition (the checkpoint partition too).
    stream : str
        Stream id.
    config : dict
        The stream's learners by role and their parameters (its resolved profile).
    offsets : dict of str to int
        Per input topic, the next offset the state covers (last processed + 1).
    state : dict
        The pipeline's ``to_state()``: plain values and numpy arrays.
    ts : int
        Time of the checkpoint (ms).

    Examples
    --------
    >>> from schemas.codec import encode, decode
    >>> cp = StreamCheckpoint(group="g", topics=["sf.instances"], partition=0, stream="s1",
    ...                       config={"predictor": ["forgetful_tree"]},
    ...                       offsets={"sf.instances": 10}, state={"n": np.array([10])}, ts=0)
    >>> value, headers = encode(cp)
    >>> decode(value, StreamCheckpoint, headers, max_bytes=len(value)).state["n"]
    array([10])
    """

    model_config = ConfigDict(
        strict=True, extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=True
    )

    # the codec decodes array extension types (msgpack) and tagged arrays (JSON) for this model
    wire_arrays: ClassVar[bool] = True

    stream: Name
    config: dict[str, Any]
    state: dict[str, Any]

    @field_validator("config", "state")
    @classmethod
    def _plain_values(cls, value: dict[str, Any], info) -> dict[str, Any]:
        _check_plain(value, info.field_name)
        return value

    def __eq__(self, other: object) -> bool:
        """Exact equality, arrays compared by dtype, shape and bytes (see :func:`state_equal`).

        Pydantic's field-by-field ``==`` cannot compare arrays (their ``==`` is elementwise).
        """
        if type(other) is not type(self):
            return NotImplemented
        return state_equal(dict(self), dict(other))

    __hash__ = None  # mutable, like every pydantic model that is not frozen


ChunkSpan = Annotated[list[Count], Field(min_length=3, max_length=3)]


class CheckpointManifest(_Covering):
    """Where the latest checkpoint of an input partition is (see the module doc).

    ``streams`` maps each stream to ``[offset of its first chunk on the checkpoints topic,
    number of chunks, size of the envelope in bytes]``.

    Examples
    --------
    >>> m = CheckpointManifest(group="g", topics=["sf.instances"], partition=3,
    ...                        offsets={"sf.instances": 500}, ts=0, streams={"s1": [40, 2, 900]})
    >>> m.offsets["sf.instances"], m.streams["s1"][1]
    (500, 2)
    """

    streams: dict[str, ChunkSpan] = Field(default_factory=dict)


def state_equal(a: Any, b: Any) -> bool:
    """Exact structural equality of two states.

    Arrays and numpy scalars must agree in type, dtype, shape and bytes (so NaN equals the
    same NaN, and ``-0.0`` differs from ``0.0``); everything else in type and value (``1 != 1.0``,
    ``True != 1``). Lists and tuples are the same (the wire has only lists).

    Examples
    --------
    >>> state_equal({"a": np.zeros(2)}, {"a": np.zeros(2, dtype=np.float32)})
    False
    """
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, np.generic) or isinstance(b, np.generic):
        return (
            type(a) is type(b)
            and a.dtype == b.dtype
            and np.asarray(a).tobytes() == np.asarray(b).tobytes()
        )
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(state_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list | tuple):
        return (
            isinstance(b, list | tuple)
            and len(a) == len(b)
            and all(state_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if type(a) is not type(b):
        return False
    if type(a) is float and a != a:
        return b != b  # NaN
    return a == b
