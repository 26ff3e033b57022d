"""Cold start: from ``python -m worker run`` to the first committed prediction.

Run: ``python tests/benchmarks/service/bench_cold_start.py [--bootstrap HOST:PORT] [--rows N]
[--runs N]`` (without ``--bootstrap`` it starts the local broker). A fresh install is a
numba cache with nothing in it: every measurement gets its own empty ``NUMBA_CACHE_DIR``,
so the sources' ``__pycache__`` folders play no part. The script measures

1. ``python -m worker warmup`` on an empty cache (what ``make setup`` and the image build
   pay once), then again on the cache it filled;
2. a worker started with ``python -m worker run`` (default pipelines, exactly once) on a
   fresh group whose input is already waiting (a hyperplane classification stream and a
   3-target regression stream): the seconds until a ``read_committed`` consumer of the
   predictions topic sees the first prediction, and the first of each stream, with an empty
   cache (no warm-up) and with the cache the warm-up filled.

The worker's log lines split the wait: ``started`` is the ``worker started`` line (imports,
preflight, transactional producer initialised, subscribed), ``assigned`` the ``partitions
assigned`` line (group joined), the rest is restoring, learning the first mini-batch
(compiling its kernels unless cached) and committing the transaction. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.benchmarks.common import kafka  # noqa: E402
from tests.benchmarks.service.bench_worker import env_for, make_streams, produce  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.tools.topics import create_topics  # noqa: E402

#: worker log lines whose arrival splits the wait (the column names of the table)
PHASES = {"worker started": "started", "partitions assigned": "assigned"}
TIMEOUT_S = 600.0


def warmup_seconds(cache: str) -> float:
    """Wall seconds of ``python -m worker warmup`` with ``cache`` as the numba cache."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "worker", "warmup"], cwd=REPO, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _input(bootstrap: str, rows: int) -> tuple[dict, dict]:
    """Settings env of a fresh group and topics, with both streams' input produced."""
    prefix = f"cs-{uuid.uuid4().hex[:6]}"
    env = env_for(bootstrap, prefix, WORKER__LOG_LEVEL="INFO", WORKER__CONSUME_BATCH="2000",
                  WORKER__CONSUME_TIMEOUT_S="0.2")
    settings = load_settings(env)
    create_topics(settings)
    streams = make_streams(1, rows)
    streams["r0"] = make_streams(1, rows, regression=True)["s0"]
    produce(bootstrap, settings.topics.instances, streams)
    return env, {"predictions": settings.topics.predictions}


def _predictions_reader(bootstrap: str, topic: str):
    """A ``read_committed`` consumer of every partition of ``topic``, from the start."""
    from confluent_kafka import Consumer, TopicPartition

    # short fetch waits: the reader's own latency is not the worker's
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cs-reader-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10})
    parts = c.list_topics(topic, timeout=30).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])  # offset 0: the beginning
    return c


def _watch_log(proc, t0: float, seen: dict) -> None:
    """Record when each line of :data:`PHASES` first appears on the worker's stderr."""
    for line in proc.stderr:
        try:
            msg = json.loads(line).get("msg", "")
        except ValueError:
            continue
        if msg in PHASES and PHASES[msg] not in seen:
            seen[PHASES[msg]] = time.perf_counter() - t0


def _compiled(cache: str) -> int:
    """Compiled specialisations in the numba cache ``cache`` (one ``.nbc`` file each)."""
    return sum(1 for _ in Path(cache).rglob("*.nbc"))


def first_prediction(bootstrap: str, rows: int, cache: str) -> dict:
    """Seconds from starting ``python -m worker run`` to its first committed predictions,
    and the specialisations the worker compiled (``compiled``) until both streams had one."""
    env, topics = _input(bootstrap, rows)
    n_cached = _compiled(cache)
    reader = _predictions_reader(bootstrap, topics["predictions"])
    seen: dict = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], cwd=REPO,
                            env={**os.environ, **env, "NUMBA_CACHE_DIR": cache},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    threading.Thread(target=_watch_log, args=(proc, t0, seen), daemon=True).start()
    try:
        while len([k for k in seen if k.startswith("stream ")]) < 2:
            if time.perf_counter() - t0 > TIMEOUT_S or proc.poll() is not None:
                raise RuntimeError(f"no predictions of both streams (exit {proc.poll()})")
            for m in reader.consume(100, 0.05):
                if m.error() is None:
                    key = "stream " + m.key().decode()
                    seen.setdefault("first", time.perf_counter() - t0)
                    seen.setdefault(key, time.perf_counter() - t0)
        seen["compiled"] = _compiled(cache) - n_cached
    finally:
        proc.terminate()
        proc.wait(60)
        reader.close()
    return seen


def _row(name: str, r: dict) -> str:
    cols = ("started", "assigned", "first", "stream s0", "stream r0")
    times = " | ".join(f"{r.get(c, float('nan')):.1f}" for c in cols)
    return f"| {name} | {times} | {r.get('compiled', '')} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--rows", type=int, default=1000, help="rows per stream (2 streams)")
    ap.add_argument("--runs", type=int, default=1, help="repetitions of each measurement")
    args = ap.parse_args(argv)
    warm, starts = [], []
    with kafka(args.bootstrap) as bootstrap:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as cold, tempfile.TemporaryDirectory() as cache:
                r = first_prediction(bootstrap, args.rows, cold)
                starts.append((f"empty cache, no warm-up (run {run + 1})", r))
                print(f"  {starts[-1][0]}: {r}", flush=True)
                w = (warmup_seconds(cache), warmup_seconds(cache))
                warm.append(w)
                print(f"  warm-up: {w[0]:.1f} s on an empty cache, {w[1]:.1f} s cached",
                      flush=True)
                r = first_prediction(bootstrap, args.rows, cache)
                starts.append((f"after warm-up (run {run + 1})", r))
                print(f"  {starts[-1][0]}: {r}", flush=True)
    print("\n| `python -m worker warmup` | empty cache s | cached s |\n|---|---|---|")
    for i, (a, b) in enumerate(warm):
        print(f"| run {i + 1} | {a:.1f} | {b:.1f} |")
    print("\nseconds from `python -m worker run` (default pipelines, exactly once, input "
          "waiting) to:\n")
    print("| numba cache | worker started | partitions assigned | first committed prediction |"
          " first of classification stream | first of regression stream |"
          " specialisations compiled by the worker |")
    print("|---|---|---|---|---|---|---|")
    for name, r in starts:
        print(_row(name, r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
