"""Chaos run: a consumer group under random faults, then every output checked against an
uninterrupted run.

For ``--minutes`` minutes a producer feeds instances (and some malformed messages) to a
3-partition topic while up to three worker members run, with a state budget small enough
(``--state-budget-mb``) that idle streams are passivated and restored on demand all the
time. The malformed messages include every record that once stopped a partition: lone
surrogates in labels, ids, feature names and streams, keyless records, values beyond
+-1e100, maps on streams of positional features. At random moments one of these faults is
injected:

* ``kill9``: SIGKILL a member (it is restarted at once, as an orchestrator would);
* ``sigterm``: SIGTERM a member (graceful stop, then restarted);
* ``add``: start one more member (at most three);
* ``pause``: SIGSTOP a member past ``session.timeout.ms``, then SIGCONT (a zombie that wakes up);
* ``broker``: SIGKILL the broker and start it again on the same data directory;
* ``crafted``: a checkpoint written by someone else over a partition's latest one, claiming
  more than it holds (a learner capacity its rows could not have grown, a parameter outside
  the registry's ranges, a zlib bomb, a manifest naming 10^9 chunks); a member that restores
  the partition must refuse it and use the checkpoint under it.

At the end the input stops, the group drains it, and the run checks that every valid input
has exactly one committed prediction identical to an in-process run of the same pipeline,
that every malformed input is in the dead-letter topic exactly once, and that drift alerts
and rankings equal the reference too. It prints a report (and writes it with ``--out``,
stamped with the commit, the machine and the command by
:func:`tests.benchmarks.common.write_results`).

Run (outside the default test run; it needs the broker jars, see ``make setup``)::

    .venv/bin/python tests/chaos/chaos.py --minutes 10 --seed 1 --out tests/benchmarks/service/results/chaos.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parents[2]), str(HERE.parents[1] / "integration")]

from worker_support import (  # noqa: E402 (the path above makes the helpers importable)
    WorkerProc,
    assert_exact,
    assert_same_alerts_and_rankings,
    make_streams,
    new_prefix,
    produce_streams,
    read_topic,
    reference_outputs,
    settings_from,
    worker_env,
)

from schemas.deadletter import ERROR_CODE, SOURCE_OFFSET, SOURCE_PARTITION  # noqa: E402
from tests.benchmarks.common import write_results  # noqa: E402
from worker.tools.dev.broker import DEFAULT_JVM_OPTS, LocalBroker, free_port  # noqa: E402
from worker.tools.dev.produce import make_producer  # noqa: E402
from worker.tools.topics import create_topics  # noqa: E402
from worker.watchdog import EXIT_OVERDUE  # noqa: E402

SESSION_MS = 6000
MALFORMED = (b"\xc1 not msgpack", b'{"v": 1, "stream": "bad"}', b"")


def poison(stream: str, d: int, rng: random.Random) -> tuple[bytes | None, bytes]:
    """``(key, value)`` of a record that once stopped a partition, keyed by ``stream`` (or by
    nothing: a keyless record lands on any partition)."""
    i = rng.randrange(10**9)
    base = {"v": 1, "stream": stream, "id": f"poison-{i}", "ts": 0, "x": [0.5] * d}
    kind = rng.choice(["label", "id", "name", "stream", "keyless", "huge", "sentinel", "map"])
    key: bytes | None = stream.encode()
    if kind == "label":
        base["y"] = "\ud800"
    elif kind == "id":
        base["id"] = "\udfff" + str(i)
    elif kind == "name":
        base["x"] = {"\ud800": 0.5, **{f"f{j}": 0.5 for j in range(1, d)}}
    elif kind == "stream":
        base["stream"] = "\ud800"
    elif kind == "keyless":
        key = None
    elif kind == "huge":
        base["x"] = [1e300] + [0.5] * (d - 1)
    elif kind == "sentinel":
        base["x"] = [1.7976931348623157e308] * d
    else:  # a map on a stream whose features are positional
        base["x"] = {f"f{j}": 0.5 for j in range(d)}
    return key, json.dumps(base).encode()


class Feeder(threading.Thread):
    """Produces every stream's rows in chunks over the run, with malformed messages between."""

    def __init__(self, bootstrap: str, topic: str, streams: dict, seconds: float, seed: int):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.streams = bootstrap, topic, streams
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.n_valid = 0
        self.n_malformed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            rows = max(len(y) for _, y in self.streams.values())
            chunk = 50
            steps = -(-rows // chunk)
            pause = self.seconds / steps
            bad = make_producer(self.bootstrap)
            for a in range(0, rows, chunk):
                t0 = time.monotonic()
                self.n_valid += self._produce(a, a + chunk)
                if self.rng.random() < 0.2:
                    key = self.rng.choice(list(self.streams)).encode()
                    self._produce_bad(bad, key, self.rng.choice(MALFORMED))
                if a and self.rng.random() < 0.3:  # after every stream's first rows
                    stream = self.rng.choice(list(self.streams))
                    d = self.streams[stream][0].shape[1]
                    self._produce_bad(bad, *poison(stream, d, self.rng))
                time.sleep(max(0.0, pause - (time.monotonic() - t0)))
            bad.flush(120)
        except BaseException as exc:
            self.error = exc

    def _produce(self, a: int, b: int) -> int:
        while True:  # the broker may be down for a while: retry the chunk until it is in
            try:
                return produce_streams(self.bootstrap, self.topic, self.streams, start=a, stop=b)
            except Exception as exc:
                print(f"  feeder: retrying rows {a}:{b} after {exc}", flush=True)
                time.sleep(2.0)

    def _produce_bad(self, producer, key: bytes, value: bytes) -> None:
        producer.produce(self.topic, value, key)
        producer.poll(0)
        self.n_malformed += 1


class Group:
    """The members, numbered; dead ones are restarted (what an orchestrator does)."""

    def __init__(self, bootstrap: str, prefix: str, log_dir: Path, budget_mb: float):
        self.bootstrap, self.prefix, self.log_dir = bootstrap, prefix, log_dir
        self.budget_mb = budget_mb
        self.settings = settings_from(self.env("crafter"))
        self.members: dict[str, WorkerProc] = {}
        self.exits: Counter = Counter()
        self._n = 0

    def env(self, name: str) -> dict:
        return worker_env(self.bootstrap, self.prefix, name, TOPICS__PARTITIONS="3",
                          CHECKPOINT__EVERY_INSTANCES="600",
                          WORKER__STATE_BUDGET_MB=str(self.budget_mb),
                          KAFKA__EXTRA={"session.timeout.ms": str(SESSION_MS),
                                        "heartbeat.interval.ms": "1000"})

    def add(self) -> str:
        self._n += 1
        name = f"m{self._n}"
        self.members[name] = WorkerProc(self.env(name), self.log_dir, name)
        return name

    def replace_dead(self) -> None:
        for name, w in list(self.members.items()):
            if not w.alive():
                self.exits[w.proc.returncode] += 1
                del self.members[name]
                self.add()

    def pick(self, rng: random.Random) -> tuple[str, WorkerProc]:
        name = rng.choice(sorted(self.members))
        return name, self.members[name]


def _tampered(envelope, **changes):
    """The envelope with its predictor's learner state changed (``capacity`` or parameters)."""
    state = {**envelope.state, "stages": {**envelope.state["stages"]}}
    stage = dict(state["stages"]["predictor"])
    learner = {**stage["state"], "params": dict(stage["state"]["params"])}
    for key, value in changes.items():
        (learner if key == "capacity" else learner["params"])[key] = value
    stage["state"] = learner
    state["stages"]["predictor"] = stage
    return envelope.model_copy(update={"state": state})


def craft(settings, rng: random.Random, n: int) -> str:
    """Write a crafted checkpoint over one partition's latest (see the module doc)."""
    import zlib

    from schemas.codec import encode
    from worker import checkpoint_store as ckpt
    from worker.kafka_io import TransactionalProducer, make_reader

    t, group = settings.topics, settings.kafka.group_id
    part = rng.randrange(t.partitions)
    reader = make_reader(settings)
    try:
        manifest, envelopes, _ = ckpt.read_latest(reader, t.checkpoints, part, group,
                                                  t.instances, timeout_s=30)
    finally:
        reader.close()
    if not envelopes:
        return f"crafted checkpoint skipped (partition {part} has none yet)"
    stream = rng.choice(sorted(envelopes))
    kind = rng.choice(["capacity", "n_splits", "bomb", "chunks"])
    producer = TransactionalProducer(settings, f"{settings.kafka.group_id}-crafter-{n}",
                                     timeout_s=30)
    writer = ckpt.CheckpointWriter(producer, t.checkpoints, 1_000_000)
    try:
        producer.begin()
        if kind == "chunks":
            first = manifest.streams[stream][0]
            bad = manifest.model_copy(update={"streams": {**manifest.streams,
                                                          stream: [first, 10**9, 10**12]}})
            producer.produce(t.checkpoints, encode(bad)[0],
                             ckpt.manifest_key(group, t.instances, part), partition=part)
        elif kind == "bomb":  # 400 MB of zeros in about 400 KB
            z = zlib.compressobj(9)
            blob = b"".join([z.compress(bytes(1 << 20)) for _ in range(400)] + [z.flush()])
            writer.write(manifest, [(stream, blob)])
        else:
            change = {"capacity": {"nodes": 1 << 22}} if kind == "capacity" else {"n_splits": 5000}
            writer.write(manifest, [(stream, ckpt.encode_blob(_tampered(envelopes[stream],
                                                                       **change)))])
        producer.commit()
    finally:
        producer.close()
    return f"crafted checkpoint ({kind}) over partition {part}, stream {stream}"


def inject(kind: str, group: Group, broker: LocalBroker, rng: random.Random) -> str:
    """Inject one fault; returns what was done."""
    if kind == "crafted":
        return craft(group.settings, rng, len(group.exits) + rng.randrange(10**6))
    if kind == "add" and len(group.members) < 3:
        return f"add {group.add()}"
    if kind == "broker":
        os.kill(broker.pid(), signal.SIGKILL)
        time.sleep(rng.uniform(1.0, 8.0))
        broker.start(timeout=240)
        return "broker kill -9 and restart"
    name, w = group.pick(rng)
    if kind == "kill9":
        w.kill()
        return f"kill -9 {name}"
    if kind == "sigterm":
        rc = w.terminate(timeout=120)
        return f"SIGTERM {name} (exit {rc})"
    if kind == "pause":
        pause = SESSION_MS / 1000 + rng.uniform(2.0, 6.0)
        w.proc.send_signal(signal.SIGSTOP)
        time.sleep(pause)
        w.proc.send_signal(signal.SIGCONT)
        return f"SIGSTOP {name} for {pause:.1f} s"
    return f"add skipped ({len(group.members)} members)"


def check(bootstrap: str, settings, streams: dict, n_valid: int, n_malformed: int) -> dict:
    """Every output compared with the reference run (raises AssertionError on a difference)."""
    preds = read_topic(bootstrap, settings.topics.predictions, expected=n_valid, timeout_s=600)
    ref = reference_outputs(settings, streams)
    assert len(preds) == n_valid, f"{len(preds)} predictions for {n_valid} valid inputs"
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, bootstrap, settings, streams)
    dead = read_topic(bootstrap, settings.topics.deadletter, expected=n_malformed, timeout_s=120)
    where = [(dict(m.headers())[SOURCE_PARTITION], dict(m.headers())[SOURCE_OFFSET]) for m in dead]
    assert len(dead) == n_malformed, f"{len(dead)} dead letters for {n_malformed} malformed"
    assert len(set(where)) == len(where), "a malformed input was dead-lettered twice"
    codes = Counter(dict(m.headers())[ERROR_CODE].decode() for m in dead)
    alerts = sum(len(v) for k, v in ref.items() if k.startswith("drift:"))
    rankings = sum(len(v) for k, v in ref.items() if k.startswith("rank:"))
    return {"predictions": len(preds), "dead_letters": len(dead), "dead_letter_codes": codes,
            "drift_alerts": alerts, "rankings": rankings}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rows", type=int, default=12000, help="rows per stream")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--state-budget-mb", type=float, default=0.1,
                    help="each member's state budget: small, so streams are passivated")
    ap.add_argument("--out", type=Path, default=None, help="write the report (markdown) here")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="streamforest-chaos-"))
    port = free_port()
    broker = LocalBroker(port=port, controller_port=free_port(exclude=[port]),
                         data_dir=work / "kafka", jvm_opts=DEFAULT_JVM_OPTS, detach=False)
    broker.start(timeout=240)
    bootstrap = broker.bootstrap
    prefix = new_prefix("chaos")
    group = Group(bootstrap, prefix, work, args.state_budget_mb)
    settings = settings_from(group.env("m0"))
    create_topics(settings)
    streams = make_streams(args.streams, args.rows, seed=args.seed)
    seconds = args.minutes * 60
    feeder = Feeder(bootstrap, settings.topics.instances, streams, seconds, args.seed)
    faults: list[tuple[float, str]] = []
    t0 = time.monotonic()
    try:
        group.add()
        group.add()
        feeder.start()
        while time.monotonic() - t0 < seconds:
            time.sleep(rng.uniform(8.0, 25.0))
            kind = rng.choices(["kill9", "sigterm", "add", "pause", "broker", "crafted"],
                               weights=[3, 2, 2, 2, 1, 2])[0]
            done = inject(kind, group, broker, rng)
            faults.append((round(time.monotonic() - t0, 1), done))
            print(f"{faults[-1][0]:7.1f} s  {done}", flush=True)
            group.replace_dead()
        feeder.join()
        if feeder.error is not None:
            raise feeder.error
        group.replace_dead()
        result = check(bootstrap, settings, streams, feeder.n_valid, feeder.n_malformed)
    finally:
        for w in group.members.values():
            if w.alive():
                rc = w.terminate(timeout=120)
                group.exits[rc] += 1
        broker.stop()
    # a member that ended on its own with an error (exit 1) failed: kill -9 is -9, a stop 0,
    # and a stop or a revocation that outlasted worker.shutdown_timeout_s (the broker down
    # or its transaction coordinator still loading) is the watchdog's bounded exit, by
    # design: the next owner restores from the last checkpoint
    failed = {rc: n for rc, n in group.exits.items()
              if rc not in (0, -signal.SIGKILL, EXIT_OVERDUE)}
    assert not failed, f"members failed: exit codes {failed} (logs in {work})"
    kinds = Counter(f.split()[0] if not f.startswith("kill") else "kill -9" for _, f in faults)
    result.update(member_log_counts(work))
    report = {"minutes": args.minutes, "seed": args.seed, "valid_inputs": feeder.n_valid,
              "malformed_inputs": feeder.n_malformed, **result, "lost": 0, "duplicated": 0,
              "differing": 0, "faults": dict(kinds), "member_exits": dict(group.exits),
              "seconds": round(time.monotonic() - t0, 1)}
    text = _markdown(report, faults)
    print(text)
    if args.out is not None:
        write_results(args.out, text)  # stamped with the commit, the machine and the command
    return 0


