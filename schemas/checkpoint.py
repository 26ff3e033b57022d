"""Checkpoint envelope: a learner state, tagged with the input offset it covers.

A :class:`Checkpoint` holds one state (``kind``, ``params``, named ``arrays``, plain
``extra`` values) of one stream, and the position in the input it reflects: ``offset`` is the
next input offset the state covers (last processed + 1), so recovery replays from exactly
there. The same envelope stores a whole per-stream pipeline by nesting: ``extra`` may hold any
structure :func:`~schemas.codec.encode_state` accepts, numpy arrays included, e.g.
``{"learners": {"predictor": tree.to_state(), "detector": adwin.to_state()}}``.

Arrays travel as (dtype, shape, bytes) through the codec (:mod:`schemas.codec`), never pickled.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from .codec import ARRAY_KINDS, decode_state, encode_state
from .messages import Contract, Count, Name, Timestamp

__all__ = ["Checkpoint", "decode_state", "encode_state", "state_equal"]

_SCALARS = (str, int, float, bool, bytes, type(None))


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


class Checkpoint(Contract):
    """The state of one stream's learner (or pipeline) at an input offset.

    Parameters
    ----------
    v : int
        Schema version (1).
    stream : str
        Stream id.
    kind : str
        Learner kind (``Learner.kind``), or a pipeline kind when ``extra`` nests several.
    params : dict
        Constructor keyword arguments (plain values).
    topic, partition : str, int
        Input topic partition the offset refers to.
    offset : int
        Next input offset the state covers (last processed + 1).
    arrays : dict of str to numpy.ndarray
        The learner's named state arrays.
    extra : dict
        Other plain values (class labels, feature names, nested states).
    ts : int
        Time of the checkpoint (ms).

    Examples
    --------
    >>> from schemas.codec import encode, decode
    >>> cp = Checkpoint(stream="s1", kind="adwin", topic="sf.instances", partition=0,
    ...                 offset=10, arrays={"n_seen": np.array([10])}, ts=0)
    >>> value, headers = encode(cp)
    >>> decode(value, Checkpoint, headers, max_bytes=len(value)).arrays["n_seen"]
    array([10])
    """

    model_config = ConfigDict(
        strict=True, extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=True
    )

    # the codec decodes array extension types (msgpack) and tagged arrays (JSON) for this model
    wire_arrays: ClassVar[bool] = True

    stream: Name
    kind: Name
    params: dict[str, Any] = Field(default_factory=dict)
    topic: Name
    partition: Annotated[int, Field(ge=0, le=2**31 - 1)]
    offset: Count
    arrays: dict[str, np.ndarray] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    ts: Timestamp

    @field_validator("arrays")
    @classmethod
    def _storable_arrays(cls, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for name, arr in arrays.items():
            _check_plain(arr, f"arrays[{name!r}]")
        return arrays

    @field_validator("params", "extra")
    @classmethod
    def _plain_values(cls, value: dict[str, Any], info) -> dict[str, Any]:
        _check_plain(value, info.field_name)
        return value

    @classmethod
    def from_learner_state(
        cls, state: dict, *, stream: str, topic: str, partition: int, offset: int, ts: int
    ) -> Checkpoint:
        """Wrap ``Learner.to_state()`` output (``kind``, ``params``, ``extra``, ``arrays``)."""
        return cls(
            stream=stream,
            kind=state["kind"],
            params=state.get("params") or {},
            arrays=state.get("arrays") or {},
            extra=state.get("extra") or {},
            topic=topic,
            partition=partition,
            offset=offset,
            ts=ts,
        )

    def learner_state(self) -> dict:
        """The state in the form ``Learner.from_state`` takes."""
        return {"kind": self.kind, "params": self.params, "extra": self.extra, "arrays": self.arrays}

    def __eq__(self, other: object) -> bool:
        """Exact equality, arrays compared by dtype, shape and bytes (see :func:`state_equal`).

        Pydantic's field-by-field ``==`` cannot compare arrays (their ``==`` is elementwise).
        """
        if type(other) is not type(self):
            return NotImplemented
        return state_equal(dict(self), dict(other))

    __hash__ = None  # mutable, like every pydantic model that is not frozen


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
