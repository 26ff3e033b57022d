"""iSOUP-SymRF with and without per-tree drift replacement: error, speed and trees replaced.

Historical: written when ``drift_delta`` replaced a tree as soon as its detector cut (no
background tree) and the default was ``None``; ``results/symrf_replacement.md`` records that
setting. Today a detector starts a background tree that replaces its tree only when better,
by default; that is measured by ``tests/benchmarks/learners/bench_isoup_drift.py``.

Question: does watching each tree with ADWIN and replacing it when its error rises
(``drift_delta=0.001``, the adaptive random forest's drift confidence) cost prediction error
or speed on the real regression streams, and what does it change on drifting ones? Compared
on the same rows in the same run: ``drift_delta=None`` (the default: the paper's forest,
whose trees only grow) and ``drift_delta=0.001``.

Streams: Bike Sharing hourly (17,379 rows, 3 targets), SCM20d (8,966 rows, 16 targets), the
synthetic stream of :func:`tests.models.isoup_streams.relevant_stream` (50,000 rows), and one
regression stream per drift kind of ``tests/benchmarks/rankings/bench_rankings_drift_regression.py``
(its first seed: ``K=2, T=1e-3, clipped``, 5,000 rows; ``abrupt, P=2000``, 10,000 rows).

Each model runs test-then-train (``predict_learn_many``) on chunks of 1,000 rows, warm (numba
compiled first). Error: aRMAE, the mean over targets of the model's mean absolute error over
that of predicting the mean of the targets seen before each row (lower is better; 1 is the
running mean). Rows/s: wall clock of the whole stream.

Run::

    python tests/benchmarks/experiments/experiment_symrf_replacement.py   # ~1 minute

Writes ``results/symrf_replacement.md``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models.isoup.isoup_forest import ISOUPSymRF  # noqa: E402
from tests.benchmarks.common import write_results  # noqa: E402
from tests.benchmarks.rankings.bench_rankings_drift import all_settings  # noqa: E402
from tests.benchmarks.rankings.bench_rankings_drift_regression import regression_stream  # noqa: E402
from tests.models import isoup_streams as streams  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "symrf_replacement.md"
CHUNK = 1000
DRIFTING = ("K=2,T=0.001,clipped", "abrupt,P=2000")


def load_streams() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {"bike": streams.bike_sharing()[:2], "scm20d": streams.scm20d()[:2],
           "synthetic": streams.relevant_stream(50_000)[:2]}
    for setting in all_settings():
        if setting.name in DRIFTING:
            X, Y, _ = regression_stream(setting, setting.seed_base)
            out[setting.name] = (X, Y)
    return out


def running_mean_error(Y: np.ndarray) -> np.ndarray:
    """Per target: mean absolute error of the mean of the targets seen before each row."""
    seen = np.cumsum(Y, axis=0) - Y
    count = np.arange(Y.shape[0])[:, None]
    mean = np.where(count > 0, seen / np.maximum(count, 1), 0.0)
    return np.abs(Y - mean).mean(axis=0)


def run(X: np.ndarray, Y: np.ndarray, drift_delta) -> tuple[float, float, int]:
    """aRMAE, rows/s and trees replaced of one forest on one stream."""
    model = ISOUPSymRF(drift_delta=drift_delta, seed=1)
    P = np.zeros_like(Y)
    t0 = time.perf_counter()
    for s in range(0, X.shape[0], CHUNK):
        P[s:s + CHUNK] = model.predict_learn_many(X[s:s + CHUNK], Y[s:s + CHUNK])
    wall = time.perf_counter() - t0
    armae = float((np.abs(Y - P).mean(axis=0) / running_mean_error(Y)).mean())
    return armae, X.shape[0] / wall, int(model.n_drifts.sum())


def main() -> int:
    data = load_streams()
    X, Y = data["bike"]
    for delta in (None, 0.001):  # compile (or load) every kernel before timing
        ISOUPSymRF(drift_delta=delta).predict_learn_many(X[:500], Y[:500])
    lines = ["# iSOUP-SymRF with and without per-tree drift replacement", "",
             "Protocol: the script's docstring "
             "(10 trees, square-root subspaces, seed 1, test-then-train).", "",
             "| stream | rows | aRMAE, paper (default) | aRMAE, replacement | rows/s, paper | "
             "rows/s, replacement | trees replaced |", "|---|---|---|---|---|---|---|"]
    for name, (X, Y) in data.items():
        paper, watched = run(X, Y, None), run(X, Y, 0.001)
        lines.append(f"| {name} | {X.shape[0]:,} | {paper[0]:.4f} | {watched[0]:.4f} | "
                     f"{paper[1]:,.0f} | {watched[1]:,.0f} | {watched[2]} |")
        print(lines[-1], flush=True)
    write_results(RESULTS, "\n".join(lines))
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
