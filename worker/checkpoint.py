"""Chunked, per-partition checkpoints on the compacted checkpoints topic, and their reading.

Layout (checkpoint partition = input partition, so one owner writes each partition):

* ``s\\x00<stream>\\x00<i>`` -> chunk ``i`` of the stream's state blob (msgpack of the pipeline's
  ``to_state()`` in an envelope naming the input offset it covers). A blob larger than
  ``checkpoint.max_message_bytes`` is cut into chunks, so states of any size fit topics with
  the broker's default message size.
* ``m\\x00<input topic>\\x00<partition>`` -> the partition's *manifest*: the input offset the
  checkpoint covers (next offset to process) and, for every stream of the partition, where
  its latest chunks are (checkpoint-topic offset of chunk 0, chunk count, blob size). The
  manifest is the last record of every checkpoint, written after its chunks were delivered,
  in the same transaction as the outputs and the input offsets (Kafka Streams' and
  quix-streams' rule: the checkpoint is the atomic unit; every snapshot is tagged with the
  offset it covers).

A checkpoint is incremental: only streams that changed since the last one are written; the
manifest keeps pointing at the older chunks of the others, which compaction keeps because
they are still the latest record of their key.

Reading: the latest committed manifest is found by reading the partition's tail backwards
in growing windows with a ``read_committed`` consumer (aborted checkpoints are invisible),
then each stream's chunks are read at the offsets the manifest names.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, TopicPartition

MANIFEST_VERSION = 1
_CHUNK_SLACK = 4096  # room for key, headers and record overhead under the size limit


def chunk_key(stream: str, i: int) -> bytes:
    return b"s\x00" + stream.encode() + b"\x00" + str(i).encode()


def manifest_key(input_topic: str, partition: int) -> bytes:
    return b"m\x00" + input_topic.encode() + b"\x00" + str(partition).encode()


def _codec():
    from schemas import codec

    return codec


def encode_blob(stream: str, topic: str, partition: int, offset: int, state: dict) -> bytes:
    """Envelope of one stream's state: where it comes from and the input offset it covers."""
    return _codec().encode_state({
        "v": MANIFEST_VERSION, "stream": stream, "topic": topic, "partition": partition,
        "offset": int(offset), "state": state,
    })


def decode_blob(blob: bytes) -> dict:
    return _codec().decode_state(blob)


def split(blob: bytes, chunk_bytes: int) -> list[bytes]:
    """Cut a blob into chunks of at most ``chunk_bytes`` (at least one chunk)."""
    size = max(1, chunk_bytes)
    return [blob[i:i + size] for i in range(0, max(len(blob), 1), size)] or [b""]


