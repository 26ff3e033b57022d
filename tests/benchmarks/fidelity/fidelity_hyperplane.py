"""Fidelity of the online importances on drifting hyperplanes (Cassidy & Deviney, sec. III).

Protocol of the paper: ``d = 10`` features, ``K = 2`` or ``K = 5`` drifting weights,
``T = 1``, ``S = 0.10``, 5% label noise, 10,000 instances per stream; importances are asked
for every 10 instances after the first 100 (990 reports). The score of one stream and one
importance measure is the mean, over the ``K`` drifting features, of the Pearson correlation
between the feature's importance series and its true ``|a_i|`` series (the weight in force at
the report). Compared methods:

* ``ORF-MDA``, ``ORF-MDG``: :class:`models.OnlineRandomForest` learning the stream once, with
  ``track_importance=True`` (configuration in :data:`ORF_PARAMS`).
* ``Win-MDA``, ``Win-MDG``: an offline scikit-learn ``RandomForestClassifier`` refitted on a
  sliding window of the last 100 instances, sliding by 10 (990 forests per stream), the
  paper's baseline (R randomForest there). MDG is sklearn's impurity importance; MDA is the
  out-of-bag permutation importance (R's ``importance(type=1, scale=FALSE)``): for each tree,
  accuracy on its OOB rows minus accuracy with feature ``j`` permuted among them, averaged
  over trees.

Run (the window forests dominate: about 2-3 CPU-minutes per stream with 50 trees)::

    python tests/benchmarks/fidelity/fidelity_hyperplane.py --streams 10 --trees-window 50
    python tests/benchmarks/fidelity/fidelity_hyperplane.py --streams 10 --k 5   # one setting only
    python tests/benchmarks/fidelity/fidelity_hyperplane.py --streams 4 --no-window --seed-offset 500

Stream seeds are 1..N for K = 2 and 1001..1000+N for K = 5; the ORF configuration was chosen
on other seeds (see ``--seed-offset``) so the table is not tuned on its own streams.

The default run (``--streams 10``, the paper's protocol) writes ``results/hyperplane.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from models.generators.hyperplane import RotatingHyperplane
from models.orf.online_forest import OnlineRandomForest
from tests.benchmarks.common import tracking_score, window_forest_importances, write_results

N_ROWS = 10_000
FIRST = 100
EVERY = 10
WINDOW = 100

#: ORF used for the fidelity table, chosen on the tuning streams (``--seed-offset 500``):
#: 100 trees, no tree discarding (discarding at gamma = 1/5000 or 1/1000 lowered the MDG
#: correlations there by 0.05-0.15) and importance evidence fading by 0.5% per instance
#: (about the last 200 instances, the scale on which weights that move by T = 1 per
#: instance change; 0.1-0.2% lagged, 1% was noisier).
ORF_PARAMS = {"n_trees": 100, "gamma": 0.0, "track_importance": True, "importance_decay": 0.005}


def report_times(n_rows: int = N_ROWS, first: int = FIRST, every: int = EVERY) -> np.ndarray:
    """Rows learned before each importance report: 110, 120, ..., n_rows (990 reports)."""
    return np.arange(first + every, n_rows + 1, every)


def make_stream(n_drift: int, seed: int, n_rows: int = N_ROWS, mag_change: float = 1.0):
    """One stream of the paper's protocol: ``X, y, |W|``."""
    gen = RotatingHyperplane(n_features=10, n_drift_features=n_drift, mag_change=mag_change,
                             sigma=0.10, noise=0.05, seed=seed)
    return gen.take(n_rows)


def orf_series(X, y, times, params=None, seed: int = 1) -> dict[str, np.ndarray]:
    """MDA and MDG of one ORF after each report time: ``{name: (n_reports, d)}``."""
    model = OnlineRandomForest(**{**ORF_PARAMS, **(params or {}), "seed": seed})
    out = {"ORF-MDA": [], "ORF-MDG": []}
    done = 0
    for t in times:
        model.learn_many(X[done:t], y[done:t])
        done = t
        imp = model.importances()
        out["ORF-MDA"].append(imp["mda"])
        out["ORF-MDG"].append(imp["mdg"])
    return {k: np.array(v) for k, v in out.items()}


