"""Chunked, per-partition checkpoints on the compacted checkpoints topic, and their reading.

The records are the contracts of :mod:`schemas.checkpoint`. Layout (checkpoint partition =
input partition, so one owner writes each partition); keys carry the consumer group and the
input topic, so deployments sharing a checkpoints topic never overwrite each other:

* ``s\\x00<group>\\x00<input topic>\\x00<stream>\\x00<i>`` -> chunk ``i`` of the stream's
  :class:`~schemas.checkpoint.StreamCheckpoint` (msgpack). An envelope larger than
  ``checkpoint.max_message_bytes`` is cut into chunks, so states of any size fit topics with
  the broker's default message size.
* ``m\\x00<group>\\x00<input topic>\\x00<partition>`` -> the partition's
  :class:`~schemas.checkpoint.CheckpointManifest`: the input offsets the checkpoint covers
  (next offset to process) and, for every stream of the partition, where its latest chunks
  are. The manifest is the last record of every checkpoint, written after its chunks were
  delivered, in the same transaction as the outputs and the input offsets (Kafka Streams' and
  quix-streams' rule: the checkpoint is the atomic unit; every snapshot is tagged with the
  offsets it covers).

A checkpoint is incremental: only streams that changed since the last one are written; the
manifest keeps pointing at the older chunks of the others, which compaction keeps because
they are still the latest record of their key.

Reading: the latest committed manifest is found by reading the partition's tail backwards
in growing windows with a ``read_committed`` consumer (aborted checkpoints are invisible).
Every chunk a manifest names precedes the manifest's own record, so a stream's chunks are read
by key from the offset of its first chunk up to, at most, that record's offset (the manifest's
*end*): other writers sharing the topic (another group, another input topic) may have put their
records between them. A read waits until the partition's last stable offset reaches what it
reads: a transaction's commit markers are written after ``commit_transaction()`` returns, so
a committed checkpoint read at once may not be visible yet. Each envelope is checked to be the
one the manifest means (group, input topic, partition, stream, offsets).

A checkpoint record is untrusted input: every size it claims is bounded before anything is
allocated for it (:class:`Limits`). A manifest's chunk counts must fit the records between a
chunk and the manifest and the bytes it says the envelope has; an envelope must not inflate
past a multiple of its stored bytes or the worker's state budget (whichever is larger); the
learners bound their capacities and parameters themselves (:mod:`models.core.base`).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import msgpack
from confluent_kafka import KafkaError, TopicPartition

from schemas.checkpoint import CheckpointManifest, StreamCheckpoint
from schemas.codec import decode, encode

_ZLIB_FIRST = 0x78  # the first byte of every zlib stream (deflate, 32 KB window)
_MAX_STATE_BYTES = 1 << 31  # an envelope never inflates past this, whatever the limits say
_CHUNK_SLACK = 4096  # room for key, headers and record overhead under the size limit
_MIN_CHUNK = 1024  # every chunk but an envelope's last has at least this many bytes
# the pipelines' states compress 1.2-38x at level 1 (every learner family, 1 to 5,000 rows, of
# random features and of small integers, tests/benchmarks/service/bench_restore_bounds.py): an
# envelope inflating past 64x is not one of them unless it fits the state budget
_INFLATE_RATIO = 64
_INFLATE_FLOOR = 1 << 20  # small envelopes are never refused for their ratio
_INFLATE_STEP = 1 << 20  # what measuring an inflated size holds of it at a time

Manifest = CheckpointManifest


def _sep(*parts) -> bytes:
    return b"\x00".join(p if isinstance(p, bytes) else str(p).encode() for p in parts)


def chunk_key(group: str, topic: str, stream: str, i: int) -> bytes:
    return _sep(b"s", group, topic, stream, i)


def manifest_key(group: str, topic: str, partition: int) -> bytes:
    return _sep(b"m", group, topic, partition)


def empty_manifest(group: str, topic: str, partition: int, offset: int,
                   features: str | None = None, features_offset: int = 0) -> CheckpointManifest:
    """The manifest of a partition nothing was checkpointed for yet (``topics`` is the
    instances topic, then the features topic co-partitioned with it)."""
    topics = [topic] if features is None else [topic, features]
    offsets = {topic: offset} if features is None else {topic: offset, features: features_offset}
    return CheckpointManifest(group=group, topics=topics, partition=partition,
                              offsets=offsets, ts=0)


def encode_blob(envelope: StreamCheckpoint, level: int = 0) -> bytes:
    """One stream's envelope as written (cut into chunks by the writer): msgpack, zlib
    compressed at ``level`` (0: plain msgpack, ``checkpoint.compression_level``'s default).

    A learner's arrays are mostly counts, thresholds and statistics with many equal cells:
    compression takes the default pipeline's state to a third or a fifth of its msgpack size.
    The worker leaves it to its producer by default: ``compression.type=lz4`` compresses
    whole batches in librdkafka's threads, about ten times faster than zlib's level 1 in
    the worker's own thread (0.05 against 0.5 ms for a stream that learned 200 rows; 10-25%
    larger). Levels from 1 are there for a producer that does not compress.

    Examples
    --------
    >>> import numpy as np
    >>> cp = StreamCheckpoint(group="g", topics=["t"], partition=0, stream="s", config={},
    ...                       offsets={"t": 1}, state={"x": np.zeros(10_000)}, ts=0)
    >>> len(encode_blob(cp, level=1)) < 1000 < len(encode_blob(cp))
    True
    >>> decode_blob(encode_blob(cp, level=1)) == decode_blob(encode_blob(cp)) == cp
    True
    """
    packed = encode(envelope)[0]
    return zlib.compress(packed, level) if level > 0 else packed


@dataclass(frozen=True)
class Limits:
    """What a checkpoint read from the topic may claim before the worker allocates for it.

    Parameters
    ----------
    state_budget : int
        ``worker.state_budget_mb`` in bytes: the memory the worker's streams may hold.
    max_objects : int
        msgpack values one envelope may hold (maps, lists, strings, numbers and arrays each
        count one): what the settings let a state have (:meth:`from_settings`). A value
        decodes to a Python object of up to about 100 bytes even when it takes one byte
        (an empty list), so the count, not the bytes, bounds what decoding allocates.

    Examples
    --------
    >>> Limits(state_budget=10 << 20).inflated(1 << 20)  # 64 x the stored bytes
    67108864
    >>> Limits(state_budget=10 << 20).inflated(1000)  # at least the budget
    10485760
    """

    state_budget: int = 1 << 30
    max_objects: int = 336_200  # what the default settings give (from_settings)

    @classmethod
    def from_settings(cls, settings) -> Limits:
        """The limits the settings justify.

        A state's lists are its held rows' ids and labels (``feature_stream_rows`` each),
        feature names (``max_features``, twice: names and fills), each learner's classes
        (``max_classes``; a pipeline has fewer than 32 learners) and the labels waiting for a
        mini-batch (``batch_size`` of any profile); the pipelines' other values are a few
        hundred (416 at most measured). 100,000 more leave room.

        Examples
        --------
        >>> from worker.settings import load_settings
        >>> Limits.from_settings(load_settings({})) == Limits()
        True
        """
        s = settings
        batch = max([s.learners.batch_size] + [p.batch_size or 0 for p in s.profiles])
        objects = (100_000 + 2 * s.learners.feature_stream_rows + 2 * s.worker.max_features
                   + 32 * s.worker.max_classes + 2 * batch)
        return cls(int(s.worker.state_budget_mb * 1024 * 1024), objects)

    def inflated(self, stored: int) -> int:
        """Bytes an envelope stored in ``stored`` bytes may inflate to.

        A state compresses by what its arrays repeat; the pipelines' states measured 1.2-38x
        (38: a forgetful forest holding rows of small integers), so 64x the stored bytes
        leaves room, and an envelope that fits the worker's whole state budget is taken
        whatever its ratio (a stream of constant features). A zlib bomb is refused as soon as
        its output passes the bound, never inflated to its end.
        """
        return min(_MAX_STATE_BYTES, max(_INFLATE_RATIO * stored, self.state_budget,
                                         _INFLATE_FLOOR))


def count_values(packed: bytes, most: int) -> int:
    """The number of msgpack values in ``packed`` (one top-level value), or a ``ValueError``
    as soon as it passes ``most``.

    One pass of the msgpack decoder that keeps nothing: each map or list is counted and
    dropped as soon as it is read, and arrays (extensions) are not decoded; no list or map
    may be longer than ``most`` either. Its cost is one step per value: a state is a few
    hundred values besides its lists.

    Examples
    --------
    >>> import msgpack
    >>> count_values(msgpack.packb({"a": [1, 2.5, "x"], "b": b"bytes"}), 100)
    8
    >>> count_values(msgpack.packb([[]] * 99 + [[1, 2]]), 100)
    Traceback (most recent call last):
    ...
    ValueError: the checkpoint holds more than 100 values
    >>> count_values(msgpack.packb([[]] * 1000), 100)
    Traceback (most recent call last):
    ...
    ValueError: the checkpoint's msgpack is refused: 1000 exceeds max_array_len(100)
    """
    n = [1]

    def counted(obj) -> None:
        n[0] += 2 * len(obj) if isinstance(obj, dict) else len(obj)
        if n[0] > most:
            raise _TooMany

    try:
        msgpack.unpackb(packed, raw=True, strict_map_key=False, list_hook=counted,
                        object_hook=counted, ext_hook=_skip_ext, max_array_len=most,
                        max_map_len=most)
    except _TooMany:
        raise ValueError(f"the checkpoint holds more than {most} values") from None
    except Exception as exc:  # noqa: BLE001 (the decoder's errors vary: each refuses it)
        raise ValueError(f"the checkpoint's msgpack is refused: {exc}") from None
    return n[0]


class _TooMany(Exception):
    """Raised inside the decoder's hooks to end a count."""


