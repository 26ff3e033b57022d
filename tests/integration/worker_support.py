"""Helpers of the worker integration tests: settings env, subprocess workers, readers,
reference outputs computed in-process with the same pipeline code and seeds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from schemas.codec import load

REPO = Path(__file__).resolve().parents[2]


def new_prefix(tag: str) -> str:
    return f"it-{tag}-{uuid.uuid4().hex[:8]}"


def worker_env(bootstrap: str, prefix: str, member: str, **over) -> dict[str, str]:
    """Environment of a worker subprocess: topics named after ``prefix``, small learners.

    ``over`` maps ``SECTION__FIELD`` to a value (dicts become JSON).
    """
    env = {
        "KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA__GROUP_ID": f"{prefix}-group",
        "TOPICS__INSTANCES": f"{prefix}.instances",
        "TOPICS__FEATURES": f"{prefix}.features",
        "TOPICS__PREDICTIONS": f"{prefix}.predictions",
        "TOPICS__DRIFT": f"{prefix}.drift",
        "TOPICS__RANKINGS": f"{prefix}.rankings",
        "TOPICS__DEADLETTER": f"{prefix}.deadletter",
        "TOPICS__CHECKPOINTS": f"{prefix}.checkpoints",
        "TOPICS__LATEST": f"{prefix}.latest",
        "TOPICS__PARTITIONS": "2",
        "LEARNERS__PREDICTOR": "forgetful_tree",
        "LEARNERS__DETECTORS": "adwin",
        "LEARNERS__BATCH_SIZE": "50",
        "LEARNERS__RANKING_EVERY": "400",
        "LEARNERS__TOP_K": "3",
        "LEARNERS__PARAMS": {"online_random_forest": {"n_trees": 3, "min_samples": 20,
                                                      "n_tests": 5}},
        "CHECKPOINT__EVERY_INSTANCES": "400",
        "CHECKPOINT__MAX_MESSAGE_BYTES": "20000",
        "WORKER__MAX_POLL_RECORDS": "300",
        "WORKER__CONSUME_TIMEOUT_S": "0.1",
        "WORKER__METRICS_PORT": "0",
        "WORKER__MEMBER_NAME": member,
    }
    env.update(over)
    out = {}
    for k, v in env.items():
        out["STREAMFOREST_" + k] = json.dumps(v) if isinstance(v, dict | list) else str(v)
    return out


def settings_from(env: dict[str, str]):
    from worker.settings import load_settings

    return load_settings(env)


@dataclass
class Scenario:
    """The common start of a worker test: a new topic prefix, a member's settings env, the topics
    created, and the streams the test will produce. See :func:`scenario`."""

    bootstrap: str
    prefix: str
    env: dict[str, str]
    settings: Any
    streams: dict
    over: dict

    def member_env(self, member: str, **over) -> dict[str, str]:
        """The env of another member of the same group (the scenario's settings, then ``over``)."""
        return worker_env(self.bootstrap, self.prefix, member, **{**self.over, **over})

    def produce(self, start: int = 0, stop: int | None = None) -> int:
        """Rows ``start:stop`` of every stream to the instances topic; returns how many."""
        return produce_streams(self.bootstrap, self.settings.topics.instances, self.streams, start, stop)

    def reference(self) -> dict:
        """The outputs of an uninterrupted in-process run of the streams."""
        return reference_outputs(self.settings, self.streams)


def scenario(bootstrap: str, tag: str, member: str = "w1", *, streams: tuple = (),
             **over) -> Scenario:
    """A new prefix named after ``tag``, the env of ``member`` (``over`` as in :func:`worker_env`),
    every topic of its settings created, and ``make_streams(*streams)`` (no streams when empty)."""
    from worker.tools.topics import create_topics

    prefix = new_prefix(tag)
    env = worker_env(bootstrap, prefix, member, **over)
    settings = settings_from(env)
    create_topics(settings)
    return Scenario(bootstrap, prefix, env, settings, make_streams(*streams) if streams else {}, over)


def crash_run(env: dict[str, str], log_dir, fault: str, name: str) -> WorkerProc:
    """A worker run with ``fault`` (``--test-fault``), which must end it by SIGKILL."""
    w = WorkerProc(env, log_dir, name, fault=fault)
    rc = w.wait(180)
    assert rc == -9, f"{fault}: expected a SIGKILL, got {rc}\n{w.log()[-3000:]}"
    return w


class WorkerProc:
    """``python -m worker run`` as a subprocess with its own log file."""

    def __init__(self, env: dict[str, str], log_dir: Path, name: str, fault: str | None = None):
        self.name = name
        self.log_path = Path(log_dir) / f"{name}-{uuid.uuid4().hex[:6]}.log"
        full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
        full.update(env)
        full["PYTHONUNBUFFERED"] = "1"
        cmd = [sys.executable, "-m", "worker", "run"]
        if fault:
            cmd += ["--test-fault", fault]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=str(REPO), env=full, stdout=self._log,
                                     stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM, once the worker has started, and its exit status. A SIGTERM that comes
        while the interpreter still imports the learners (seconds on a busy machine), before
        ``run`` makes its worker, ends the process with 143 instead of a graceful stop: a
        test whose outputs are all in before a new member got that far must wait for it."""
        deadline = time.monotonic() + timeout
        while self.alive() and not self.events("worker started") and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self._log.close()
        return rc

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def events(self, msg: str) -> list[dict]:
        """This worker's log events with message ``msg``, in order."""
        return [e for e in self.log_events() if e.get("msg") == msg]

    def log_events(self) -> list[dict]:
        out = []
        for line in self.log().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out


def read_topic(bootstrap: str, topic: str, *, expected: int | None = None,
               timeout_s: float = 120.0, idle_s: float = 3.0, committed: bool = True):
    """All messages of a topic (every partition), ``read_committed`` by default.

    Stops once ``expected`` messages were read (any number when ``None``) and every
    partition's position has reached its end offset as the broker gives it then: what the
    topic holds, including the records of a transaction still open, which the reader waits
    for until it ends. Or after ``idle_s`` seconds without a message once ``expected`` were
    read (a transaction left open by a killed producer holds a ``read_committed`` reader back
    until the broker aborts it).
    """
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed" if committed else "read_uncommitted",
    })
    md = c.list_topics(topic, timeout=30).topics[topic]
    tps = [TopicPartition(topic, p, 0) for p in md.partitions]
    c.assign(tps)
    out = []
    deadline = time.monotonic() + timeout_s
    last = time.monotonic()
    while time.monotonic() < deadline:
        msgs = c.consume(2000, 0.5)
        for m in msgs:
            if m.error() is None:
                out.append(m)
        if msgs:
            last = time.monotonic()
        if expected is not None and len(out) < expected:
            continue
        if time.monotonic() - last > idle_s or _at_end(c, tps):
            break
    c.close()
    return out