def window_series(X, y, times, n_trees: int = 50, seed: int = 1) -> dict[str, np.ndarray]:
    """Sliding-window offline RF (window 100, slide 10): MDA (OOB permutation) and MDG."""
    rng = np.random.default_rng(seed)
    mda, mdg = [], []
    for t in times:
        mdi, perm = window_forest_importances(X[t - WINDOW:t], y[t - WINDOW:t], n_trees, rng)
        mdg.append(mdi)
        mda.append(perm)
    return {"Win-MDA": np.array(mda), "Win-MDG": np.array(mdg)}


def run(n_streams: int, trees_window: int, seed_offset: int = 0, orf_params=None,
        with_window: bool = True, verbose: bool = True, settings=(2, 5)) -> dict:
    """Scores ``{K: {method: [score per stream]}}``."""
    times = report_times()
    results: dict = {}
    for n_drift, base in ((2, 1), (5, 1001)):
        if n_drift not in settings:
            continue
        scores: dict[str, list[float]] = {}
        for s in range(n_streams):
            seed = base + seed_offset + s
            X, y, W = make_stream(n_drift, seed)
            t0 = time.perf_counter()
            series = orf_series(X, y, times, orf_params, seed=seed)
            t_orf = time.perf_counter() - t0
            t_win = 0.0
            if with_window:
                t0 = time.perf_counter()
                series.update(window_series(X, y, times, trees_window, seed=seed))
                t_win = time.perf_counter() - t0
            for name, values in series.items():
                score = tracking_score(values, W[times - 1], range(n_drift))
                scores.setdefault(name, []).append(score)
            if verbose:
                row = " ".join(f"{k}={v[-1]:+.3f}" for k, v in scores.items())
                print(f"K={n_drift} seed={seed}: {row}  (ORF {t_orf:.1f}s, window {t_win:.1f}s)",
                      flush=True)
        results[n_drift] = scores
    return results


def table(results: dict) -> list[str]:
    """The markdown table: per setting, the mean ± sd of each method's score over streams."""
    methods = list(next(iter(results.values())).keys())
    lines = ["| setting | streams | " + " | ".join(methods) + " |",
             "|---|---|" + "---|" * len(methods)]
    for n_drift, scores in results.items():
        n = len(next(iter(scores.values())))
        cells = [f"{np.mean(scores[m]):.3f} ± {np.std(scores[m], ddof=1) if n > 1 else 0:.3f}"
                 for m in methods]
        lines.append(f"| K={n_drift}, T=1, S=0.10 | {n} | " + " | ".join(cells) + " |")
    return lines


def wins(results: dict) -> list[str]:
    """Per setting, on how many streams each ORF measure beats the window's."""
    out = []
    for n_drift, scores in results.items():
        for ours, theirs in (("ORF-MDG", "Win-MDG"), ("ORF-MDA", "Win-MDA")):
            if ours in scores and theirs in scores:
                won = int(np.sum(np.asarray(scores[ours]) > np.asarray(scores[theirs])))
                out.append(f"K={n_drift}: {ours} above {theirs} on {won} of "
                           f"{len(scores[ours])} streams.")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=10, help="streams per setting")
    parser.add_argument("--trees-window", type=int, default=50,
                        help="trees of each sliding-window sklearn forest")
    parser.add_argument("--seed-offset", type=int, default=0,
                        help="shift the stream seeds (tuning runs used --seed-offset 500)")
    parser.add_argument("--no-window", action="store_true", help="ORF only")
    parser.add_argument("--k", default="2,5", help="settings to run (K values), e.g. '5'")
    parser.add_argument("--orf", default="", help="ORF overrides, e.g. 'importance_decay=0.01'")
    args = parser.parse_args(argv)
    overrides = eval(f"dict({args.orf})")
    settings = tuple(int(k) for k in args.k.split(","))
    results = run(args.streams, args.trees_window, args.seed_offset, overrides,
                  with_window=not args.no_window, settings=settings)
    text = "\n".join([
        "# Online importances on drifting hyperplanes (Cassidy & Deviney, sec. III)", "",
        "Mean over the drifting features of the correlation between each importance series "
        "and the true |weight| series (d=10, 10,000 instances, importances every 10 instances "
        "after the first 100), mean ± sd over the streams (protocol in the script's "
        f"docstring). ORF: {ORF_PARAMS | overrides}. Window: a scikit-learn random forest of "
        f"{args.trees_window} trees on the last {WINDOW} instances, sliding by {EVERY} "
        "(impurity importances; OOB permutation accuracy for MDA).", "",
        *table(results), "", *wins(results)]) + "\n"
    print(text)
    if not overrides and not args.no_window and not args.seed_offset and len(settings) == 2:
        write_results(Path(__file__).parent / "results" / "hyperplane.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
