"""Record keys: every record of a stream carries the stream id as its key."""

from __future__ import annotations

from .pipeline import PipelineError


def stream_of_key(key: bytes | None) -> str:
    """The stream a record's key names: every record of a stream must carry its stream id as
    the key, since the key decides the partition, and so which worker holds the stream's
    state (a record without it would start a second copy of the stream elsewhere).

    Raises
    ------
    PipelineError
        ``missing_key`` without a key, ``invalid_key`` for a key that is not UTF-8.

    Examples
    --------
    >>> stream_of_key(b"s1")
    's1'
    >>> stream_of_key(None)
    Traceback (most recent call last):
    ...
    worker.pipeline.errors.PipelineError: missing_key: the record has no key: key every record by its stream id
    """
    if key is None:
        raise PipelineError("missing_key", "the record has no key: key every record by its "
                            "stream id")
    try:
        return key.decode()
    except UnicodeDecodeError:
        raise PipelineError("invalid_key", "the message key is not UTF-8") from None
