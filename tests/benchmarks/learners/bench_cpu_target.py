"""What a portable numba target costs: the default pipelines compiled for this CPU against
x86-64-v3 and x86-64-v2, side by side on the same rows in one run.

Run: ``python tests/benchmarks/learners/bench_cpu_target.py [--seeds 3] [--reps 3] [--out FILE]``.

Each target gets a numba cache of its own (``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES=""``,
``NUMBA_CACHE_DIR``). Per target the script first measures the warm-up on the empty cache
(``python -m worker warmup``: the cold start a node pays when no cache serves its CPU), then
times, in a child process whose kernels are all cached (compilation stays out of the timings),
the default pipeline fed as the worker feeds it: consume batches of 2,000 rows through
``Pipeline.process`` (mini-batches of 100 labelled rows, rankings every 1,000 rows). Streams:
Electricity (the packaged data, 45,312 rows), a drifting rotating hyperplane (10 features,
50,000 rows) and Bike Sharing (three targets, 17,379 rows). Throughput is rows per CPU-second
of the child process; the targets are timed in turn (``--reps`` rounds, each round in a new
order), so slow phases of a shared machine fall on every target alike. Prints a markdown table
and writes it to ``--out`` (default ``tests/benchmarks/learners/results/cpu_target.md``) with the commit,
the CPU and the command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.benchmarks.common import write_results  # noqa: E402

TARGETS = {"native": None, "x86-64-v3": "x86-64-v3", "x86-64-v2": "x86-64-v2"}

CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
import numpy as np
from models.generators.hyperplane import RotatingHyperplane
from worker.tools.dev.datasets import load
from worker.pipeline import Pipeline, PipelineConfig

def streams():
    elec = load("electricity")
    X, y, _ = RotatingHyperplane(n_features=10, n_drift_features=2, mag_change=0.001,
                                 seed=5).take(50000)
    bike = load("bike_sharing")
    return {{"electricity": (elec.X, list(elec.y)),
             "hyperplane": (X, [int(v) for v in y]),
             "bike_sharing": (bike.X, [list(map(float, r)) for r in bike.y])}}

out = {{}}
for name, (X, y) in streams().items():
    rates = []
    for seed in range({seeds}):
        p = Pipeline(name, PipelineConfig(seed=seed + 1), X.shape[1])
        t = time.process_time()
        for a in range(0, len(y), 2000):
            p.process(X[a:a + 2000], y[a:a + 2000])
        rates.append(len(y) / (time.process_time() - t))
    out[name] = rates
print(json.dumps(out))
"""


def _env(target: str | None, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU")}
    env["NUMBA_CACHE_DIR"] = str(cache)
    if target:
        env.update(NUMBA_CPU_NAME=target, NUMBA_CPU_FEATURES="")
    return env


def _warmup(env: dict) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "worker", "warmup"], cwd=REPO, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def _timed(env: dict, seeds: int) -> dict[str, list[float]]:
    code = CHILD.format(root=str(REPO), seeds=seeds)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "tests/benchmarks/learners/results/cpu_target.md")
    args = ap.parse_args(argv)

    rates: dict[str, dict[str, list[float]]] = {t: {} for t in TARGETS}
    cold: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        envs = {t: _env(name, Path(tmp) / t) for t, name in TARGETS.items()}
        for t, env in envs.items():
            cold[t] = _warmup(env)  # empty cache: the cold start of a node of another CPU
            _warmup(env)  # kernels the warm-up does not reach are compiled by the first pass
            _timed(env, 1)
        order = list(TARGETS)
        for rep in range(args.reps):
            for t in order[rep % len(order):] + order[:rep % len(order)]:
                for stream, r in _timed(envs[t], args.seeds).items():
                    rates[t].setdefault(stream, []).extend(r)

    streams = list(rates["native"])
    lines = ["| stream | " + " | ".join(f"{t} rows/CPU-s" for t in TARGETS)
             + " | v3 / native | v2 / native |", "|---" * (len(TARGETS) + 3) + "|"]
    for s in streams:
        med = {t: statistics.median(rates[t][s]) for t in TARGETS}
        lines.append(f"| {s} | " + " | ".join(f"{med[t]:,.0f}" for t in TARGETS)
                     + f" | {med['x86-64-v3'] / med['native']:.3f}"
                     + f" | {med['x86-64-v2'] / med['native']:.3f} |")
    lines += ["", "| target | warm-up on an empty cache, s |", "|---|---|"]
    lines += [f"| {t} | {cold[t]:.1f} |" for t in TARGETS]
    header = [
        "# The numba target: this CPU against portable x86-64 levels",
        "",
        f"Default pipelines, consume batches of 2,000 rows, seeds 1-{args.seeds}, {args.reps} "
        "rounds; medians of rows per CPU-second (compilation excluded).",
        "",
    ]
    text = "\n".join(header + lines) + "\n"
    print(text)
    write_results(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
