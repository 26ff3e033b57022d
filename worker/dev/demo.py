"""``streamforest demo``: a local broker, two workers, three streams and a live view.

1. starts the local broker (or uses ``--bootstrap``) and creates the demo's topics;
2. produces a drifting rotating-hyperplane stream, keeping its true feature weights, the
   Electricity dataset shipped in the package (features by name; classification) and the Bike
   Sharing hourly data shipped beside it (three targets: a multi-target regression stream);
3. runs two workers (``python -m worker run``) in one consumer group;
4. prints, every second, per stream: instances processed, instances/s, the prequential score
   (accuracy, or for regression the mean absolute error over the targets), the current top
   features of the importance ranking (ORF MDA, or iSOUP-SymRF's symbolic ranking) beside the
   true ones (hyperplane), and every drift alert as it is committed;
5. when every instance has its prediction, stops the workers and the broker it started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict, deque
from pathlib import Path

import msgpack
import numpy as np
from confluent_kafka import Consumer

from .produce import hyperplane, make_producer, produce_stream


def demo_env(bootstrap: str, prefix: str, partitions: int) -> dict[str, str]:
    """Settings of the demo (environment of its workers)."""
    env = {
        "KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA__GROUP_ID": f"{prefix}-workers",
        "KAFKA__EXTRA": json.dumps({"session.timeout.ms": "10000",
                                    "heartbeat.interval.ms": "2000"}),
        "TOPICS__PARTITIONS": str(partitions),
        "LEARNERS__RANKING_EVERY": "2000",
        "WORKER__METRICS_PORT": "0",
        "WORKER__LOG_LEVEL": "WARNING",
    }
    for t in ("instances", "features", "predictions", "drift", "rankings", "deadletter",
              "checkpoints"):
        env[f"TOPICS__{t.upper()}"] = f"{prefix}.{t}"
    return {"STREAMFOREST_" + k: v for k, v in env.items()}


class LiveView:
    """Reads the output topics (read_committed) and keeps per-stream figures."""

    def __init__(self, bootstrap: str, topics, totals: dict, truth: dict, top_k: int = 3):
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-view-{uuid.uuid4()}",
                           "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                           "enable.auto.commit": False})
        self.c.subscribe([topics.predictions, topics.drift, topics.rankings])
        self.topics = topics
        self.totals = totals
        self.truth = truth  # stream -> (feature names, W per instance)
        self.top_k = top_k
        self.done = defaultdict(int)
        self.correct = defaultdict(float)  # right answers, or summed absolute errors
        self.labelled = defaultdict(int)
        self.regression: set[str] = set()
        self.rank: dict = {}
        self.alerts: deque = deque(maxlen=6)
        self.n_alerts = defaultdict(int)
        self.rate = defaultdict(lambda: deque(maxlen=6))

    def poll(self, seconds: float) -> list[str]:
        """Consume for ``seconds``; returns lines announcing new drift alerts."""
        new = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in self.c.consume(5000, 0.2):
                if m.error() is not None:
                    continue
                d = msgpack.unpackb(m.value(), raw=False)
                t, s = m.topic(), d["stream"]
                if t == self.topics.predictions:
                    self.done[s] += 1
                    if d.get("y_true") is not None:
                        self.labelled[s] += 1
                        if isinstance(d["y_true"], list):  # multi-target regression
                            self.regression.add(s)
                            err = np.abs(np.subtract(d["y_pred"] or 0.0, d["y_true"]))
                            self.correct[s] += float(err.mean())
                        else:
                            self.correct[s] += d["y_pred"] == d["y_true"]
                elif t == self.topics.drift:
                    self.n_alerts[s] += 1
                    line = (f"  ! drift alert  {s:<12} {d['level']:<7} at instance "
                            f"{d['position']:>6}  ({d['source']}: {d['detail']})")
                    self.alerts.append(line)
                    new.append(line)
                elif t == self.topics.rankings and d["method"] in ("orf_mda", "symrf"):
                    self.rank[s] = (d["features"][: self.top_k], d["n_seen"])
        now = time.monotonic()
        for s in self.totals:
            self.rate[s].append((now, self.done[s]))
        return new

    def render(self) -> str:
        lines = [f"{'stream':<12} {'done':>13} {'inst/s':>8} {'preq score':>11}  "
                 f"top features (ORF MDA, SymRF)  true top features"]
        for s, total in self.totals.items():
            r = self.rate[s]
            ips = (r[-1][1] - r[0][1]) / (r[-1][0] - r[0][0]) if len(r) > 1 else 0.0
            acc = self.correct[s] / self.labelled[s] if self.labelled[s] else float("nan")
            kind = "mae" if s in self.regression else "acc"
            top, n_seen = self.rank.get(s, ([], 0))
            true = ""
            if s in self.truth and top:
                names, W = self.truth[s]
                w = W[min(max(n_seen - 1, 0), len(W) - 1)]
                true = ", ".join(names[j] for j in np.argsort(-w, kind="stable")[: self.top_k])
            lines.append(f"{s:<12} {self.done[s]:>6}/{total:<6} {ips:>8.0f} {kind} {acc:>7.3f}  "
                         f"{', '.join(top):<29} {true}")
        return "\n".join(lines)

    def finished(self) -> bool:
        return all(self.done[s] >= n for s, n in self.totals.items())

    def close(self) -> None:
        self.c.close()


def run_demo(bootstrap: str | None = None, rows: int = 30000, electricity_rows: int | None = None,
             partitions: int = 2, timeout_s: float = 900.0, out=sys.stdout,
             bike_rows: int | None = None) -> int:
    """Run the demo (see module doc); returns 0 when every instance got its prediction."""
    from ..settings import load_settings
    from ..topics import create_topics
    from .datasets import load

    broker = None
    if bootstrap is None:
        from .broker import LocalBroker, free_port

        port = free_port()
        # a throw-away data directory: each demo starts from an empty broker and leaves nothing
        data_dir = Path(tempfile.mkdtemp(prefix="streamforest-demo-"))
        broker = LocalBroker(port=port, controller_port=free_port(exclude=[port]),
                             data_dir=data_dir)
        print("starting the local Kafka broker (first run: resolving its jars with Maven) ...",
              file=out, flush=True)
        broker.fetch()
        bootstrap = broker.start()
    workers: list[subprocess.Popen] = []
    view = None
    try:
        prefix = f"demo-{uuid.uuid4().hex[:6]}"
        env = demo_env(bootstrap, prefix, partitions)
        settings = load_settings(env)
        create_topics(settings)
        print(f"broker {bootstrap}; topics {prefix}.*", file=out, flush=True)

        X, y, W = hyperplane(rows, n_features=10, n_drift_features=2, seed=7, mag_change=0.002,
                             sigma=0.02)
        names = [f"x{j}" for j in range(X.shape[1])]
        elec = load("electricity")
        n_elec = electricity_rows or elec.n_rows
        bikes = load("bike_sharing")
        n_bikes = bike_rows or bikes.n_rows
        p = make_producer(bootstrap)
        produce_stream(p, settings.topics.instances, "hyperplane", X, y, names=names)
        produce_stream(p, settings.topics.instances, "electricity", elec.X[:n_elec],
                       elec.y[:n_elec], names=elec.feature_names)
        produce_stream(p, settings.topics.instances, "bikes", bikes.X[:n_bikes],
                       bikes.y[:n_bikes], names=bikes.feature_names)
        p.flush(60)
        del p  # closes the producer now, before the broker it talks to is stopped
        totals = {"hyperplane": rows, "electricity": n_elec, "bikes": n_bikes}
        print(f"produced {rows} hyperplane instances (2 drifting weights of 10), "
              f"{n_elec} Electricity instances and {n_bikes} Bike Sharing hours "
              f"(targets {', '.join(bikes.target_names)})", file=out, flush=True)

        child_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
        child_env.update(env)
        for i in range(2):
            child_env["STREAMFOREST_WORKER__MEMBER_NAME"] = f"{prefix}-w{i + 1}"
            workers.append(subprocess.Popen([sys.executable, "-m", "worker", "run"],
                                            env=dict(child_env)))
        print("started 2 workers in one consumer group", file=out, flush=True)

        view = LiveView(bootstrap, settings.topics, totals, {"hyperplane": (names, W)})
        tty = hasattr(out, "isatty") and out.isatty()
        deadline = time.monotonic() + timeout_s
        while not view.finished() and time.monotonic() < deadline:
            new = view.poll(1.0)
            if any(w.poll() is not None for w in workers):
                print("a worker exited unexpectedly", file=out, flush=True)
                return 1
            if tty:
                out.write("\x1b[2J\x1b[H" + view.render() + "\n\nrecent drift alerts:\n"
                          + "\n".join(view.alerts) + "\n")
            else:
                for line in new:
                    print(line, file=out)
                print(view.render(), file=out)
            out.flush()
        ok = view.finished()
        print(("all streams consumed" if ok else "timed out") + "; final view:", file=out)
        print(view.render(), file=out)
        print("drift alerts: " + ", ".join(f"{s} {n}" for s, n in view.n_alerts.items()),
              file=out, flush=True)
        return 0 if ok else 1
    finally:
        if view is not None:
            view.close()
        for w in workers:
            if w.poll() is None:
                w.terminate()
        for w in workers:
            try:
                w.wait(60)
            except subprocess.TimeoutExpired:
                w.kill()
        if broker is not None:
            broker.stop()
            shutil.rmtree(broker.data_dir, ignore_errors=True)
            print("stopped the broker", file=out, flush=True)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("demo", help="local broker + two workers + live view")
    p.add_argument("--bootstrap", default=None,
                   help="use this broker instead of starting the local one")
    p.add_argument("--rows", type=int, default=30000, help="hyperplane instances")
    p.add_argument("--electricity-rows", type=int, default=None,
                   help="Electricity instances (default: all 45,312)")
    p.add_argument("--bike-rows", type=int, default=None,
                   help="Bike Sharing hours (default: all 17,379)")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900.0)
    p.set_defaults(func=lambda a: run_demo(a.bootstrap, a.rows, a.electricity_rows,
                                           a.partitions, a.timeout, bike_rows=a.bike_rows))
