"""Labels that arrive later: delayed prequential accuracy of the default predictor against
river's ``progressive_val_score(delay=...)``, and the throughput cost of late labels.

Ours is the worker's default pipeline (the adaptive random forest, the block-forest ranker,
ADWIN) fed as the worker feeds it: every instance unlabelled, its label a LabelEvent ``delay``
instances later (the last ones after the last instance, as river answers every question at
the end), ``Pipeline.process`` on consume batches of 2,000 records. An instance is predicted
when it arrives; its label is scored against that prediction and learned when it comes. The
accuracy is counted as river's ``progressive_val_score`` counts it: a prediction made before
anything was learned (none: at a delay of 1,000, the first 1,000 instances) is left out
(``streamforest evaluate`` counts it as wrong instead, since the stream did wait for it).
Beside it, on the same rows: the same pipeline with river's forest rules
(``flavour="river", max_features="sqrt"``), and river's ``forest.ARFClassifier(n_models=10)``
through ``evaluate.progressive_val_score(..., delay=delay)``.

Throughput: instances per CPU-second of the default pipeline with every label carried by its
instance, and with half the labels (every other instance) coming 1,000 instances late as
LabelEvents, the worker's default bound of 1,000 held instances (the accuracy runs hold twice
the delay, so that no label expires); numba compiled beforehand; pairs of runs back to back, the median of their
ratios (on a shared machine a single pair ranged 0.54-0.92).

Run::

    python tests/benchmarks/learners/bench_delayed_labels.py --seeds 3 --river-seeds 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import write_results  # noqa: E402
from tests.benchmarks.learners.bench_arf import CONSUME, RIVER_RULES, get_stream  # noqa: E402
from worker.pipeline import Pipeline, PipelineConfig  # noqa: E402
from worker.pipeline.engine import HELD_ROWS  # noqa: E402

DELAYS = (0, 10, 100, 1000)


def late_rows(X, y, delay: int, every: int = 1):
    """The records of a stream whose labels come ``delay`` instances late, as the pipeline
    takes them: ``(rows, labels, ids, times, which rows are LabelEvents)``. Only every
    ``every``-th instance's label is late; the others travel with their instance."""
    n, d = X.shape
    rows, ys, ids, ts, lab = [], [], [], [], []
    due: dict[int, list] = {}

    def label(j, k):
        rows.append(np.zeros(d)), ys.append(y[j]), ids.append(j), ts.append(k), lab.append(True)

    for k in range(n):
        late = k % every == 0
        rows.append(X[k]), ys.append(None if late else y[k]), ids.append(k), ts.append(k)
        lab.append(False)
        if late:
            due.setdefault(k + delay, []).append(k)
        for j in due.pop(k, []):
            label(j, k)
    for k in sorted(due):
        for j in due[k]:
            label(j, n - 1)
    return np.array(rows), ys, ids, ts, np.array(lab)


def run_ours(X, y, delay: int, seed: int, every: int = 1, held_rows: int | None = None,
             **params) -> tuple[float, float]:
    """``(delayed prequential accuracy, instances per CPU-second)`` of the default pipeline
    (``params``: the predictor's, over the defaults) holding ``held_rows`` instances (``None``:
    twice the delay, at least the default, so that no label expires)."""
    cfg = PipelineConfig(seed=seed)
    if params:
        name = cfg.predictor_for("classification")
        cfg = PipelineConfig(seed=seed, params={name: {**cfg.params_of(name), **params}})
    rows, ys, ids, ts, lab = late_rows(X, y, delay, every)
    p = Pipeline("bench", cfg, X.shape[1],
                 held_rows=max(HELD_ROWS, 2 * delay) if held_rows is None else held_rows)
    hits = scored = answered = 0
    cpu = 0.0  # the pipeline's own time: the scoring below is this benchmark's, as in run_plain
    for a in range(0, len(ys), CONSUME):
        b = a + CONSUME
        t0 = time.process_time()
        res = p.process(rows[a:b], ys[a:b], ids=ids[a:b], ts=ts[a:b], labels=lab[a:b])
        cpu += time.process_time() - t0
        for _pos, served, truth in res.scored:
            # as river scores: a prediction made before anything was learned (None) is not
            # counted (at a delay of 1,000 that is the first 1,000 instances)
            hits += sum(s == t for s, t in zip(served, truth))
            answered += sum(s is not None for s in served)
            scored += len(truth)
    assert scored == len(y), (scored, len(y))
    return hits / answered, len(y) / cpu


