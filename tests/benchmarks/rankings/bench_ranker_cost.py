"""What the default ranking costs: the worker's default pipelines in process, with and without it.

For each stream, rows/s of :class:`worker.pipeline.engine.Pipeline` (the stages the worker
runs, no Kafka) fed in chunks of 500 rows, for three configurations:

* ``default``: what a stream with no profile gets (``PipelineConfig()``);
* ``former ranker``: the default with the block-forest ranker of the previous release (the
  window mixture with paired weights, each feature on its own evidence: ``pool`` 0);
* ``no ranker``: the default with ``rankers=[]``.

Streams: a 10-feature rotating hyperplane (30,000 rows), Electricity and Bike Sharing (three
targets), both shipped with the package. Every configuration runs once on 2,000 rows to
compile its kernels, then ``--repeats`` times on the stream (at most 30,000 rows); the table
gives the slowest and the fastest run.

Usage::

    python tests/benchmarks/rankings/bench_ranker_cost.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models.generators.hyperplane import RotatingHyperplane  # noqa: E402
from tests.benchmarks.common import write_results  # noqa: E402
from worker.pipeline.config import PipelineConfig  # noqa: E402
from worker.pipeline.engine import Pipeline  # noqa: E402
from worker.tools.dev.datasets import load  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "ranker_cost.md"
FORMER = {"pool": 0.0}
CHUNK = 500
MAX_ROWS = 30_000


def streams():
    """``(name, X, labels, ranker)`` of every stream; ``ranker`` is the default one for it."""
    X, y, _ = RotatingHyperplane(n_features=10, n_drift_features=2, mag_change=0.001,
                                 seed=1).take(MAX_ROWS)
    yield "hyperplane, 10 features", X, [int(v) for v in y], "block_forest"
    d = load("electricity")
    yield "Electricity, 8 features", d.X, list(d.y), "block_forest"
    d = load("bike_sharing")
    yield ("Bike Sharing, 12 features, 3 targets", d.X, [list(r) for r in np.asarray(d.y)],
           "block_forest_regression")


def rows_per_second(X, labels, config: dict, n: int) -> float:
    """Rows/s of one pipeline on the first ``n`` rows."""
    pipeline = Pipeline("cost", PipelineConfig(**config), X.shape[1])
    t0 = time.perf_counter()
    for a in range(0, n, CHUNK):
        pipeline.process(X[a:a + CHUNK], labels[a:a + CHUNK])
    return n / (time.perf_counter() - t0)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    lines = ["# What the default ranking costs", "",
             "In-process rows/s of the worker's default pipeline (slowest-fastest of the "
             "repeats, after a warm-up), with the default ranker (the window mixture with "
             "paired weights, half pooled over the features), the former one (the same, each "
             "feature on its own evidence) and none.", "",
             "| stream | rows | default | former ranker | no ranker | default / no ranker |",
             "|---|---|---|---|---|---|"]
    for name, X, labels, ranker in streams():
        X = np.ascontiguousarray(X, dtype=np.float64)
        n = min(len(labels), MAX_ROWS)
        configs = {"default": {}, "former": {"params": {ranker: FORMER}},
                   "none": {"rankers": []}}
        for config in configs.values():
            rows_per_second(X, labels, config, 2_000)
        runs = {k: [rows_per_second(X, labels, c, n) for _ in range(args.repeats)]
                for k, c in configs.items()}
        cells = [f"{min(v):,.0f}-{max(v):,.0f}" for v in runs.values()]
        ratio = np.median(runs["default"]) / np.median(runs["none"])
        lines.append(f"| {name} | {n:,} | " + " | ".join(cells) + f" | {ratio:.2f} |")
        print(lines[-1], flush=True)
    write_results(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
