"""Dead letters: messages the worker could not use, kept with the reason.

A dead letter is the original record, untouched (same key and value bytes, original headers
kept), plus headers that say why it was refused and where it came from. Nothing is re-encoded,
so a producer can fix and replay the exact bytes.

=========================  ==========================================================
header                     value (UTF-8 text)
=========================  ==========================================================
``sf-error-class``         exception class, e.g. ``DecodeError``
``sf-error-code``          machine code when there is one (``non_finite``, ...)
``sf-reason``              what is wrong, for a person (at most 2,000 characters)
``sf-source-topic``        topic the record was read from
``sf-source-partition``    its partition (decimal)
``sf-source-offset``       its offset (decimal)
``sf-worker-version``      streamforest version of the worker that refused it
``sf-row``                 an InstanceBatch refused for one row: the row's index (decimal)
=========================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ERROR_CLASS = "sf-error-class"
ERROR_CODE = "sf-error-code"
REASON = "sf-reason"
SOURCE_TOPIC = "sf-source-topic"
SOURCE_PARTITION = "sf-source-partition"
SOURCE_OFFSET = "sf-source-offset"
WORKER_VERSION = "sf-worker-version"
ROW = "sf-row"

HEADER_PREFIX = "sf-"
MAX_REASON_CHARS = 2000

# header name -> key of the parsed dict, and whether the value is an integer
_FIELDS = {
    ERROR_CLASS: ("error_class", False),
    ERROR_CODE: ("code", False),
    REASON: ("reason", False),
    SOURCE_TOPIC: ("topic", False),
    SOURCE_PARTITION: ("partition", True),
    SOURCE_OFFSET: ("offset", True),
    WORKER_VERSION: ("version", False),
    ROW: ("row", True),
}


#: a decimal header value (partition, offset, row)
_DECIMAL = r"^(0|[1-9][0-9]*)$"


def _optional(schema: dict) -> None:
    """A header that may be absent has no default value (a header is never null)."""
    schema.pop("default", None)


class DeadLetterHeaders(BaseModel):
    """The headers the worker adds to a dead letter: header name to UTF-8 text.

    A dead letter is the refused record as it came (key, value and its own headers) plus
    these headers, which follow its own. An instance's rows refused without a record of their
    own (a row whose output is over its topic's limit, a row a stream's pipeline refused)
    carry a msgpack map ``{"stream", "offset"}`` as value instead.

    Parameters
    ----------
    error_class : str
        Exception class, e.g. ``DecodeError``.
    code : str
        Machine code when there is one (``non_finite``, ``unknown_field``, ...).
    reason : str
        What is wrong, for a person (at most 2,000 characters).
    topic : str
        Topic the refused record was read from.
    partition, offset : str
        Its partition and offset, in decimal.
    version : str
        streamforest version of the worker that refused it.
    row : str
        An InstanceBatch refused for one row: the row's index, in decimal.

    Examples
    --------
    >>> h = deadletter_headers("DecodeError", "bad", "sf.instances", 2, 41, "0.1.0")
    >>> DeadLetterHeaders.model_validate({k: v.decode() for k, v in h}).offset
    '41'
    """

    # the original record's own headers are kept beside these
    model_config = ConfigDict(extra="allow", validate_by_alias=True, validate_by_name=False)

    error_class: str = Field(alias=ERROR_CLASS)
    code: str = Field(None, alias=ERROR_CODE, json_schema_extra=_optional)
    reason: str = Field(alias=REASON, max_length=MAX_REASON_CHARS)
    topic: str = Field(alias=SOURCE_TOPIC)
    partition: str = Field(alias=SOURCE_PARTITION, pattern=_DECIMAL)
    offset: str = Field(alias=SOURCE_OFFSET, pattern=_DECIMAL)
    version: str = Field(alias=WORKER_VERSION)
    row: str = Field(None, alias=ROW, pattern=_DECIMAL, json_schema_extra=_optional)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def deadletter_headers(
    error_class: str,
    reason: str,
    topic: str,
    partition: int,
    offset: int,
    version: str,
    *,
    code: str | None = None,
) -> list[tuple[str, bytes]]:
    """Headers that explain a dead letter.

    Parameters
    ----------
    error_class : str
        Name of the exception class (``type(exc).__name__``).
    reason : str
        Human explanation (``str(exc)``); clipped to :data:`MAX_REASON_CHARS`.
    topic, partition, offset : str, int, int
        Where the refused record was read.
    version : str
        The worker's version.
    code : str, optional
        Machine code (``DecodeError.code``).

    Returns
    -------
    list of (str, bytes)
        To append to the original record's headers.

    Examples
    --------
    >>> h = deadletter_headers("DecodeError", "bad", "sf.instances", 2, 41, "0.1.0")
    >>> parse_deadletter_headers(h)["offset"]
    41
    """
    headers = [
        (ERROR_CLASS, error_class.encode()),
        (REASON, _clip(reason).encode("utf-8", "replace")),
        (SOURCE_TOPIC, topic.encode()),
        (SOURCE_PARTITION, str(int(partition)).encode()),
        (SOURCE_OFFSET, str(int(offset)).encode()),
        (WORKER_VERSION, version.encode()),
    ]
    if code is not None:
        headers.insert(1, (ERROR_CODE, code.encode()))
    return headers


def parse_deadletter_headers(
    headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The dead-letter fields of a record's headers.

    Returns a dict with the keys present among ``error_class``, ``code``, ``reason``,
    ``topic``, ``partition`` (int), ``offset`` (int), ``version`` and ``row`` (int: the bad
    row of an InstanceBatch). Other headers (the
    original record's) are ignored; when a header repeats, the last one wins, as the
    dead-letter headers are appended after the original ones.
    """
    out: dict[str, Any] = {}
    if not headers:
        return out
    items = headers.items() if isinstance(headers, Mapping) else headers
    for name, raw in items:
        field = _FIELDS.get(name)
        if field is None:
            continue
        key, is_int = field
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
        if is_int:
            try:
                out[key] = int(text)
            except ValueError:
                raise ValueError(f"dead-letter header {name} is not an integer: {text!r}") from None
        else:
            out[key] = text
    return out


def deadletter_record(
    key: bytes | None,
    value: bytes | None,
    original_headers: Iterable[tuple[str, Any]] | None,
    error: BaseException,
    topic: str,
    partition: int,
    offset: int,
    version: str,
) -> tuple[bytes | None, bytes | None, list[tuple[str, Any]]]:
    """(key, value, headers) of the dead letter for a refused record.

    The original key, value and headers are kept as they were (earlier ``sf-*`` headers of a
    record that was already dead-lettered once are dropped, so the explanation is the
    current one); the dead-letter headers follow.
    """
    kept = [(k, v) for k, v in (original_headers or ()) if k not in _FIELDS]
    return (
        key,
        value,
        kept
        + deadletter_headers(
            type(error).__name__,
            str(error) or repr(error),
            topic,
            partition,
            offset,
            version,
            code=getattr(error, "code", None),
        ),
    )
