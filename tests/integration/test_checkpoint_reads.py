"""Checkpoint records read back on a real broker: reads right after a commit, chunks of
several writers interleaved on one checkpoints topic, and crafted records that claim more
than they hold."""

from __future__ import annotations

import time

import numpy as np
import pytest
from confluent_kafka.admin import NewTopic
from worker_support import new_prefix, settings_from, worker_env

from schemas import StreamCheckpoint
from schemas.checkpoint import state_equal
from worker import checkpoint_store as ckpt
from worker.kafka_io import AbortableError, TransactionalProducer, make_reader
from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka


def _setup(bootstrap: str, tag: str, **over):
    prefix = new_prefix(tag)
    # transactions here span 500 partitions; on a loaded machine (two brokers of a parallel
    # run, emulated CPUs) one may outlast the worker's 15 s transaction timeout, and its
    # records time out: a wider bound changes nothing the tests assert about reads
    over.setdefault("KAFKA__EXTRA", {"transaction.timeout.ms": "60000"})
    settings = settings_from(worker_env(bootstrap, prefix, "r1", TOPICS__PARTITIONS="1", **over))
    create_topics(settings)
    return settings


def _envelope(settings, stream: str, offset: int, size: int = 3000, seed: int = 0):
    """An envelope whose state is ``size`` random bytes (it compresses to about that)."""
    rng = np.random.default_rng(seed)
    t = settings.topics
    return StreamCheckpoint(group=settings.kafka.group_id, topics=[t.instances, t.features],
                            partition=0, stream=stream, config={},
                            offsets={t.instances: offset, t.features: 0},
                            state={"blob": rng.integers(0, 255, size, dtype=np.uint8)}, ts=0)


def _base(settings, manifest, offset: int):
    t = settings.topics
    return manifest.model_copy(update={"offsets": {t.instances: offset, t.features: 0}})


def test_a_read_right_after_the_commit_sees_the_committed_checkpoint(kafka_bootstrap, admin):
    """The commit markers are written after commit_transaction() returns, the later the more
    partitions the transaction spans (here 500, as outputs on many partitions): a read made
    at once finds the partition's last stable offset at the transaction's first record. It
    must wait until the offset covers what it reads, and never find the checkpoint
    incomplete (a reader that did not wait did in about half of these reads: twenty reads
    all miss such a reader with a chance of one in a million)."""
    settings = _setup(kafka_bootstrap, "ckread")
    t = settings.topics
    outputs = f"{t.predictions}.wide"
    admin.create_topics([NewTopic(outputs, 500, 1)])[outputs].result()
    producer = TransactionalProducer(settings, f"{t.checkpoints}-txn", timeout_s=20)
    _warm_up(producer, admin, outputs, 500)
    writer = ckpt.CheckpointWriter(producer, t.checkpoints, 4000)
    reader = make_reader(settings)
    manifest = ckpt.empty_manifest(settings.kafka.group_id, t.instances, 0, 0, t.features)
    end = 0
    try:
        for k in range(20):
            env = _envelope(settings, f"s{k % 7}", k + 1, size=300, seed=k)
            producer.begin()
            manifest, _, end = writer.write(_base(settings, manifest, k + 1),
                                            [(env.stream, ckpt.encode_blob(env))], end)
            for part in range(500):
                producer.produce(outputs, b"output", b"k", partition=part)
            producer.commit()
            got = ckpt.read_streams(reader, t.checkpoints, 0, manifest, [env.stream], 30.0, end)
            assert got[env.stream] == env, k
    finally:
        reader.close()
        producer.close()


