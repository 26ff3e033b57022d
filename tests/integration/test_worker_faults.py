"""Exactly once under faults, on the real broker: unexpected errors inside a batch, unusable
checkpoints, missing or unfit topics, oversized inputs and outputs, a zombie transactional id,
a deleted input topic, two groups sharing one checkpoints topic under compaction, and the
stream cap across a restore."""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from worker_support import (
    WorkerProc,
    assert_exact,
    assert_same_alerts_and_rankings,
    count_committed,
    make_streams,
    new_prefix,
    produce_streams,
    read_topic,
    reference_outputs,
    scenario,
    settings_from,
    unpack,
    wait_for,
    worker_env,
)

from schemas import StreamCheckpoint
from schemas.deadletter import ERROR_CODE, SOURCE_OFFSET
from worker.kafka_io import make_reader
from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka

FAST_GROUP = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


def _env(bootstrap, prefix, member="w1", **over):
    over.setdefault("KAFKA__EXTRA", FAST_GROUP)
    over.setdefault("LEARNERS__RANKERS", "online_random_forest")
    return worker_env(bootstrap, prefix, member, **over)


def _scenario(bootstrap, tag, member="w1", *, streams=(), **over):
    """:func:`scenario` with the settings of :func:`_env`."""
    over.setdefault("KAFKA__EXTRA", FAST_GROUP)
    over.setdefault("LEARNERS__RANKERS", "online_random_forest")
    return scenario(bootstrap, tag, member, streams=streams, **over)


def _run_until(env, tmp_path, name, bootstrap, topic, n, fault=None, timeout=180):
    """A worker that runs until ``n`` predictions are committed, then gets SIGTERM."""
    w = WorkerProc(env, tmp_path, name, fault=fault)
    try:
        wait_for(lambda: not w.alive() or count_committed(bootstrap, topic) >= n, timeout,
                 f"{n} predictions from {name}", interval=1.0)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    return w


def _source_offset(m) -> int:
    return int(dict(m.headers())[SOURCE_OFFSET])


def _manifests(bootstrap: str, topic: str, group: str) -> int:
    """Manifest records of ``group`` still on the checkpoints topic (every partition)."""
    prefix = b"m\x00" + group.encode() + b"\x00"
    return sum((m.key() or b"").startswith(prefix)
               for m in read_topic(bootstrap, topic, timeout_s=30, idle_s=1.0))


def _roll_segments(bootstrap: str, topic: str, partitions: int) -> None:
    """One record (a key no reader wants) per partition: closes the active segments."""
    from worker.tools.dev.produce import make_producer

    p = make_producer(bootstrap)
    for part in range(partitions):
        p.produce(topic, b"", b"roll", partition=part)
    p.flush(30)


def _refusals(w) -> list[str]:
    return [e["reason"] for e in w.events("checkpoint refused")]


def test_unexpected_errors_abort_the_batch_and_a_restart_is_exact(kafka_bootstrap, tmp_path):
    sc = _scenario(kafka_bootstrap, "raise", streams=(3, 2000, 5))
    env, settings, streams = sc.env, sc.settings, sc.streams
    n = sc.produce()
    ref = sc.reference()
    topic = settings.topics.predictions
    seen = 0
    # the 3rd batch raises after its outputs were produced in the open transaction, then the
    # 2nd batch of the next process raises before its transaction begins
    for fault in ("raise_after_begin=3", "raise_before_begin=2"):
        w = WorkerProc(env, tmp_path, fault.split("=")[0], fault=fault)
        rc = w.wait(180)
        assert rc == 1, f"{fault}: expected exit status 1, got {rc}\n{w.log()[-3000:]}"
        failed = w.events("worker failed: open transaction aborted, no checkpoint written; "
                          "restart it to resume from the last committed checkpoint")
        assert failed and "InjectedFault" in failed[0]["error"], w.log()[-3000:]
        assert not w.events("checkpoint written")  # nothing checkpointed on the way out
        now = count_committed(kafka_bootstrap, topic)
        assert seen <= now < n
        seen = now
    final = WorkerProc(env, tmp_path, "final")
    try:
        preds = read_topic(kafka_bootstrap, topic, expected=n, timeout_s=240)
    finally:
        assert final.terminate() == 0, final.log()[-3000:]
    assert len(preds) == n
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)


