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
in growing windows with a ``read_committed`` consumer (aborted checkpoints are invisible),
then each stream's chunks are read at the offsets the manifest names, and each envelope is
checked to be the one the manifest means (group, input topic, partition, stream, offsets).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import KafkaError, TopicPartition

from schemas.checkpoint import CheckpointManifest, StreamCheckpoint
from schemas.codec import decode, encode

_ZLIB_FIRST = 0x78  # the first byte of every zlib stream (deflate, 32 KB window)
_MAX_STATE_BYTES = 1 << 31  # an envelope never inflates past this (a bad record's guard)
_CHUNK_SLACK = 4096  # room for key, headers and record overhead under the size limit

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


def encode_blob(envelope: StreamCheckpoint, level: int = 1) -> bytes:
    """One stream's envelope as written (cut into chunks by the writer): msgpack, zlib
    compressed at ``level`` (0: plain msgpack).

    A learner's arrays are mostly counts, thresholds and statistics with many equal cells;
    level 1 takes the default pipeline's state to about a fifth of its msgpack size for a
    few milliseconds, where higher levels gain a few percent for several times the time.

    Examples
    --------
    >>> import numpy as np
    >>> cp = StreamCheckpoint(group="g", topics=["t"], partition=0, stream="s", config={},
    ...                       offsets={"t": 1}, state={"x": np.zeros(10_000)}, ts=0)
    >>> len(encode_blob(cp)) < 1000 < len(encode_blob(cp, level=0))
    True
    >>> decode_blob(encode_blob(cp)) == cp
    True
    """
    packed = encode(envelope)[0]
    return zlib.compress(packed, level) if level > 0 else packed


def inflate(blob: bytes) -> bytes:
    """The msgpack of a blob :func:`encode_blob` wrote, compressed or not.

    A msgpack map starts with a byte of ``0x80``-``0x8f``, ``0xde`` or ``0xdf``; a zlib stream
    with ``0x78``: blobs of both kinds (older checkpoints are plain) read alike. Raises
    ``ValueError`` for a corrupt stream or one that would inflate past ``_MAX_STATE_BYTES``.
    """
    if not blob or blob[0] != _ZLIB_FIRST:
        return blob
    d = zlib.decompressobj()
    try:
        out = d.decompress(blob, _MAX_STATE_BYTES)
    except zlib.error as exc:
        raise ValueError(f"corrupt compressed checkpoint: {exc}") from None
    if d.unconsumed_tail or not d.eof:
        raise ValueError(f"compressed checkpoint is truncated or inflates past "
                         f"{_MAX_STATE_BYTES} bytes")
    return out


def decode_blob(blob: bytes) -> StreamCheckpoint:
    """The envelope of reassembled chunks (validated: a :class:`~schemas.DecodeError` if not)."""
    packed = inflate(blob)
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

    def write(self, manifest: CheckpointManifest,
              blobs: dict[str, bytes]) -> tuple[CheckpointManifest, int]:
        """Produce the blobs of changed streams, then the updated manifest.

        ``manifest`` carries the new offsets and the previous checkpoint's streams; returns
        the new manifest and the number of bytes written. Chunks are flushed before the
        manifest is produced, because the manifest names their offsets.
        """
        p = manifest.partition
        group, topic = manifest.group, manifest.topics[0]
        firsts: dict[str, int] = {}  # stream -> offset of its first chunk on the topic
        errors: list = []
        written = 0

        def on_delivery(err, msg, stream, _firsts=firsts, _errors=errors):
            if err is not None:
                _errors.append(err)
            elif msg.offset() < _firsts.get(stream, 1 << 62):
                _firsts[stream] = msg.offset()

        sizes: dict[str, tuple[int, int]] = {}
        for stream, blob in blobs.items():
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
        if blobs:
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
        return new, written + len(value)


# --- reading --------------------------------------------------------------------------------


def _read_range(reader, topic: str, partition: int, start: int, stop: int | None,
                timeout_s: float, want=None):
    """Messages of ``[start, stop)`` (or to the end), read_committed, via ``reader``.

    ``want``: optional predicate on the message key; only matching messages are kept.
    ``consume`` is asked for exactly the messages still expected, with a short timeout, so a
    read returns as soon as the range is complete (control records and aborted messages in
    the range are never delivered: the end-of-partition event or a later offset ends it).
    """
    reader.assign([TopicPartition(topic, partition, start)])
    out = []
    deadline = time.monotonic() + timeout_s
    position = start
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}[{partition}] from {start} timed out")
            n = 1000 if stop is None else max(1, min(1000, stop - position))
            for m in reader.consume(n, 0.05):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return out
                    raise RuntimeError(f"reading {topic}[{partition}]: {err}")
                off = m.offset()
                if stop is not None and off >= stop:
                    return out
                position = off + 1
                if want is None or want(m.key()):
                    out.append(m)
                if stop is not None and position >= stop:
                    return out
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
        msgs = _read_range(reader, topic, partition, start, stop, timeout_s,
                           want=lambda k: k == mkey)
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