def _skip_ext(_code: int, _data: bytes) -> None:
    return None


def inflate(blob: bytes, limit: int = _MAX_STATE_BYTES) -> bytes:
    """The msgpack of a blob :func:`encode_blob` wrote, compressed or not.

    A msgpack map starts with a byte of ``0x80``-``0x8f``, ``0xde`` or ``0xdf``; a zlib stream
    with ``0x78``: blobs of both kinds (older checkpoints are plain) read alike. Raises
    ``ValueError`` for a corrupt stream or one that would inflate past ``limit`` bytes.

    A first pass measures the output, holding at most ``_INFLATE_STEP`` bytes of it and
    stopping as soon as it passes ``limit``; the second allocates it once, at its size. A zlib
    bomb costs the time to inflate ``limit`` bytes (about 1 s per GB) and no memory.
    """
    if not blob or blob[0] != _ZLIB_FIRST:
        return blob
    size = _inflated_size(blob, limit)
    return zlib.decompress(blob, bufsize=max(size, 1))


def _inflated_size(blob: bytes, limit: int) -> int:
    """Bytes ``blob`` inflates to (``ValueError``: corrupt, truncated or past ``limit``)."""
    d = zlib.decompressobj()
    size, data = 0, blob
    try:
        while not d.eof:
            piece = d.decompress(data, _INFLATE_STEP)
            size += len(piece)
            if size > limit:
                raise ValueError(f"compressed checkpoint inflates past {limit} bytes")
            data = d.unconsumed_tail
            if not piece and not data:
                break  # every byte read and no end: truncated
    except zlib.error as exc:
        raise ValueError(f"corrupt compressed checkpoint: {exc}") from None
    if not d.eof:
        raise ValueError("compressed checkpoint is truncated")
    return size