def test_unusable_checkpoints_are_refused_and_outputs_stay_exact(kafka_bootstrap, tmp_path):
    sc = _scenario(kafka_bootstrap, "ckbad", streams=(2, 2400, 7), CHECKPOINT__EVERY_INSTANCES="300")
    env, settings, streams = sc.env, sc.settings, sc.streams
    topic, inp = settings.topics.predictions, settings.topics.instances
    n = 0
    # a good checkpoint, then a process whose every chunk is garbled, then one whose every
    # chunk is left out; each later process must refuse them and still be exact
    runs = [(0, 600, None), (600, 1200, "corrupt_chunk=1"), (1200, 1800, "drop_chunk=1"),
            (1800, 2400, None)]
    procs = []
    for a, b, fault in runs:
        n += produce_streams(kafka_bootstrap, inp, streams, start=a, stop=b)
        procs.append(_run_until(env, tmp_path, fault or "plain", kafka_bootstrap, topic, n,
                                fault=fault))
    corrupt_reasons = _refusals(procs[2])
    assert any("cannot be read" in r for r in corrupt_reasons), corrupt_reasons
    dropped_reasons = _refusals(procs[3])
    # a stream whose every chunk was left out is named from offset 0: the older versions of
    # its keys found from there do not add up to its size
    assert any("incomplete" in r or "bytes, expected" in r for r in dropped_reasons), \
        dropped_reasons
    restored = procs[3].events("partition restored")
    assert restored and all(e["start"] <= e["committed"] for e in restored)
    ref = sc.reference()
    preds = read_topic(kafka_bootstrap, topic, expected=n, timeout_s=120)
    assert len(preds) == n
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)


def test_a_missing_or_unfit_checkpoints_topic_stops_the_start(kafka_bootstrap, tmp_path, admin):
    sc = _scenario(kafka_bootstrap, "cktopic", streams=(2, 900, 8))
    env, settings, streams = sc.env, sc.settings, sc.streams
    topic, ck = settings.topics.predictions, settings.topics.checkpoints
    n = produce_streams(kafka_bootstrap, settings.topics.instances, streams, stop=600)
    _run_until(env, tmp_path, "first", kafka_bootstrap, topic, n)
    admin.delete_topics([ck], operation_timeout=30)[ck].result()
    wait_for(lambda: ck not in admin.list_topics(timeout=10).topics, 60, "topic deletion")
    w = WorkerProc(env, tmp_path, "no-topic")
    assert w.wait(90) == 2, w.log()[-3000:]
    assert f"topic {ck} does not exist" in w.log() and "streamforest topics create" in w.log()
    # what a producer's auto-creation would leave: one partition, cleanup.policy=delete
    admin.create_topics([NewTopic(ck, 1, 1)])[ck].result()
    w = WorkerProc(env, tmp_path, "auto-created")
    assert w.wait(90) == 2, w.log()[-3000:]
    assert "cleanup.policy=delete" in w.log()
    admin.delete_topics([ck], operation_timeout=30)[ck].result()
    wait_for(lambda: ck not in admin.list_topics(timeout=10).topics, 60, "topic deletion")
    create_topics(settings)
    # state is rebuilt from the input: replayed silently up to the committed offsets
    n += produce_streams(kafka_bootstrap, settings.topics.instances, streams, start=600)
    w = _run_until(env, tmp_path, "rebuilt", kafka_bootstrap, topic, n)
    assert any(e["start"] == 0 and e["committed"] > 0 for e in w.events("partition restored"))
    ref = sc.reference()
    preds = read_topic(kafka_bootstrap, topic, expected=n, timeout_s=120)
    assert_exact(ref, preds, streams)


def _instance(stream, i, x, y):
    return msgpack.packb({"v": 1, "stream": stream, "id": i, "ts": 1_000_000 + i, "x": x, "y": y})


