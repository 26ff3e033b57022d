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
the delay, so that no label expires); numba compiled beforehand. Beside them, the fully
labelled rows in the order the late stream learns them (as their labels come), which sets
apart what that order costs the learners. The pipelines run side by side, a consume batch of
one at a time (:func:`side_by_side`): on a shared machine whose speed drifts between
minutes, runs back to back gave single ratios of 0.54-1.00. Where each pipeline's time goes
is set apart too (:func:`parts_table`): the forest's kernel, the ranker's learning and the
rest of the pipeline (Python), so that what the learning order costs the learners and what
the late labels add (the held store, the join, the planning; the trees' second look at a
late row) can be read apart. The peer beside them (:func:`river_side_by_side`): river's
ARF-10 row by row on the same two streams, so that what late labels cost a forest by
themselves (the learning order, the second look) is measured outside this pipeline too.

Run::

    python tests/benchmarks/learners/bench_delayed_labels.py --seeds 3 --river-seeds 1 \
        --river-pairs 1
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models.cart.block_forest import BlockForestRanker  # noqa: E402
from models.hoeffding.adaptive_forest import AdaptiveRandomForest  # noqa: E402
from tests.benchmarks.common import clocked_calls, write_results  # noqa: E402
from tests.benchmarks.learners.bench_arf import CONSUME, RIVER_RULES, get_stream  # noqa: E402
from worker.pipeline import Pipeline, PipelineConfig  # noqa: E402
from worker.pipeline.engine import HELD_ROWS  # noqa: E402

DELAYS = (0, 10, 100, 1000)
#: the default learners' calls whose CPU time the throughput table sets apart, by part: the
#: predictor's test-then-train kernel and the ranker's learning
PARTS = ((AdaptiveRandomForest, "predict_proba_learn_many", "forest"),
         (BlockForestRanker, "learn_many_ranked", "ranker"))


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


def run_ours(X, y, delay: int, seed: int, every: int = 1, **params) -> float:
    """The delayed prequential accuracy of the default pipeline (``params``: the predictor's,
    over the defaults) holding twice the delay (at least the default), so that no label
    expires."""
    cfg = PipelineConfig(seed=seed)
    if params:
        name = cfg.predictor_for("classification")
        cfg = PipelineConfig(seed=seed, params={name: {**cfg.params_of(name), **params}})
    rows, ys, ids, ts, lab = late_rows(X, y, delay, every)
    p = Pipeline("bench", cfg, X.shape[1], held_rows=max(HELD_ROWS, 2 * delay))
    hits = scored = answered = 0
    for a in range(0, len(ys), CONSUME):
        b = a + CONSUME
        res = p.process(rows[a:b], ys[a:b], ids=ids[a:b], ts=ts[a:b], labels=lab[a:b])
        for _pos, served, truth in res.scored:
            # as river scores: a prediction made before anything was learned (None) is not
            # counted (at a delay of 1,000 that is the first 1,000 instances)
            hits += sum(s == t for s, t in zip(served, truth))
            answered += sum(s is not None for s in served)
            scored += len(truth)
    assert scored == len(y), (scored, len(y))
    return hits / answered


def run_side_by_side(X, y, seed: int, delay: int = 1000,
                     every: int = 2) -> tuple[tuple[float, float, float], list[dict]]:
    """Instances per CPU-second of three default pipelines run side by side: every label with
    its instance; the same, its rows in the order the third learns them (as their labels
    come); and every ``every``-th label ``delay`` instances late (the worker's bound of held
    instances). A consume batch of one at a time, the one that has taken fewest instances
    going next: all run at the machine's speed of the same moments, which on a shared
    machine drifts by tens of percent between minutes (runs back to back differed by up to
    40%). Beside the rates, per pipeline: its CPU seconds in all (``"all"``) and in each
    part of :data:`PARTS`."""
    rows, ys, ids, ts, lab = late_rows(X, y, delay, every)
    order = [ids[r] for r in range(len(ys)) if ys[r] is not None]  # as the labels come
    n, m = len(y), len(ys)
    feeds = [[(len(y[a:a + CONSUME]), dict(X=X[a:a + CONSUME], y=y[a:a + CONSUME]))
              for a in range(0, n, CONSUME)],
             [(len(order[a:a + CONSUME]), dict(X=X[order[a:a + CONSUME]],
                                               y=[y[k] for k in order[a:a + CONSUME]]))
              for a in range(0, n, CONSUME)],
             [(int((~lab[b:b + CONSUME]).sum()),
               dict(X=rows[b:b + CONSUME], y=ys[b:b + CONSUME], ids=ids[b:b + CONSUME],
                    ts=ts[b:b + CONSUME], labels=lab[b:b + CONSUME]))
              for b in range(0, m, CONSUME)]]
    pipelines = [Pipeline("bench", PipelineConfig(seed=seed), X.shape[1]) for _ in range(2)]
    pipelines.append(Pipeline("bench", PipelineConfig(seed=seed), X.shape[1],
                              held_rows=HELD_ROWS))
    parts = [Counter(), Counter(), Counter()]
    with clocked_calls(PARTS, time.process_time) as spent:

        def run(k: int, batch: dict) -> None:
            spent.clear()
            t0 = time.process_time()
            pipelines[k].process(**batch)
            parts[k]["all"] += time.process_time() - t0
            parts[k].update(spent)

        side_by_side(feeds, run)
    return tuple(n / p["all"] for p in parts), [dict(p) for p in parts]