def _warm_up(producer, admin, topic: str, partitions: int, tries: int = 5) -> None:
    """Wait until every partition of a new topic has a leader and one transaction over all
    of them commits: on a loaded broker the first transaction to 500 fresh partitions may
    outlast the transaction timeout (its records time out while leaders are elected), which
    is not what the test is about; it is aborted and tried again."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(meta) == partitions and all(p.leader >= 0 for p in meta.values()):
            break
        time.sleep(0.5)
    for attempt in range(tries):
        producer.begin()
        try:
            for part in range(partitions):
                producer.produce(topic, b"warm-up", b"k", partition=part)
            producer.commit()
            return
        except AbortableError:
            producer.abort()
            if attempt == tries - 1:
                raise


class _Interleaving:
    """A producer that puts another writer's record before each record it produces, as a
    second group sharing the checkpoints topic does when both checkpoint at once."""

    def __init__(self, producer, other_key: bytes):
        self.p = producer
        self.other_key = other_key

    def produce(self, topic, value, key=None, partition=-1, on_delivery=None, headers=None):
        self.p.produce(topic, b"\x00" * 2000, self.other_key, partition=partition)
        self.p.produce(topic, value, key, partition=partition, on_delivery=on_delivery)

    def __getattr__(self, name):
        return getattr(self.p, name)


def test_chunks_interleaved_with_another_writers_records_are_read(kafka_bootstrap):
    """Two groups share the checkpoints topic and their chunks interleave: a stream's chunks
    are read by key from its first chunk up to the manifest's record, never as the count of
    records that follow the first one. The older checkpoint is read by the records below its
    own manifest, not by the newer versions of the same keys written after it."""
    settings = _setup(kafka_bootstrap, "ckmix")
    t = settings.topics
    producer = TransactionalProducer(settings, f"{t.checkpoints}-txn", timeout_s=20)
    other = ckpt.chunk_key("another-group", t.instances, "s0", 0)
    writer = ckpt.CheckpointWriter(_Interleaving(producer, other), t.checkpoints, 5000)
    reader = make_reader(settings)
    manifest = ckpt.empty_manifest(settings.kafka.group_id, t.instances, 0, 0, t.features)
    first = {f"s{k}": _envelope(settings, f"s{k}", 10, size=6000, seed=k) for k in range(3)}
    second = {s: _envelope(settings, s, 20, size=5000, seed=10 + k) for k, s in enumerate(first)}
    try:
        for envs, offset in ((first, 10), (second, 20)):
            producer.begin()
            manifest, _, _ = writer.write(_base(settings, manifest, offset),
                                          [(s, ckpt.encode_blob(e)) for s, e in envs.items()])
            producer.commit()
            assert all(n > 1 for _, n, _ in manifest.streams.values())  # chunked
        loaded = ckpt.read_usable(reader, t.checkpoints, 0, settings.kafka.group_id,
                                  t.instances, 30.0, max_offset=20)
        assert loaded.refused == [] and loaded.envelopes == second
        older = ckpt.read_usable(reader, t.checkpoints, 0, settings.kafka.group_id,
                                 t.instances, 30.0, max_offset=15)
        assert older.envelopes == first
        assert older.refused == [f"checkpoint at {loaded.end} covers input to 20, beyond the "
                                 "committed offset 15"]
    finally:
        reader.close()
        producer.close()


def _pipeline_envelope(settings, stream: str, offset: int, rows: int = 600):
    """A real stream's envelope: the default pipeline after ``rows`` rows."""
    from models.generators.hyperplane import RotatingHyperplane
    from worker.pipeline import Pipeline, PipelineConfig

    X, y, _ = RotatingHyperplane(n_features=5, seed=len(stream)).take(rows)
    p = Pipeline(stream, PipelineConfig(), 5)
    p.process(np.ascontiguousarray(X), [int(v) for v in y])
    env = _envelope(settings, stream, offset)
    return env.model_copy(update={"state": p.to_state()})


def _tampered(env, **params):
    """``env`` whose predictor state says ``params`` (``capacity`` is the state's own)."""
    state = {**env.state, "stages": {**env.state["stages"]}}
    predictor = dict(state["stages"]["predictor"])
    learner = dict(predictor["state"])
    if "capacity" in params:
        learner["capacity"] = params.pop("capacity")
    learner["params"] = {**learner["params"], **params}
    predictor["state"] = learner
    state["stages"]["predictor"] = predictor
    return env.model_copy(update={"state": state})