def test_oversized_inputs_and_outputs_are_dead_lettered_and_nothing_stalls(kafka_bootstrap,
                                                                           tmp_path):
    from worker.tools.dev.produce import make_producer

    prefix = new_prefix("big")
    # the label cap is raised so that a prediction (it lists the stream's classes) outgrows the
    # predictions topic's default 1 MB limit: it must be dead-lettered, not stall the partition
    env = _env(kafka_bootstrap, prefix, WORKER__MAX_LABEL_LENGTH="700000",
               TOPICS__PARTITIONS="1", LEARNERS__BATCH_SIZE="10")
    settings = settings_from(env)
    create_topics(settings)
    rng = np.random.default_rng(3)
    huge = ["".join(rng.choice(list("abcdef"), 600_000)) + str(k) for k in range(2)]
    p = make_producer(kafka_bootstrap)
    inp = settings.topics.instances
    # 1. a 600 KB label under the default label cap: refused at decode
    small = worker_env(kafka_bootstrap, prefix, "x")  # default caps, for the expected codes
    assert settings_from(small).worker.max_label_length < 600_000
    # 2. 500 features with 1 KB names: over the name-length cap
    wide = {("f" * 1000) + str(k): float(k) for k in range(500)}
    p.produce(inp, msgpack.packb({"v": 1, "stream": "wide", "id": 0, "ts": 1, "x": wide, "y": 0}),
              b"wide")
    # 3. a stream whose two classes are 600 KB labels: its predictions list both classes
    for i in range(30):
        p.produce(inp, _instance("huge", i, [float(i % 2), 1.0], huge[i % 2]), b"huge")
    # 4. a plain stream after them: must be predicted in full
    for i in range(200):
        p.produce(inp, _instance("plain", i, [float(i % 3), 0.5], i % 2), b"plain")
    p.flush(60)
    w = WorkerProc(env, tmp_path, "big")
    try:
        wait_for(lambda: sum(unpack(m)["stream"] == "plain"
                             for m in read_topic(kafka_bootstrap, settings.topics.predictions,
                                                 idle_s=1.0)) >= 200,
                 180, "the plain stream's predictions", interval=2.0)
    finally:
        assert w.terminate() == 0, w.log()[-3000:]
    dead = read_topic(kafka_bootstrap, settings.topics.deadletter, idle_s=2.0)
    codes = [dict(m.headers() or [])[ERROR_CODE].decode() for m in dead]
    assert codes.count("too_long") == 1  # the 1 KB feature names
    assert "output_too_large" in codes
    preds = [unpack(m) for m in read_topic(kafka_bootstrap, settings.topics.predictions,
                                           idle_s=1.0)]
    huge_ids = {d["id"] for d in preds if d["stream"] == "huge"}
    too_large = [_source_offset(m) for m, c in zip(dead, codes) if c == "output_too_large"]
    # every instance of the huge stream is either predicted or dead-lettered, never both
    assert len(huge_ids) + len(too_large) == 30 and len(too_large) > 0
    assert not w.events("transaction aborted, rewinding")


def test_at_least_once_commits_only_delivered_outputs(kafka_bootstrap, make_topic,
                                                      unique_group):
    from confluent_kafka import Consumer, TopicPartition

    from worker.kafka_io import AbortableError, AtLeastOnceProducer

    prefix = new_prefix("alo")
    settings = settings_from(_env(kafka_bootstrap, prefix, WORKER__EXACTLY_ONCE="false"))
    small = make_topic(1, {"max.message.bytes": "2000"})  # refuses what the producer sends
    source = make_topic(1)
    group = unique_group()
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        producer = AtLeastOnceProducer(settings, lambda: consumer)
        producer.begin()
        producer.produce(small, np.random.default_rng(1).bytes(5000), b"k")  # incompressible
        producer.send_offsets([TopicPartition(source, 0, 10)], None)
        with pytest.raises(AbortableError, match="not delivered"):
            producer.commit()
        committed = consumer.committed([TopicPartition(source, 0)], timeout=10)[0]
        assert committed.offset < 0  # nothing committed for the undelivered output
        producer.begin()
        producer.produce(small, b"y" * 100, b"k")
        producer.send_offsets([TopicPartition(source, 0, 10)], None)
        producer.commit()
        assert consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 10
    finally:
        consumer.close()