def run_plain(X, y, seed: int) -> float:
    """Instances per CPU-second of the default pipeline, every label carried by its instance."""
    p = Pipeline("bench", PipelineConfig(seed=seed), X.shape[1])
    t0 = time.process_time()
    for a in range(0, len(y), CONSUME):
        p.process(X[a:a + CONSUME], y[a:a + CONSUME])
    return len(y) / (time.process_time() - t0)


def run_river(X, y, delay: int, seed: int) -> float:
    from river import evaluate, forest, metrics
    from river import stream as rstream

    metric = metrics.Accuracy()
    evaluate.progressive_val_score(
        dataset=rstream.iter_array(X, np.asarray(y, dtype=object)),
        model=forest.ARFClassifier(n_models=10, seed=seed), metric=metric, delay=delay)
    return metric.get()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stream", default="electricity")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--river-seeds", type=int, default=1)
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--pairs", type=int, default=9, help="throughput pairs of runs")
    args = ap.parse_args()
    X, y = get_stream(args.stream, args.rows)
    run_ours(X[:3000], y[:3000], 10, 1)  # compile
    seeds = range(1, args.seeds + 1)
    table = []
    for delay in DELAYS:
        ours = [run_ours(X, y, delay, s)[0] for s in seeds]
        rules = [run_ours(X, y, delay, s, **RIVER_RULES)[0] for s in seeds]
        river = [run_river(X, y, delay, s) for s in range(1, args.river_seeds + 1)]
        table.append((delay, ours, rules, river))
        print(delay, np.mean(ours), np.mean(rules), np.mean(river) if river else None,
              flush=True)
    plain, half = [], []
    for k in range(args.pairs):  # paired, alternating: the machine's speed drifts
        s = seeds[k % len(seeds)]
        plain.append(run_plain(X, y, s))
        half.append(run_ours(X, y, 1000, s, every=2, held_rows=HELD_ROWS)[1])  # the default
    ratios = np.array(half) / np.array(plain)
    lines = [
        f"# Labels that arrive later on {args.stream} ({len(y):,} rows): the default pipeline "
        "against river's `progressive_val_score(delay=...)`", "",
        "Delayed prequential accuracy (each label scored against the prediction served for its "
        "instance; as river's `progressive_val_score` scores, instances predicted before anything "
        f"was learned are left out), mean ± sd over seeds 1-{args.seeds} (river: 1-{args.river_seeds}); ours fed "
        "as the worker feeds it (LabelEvents, consume batches of 2,000 records).", "",
        "| delay (instances) | default pipeline | with river's forest rules | river ARF-10 "
        "| default - river (points) | river's rules - river (points) |",
        "|---|---|---|---|---|---|"]
    for delay, ours, rules, river in table:
        r = np.mean(river) if river else float("nan")
        lines.append(f"| {delay:,} | {np.mean(ours):.4f} ± {np.std(ours):.4f} | "
                     f"{np.mean(rules):.4f} ± {np.std(rules):.4f} | {r:.4f} | "
                     f"{100 * (np.mean(ours) - r):+.2f} | {100 * (np.mean(rules) - r):+.2f} |")
    lines += ["", f"Throughput of the default pipeline, instances per CPU-second ({args.pairs} "
              "pairs of runs, each pair back to back; the ratio is the median of the pairs' "
              "ratios, their range beside it):", "",
              "| every label with its instance | half the labels 1,000 instances late "
              "| ratio (median) | pairs' ratios |",
              "|---|---|---|---|",
              f"| {np.median(plain):,.0f} | {np.median(half):,.0f} | "
              f"{np.median(ratios):.2f} | {ratios.min():.2f}-{ratios.max():.2f} |"]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(Path(__file__).parent / "results" / "delayed_labels.md", text)


if __name__ == "__main__":
    main()
