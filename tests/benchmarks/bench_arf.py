"""Adaptive random forest (ARF-10): the worker's default predictor against river and MOA.

Run as the worker runs a predictor: mini-batches of 100 rows; each batch is first predicted
by the model as it stands (``predict_many`` / ``predict_one`` per row), then learned
(``learn_many`` / ``learn_one`` per row). Same rows, same order, one process:

* ours: the worker's default classification predictor, built as the worker builds it
  (``PipelineConfig().predictor_for("classification")``, then the registry's
  ``build(cfg.params_of(name), ("predictor",), seed)``, today
  :class:`~models.adaptive_forest.AdaptiveRandomForest` with 10 trees and river's subset
  size ``round(sqrt(d))``), and the same learner with MOA's and the paper's subset size
  (``max_features="sqrt+1"``); numba warmed first (from the on-disk cache), the cold
  compile cost measured separately in a child process with an empty cache directory;
* river: ``forest.ARFClassifier(n_models=10, seed=seed)`` (river's defaults otherwise);
* MOA (``--moa``): ``moa.classifiers.meta.AdaptiveRandomForest -s 10`` (random seed
  ``seed``) through capymoa's ``prequential_evaluation`` (instance by instance, the loop in
  the JVM: not the mini-batch protocol, its accuracy is indicative).

With ``--seeds N`` every learner runs with seeds 1..N and the table gives mean +- sample
standard deviation over the seeds (the accuracy target is judged on the means); throughput
and drift counts are means too. Throughput is rows per wall-clock second over predict +
learn. Streams: every real classification stream of ``shared/data`` (the list of
``bench_hoeffding.py``); ``--rows N`` takes the first ``N`` rows of each.

Run::

    python tests/benchmarks/bench_arf.py --seeds 3 --moa    # writes results/arf.md
    python tests/benchmarks/bench_arf.py --streams electricity --rows 20000 --seeds 5 \
        --no-sqrt1 --out /tmp/arf_slice.md                 # the guard test's reference
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from models import registry  # noqa: E402
from models.adaptive_forest import AdaptiveRandomForest  # noqa: E402
from tests.benchmarks.common import cold_compile, write_arff  # noqa: E402
from tests.shared_data import data_dir  # noqa: E402
from worker.dev.datasets import load  # noqa: E402
from worker.pipeline import PipelineConfig  # noqa: E402

STREAMS = ("electricity", "weather", "outdoor", "phishing", "powersupply",
           "mixed_abrupt", "mixed_gradual")
BATCH = 100


def get_stream(name: str, rows: int | None = None):
    d = load(name, data_dir())
    return np.ascontiguousarray(d.X[:rows], dtype=np.float64), list(d.y[:rows])


def default_predictor(seed: int, **params):
    """The worker's default classification predictor, built as the worker builds it
    (``params`` over the configured ones)."""
    cfg = PipelineConfig()
    name = cfg.predictor_for(registry.CLASSIFICATION)
    return name, registry.get(name).build({**cfg.params_of(name), **params},
                                          (registry.PREDICTOR,), seed)


def prequential(model, X, y):
    """``(accuracy, rows/s)`` of ``model`` under the worker protocol."""
    hits = 0
    t0 = time.perf_counter()
    for s in range(0, len(y), BATCH):
        yb = y[s:s + BATCH]
        pred = model.predict_many(X[s:s + BATCH])
        hits += sum(p == t for p, t in zip(pred, yb))
        model.learn_many(X[s:s + BATCH], yb)
    wall = time.perf_counter() - t0
    return hits / len(y), len(y) / wall


def run_ours(X, y, seed=1, **params):
    AdaptiveRandomForest(n_models=2).learn_many(X[:200], y[:200])  # load the kernels
    _, model = default_predictor(seed, **params)
    acc, rate = prequential(model, X, y)
    return acc, rate, model


def run_river(X, y, seed=1):
    from river import forest

    rows = [dict(enumerate(r)) for r in X.tolist()]
    model = forest.ARFClassifier(n_models=10, seed=seed)
    hits = 0
    t0 = time.perf_counter()
    for s in range(0, len(y), BATCH):
        xs, yb = rows[s:s + BATCH], y[s:s + BATCH]
        hits += sum(model.predict_one(x) == t for x, t in zip(xs, yb))
        for x, t in zip(xs, yb):
            model.learn_one(x, t)
    wall = time.perf_counter() - t0
    return hits / len(y), len(y) / wall, model


def run_moa(X, y, seed=1):
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
        t0 = time.perf_counter()
        res = prequential_evaluation(stream=stream, learner=model, optimise=True)
        wall = time.perf_counter() - t0
    return res.cumulative.accuracy() / 100.0, len(y) / wall


_COLD = """
import time, numpy as np, sys
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from models.adaptive_forest import AdaptiveRandomForest
t1 = time.perf_counter()
rng = np.random.default_rng(0); X = rng.random((300, 4)); y = (X[:, 0] > 0.5).astype(int)
m = AdaptiveRandomForest(n_models=3); m.learn_many(X, y); m.predict_many(X)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def _stat(values) -> str:
    """``mean`` (one value) or ``mean +- sd`` (sample sd) of accuracies."""
    v = np.asarray(values, dtype=float)
    if v.size == 1 or np.isnan(v).all():
        return f"{v.mean():.4f}"
    return f"{v.mean():.4f} ± {v.std(ddof=1):.4f}"