def test_two_groups_share_input_and_checkpoints_under_compaction(kafka_bootstrap, tmp_path,
                                                                 admin):
    a_prefix, b_prefix = new_prefix("grpa"), new_prefix("grpb")
    env_a = _env(kafka_bootstrap, a_prefix, "a1", CHECKPOINT__EVERY_INSTANCES="200")
    sa = settings_from(env_a)
    # group B reads A's input and writes checkpoints to A's checkpoints topic; same stream ids
    env_b = _env(kafka_bootstrap, b_prefix, "b1", CHECKPOINT__EVERY_INSTANCES="200",
                 TOPICS__INSTANCES=sa.topics.instances, TOPICS__CHECKPOINTS=sa.topics.checkpoints,
                 LEARNERS__PREDICTOR="forgetful_forest")
    sb = settings_from(env_b)
    create_topics(sa)
    create_topics(sb)
    # compaction as eager as the broker allows: segments roll every 100 ms, any dirt cleans
    eager = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
             "cleanup.policy": "compact", "delete.retention.ms": "100"}
    res = ConfigResource(ConfigResource.Type.TOPIC, sa.topics.checkpoints, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in eager.items()])
    admin.incremental_alter_configs([res])[res].result()
    streams = make_streams(3, 1800, seed=11)
    n = produce_streams(kafka_bootstrap, sa.topics.instances, streams, stop=900)
    for env, s in ((env_a, sa), (env_b, sb)):
        _run_until(env, tmp_path, s.kafka.group_id, kafka_bootstrap, s.topics.predictions, n)
    # the cleaner must have removed the superseded manifests of both groups (each wrote one
    # every 200 instances) before they restart, leaving one per partition key (2 partitions);
    # a record after segment.ms closes the segment holding the last checkpoints (an active
    # segment is never cleaned), and the one cleaner thread serves every compacted topic of
    # the broker, so it may take a few of its 15 s passes
    ck = sa.topics.checkpoints
    time.sleep(0.2)
    _roll_segments(kafka_bootstrap, ck, sa.topics.partitions)
    wait_for(lambda: all(_manifests(kafka_bootstrap, ck, s.kafka.group_id) <= 2 for s in (sa, sb)),
             240, "compaction of the checkpoints topic", interval=5.0)
    n += produce_streams(kafka_bootstrap, sa.topics.instances, streams, start=900)
    wa = WorkerProc(env_a, tmp_path, "a-again")
    wb = WorkerProc(env_b, tmp_path, "b-again")
    try:
        for s in (sa, sb):
            preds = read_topic(kafka_bootstrap, s.topics.predictions, expected=n, timeout_s=240)
            assert len(preds) == n
            assert_exact(reference_outputs(s, streams), preds, streams)
    finally:
        assert wa.terminate() == 0, wa.log()[-3000:]
        assert wb.terminate() == 0, wb.log()[-3000:]
    for w in (wa, wb):
        restored = [e for e in w.events("partition restored") if e["committed"]]
        assert restored and all(e["checkpoint_offset"] == e["committed"] for e in restored)
        assert not _refusals(w)


def test_a_deleted_input_topic_ends_the_worker(kafka_bootstrap, tmp_path, admin):
    # the clients refresh their metadata every second (librdkafka's default: 5 minutes), so the
    # deletion is seen within seconds rather than at the next refresh a rebalance happens to cause
    sc = _scenario(kafka_bootstrap, "gone", streams=(1, 300, 2), WORKER__STARTUP_TIMEOUT_S="5",
                   KAFKA__EXTRA={**FAST_GROUP, "topic.metadata.refresh.interval.ms": "1000"})
    env, settings = sc.env, sc.settings
    n = sc.produce()
    w = WorkerProc(env, tmp_path, "gone")
    try:
        wait_for(lambda: count_committed(kafka_bootstrap, settings.topics.predictions) >= n, 120,
                 "predictions")
        inp = settings.topics.instances
        admin.delete_topics([inp], operation_timeout=30)[inp].result()
        rc = w.wait(90)
    finally:
        w.kill()
    assert rc == 1, w.log()[-3000:]
    assert "has been unknown" in w.log() or "fatal consumer error" in w.log(), w.log()[-3000:]


