"""The latest-state topic: what a subscriber that starts now needs to see the current picture.

The rankings and drift topics are histories: a dashboard that starts later would have to
replay them to learn each stream's current ranking. The latest-state topic
(``topics.latest``, default ``sf.latest``) is compacted: it keeps, per key, the last record
written, so a reader from the beginning sees one record per key (plus superseded ones the
log cleaner has not removed yet; keep the last value per key). Two kinds of record:

==================  ===========================================================  ============
``sf-kind`` header  key (JSON text, fields in this order)                        value
==================  ===========================================================  ============
``ranking``         ``{"stream":"s1","kind":"ranking","method":"block_mdi"}``    ``Ranking``
``drift-alert``     ``{"stream":"s1","kind":"drift-alert","source":"adwin",``    ``DriftAlert``
                    ``"level":"drift"}``
==================  ===========================================================  ============

* the value is the very record the rankings or drift topic got (same bytes, same format,
  same ``content-type`` header), so it is decoded as those topics are;
* the last ranking of every (stream, method); the last alert of every (stream, source,
  level): a warning that follows a drift does not hide when the detector last confirmed a
  drift. Its ``position`` and ``ts`` say when it fired;
* records are written in the transaction of the outputs they repeat, so the last committed
  value of a key is the last committed ranking or alert it repeats, whatever crashes and
  rebalances happened (a poll writes only its last record of each key);
* nothing is ever deleted (no tombstones): the worker keeps every stream it saw, and a method
  or detector a profile no longer runs keeps its last record. Deleting a key by hand (a
  record with a null value) removes it.

:class:`LatestState` collects a poll's records; :func:`parse_key` reads a key back.
"""

from __future__ import annotations

import json

from schemas.kinds import KIND_HEADER

#: ``sf-kind`` of a repeated Ranking (and the ``kind`` of its key)
RANKING = "ranking"
#: ``sf-kind`` of a repeated DriftAlert (and the ``kind`` of its key)
DRIFT_ALERT = "drift-alert"
_KIND_HEADERS = {kind: (KIND_HEADER, kind.encode()) for kind in (RANKING, DRIFT_ALERT)}


def _key(fields: dict) -> bytes:
    # compact, in field order, UTF-8 as is: the same key is always the same bytes, which is
    # what compaction compares
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()


def ranking_key(stream: str, method: str) -> bytes:
    """The key of the latest ranking of ``stream`` by ``method``.

    Examples
    --------
    >>> ranking_key("s1", "block_mdi")
    b'{"stream":"s1","kind":"ranking","method":"block_mdi"}'
    """
    return _key({"stream": stream, "kind": RANKING, "method": method})


def alert_key(stream: str, source: str, level: str) -> bytes:
    """The key of the latest alert of ``stream`` from ``source`` at ``level``.

    Examples
    --------
    >>> alert_key("plant-7", "adwin", "drift")
    b'{"stream":"plant-7","kind":"drift-alert","source":"adwin","level":"drift"}'
    """
    return _key({"stream": stream, "kind": DRIFT_ALERT, "source": source, "level": level})


def parse_key(key: bytes | None) -> dict | None:
    """The fields of a latest-state key; None for anything else (a hand-written record).

    Examples
    --------
    >>> parse_key(ranking_key("s1", "symrf"))
    {'stream': 's1', 'kind': 'ranking', 'method': 'symrf'}
    >>> parse_key(b"s1") is None
    True
    """
    try:
        fields = json.loads(key)
    except (TypeError, ValueError):
        return None
    if type(fields) is not dict or type(fields.get("stream")) is not str:
        return None
    return fields if fields.get("kind") in _KIND_HEADERS else None


class LatestState:
    """The latest-state records of one poll: the last of each key, ready to produce.

    Parameters
    ----------
    topic : str
        The latest-state topic.

    Attributes
    ----------
    records : dict of bytes to tuple
        Key -> ``(topic, key, [value], headers)``, the group
        :meth:`worker.kafka_io.TransactionalProducer.produce_many` takes; a later record of a
        key replaces the earlier one (compaction would drop it anyway).

    Examples
    --------
    >>> state = LatestState("sf.latest")
    >>> state.put(ranking_key("s1", "gini"), b"old", [], RANKING)
    >>> state.put(ranking_key("s1", "gini"), b"new", [], RANKING)
    >>> state.put(alert_key("s1", "adwin", "drift"), b"alert",
    ...           [("content-type", b"application/json")], DRIFT_ALERT)
    >>> [(g[1], g[2]) for g in state.groups()]  # doctest: +NORMALIZE_WHITESPACE
    [(b'{"stream":"s1","kind":"ranking","method":"gini"}', [b'new']),
     (b'{"stream":"s1","kind":"drift-alert","source":"adwin","level":"drift"}', [b'alert'])]
    >>> state.groups()[1][3]
    [('content-type', b'application/json'), ('sf-kind', b'drift-alert')]
    """

    __slots__ = ("topic", "records")

    def __init__(self, topic: str):
        self.topic = topic
        self.records: dict[bytes, tuple] = {}

    def __len__(self) -> int:
        return len(self.records)

    def put(self, key: bytes, value: bytes, headers: list, kind: str) -> None:
        """The record ``value`` of ``kind`` (:data:`RANKING` or :data:`DRIFT_ALERT`) under
        ``key``, as its own topic got it (with ``headers``)."""
        self.records[key] = (self.topic, key, [value], [*headers, _KIND_HEADERS[kind]])

    def groups(self) -> list[tuple]:
        """The records to produce, one group per key."""
        return list(self.records.values())
