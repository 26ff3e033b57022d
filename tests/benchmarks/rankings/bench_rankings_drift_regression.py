"""Fidelity of the regression feature ranking under drift at many speeds (rotating weights).

Question: do the rankings a regression stream gets by default (the block-forest ranker's
``block_mdi`` and iSOUP-SymRF's symbolic ranking) follow the true importances of its features
as they drift, slowly or fast, at least as well as a sliding-window offline forest, whatever
its window?

Streams: the settings, seeds, stream lengths and asks of
:mod:`tests.benchmarks.rankings.bench_rankings_drift` (``K`` in {2, 5} drifting weights of ``d = 10``,
speeds ``T`` in {1e-4, 1e-3, 3e-3, 1e-2}, clipped and unclipped walks, and the abrupt
setting whose weight vector is permuted every 2,000 rows), with a multi-target regression
task built on the same rows and weights. ``Setting.stream`` gives ``X`` and ``W = |a|`` (the
weights in force at each row; the classification label is dropped); the stream reports
``|a_i|`` only, so ``|a_i|`` stands for ``a_i`` in the targets. Two targets share the weights::

    Y[:, 0] = sum_i a_i x_i   + N(0, 0.05)
    Y[:, 1] = sum_i a_i x_i^2 + N(0, 0.05)

With ``x ~ U(0, 1)`` each target's variance due to feature ``i`` grows with ``a_i^2``, so
``|a_i|`` is the true importance of feature ``i`` for both targets, as for the label. The
noise is drawn from a generator seeded with ``(stream seed, 1)``: independent of the
stream's own draws, equal for equal seeds.

Score of one stream and one column: Cassidy & Deviney's mean Pearson correlation between
the column's importance series and the true ``|a_i|`` series of the drifting features at the
asks (:func:`tests.benchmarks.common.tracking_score`; a flat series scores 0).

Methods (columns):

* ``default:<method>``: what a regression stream with no profile gets. ``PipelineConfig()``
  is read at run time; every name of ``rankers_for("regression")`` is built by the registry
  for the ranker role with the config's params (``registry.get(name).build(params,
  ("ranker",), seed)``, seeded with the stream seed) and fed ``learn_many(X, Y)`` in chunks of
  at most 100 rows between asks; each ``(key, method)`` of its spec's ``rankings`` is a
  column (``default:block_mdi``; iSOUP-SymRF: ``default:symrf``, the unnormalised symbolic
  score; its ``share`` is the same series scaled per ask, which the correlation over time
  does not ignore, so only the declared ranking is scored).
* ``NAME:<method>`` (``--ranker NAME[:JSON-params]``, repeatable): a registered ranker with
  extra params, e.g. ``isoup_symrf:{"drift_delta":0.001}`` (per-tree replacement).
* ``win<W>:mdi`` for ``W`` in {100, 300, 1000}: scikit-learn ``RandomForestRegressor``
  refitted at every ask on the last ``W`` rows (fewer at the start) on both targets at once
  (multi-output trees), ``max_features="sqrt"`` and bootstrap as the classification
  benchmark's window forests; its impurity importance. ``--trees`` per forest, default 10.

Summary per setting: mean ± sd over streams of every column; the best sliding window (the
window column of highest mean); the default's score is its best column;
``default - best window``, with the standard error of its per-stream differences (the
columns score the same streams).

Run (``--jobs`` processes over streams; ``--quick``: 3 seeds, streams cut to a fifth, at
least 1,000 rows, switches every 400)::

    python tests/benchmarks/rankings/bench_rankings_drift_regression.py --jobs 2
    python tests/benchmarks/rankings/bench_rankings_drift_regression.py --seeds 3 --jobs 2
    python tests/benchmarks/rankings/bench_rankings_drift_regression.py --settings "K=2,clipped" --quick

The window forests are the cost of a run: run them once per batch of streams
(``--no-default --first-seed``) and join them to runs of the default alone (``--baseline``,
repeatable)::

    python tests/benchmarks/rankings/bench_rankings_drift_regression.py --no-default --first-seed 4 \
        --seeds 7 --jobs 2 --out tests/benchmarks/rankings/results/rankings_drift_regression_windows_s4-10.md
    python tests/benchmarks/rankings/bench_rankings_drift_regression.py --no-windows --jobs 2 \
        --baseline tests/benchmarks/rankings/results/rankings_drift_regression_windows.json \
        --baseline tests/benchmarks/rankings/results/rankings_drift_regression_windows_s4-10.json

Writes ``results/rankings_drift_regression.md`` and every per-stream score in
``rankings_drift_regression.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from models import registry
from tests.benchmarks.common import write_results
from tests.benchmarks.rankings.bench_rankings_drift import (
    WINDOWS,
    Setting,
    all_settings,
    best,
    chunks,
    merge_baselines,
    named_ranker,
    paired_gap,
    score_columns,
    select,
    with_baseline,
)

TASK = registry.REGRESSION
TARGET_NOISE = 0.05
RESULTS = Path(__file__).resolve().parent / "results" / "rankings_drift_regression.md"


# ------------------------------------------------------------------------------ streams

def targets(X: np.ndarray, W: np.ndarray, seed: int) -> np.ndarray:
    """The two targets of a stream (see the module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Features of the stream.
    W : ndarray of shape (n, d)
        ``|a_i|`` in force at each row.
    seed : int
        Stream seed; the noise generator is seeded with ``(seed, 1)``.

    Returns
    -------
    ndarray of shape (n, 2)
        ``[sum_i a_i x_i, sum_i a_i x_i^2]`` plus Gaussian noise of sd 0.05.
    """
    rng = np.random.default_rng((seed, 1))
    Y = np.column_stack([np.einsum("ij,ij->i", W, X), np.einsum("ij,ij->i", W, X * X)])
    return Y + rng.normal(0.0, TARGET_NOISE, Y.shape)


def regression_stream(setting: Setting, seed: int, n_rows: int | None = None):
    """``X, Y, |W|`` of one stream of ``setting`` (the classification label is dropped)."""
    X, _, W = setting.stream(seed, n_rows)
    return X, targets(X, W, seed), W


# ------------------------------------------------------------------------------ methods

def default_rankers(seed: int) -> list[tuple[object, tuple]]:
    """``[(learner, rankings)]`` a regression stream with no profile gets, built by the
    registry for the ranker role with the config's params."""
    from worker.pipeline.config import PipelineConfig

    cfg = PipelineConfig()
    out = []
    for name in cfg.rankers_for(TASK):
        spec = registry.get(name)
        out.append((spec.build(cfg.params_of(name), (registry.RANKER,), seed), spec.rankings))
    return out


def ranker_series(X, Y, times, members, prefix: str = "default") -> dict[str, np.ndarray]:
    """Importance series of online rankers fed ``learn_many`` in chunks between asks.

    Parameters
    ----------
    X, Y : ndarray
        Rows and targets of the stream.
    times : ndarray of int
        Rows learned at each ask.
    members : list of (learner, rankings)
        Rankers and their declared ``(importances() key, method)`` pairs.
    prefix : str, default "default"
        Column prefix (``"<prefix>:<method>"``).

    Returns
    -------
    dict
        ``{column: array of shape (n_asks, d)}``.
    """
    out: dict[str, list] = {}
    done = 0
    for t in times:
        for a, b in chunks(done, t):
            for learner, _ in members:
                learner.learn_many(X[a:b], Y[a:b])
        done = t
        for learner, rankings in members:
            imps = learner.importances()
            for key, method in rankings:
                values = imps.get(key)
                if values is None or np.size(values) == 0:  # no ranking yet: nothing to track
                    values = np.zeros(X.shape[1])
                out.setdefault(f"{prefix}:{method}", []).append(
                    np.asarray(values, dtype=np.float64))
    return {k: np.array(v) for k, v in out.items()}


def window_importance(Xw, Yw, n_trees: int, rng) -> np.ndarray:
    """Impurity importance of a multi-output regression forest fitted on one window."""
    from sklearn.ensemble import RandomForestRegressor

    rf = RandomForestRegressor(n_estimators=n_trees, max_features="sqrt",
                               random_state=int(rng.integers(2**31)), n_jobs=1)
    rf.fit(Xw, Yw)
    return rf.feature_importances_


def window_series(X, Y, times, window: int, n_trees: int, seed: int) -> dict[str, np.ndarray]:
    """A forest refitted at every ask on the last ``window`` rows: ``win<W>:mdi``."""
    rng = np.random.default_rng(seed)
    rows = [window_importance(X[max(0, t - window):t], Y[max(0, t - window):t], n_trees, rng)
            for t in times]
    return {f"win{window}:mdi": np.array(rows)}


def method_series(spec: str, X, Y, times, seed: int, n_trees: int) -> dict[str, np.ndarray]:
    """Importance series of one method spec, ``default``, ``window:W`` or a ranker spec
    ``NAME[:JSON]``; one per column."""
    if spec == "default":
        return ranker_series(X, Y, times, default_rankers(seed))
    if spec.startswith("window:"):
        return window_series(X, Y, times, int(spec.split(":")[1]), n_trees, seed)
    return named_ranker(spec, seed).series(X, Y, times)


# ------------------------------------------------------------------------------ scoring

def score_stream(setting: Setting, seed: int, specs: list[str], n_rows: int | None = None,
                 n_trees: int = 10) -> tuple[dict[str, float], dict[str, float]]:
    """Scores of every column of ``specs`` on one stream, and the seconds of each spec."""
    return score_columns(regression_stream(setting, seed, n_rows), method_series, specs, seed,
                         n_trees)


def score_method(method_spec: str, setting: Setting | str, seed: int,
                 n_rows: int | None = None, n_trees: int = 10) -> dict[str, float]:
    """Score of every column of one method on one regression stream (tests, quick looks).

    Parameters
    ----------
    method_spec : str
        ``"default"`` or ``"window:W"``.
    setting : Setting or str
        A setting or its name (see :func:`tests.benchmarks.rankings.bench_rankings_drift.all_settings`).
    seed : int
        Stream seed (also seeds the noise of the targets and the learners).
    n_rows : int, optional
        Cut the stream to this many rows (default: the setting's length).
    n_trees : int, default 10
        Trees of each window forest.

    Returns
    -------
    dict
        ``{column: score}``.
    """
    if isinstance(setting, str):
        setting = next(s for s in all_settings() if s.name == setting)
    return score_stream(setting, seed, [method_spec], n_rows, n_trees)[0]


def _job(args):
    setting, seed, specs, n_trees = args
    t0 = time.perf_counter()
    scores, seconds = score_stream(setting, seed, specs, None, n_trees)
    return setting.name, seed, scores, seconds, time.perf_counter() - t0


def warm(specs: list[str]) -> None:
    """Compile the numba kernels of the default rankers on a short stream (numba caches them
    on disk, so the pool's processes start warm and no compilation is timed)."""
    if "default" in specs:
        score_stream(all_settings()[0], 0, ["default"], n_rows=400)


# ------------------------------------------------------------------------------- report

def summary_row(name: str, columns: dict[str, list[float]]) -> tuple[list[str], list[str]]:
    """Header and cells of one setting's row."""
    order = sorted(columns, key=lambda c: (not c.startswith("default:"), c.startswith("win"),
                                           int(c[3:].split(":")[0]) if c.startswith("win")
                                           else 0, c))
    head, cells = ["setting", "streams"], [name, str(len(next(iter(columns.values()))))]
    for c in order:
        v = np.asarray(columns[c])
        head.append(c)
        cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.3f}")
    dcol, dval = best(columns, "default:")
    wcol, wval = best(columns, "win")
    head += ["best window", "default - best window ± se"]
    cells.append(f"{wcol} {wval:.3f}" if wcol else "-")
    cells.append(paired_gap(columns[dcol], columns[wcol]) if dcol and wcol else "-")
    return head, cells


