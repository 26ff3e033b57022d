"""``--label-delay``: replay a labelled topic as if each label had come later.

Every Instance that carries its label is replayed unlabelled, and its label follows as a
:class:`schemas.messages.LabelEvent` of the same stream, ``N`` instances of that stream later
(``--label-delay 100``) or once the stream's event time has passed the instance's by a
duration (``--label-delay 30s``): the worker then predicts each instance when it arrives and
learns it when its label does, as river's ``progressive_val_score(delay=...)`` and MOA's
``EvaluatePrequentialDelayed`` do. A LabelEvent already on the topic comes that much later
than it came: ``N`` instances of its stream after its place, or once the stream's event time
has passed its own by the duration (so that a topic whose labels are LabelEvents is replayed
with its labels later still). Labels still waiting at the end of the range are not replayed
(no prediction follows them). InstanceBatch records and records that are neither a valid
instance nor a valid LabelEvent pass unchanged.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

import numpy as np
from confluent_kafka import Message

from schemas.codec import CONTENT_TYPE, encode
from schemas.errors import DecodeError
from schemas.instances import decode_instance
from schemas.kinds import INSTANCE, LABEL, record_kind
from schemas.labels import decode_label_event
from schemas.messages import Instance, LabelEvent

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_SPEC = re.compile(r"^(\d+)(ms|s|m|h)?$")


@dataclass(frozen=True)
class LabelDelay:
    """How late labels come: ``instances`` of the same stream, or ``ms`` of event time.

    Examples
    --------
    >>> LabelDelay.parse("100"), LabelDelay.parse("30s").ms, str(LabelDelay.parse("2m"))
    (LabelDelay(instances=100, ms=None), 30000, '2m')
    """

    instances: int | None = None
    ms: int | None = None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> LabelDelay:
        m = _SPEC.match(text.strip())
        if m is None:
            raise ValueError(f"--label-delay {text!r}: give a number of instances (100) or a "
                             "duration (500ms, 30s, 2m, 1h)")
        n, unit = int(m.group(1)), m.group(2)
        if unit is None:
            return cls(instances=n, text=text.strip())
        return cls(ms=n * _UNITS_MS[unit], text=text.strip())

    def __repr__(self) -> str:
        return f"LabelDelay(instances={self.instances}, ms={self.ms})"

    def __str__(self) -> str:
        return self.text or (f"{self.instances}" if self.ms is None else f"{self.ms}ms")


class DelayedLabels:
    """Rewrites one partition's records, feed after feed (see the module doc)."""

    def __init__(self, delay: LabelDelay):
        self.delay = delay
        # stream key -> (due, LabelEvent at its first event time) of the labels held back
        self.waiting: dict[bytes, deque] = {}
        self.seen: dict[bytes, int] = {}  # stream key -> instances so far

    def rewrite(self, msgs: list, offsets: np.ndarray) -> tuple[list, np.ndarray]:
        """The records of one feed with labels moved later; a released label takes the
        offset of the record it follows."""
        out, offs = [], []
        by_count = self.delay.ms is None
        for m, off in zip(msgs, offsets.tolist()):
            record = self._record(m)
            if record is None or (type(record) is LabelEvent and by_count
                                  and not self.delay.instances):
                out.append(m)  # not a record of a stream, or a label not moved: as it is
                offs.append(off)
                continue
            key = m.key()
            if type(record) is LabelEvent:  # held back from here
                self._hold(key, self.seen.get(key, 0), record)
                continue
            if not by_count:  # labels whose time has come, before this instance
                self._release(key, m, record.ts, record.ts, out, offs)
            n = self.seen[key] = self.seen.get(key, 0) + 1
            if record.y is None:
                out.append(m)
            else:
                out.append(self._unlabelled(m, record))
                self._hold(key, n, LabelEvent(stream=record.stream, id=record.id, y=record.y,
                                              ts=record.ts))
            offs.append(off)
            if by_count:  # labels due after this many instances, after it
                self._release(key, m, record.ts, n, out, offs)
        return out, np.asarray(offs, dtype=np.int64)

    def _hold(self, key: bytes, n: int, event: LabelEvent) -> None:
        """Hold back ``event`` of stream ``key``, which came after ``n`` of its instances."""
        d = self.delay
        due = n + d.instances if d.ms is None else event.ts + d.ms
        self.waiting.setdefault(key, deque()).append((due, event))

    @staticmethod
    def _record(m) -> Instance | LabelEvent | None:
        """The valid Instance or LabelEvent of a stream ``m`` holds; ``None`` for anything
        else (an invalid one is dead-lettered by the worker, as it would have been)."""
        if m.key() is None:
            return None
        kind = record_kind(m.headers())
        try:
            if kind == INSTANCE:
                return decode_instance(m.value(), m.headers())
            if kind == LABEL:
                return decode_label_event(m.value(), m.headers())
        except DecodeError:
            pass
        return None

    def _release(self, key: bytes, m, ts: int, now: int, out: list, offs: list) -> None:
        """The held labels of stream ``key`` due by ``now`` (instances of the stream, or event
        time), as LabelEvents at event time ``ts`` (of the instance they come beside) and
        ``m``'s offset."""
        queue = self.waiting.get(key)
        while queue and queue[0][0] <= now:
            _due, event = queue.popleft()
            label_ts = ts if self.delay.ms is None else event.ts + self.delay.ms
            value, headers = encode(event.model_copy(update={"ts": label_ts}))
            out.append(Message(topic=m.topic(), partition=m.partition(), offset=m.offset(),
                               key=key, value=value, headers=headers))
            offs.append(m.offset())

    @staticmethod
    def _unlabelled(m, inst: Instance):
        """The record without its label (msgpack; its other headers kept)."""
        value, headers = encode(inst.model_copy(update={"y": None}))
        kept = [(k, v) for k, v in (m.headers() or ()) if k != CONTENT_TYPE]
        return Message(topic=m.topic(), partition=m.partition(), offset=m.offset(),
                       key=m.key(), value=value, headers=headers + kept)
