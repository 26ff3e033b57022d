"""Prequential benchmark of the online random forest against river and MOA (one table).

Every model is evaluated test-then-train, instance by instance, on the same rows in the same
order, in one process:

* ours: :meth:`OnlineRandomForest.predict_learn_many` on chunks of 1,000 rows, which inside
  one kernel call predicts each row with the forest as it stands and then learns it, so the
  accuracy is exactly the instance-by-instance prequential accuracy; numba compilation is
  done (or loaded from cache) on a warm-up model before timing;
* river 0.26: ``predict_one`` then ``learn_one`` on dict rows; ``ARFClassifier`` is slow, so
  it only runs the first ``--river-arf-rows`` rows of each stream (said in the table);
* MOA through capymoa: ``AdaptiveRandomForestClassifier(ensemble_size=10)`` (other options
  MOA's defaults) on an ARFF copy of the stream, evaluated by capymoa's
  ``prequential_evaluation``, whose loop runs inside the JVM (no Python per instance).

Streams: Electricity (45,312 rows), Phishing (11,055), Power supply (29,928) from the shared
data folder, and 100,000 rows of :class:`models.generators.hyperplane.RotatingHyperplane` (d = 10,
K = 2, T = 0.001, S = 0.10, 5% noise, seed 1).

Throughput is rows per wall-clock second and rows per CPU second of this process (CPU time
counts every thread, JVM compiler and GC threads included); the machine is shared, so the CPU
figure is the steadier one and the speed ratios use it. ``acc@N`` is the accuracy over the
first N rows (N = the river ARF cap), comparable across all rows of a stream.

Run::

    python tests/benchmarks/learners/bench_orf.py                       # everything (~6 minutes)
    python tests/benchmarks/learners/bench_orf.py --streams phishing --no-moa

Measured on the project's 2-vCPU machine (accuracy on the first 10,000 rows / rows per
CPU-second)::

    | stream      | ORF-10         | ORF-10+MDA/MDG | river ARF-10 | MOA ARF-10    |
    | electricity | 0.847 / 147.6k | 0.847 / 101.8k | 0.889 / 668  | 0.907 / 2.0k  |
    | phishing    | 0.930 / 155.6k | 0.930 / 96.3k  | 0.933 / 354  | 0.938 / 1.2k  |
    | powersupply | 0.170 / 127.0k | 0.170 / 88.4k  | 0.173 / 288  | 0.160 / 2.2k  |
    | hyperplane  | 0.802 / 154.7k | 0.802 / 108.4k | 0.814 / 447  | 0.820 / 2.5k  |
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

from models.generators.hyperplane import RotatingHyperplane  # noqa: E402
from models.orf.online_forest import OnlineRandomForest  # noqa: E402
from tests.benchmarks.common import write_arff, write_results  # noqa: E402
from tests.shared_data import data_dir  # noqa: E402
from worker.tools.dev.datasets import load  # noqa: E402

DATA_DIR = data_dir()
STREAMS = ("electricity", "phishing", "powersupply", "hyperplane")


def get_stream(name: str):
    """``X`` (float64) and labels (list) of a benchmark stream."""
    if name == "hyperplane":
        X, y, _ = RotatingHyperplane(n_features=10, n_drift_features=2, mag_change=0.001,
                                     sigma=0.10, noise=0.05, seed=1).take(100_000)
        return X, [int(v) for v in y]
    data = load(name, DATA_DIR)
    return data.X, list(data.y)


class Result(dict):
    pass


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _summary(model, rows, hits, wall, cpu, cap, note=""):
    hits = np.asarray(hits, dtype=bool)
    return Result(model=model, rows=rows, acc=float(hits.mean()),
                  acc_cap=float(hits[:cap].mean()), wall=rows / wall, cpu=rows / max(cpu, 1e-9),
                  note=note)


def run_orf(X, y, params, cap, label):
    warm = OnlineRandomForest(**params)
    warm.predict_learn_many(X[:300], y[:300])  # compile or load the numba cache

    def go():
        model = OnlineRandomForest(**params)
        preds = []
        for s in range(0, len(X), 1000):
            preds += model.predict_learn_many(X[s:s + 1000], y[s:s + 1000])
        return model, preds

    (model, preds), wall, cpu = _timed(go)
    hits = [p == t for p, t in zip(preds, y)]
    per_tree = model.memory_bytes() / model.params["n_trees"] / 1024
    return _summary(label, len(X), hits, wall, cpu, cap,
                    f"{per_tree:,.0f} KiB/tree, {model.n_replaced} trees replaced")


def run_river(X, y, make, rows, cap, label, note=""):
    rows = min(rows, len(X))
    dict_rows = [dict(enumerate(r)) for r in X[:rows].tolist()]

    def go():
        model = make()
        hits = []
        for x, t in zip(dict_rows, y[:rows]):
            hits.append(model.predict_one(x) == t)
            model.learn_one(x, t)
        return hits

    hits, wall, cpu = _timed(go)
    return _summary(label, rows, hits, wall, cpu, min(cap, rows), note)


def run_moa(X, y, cap, label):
    from capymoa.classifier import AdaptiveRandomForestClassifier
    from capymoa.evaluation import prequential_evaluation
    from capymoa.stream import ARFFStream

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.arff"
        write_arff(path, X, y)
        stream = ARFFStream(path=str(path))
        model = AdaptiveRandomForestClassifier(schema=stream.get_schema(), ensemble_size=10,
                                               random_seed=1)
        res, wall, cpu = _timed(lambda: prequential_evaluation(
            stream=stream, learner=model, store_predictions=True, store_y=True,
            optimise=True))
        pred = np.asarray(res.predictions())  # class indices in the ARFF header's order
        truth = np.asarray(res.ground_truth_y())
        moa_acc = res.cumulative.accuracy() / 100.0
    hits = pred == truth
    if len(hits) != len(X) or abs(hits.mean() - moa_acc) > 1e-9:
        raise RuntimeError(f"MOA evaluated {len(hits)} rows (accuracy {moa_acc}) "
                           f"instead of {len(X)}")
    return _summary(label, len(X), hits, wall, cpu, cap, "JVM loop")


def bench_stream(name, args):
    X, y = get_stream(name)
    cap = min(args.river_arf_rows, len(X))
    out = []
    out.append(run_orf(X, y, {"n_trees": 10}, cap, "ORF 10 trees"))
    out.append(run_orf(X, y, {"n_trees": 100}, cap, "ORF 100 trees"))
    out.append(run_orf(X, y, {"n_trees": 10, "track_importance": True,
                               "importance_decay": 0.001}, cap, "ORF 10 trees + MDA/MDG"))
    if not args.no_river:
        from river import forest, tree
        out.append(run_river(X, y, lambda: forest.ARFClassifier(n_models=10, seed=1),
                             args.river_arf_rows, cap, "river ARF 10",
                             f"first {cap:,} rows only"))
        out.append(run_river(X, y, tree.HoeffdingTreeClassifier, len(X), cap, "river HT"))
    if not args.no_moa:
        try:
            out.append(run_moa(X, y, cap, "MOA ARF 10 (capymoa)"))
        except Exception as exc:  # report why MOA could not run instead of hiding it
            out.append(Result(model="MOA ARF 10 (capymoa)", rows=0, acc=float("nan"),
                              acc_cap=float("nan"), wall=float("nan"), cpu=float("nan"),
                              note=f"failed: {type(exc).__name__}: {exc}"))
    return cap, out


def table(all_results) -> list[str]:
    """One markdown row per stream and model."""
    lines = ["| stream | model | rows | acc | acc, first rows | inst/s (wall) | inst/CPU-s "
             "| ORF-10 speed-up (CPU) | notes |", "|---|---|---|---|---|---|---|---|---|"]
    for name, (cap, results) in all_results.items():
        ours = results[0]["cpu"]
        for r in results:
            ratio = ours / r["cpu"] if r["cpu"] == r["cpu"] and r["cpu"] > 0 else float("nan")
            lines.append(f"| {name} | {r['model']} | {r['rows']:,} | {r['acc']:.4f} | "
                         f"{r['acc_cap']:.4f} (first {cap:,}) | {r['wall']:,.0f} | "
                         f"{r['cpu']:,.0f} | {ratio:,.1f}x | {r['note']} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--river-arf-rows", type=int, default=10_000)
    parser.add_argument("--no-river", action="store_true")
    parser.add_argument("--no-moa", action="store_true")
    args = parser.parse_args(argv)
    results = {}
    for name in args.streams.split(","):
        results[name] = bench_stream(name, args)
        print("\n".join(table({name: results[name]})), flush=True)
    text = "\n".join([
        "# Online Random Forest against river and MOA", "",
        "Test-then-train, instance by instance, the same rows in one process (protocol in the "
        "script's docstring); accuracy over the whole stream and over the first rows (river's "
        "ARF is capped there); instances per second of wall time and per CPU-second of the "
        "process; the speed-up is ORF-10's instances per CPU-second over each model's.", "",
        *table(results)]) + "\n"
    print(text)
    if args.streams == ",".join(STREAMS) and not (args.no_river or args.no_moa):
        write_results(Path(__file__).parent / "results" / "orf.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
