"""Freshness of the rankings a subscriber gets: the rankings topic, not the ranker's state.

Question: a subscriber to the rankings topic holds the last ranking published for a stream.
How well does that ranking follow the true importances of drifting features, with the
default configuration fed as the worker feeds it, and how many messages does it cost?

Streams: the rotating hyperplanes of :mod:`tests.benchmarks.rankings.bench_rankings_drift` (``d =
10``, 5% label noise), the settings given by ``--settings`` (default: clipped walks with
``K = 2`` at ``T`` = 1e-3 and 1e-2, ``K = 5`` at 3e-3, and the abrupt switches), seeds
``--seeds`` (default 5) seeded as in that benchmark.

Feeding: the stream's rows go through :class:`worker.pipeline.engine.Pipeline` with the
default :class:`~worker.pipeline.config.PipelineConfig` (its mini-batch of 100 rows, its
``ranking_every`` of 1,000) in consume batches of 1 to 500 rows (uniform, seeded: the
worker hands a pipeline whatever share of a poll its stream has), every row labelled.

Asks: every ``max(10, n // 1000)`` rows after the first 100, as in the ranking benchmark.
At an ask the subscriber's view is the last ranking published at an earlier row (zeros
before the first); its scores, put back in feature order, are one row of the series.
Score: Cassidy & Deviney's tracking score (:func:`tests.benchmarks.common.tracking_score`).

Columns:

* ``published``: what the rankings topic carries with the configuration given
  (``--config JSON``, repeatable; default the default configuration, and
  ``{"publish_rankings": "top_k"}``: after a block that changed the top-k order, and
  ``"interval"``: only every ``ranking_every`` instances);
* ``state``: the ranker's own importances read at each ask (what a subscriber could at best
  get from this pipeline);
* ``win300``: a sliding-window forest on the last 300 rows refitted at every ask
  (:func:`tests.benchmarks.rankings.bench_rankings_drift.window_series`, MDI), the ranking
  benchmark's best window on these settings.

Cost: ranking messages per 1,000 instances, their JSON bytes per instance (as the worker
encodes them: every feature's name and score), and the pipeline's rows per CPU-second
(``time.process_time``, kernels compiled before timing).

Run::

    python tests/benchmarks/rankings/bench_published_rankings.py --seeds 5 \\
        --out tests/benchmarks/rankings/results/published_rankings.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.benchmarks.common import (
    tracking_score,
    write_results,
)
from tests.benchmarks.rankings.bench_rankings_drift import (
    all_settings,
    ask_times,
    select,
    window_series,
)
from worker.pipeline.config import PipelineConfig
from worker.pipeline.engine import Pipeline

SETTINGS = ["K=2,T=0.001,clipped", "K=2,T=0.01,clipped", "K=5,T=0.003,clipped", "abrupt"]
CONFIGS = ['{}', '{"publish_rankings": "top_k"}', '{"publish_rankings": "interval"}']
MAX_POLL = 500


def consume_batches(n: int, seed: int) -> list[tuple[int, int]]:
    """``(a, b)`` cuts of ``0:n`` into runs of 1 to :data:`MAX_POLL` rows."""
    rng = np.random.default_rng(seed)
    cuts, a = [], 0
    while a < n:
        b = min(n, a + int(rng.integers(1, MAX_POLL + 1)))
        cuts.append((a, b))
        a = b
    return cuts


def published(X, y, times, config: dict, seed: int) -> dict:
    """Feed the pipeline; the subscriber's series, the ranker's, the messages and the cost.

    The consume batches are also cut at the asks, to read the ranker's state there: a
    pipeline's outputs do not depend on how its input is cut (tested), so the published
    rankings are those of the worker's batches alone. The CPU time is that of a second run
    cut at the consume batches only."""
    pipe = Pipeline(f"published-{seed}", PipelineConfig(**config), n_features=X.shape[1])
    labels = y.tolist()
    names = {}
    last = np.zeros(X.shape[1])  # the subscriber's view
    view, state = [], []
    n_msgs = n_bytes = 0
    ends = sorted({b for _, b in consume_batches(len(labels), seed)} | set(times.tolist()))
    asks = set(times.tolist())
    a = 0
    for b in ends:
        res = pipe.process(X[a:b], labels[a:b])
        names = names or {f: i for i, f in enumerate(pipe.names)}
        for rk in res.rankings:
            last = np.zeros(X.shape[1])
            last[[names[f] for f in rk.features]] = rk.scores
            n_msgs += 1
            n_bytes += len(json.dumps({"v": 1, "stream": pipe.stream, "method": rk.method,
                                       "features": rk.features, "scores": rk.scores,
                                       "n_seen": rk.n_seen, "ts": 0}))
        if b in asks:
            view.append(last.copy())
            state.append(_ranker_state(pipe, X.shape[1]))
        a = b
    return {"view": np.array(view), "state": np.array(state), "messages": n_msgs,
            "bytes": n_bytes, "rows_per_cpu_s": _speed(X, labels, config, seed)}


def _speed(X, labels, config: dict, seed: int) -> float:
    """Rows per CPU-second of the pipeline fed in the consume batches alone."""
    pipe = Pipeline(f"published-{seed}", PipelineConfig(**config), n_features=X.shape[1])
    t0 = time.process_time()
    for a, b in consume_batches(len(labels), seed):
        pipe.process(X[a:b], labels[a:b])
    return len(labels) / (time.process_time() - t0)


def _ranker_state(pipe: Pipeline, d: int) -> np.ndarray:
    """The default ranker's importances now, in feature order (zeros before its first
    block)."""
    for _, scores in pipe.rankers[0].rankings():
        return np.asarray(scores, dtype=np.float64)
    return np.zeros(d)


def run(settings, seeds: int, configs: list[dict], window: bool) -> dict:
    rows = {}
    for setting in settings:
        for s in range(seeds):
            seed = setting.seed_base + s
            X, y, W = setting.stream(seed)
            times = ask_times(len(y))
            truth = W[times - 1]
            row = {}
            for cfg in configs:
                name = json.dumps(cfg, separators=(",", ":"))
                out = published(X, y, times, cfg, seed)
                row[f"published{name}"] = tracking_score(out["view"], truth)
                row[f"state{name}"] = tracking_score(out["state"], truth)
                row[f"msgs/1k{name}"] = 1000 * out["messages"] / len(y)
                row[f"bytes/row{name}"] = out["bytes"] / len(y)
                row[f"rows/CPU-s{name}"] = out["rows_per_cpu_s"]
            if window:
                series = window_series(X, y, times, 300, 10, seed)
                row["win300"] = tracking_score(series["win300:mdi"], truth)
            rows[(setting.name, seed)] = row
            print(setting.name, seed, {k: round(v, 3) for k, v in row.items()}, flush=True)
    return rows


def report(rows: dict, args) -> str:
    columns = list(next(iter(rows.values())))
    lines = ["# Rankings as a subscriber gets them", "",
             f"`python tests/benchmarks/rankings/bench_published_rankings.py --seeds {args.seeds}"
             + "".join(f" --settings '{s}'" for s in args.settings or [])
             + "`", "",
             "Mean over seeds per setting (module docstring: the feeding, the asks, the score). "
             "`{}` is the default configuration.", "",
             "| setting | " + " | ".join(columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for name in dict.fromkeys(k[0] for k in rows):
        vals = [r for k, r in rows.items() if k[0] == name]
        cells = [f"{np.mean([v[c] for v in vals]):.3f}" if "score" in c or c.startswith(
            ("published", "state", "win")) else f"{np.mean([v[c] for v in vals]):,.1f}"
            for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--settings", action="append", help="filters (see bench_rankings_drift)")
    ap.add_argument("--config", action="append", help="PipelineConfig arguments as JSON")
    ap.add_argument("--no-window", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    settings = select(all_settings(), args.settings or SETTINGS)
    configs = [json.loads(c) for c in (args.config or CONFIGS)]
    X, y, _ = settings[0].stream(0, 400)  # compile the kernels before timing
    for cfg in configs:
        Pipeline("warm", PipelineConfig(**cfg), n_features=X.shape[1]).process(X, y.tolist())
    rows = run(settings, args.seeds, configs, not args.no_window)
    text = report(rows, args)
    print(text)
    if args.out:
        write_results(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
