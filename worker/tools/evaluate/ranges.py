"""Which records of a topic an evaluation reads: start and end per partition.

A bound is ``earliest``, ``latest``, an offset (the same in every partition), or a time:
an ISO-8601 date-time (``2026-11-01T00:00:00Z``; without a zone it is UTC), ``@`` and
milliseconds since the epoch (``@1700000000000``), or a time before now (``now-30s``,
``now-15m``, ``now-2h``, ``now-1d``). A time maps in each partition to the first offset whose
record timestamp is at or after it (the broker's time index); past the end of a partition it
is the end. The range is ``[start, end)`` in every partition; ``latest`` is the end offset
when the evaluation starts (what arrives later is not read). ``streamforest tail --start``
takes the same bounds.

Examples
--------
>>> parse_bound("earliest"), parse_bound("1500"), parse_bound("@1700000000000")
(('earliest', None), ('offset', 1500), ('time', 1700000000000))
>>> parse_bound("2023-11-14T22:13:20Z")
('time', 1700000000000)
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import TopicPartition

_AGO = re.compile(r"^now-(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class RangeError(ValueError):
    """A bound that cannot be read, or a range with nothing in it (exit code 2)."""


def parse_bound(text: str) -> tuple[str, int | None]:
    """``(kind, value)`` of a bound: ``earliest``/``latest``, ``offset``, or ``time`` (ms).

    Examples
    --------
    >>> kind, ms = parse_bound("now-2h")
    >>> kind, abs(time.time() * 1000 - 7_200_000 - ms) < 60_000
    ('time', True)
    """
    t = text.strip()
    if t in ("earliest", "latest"):
        return t, None
    if t.startswith("@") and t[1:].isdigit():
        return "time", int(t[1:])
    if t.isdigit():
        return "offset", int(t)
    ago = _AGO.match(t)
    if ago:
        return "time", int(time.time() * 1000) - int(ago.group(1)) * _UNIT_MS[ago.group(2)]
    try:
        when = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise RangeError(f"{text!r} is not a bound: use earliest, latest, an offset, an ISO "
                         "date-time (2026-11-01T00:00:00Z), @milliseconds or a time before "
                         "now (now-30s, now-15m, now-2h, now-1d)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return "time", int(when.timestamp() * 1000)


@dataclass(frozen=True)
class PartitionRange:
    partition: int
    start: int
    end: int

    def __len__(self) -> int:
        return max(0, self.end - self.start)


def resolve(reader, topic: str, start: str, end: str, timeout_s: float = 30.0
            ) -> list[PartitionRange]:
    """The ``[start, end)`` offsets of every partition of ``topic``.

    Raises :class:`RangeError` for an unknown topic, a bound that cannot be read, an end
    before a start, or a range with no record at all.
    """
    md = reader.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if md is None or md.error is not None or not md.partitions:
        raise RangeError(f"topic {topic} does not exist (or has no partition)")
    s_kind, s_val = parse_bound(start)
    e_kind, e_val = parse_bound(end)
    out = []
    for p in sorted(md.partitions):
        low, high = reader.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
        a = offset_of(reader, topic, p, (s_kind, s_val), low, high, timeout_s)
        b = offset_of(reader, topic, p, (e_kind, e_val), low, high, timeout_s)
        if s_kind == e_kind and s_kind in ("offset", "time") and e_val < s_val:
            raise RangeError(f"the end ({end}) is before the start ({start})")
        out.append(PartitionRange(p, a, max(a, b)))
    if not any(len(r) for r in out):
        raise RangeError(f"no record of {topic} lies between {start} and {end}")
    return out


def offset_of(reader, topic: str, p: int, bound: tuple[str, int | None], low: int, high: int,
              timeout_s: float) -> int:
    """The offset of a parsed ``bound`` in partition ``p`` (watermarks ``low``, ``high``),
    within them."""
    kind, value = bound
    if kind == "earliest":
        return low
    if kind == "latest":
        return high
    if kind == "offset":
        return min(max(value, low), high)
    found = reader.offsets_for_times([TopicPartition(topic, p, value)], timeout=timeout_s)[0]
    return high if found.offset < 0 else min(max(found.offset, low), high)
