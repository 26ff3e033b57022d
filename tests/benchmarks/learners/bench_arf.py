"""The worker's default pipeline and its predictor (ARF-10) against MOA and river, row by row.

What a user gets is measured as the worker feeds it: the default pipeline (the adaptive random
forest predicting, the block-forest ranker, ADWIN on the loss) built from the default
configuration, ``Pipeline.process`` on consume batches of 2,000 rows; every instance is
predicted by a model that learned every earlier label (the predictor's fused test-then-train
kernel). Beside it, on the same rows, in the same process:

* the predictor alone, fed the same way (``predict_proba_learn_many`` per consume batch), with
  the default parameters (MOA's rules and subset size ``sqrt+1``) and with river's
  (``flavour="river", max_features="sqrt"``, the defaults before issue 36);
* MOA (``--moa``): ``moa.classifiers.meta.AdaptiveRandomForest -s 10`` through capymoa's
  ``prequential_evaluation`` (instance by instance, test then train, the loop in the JVM);
* river (``--river-seeds``): ``forest.ARFClassifier(n_models=10, seed=seed)``,
  ``predict_one`` then ``learn_one`` per row.

Throughput is rows per CPU-second of this process (every thread, the JVM's included), numba
compiled beforehand; the cold compile is measured in a child process with an empty cache.
Accuracy is the prequential accuracy over every row. Seeds 1..N for ours and MOA; river, a
hundred times slower, on its own (fewer) seeds. Streams: every real classification stream of
``shared/data``.

Run::

    python tests/benchmarks/learners/bench_arf.py --seeds 10 --moa --river-seeds 3   # results/arf.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models import registry  # noqa: E402
from tests.benchmarks.common import cold_compile, write_arff, write_results  # noqa: E402
from tests.shared_data import data_dir  # noqa: E402
from worker.pipeline import Pipeline, PipelineConfig, stream_seed  # noqa: E402
from worker.tools.dev.datasets import load  # noqa: E402

STREAMS = ("electricity", "weather", "outdoor", "phishing", "powersupply",
           "mixed_abrupt", "mixed_gradual")
CONSUME = 2000  # rows per poll (worker.max_poll_records' default)
RIVER_RULES = {"flavour": "river", "max_features": "sqrt"}  # the defaults before issue 36


def get_stream(name: str, rows: int | None = None):
    d = load(name, data_dir())
    return np.ascontiguousarray(d.X[:rows], dtype=np.float64), list(d.y[:rows])


def _accuracy(pred: list, y: list) -> float:
    return sum(p == t for p, t in zip(pred, y)) / len(y)


def run_pipeline(X, y, seed: int) -> tuple[float, float]:
    """``(accuracy, rows per CPU-second)`` of the default pipeline, fed as the worker feeds it."""
    p = Pipeline("bench", PipelineConfig(seed=seed), X.shape[1])
    pred: list = []
    t0 = time.process_time()
    for a in range(0, len(y), CONSUME):
        res = p.process(X[a:a + CONSUME], y[a:a + CONSUME])
        pred += [v for b in res.blocks for v in b.y_pred]
    return _accuracy(pred, y), len(y) / (time.process_time() - t0)


def run_predictor(X, y, seed: int, **params) -> tuple[float, float]:
    """``(accuracy, rows per CPU-second)`` of the default predictor alone (the pipeline's
    seed), its fused kernel per consume batch; ``params`` over the default ones."""
    cfg = PipelineConfig(seed=seed)
    name = cfg.predictor_for(registry.CLASSIFICATION)
    model = registry.get(name).build({**cfg.params_of(name), **params}, (registry.PREDICTOR,),
                                     stream_seed("bench", seed))
    pred: list = []
    t0 = time.process_time()
    for a in range(0, len(y), CONSUME):
        pred += model.predict_learn_many(X[a:a + CONSUME], y[a:a + CONSUME])
    return _accuracy(pred, y), len(y) / (time.process_time() - t0)


def run_river(X, y, seed: int) -> tuple[float, float]:
    from river import forest

    rows = [dict(enumerate(r)) for r in X.tolist()]
    model = forest.ARFClassifier(n_models=10, seed=seed)
    hits = 0
    t0 = time.process_time()
    for x, t in zip(rows, y):
        hits += model.predict_one(x) == t
        model.learn_one(x, t)
    return hits / len(y), len(y) / (time.process_time() - t0)


def run_moa(X, y, seed: int) -> tuple[float, float]:
    from capymoa.base import MOAClassifier
    from capymoa.evaluation import prequential_evaluation
    from capymoa.stream import ARFFStream
    from moa.classifiers.meta import AdaptiveRandomForest as MOAARF

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.arff"
        write_arff(path, X, y)
        stream = ARFFStream(path=str(path))
        warm = MOAClassifier(MOAARF, schema=stream.get_schema(), CLI="-s 10")
        prequential_evaluation(stream=stream, learner=warm, max_instances=2000, optimise=True)
        model = MOAClassifier(MOAARF, schema=stream.get_schema(), CLI="-s 10",
                              random_seed=seed)
        t0 = time.process_time()
        res = prequential_evaluation(stream=stream, learner=model, optimise=True)
        cpu = time.process_time() - t0
    return res.cumulative.accuracy() / 100.0, len(y) / cpu


_COLD = """
import time, numpy as np, sys
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from worker.pipeline import Pipeline, PipelineConfig
t1 = time.perf_counter()
rng = np.random.default_rng(0); X = rng.random((600, 4)); y = [int(v > 0.5) for v in X[:, 0]]
Pipeline("s", PipelineConfig(), 4).process(X, y)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def _stat(values) -> str:
    v = np.asarray(values, dtype=float)
    if v.size == 1 or np.isnan(v).all():
        return f"{np.nanmean(v):.4f}"
    return f"{v.mean():.4f} ± {v.std(ddof=1):.4f}"


