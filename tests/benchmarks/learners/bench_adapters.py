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
so that both forests do the same work; the adapter's cost does not depend on them. Each path
runs once per seed, in a rotating order (slow phases of a shared machine fall on each alike);
throughput is rows per CPU-second of this process; medians over the seeds, with their range.
Every path is run on 500 rows first, so numba's compilation (and Python's first calls) stay
out of the timings; the start-up is measured apart, in child processes: importing and the
first row through the adapter with an empty numba cache (compiling the forest's kernels) and
with the cache this run filled, beside river's import and first row.

The scikit-learn-style adapter is fed mini-batches (``--batches``, rows each):
``predict_proba(Xb)`` then ``partial_fit(Xb, yb)`` against the learner's ``predict_proba_many``
then ``learn_many``; its overhead is given per batch (microseconds of CPU) and as a ratio.

Run::

    python tests/benchmarks/learners/bench_adapters.py --rows 10000 --seeds 3   # results/adapters.md
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
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


def run_direct(X, dicts, y, seed: int) -> tuple[float, float]:
    """``(rows per CPU-second, accuracy)`` of the learner's own one-row path."""
    learner, hits = _arf(seed), 0
    t0 = time.process_time()
    for i in range(len(y)):
        proba = learner.predict_proba_many(X[i:i + 1])[0]
        hits += proba.size > 0 and learner.classes[int(np.argmax(proba))] == y[i]
        learner.learn_one(X[i], y[i])
    return len(y) / (time.process_time() - t0), hits / len(y)


def run_adapter(X, dicts, y, seed: int) -> tuple[float, float]:
    """The same learner through :class:`RiverStyleClassifier`, a dict per row."""
    model, hits = RiverStyleClassifier(_arf(seed)), 0
    t0 = time.process_time()
    for x, t in zip(dicts, y):
        proba = model.predict_proba_one(x)
        hits += bool(proba) and max(proba, key=proba.get) == t
        model.learn_one(x, t)
    return len(y) / (time.process_time() - t0), hits / len(y)


def run_river(X, dicts, y, seed: int) -> tuple[float, float]:
    """river's ARF-10 on the same dicts."""
    from river import forest

    model, hits = forest.ARFClassifier(n_models=10, seed=seed), 0
    t0 = time.process_time()
    for x, t in zip(dicts, y):
        proba = model.predict_proba_one(x)
        hits += bool(proba) and max(proba, key=proba.get) == t
        model.learn_one(x, t)
    return len(y) / (time.process_time() - t0), hits / len(y)


PATHS = {"direct": run_direct, "adapter": run_adapter, "river": run_river}


def run_batches(X, y, size: int, seed: int) -> tuple[float, float]:
    """CPU seconds of ``(learner, adapter)`` feeding ``size``-row batches test-then-train."""
    learner = _arf(seed)
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=10, seed=seed, **RIVER_RULES)
    labels = np.asarray(y)
    t0 = time.process_time()
    learner.learn_many(X[:size], y[:size])  # the first batch: no model to ask yet
    for a in range(size, len(y), size):
        learner.predict_proba_many(X[a:a + size])
        learner.learn_many(X[a:a + size], y[a:a + size])
    t1 = time.process_time()
    clf.partial_fit(X[:size], labels[:size])
    for a in range(size, len(y), size):
        clf.predict_proba(X[a:a + size])
        clf.partial_fit(X[a:a + size], labels[a:a + size])
    return t1 - t0, time.process_time() - t1


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


def _med(values) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--out", type=Path, default=ROOT / "tests/benchmarks/learners/results/adapters.md")
    args = ap.parse_args(argv)

    X, dicts, y = electricity(args.rows)
    for run in PATHS.values():  # compile the kernels, warm every path
        run(X[:WARM_ROWS], dicts[:WARM_ROWS], y[:WARM_ROWS], 1)
    rates: dict[str, list[float]] = {p: [] for p in PATHS}
    acc: dict[str, list[float]] = {p: [] for p in PATHS}
    order = list(PATHS)
    for seed in range(1, args.seeds + 1):
        k = (seed - 1) % len(order)
        for p in order[k:] + order[:k]:
            rate, a = PATHS[p](X, dicts, y, seed)
            rates[p].append(rate)
            acc[p].append(a)
            print(f"seed {seed} {p}: {rate:,.0f} rows/CPU-s, accuracy {a:.4f}", flush=True)
    ratio_ad = [a / d for a, d in zip(rates["adapter"], rates["direct"])]
    ratio_river = [a / r for a, r in zip(rates["adapter"], rates["river"])]
    added_us = [1e6 * (1 / a - 1 / d) for a, d in zip(rates["adapter"], rates["direct"])]

    lines = [
        "# The adapters' cost: river-style over our ARF-10, against river's ARF-10",
        "",
        f"Electricity, first {len(y):,} rows, prequential one row at a time (predict, then "
        f"learn); seeds 1-{args.seeds}; rows per CPU-second, median (range) over the seeds; "
        "compilation excluded (every path warmed up first). Protocol in the script's docstring.",
        "",
        "| path | rows/CPU-s | accuracy |",
        "|---|---|---|",
    ]
    what = {"direct": "ARF-10, the learner's one-row path (arrays)",
            "adapter": "ARF-10 through `RiverStyleClassifier` (dicts)",
            "river": "river `forest.ARFClassifier` (dicts)"}
    for p in PATHS:
        lines.append(f"| {what[p]} | {_med(rates[p])} | {statistics.median(acc[p]):.4f} |")
    lines += [
        "",
        "| ratio | median (range) |",
        "|---|---|",
        f"| adapter / direct (rows per CPU-s) | {statistics.median(ratio_ad):.3f} "
        f"({min(ratio_ad):.3f}-{max(ratio_ad):.3f}) |",
        f"| adapter's added CPU time per row (predict + learn), µs | "
        f"{statistics.median(added_us):.1f} ({min(added_us):.1f}-{max(added_us):.1f}) |",
        f"| ours through the adapter / river (rows per CPU-s) | {statistics.median(ratio_river):.1f}x "
        f"({min(ratio_river):.1f}-{max(ratio_river):.1f}x) |",
        "",
        "`SklearnStyleClassifier` against the learner's batch methods, test-then-train per batch "
        f"(`predict_proba` then `partial_fit`), seeds 1-{args.seeds}, medians:",
        "",
        "| rows per batch | learner, CPU ms | adapter, CPU ms | adapter / learner (time) | "
        "added per batch, µs |",
        "|---|---|---|---|---|",
    ]
    for size in args.batches:
        run_batches(X[:WARM_ROWS], y[:WARM_ROWS], size, 1)
        times = [run_batches(X, y, size, seed) for seed in range(1, args.seeds + 1)]
        direct = statistics.median(t[0] for t in times)
        adapter = statistics.median(t[1] for t in times)
        per_batch = statistics.median(1e6 * (t[1] - t[0]) / -(-len(y) // size) for t in times)
        lines.append(f"| {size:,} | {1e3 * direct:,.0f} | {1e3 * adapter:,.0f} | {adapter / direct:.3f} | "
                     f"{per_batch:.1f} |")
        print(lines[-1], flush=True)
    ours_imp, ours_first = cold_compile(_COLD_OURS)
    cached_imp, cached_first = warm_start()
    river_imp, river_first = cold_compile(_COLD_RIVER)
    lines += [
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