def _run_stream(name, args, seeds):
    """Figures of one stream over ``seeds``: dict of per-seed lists."""
    X, y = get_stream(name, args.rows)
    r = {k: [] for k in ("ours", "sqrt1", "rate", "drifts", "river", "rrate", "rdrifts",
                         "moa", "mrate")}
    for seed in seeds:
        acc, rate, model = run_ours(X, y, seed)
        r["ours"].append(acc)
        r["rate"].append(rate)
        r["drifts"].append(model.n_drifts)
        r["sqrt1"].append(np.nan if args.no_sqrt1 else
                          run_ours(X, y, seed, max_features="sqrt+1")[0])
        if not args.no_river:
            racc, rrate, rmodel = run_river(X, y, seed)
            r["river"].append(racc)
            r["rrate"].append(rrate)
            r["rdrifts"].append(rmodel.n_drifts_detected())
        if args.moa:
            try:
                macc, mrate = run_moa(X, y, seed)
                r["moa"].append(macc)
                r["mrate"].append(mrate)
            except Exception as exc:  # report it, keep the other figures
                print(f"MOA failed on {name}: {exc!r}", flush=True)
    return len(y), {k: v or [np.nan] for k, v in r.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--rows", type=int, default=None, help="first rows of each stream")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 1..N, mean +- sd")
    parser.add_argument("--no-river", action="store_true")
    parser.add_argument("--no-sqrt1", action="store_true", help="skip the sqrt+1 column")
    parser.add_argument("--moa", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "tests/benchmarks/results/arf.md"))
    args = parser.parse_args(argv)
    seeds = list(range(1, args.seeds + 1))
    name, _ = default_predictor(1)
    cmd = " ".join(["python tests/benchmarks/bench_arf.py", *(argv or sys.argv[1:])])
    lines = ["# Adaptive random forest (ARF-10): the default predictor against river and MOA\n",
             f"Generated by `{cmd}` (protocol in its docstring): mini-batches of 100, predict "
             "the batch then learn it, same rows, one process; numba warmed. Ours is the "
             f"worker's default classification predictor (`{name}`) built as the worker "
             f"builds it. Seeds {seeds[0]}-{seeds[-1]} for every learner: accuracy as mean "
             "± sample sd over the seeds, the difference between the means, throughput "
             "(rows per wall-clock second, predict + learn) and drifts as means. Machine: "
             "2 vCPU shared with other jobs.\n",
             "| stream | rows | ours (default, sqrt) | ours (sqrt+1) | river ARF-10 | diff "
             "default (points) | diff sqrt+1 (points) | ours rows/s | river rows/s | speed "
             "ratio | drifts ours / river | MOA ARF-10 (JVM loop) | MOA rows/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for stream in args.streams.split(","):
        n, r = _run_stream(stream, args, seeds)
        mean = {k: float(np.mean(v)) for k, v in r.items()}
        lines.append(
            f"| {stream} | {n:,} | {_stat(r['ours'])} | {_stat(r['sqrt1'])} | "
            f"{_stat(r['river'])} | {100 * (mean['ours'] - mean['river']):+.2f} | "
            f"{100 * (mean['sqrt1'] - mean['river']):+.2f} | {mean['rate']:,.0f} | "
            f"{mean['rrate']:,.0f} | {mean['rate'] / mean['rrate']:.1f}x | "
            f"{mean['drifts']:.0f} / {mean['rdrifts']:.0f} | {_stat(r['moa'])} | "
            f"{mean['mrate']:,.0f} |")
        print(lines[-1], flush=True)
    imp, comp = cold_compile(_COLD)
    lines.append(f"\nCold start (empty numba cache, child process): import {imp:.1f} s, "
                 f"first learn + predict (compilation) {comp:.1f} s.\n")
    print(lines[-1], flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