def _run_stream(name: str, args) -> dict:
    X, y = get_stream(name, args.rows)
    run_predictor(X[:300], y[:300], 1)  # kernels loaded (compiled beforehand by the warm-up)
    run_pipeline(X[:300], y[:300], 1)
    r: dict[str, list] = {k: [] for k in ("pipe", "prate", "ours", "orate", "rv", "rvrate",
                                          "moa", "mrate", "river", "rrate")}
    for seed in range(1, args.seeds + 1):
        for key, fn in (("pipe", run_pipeline), ("ours", run_predictor),
                        ("rv", lambda X, y, s: run_predictor(X, y, s, **RIVER_RULES))):
            acc, rate = fn(X, y, seed)
            r[key].append(acc)
            r[{"pipe": "prate", "ours": "orate", "rv": "rvrate"}[key]].append(rate)
        if args.moa:
            acc, rate = run_moa(X, y, seed)
            r["moa"].append(acc)
            r["mrate"].append(rate)
        if seed <= args.river_seeds:
            acc, rate = run_river(X, y, seed)
            r["river"].append(acc)
            r["rrate"].append(rate)
    return {"rows": len(y), **{k: v or [np.nan] for k, v in r.items()}}


def _row(name: str, r: dict) -> str:
    m = {k: float(np.mean(v)) for k, v in r.items() if k != "rows"}
    return (f"| {name} | {r['rows']:,} | {_stat(r['pipe'])} | {_stat(r['ours'])} | "
            f"{_stat(r['rv'])} | {_stat(r['moa'])} | {_stat(r['river'])} | "
            f"{100 * (m['pipe'] - m['moa']):+.2f} | {100 * (m['rv'] - m['moa']):+.2f} | "
            f"{m['orate']:,.0f} | {m['prate']:,.0f} | {m['mrate']:,.0f} | {m['rrate']:,.0f} | "
            f"{m['orate'] / m['mrate']:.1f}x | {m['prate'] / m['mrate']:.1f}x |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--rows", type=int, default=None, help="first rows of each stream")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N (ours and MOA)")
    parser.add_argument("--river-seeds", type=int, default=1, help="seeds 1..N for river (0: none)")
    parser.add_argument("--moa", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "tests/benchmarks/learners/results/arf.md"))
    args = parser.parse_args(argv)
    lines = ["# The default pipeline and its predictor (ARF-10) against MOA and river, row by row\n",
             "Protocol in the script's docstring: every instance predicted by a model that "
             "learned every earlier label; ours fed as "
             f"the worker feeds it (consume batches of {CONSUME:,}); MOA and river one row at a "
             f"time. Accuracy mean ± sd over seeds 1-{args.seeds} (river: 1-{args.river_seeds}); "
             "throughput in rows per CPU-second (every thread), means, on 2 vCPUs.\n",
             "| stream | rows | default pipeline | ARF-10 default | ARF-10 river's rules | MOA ARF-10 | "
             "river ARF-10 | pipeline - MOA (points) | river's rules - MOA (points) | "
             "ARF-10 rows/CPU-s | "
             "pipeline rows/CPU-s | MOA rows/CPU-s | river rows/CPU-s | ARF-10 / MOA speed | "
             "pipeline / MOA speed |",
             "|---" * 15 + "|"]
    print("\n".join(lines), flush=True)
    results = {}
    for stream in args.streams.split(","):
        results[stream] = _run_stream(stream, args)
        lines.append(_row(stream, results[stream]))
        print(lines[-1], flush=True)
    keys = [k for k in results[next(iter(results))] if k != "rows"]
    mean_row = {"rows": sum(r["rows"] for r in results.values()),
                **{k: [float(np.mean(r[k])) for r in results.values()] for k in keys}}
    lines.append(_row("**mean of the streams**", mean_row))
    imp, comp = cold_compile(_COLD)
    lines.append(f"\nCold start (empty numba cache, child process): import {imp:.1f} s, first "
                 f"default pipeline run (compilation) {comp:.1f} s.\n")
    print("\n".join(lines[-2:]), flush=True)
    write_results(args.out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