def notes(meta: dict) -> list[str]:
    """What a reader of the table must know about the run that made it."""
    out = []
    if meta.get("quick"):
        out.append("**Quick run** (`--quick`): 3 streams per setting, each cut to a fifth of "
                   "its rows (at least 1,000; switches every 400 rows): a smoke run.")
    elif meta["seeds"] != 10:
        out.append(f"**{meta['seeds']} streams per setting**, not the protocol's 10 "
                   "(full-length streams): the sd columns are over "
                   f"{meta['seeds']} streams and differences under about one sd are noise.")
    out.append("Targets: `Y0 = sum_i |a_i| x_i + N(0, 0.05)`, `Y1 = sum_i |a_i| x_i^2 + "
               "N(0, 0.05)` on the rows and weights of the classification benchmark's streams "
               "(two targets sharing the weights).")
    out.append("Window columns: scikit-learn `RandomForestRegressor` (multi-output, "
               f"`max_features=\"sqrt\"`, {meta['trees']} trees) refitted at every ask on the "
               "last W rows; impurity importance.")
    if meta.get("baseline"):
        out.append("Columns this run did not compute (the window forests) come from "
                   + ", ".join(f"`{b}`" for b in meta["baseline"]) + ", joined on the streams "
                   "both runs scored; an earlier default shows as `former-default:*`.")
    out.append("Per-stream scores, seeds and seconds per method: the JSON beside this file.")
    return out