def side_by_side(feeds: list[list], run) -> None:
    """Every batch of ``feeds`` (per feed, its ``(instances, batch)`` in order) through
    ``run(k, batch)``, one batch at a time, the feed that has taken fewest instances going
    next: the feeds then run at the machine's speed of the same moments."""
    taken = [0] * len(feeds)
    while any(feeds):
        k = min((k for k, feed in enumerate(feeds) if feed), key=taken.__getitem__)
        count, batch = feeds[k].pop(0)
        run(k, batch)
        taken[k] += count


def run_river(X, y, delay: int, seed: int) -> float:
    from river import evaluate, forest, metrics
    from river import stream as rstream

    metric = metrics.Accuracy()
    evaluate.progressive_val_score(
        dataset=rstream.iter_array(X, np.asarray(y, dtype=object)),
        model=forest.ARFClassifier(n_models=10, seed=seed), metric=metric, delay=delay)
    return metric.get()


def river_side_by_side(X, y, seed: int, delay: int = 1000,
                       every: int = 2) -> tuple[float, float]:
    """Instances per CPU-second of river's ``forest.ARFClassifier(n_models=10)`` row by row on
    the rows of :func:`run_side_by_side`: every label with its instance (``predict_one`` then
    ``learn_one``), and every ``every``-th label ``delay`` instances late (``predict_one`` when
    the instance comes, ``learn_one`` when its label does; the instance's features kept by id
    meanwhile, as the worker holds them). The two run side by side in consume batches, as
    ours do: what late labels cost river's forest, beside what they cost the pipeline."""
    from river import forest

    rows, ys, ids, _ts, lab = late_rows(X, y, delay, every)
    xs = [dict(enumerate(r)) for r in X.tolist()]  # river's rows, made beforehand
    models = [forest.ARFClassifier(n_models=10, seed=seed) for _ in range(2)]
    held: dict = {}

    def plain(a: int, b: int) -> None:
        model = models[0]
        for k in range(a, b):
            model.predict_one(xs[k])
            model.learn_one(xs[k], y[k])

    def late(a: int, b: int) -> None:
        model = models[1]
        for r in range(a, b):
            if lab[r]:  # a LabelEvent: its instance's features, learned now
                model.learn_one(held.pop(ids[r]), ys[r])
                continue
            x = xs[ids[r]]
            model.predict_one(x)
            if ys[r] is None:
                held[ids[r]] = x
            else:
                model.learn_one(x, ys[r])

    n, m = len(y), len(ys)
    feeds = [[(min(a + CONSUME, n) - a, (a, min(a + CONSUME, n))) for a in range(0, n, CONSUME)],
             [(int((~lab[b:b + CONSUME]).sum()), (b, min(b + CONSUME, m)))
              for b in range(0, m, CONSUME)]]
    spent = [0.0, 0.0]

    def run(k: int, bounds: tuple[int, int]) -> None:
        t0 = time.process_time()
        (plain, late)[k](*bounds)
        spent[k] += time.process_time() - t0

    side_by_side(feeds, run)
    return n / spent[0], n / spent[1]