def _at_end(c: Consumer, tps: list) -> bool:
    """Whether the reader's position in every partition of ``tps`` is at its end offset
    (past the last transaction marker: the consumer's position skips them)."""
    for tp, pos in zip(tps, c.position(tps)):
        low, high = c.get_watermark_offsets(tp, timeout=10, cached=False)
        if high > low and pos.offset < high:  # an unread partition's position is negative
            return False
    return True


def read_partition_to_end(bootstrap: str, topic: str, isolation: str = "read_committed",
                          timeout_s: float = 60.0) -> list:
    """Every record of partition 0 of ``topic`` a consumer with this isolation level sees.

    The end is the partition EOF event: for ``read_committed`` that is the last stable offset, so
    records of aborted or open transactions are never counted by mistake as "not yet arrived".
    """
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"sf-reader-{uuid.uuid4().hex}",  # assign(): the group is never joined
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    })
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return records
                raise AssertionError(f"consumer error: {msg.error()}")
            records.append(msg)
    finally:
        consumer.close()
    raise AssertionError(f"end of {topic} not reached within {timeout_s} s ({len(records)} records)")


def wait_for(pred, timeout_s: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def count_committed(bootstrap: str, topic: str) -> int:
    """Messages a read_committed reader sees right now (quick, for progress waits)."""
    return len(read_topic(bootstrap, topic, timeout_s=30, idle_s=0.6))


def unpack(m) -> dict:
    """The map of an output record, msgpack or JSON (by its content-type header, else its
    first byte): drift alerts and rankings are JSON by default, predictions msgpack."""
    return load(m.value(), m.headers())


def make_streams(n_streams: int, n_rows: int, seed: int = 0, d: int = 5):
    """Hyperplane streams with some unlabelled rows: {stream: (X, y)}."""
    from models.generators.hyperplane import RotatingHyperplane

    out = {}
    for k in range(n_streams):
        X, y, _ = RotatingHyperplane(n_features=d, n_drift_features=2, mag_change=0.005,
                                     seed=seed * 100 + k).take(n_rows)
        ys = [int(v) for v in y]
        for i in range(3, n_rows, 11):
            ys[i] = None
        out[f"stream-{k}"] = (X, ys)
    return out


def produce_streams(bootstrap: str, topic: str, streams: dict, start: int = 0,
                    stop: int | None = None, interleave: int = 50) -> int:
    """Produce rows ``start:stop`` of every stream, interleaving the streams by chunks."""
    from worker.tools.dev.produce import instance_values, make_producer, produce_values

    p = make_producer(bootstrap)
    n = 0
    longest = max(len(y) for _, y in streams.values())
    stop = longest if stop is None else stop
    for a in range(start, stop, interleave):
        for s, (X, y) in streams.items():
            b = min(a + interleave, stop, len(y))
            if a < b:
                vals = instance_values(s, X[a:b], y[a:b], start_id=a, ts0=1_000_000 + a)
                n += produce_values(p, topic, s, vals)
    p.flush(60)
    return n


def reference_outputs(settings, streams: dict) -> dict:
    """Uninterrupted in-process run of every stream: {stream: [prediction tuples]}.

    Also returns drift alerts and rankings per stream, keyed "drift:<s>" / "rank:<s>", and
    the latest state they leave, keyed "latest:<s>" (see :func:`latest_of`).
    """
    from worker.pipeline import Pipeline
    from worker.settings import stream_profiles

    profiles = stream_profiles(settings)
    ref = {}
    for s, (X, y) in streams.items():
        p = Pipeline(s, profiles.for_stream(s), X.shape[1])
        res = p.process(np.ascontiguousarray(X), list(y))
        preds = []
        for b in res.blocks:
            for r in range(b.start, b.stop):
                preds.append((r, b.y_pred[r - b.start],
                              b.proba[r - b.start].tolist() if b.classes else []))
        ref[s] = preds
        ref["drift:" + s] = [(a.level, a.position) for a in res.alerts]
        ref["rank:" + s] = [(k.method, k.features, k.scores, k.n_seen) for k in res.rankings]
        ref["latest:" + s] = latest_of_result(res)
    return ref


def latest_of_result(res) -> dict:
    """:func:`latest_of` the rankings and alerts of an in-process run's result."""
    return latest_of(
        [{"method": k.method, "features": k.features, "scores": k.scores, "n_seen": k.n_seen}
         for k in res.rankings],
        [{"source": a.source, "level": a.level, "position": a.position} for a in res.alerts])


def latest_of(rankings: list[dict], alerts: list[dict]) -> dict:
    """The last ranking of each method and the last alert of each (source, level), in order:
    ``{("ranking", method): (features, scores, n_seen), ("drift-alert", source, level):
    position}``, what the latest-state topic keeps of one stream."""
    out: dict[tuple, Any] = {}
    for r in rankings:
        out["ranking", r["method"]] = (r["features"], r["scores"], r["n_seen"])
    for a in alerts:
        out["drift-alert", a["source"], a["level"]] = a["position"]
    return out


def read_latest(bootstrap: str, topic: str, timeout_s: float = 60.0) -> dict:
    """The latest-state topic as a new subscriber sees it: every record from the beginning,
    the last value of each key kept, decoded (``{key bytes: (headers, record)}``)."""
    from schemas.codec import load

    last: dict[bytes, tuple] = {}
    for m in read_topic(bootstrap, topic, timeout_s=timeout_s, idle_s=2.0):
        if m.value() is None:
            last.pop(m.key(), None)
        else:
            last[m.key()] = (m.headers(), load(m.value(), m.headers()))
    return last


def latest_by_stream(bootstrap: str, topic: str) -> dict:
    """The latest-state topic per stream, keyed like :func:`reference_outputs`."""
    rankings: dict[str, list] = {}
    alerts: dict[str, list] = {}
    for headers, d in read_latest(bootstrap, topic).values():
        kind = dict(headers)["sf-kind"].decode()
        (rankings if kind == "ranking" else alerts).setdefault(d["stream"], []).append(d)
    return {"latest:" + s: latest_of(rankings.get(s, []), alerts.get(s, []))
            for s in set(rankings) | set(alerts)}


def predictions_by_stream(msgs) -> dict:
    out: dict[str, list] = {}
    for m in msgs:
        d = unpack(m)
        out.setdefault(d["stream"], []).append((d["id"], d["y_pred"], d["proba"]))
    return out


def assert_exact(ref: dict, msgs, streams: dict) -> None:
    """Committed predictions equal the reference run: no gap, no duplicate, same values."""
    got = predictions_by_stream(msgs)
    assert set(got) == set(streams), f"streams {sorted(got)} != {sorted(streams)}"
    for s in streams:
        ids = [g[0] for g in got[s]]
        n = len(streams[s][1])
        dup = len(ids) - len(set(ids))
        assert dup == 0, f"{s}: {dup} duplicated predictions"
        assert ids == list(range(n)), f"{s}: ids out of order or missing " \
            f"(first bad index {next((i for i, v in enumerate(ids) if v != i), len(ids))})"
        mism = [i for i, (g, r) in enumerate(zip(got[s], ref[s])) if (g[1], g[2]) != (r[1], r[2])]
        assert not mism, f"{s}: {len(mism)} predictions differ from the reference run, " \
            f"first at {mism[0]}: {got[s][mism[0]]} vs {ref[s][mism[0]]}"


def alerts_and_rankings(bootstrap: str, settings) -> dict:
    """Committed drift alerts and rankings per stream, keyed like :func:`reference_outputs`."""
    out: dict[str, list] = {}
    for m in read_topic(bootstrap, settings.topics.drift, timeout_s=60, idle_s=2.0):
        d = unpack(m)
        out.setdefault("drift:" + d["stream"], []).append((d["level"], d["position"]))
    for m in read_topic(bootstrap, settings.topics.rankings, timeout_s=60, idle_s=2.0):
        d = unpack(m)
        out.setdefault("rank:" + d["stream"], []).append(
            (d["method"], d["features"], d["scores"], d["n_seen"]))
    return out


def assert_same_alerts_and_rankings(ref: dict, bootstrap: str, settings, streams: dict) -> None:
    """Drift alerts and rankings equal the reference run: none lost, none twice, same values."""
    got = alerts_and_rankings(bootstrap, settings)
    n_alerts = n_rankings = 0
    for s in streams:
        for kind in ("drift:", "rank:"):
            want, have = ref.get(kind + s, []), got.get(kind + s, [])
            assert have == want, f"{kind}{s}: {len(have)} committed vs {len(want)} in the " \
                f"reference run; first difference at " \
                f"{next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))}"
        n_alerts += len(ref.get("drift:" + s, []))
        n_rankings += len(ref.get("rank:" + s, []))
    assert n_rankings > 0, "the reference run published no ranking: the comparison is empty"
    if settings.topics.latest is not None:
        # what a new subscriber of the latest state sees: the last of each key of the reference
        latest = latest_by_stream(bootstrap, settings.topics.latest)
        for s in streams:
            want, have = ref.get("latest:" + s, {}), latest.get("latest:" + s, {})
            assert have == want, f"latest:{s}: keys {sorted(have)} vs {sorted(want)} in the " \
                f"reference run, differing: {[k for k in want if have.get(k) != want[k]]}"


def regression_stream(n_rows: int, seed: int = 0, d: int = 5):
    """A 3-target regression stream (targets from features 0-2, noise, some rows unlabelled)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_rows, d))
    Y = np.column_stack([3 * X[:, 0] + X[:, 1], X[:, 1] * X[:, 2], 2 * X[:, 2] - X[:, 0]])
    Y += 0.05 * rng.standard_normal(Y.shape)
    ys = [[float(v) for v in row] for row in Y]
    for i in range(5, n_rows, 13):
        ys[i] = None
    return X, ys