def write_report(results: dict, meta: dict, out: Path) -> None:
    """The markdown table and the JSON of all per-stream scores beside it."""
    lines = ["# Regression feature-ranking fidelity under drift at many speeds", "",
             f"Wall time: {meta['wall_s'] / 60:.1f} min with {meta['jobs']} process(es)  ",
             f"Default rankers (regression): {', '.join(meta['default_rankers']) or 'none'}; "
             f"window forests of {meta['trees']} trees. Protocol: "
             "`tests/benchmarks/rankings/bench_rankings_drift_regression.py`.", "",
             "Score: Cassidy & Deviney's mean correlation between a ranking's importance "
             "series and the true |a_i| of the drifting features (mean ± sd over streams); "
             "the default's score is its best column.", ""]
    header = None
    for name, entry in results.items():
        head, cells = summary_row(name, entry["scores"])
        if head != header:
            header = head
            lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [f"* {n}" for n in notes(meta)]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out, "\n".join(lines))
    write_results(out.with_suffix(".json"), {**meta, "settings": results})


# --------------------------------------------------------------------------------- main

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="streams per setting")
    parser.add_argument("--first-seed", type=int, default=1,
                        help="index of the first stream per setting (4 with --seeds 7 scores "
                             "streams 4 to 10 of every setting)")
    parser.add_argument("--jobs", type=int, default=1, help="processes over streams")
    parser.add_argument("--settings", action="append",
                        help='only settings with all these tokens, e.g. "K=2,T=0.01,clipped" '
                             "(repeatable: any of them)")
    parser.add_argument("--trees", type=int, default=10, help="trees per window forest")
    parser.add_argument("--no-default", action="store_true", help="skip the default rankers")
    parser.add_argument("--no-windows", action="store_true", help="skip the window forests")
    parser.add_argument("--ranker", action="append", default=[], metavar="NAME[:JSON]",
                        help="also score this registered ranker with extra params, e.g. "
                             "'isoup_symrf:{\"drift_delta\":null}' (repeatable)")
    parser.add_argument("--baseline", type=Path, action="append", default=[],
                        help="an earlier run's JSON whose columns (window forests) are joined "
                             "on the streams both scored (repeatable; runs over disjoint seeds)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 3 seeds, a fifth of the rows")
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown output path")
    return parser.parse_args(argv)


