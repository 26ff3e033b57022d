"""What the river-style and scikit-learn-style adapters cost over the learner they wrap, and
the river-style adapter over our ARF-10 against river's own ``forest.ARFClassifier``.

Rows: the first ``--rows`` of Electricity (the packaged data: seven features, labels "UP" and
"DOWN"), as a dict per row keyed by the feature names and as a float matrix. Each row is
predicted, then learned (prequential, one row at a time, as river is used):

* *direct*: the learner's own one-row path, ``predict_proba_many(X[i:i+1])`` then
  ``learn_one(X[i], y[i])``;
* *adapter*: ``RiverStyleClassifier``'s ``predict_proba_one(x)`` then ``learn_one(x, y)``
  on the dicts, over the same learner;
* *river*: ``forest.ARFClassifier(n_models=10, seed=seed)``'s ``predict_proba_one(x)`` then
  ``learn_one(x, y)`` on the same dicts.

Ours is ARF-10 with river's rules and subset size (``flavour="river", max_features="sqrt"``)
so that both forests do the same work; the adapter's cost does not depend on them.

The paths run in lockstep: a block of rows (``--block``) through each path in turn, the
order rotating from block to block, each block timed on its own. A slow phase of the shared
machine (other engineers' jobs on its two cores) thus falls on every path alike, where whole
runs one after the other differed by up to a third between seeds, more than the adapter
costs. Throughput is rows per CPU-second of this process; the ratios are taken per seed and
given as the median (range) over the seeds. Every path runs on 500 rows first, so numba's
compilation (and Python's first calls) stay out of the timings; the start-up is measured
apart, in child processes: importing and the first rows through the adapter with an empty
numba cache (compiling the forest's kernels) and with the cache this run filled, beside
river's import and first rows.

The scikit-learn-style adapter is fed mini-batches (``--batches``, rows each), also in
lockstep with the learner: ``predict_proba(Xb)`` then ``partial_fit(Xb, yb)`` against the
learner's ``predict_proba_many`` then ``learn_many`` (the first batch only learned); its
overhead is given per batch (microseconds of CPU) and as a ratio of CPU time.

Run::

    python tests/benchmarks/learners/bench_adapters.py --rows 10000 --seeds 3   # results/adapters.md
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models import AdaptiveRandomForest  # noqa: E402
from models.adapters import RiverStyleClassifier, SklearnStyleClassifier  # noqa: E402
from tests.benchmarks.common import cold_compile, write_results  # noqa: E402
from worker.tools.dev.datasets import load  # noqa: E402

RIVER_RULES = {"flavour": "river", "max_features": "sqrt"}
WARM_ROWS = 500


def electricity(rows: int):
    """The rows as a matrix, as dicts by feature name, and their labels."""
    d = load("electricity")
    X = np.ascontiguousarray(d.X[:rows], dtype=np.float64)
    dicts = [dict(zip(d.feature_names, r)) for r in X.tolist()]
    return X, dicts, [str(v) for v in d.y[:rows]]


def _arf(seed: int) -> AdaptiveRandomForest:
    return AdaptiveRandomForest(n_models=10, seed=seed, **RIVER_RULES)


def lockstep(steps: dict[str, Callable[[int], None]], n: int, block: int) -> dict[str, float]:
    """CPU seconds each path spent on steps ``0 .. n-1``, run a block at a time in turn (the
    order rotating from block to block)."""
    cpu = dict.fromkeys(steps, 0.0)
    names = list(steps)
    for b, start in enumerate(range(0, n, block)):
        k = b % len(names)
        for name in names[k:] + names[:k]:
            step = steps[name]
            t0 = time.process_time()
            for i in range(start, min(n, start + block)):
                step(i)
            cpu[name] += time.process_time() - t0
    return cpu


def row_paths(X, dicts, y, seed: int) -> tuple[dict, dict]:
    """The one-row paths (one step: predict a row, then learn it) and their hit counters."""
    from river import forest

    hits = {"direct": 0, "adapter": 0, "river": 0}
    learner, model = _arf(seed), RiverStyleClassifier(_arf(seed))
    theirs = forest.ARFClassifier(n_models=10, seed=seed)

    def direct(i: int) -> None:
        proba = learner.predict_proba_many(X[i:i + 1])[0]
        hits["direct"] += proba.size > 0 and learner.classes[int(np.argmax(proba))] == y[i]
        learner.learn_one(X[i], y[i])

    def adapter(i: int) -> None:
        proba = model.predict_proba_one(dicts[i])
        hits["adapter"] += bool(proba) and max(proba, key=proba.get) == y[i]
        model.learn_one(dicts[i], y[i])

    def river_arf(i: int) -> None:
        proba = theirs.predict_proba_one(dicts[i])
        hits["river"] += bool(proba) and max(proba, key=proba.get) == y[i]
        theirs.learn_one(dicts[i], y[i])

    return {"direct": direct, "adapter": adapter, "river": river_arf}, hits


def batch_paths(X, y, size: int, seed: int) -> dict:
    """One step per batch of ``size`` rows: predicted (from the second batch on), then learned,
    by the learner's batch methods and by :class:`SklearnStyleClassifier`."""
    learner = _arf(seed)
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=10, seed=seed, **RIVER_RULES)
    labels = np.asarray(y)

    def direct(b: int) -> None:
        a = b * size
        if b:
            learner.predict_proba_many(X[a:a + size])
        learner.learn_many(X[a:a + size], y[a:a + size])

    def adapter(b: int) -> None:
        a = b * size
        if b:
            clf.predict_proba(X[a:a + size])
        clf.partial_fit(X[a:a + size], labels[a:a + size])

    return {"direct": direct, "adapter": adapter}


