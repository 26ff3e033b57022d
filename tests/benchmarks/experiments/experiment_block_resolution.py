"""Experiment: can the block forest choose its block size from the drift it sees?

Run: ``python tests/benchmarks/experiments/experiment_block_resolution.py [--seeds 5] [--jobs 1]``
(17 settings x 5 streams: about 2 minutes of one core per run). Writes
``results/block_resolution.md`` (``--out``).

The former default ranking (:class:`models.cart.block_forest.BlockForestRanker` with 200-row
blocks every 25 rows and ``memory="lepski"``, Lepski's rule over their mean) trailed the best sliding-window forest most at the
slowest settings (a 1,000-row window wins there) and at the fastest clipped walks (100 to
300 rows). This script feeds four block forests of different sizes the same streams of
``bench_rankings_drift.py`` and scores, with that benchmark's score:

* ``B<size>:last``: each block forest's latest measurement alone (no averaging), for block
  sizes 100 (every 25 rows), 200 (25), 300 (50) and 1000 (125). Per setting, the best of
  them is what a perfect choice of block size would give;
* ``default``: the 200-row forest under the ranker's memory rule (Lepski's rule, the worker's
  default ranking when the committed results were taken; the window mixture since Lepski's
  rule was removed from the ranker, so a new run measures that column differently);
* ``variogram``: a block size chosen per stream from the 200-row measurements' variogram
  ``g(h) = mean (M(t) - M(t - h))^2 / 2`` at ``h`` = 200 and 400 rows. Under a random-walk
  drift ``g(h) = s^2 + D h / 2``, so the two lags give the noise ``s^2 = 2 g(200) - g(400)``
  and the drift ``D = (g(400) - g(200)) / 100`` per row; the window balancing the two is
  ``W = 200 sqrt(s^2 / (200 D))`` rows, and the block size nearest to the smallest
  ``W`` over the features (on a log scale) reports;
* ``autocorrelation``: the block size whose measurements agree best with the measurement one
  block later (the highest lag-``block`` autocorrelation, averaged over the features), over
  the last 20,000 rows.

It is a measurement, not a learner: the selectors read the forests' measurement rings after
each ask. Scores are means over the streams; ``--windows`` adds the committed window columns
(``tests/benchmarks/rankings/results/rankings_drift_windows*.json``) on the streams they share.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from models.cart.block_forest import BlockForestRanker
from tests.benchmarks.common import tracking_score, write_results
from tests.benchmarks.rankings import bench_rankings_drift as bench

RESULTS = Path(__file__).resolve().parent / "results" / "block_resolution.md"

SIZES = {"B100": (100, 25), "B200": (200, 25), "B300": (300, 50), "B1000": (1000, 125)}
LOG_SIZES = np.log([b for b, _ in SIZES.values()])


def variogram_window(forest: BlockForestRanker) -> np.ndarray | None:
    """Per feature, the window (rows) that balances the 200-row measurements' noise and drift."""
    H = forest._recent()[:400]  # newest first, one measurement every 25 rows
    if H.shape[0] < 24:
        return None
    g1 = 0.5 * np.mean((H[:-8] - H[8:]) ** 2, axis=0)    # lag 200 rows
    g2 = 0.5 * np.mean((H[:-16] - H[16:]) ** 2, axis=0)  # lag 400 rows
    noise = np.maximum(2 * g1 - g2, 0.1 * g1)
    drift = np.maximum(2 * (g2 - g1), 1e-12)  # D * 200: the drift variance over 200 rows
    return 200 * np.sqrt(noise / drift)