def method_specs(args) -> list[str]:
    specs = [] if args.no_default else ["default"]
    specs += list(args.ranker)
    return specs + ([] if args.no_windows else [f"window:{w}" for w in WINDOWS])


def collect(results: dict, name: str, seed: int, scores: dict, seconds: dict) -> None:
    """File one stream's scores and seconds under its setting."""
    entry = results[name]
    entry["seeds"].append(seed)
    for c, v in scores.items():
        entry["scores"].setdefault(c, []).append(v)
    for spec, sec in seconds.items():
        entry["seconds"].setdefault(spec, []).append(round(sec, 2))


def order_by_seed(results: dict) -> None:
    """Streams came back in any order: order every setting's lists by seed."""
    for entry in results.values():
        order = np.argsort(entry["seeds"])
        entry["seeds"] = [entry["seeds"][i] for i in order]
        entry["scores"] = {c: [v[i] for i in order] for c, v in entry["scores"].items()}
        entry["seconds"] = {c: [v[i] for i in order] for c, v in entry["seconds"].items()}


def main(argv=None) -> int:
    from worker.pipeline.config import PipelineConfig

    args = parse_args(argv)
    settings = select(all_settings(), args.settings)
    seeds = 3 if args.quick else args.seeds
    if args.quick:
        settings = [s.quick() for s in settings]
    specs = method_specs(args)
    # read once, before any stream: the pool's processes build the same default (a profile
    # edit in the middle of a run would show as a mix; compare with the JSON's default_rankers)
    default_rankers = PipelineConfig().rankers_for(TASK)
    print(f"default rankers ({TASK}): {default_rankers}; warming numba ...", flush=True)
    warm(specs)
    jobs = [(s, s.seed_base + args.first_seed - 1 + i, specs, args.trees) for s in settings
            for i in range(seeds)]
    results = {s.name: {"n_rows": s.n_rows, "S": s.sigma, "seeds": [], "scores": {},
                        "seconds": {}} for s in settings}
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for done, (name, seed, scores, seconds, wall) in enumerate(
                pool.imap_unordered(_job, jobs), 1):
            collect(results, name, seed, scores, seconds)
            shown = " ".join(f"{c}={v:+.2f}" for c, v in sorted(scores.items()))
            print(f"[{done}/{len(jobs)} {time.perf_counter() - t0:6.0f}s] {name} seed={seed} "
                  f"({wall:.0f}s): {shown}", flush=True)
    order_by_seed(results)
    if args.baseline:
        results = with_baseline(results, merge_baselines(
            [json.loads(path.read_text())["settings"] for path in args.baseline]))
    meta = {"wall_s": time.perf_counter() - t0, "jobs": args.jobs, "trees": args.trees,
            "seeds": seeds, "quick": args.quick, "methods": specs,
            "default_rankers": default_rankers,
            "baseline": [str(path) for path in args.baseline] or None}
    write_report(results, meta, args.out)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
