"""Worker benchmark for streams of features: from a ``FeatureArrival`` to the last of its
predictions committed, with 10,000 unlabelled instances held.

Run: ``python tests/benchmarks/service/bench_feature_arrivals.py [--bootstrap HOST:PORT] [--held N]
[--labelled N] [--arrivals K] [--json FILE]`` (without ``--bootstrap`` it starts the local
broker).

One worker (in this process, its own thread) holds a stream of features with ``--labelled``
labelled and ``--held`` unlabelled instances (no features yet). Then features arrive one at a
time. For each arrival the clock runs from just before it is produced until a
``read_committed`` consumer has received all ``--held`` predictions it causes, so the time
includes the merge, the join, one generation of trees (the default 30, depth 6, on the
labelled rows), scoring every held row, encoding, the transaction and the fetch. Beside it:
the same arrival in process (:meth:`FeatureStreamPipeline.arrive`, no Kafka). The first
arrival also compiles the tree kernels (numba) when the cache is cold: it is reported apart,
and the warm figures are the median over the following arrivals. Defaults throughout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import msgpack
import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.benchmarks.common import kafka, write_results  # noqa: E402
from worker.app import Worker  # noqa: E402
from worker.pipeline import FeatureStreamPipeline  # noqa: E402
from worker.settings import load_settings, stream_profiles  # noqa: E402
from worker.tools.topics import create_topics  # noqa: E402

STREAM = "fs-bench"


def env_for(bootstrap: str, prefix: str, rows: int) -> dict:
    env = {
        "KAFKA__BOOTSTRAP_SERVERS": bootstrap, "KAFKA__GROUP_ID": f"{prefix}-g",
        "TOPICS__PARTITIONS": "1", "WORKER__METRICS_PORT": "0",
        "WORKER__CONSUME_TIMEOUT_S": "0.05", "WORKER__MEMBER_NAME": f"{prefix}-m",
        "WORKER__LOG_LEVEL": "WARNING", "LEARNERS__FEATURE_STREAM_ROWS": str(rows),
        "PROFILES": json.dumps([{"match": "fs-*", "predictor": "feature_stream"}]),
    }
    for t in ("instances", "features", "predictions", "drift", "rankings", "deadletter",
              "checkpoints", "latest"):
        env[f"TOPICS__{t.upper()}"] = f"{prefix}.{t}"
    return {"STREAMFOREST_" + k: v for k, v in env.items()}


def make_data(n_rows: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.random((n_rows, d))
    y = ((X[:, 0] + X[:, 1] + 0.3 * rng.standard_normal(n_rows)) > 1.0).astype(int)
    return X, y


def _producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "linger.ms": 5, "message.max.bytes": 1_000_000})


def produce_instances(p, settings, n_lab: int, n_held: int, y) -> None:
    topic = settings.topics.instances
    for i in range(n_lab + n_held):
        label = int(y[i]) if i < n_lab else None
        p.produce(topic, msgpack.packb({"v": 1, "stream": STREAM, "id": i, "ts": i, "x": {},
                                        "y": label}), STREAM.encode())
        if i % 5000 == 0:
            p.poll(0)
    p.flush(60)


def arrival_value(X, k: int) -> bytes:
    values = {str(i): float(v) for i, v in enumerate(X[:, k])}
    return msgpack.packb({"v": 1, "stream": STREAM, "feature": f"f{k}", "values": values,
                          "ts": 10 ** 6 + k})


class Counter:
    """Counts committed predictions in a thread (no decoding: every one comes from an
    arrival, since the held rows were predicted by no model before the first)."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer

        self.n = 0
        self.last = 0.0
        self.stop = False
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4()}",
                           "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                           "enable.auto.commit": False})
        self.c.subscribe([topic])
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self.stop:
            got = self.c.consume(10_000, 0.05)
            ok = sum(1 for m in got if m.error() is None)
            if ok:
                self.n += ok
                self.last = time.perf_counter()
        self.c.close()

    def wait_for(self, n: int, timeout_s: float = 300.0) -> float:
        deadline = time.time() + timeout_s
        while self.n < n:
            if time.time() > deadline:
                raise TimeoutError(f"{self.n} of {n} predictions")
            time.sleep(0.002)
        return self.last