def test_members_sharing_a_transactional_id_stay_exact(kafka_bootstrap, tmp_path):
    """Two members given the same transactional id (as two containers with the same hostname
    and PID 1 would derive): outputs stay exact, and a member that finds itself fenced again
    and again exits saying why (the loop detection itself is unit-tested)."""
    prefix = new_prefix("zombie")
    over = {"WORKER__TRANSACTIONAL_ID": f"{prefix}-same", "CHECKPOINT__EVERY_INSTANCES": "100"}
    env1 = _env(kafka_bootstrap, prefix, "z1", **over)
    env2 = _env(kafka_bootstrap, prefix, "z2", **over)
    settings = settings_from(env1)
    create_topics(settings)
    streams = make_streams(4, 2000, seed=4)
    n = produce_streams(kafka_bootstrap, settings.topics.instances, streams, stop=400)
    w1 = WorkerProc(env1, tmp_path, "z1")
    w2 = WorkerProc(env2, tmp_path, "z2")
    try:
        for a in range(400, 2000, 100):  # keep both members busy: every batch is a transaction
            n += produce_streams(kafka_bootstrap, settings.topics.instances, streams, start=a,
                                 stop=a + 100)
            time.sleep(0.5)
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n,
                           timeout_s=180)
    finally:
        for w in (w1, w2):
            if w.alive():
                assert w.terminate() == 0, w.log()[-3000:]
    for w in (w1, w2):
        if w.proc.returncode != 0:
            assert w.proc.returncode == 1
            assert "another process uses transactional.id" in w.log(), w.log()[-3000:]
    assert_exact(reference_outputs(settings, streams), preds, streams)


def test_passivated_streams_give_the_outputs_of_resident_ones(kafka_bootstrap, tmp_path):
    """A state budget smaller than one stream: after every checkpoint the streams are dropped
    from memory and restored from the checkpoints topic when their next message comes,
    through a crash and a restore that leaves them passivated; checkpoints capped at 1 kB per
    transaction spread the partitions' checkpoints over transactions. Outputs stay exact."""
    sc = _scenario(kafka_bootstrap, "passivate", streams=(4, 1200, 9), WORKER__STATE_BUDGET_MB="0.05",
                   TOPICS__PARTITIONS="2", CHECKPOINT__EVERY_INSTANCES="300",
                   CHECKPOINT__TRANSACTION_BYTES="1024", WORKER__LOG_LEVEL="DEBUG")
    env, settings, streams = sc.env, sc.settings, sc.streams
    n = produce_streams(kafka_bootstrap, settings.topics.instances, streams, interleave=40)
    w = WorkerProc(env, tmp_path, "passivate-crash", fault="crash_after_commit=4")
    assert w.wait(180) == -9, w.log()[-3000:]
    assert w.events("streams passivated"), w.log()[-3000:]
    final = _run_until(env, tmp_path, "passivate-final", kafka_bootstrap,
                       settings.topics.predictions, n)
    restored = final.events("partition restored")
    assert sum(e["passivated"] for e in restored) >= 3  # the budget holds at most one stream
    assert sum(e["streams"] for e in final.events("streams restored")) > 0
    preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n, timeout_s=60)
    ref = sc.reference()
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)



def _ondemand_env(bootstrap, prefix, **over):
    """A budget far smaller than one stream: after every checkpoint the streams are
    passivated, and nearly every batch restores some of them on demand."""
    return _env(bootstrap, prefix, WORKER__STATE_BUDGET_MB="0.005", LEARNERS__BATCH_SIZE="50",
                CHECKPOINT__EVERY_INSTANCES="300", WORKER__MAX_POLL_RECORDS="40",
                WORKER__LOG_LEVEL="DEBUG", **over)


def test_restore_on_demand_waits_until_the_checkpoint_is_visible(kafka_bootstrap, tmp_path):
    """Another writer of the checkpoints topic (a group sharing it) holds a transaction open
    before every checkpoint the worker writes: a read_committed reader sees those committed
    checkpoints only once that transaction ends, as it sees any committed transaction only
    once its markers are written, after the commit returned. A restore on demand waits until
    the partition's last stable offset covers what it reads: the worker never finds a
    committed checkpoint incomplete, and outputs stay exact."""
    from worker.kafka_io import TransactionalProducer

    prefix = new_prefix("ondemand")
    env = _ondemand_env(kafka_bootstrap, prefix)
    settings = settings_from(env)
    create_topics(settings)
    streams = make_streams(30, 200, seed=13)
    inp, ck = settings.topics.instances, settings.topics.checkpoints
    n = produce_streams(kafka_bootstrap, inp, streams, stop=100, interleave=25)
    w = WorkerProc(env, tmp_path, "ondemand")
    other = TransactionalProducer(settings, f"{prefix}-other-writer", timeout_s=20)
    try:
        wait_for(lambda: not w.alive() or count_committed(kafka_bootstrap,
                                                         settings.topics.predictions) >= n,
                 180, "the first half's predictions", interval=1.0)
        # the worker's next checkpoints come after this open transaction's records
        other.begin()
        for part in range(settings.topics.partitions):
            other.produce(ck, b"", b"another writer", partition=part)
        other.flush()
        n += produce_streams(kafka_bootstrap, inp, streams, start=100, interleave=25)
        time.sleep(5.0)  # restores on demand meet the open transaction (under its timeout)
        other.commit()
        wait_for(lambda: not w.alive() or count_committed(kafka_bootstrap,
                                                         settings.topics.predictions) >= n,
                 180, "every prediction", interval=1.0)
    finally:
        other.close()
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    assert sum(e["streams"] for e in w.events("streams restored")) > 30, w.log()[-3000:]
    assert not w.events("restore on demand failed: restoring the partition from its "
                        "checkpoints again")
    preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n, timeout_s=60)
    ref = reference_outputs(settings, streams)
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)