def member_log_counts(work: Path) -> dict:
    """What the members' logs say they did: streams passivated (the state budget at work),
    checkpoints refused (crafted ones), watchdog exits."""
    passivated = refused = overdue = 0
    for path in work.glob("m*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue  # the Kafka client's own lines
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            msg = entry.get("msg", "")
            passivated += int(entry.get("streams", 0)) if msg == "streams passivated" else 0
            refused += msg == "checkpoint refused"
            overdue += "did not end within worker.shutdown_timeout_s" in msg
    return {"streams_passivated": passivated, "checkpoints_refused": refused,
            "watchdog_exits": overdue}


def _markdown(report: dict, faults: list) -> str:
    lines = ["# Chaos run", "",
             f"{report['minutes']:g} minutes, seed {report['seed']}. Every valid input has exactly one committed prediction identical to an "
             "uninterrupted in-process run; every malformed input is dead-lettered once; drift "
             "alerts and rankings equal the reference. `member_exits` counts exit statuses: "
             "-9 killed, 0 stopped, 3 a stop or partition revocation that outlasted "
             "`worker.shutdown_timeout_s` (the watchdog's exit, the next owner restores "
             "from the last checkpoint); any other status fails the run.", "", "```json",
             json.dumps({k: v for k, v in report.items()}, indent=2, default=dict), "```", "",
             "## Faults injected", ""]
    lines += [f"- {t:7.1f} s: {what}" for t, what in faults]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
