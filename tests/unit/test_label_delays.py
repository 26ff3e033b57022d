"""``streamforest evaluate --label-delay``: the records of a partition rewritten with labels
later (:class:`worker.tools.evaluate.delays.DelayedLabels`), labels that came with their
instances and LabelEvents already on the topic alike."""

from __future__ import annotations

import numpy as np
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.instances import decode_instance
from schemas.kinds import LABEL, record_kind
from schemas.labels import decode_label_event
from worker.tools.dev.produce import delayed_label_values, instance_values, label_value
from worker.tools.evaluate.delays import DelayedLabels, LabelDelay

STREAM = "s"


def _messages(values: list, headers: dict) -> list:
    return [Message(topic="sf.instances", partition=0, offset=k, key=STREAM.encode(), value=v,
                    headers=headers.get(k)) for k, v in enumerate(values)]


def _read(msgs: list) -> list[tuple]:
    """``(kind, id, y, ts)`` of each record, in order."""
    out = []
    for m in msgs:
        if record_kind(m.headers()) == LABEL:
            e = decode_label_event(m.value(), m.headers())
            out.append(("label", e.id, e.y, e.ts))
        else:
            i = decode_instance(m.value(), m.headers())
            out.append(("instance", i.id, i.y, i.ts))
    return out


def _rewrite(msgs: list, delay: str, feeds: int = 3) -> list:
    """The records rewritten in ``feeds`` consecutive feeds, as the replay feeds them."""
    delayed, out = DelayedLabels(LabelDelay.parse(delay)), []
    for part in np.array_split(np.arange(len(msgs)), feeds):
        got, offs = delayed.rewrite([msgs[k] for k in part], part.astype(np.int64))
        assert offs.tolist() == sorted(offs.tolist())  # a released label takes its place's
        out += got
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 30), st.integers(0, 5), st.integers(0, 6), st.integers(1, 3))
def test_label_events_on_the_topic_come_that_many_instances_later_than_they_did(n, came,
                                                                                 later, feeds):
    """A topic whose labels are LabelEvents ``came`` instances late, replayed ``later``
    instances later still, is the topic whose labels are ``came + later`` late, but for the
    labels due after its last instance (they wait past the range, as a delayed label of an
    instance does); with no delay it is replayed as it is."""
    X, y = np.zeros((n, 1)), [k % 3 for k in range(n)]
    values, headers = delayed_label_values(STREAM, X, y, came)
    got = [r[:3] for r in _read(_rewrite(_messages(values, headers), str(later), feeds))]
    if later == 0:
        assert got == [r[:3] for r in _read(_messages(values, headers))]
        return
    want = [r[:3] for r in _read(_messages(*delayed_label_values(STREAM, X, y, came + later)))]
    assert got == [r for r in want if r[0] == "instance" or r[1] + came + later < n]


def test_labels_with_their_instances_and_label_events_both_come_later():
    """Instances that carry their labels and LabelEvents of others, in one partition: every
    label comes two instances after its place (a carried label's place is its instance's),
    beside the instance it then follows, at that instance's event time."""
    values = instance_values(STREAM, np.zeros((6, 1)), ["a", None, "b", None, "c", "d"], ts0=100)
    label = label_value(STREAM, 1, "x", 101)
    msgs = _messages(values[:2] + [label] + values[2:], {2: [("sf-kind", b"label")]})
    assert _read(_rewrite(msgs, "2")) == [
        ("instance", 0, None, 100), ("instance", 1, None, 101),
        ("instance", 2, None, 102), ("label", 0, "a", 102),
        ("instance", 3, None, 103), ("label", 1, "x", 103),  # came after instance 1
        ("instance", 4, None, 104), ("label", 2, "b", 104),
        ("instance", 5, None, 105)]  # the labels of 4 and 5 would come after the range


def test_a_duration_moves_a_label_event_by_its_own_event_time():
    """``--label-delay 3ms``: a LabelEvent at event time 101 comes before the first instance
    at 104 or later, at event time 104; one at 104 would come after the range, and waits."""
    values = instance_values(STREAM, np.zeros((6, 1)), [None] * 6, ts0=100)
    first, second = label_value(STREAM, 1, "x", 101), label_value(STREAM, 3, "y", 104)
    msgs = _messages(values[:2] + [first] + values[2:4] + [second] + values[4:],
                     {2: [("sf-kind", b"label")], 5: [("sf-kind", b"label")]})
    instances = [("instance", k, None, 100 + k) for k in range(6)]
    for feeds in (1, 3):
        assert _read(_rewrite(msgs, "3ms", feeds)) == [*instances[:4], ("label", 1, "x", 104),
                                                       *instances[4:]]
