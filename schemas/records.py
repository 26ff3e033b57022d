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
from typing import Any

from .batches import NEW_STREAM, BatchRows, read_instance_batch
from .codec import DEFAULT_MAX_BYTES, InstanceLimits, decode_instance, decode_label_event
from .errors import UNKNOWN_KIND, DecodeError
from .kinds import INSTANCE, INSTANCE_BATCH, LABEL, record_kind
from .messages import Instance, LabelEvent

#: what each kind's record is called in a reason ("the instance's stream")
NOUNS = {Instance: "instance", BatchRows: "batch", LabelEvent: "label"}


def read_record(
    value: bytes,
    headers: Iterable[tuple[str, Any]] | None,
    *,
    columns: tuple[int, Sequence[str] | None] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: InstanceLimits | None = None,
) -> Instance | BatchRows | LabelEvent:
    """The Instance, the InstanceBatch's rows or the LabelEvent a record holds.

    Parameters
    ----------
    value, headers
        The record's bytes and headers (``sf-kind`` names its kind; none: an Instance).
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
        ``unknown_kind`` for an ``sf-kind`` no contract of the topic has; otherwise as the
        kind's reader raises it (:func:`~schemas.codec.decode_instance`,
        :func:`~schemas.batches.read_instance_batch`,
        :func:`~schemas.codec.decode_label_event`).

    Examples
    --------
    >>> from schemas.codec import encode
    >>> read_record(*encode(LabelEvent(stream="s1", id=7, y="UP", ts=90))).y
    'UP'
    >>> read_record(*encode(Instance(stream="s1", id=1, ts=0, x=[0.5])), columns=(1, None)).x
    [0.5]
    >>> try:
    ...     read_record(b"{}", [("sf-kind", b"model")])
    ... except DecodeError as exc:
    ...     print(exc.code)
    unknown_kind
    """
    kind = record_kind(headers)
    if kind == INSTANCE:
        n_features, names = columns if columns is not None else (None, None)
        return decode_instance(value, headers, max_bytes=max_bytes, n_features=n_features,
                               feature_names=names, limits=limits)
    if kind == INSTANCE_BATCH:
        names = columns[1] if columns is not None else NEW_STREAM
        return read_instance_batch(value, headers, max_bytes=max_bytes, limits=limits,
                                   feature_names=names)
    if kind == LABEL:
        return decode_label_event(value, headers, max_bytes=max_bytes, limits=limits)
    raise DecodeError(UNKNOWN_KIND, f"header sf-kind {kind!r} names no record kind of the "
                      f"instances topic ({INSTANCE_BATCH!r} or {LABEL!r}; none for an Instance)")