@dataclass
class Manifest:
    """Where the latest checkpoint of an input partition is."""

    topic: str
    partition: int
    offset: int  # next input offset the checkpoint covers
    ts: int = 0
    streams: dict = field(default_factory=dict)  # stream -> [first offset, n chunks, n bytes]

    def encode(self) -> bytes:
        return _codec().encode_state({
            "v": MANIFEST_VERSION, "topic": self.topic, "partition": self.partition,
            "offset": self.offset, "ts": self.ts,
            "streams": {s: list(e) for s, e in self.streams.items()},
        })

    @classmethod
    def decode(cls, value: bytes) -> Manifest:
        d = _codec().decode_state(value)
        if d.get("v") != MANIFEST_VERSION:
            raise ValueError(f"checkpoint manifest version {d.get('v')!r} is not supported")
        return cls(d["topic"], int(d["partition"]), int(d["offset"]), int(d.get("ts", 0)),
                   {s: [int(v) for v in e] for s, e in d["streams"].items()})


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
    crash_after_chunks : int, optional
        Test-only fault injection: SIGKILL this process once that many chunks were written
        (and flushed) in its lifetime, to test a crash in the middle of a checkpoint.
    """

    def __init__(self, producer, topic: str, chunk_bytes: int,
                 crash_after_chunks: int | None = None):
        self.producer = producer
        self.topic = topic
        self.chunk_bytes = max(1024, chunk_bytes - _CHUNK_SLACK)
        self.crash_after_chunks = crash_after_chunks
        self.n_chunks_written = 0

    def write(self, manifest: Manifest, blobs: dict[str, bytes]) -> tuple[Manifest, int]:
        """Produce the blobs of changed streams, then the updated manifest.

        Returns the new manifest and the number of bytes written. Chunks are flushed before
        the manifest is produced, because the manifest names their offsets.
        """
        p = manifest.partition
        firsts: dict[str, int] = {}
        errors: list = []
        written = 0

        def on_delivery(err, msg, _firsts=firsts, _errors=errors):
            if err is not None:
                _errors.append(err)
            elif msg.key().endswith(b"\x000"):
                s = msg.key()[2:-2].decode()
                _firsts[s] = msg.offset()

        sizes: dict[str, tuple[int, int]] = {}
        for stream, blob in blobs.items():
            chunks = split(blob, self.chunk_bytes)
            sizes[stream] = (len(chunks), len(blob))
            for i, chunk in enumerate(chunks):
                self.producer.produce(self.topic, chunk, chunk_key(stream, i), partition=p,
                                      on_delivery=on_delivery)
                written += len(chunk)
                self.n_chunks_written += 1
                self._maybe_crash()
        if blobs:
            self.producer.flush()
        if errors:
            from .kafka_io import AbortableError

            raise AbortableError(f"checkpoint chunk not delivered: {errors[0]}")
        new = Manifest(manifest.topic, p, manifest.offset, manifest.ts, dict(manifest.streams))
        for stream, (n, size) in sizes.items():
            new.streams[stream] = [firsts[stream], n, size]
        value = new.encode()
        self.producer.produce(self.topic, value, manifest_key(new.topic, p), partition=p)
        return new, written + len(value)

    def _maybe_crash(self) -> None:
        if self.crash_after_chunks is not None and self.n_chunks_written >= self.crash_after_chunks:
            self.producer.flush()  # make the partial checkpoint reach the broker first
            os.kill(os.getpid(), signal.SIGKILL)


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


def read_latest(reader, topic: str, partition: int, input_topic: str,
                timeout_s: float = 60.0) -> tuple[Manifest | None, dict[str, bytes]]:
    """Latest committed manifest of an input partition and the blobs it names.

    Parameters
    ----------
    reader : confluent_kafka.Consumer
        Group-less ``read_committed`` consumer with ``enable.partition.eof``.
    topic : str
        Checkpoints topic.
    partition : int
        Input partition (= checkpoint partition).
    input_topic : str
        Input topic, part of the manifest key.
    """
    mkey = manifest_key(input_topic, partition)
    low, high = reader.get_watermark_offsets(TopicPartition(topic, partition),
                                             timeout=timeout_s)
    if high <= low:
        return None, {}
    window = 64
    stop = None
    start = high
    found = None
    while found is None and start > low:
        start = max(low, start - window)
        msgs = _read_range(reader, topic, partition, start, stop, timeout_s,
                           want=lambda k: k == mkey)
        if msgs:
            found = msgs[-1]
        stop = start
        window *= 8
    if found is None:
        return None, {}
    manifest = Manifest.decode(found.value())
    blobs: dict[str, bytes] = {}
    # streams sorted by where their chunks are; consecutive ones are read in one pass
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
        wanted = {chunk_key(s, i): (s, i) for s, e in entries[k:j + 1] for i in range(e[1])}
        msgs = _read_range(reader, topic, partition, first, last, timeout_s,
                           want=lambda key: key in wanted)
        parts: dict[str, dict[int, bytes]] = {}
        for m in msgs:
            s, i = wanted[m.key()]
            if m.offset() >= manifest.streams[s][0]:  # older versions of the key are stale
                parts.setdefault(s, {})[i] = m.value()
        for s, e in entries[k:j + 1]:
            got = parts.get(s, {})
            if len(got) != e[1]:
                raise RuntimeError(
                    f"checkpoint of stream {s!r} on {topic}[{partition}] is incomplete: "
                    f"{len(got)} of {e[1]} chunks found from offset {e[0]}")
            blob = b"".join(got[i] for i in range(e[1]))
            if len(blob) != e[2]:
                raise RuntimeError(f"checkpoint of stream {s!r} has {len(blob)} bytes, "
                                   f"expected {e[2]}")
            blobs[s] = blob
        k = j + 1
    return manifest, blobs


__all__ = ["CheckpointWriter", "Manifest", "read_latest", "encode_blob", "decode_blob",
           "split", "chunk_key", "manifest_key"]