def test_crafted_records_are_refused_before_allocating_and_the_older_checkpoint_is_used(
        kafka_bootstrap):
    """Newer checkpoints than a good one, each claiming more than it holds: a manifest of 10^9
    chunks (it built a 3 GB key map and failed with MemoryError, retried forever), an envelope
    that is a zlib bomb, learner states with a capacity of 524,288 or n_splits 10^6. Each is
    refused at once, without allocating for its claim, and the good checkpoint is used; a
    state the process cannot hold (MemoryError) is refused like a corrupt one."""
    import time
    import tracemalloc
    import zlib

    import msgpack

    from schemas.codec import encode
    from worker.recovery import _admit

    settings = _setup(kafka_bootstrap, "ckcraft")
    t, group = settings.topics, settings.kafka.group_id
    producer = TransactionalProducer(settings, f"{t.checkpoints}-txn", timeout_s=20)
    writer = ckpt.CheckpointWriter(producer, t.checkpoints, 1_000_000)
    reader = make_reader(settings)
    good = {s: _pipeline_envelope(settings, s, 10) for s in ("a", "bb")}
    manifest = ckpt.empty_manifest(group, t.instances, 0, 0, t.features)

    def commit(blobs, streams=None):
        """A checkpoint of ``blobs`` over the good one, or a hand-made manifest naming
        ``streams`` beside it."""
        producer.begin()
        if streams is None:
            out = writer.write(_base(settings, manifest, 10), blobs.items()).manifest
        else:
            out = manifest.model_copy(update={"streams": {**manifest.streams, **streams}})
            producer.produce(t.checkpoints, encode(out)[0],
                             ckpt.manifest_key(group, t.instances, 0), partition=0)
        producer.commit()
        return out

    head = msgpack.packb({"v": 1, "state": None})[:-1] + b"\xc6" + (400 << 20).to_bytes(4, "big")
    z = zlib.compressobj(9)
    bomb = b"".join([z.compress(head)] + [z.compress(bytes(1 << 20)) for _ in range(400)]
                    + [z.flush()])
    try:
        manifest = commit({s: ckpt.encode_blob(e) for s, e in good.items()})
        first = manifest.streams["a"][0]
        commit({}, streams={"a": [first, 10**9, 10**12]})
        commit({"bb": bomb})
        commit({"a": ckpt.encode_blob(_tampered(good["a"], capacity={"nodes": 524_288}))})
        commit({"bb": ckpt.encode_blob(_tampered(good["bb"], n_splits=10**6))})
        tracemalloc.start()
        t0 = time.perf_counter()
        loaded = ckpt.read_usable(reader, t.checkpoints, 0, group, t.instances, 30.0,
                                  accept=_admit(None),
                                  limits=ckpt.Limits(state_budget=16 << 20))
        seconds, peak = time.perf_counter() - t0, tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert loaded.manifest == manifest, loaded.refused
        resident, _ = loaded.value
        assert sorted(resident) == sorted(good)
        assert all(state_equal(resident[s].to_state(), e.state) for s, e in good.items())
        why = loaded.refused
        assert len(why) == 4, why
        assert "n_splits=1000000 is outside [1, 1000]" in why[0]
        assert "capacity 524288 is not an integer in" in why[1]
        assert "inflates past" in why[2]
        assert "claims 1000000000 chunks of stream 'a'" in why[3]
        assert seconds < 10 and peak < 100e6, (seconds, peak)

        def too_big(_manifest, envelopes):
            for _ in envelopes:
                raise MemoryError("a state this process cannot hold")

        loaded = ckpt.read_usable(reader, t.checkpoints, 0, group, t.instances, 30.0,
                                  accept=too_big)
        assert loaded.manifest is None and len(loaded.refused) == 5
        assert "claims 1000000000 chunks" in loaded.refused[3]
        assert sum("MemoryError: a state this process cannot hold" in r
                   for r in loaded.refused) == 4
    finally:
        reader.close()
        producer.close()