def lag_autocorrelation(forest: BlockForestRanker, span: int = 20_000) -> float | None:
    """Mean over features of the correlation between measurements one block apart."""
    B, S = forest.params["block_size"], forest.params["stride"]
    lag = B // S
    H = forest._recent()[:max(4 * lag, span // S)]
    if H.shape[0] <= lag + 2:
        return None
    a, b = H[:-lag], H[lag:]
    var = H.var(axis=0)
    cov = ((a - a.mean(axis=0)) * (b - b.mean(axis=0))).mean(axis=0)
    return float(np.mean(np.where(var > 0, cov / np.maximum(var, 1e-300), 0.0)))


def series_of(forests: dict, default: BlockForestRanker) -> dict[str, np.ndarray]:
    """Every column's importances at one ask."""
    last = {k: (f._recent()[0] if f.n_blocks else default._recent()[0])
            for k, f in forests.items()}
    out = {f"{k}:last": v for k, v in last.items()}
    out["default"] = default.importances()["mdi"]
    w = variogram_window(default)
    names = list(forests)
    out["variogram"] = (out["default"] if w is None else
                        last[names[int(np.abs(np.log(max(w.min(), 1.0)) - LOG_SIZES).argmin())]])
    rho = {k: lag_autocorrelation(f) for k, f in forests.items()}
    rho = {k: v for k, v in rho.items() if v is not None}
    out["autocorrelation"] = last[max(rho, key=rho.get)] if rho else out["default"]
    return out


def score(setting_name: str, seed: int) -> tuple[str, int, dict[str, float]]:
    setting = {s.name: s for s in bench.all_settings()}[setting_name]
    X, y, W = setting.stream(seed)
    times = bench.ask_times(len(y))
    forests = {k: BlockForestRanker(block_size=b, stride=s, seed=seed)
               for k, (b, s) in SIZES.items()}
    default = forests["B200"]  # the former default's parameters: one forest serves both
    rows, done = [], 0
    for t in times:
        for f in forests.values():
            f.learn_many(X[done:t], y[done:t])
        done = t
        rows.append(series_of(forests, default) if default.n_blocks else None)
    columns = next(r for r in rows if r is not None)
    truth = W[times - 1]
    scores = {}
    for c in columns:
        series = np.array([r[c] if r is not None else np.zeros(X.shape[1]) for r in rows])
        scores[c] = tracking_score(series, truth)
    return setting_name, seed, scores


def window_means(name: str, seeds: set[int]) -> dict[str, float]:
    """The committed window columns' means over the given streams (those they scored)."""
    out: dict[str, list[float]] = {}
    for path in sorted((Path(__file__).parents[1] / "rankings" / "results").glob("rankings_drift_windows*.json")):
        entry = json.loads(path.read_text())["settings"].get(name, {})
        for c, v in entry.get("scores", {}).items():
            if c.startswith("win"):
                out.setdefault(c, []).extend(x for s, x in zip(entry["seeds"], v) if s in seeds)
    return {c: float(np.mean(v)) for c, v in out.items() if v}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--windows", action="store_true",
                        help="add the best committed window column on the shared streams")
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown output path")
    args = parser.parse_args(argv)
    jobs = [(s.name, s.seed_base + i) for s in bench.all_settings() for i in range(args.seeds)]
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        results = pool.starmap(score, jobs)
    by: dict[str, dict[str, list[float]]] = {}
    seeds: dict[str, set[int]] = {}
    for name, seed, scores in results:
        seeds.setdefault(name, set()).add(seed)
        for c, v in scores.items():
            by.setdefault(name, {}).setdefault(c, []).append(v)
    cols = list(next(iter(by.values())))
    lines = ["# Can the block forest choose its block size from the drift it sees?", "",
             f"Streams 1-{args.seeds} of every setting of `bench_rankings_drift.py`"
             + (" (the window column: the committed window runs on the same streams)"
                if args.windows else "") + ". Columns and selectors: the script's docstring.",
             "",
             "| setting | " + " | ".join(cols) + (" | best window (shared streams) |"
                                                  if args.windows else " |"),
             "|" + "---|" * (len(cols) + 1 + args.windows)]
    for name, columns in by.items():
        cells = [f"{np.mean(columns[c]):.3f}" for c in cols]
        if args.windows:
            wm = window_means(name, seeds[name])
            cells.append(f"{max(wm.values()):.3f} ({max(wm, key=wm.get)})" if wm else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    means = {c: np.mean([np.mean(v[c]) for v in by.values()]) for c in cols}
    lines.append("| mean | " + " | ".join(f"{means[c]:.3f}" for c in cols)
                 + (" | |" if args.windows else " |"))
    text = "\n".join(lines)
    print(text)
    write_results(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