_COLD_OURS = """
import time, sys
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from models import AdaptiveRandomForest, RiverStyleClassifier
t1 = time.perf_counter()
m = RiverStyleClassifier(AdaptiveRandomForest(n_models=10, flavour="river", max_features="sqrt"))
x = {{"a": 0.1, "b": 0.7}}
m.predict_proba_one(x); m.learn_one(x, "UP"); m.predict_proba_one(x)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""

_COLD_RIVER = """
import time
t0 = time.perf_counter()
from river import forest
t1 = time.perf_counter()
m = forest.ARFClassifier(n_models=10, seed=1)
x = {{"a": 0.1, "b": 0.7}}
m.predict_proba_one(x); m.learn_one(x, "UP"); m.predict_proba_one(x)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def warm_start() -> tuple[float, ...]:
    """:data:`_COLD_OURS` in a child process using this process's numba cache, which the
    timings above filled: the start of a user whose kernels are compiled already."""
    out = subprocess.run([sys.executable, "-c", _COLD_OURS.format(root=str(ROOT))],
                         capture_output=True, text=True, check=True).stdout
    return tuple(float(v) for v in out.split())


def _med(values, fmt: str = ",.0f", unit: str = "") -> str:
    return (f"{statistics.median(values):{fmt}}{unit} "
            f"({min(values):{fmt}}-{max(values):{fmt}}{unit})")


def measure_rows(X, dicts, y, seeds: int, block: int) -> list[str]:
    """The one-row table and its ratios, as markdown lines."""
    n = len(y)
    warm, _ = row_paths(X[:WARM_ROWS], dicts[:WARM_ROWS], y[:WARM_ROWS], 1)
    lockstep(warm, WARM_ROWS, block)
    rates: dict[str, list[float]] = {"direct": [], "adapter": [], "river": []}
    acc: dict[str, list[float]] = {k: [] for k in rates}
    for seed in range(1, seeds + 1):
        steps, hits = row_paths(X, dicts, y, seed)
        cpu = lockstep(steps, n, block)
        for k in rates:
            rates[k].append(n / cpu[k])
            acc[k].append(hits[k] / n)
        print(f"seed {seed}: " + ", ".join(f"{k} {n / cpu[k]:,.0f} rows/CPU-s" for k in cpu),
              flush=True)
    ratio = [a / d for a, d in zip(rates["adapter"], rates["direct"])]
    added = [1e6 * (1 / a - 1 / d) for a, d in zip(rates["adapter"], rates["direct"])]
    vs_river = [a / r for a, r in zip(rates["adapter"], rates["river"])]
    what = {"direct": "ARF-10, the learner's one-row path (arrays)",
            "adapter": "ARF-10 through `RiverStyleClassifier` (dicts)",
            "river": "river `forest.ARFClassifier` (dicts)"}
    lines = ["| path | rows/CPU-s | accuracy |", "|---|---|---|"]
    lines += [f"| {what[k]} | {_med(rates[k])} | {statistics.median(acc[k]):.4f} |" for k in rates]
    return lines + [
        "",
        "| ratio, per seed | median (range) |",
        "|---|---|",
        f"| adapter / direct, rows per CPU-s | {_med(ratio, '.3f')} |",
        f"| CPU time the adapter adds per row (predict and learn), µs | {_med(added, '.1f')} |",
        f"| ours through the adapter / river, rows per CPU-s | {_med(vs_river, '.1f', 'x')} |",
    ]


