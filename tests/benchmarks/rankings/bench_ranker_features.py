"""What the default ranking costs as features grow: the predictor alone against the pipeline.

For rotating hyperplanes of ``--features`` features (10, 90 and 500 by default; two drifting
weights, 0.001 per row, seed 1), rows per CPU-second (``time.process_time``, this process
only) of:

* ``predictor``: the worker's default classification predictor alone, built as the worker
  builds it, its fused test-then-train kernel (``predict_learn_many``) per consume batch, as
  the pipeline calls it;
* ``no ranker``: :class:`worker.pipeline.engine.Pipeline` with ``rankers=[]`` (the predictor,
  ADWIN and the pipeline's own work);
* ``default``: ``Pipeline("s", PipelineConfig(), n_features)``, what a stream with no profile
  gets;
* ``ranker``: the default classification ranker alone, learning mini-batches of 100 rows and
  asked for its importances after each, as the pipeline does.

The pipelines are fed as the worker feeds them: ``process`` on consume batches of 2,000 rows.
Every measurement runs once on 2,000 rows first (kernels compiled or loaded from the cache),
then ``--repeats`` times on ``--rows`` rows; the table gives the median and the range.
``default / predictor`` is the ratio of the medians.

Usage::

    python tests/benchmarks/rankings/bench_ranker_features.py --repeats 3
    python tests/benchmarks/rankings/bench_ranker_features.py --features 500 --profile '{"block_forest":{"n_trees":5}}'
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models import registry  # noqa: E402
from tests.benchmarks.common import default_learner, hyperplane, write_results  # noqa: E402
from worker.pipeline.config import PipelineConfig  # noqa: E402
from worker.pipeline.engine import Pipeline  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "ranker_features.md"
CONSUME = 2_000  # rows per process() call: the worker's default consume batch
BATCH = 100  # the pipeline's mini-batch
WARM = 2_000


def cpu_predictor(X, y, params: dict | None = None) -> float:
    """CPU seconds of the default predictor alone: its fused test-then-train kernel per
    consume batch."""
    model = default_learner(registry.PREDICTOR, params)
    t0 = time.process_time()
    for a in range(0, len(y), CONSUME):
        model.predict_learn_many(X[a:a + CONSUME], y[a:a + CONSUME])
    return time.process_time() - t0


def cpu_ranker(X, y, params: dict | None = None) -> float:
    """CPU seconds of the default ranker alone: learn, then importances, per mini-batch."""
    model = default_learner(registry.RANKER, params)
    t0 = time.process_time()
    for a in range(0, len(y), BATCH):
        model.learn_many(X[a:a + BATCH], y[a:a + BATCH])
        model.importances()
    return time.process_time() - t0


def cpu_pipeline(X, y, config: dict) -> float:
    """CPU seconds of a pipeline fed consume batches of 2,000 rows."""
    pipeline = Pipeline("s", PipelineConfig(**config), X.shape[1])
    t0 = time.process_time()
    for a in range(0, len(y), CONSUME):
        pipeline.process(X[a:a + CONSUME], y[a:a + CONSUME])
    return time.process_time() - t0


def measure(d: int, rows: int, repeats: int, params: dict | None) -> dict[str, list[float]]:
    """Rows per CPU-second of every column on the ``d``-feature stream."""
    X, y = hyperplane(d, rows)
    config = {"params": params} if params else {}
    runs = {"predictor": lambda a, b: cpu_predictor(a, b),
            "no ranker": lambda a, b: cpu_pipeline(a, b, {"rankers": []}),
            "default": lambda a, b: cpu_pipeline(a, b, config),
            "ranker": lambda a, b: cpu_ranker(a, b, params)}
    out = {}
    for name, run in runs.items():
        run(X[:WARM], y[:WARM])
        out[name] = [rows / run(X, y) for _ in range(repeats)]
    return out


def _cell(values: list[float]) -> str:
    return f"{np.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", type=int, nargs="+", default=[10, 90, 500])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", type=json.loads, default=None,
                    help="learner params of the default pipeline, JSON "
                         "('{\"block_forest\":{\"n_trees\":5}}')")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    lines = ["# What the default ranking costs as features grow", "",
             "Rows per CPU-second (`time.process_time`, this process only), median (range) of "
             f"{args.repeats} runs of {args.rows:,} rows of a rotating hyperplane (two drifting "
             f"weights, 0.001 per row, seed 1) after a warm-up on {WARM:,} rows (numba compiled "
             "or loaded from the cache)"
             f"{'; learner params ' + json.dumps(args.profile) if args.profile else ''}. "
             "`predictor`: the default classification predictor alone, its fused "
             "test-then-train kernel (`predict_learn_many`) per consume batch of "
             f"{CONSUME:,} rows, as the pipeline calls it; `no ranker`: the pipeline with "
             "`rankers=[]` (the predictor, ADWIN and the pipeline's own work); `default`: the "
             "default pipeline (`Pipeline(\"s\", PipelineConfig(), d)`, what a stream with no "
             f"profile gets), fed consume batches of {CONSUME:,} rows; `ranker alone`: the "
             f"default ranker learning mini-batches of {BATCH} rows, asked for its importances "
             "after each (the pipeline asks it after every block). `default / predictor` is "
             "the ratio of the medians.", "",
             "CPU-seconds depend on what else the machine runs: compare within a row and the "
             "ratios rather than with other files. Where the ranker's time goes: "
             "`tests/benchmarks/rankings/profile_block_forest.py`. Before/after comparisons "
             "with earlier commits are in this file's git history.", "",
             "| features | predictor | no ranker | default | ranker alone | default / predictor |",
             "|---|---|---|---|---|---|"]
    for d in args.features:
        runs = measure(d, args.rows, args.repeats, args.profile)
        ratio = np.median(runs["default"]) / np.median(runs["predictor"])
        lines.append(f"| {d} | " + " | ".join(_cell(runs[k]) for k in
                                               ("predictor", "no ranker", "default", "ranker"))
                     + f" | {ratio:.2f} |")
        print(lines[-1], flush=True)
    write_results(args.out, "\n".join(lines))
    print(args.out.read_text())


if __name__ == "__main__":
    main()