def parts_table(runs: list, n: int) -> list[str]:
    """Where each pipeline's time goes: the median over ``runs`` (per run, the three
    pipelines' CPU seconds by part) of each part's seconds per ``n`` instances, and the
    differences that set apart the learning order and the late labels' own cost."""
    names = [part for _c, _n, part in PARTS]
    med = {k: [float(np.median([r[p].get(k, 0.0) for r in runs])) for p in range(3)]
           for k in ["all", *names]}
    med["rest"] = [med["all"][p] - sum(med[k][p] for k in names) for p in range(3)]
    what = {"forest": "the forest's test-then-train kernel (`predict_proba_learn_many`)",
            "ranker": "the block-forest ranker's learning (`learn_many_ranked`)",
            "rest": "the rest: planning, held store and join, detectors, rankings (Python)",
            "all": "the whole pipeline"}
    out = [f"Where the time goes: CPU seconds per {n:,} instances (medians of the runs), and "
           "what the learning order and then the late labels add.", "",
           "| part | every label with its instance | the same rows in the late stream's "
           "learning order | half the labels late | order - every label | late - order |",
           "|---|---|---|---|---|---|"]
    for k in [*names, "rest", "all"]:
        a, b, c = med[k]
        out.append(f"| {what[k]} | {a:.3f} | {b:.3f} | {c:.3f} | {b - a:+.3f} | {c - b:+.3f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stream", default="electricity")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--river-seeds", type=int, default=1)
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--pairs", type=int, default=9, help="throughput pairs of runs")
    ap.add_argument("--river-pairs", type=int, default=1,
                    help="throughput pairs of river's forest (0: none; a pair takes minutes)")
    args = ap.parse_args()
    X, y = get_stream(args.stream, args.rows)
    run_side_by_side(X, y, 1)  # compile (the growth of pools too): not counted
    seeds = range(1, args.seeds + 1)
    table = []
    for delay in DELAYS:
        ours = [run_ours(X, y, delay, s) for s in seeds]
        rules = [run_ours(X, y, delay, s, **RIVER_RULES) for s in seeds]
        river = [run_river(X, y, delay, s) for s in range(1, args.river_seeds + 1)]
        table.append((delay, ours, rules, river))
        print(delay, np.mean(ours), np.mean(rules), np.mean(river) if river else None,
              flush=True)
    runs = [run_side_by_side(X, y, seeds[k % len(seeds)]) for k in range(args.pairs)]
    rates = np.array([r for r, _parts in runs])
    plain, ordered, half = rates.T
    ratios, order_ratios = half / plain, ordered / plain
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
              "runs of the three pipelines side by side, a consume batch of one at a time; "
              "medians, the ratios' range beside them). The second learns the fully labelled "
              "rows in the order the late stream learns them, as their labels come: what that "
              "order costs the learners alone.", "",
              "| every label with its instance | the same rows in the late stream's learning "
              "order | half the labels 1,000 instances late | late / every label (median) "
              "| runs' ratios | learning order / every label |",
              "|---|---|---|---|---|---|",
              f"| {np.median(plain):,.0f} | {np.median(ordered):,.0f} | {np.median(half):,.0f} | "
              f"{np.median(ratios):.2f} | {ratios.min():.2f}-{ratios.max():.2f} | "
              f"{np.median(order_ratios):.2f} ({order_ratios.min():.2f}-"
              f"{order_ratios.max():.2f}) |"]
    lines += ["", *parts_table([parts for _r, parts in runs], len(y))]
    if args.river_pairs:
        peer = np.array([river_side_by_side(X, y, 1 + k) for k in range(args.river_pairs)])
        forest = [float(np.median([parts[p]["forest"] for _r, parts in runs])) for p in (0, 2)]
        lines += ["", "The peer: river's ARF-10 row by row on the same rows, the two streams side "
                  f"by side in consume batches ({args.river_pairs} pair(s), seeds from 1; "
                  "medians): what late labels cost the forest alone, with no ranker beside it "
                  "and no Kafka.", "",
                  "| river: every label with its instance | river: half the labels 1,000 "
                  "instances late | river's late / every label | pairs' ratios | ours, the "
                  "forest's kernel alone (its CPU seconds above) |",
                  "|---|---|---|---|---|",
                  f"| {np.median(peer[:, 0]):,.0f} | {np.median(peer[:, 1]):,.0f} | "
                  f"{np.median(peer[:, 1] / peer[:, 0]):.2f} | "
                  f"{(peer[:, 1] / peer[:, 0]).min():.2f}-{(peer[:, 1] / peer[:, 0]).max():.2f} "
                  f"| {forest[0] / forest[1]:.2f} |"]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(Path(__file__).parent / "results" / "delayed_labels.md", text)


if __name__ == "__main__":
    main()