def test_a_checkpoint_refused_on_demand_takes_the_fallback_of_a_restore(kafka_bootstrap,
                                                                        tmp_path):
    """From the 60th chunk on every chunk the worker writes is garbled: restores on demand
    find the streams' checkpoints unusable. The partition is then restored again as at start
    (the older checkpoint, counted as a fallback) and replayed; the worker never ends and
    outputs stay exact."""
    prefix = new_prefix("ondemandbad")
    env = _ondemand_env(kafka_bootstrap, prefix)
    settings = settings_from(env)
    create_topics(settings)
    streams = make_streams(30, 200, seed=14)
    n = produce_streams(kafka_bootstrap, settings.topics.instances, streams, interleave=25)
    w = _run_until(env, tmp_path, "ondemand-corrupt", kafka_bootstrap,
                   settings.topics.predictions, n, fault="corrupt_chunk=60", timeout=300)
    failed = w.events("restore on demand failed: restoring the partition from its checkpoints "
                      "again")
    assert failed and all("cannot be read" in e["error"] for e in failed), w.log()[-3000:]
    assert any("cannot be read" in r for r in _refusals(w))
    restored = w.events("partition restored")
    assert len(restored) > settings.topics.partitions  # restored again after the failures
    preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n, timeout_s=60)
    ref = reference_outputs(settings, streams)
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)


def _latest_interleaved(bootstrap: str, topic: str, group: str) -> list[str]:
    """Streams of ``group``'s latest manifests whose chunks have other records between them."""
    from schemas import CheckpointManifest
    from schemas.codec import decode

    records = read_topic(bootstrap, topic, timeout_s=60, idle_s=1.0)
    mprefix, sprefix = b"m\x00" + group.encode() + b"\x00", b"s\x00" + group.encode() + b"\x00"
    latest = {}
    for m in records:
        if (m.key() or b"").startswith(mprefix):
            latest[m.partition()] = m
    out = []
    for part, mrec in latest.items():
        manifest = decode(mrec.value(), CheckpointManifest, max_bytes=len(mrec.value()))
        for stream, (first, n, _) in manifest.streams.items():
            chunks = [m.offset() for m in records
                      if m.partition() == part and first <= m.offset() < mrec.offset()
                      and (m.key() or b"").startswith(sprefix)
                      and m.key().split(b"\x00")[3].decode() == stream]
            if chunks and chunks[n - 1] - first + 1 > n:
                out.append(stream)
    return out


class _TakingTurns:
    """A writer's producer that sends one record, flushes it and hands the turn to its partner.

    Two checkpoint writers, each with one of these, put their records on a partition
    alternately whatever the timing: the broker holds one group's chunks between the other's.
    A writer that finishes frees its partner (``done``) to write the rest in one go.
    """

    def __init__(self, producer, mine, theirs):
        self.producer, self.mine, self.theirs = producer, mine, theirs

    def produce(self, *args, **kwargs) -> None:
        self.mine.acquire(timeout=30)
        self.producer.produce(*args, **kwargs)
        self.producer.flush()
        self.theirs.release()

    def flush(self) -> None:
        self.producer.flush()

    def done(self) -> None:
        self.theirs.release(1 << 20)


