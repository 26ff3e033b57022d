"""Reading an Instance record: :func:`read_instance`, :func:`decode_instance` and their checks.

An Instance is read one of two ways, with the same answer:

* the plain path (:func:`read_plain_instance`): a small msgpack map without headers, of a
  stream whose columns are fixed, unpacked and held to plain type checks
  (:func:`plain_instance_fields`); anything they do not take goes the full way;
* the full path (:func:`decode_instance`): the codec's :func:`~schemas.codec.decode` with
  the same plain checks as its plain path (:func:`_fast_instance`): validation decides what
  they do not accept, and gives the answer and the error. The plain checks only ever accept what
  the contract accepts, with the values it gives (the tests verify it on generated and
  malformed messages), so the accept/reject behaviour is the full validation's by
  construction.

Either way the instance is then held to :class:`InstanceLimits` (:func:`check_limits`) and to
its stream's columns (:func:`instance_features`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgpack

from . import errors as E
from .codec import DEFAULT_MAX_BYTES, constructed, decode
from .errors import DecodeError, key_mismatch_error
from .messages import INT64_MAX, INT64_MIN, MAX_NAME_LENGTH, Instance
from .values import MAX_MAGNITUDE, finite_floats, is_text

_unpackb = msgpack.unpackb
_INSTANCE_FIELDS = tuple(Instance.model_fields)
_INSTANCE_KEYS = frozenset(_INSTANCE_FIELDS)
_INSTANCE_VERSIONS = Instance.versions


# =========================================================================== limits


@dataclass(frozen=True)
class InstanceLimits:
    """Caps on what one instance may carry, so that every output derived from it stays far
    below a topic's message size (a prediction repeats every class label; a ranking, every
    feature name).

    Examples
    --------
    >>> check_limits(Instance(stream="s", id=1, ts=0, x=[1.0, 2.0], y="x" * 9),
    ...              InstanceLimits(max_label_length=8))
    Traceback (most recent call last):
    ...
    schemas.errors.DecodeError: too_long at y: the class label has 9 characters; the limit is 8
    """

    max_label_length: int = 256
    max_features: int = 2000
    max_feature_name_length: int = 256


def check_label_and_id(msg, limits: InstanceLimits) -> None:
    """Raise ``too_long`` when the label or the id of ``msg`` (an Instance or a LabelEvent)
    is longer than ``limits``."""
    for where, value, what in (("y", msg.y, "class label"), ("id", msg.id, "instance id")):
        if type(value) is str and len(value) > limits.max_label_length:
            raise DecodeError(E.TOO_LONG, f"the {what} has {len(value)} characters; the limit "
                              f"is {limits.max_label_length}", where)


def check_limits(inst: Instance, limits: InstanceLimits) -> None:
    """Raise ``too_long`` or ``too_many_features`` when ``inst`` exceeds ``limits``."""
    check_label_and_id(inst, limits)
    if len(inst.x) > limits.max_features:
        raise DecodeError(E.TOO_MANY_FEATURES, f"the instance has {len(inst.x)} features; the "
                          f"limit is {limits.max_features}", "x")
    if type(inst.x) is dict:
        for name in inst.x:
            if len(name) > limits.max_feature_name_length:
                raise DecodeError(E.TOO_LONG, f"a feature name has {len(name)} characters; the "
                                  f"limit is {limits.max_feature_name_length}",
                                  f"x[{name[:32]!r}...]")


# =========================================================================== plain checks


def plain_instance_fields(d: dict) -> tuple | None:
    """``(v, stream, id, ts, x, y, weight)`` of an unpacked instance map, from plain type checks.

    Accepts exactly the common, well-typed case (floats in ``x``, no coercion needed) and
    returns ``None`` for anything else, which full validation then decides. It never accepts
    what :class:`Instance` would refuse, and the values are the ones validation would give.
    The plain path (:func:`read_plain_instance`) and the full one (:func:`decode_instance`)
    share these checks.
    """
    common = plain_fields(d, _INSTANCE_KEYS, _INSTANCE_VERSIONS)
    if common is None:
        return None
    x = d.get("x")
    if type(x) is list:
        if not x or not finite_floats(x):
            return None
    elif type(x) is dict:
        if not x or not finite_floats(x.values()):
            return None
        for k in x:
            if type(k) is not str or not is_text(k):
                return None
    else:
        return None
    weight = d.get("weight")
    if weight is not None and (type(weight) is not float or not 0.0 <= weight <= MAX_MAGNITUDE):
        return None
    v, stream, ident, ts, y = common
    return v, stream, ident, ts, x, y, weight


def plain_fields(d: dict, keys: frozenset, versions: frozenset) -> tuple | None:
    """``(v, stream, id, ts, y)`` of an unpacked map of a contract with these fields (an
    Instance's or a LabelEvent's) and no other than ``keys``, from plain type checks;
    ``None`` for anything they do not take (the label may be missing: ``None``)."""
    if not d.keys() <= keys:
        return None
    v = d.get("v", 1)
    if type(v) is not int or v not in versions:
        return None
    stream = d.get("stream")
    # strings from msgpack are always text; from JSON, load() refused lone surrogates: the
    # checks stay so that a map built any other way is held to what the contract holds it to
    if type(stream) is not str or not 0 < len(stream) <= MAX_NAME_LENGTH or not is_text(stream):
        return None
    ident = d.get("id")
    if type(ident) is int:
        if not INT64_MIN <= ident <= INT64_MAX:
            return None
    elif type(ident) is not str or not is_text(ident):
        return None
    ts = d.get("ts")
    if type(ts) is not int or not 0 <= ts <= INT64_MAX:
        return None
    y = d.get("y")
    if y is not None:
        ty = type(y)
        if ty is int:
            if not INT64_MIN <= y <= INT64_MAX:
                return None
        elif ty is list:
            if not y or not finite_floats(y):
                return None
        elif ty is float:  # one regression target, finite and within +-MAX_MAGNITUDE
            if not finite_floats((y,)):
                return None
        elif ty is not str or not is_text(y):
            return None
    return v, stream, ident, ts, y


def _fast_instance(d: dict) -> Instance | None:
    """An Instance built from :func:`plain_instance_fields`, or None for full validation."""
    fields = plain_instance_fields(d)
    if fields is None:
        return None
    v, stream, ident, ts, x, y, weight = fields
    return constructed(Instance, {"v": v, "stream": stream, "id": ident, "ts": ts, "x": x,
                                  "y": y, "weight": weight}, d)


# =========================================================================== columns


def instance_features(inst: Instance, feature_names: Sequence[str] | None = None) -> list[float]:
    """An instance's feature values as a row in the stream's feature order.

    Parameters
    ----------
    inst : Instance
        A decoded instance.
    feature_names : list of str, optional
        The stream's feature names in column order. A list ``x`` must have as many values; a
        map ``x`` must have exactly these names. Without names, a map is read in its own
        order (the order that fixes a new stream's columns).

    Raises
    ------
    DecodeError
        ``feature_count`` (a list of the wrong length), ``missing_feature`` or
        ``unknown_feature`` (a map whose names differ from the stream's).

    Examples
    --------
    >>> inst = Instance(stream="s", id=1, ts=0, x={"b": 2.0, "a": 1.0})
    >>> instance_features(inst, ["a", "b"])
    [1.0, 2.0]
    """
    x = inst.x
    if type(x) is list:
        if feature_names is not None and len(x) != len(feature_names):
            raise _count_error(len(feature_names), len(x))
        return x
    if feature_names is None:
        return list(x.values())
    try:
        row = [x[name] for name in feature_names]
    except KeyError:
        missing = [name for name in feature_names if name not in x]
        raise DecodeError(
            E.MISSING_FEATURE,
            f"feature {missing[0]!r} of the stream is missing"
            + (f" ({len(missing)} missing: {_names(missing)})" if len(missing) > 1 else ""),
            f"x[{missing[0]!r}]",
        ) from None
    if len(x) != len(row):
        known = set(feature_names)
        unknown = [k for k in x if k not in known]
        raise DecodeError(
            E.UNKNOWN_FEATURE,
            f"feature {unknown[0]!r} is not one of the stream's {len(known)} features "
            f"({_names(feature_names)})",
            f"x[{unknown[0]!r}]",
        )
    return row


def _names(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(map(str, names[:limit]))
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _count_error(expected: int, got: int) -> DecodeError:
    return DecodeError(
        E.FEATURE_COUNT,
        f"the stream has {expected} features, this instance has {got}",
        "x",
    )


# =========================================================================== the full path


def decode_instance(
    value: bytes,
    headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    n_features: int | None = None,
    feature_names: Sequence[str] | None = None,
    limits: InstanceLimits | None = None,
) -> Instance:
    """Decode an :class:`Instance` on the hot path, optionally checking the stream's width.

    Same result and same errors as ``decode(value, Instance, headers)``, faster for
    well-formed messages.

    Parameters
    ----------
    value, headers, max_bytes
        As in :func:`schemas.codec.decode`.
    n_features : int, optional
        The stream's feature count; another count raises ``feature_count``.
    feature_names : list of str, optional
        The stream's feature names; checked as in :func:`instance_features`.
    limits : InstanceLimits, optional
        Caps on label, id and feature-name lengths and on the feature count.

    Examples
    --------
    >>> import msgpack
    >>> value = msgpack.packb({"v": 1, "stream": "s1", "id": 7, "ts": 0, "x": [0.5, 1.5]})
    >>> decode_instance(value, n_features=2).x
    [0.5, 1.5]
    >>> decode_instance(value, n_features=3)
    Traceback (most recent call last):
    ...
    schemas.errors.DecodeError: feature_count at x: the stream has 3 features, this instance has 2
    """
    inst = decode(value, Instance, headers, max_bytes=max_bytes, plain=_fast_instance)
    return _checked_instance(inst, n_features, feature_names, limits)[0]


def _checked_instance(
    inst: Instance,
    n_features: int | None,
    feature_names: Sequence[str] | None,
    limits: InstanceLimits | None,
) -> tuple[Instance, list[float] | None]:
    """A decoded Instance checked as :func:`decode_instance` checks it (in the same order),
    and the row it checked: the features in ``feature_names``' order
    (:func:`instance_features`), ``None`` without names."""
    if limits is not None:
        check_limits(inst, limits)
    row = instance_features(inst, feature_names) if feature_names is not None else None
    if n_features is not None and len(inst.x) != n_features:
        raise _count_error(n_features, len(inst.x))
    return inst, row


# =========================================================================== the reader


class InstanceRow(NamedTuple):
    """An Instance as its stream takes it: ``row`` holds its features in the stream's column
    order (a new stream's: the record's own order), ``x`` the features as sent."""

    stream: str
    id: int | str
    ts: int
    y: Any
    x: list | dict
    row: list


def read_instance(value: bytes, headers: Iterable[tuple[str, Any]] | None, *, stream: str | None = None,
                  columns: tuple[int, Sequence[str] | None] | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES, limits: InstanceLimits | None = None) -> InstanceRow:
    """The row of an Instance record, checked as :func:`schemas.records.read_record` says
    (the parameters are its own): the plain path when it takes the record, else the full one.

    Raises
    ------
    DecodeError
        As :func:`decode_instance` raises it, then ``key_mismatch`` for an instance of another
        stream than ``stream``, ``unknown_feature`` for ``x`` as a map on a stream whose
        features have no names.

    Examples
    --------
    >>> from schemas.codec import encode
    >>> inst = Instance(stream="s1", id=1, ts=0, x={"b": 2.0, "a": 1.0})
    >>> read_instance(*encode(inst), stream="s1", columns=(2, ["a", "b"])).row
    [1.0, 2.0]
    """
    if headers is None and columns is not None:  # the common case, without a model
        plain = _plain_row(value, stream, columns[0], max_bytes, limits)
        if plain is not None:
            return plain
    n_features, names = columns if columns is not None else (None, None)
    inst = decode(value, Instance, headers, max_bytes=max_bytes, plain=_fast_instance)
    inst, row = _checked_instance(inst, n_features, names, limits)
    if stream is not None and inst.stream != stream:
        raise key_mismatch_error(stream, "instance", inst.stream)
    if row is None:  # not read in the stream's named columns
        if columns is not None and isinstance(inst.x, dict):
            # names mean nothing to a stream whose columns have none: reading the map by
            # position would put values under the wrong features
            raise DecodeError(E.UNKNOWN_FEATURE, "x is a map, but this stream's features have "
                              "no names (its first instance sent x as a list): send x as a list "
                              "in the stream's order", "x")
        # a list in a stream without names; a new stream's (or one whose columns grow) first
        # record: in its own order
        row = instance_features(inst)
    return InstanceRow(inst.stream, inst.id, inst.ts, inst.y, inst.x, row)


# =========================================================================== the plain path


def read_plain_instance(value: bytes, max_bytes: int):
    """``(stream, id, ts, x, y)`` of a plain instance, or ``None`` to use full validation.

    ``value`` must come without headers (a ``content-type`` header goes the full way). The
    type checks are those of :func:`plain_instance_fields`, narrowed to the plain case: a
    small msgpack map, a list ``x``, a class label (or none) and no weight. It never accepts
    what full validation refuses, and gives the values it gives.

    Examples
    --------
    >>> import msgpack
    >>> read_plain_instance(msgpack.packb({"v": 1, "stream": "s1", "id": 7, "ts": 3,
    ...                                    "x": [0.5], "y": "UP"}), 1000)
    ('s1', 7, 3, [0.5], 'UP')
    """
    if value is None or not 0 < len(value) <= max_bytes or not 0x80 <= value[0] <= 0x8F:
        return None  # only small msgpack maps (fixmap) are taken here
    try:
        d = _unpackb(value)
    except Exception:  # noqa: BLE001 (the full path reports the exact error)
        return None
    fields = plain_instance_fields(d)
    if fields is None:
        return None
    _v, stream, ident, ts, x, y, weight = fields
    if type(x) is not list or type(y) is list or weight is not None:
        return None
    return stream, ident, ts, x, y


def _plain_row(value, stream, n_features: int, max_bytes: int, limits) -> InstanceRow | None:
    """:func:`read_plain_instance` of a stream's instance of its width within ``limits``;
    ``None`` for anything else (full validation says why, or takes it)."""
    plain = read_plain_instance(value, max_bytes)
    if plain is None or plain[0] != stream or len(plain[3]) != n_features:
        return None
    _stream, ident, ts, x, y = plain
    if limits is not None:
        longest = limits.max_label_length
        if (type(ident) is str and len(ident) > longest) or (
                type(y) is str and len(y) > longest):
            return None
    return InstanceRow(stream, ident, ts, y, x, x)
