"""What kind of record a record on the instances topic is: its ``sf-kind`` header.

The instances topic carries three kinds of record, all keyed by stream id, so that a stream's
records share one partition and keep their order:

=====================  =================  ==========================================
``sf-kind`` header     contract           what it is
=====================  =================  ==========================================
(none)                 ``Instance``       one feature row, labelled or not
``instance-batch``     ``InstanceBatch``  many consecutive rows of one stream
``label``              ``LabelEvent``     the label of an instance sent earlier
=====================  =================  ==========================================
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: header naming the contract of a record on the instances topic
KIND_HEADER = "sf-kind"
#: an Instance (a record without the header is one too)
INSTANCE = "instance"
#: an :class:`schemas.batches.InstanceBatch`
INSTANCE_BATCH = "instance-batch"
#: a :class:`schemas.messages.LabelEvent`
LABEL = "label"


def record_kind(headers: Iterable[tuple[str, Any]] | None) -> str:
    """The kind a record's headers declare (:data:`INSTANCE` without the header); a value
    that is not text comes back as it reads, and no contract takes it.

    Examples
    --------
    >>> record_kind(None), record_kind([("sf-kind", b"label")])
    ('instance', 'label')
    >>> record_kind([("content-type", b"application/json"), ("sf-kind", "instance-batch")])
    'instance-batch'
    """
    if not headers:
        return INSTANCE
    for key, raw in headers:
        if key == KIND_HEADER:
            if isinstance(raw, bytes):
                return raw.decode("utf-8", "replace")
            return raw if isinstance(raw, str) else repr(raw)
    return INSTANCE