def in_process(settings, X, y, n_lab: int, n_held: int, k_max: int) -> list[float]:
    """Seconds per arrival of the same pipeline without Kafka (the first compiles)."""
    cfg = stream_profiles(settings).for_stream(STREAM)
    pl = FeatureStreamPipeline(STREAM, cfg, [], max_rows=n_lab + n_held)
    n = n_lab + n_held
    ys = [int(v) if i < n_lab else None for i, v in enumerate(y[:n])]
    pl.add([{}] * n, ys, list(range(n)), np.arange(n), list(range(n)))
    out = []
    for k in range(k_max):
        values = {str(i): float(v) for i, v in enumerate(X[:n, k])}
        t0 = time.perf_counter()
        pl.arrive(f"f{k}", values)
        out.append(time.perf_counter() - t0)
    return out


def run(bootstrap: str, n_held: int, n_lab: int, k_max: int) -> dict:
    prefix = f"bench-fs-{uuid.uuid4().hex[:6]}"
    settings = load_settings(env_for(bootstrap, prefix, n_held + n_lab))
    create_topics(settings)
    X, y = make_data(n_held + n_lab, k_max)
    p = _producer(bootstrap)
    produce_instances(p, settings, n_lab, n_held, y)
    w = Worker(settings)
    stop = threading.Event()
    th = threading.Thread(target=w.run, kwargs={"until": stop.is_set}, daemon=True)
    th.start()
    counter = Counter(bootstrap, settings.topics.predictions)
    try:
        t_wait = time.time()
        while sum(pl.n_rows for t in list(w.tasks.values()) for pl in t.pipelines.values()
                  if pl.arrivals) < n_held + n_lab:
            if time.time() - t_wait > 300:
                raise TimeoutError("the worker did not take the instances in")
            time.sleep(0.05)
        lat = []
        for k in range(k_max):
            value = arrival_value(X, k)
            t0 = time.perf_counter()
            p.produce(settings.topics.features, value, STREAM.encode())
            p.flush(30)
            t1 = counter.wait_for((k + 1) * n_held)
            lat.append(t1 - t0)
            print(f"  arrival {k + 1}: {lat[-1]:.3f} s to the last of {n_held:,} predictions "
                  "committed", flush=True)
    finally:
        stop.set()
        th.join(120)
        counter.stop = True
    local = in_process(settings, X, y, n_lab, n_held, k_max)
    warm, warm_local = lat[1:], local[1:]
    return {"held": n_held, "labelled": n_lab, "arrivals": k_max,
            "first_s": lat[0], "warm_median_s": statistics.median(warm),
            "warm_min_s": min(warm), "warm_max_s": max(warm),
            "in_process_first_s": local[0], "in_process_median_s": statistics.median(warm_local),
            "all_s": lat, "in_process_all_s": local}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--held", type=int, default=10_000, help="unlabelled instances held")
    ap.add_argument("--labelled", type=int, default=5_000, help="labelled instances held")
    ap.add_argument("--arrivals", type=int, default=8)
    ap.add_argument("--json", default=None, help="write the results to this file")
    args = ap.parse_args(argv)
    with kafka(args.bootstrap) as bootstrap:
        res = run(bootstrap, args.held, args.labelled, args.arrivals)
    print("\n| held | labelled | first arrival s | warm median s (min-max) | "
          "in process, warm median s | Kafka share |")
    print("|---|---|---|---|---|---|")
    share = 1 - res["in_process_median_s"] / res["warm_median_s"]
    print(f"| {res['held']:,} | {res['labelled']:,} | {res['first_s']:.2f} | "
          f"{res['warm_median_s']:.3f} ({res['warm_min_s']:.3f}-{res['warm_max_s']:.3f}) | "
          f"{res['in_process_median_s']:.3f} | {share:.0%} |")
    if args.json:
        write_results(args.json, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
