"""Reading a LabelEvent record: :func:`decode_label_event`.

A LabelEvent is read as the codec reads any contract (:func:`~schemas.codec.decode`); its
label and id are then held to the limits an Instance's are held to
(:func:`~schemas.instances.check_label_and_id`), so that a label that arrives late carries
no more than one sent with its instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .codec import DEFAULT_MAX_BYTES, decode
from .instances import InstanceLimits, check_label_and_id
from .messages import LabelEvent


def decode_label_event(
    value: bytes,
    headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: InstanceLimits | None = None,
) -> LabelEvent:
    """Decode a :class:`~schemas.messages.LabelEvent`, its label and id held to ``limits``
    as an Instance's are (:func:`~schemas.codec.decode` otherwise).

    Examples
    --------
    >>> from schemas.codec import encode
    >>> value, headers = encode(LabelEvent(stream="s1", id=7, y="UP", ts=90))
    >>> decode_label_event(value, headers).y
    'UP'
    """
    event = decode(value, LabelEvent, headers, max_bytes=max_bytes)
    if limits is not None:
        check_label_and_id(event, limits)
    return event
