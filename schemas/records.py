"""Any record of the instances topic, read and checked in one call: :func:`read_record`.

The instances topic carries three kinds of record (:mod:`schemas.kinds`): an Instance, an
InstanceBatch and a LabelEvent. :func:`read_record` reads the kind from the headers, then the
record as its contract says, held to the limits and to the stream's columns; what it returns
is the record's own type. A record it cannot read raises :class:`~schemas.errors.DecodeError`
with the code the dead letter carries (:class:`~schemas.batches.BatchRowError`, a
``DecodeError`` naming the row, for a batch). What a stream does with the record (its task,
its classes, whether it takes batches or labels) is its pipeline's to say, not the contract's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgpack

from .batches import NEW_STREAM, BatchRows, read_instance_batch
from .codec import (
    DEFAULT_MAX_BYTES,
    InstanceLimits,
    decode_instance_row,
    decode_label_event,
    instance_features,
    plain_instance_fields,
)
from .errors import KEY_MISMATCH, UNKNOWN_FEATURE, UNKNOWN_KIND, DecodeError
from .kinds import INSTANCE, INSTANCE_BATCH, LABEL, record_kind
from .messages import LabelEvent

_unpackb = msgpack.unpackb


class InstanceRow(NamedTuple):
    """An Instance as its stream takes it: ``row`` holds its features in the stream's column
    order (a new stream's: the record's own order), ``x`` the features as sent."""

    stream: str
    id: int | str
    ts: int
    y: Any
    x: list | dict
    row: list


#: what each kind's record is called in a reason ("the instance's stream")
NOUNS = {InstanceRow: "instance", BatchRows: "batch", LabelEvent: "label"}


def read_record(
    value: bytes,
    headers: Iterable[tuple[str, Any]] | None,
    *,
    stream: str | None = None,
    columns: tuple[int, Sequence[str] | None] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: InstanceLimits | None = None,
) -> InstanceRow | BatchRows | LabelEvent:
    """The Instance's row, the InstanceBatch's rows or the LabelEvent a record holds.

    Parameters
    ----------
    value, headers
        The record's bytes and headers (``sf-kind`` names its kind; none: an Instance).
    stream : str, optional
        The stream its message key names: a record of another stream is refused
        (``key_mismatch``).
    columns : (int, list of str or None), optional
        The stream's feature count and names when its columns are fixed: an Instance is
        checked against them and a batch's rows are read in their order. ``None``: a new
        stream (or one whose columns grow), whose first record's columns become its own.
    max_bytes, limits
        The size limit and the caps on labels, ids and feature names
        (:class:`~schemas.codec.InstanceLimits`).

    Raises
    ------
    DecodeError
        ``unknown_kind`` for an ``sf-kind`` no contract of the topic has, ``key_mismatch``
        for a record of another stream than ``stream``, ``unknown_feature`` for ``x`` as a
        map on a stream whose features have no names; otherwise as the kind's reader raises
        it (:func:`~schemas.codec.decode_instance`, :func:`~schemas.batches.read_instance_batch`,
        :func:`~schemas.codec.decode_label_event`).

    Examples
    --------
    >>> from schemas.codec import encode
    >>> read_record(*encode(LabelEvent(stream="s1", id=7, y="UP", ts=90))).y
    'UP'
    >>> from schemas.messages import Instance
    >>> inst = Instance(stream="s1", id=1, ts=0, x={"b": 2.0, "a": 1.0})
    >>> read_record(*encode(inst), stream="s1", columns=(2, ["a", "b"])).row
    [1.0, 2.0]
    >>> try:
    ...     read_record(b"{}", [("sf-kind", b"model")])
    ... except DecodeError as exc:
    ...     print(exc.code)
    unknown_kind
    """
    kind = record_kind(headers)
    if kind == INSTANCE:
        if headers is None and columns is not None:  # the common case, without a model
            plain = _plain_row(value, stream, columns[0], max_bytes, limits)
            if plain is not None:
                return plain
        return _instance_row(value, headers, stream, columns, max_bytes, limits)
    if kind == INSTANCE_BATCH:
        names = columns[1] if columns is not None else NEW_STREAM
        record = read_instance_batch(value, headers, max_bytes=max_bytes, limits=limits,
                                     feature_names=names)
    elif kind == LABEL:
        record = decode_label_event(value, headers, max_bytes=max_bytes, limits=limits)
    else:
        raise DecodeError(UNKNOWN_KIND, f"header sf-kind {kind!r} names no record kind of the "
                          f"instances topic ({INSTANCE_BATCH!r} or {LABEL!r}; none for an "
                          "Instance)")
    _same_stream(record, stream)
    return record


def _same_stream(record, stream: str | None) -> None:
    """A record names the stream its key names (the key decides the partition)."""
    if stream is not None and record.stream != stream:
        raise DecodeError(KEY_MISMATCH, f"message key {stream!r} differs from the "
                          f"{NOUNS[type(record)]}'s stream {record.stream!r}")


def _instance_row(value, headers, stream, columns, max_bytes, limits) -> InstanceRow:
    """An Instance fully validated, its row in the stream's column order."""
    n_features, names = columns if columns is not None else (None, None)
    inst, row = decode_instance_row(value, headers, max_bytes=max_bytes, n_features=n_features,
                                    feature_names=names, limits=limits)
    record = InstanceRow(inst.stream, inst.id, inst.ts, inst.y, inst.x, row)
    _same_stream(record, stream)
    if row is not None:  # read in the stream's named columns
        return record
    if columns is not None and isinstance(inst.x, dict):
        # names mean nothing to a stream whose columns have none: reading the map by
        # position would put values under the wrong features
        raise DecodeError(UNKNOWN_FEATURE, "x is a map, but this stream's features have no "
                          "names (its first instance sent x as a list): send x as a list in "
                          "the stream's order", "x")
    # a list in a stream without names; a new stream's (or one whose columns grow) first
    # record: in its own order
    return record._replace(row=instance_features(inst))


def read_plain_instance(value: bytes, max_bytes: int):
    """``(stream, id, ts, x, y)`` of a plain instance, or ``None`` to use full validation.

    ``value`` must come without headers (a ``content-type`` header goes the full way). The
    type checks are those of :func:`schemas.codec.plain_instance_fields`, narrowed to the
    plain case: a small msgpack map, a list ``x``, a class label (or none) and no weight. It
    never accepts what full validation refuses, and gives the values it gives.

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
