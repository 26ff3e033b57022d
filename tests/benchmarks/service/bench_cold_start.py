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
(compiling its kernels unless cached) and committing the transaction. Last, in a process
whose warm-up compiles every kernel on an empty cache, the numba dispatchers' signatures (a
kernel with more than one was compiled once more for some argument type). Prints the tables
and writes them to ``--out`` (default ``tests/benchmarks/service/results/cold_start.md``)
through :func:`tests.benchmarks.common.write_results`.
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

from tests.benchmarks.common import kafka, write_results  # noqa: E402
from tests.benchmarks.service.bench_worker import env_for, make_streams, produce  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.tools.topics import create_topics  # noqa: E402

#: worker log lines whose arrival splits the wait (the column names of the table)
RESULTS = REPO / "tests/benchmarks/service/results/cold_start.md"
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
    env = env_for(bootstrap, prefix, WORKER__LOG_LEVEL="INFO", WORKER__MAX_POLL_RECORDS="2000",
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


SIGNATURES = r"""
import gc, json, runpy, sys
sys.argv = ["worker", "warmup"]
try:
    runpy.run_module("worker", run_name="__main__")
except SystemExit:
    pass
from numba.core.registry import CPUDispatcher
n = {name: len(o.signatures) for o in gc.get_objects() if isinstance(o, CPUDispatcher)
     for name in [o.py_func.__module__ + "." + o.py_func.__qualname__] if o.signatures}
print(json.dumps(n))
"""


def signatures() -> dict[str, int]:
    """Signatures per numba kernel after ``python -m worker warmup`` in one process on an empty
    cache (every kernel compiled, those called only by other kernels too: a kernel loaded from
    the cache does not compile its callees), kernels with none left out."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", SIGNATURES], cwd=REPO, env=env,
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _row(name: str, r: dict) -> str:
    cols = ("started", "assigned", "first", "stream s0", "stream r0")
    times = " | ".join(f"{r.get(c, float('nan')):.1f}" for c in cols)
    return f"| {name} | {times} | {r.get('compiled', '')} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--rows", type=int, default=1000, help="rows per stream (2 streams)")
    ap.add_argument("--runs", type=int, default=1, help="repetitions of each measurement")
    ap.add_argument("--out", type=Path, default=RESULTS)
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
    sigs = signatures()
    after = [r["first"] for name, r in starts if name.startswith("after")]
    multi = sorted(k for k, v in sigs.items() if v > 1)
    lines = [
        "# Cold start: `streamforest run` to the first committed prediction", "",
        "Method: a fresh install is an empty numba cache. Every measurement gets its own empty "
        "`NUMBA_CACHE_DIR` (so the sources' `__pycache__` folders play no part). For each run "
        "the script creates fresh topics and a fresh group, produces "
        f"{args.rows:,} instances of a hyperplane classification stream (10 features, int "
        f"labels) and {args.rows:,} of a 3-target regression stream, then starts "
        "`python -m worker run` (default settings and pipelines, exactly once, 2 partitions) "
        "and reads the predictions topic with a `read_committed` consumer from the start. "
        "The times are seconds from starting the process; \"worker started\" and \"partitions "
        "assigned\" are the arrival of those log lines (imports, preflight, the transactional "
        "producer initialised; the group joined); the rest is restoring, learning the first "
        "mini-batch (compiling its kernels unless cached) and committing the transaction. "
        "\"Specialisations compiled by the worker\" counts the `.nbc` files the worker added to "
        "the cache before both streams had a prediction.", "",
        "## `python -m worker warmup`", "",
        "| | empty cache s | cached s |", "|---|---|---|",
        *[f"| run {i + 1} | {a:.1f} | {b:.1f} |" for i, (a, b) in enumerate(warm)], "",
        "## First committed prediction", "",
        "| numba cache | worker started | partitions assigned | first committed prediction |"
        " first of classification stream | first of regression stream |"
        " specialisations compiled by the worker |",
        "|---|---|---|---|---|---|---|",
        *[_row(name, r) for name, r in starts], "",
        f"Target (at most 10 s after warm-up): {'met' if max(after) <= 10 else 'not met'}, "
        f"{min(after):.1f}-{max(after):.1f} s.", "",
        "## Specialisations", "",
        "Numba kernels after `python -m worker warmup`, in one process whose warm-up compiles "
        "them on an empty cache (dispatchers with at least one signature, those only other "
        "kernels call included; a kernel with more than one was compiled once more for some "
        "argument types, e.g. a literal constant passed by another kernel):", "",
        "| kernels | signatures | kernels with more than one |", "|---|---|---|",
        f"| {len(sigs)} | {sum(sigs.values())} | {len(multi)} |", "",
    ]
    if multi:
        lines += ["Kernels with more than one signature: "
                  + ", ".join(f"`{k}` ({sigs[k]})" for k in multi) + "."]
    text = "\n".join(lines)
    print(text)
    write_results(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