def decode_blob(blob: bytes, limits: Limits | None = None) -> StreamCheckpoint:
    """The envelope of reassembled chunks (validated: a :class:`~schemas.DecodeError` if not).

    ``limits`` bound what the blob may inflate to (:meth:`Limits.inflated`) and how many
    values it may hold (:func:`count_values`), both checked before anything is decoded;
    default: a worker with the default settings. A ``ValueError`` says what was refused.

    Peak memory: restoring a stream (this, then its pipeline rebuilt from the envelope,
    :func:`worker.recovery.stream_pipeline`) holds at most 4 times the inflated msgpack at
    its peak (2.1-3.3 measured on the largest states of every learner family,
    ``tests/benchmarks/service/bench_restore_bounds.py``): the inflated bytes, the arrays decoded
    from them, the learners' copies and their restored capacity. The inflated size is at
    most ``limits.inflated(len(blob))`` and the values decoded at most ``limits.max_objects``
    (about 100 bytes each at worst), both known before anything is decoded; a refused blob
    costs at most one step of its inflation (``_INFLATE_STEP``).
    """
    limits = limits or Limits()
    packed = inflate(blob, limits.inflated(len(blob)))
    count_values(packed, limits.max_objects)
    return decode(packed, StreamCheckpoint, max_bytes=max(len(packed), 1))


