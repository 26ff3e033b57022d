"""Any record of the instances topic, read and checked in one call: :func:`read_record`.

The instances topic carries three kinds of record (:mod:`schemas.kinds`): an Instance, an
InstanceBatch and a LabelEvent. :func:`read_record` reads the kind from the headers, then hands
the record to the kind's reader (:func:`~schemas.instances.read_instance`,
:func:`~schemas.batches.read_instance_batch`, :func:`~schemas.labels.decode_label_event`),
which holds it to its contract, to the limits and to the stream's columns; what it returns is
the record's own type. A record it cannot read raises :class:`~schemas.errors.DecodeError`
with the code the dead letter carries (:class:`~schemas.batches.BatchRowError`, a
``DecodeError`` naming the row, for a batch). What a stream does with the record (its task,
its classes, whether it takes batches or labels) is its pipeline's to say, not the contract's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .batches import NEW_STREAM, BatchRows, read_instance_batch
from .codec import DEFAULT_MAX_BYTES
from .errors import UNKNOWN_KIND, DecodeError, key_mismatch_error
from .instances import InstanceLimits, InstanceRow, read_instance
from .kinds import INSTANCE, INSTANCE_BATCH, LABEL, record_kind
from .labels import decode_label_event
from .messages import LabelEvent

#: what a batch's and a label's record are called in a reason ("the batch's stream"; an
#: instance's reader says "instance" itself)
NOUNS = {BatchRows: "batch", LabelEvent: "label"}


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
        (:class:`~schemas.instances.InstanceLimits`).

    Raises
    ------
    DecodeError
        ``unknown_kind`` for an ``sf-kind`` no contract of the topic has, ``key_mismatch``
        for a record of another stream than ``stream``, ``unknown_feature`` for ``x`` as a
        map on a stream whose features have no names; otherwise as the kind's reader raises
        it (:func:`~schemas.instances.read_instance`,
        :func:`~schemas.batches.read_instance_batch`,
        :func:`~schemas.labels.decode_label_event`).

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
    if kind == INSTANCE:  # the key is checked between the instance's own checks
        return read_instance(value, headers, stream=stream, columns=columns,
                             max_bytes=max_bytes, limits=limits)
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
    if stream is not None and record.stream != stream:  # the key decides the partition
        raise key_mismatch_error(stream, NOUNS[type(record)], record.stream)
    return record