def _write_in_turns(first, second) -> None:
    """Run two ``(producer, write)`` checkpoint writes, one record each in turn, each in its
    own transaction; ``write(producer)`` writes through the turn-taking producer it gets."""
    import threading

    turns = (threading.Semaphore(1), threading.Semaphore(0))
    errors: list[BaseException] = []

    def run(k: int) -> None:
        producer, write = (first, second)[k]
        taking = _TakingTurns(producer, turns[k], turns[1 - k])
        try:
            producer.begin()
            write(taking)
            producer.commit()
        except BaseException as exc:
            errors.append(exc)
        finally:
            taking.done()

    thread = threading.Thread(target=run, args=(1,), daemon=True)
    thread.start()
    run(0)
    thread.join(60)
    assert not errors, errors


def test_a_group_restores_chunks_interleaved_with_another_groups(kafka_bootstrap, tmp_path):
    """Two groups share one checkpoints topic and checkpoint into the same partitions at the
    same time, in chunks of 1 kB (``max_message_bytes`` 1024, the least; the streams' states
    are tens of kB, so each is many chunks): the broker appends the second group's chunks
    between the worker's. The test makes that happen on every run: over the worker's last
    checkpoints it writes the same checkpoints again, its producer and the second group's
    taking turns record by record. Restarted, the worker restores those without refusing
    any (an earlier reader took the records that follow a stream's first chunk as its
    chunks), and outputs stay exact; the second group's checkpoints read back as written."""
    from worker import checkpoint_store as ckpt
    from worker.kafka_io import TransactionalProducer

    env = _env(kafka_bootstrap, new_prefix("mixa"), "a1", CHECKPOINT__EVERY_INSTANCES="150",
               CHECKPOINT__MAX_MESSAGE_BYTES="1024",
               LEARNERS__PREDICTOR="adaptive_random_forest")
    settings = settings_from(env)
    create_topics(settings)
    ck, t = settings.topics.checkpoints, settings.topics
    other = settings_from(_env(kafka_bootstrap, new_prefix("mixb"), "b1",
                               TOPICS__CHECKPOINTS=ck))
    streams = make_streams(6, 1200, seed=12)
    n = produce_streams(kafka_bootstrap, t.instances, streams, stop=800)
    _run_until(env, tmp_path, "mixed", kafka_bootstrap, t.predictions, n)

    reader = make_reader(settings)
    mine = TransactionalProducer(settings, f"{ck}-rewrite", timeout_s=20)
    theirs = TransactionalProducer(other, f"{ck}-other-group", timeout_s=20)
    rng, written = np.random.default_rng(3), {}
    try:
        for p in range(t.partitions):
            loaded = ckpt.read_usable(reader, ck, p, settings.kafka.group_id, t.instances, 30.0)
            if loaded.manifest is None:
                continue
            blobs = {s: ckpt.encode_blob(e) for s, e in loaded.envelopes.items()}
            offsets = {other.topics.instances: 1, other.topics.features: 0}
            # as many bytes as the worker's (random: no compression), so as many chunks
            size = 2048 + sum(map(len, blobs.values())) // 8
            envs = {f"s{j}": StreamCheckpoint(
                group=other.kafka.group_id, topics=list(offsets), partition=p, stream=f"s{j}",
                config={}, offsets=offsets,
                state={"x": rng.integers(0, 255, size, dtype=np.uint8)}, ts=0)
                for j in range(8)}
            theirs_manifest = ckpt.empty_manifest(
                other.kafka.group_id, other.topics.instances, p, 0, other.topics.features
            ).model_copy(update={"offsets": offsets})
            _write_in_turns(
                (mine, lambda prod, m=loaded.manifest, b=blobs:
                 ckpt.CheckpointWriter(prod, ck, 1024).write(m, b.items())),
                (theirs, lambda prod, m=theirs_manifest, e=envs:
                 ckpt.CheckpointWriter(prod, ck, 1024).write(
                     m, [(s, ckpt.encode_blob(v)) for s, v in e.items()])))
            written[p] = envs
    finally:
        mine.close()
        theirs.close()
    mixed = _latest_interleaved(kafka_bootstrap, ck, settings.kafka.group_id)
    assert written and len(mixed) == len(streams), (mixed, list(written))

    n += produce_streams(kafka_bootstrap, t.instances, streams, start=800)
    w = _run_until(env, tmp_path, "mixed-again", kafka_bootstrap, t.predictions, n)
    assert not _refusals(w), _refusals(w)[:3]
    restored = [e for e in w.events("partition restored") if e["committed"]]
    assert restored and all(e["checkpoint_offset"] == e["committed"] for e in restored)
    preds = read_topic(kafka_bootstrap, t.predictions, expected=n, timeout_s=60)
    assert_exact(reference_outputs(settings, streams), preds, streams)
    try:
        for p, envs in written.items():
            loaded = ckpt.read_usable(reader, ck, p, other.kafka.group_id,
                                      other.topics.instances, 30.0)
            assert loaded.refused == [] and loaded.envelopes == envs
    finally:
        reader.close()