def split(blob: bytes, chunk_bytes: int) -> list[bytes]:
    """Cut a blob into chunks of at most ``chunk_bytes`` (at least one chunk)."""
    size = max(1, chunk_bytes)
    return [blob[i:i + size] for i in range(0, max(len(blob), 1), size)] or [b""]


class CheckpointWriter:
    """Writes checkpoints inside the worker's open transaction.

    Parameters
    ----------
    producer : worker.kafka_io.TransactionalProducer
        The worker's producer; a transaction must be open.
    topic : str
        The checkpoints topic.
    chunk_bytes : int
        ``checkpoint.max_message_bytes``: largest record written.
    faults : worker.faults.Faults, optional
        Test-only fault injection (a crash in the middle of a checkpoint, chunks left out or
        corrupted).
    """

    def __init__(self, producer, topic: str, chunk_bytes: int, faults=None):
        self.producer = producer
        self.topic = topic
        self.chunk_bytes = max(1024, chunk_bytes - _CHUNK_SLACK)
        self.faults = faults
        self.n_chunks_written = 0

    def write(self, manifest: CheckpointManifest, blobs: Iterable[tuple[str, bytes]],
              end: int = 0) -> Written:
        """Produce the blobs of changed streams, then the updated manifest.

        ``manifest`` carries the new offsets and the previous checkpoint's streams, ``end`` the
        previous manifest's end (see :class:`Written`). ``blobs`` yields ``(stream, blob)``
        pairs: a dict's ``items()``, or a worker's generator that encodes each stream's blob
        as it is produced, so that a partition's checkpoint (thousands of streams, hundreds
        of MB) is never held whole beside the producer's copy. Chunks are flushed before the
        manifest is produced, because the manifest names their offsets.
        """
        p = manifest.partition
        group, topic = manifest.group, manifest.topics[0]
        firsts: dict[str, int] = {}  # stream -> offset of its first chunk on the topic
        last = [end - 1]  # offset of the last chunk delivered
        errors: list = []
        written = 0

        def on_delivery(err, msg, stream, _firsts=firsts, _errors=errors):
            if err is not None:
                _errors.append(err)
                return
            if msg.offset() < _firsts.get(stream, 1 << 62):
                _firsts[stream] = msg.offset()
            last[0] = max(last[0], msg.offset())

        sizes: dict[str, tuple[int, int]] = {}
        for stream, blob in blobs:
            chunks = split(blob, self.chunk_bytes)
            sizes[stream] = (len(chunks), len(blob))
            for i, chunk in enumerate(chunks):
                self.n_chunks_written += 1
                if self.faults is not None:
                    chunk = self.faults.chunk(self.n_chunks_written, chunk)
                if chunk is None:  # left out by a test fault: the manifest names it anyway
                    firsts.setdefault(stream, 0)
                else:
                    self.producer.produce(
                        self.topic, chunk, chunk_key(group, topic, stream, i), partition=p,
                        on_delivery=lambda err, msg, s=stream: on_delivery(err, msg, s))
                    written += len(chunk)
                if self.faults is not None:
                    self.faults.crash_if("crash_after_chunks", self.n_chunks_written,
                                         self.producer.flush)
        if sizes:
            self.producer.flush()
        unreported = sorted(set(sizes) - set(firsts))
        if errors or unreported:
            from .kafka_io import AbortableError

            why = errors[0] if errors else f"no delivery report for stream {unreported[0]!r}"
            raise AbortableError(f"checkpoint chunk not delivered: {why}")
        streams = dict(manifest.streams)
        for stream, (n, size) in sizes.items():
            streams[stream] = [firsts[stream], n, size]
        new = manifest.model_copy(update={"streams": streams})
        value = encode(new)[0]
        self.producer.produce(self.topic, value, manifest_key(group, topic, p), partition=p)
        return Written(new, written + len(value), last[0] + 1)


