"""Reading a LabelEvent record: :func:`decode_label_event`.

A LabelEvent is read as an Instance is: the codec's :func:`~schemas.codec.decode` with the
plain type checks an Instance's fields share (:func:`~schemas.instances.plain_fields`) as its
plain path, validation deciding what they do not accept (and giving the answer and the
error). Its label and id are then held to the limits an Instance's are held to
(:func:`~schemas.instances.check_label_and_id`), so that a label that arrives late carries
no more than one sent with its instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .codec import DEFAULT_MAX_BYTES, constructed, decode
from .instances import InstanceLimits, check_label_and_id, plain_fields
from .messages import LabelEvent

_LABEL_KEYS = frozenset(LabelEvent.model_fields)


def decode_label_event(
    value: bytes,
    headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: InstanceLimits | None = None,
) -> LabelEvent:
    """Decode a :class:`~schemas.messages.LabelEvent`, its label and id held to ``limits``
    as an Instance's are (as :func:`~schemas.codec.decode` decodes it otherwise).

    Examples
    --------
    >>> from schemas.codec import encode
    >>> value, headers = encode(LabelEvent(stream="s1", id=7, y="UP", ts=90))
    >>> decode_label_event(value, headers).y
    'UP'
    """
    event = decode(value, LabelEvent, headers, max_bytes=max_bytes, plain=_fast_label_event)
    if limits is not None:
        check_label_and_id(event, limits)
    return event


def _fast_label_event(d: dict) -> LabelEvent | None:
    """A LabelEvent from the plain checks of its fields (a label is required), or ``None``
    for full validation."""
    fields = plain_fields(d, _LABEL_KEYS, LabelEvent.versions)
    if fields is None or fields[4] is None:
        return None
    v, stream, ident, ts, y = fields
    return constructed(LabelEvent, {"v": v, "stream": stream, "id": ident, "y": y, "ts": ts},
                       d)