def iter_envelopes(reader, topic: str, partition: int, manifest: CheckpointManifest,
                   timeout_s: float) -> Iterator[tuple[str, StreamCheckpoint]]:
    """``(stream, envelope)`` of every stream ``manifest`` names, checked, in the order of
    their chunks on the topic (``CheckpointError`` for a missing or corrupt one).

    Streams whose chunks are close (typically those of one checkpoint) are read in one pass;
    each envelope is handed over as soon as its chunks are in, so a caller that keeps less
    than every state (a restore under a memory budget) never holds them all.
    """
    group, input_topic = manifest.group, manifest.topics[0]
    entries = sorted(manifest.streams.items(), key=lambda kv: kv[1][0])
    k = 0
    while k < len(entries):
        first = entries[k][1][0]
        j = k
        last = first + entries[k][1][1]
        # merge entries whose chunks are close (typically one checkpoint's records)
        while j + 1 < len(entries) and entries[j + 1][1][0] <= last + 16:
            j += 1
            last = max(last, entries[j][1][0] + entries[j][1][1])
        wanted = {chunk_key(group, input_topic, s, i): (s, i)
                  for s, e in entries[k:j + 1] for i in range(e[1])}
        msgs = _read_range(reader, topic, partition, first, last, timeout_s,
                           want=wanted.__contains__)
        parts: dict[str, dict[int, bytes]] = {}
        for m in msgs:
            s, i = wanted[m.key()]
            if m.offset() >= manifest.streams[s][0]:  # older versions of the key are stale
                parts.setdefault(s, {})[i] = m.value()
        del msgs
        for s, e in entries[k:j + 1]:
            yield s, _envelope(parts.pop(s, {}), e, s, manifest, topic, partition)
        k = j + 1


def read_streams(reader, topic: str, partition: int, manifest: CheckpointManifest,
                 streams: list[str], timeout_s: float) -> dict[str, StreamCheckpoint]:
    """The envelopes of some of the streams ``manifest`` names (a restore on demand)."""
    some = manifest.model_copy(update={"streams": {s: manifest.streams[s] for s in streams}})
    return dict(iter_envelopes(reader, topic, partition, some, timeout_s))


def _stored_bytes(manifest: CheckpointManifest) -> int:
    return sum(e[2] for e in manifest.streams.values())


def _envelope(got: dict[int, bytes], entry, s: str, manifest, topic: str,
              partition: int) -> StreamCheckpoint:
    if len(got) != entry[1]:
        raise CheckpointError(
            f"checkpoint of stream {s!r} on {topic}[{partition}] is incomplete: "
            f"{len(got)} of {entry[1]} chunks found from offset {entry[0]}")
    blob = b"".join(got[i] for i in range(entry[1]))
    if len(blob) != entry[2]:
        raise CheckpointError(f"checkpoint of stream {s!r} has {len(blob)} bytes, "
                              f"expected {entry[2]}")
    try:
        env = decode_blob(blob)
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


def read_usable(reader, topic: str, partition: int, group: str, input_topic: str,
                timeout_s: float = 60.0, max_offset: int | None = None, accept=None,
                max_candidates: int = 8) -> Loaded:
    """The newest checkpoint of an input partition that can be used, and why newer ones could not.

    Candidates are the manifests still on the topic, newest first. One is skipped when it
    covers input beyond ``max_offset`` (the group's committed offset), and refused when its
    chunks are missing, corrupt or not the ones it names (:class:`CheckpointError`), or when
    ``accept(manifest, envelopes)`` raises (e.g. a learner state that fails its checks:
    ``envelopes`` is the iterator of :func:`iter_envelopes`, which ``accept`` must exhaust); the
    next older one is tried then. ``Loaded.manifest`` is ``None`` when no candidate is usable:
    the caller rebuilds the state from the input.
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
            envelopes = iter_envelopes(reader, topic, partition, manifest, timeout_s)
            if accept is None:
                envelopes, value = dict(envelopes), None
            else:  # accept reads every envelope (and may keep less than all of them)
                value, envelopes = accept(manifest, envelopes), {}
        except CheckpointError as exc:
            refused.append(str(exc))
            continue
        except (ValueError, KeyError, TypeError) as exc:  # what accept() found wrong
            refused.append(f"checkpoint at {msg.offset()} cannot be restored: "
                           f"{type(exc).__name__}: {exc}")
            continue
        return Loaded(manifest, envelopes, _stored_bytes(manifest), refused, value)
    return Loaded(None, {}, 0, refused)


def read_latest(reader, topic: str, partition: int, group: str, input_topic: str,
                timeout_s: float = 60.0
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

    Raises
    ------
    CheckpointError
        When a stream's chunks are missing or corrupt, or an envelope is not the one the
        manifest names (no fallback: see :func:`read_usable` for that).
    """
    mkey = manifest_key(group, input_topic, partition)
    for msg in _manifests(reader, topic, partition, mkey, timeout_s, 1):
        manifest = _decode_manifest(msg, group, input_topic, partition)
        envelopes = dict(iter_envelopes(reader, topic, partition, manifest, timeout_s))
        return manifest, envelopes, _stored_bytes(manifest)
    return None, {}, 0


__all__ = ["CheckpointError", "CheckpointWriter", "Loaded", "Manifest", "chunk_key", "decode_blob",
           "empty_manifest", "encode_blob", "inflate", "iter_envelopes", "manifest_key", "read_latest",
           "read_streams", "read_usable", "split"]