class Written(NamedTuple):
    """What :meth:`CheckpointWriter.write` wrote.

    ``end`` bounds the chunks the manifest names: each lies below it (one past the last chunk
    written so far, at most the manifest's own offset, which is only known once it is
    delivered). A restore on demand reads up to it, waiting until it is visible.
    """

    manifest: CheckpointManifest
    n_bytes: int
    end: int


# --- reading --------------------------------------------------------------------------------


def _read_range(reader, topic: str, partition: int, start: int, stop: int | None,
                timeout_s: float, take) -> None:
    """Hand the messages of ``[start, stop)`` (or to the end) to ``take``, read_committed.

    ``take(msg)`` returns true to end the read early. ``consume`` is asked for at most the
    messages still expected, with a short timeout, so a read returns as soon as the range is
    complete (control records and aborted messages in the range are never delivered: the
    end-of-partition event or a later offset ends it). An end-of-partition event below
    ``stop`` is the last stable offset short of the range: the transaction that wrote it is
    committed but its markers are not written yet, or another writer's transaction is still
    open before it. The read waits for it, within ``timeout_s``.
    """
    reader.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout_s
    position = start
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}[{partition}] from {start} to {stop} timed "
                                   f"out at {position} after {timeout_s:g} s")
            n = 1000 if stop is None else max(1, min(1000, stop - position))
            for m in reader.consume(n, 0.05):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if stop is None or m.offset() >= stop:
                            return
                        continue  # not visible yet: wait for the last stable offset
                    raise RuntimeError(f"reading {topic}[{partition}]: {err}")
                off = m.offset()
                if stop is not None and off >= stop:
                    return
                position = off + 1
                if take(m) or (stop is not None and position >= stop):
                    return
    finally:
        reader.unassign()


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: incomplete, corrupt, or not the one its manifest means."""


def _verify(env: StreamCheckpoint, manifest: CheckpointManifest, stream: str) -> None:
    """The envelope is the one ``manifest`` names for ``stream`` (another writer's is not)."""
    wrong = [name for name, ok in (
        ("group", env.group == manifest.group),
        ("topics", env.topics == manifest.topics),
        ("partition", env.partition == manifest.partition),
        ("stream", env.stream == stream),
        ("offsets", all(env.offsets[t] <= manifest.offsets[t] for t in manifest.topics)),
    ) if not ok]
    if wrong:
        raise CheckpointError(
            f"checkpoint of stream {stream!r} does not belong to the manifest of group "
            f"{manifest.group!r}, {manifest.topics}[{manifest.partition}]: "
            f"{', '.join(wrong)} differ")


def _manifests(reader, topic: str, partition: int, mkey: bytes, timeout_s: float, limit: int):
    """The partition's manifest records under ``mkey``, newest first (at most ``limit``).

    The tail is read backwards in growing windows; compaction leaves older manifests only
    until the cleaner passes, so the list is what is still there.
    """
    low, high = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
    window, stop, start = 64, None, high
    while start > low:
        start = max(low, start - window)
        msgs: list = []

        def keep(m, _msgs=msgs) -> bool:
            if m.key() == mkey:
                _msgs.append(m)
            return False  # the whole window is read

        _read_range(reader, topic, partition, start, stop, timeout_s, keep)
        for m in reversed(msgs):
            yield m
            limit -= 1
            if limit <= 0:
                return
        stop = start
        window *= 8


def _decode_manifest(msg, group: str, input_topic: str, partition: int) -> CheckpointManifest:
    try:
        manifest = decode(msg.value(), CheckpointManifest, max_bytes=len(msg.value()))
    except ValueError as exc:
        raise CheckpointError(f"checkpoint manifest of {input_topic}[{partition}] at offset "
                              f"{msg.offset()} cannot be read: {exc}") from None
    # topics: the instances topic, then (since streams of features) the features topic
    if (manifest.group, manifest.topics[:1], manifest.partition) != (group, [input_topic],
                                                                     partition):
        raise CheckpointError(f"the manifest at offset {msg.offset()} names another partition")
    return manifest


def check_spans(manifest: CheckpointManifest, end: int) -> None:
    """``CheckpointError`` unless every chunk span of ``manifest`` is possible below ``end``.

    A stream's ``[first, n, size]`` says its envelope of ``size`` bytes is ``n`` chunks from
    offset ``first``: ``n`` distinct records between ``first`` and ``end`` (the manifest's
    own offset, above every chunk it names), each but the last at least ``_MIN_CHUNK`` bytes.
    A span that breaks this is refused before anything is read or allocated for it.

    Examples
    --------
    >>> m = empty_manifest("g", "t", 0, 5).model_copy(update={"streams": {"s": [10, 3, 2100]}})
    >>> check_spans(m, 13)
    >>> check_spans(m.model_copy(update={"streams": {"s": [10, 10**9, 2100]}}), 13)
    Traceback (most recent call last):
    ...
    worker.checkpoint_store.CheckpointError: the manifest claims 1000000000 chunks of stream 's' ...
    """
    for s, (first, n, size) in manifest.streams.items():
        most = min(end - first, max(1, -(-size // _MIN_CHUNK)))
        if not 1 <= n <= most:
            raise CheckpointError(
                f"the manifest claims {n} chunks of stream {s!r} from offset {first}: at most "
                f"{max(0, end - first)} records lie below the manifest (offset {end}), at most "
                f"{max(1, -(-size // _MIN_CHUNK))} chunks hold {size} bytes")


def _chunk_index(key: bytes | None, prefix: bytes) -> tuple[str, int] | None:
    """``(stream, i)`` of a chunk key under ``prefix`` (``None``: another record's key)."""
    if not key or not key.startswith(prefix):
        return None
    stream, _, i = key[len(prefix):].rpartition(b"\x00")
    if not stream or not i.isdigit() or len(i) > 12:
        return None
    return stream.decode("utf-8", "replace"), int(i)


def iter_envelopes(reader, topic: str, partition: int, manifest: CheckpointManifest,
                   timeout_s: float, end: int,
                   limits: Limits | None = None) -> Iterator[tuple[str, StreamCheckpoint]]:
    """``(stream, envelope)`` of every stream ``manifest`` names, checked, in the order of
    their chunks on the topic (``CheckpointError`` for a missing or corrupt one).

    ``end`` is the manifest's end: its own offset on the topic (or :attr:`Written.end`);
    every chunk it names lies below. A stream's chunks are its keys found from its first
    chunk on, each the first of its key there; records of other writers may lie between
    them. Streams whose chunks are close (typically those of one checkpoint) are read in one
    pass, which ends as soon as all their chunks are in; each envelope is handed over then,
    so a caller that keeps less than every state (a restore under a memory budget) never
    holds them all. Only chunks actually read are held: a count a manifest claims never
    sizes anything (:func:`check_spans`).
    """
    check_spans(manifest, end)
    limits = limits or Limits()
    prefix = _sep(b"s", manifest.group, manifest.topics[0]) + b"\x00"
    entries = sorted(manifest.streams.items(), key=lambda kv: kv[1][0])
    k = 0
    while k < len(entries):
        j = k
        last = entries[k][1][0] + entries[k][1][1]
        # merge entries whose chunks are close (typically one checkpoint's records)
        while j + 1 < len(entries) and entries[j + 1][1][0] <= last + 16:
            j += 1
            last = max(last, entries[j][1][0] + entries[j][1][1])
        group = dict(entries[k:j + 1])
        parts = _read_chunks(reader, topic, partition, group, prefix, end, timeout_s)
        for s, e in entries[k:j + 1]:
            yield s, _envelope(parts.pop(s), e, s, manifest, topic, partition, limits)
        k = j + 1


def _read_chunks(reader, topic: str, partition: int, spans: dict, prefix: bytes, end: int,
                 timeout_s: float) -> dict[str, dict[int, bytes]]:
    """``stream -> {i: chunk}`` of ``spans`` (``stream -> [first, n, size]``), read from the
    first span's offset until every chunk is in or ``end`` is reached."""
    parts: dict[str, dict[int, bytes]] = {s: {} for s in spans}
    missing = [sum(e[1] for e in spans.values())]

    def take(m) -> bool:
        found = _chunk_index(m.key(), prefix)
        if found is None:
            return False
        s, i = found
        e = spans.get(s)
        # a key found before the stream's first chunk is an older version of it
        if e is None or i >= e[1] or m.offset() < e[0] or i in parts[s]:
            return False
        parts[s][i] = m.value()
        missing[0] -= 1
        return missing[0] == 0

    start = min(e[0] for e in spans.values())
    _read_range(reader, topic, partition, start, end, timeout_s, take)
    return parts


def read_streams(reader, topic: str, partition: int, manifest: CheckpointManifest,
                 streams: list[str], timeout_s: float, end: int,
                 limits: Limits | None = None) -> dict[str, StreamCheckpoint]:
    """The envelopes of some of the streams ``manifest`` names (a restore on demand).

    ``end``: the manifest's end (:func:`iter_envelopes`); the read waits until the partition's
    last stable offset reaches the chunks, within ``timeout_s``.
    """
    some = manifest.model_copy(update={"streams": {s: manifest.streams[s] for s in streams}})
    return dict(iter_envelopes(reader, topic, partition, some, timeout_s, end, limits))


def _stored_bytes(manifest: CheckpointManifest) -> int:
    return sum(e[2] for e in manifest.streams.values())


def _envelope(got: dict[int, bytes], entry, s: str, manifest, topic: str,
              partition: int, limits: Limits) -> StreamCheckpoint:
    if len(got) != entry[1]:
        raise CheckpointError(
            f"checkpoint of stream {s!r} on {topic}[{partition}] is incomplete: "
            f"{len(got)} of {entry[1]} chunks found from offset {entry[0]}")
    size = sum(map(len, got.values()))
    if size != entry[2]:
        raise CheckpointError(f"checkpoint of stream {s!r} has {size} bytes, "
                              f"expected {entry[2]}")
    blob = b"".join(got.pop(i) for i in range(entry[1]))
    try:
        env = decode_blob(blob, limits)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint of stream {s!r} cannot be read: {exc}") from None
    _verify(env, manifest, s)
    return env


@dataclass
class Loaded:
    """What :func:`read_usable` found: the checkpoint used (or none) and the ones refused."""

    manifest: CheckpointManifest | None
    envelopes: dict
    n_bytes: int
    refused: list[str]  # why each newer checkpoint could not be used, newest first
    value: object = None  # what ``accept`` returned for the one used
    end: int = 0  # the offset of the used manifest's record: its chunks lie below


def read_usable(reader, topic: str, partition: int, group: str, input_topic: str,
                timeout_s: float = 60.0, max_offset: int | None = None, accept=None,
                max_candidates: int = 8, limits: Limits | None = None) -> Loaded:
    """The newest checkpoint of an input partition that can be used, and why newer ones could not.

    Candidates are the manifests still on the topic, newest first. One is skipped when it
    covers input beyond ``max_offset`` (the group's committed offset), and refused when its
    chunks are missing, corrupt or not the ones it names, or claim more than ``limits``
    allow (:class:`CheckpointError`), or when ``accept(manifest, envelopes)`` raises (e.g. a
    learner state that fails its checks, or one too large to hold: ``envelopes`` is the
    iterator of :func:`iter_envelopes`, which ``accept`` must exhaust); the next older one is
    tried then. ``Loaded.manifest`` is ``None`` when no candidate is usable: the caller
    rebuilds the state from the input.
    """
    mkey = manifest_key(group, input_topic, partition)
    refused: list[str] = []
    for msg in _manifests(reader, topic, partition, mkey, timeout_s, max_candidates):
        try:
            manifest = _decode_manifest(msg, group, input_topic, partition)
            covered = manifest.offsets[input_topic]
            if max_offset is not None and covered > max_offset:
                refused.append(f"checkpoint at {msg.offset()} covers input to {covered}, beyond "
                               f"the committed offset {max_offset}")
                continue
            envelopes = iter_envelopes(reader, topic, partition, manifest, timeout_s,
                                       msg.offset(), limits)
            if accept is None:
                envelopes, value = dict(envelopes), None
            else:  # accept reads every envelope (and may keep less than all of them)
                value, envelopes = accept(manifest, envelopes), {}
        except CheckpointError as exc:
            refused.append(str(exc))
            continue
        # what accept() found wrong; MemoryError: a state the process cannot hold is as
        # unusable as a corrupt one (an older checkpoint may still fit)
        except (ValueError, KeyError, TypeError, MemoryError) as exc:
            refused.append(f"checkpoint at {msg.offset()} cannot be restored: "
                           f"{type(exc).__name__}: {exc}")
            continue
        return Loaded(manifest, envelopes, _stored_bytes(manifest), refused, value,
                      msg.offset())
    return Loaded(None, {}, 0, refused)


def read_latest(reader, topic: str, partition: int, group: str, input_topic: str,
                timeout_s: float = 60.0, limits: Limits | None = None
                ) -> tuple[CheckpointManifest | None, dict[str, StreamCheckpoint], int]:
    """Latest committed manifest of an input partition, the envelopes it names, their bytes.

    Parameters
    ----------
    reader : confluent_kafka.Consumer
        Group-less ``read_committed`` consumer with ``enable.partition.eof``.
    topic : str
        Checkpoints topic.
    partition : int
        Input partition (= checkpoint partition).
    group, input_topic : str
        Consumer group and input topic: part of the keys.
    limits : Limits, optional
        What the records may claim (default: a worker with the default state budget).

    Raises
    ------
    CheckpointError
        When a stream's chunks are missing or corrupt, or an envelope is not the one the
        manifest names (no fallback: see :func:`read_usable` for that).
    """
    mkey = manifest_key(group, input_topic, partition)
    for msg in _manifests(reader, topic, partition, mkey, timeout_s, 1):
        manifest = _decode_manifest(msg, group, input_topic, partition)
        envelopes = dict(iter_envelopes(reader, topic, partition, manifest, timeout_s,
                                        msg.offset(), limits))
        return manifest, envelopes, _stored_bytes(manifest)
    return None, {}, 0


__all__ = ["CheckpointError", "CheckpointWriter", "Limits", "Loaded", "Manifest", "Written",
           "check_spans", "chunk_key", "count_values", "decode_blob", "empty_manifest", "encode_blob", "inflate",
           "iter_envelopes", "manifest_key", "read_latest", "read_streams", "read_usable", "split"]