def measure_batches(X, y, sizes, seeds: int) -> list[str]:
    """The scikit-learn-style table, as markdown lines."""
    lines = ["| rows per batch | learner, CPU ms | adapter, CPU ms | adapter / learner, CPU time | "
             "added per batch, µs |", "|---|---|---|---|---|"]
    for size in sizes:
        batches = -(-len(y) // size)
        per_block = max(1, 2000 // size)  # about 2,000 rows per timed block
        lockstep(batch_paths(X[:WARM_ROWS], y[:WARM_ROWS], size, 1), -(-WARM_ROWS // size),
                 per_block)
        cpu = [lockstep(batch_paths(X, y, size, seed), batches, per_block)
               for seed in range(1, seeds + 1)]
        learner = [c["direct"] for c in cpu]
        adapter = [c["adapter"] for c in cpu]
        ratio = [a / d for a, d in zip(adapter, learner)]
        added = [1e6 * (a - d) / batches for a, d in zip(adapter, learner)]
        lines.append(f"| {size:,} | {1e3 * statistics.median(learner):,.0f} | "
                     f"{1e3 * statistics.median(adapter):,.0f} | {_med(ratio, '.3f')} | "
                     f"{_med(added, '.1f')} |")
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--block", type=int, default=100, help="rows per timed block of a path")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--out", type=Path, default=ROOT / "tests/benchmarks/learners/results/adapters.md")
    args = ap.parse_args(argv)

    X, dicts, y = electricity(args.rows)
    rows = measure_rows(X, dicts, y, args.seeds, args.block)
    batches = measure_batches(X, y, args.batches, args.seeds)
    ours_imp, ours_first = cold_compile(_COLD_OURS)
    cached_imp, cached_first = warm_start()
    river_imp, river_first = cold_compile(_COLD_RIVER)
    lines = [
        "# The adapters' cost: river-style over our ARF-10, against river's ARF-10",
        "",
        f"Electricity, first {len(y):,} rows, prequential one row at a time (predict, then "
        f"learn); seeds 1-{args.seeds}; the paths in lockstep, blocks of {args.block} rows "
        "in rotating order; rows per CPU-second, median (range) over the seeds; compilation "
        "excluded (every path warmed up first). Protocol in the script's docstring.",
        "",
        *rows,
        "",
        "`SklearnStyleClassifier` against the learner's batch methods, test-then-train per batch "
        f"(`predict_proba` then `partial_fit`), in lockstep, seeds 1-{args.seeds}; CPU time of "
        "the whole stream, median (range) of the per-seed figures:",
        "",
        *batches,
        "",
        "Start-up (child processes, wall seconds): ours with an empty numba cache, import "
        f"{ours_imp:.1f} s and the first rows through the adapter (compiling the forest's "
        f"kernels) {ours_first:.1f} s; with the kernels cached (as after `streamforest warmup`), "
        f"import {cached_imp:.1f} s and first rows {cached_first:.1f} s; river, import "
        f"{river_imp:.1f} s and first rows {river_first:.2f} s.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