def _with_predictor(env_: StreamCheckpoint, **changes) -> StreamCheckpoint:
    """The envelope with its predictor's state changed (``capacity``, or parameters)."""
    state = {**env_.state, "stages": {**env_.state["stages"]}}
    stage = dict(state["stages"]["predictor"])
    learner = {**stage["state"], "params": dict(stage["state"]["params"])}
    for key, value in changes.items():
        (learner if key == "capacity" else learner["params"])[key] = value
    stage["state"] = learner
    state["stages"]["predictor"] = stage
    return env_.model_copy(update={"state": state})


def test_checkpoints_claiming_more_than_they_hold_are_refused_and_outputs_stay_exact(
        kafka_bootstrap, tmp_path):
    """Over the worker's last checkpoints, newer ones whose learner states claim a capacity no
    number of rows could grow (65,536 nodes after 400 rows: 360 MB) or a parameter outside
    the registry's range (``n_splits`` 5,000: another learner, slower and with other
    outputs). The restarted worker refuses them, restores the checkpoints under them (an
    older-checkpoint fallback) and its outputs stay exact."""
    from worker import checkpoint_store as ckpt
    from worker.kafka_io import TransactionalProducer

    prefix = new_prefix("crafted")
    env = _env(kafka_bootstrap, prefix, LEARNERS__PREDICTOR="adaptive_random_forest",
               CHECKPOINT__EVERY_INSTANCES="300")
    settings = settings_from(env)
    create_topics(settings)
    t, group = settings.topics, settings.kafka.group_id
    streams = make_streams(5, 1200, seed=15)
    n = produce_streams(kafka_bootstrap, t.instances, streams, stop=800)
    _run_until(env, tmp_path, "crafted-first", kafka_bootstrap, t.predictions, n)
    reader = make_reader(settings)
    producer = TransactionalProducer(settings, f"{prefix}-crafter", timeout_s=20)
    writer = ckpt.CheckpointWriter(producer, t.checkpoints, 1_000_000)
    crafted = {}
    try:
        for part in range(t.partitions):
            manifest, envelopes, _ = ckpt.read_latest(reader, t.checkpoints, part, group,
                                                      t.instances)
            if not envelopes:
                continue
            first = min(envelopes)
            # two checkpoints over the real one: every stream's n_splits out of range, then
            # one stream's capacity beyond its rows (the newest, refused first)
            for bad in ({s: _with_predictor(e, n_splits=5000) for s, e in envelopes.items()},
                        {first: _with_predictor(envelopes[first], capacity={"nodes": 1 << 16})}):
                producer.begin()
                writer.write(manifest, [(s, ckpt.encode_blob(e)) for s, e in bad.items()])
                producer.commit()
            crafted[part] = sorted(envelopes)
    finally:
        producer.close()
        reader.close()
    n += produce_streams(kafka_bootstrap, t.instances, streams, start=800)
    w = _run_until(env, tmp_path, "crafted-again", kafka_bootstrap, t.predictions, n)
    why = _refusals(w)
    assert len(why) == 2 * len(crafted) and crafted, why
    assert sum("capacity 65536 is not an integer in" in r for r in why) == len(crafted), why
    assert sum("n_splits=5000 is outside [1, 1000]" in r for r in why) == len(crafted), why
    restored = [e for e in w.events("partition restored") if e["committed"]]
    assert len(restored) == len(crafted)
    assert all(e["checkpoint_offset"] == e["committed"] for e in restored)
    preds = read_topic(kafka_bootstrap, t.predictions, expected=n, timeout_s=60)
    ref = reference_outputs(settings, streams)
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, kafka_bootstrap, settings, streams)
