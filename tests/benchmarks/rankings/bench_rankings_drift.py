"""Fidelity of feature rankings under drift at many speeds (rotating hyperplanes).

Question: does the ranking a stream gets by default follow the true importances of its
features as they drift, slowly or fast, at least as well as a sliding-window offline forest
(whatever its window) and as MOA's adaptive random forest?

Streams (:class:`models.generators.hyperplane.RotatingHyperplane`, ``d = 10`` features, 5% label noise):

* *gradual* settings: ``K`` in {2, 5} drifting weights, speeds ``T`` in {1e-4, 1e-3, 3e-3,
  1e-2} per instance, and two walks: ``unclipped`` (MOA's; weights may wander off and stay
  far from the fixed ones) and ``clipped`` (reflected in ``[0, 1]``, so they keep sweeping
  the range of the fixed weights). The reversal probability is ``S = min(0.1, 10 T)``: a
  persistent run lasts ``1 / S`` instances and moves a weight by ``T / S = 0.1`` at every
  speed below 0.01 (0.1 as well at ``T = 0.01``, where ``S`` is MOA's 0.1), so the speeds
  differ in how fast the truth moves, not in how far a run goes. Stream length
  ``n = min(30000, max(5000, round(3 / T)))``: at least 3 units of drift, whatever the speed
  (30,000 rows at 1e-4, 5,000 at the others).
* one *abrupt* setting: ``T = 0`` and a fresh permutation of the weight vector every 2,000
  instances (``switch_every``), ``n = 10000`` (four switches). ``K`` plays no part with
  ``T = 0`` (it only changes which uniforms are drawn), so there is one abrupt setting.

Each setting has ``--seeds`` streams (10 by default), seeded ``1000 * (index of the
setting) + 1 + s``: disjoint per setting and independent of ``--settings`` filters.

Asks. Importances are asked every ``max(10, n // 1000)`` rows after the first 100 (about 1000
asks, 490 on the 5,000-row streams); between two asks every learner is fed the new rows
with ``learn_many`` in chunks of at most 100 rows, then ``importances()`` is read.

Score of one stream and one column (Cassidy & Deviney 2014, sec. III): the mean, over the
features whose true ``|a_i|`` varies over the asks, of the Pearson correlation between the
column's importance series and the true ``|a_i|`` series at the asks; a flat importance
series scores 0 (:func:`tests.benchmarks.common.tracking_score`).

Methods (columns):

* ``default:<method>``: what a stream with no profile gets. ``PipelineConfig()`` is read at
  run time and a :class:`worker.pipeline.engine.Pipeline` builds the classification stages
  exactly as the worker does (its own seeds, from the stream id); every ranker stage is fed
  and each of its declared rankings is a column.
* ``profile{JSON}:<method>`` (``--profile JSON``, repeatable): the default pipeline's rankers
  with a profile's learner params, e.g. ``{"block_forest":{"pool":0}}``, built with the same
  seeds as the default, so the two columns differ by the params alone.
* ``NAME:<method>`` (``--ranker NAME[:JSON-params]``, repeatable): a registered ranker built
  by the registry for the ranker role with extra params, to compare candidate designs on the
  same streams (with params the prefix carries them: ``NAME{"n_trees":50}:<method>``).
* ``win<W>:mdi`` / ``win<W>:mda`` for ``W`` in {100, 300, 1000}: scikit-learn
  ``RandomForestClassifier`` refitted at every ask on the last ``W`` rows (fewer at the
  start); impurity importance and per-tree OOB permutation importance
  (:func:`tests.benchmarks.common.window_forest_importances`). ``--trees`` per forest,
  default 10: the window forests are the cost of the run (10 trees: about 15, 22 and 30 ms
  per ask for W = 100, 300, 1000 with the permutations; 25 trees: 31, 44, 69 ms), so the
  full run is ~8,000 CPU-seconds of window forests at 10 trees and ~2.5 times that at 25.
* ``moa:mdi`` / ``moa:cover``: MOA's ``FeatureImportanceHoeffdingTreeEnsemble`` around
  ``meta.AdaptiveRandomForest -s 10`` (MOA defaults otherwise), through capymoa's
  ``MOAFeatureImportanceClassifier``; one forest per measure (the measure is an option of
  the ensemble), importances normalized to sum 1 at each ask (capymoa's default; the raw
  values grow with the trees). Seeded with the stream seed.

Summary per setting: mean ± sd over streams of every column; the best sliding window (the
window column with the highest mean); the default's score is its best column, MOA's its
best; ``default - best window`` and ``default - MOA``, each with the standard error of its
per-stream differences (every column scores the same streams, so their difficulty cancels),
and whether the default's mean is at least both.

Run (``--jobs`` processes over streams; ``--quick``: 3 seeds, streams cut to a fifth, at
least 1,000 rows, switches every 400)::

    python tests/benchmarks/rankings/bench_rankings_drift.py --jobs 2
    python tests/benchmarks/rankings/bench_rankings_drift.py --quick --jobs 2
    python tests/benchmarks/rankings/bench_rankings_drift.py --settings "K=2,T=0.01,clipped" \\
        --ranker 'online_random_forest:{"importance_decay":0.01}' --no-windows --no-moa

The window forests and MOA are the cost of a run; they can be run once, in batches of streams
(``--first-seed``), and joined to a run of the default alone (``--baseline``, repeatable)::

    python tests/benchmarks/rankings/bench_rankings_drift.py --no-default --first-seed 3 --seeds 2 \\
        --jobs 2 --out tests/benchmarks/rankings/results/rankings_drift_windows_s3-4.md
    python tests/benchmarks/rankings/bench_rankings_drift.py --no-windows --no-moa \\
        --baseline tests/benchmarks/rankings/results/rankings_drift_windows.json \\
        --baseline tests/benchmarks/rankings/results/rankings_drift_windows_s3-4.json

Writes ``results/rankings_drift.md`` and every per-stream score in ``rankings_drift.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from models import registry
from models.generators.hyperplane import RotatingHyperplane
from tests.benchmarks.common import (
    tracking_score,
    window_forest_importances,
    write_results,
)

D = 10
NOISE = 0.05
FIRST = 100
CHUNK = 100
SPEEDS = (1e-4, 1e-3, 3e-3, 1e-2)
WINDOWS = (100, 300, 1000)
SWITCH_EVERY = 2000
ABRUPT_ROWS = 10_000
RESULTS = Path(__file__).resolve().parent / "results" / "rankings_drift.md"


# ----------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class Setting:
    """One kind of stream: generator arguments, length and the base of its seeds."""

    name: str
    k: int
    speed: float
    walk: str  # "clipped", "unclipped" or "abrupt"
    n_rows: int
    switch_every: int
    seed_base: int
    n_features: int = D

    @property
    def sigma(self) -> float:
        """``S = min(0.1, 10 T)``: a persistent run moves a weight by about 0.1."""
        return min(0.1, 10 * self.speed)

    def tokens(self) -> set[str]:
        return set(self.name.split(","))

    def stream(self, seed: int, n_rows: int | None = None):
        """``X, y, |W|`` of one stream of this setting."""
        gen = RotatingHyperplane(n_features=self.n_features, n_drift_features=self.k, mag_change=self.speed,
                                 sigma=self.sigma, noise=NOISE, seed=seed,
                                 clip=self.walk == "clipped", switch_every=self.switch_every)
        return gen.take(self.n_rows if n_rows is None else n_rows)

    def quick(self) -> Setting:
        """The ``--quick`` version: a fifth of the rows (at least 1,000), switches likewise."""
        return Setting(self.name, self.k, self.speed, self.walk, max(1000, self.n_rows // 5),
                       self.switch_every // 5, self.seed_base, self.n_features)


def all_settings(n_features: int = D) -> list[Setting]:
    """Every setting, in table order (the order fixes the seeds); streams of ``n_features``
    features other than :data:`D` name it (``d=90``), so their scores never join another
    width's."""
    out = []
    for k in (2, 5):
        for walk in ("unclipped", "clipped"):
            for speed in SPEEDS:
                n = min(30_000, max(5_000, round(3 / speed)))
                out.append(Setting(f"K={k},T={speed:g},{walk}", k, speed, walk, n, 0, 0))
    out.append(Setting(f"abrupt,P={SWITCH_EVERY}", 2, 0.0, "abrupt", ABRUPT_ROWS,
                       SWITCH_EVERY, 0))
    width = "" if n_features == D else f",d={n_features}"
    return [Setting(s.name + width, s.k, s.speed, s.walk, s.n_rows, s.switch_every,
                    1000 * i + 1, n_features) for i, s in enumerate(out)]


def select(settings: list[Setting], filters: list[str] | None) -> list[Setting]:
    """Settings matching any filter; a filter matches when each of its comma-separated
    tokens is one of the setting's (``"K=2,clipped"``: every clipped K=2 setting)."""
    if not filters:
        return settings
    wanted = [set(f.split(",")) for f in filters]
    return [s for s in settings if any(w <= s.tokens() for w in wanted)]


def ask_times(n_rows: int) -> np.ndarray:
    """Rows learned at each ask: every ``max(10, n // 1000)`` rows after the first 100."""
    every = max(10, n_rows // 1000)
    return np.arange(FIRST + every, n_rows + 1, every)


def chunks(start: int, stop: int):
    """``(a, b)`` slices of at most :data:`CHUNK` rows covering ``start:stop``."""
    for a in range(start, stop, CHUNK):
        yield a, min(a + CHUNK, stop)


# ------------------------------------------------------------------------------ methods

class _Rankers:
    """Online rankers fed by ``learn_many``: ``[(column prefix, learner, rankings)]``."""

    def __init__(self, members):
        self.members = members

    def series(self, X, y, times) -> dict[str, np.ndarray]:
        out: dict[str, list] = {}
        done = 0
        labels = y.tolist()
        for t in times:
            for a, b in chunks(done, t):
                for _, learner, _ in self.members:
                    learner.learn_many(X[a:b], labels[a:b])
            done = t
            for prefix, learner, rankings in self.members:
                imps = learner.importances()
                for key, method in rankings:
                    values = imps.get(key)
                    if values is None:  # no ranking yet: nothing to track
                        values = np.zeros(X.shape[1])
                    out.setdefault(f"{prefix}:{method}", []).append(
                        np.asarray(values, dtype=np.float64))
        return {k: np.array(v) for k, v in out.items()}


def default_rankers(seed: int, params: dict | None = None, prefix: str = "default",
                    n_features: int = D) -> _Rankers:
    """The rankers of a stream with no profile (or a profile of learner ``params``), built by
    the worker's own pipeline code with the same seeds."""
    from worker.pipeline.config import PipelineConfig
    from worker.pipeline.engine import Pipeline

    config = PipelineConfig(params=params) if params else PipelineConfig()
    pipe = Pipeline(f"rankings-drift-{seed}", config, n_features=n_features)
    pipe.check_label(0)  # fixes the classification task and builds its stages
    return _Rankers([(prefix, s.learner, s.spec.rankings) for s in pipe.rankers])


def parse_ranker(spec: str) -> tuple[str, dict, str]:
    """``NAME[:JSON-params]`` as ``(name, params, column prefix)``."""
    name, _, raw = spec.partition(":")
    params = json.loads(raw) if raw else {}
    prefix = name if not params else name + json.dumps(params, separators=(",", ":"))
    return name, params, prefix


def named_ranker(spec: str, seed: int) -> _Rankers:
    """A registered ranker with extra params, built for the ranker role."""
    name, params, prefix = parse_ranker(spec)
    reg = registry.get(name)
    return _Rankers([(prefix, reg.build(params, (registry.RANKER,), seed=seed), reg.rankings)])


def window_series(X, y, times, window: int, n_trees: int, seed: int,
                  mda: bool = True) -> dict[str, np.ndarray]:
    """A forest refitted at every ask on the last ``window`` rows: MDI and (``mda``) OOB
    MDA."""
    rng = np.random.default_rng(seed)
    mdi, perm = [], []
    for t in times:
        a, b = window_forest_importances(X[max(0, t - window):t], y[max(0, t - window):t],
                                         n_trees, rng, mda)
        mdi.append(a)
        perm.append(b)
    out = {f"win{window}:mdi": np.array(mdi)}
    if mda:
        out[f"win{window}:mda"] = np.array(perm)
    return out


def moa_series(X, y, times, seed: int) -> dict[str, np.ndarray]:
    """MOA's MDI and COVER importances of an ARF-10 (see the module docstring)."""
    from capymoa.feature import MOAFeatureImportanceClassifier
    from capymoa.stream import NumpyStream
    from moa.learners.featureanalysis import FeatureImportanceHoeffdingTreeEnsemble

    stream = NumpyStream(X, y.astype(int), target_type="categorical")
    instances = []
    while stream.has_more_instances():
        instances.append(stream.next_instance())
    out = {}
    for measure in ("MDI", "COVER"):
        ensemble = FeatureImportanceHoeffdingTreeEnsemble()
        ensemble.getOptions().setViaCLIString(
            f"-l (meta.AdaptiveRandomForest -s 10) -t (FeatureImportanceHoeffdingTree -o {measure})")
        clf = MOAFeatureImportanceClassifier(schema=stream.get_schema(), base_learner=ensemble,
                                             random_seed=seed)
        rows, done = [], 0
        for t in times:
            for inst in instances[done:t]:
                clf.train(inst)
            done = t
            rows.append(np.asarray(clf.get_feature_importances(normalize=True), dtype=float))
        out[f"moa:{measure.lower()}"] = np.nan_to_num(np.array(rows))
    return out


def method_series(spec: str, X, y, times, seed: int, n_trees: int) -> dict[str, np.ndarray]:
    """Importance series of one method spec: ``default``, ``profile:JSON``, ``window:W``,
    ``moa`` or a ranker spec ``NAME[:JSON]``; one entry per column."""
    if spec == "default":
        return default_rankers(seed, n_features=X.shape[1]).series(X, y, times)
    if spec.startswith("profile:"):
        _, params, prefix = parse_ranker(spec)  # prefix: "profile" and the params
        return default_rankers(seed, params, prefix, X.shape[1]).series(X, y, times)
    if spec.startswith("window:"):
        return window_series(X, y, times, int(spec.split(":")[1]), n_trees, seed)
    if spec.startswith("window-mdi:"):
        return window_series(X, y, times, int(spec.split(":")[1]), n_trees, seed, mda=False)
    if spec == "moa":
        return moa_series(X, y, times, seed)
    return named_ranker(spec, seed).series(X, y, times)


# ------------------------------------------------------------------------------ scoring

def score_columns(stream, series_of, specs: list[str], seed: int,
                  n_trees: int) -> tuple[dict[str, float], dict[str, float]]:
    """Scores of every column of ``specs`` on one stream ``(X, targets, W)``, and the seconds
    of each spec; ``series_of(spec, X, targets, times, seed, n_trees)`` gives a spec's
    importance series by column (classification here, regression in the sibling benchmark)."""
    X, Y, W = stream
    times = ask_times(len(Y))
    truth = W[times - 1]  # the weights in force for the last row learned before each ask
    scores, seconds = {}, {}
    for spec in specs:
        t0 = time.perf_counter()
        for column, series in series_of(spec, X, Y, times, seed, n_trees).items():
            scores[column] = tracking_score(series, truth)
        seconds[spec] = time.perf_counter() - t0
    return scores, seconds


def score_stream(setting: Setting, seed: int, specs: list[str], n_rows: int | None = None,
                 n_trees: int = 10) -> tuple[dict[str, float], dict[str, float]]:
    """Scores of every column of ``specs`` on one stream, and the seconds of each spec."""
    return score_columns(setting.stream(seed, n_rows), method_series, specs, seed, n_trees)


def score_method(method_spec: str, setting: Setting | str, seed: int,
                 n_rows: int | None = None, n_trees: int = 10) -> dict[str, float]:
    """Score of every column of one method on one stream (for tests and quick looks).

    Parameters
    ----------
    method_spec : str
        ``"default"``, ``"profile:JSON"``, ``"window:W"``, ``"moa"`` or
        ``"NAME[:JSON-params]"``.
    setting : Setting or str
        A setting or its name (see :func:`all_settings`).
    seed : int
        Stream seed (also seeds the learners).
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
    """Compile the numba kernels of the online rankers on a short stream (numba caches them
    on disk, so every later process starts warm)."""
    online = [s for s in specs if s == "default" or not (s.startswith("window") or s == "moa")]
    score_stream(all_settings()[0], 0, online, n_rows=400)


# ------------------------------------------------------------------------------- report

def best(columns: dict[str, list[float]], prefix: str) -> tuple[str | None, float]:
    """The column starting with ``prefix`` of highest mean score, and that mean."""
    means = {c: float(np.mean(v)) for c, v in columns.items() if c.startswith(prefix)}
    if not means:
        return None, float("nan")
    c = max(means, key=means.get)
    return c, means[c]


def paired_gap(ours: list[float], theirs: list[float]) -> str:
    """Mean difference of two columns scored on the same streams, with the standard error
    of the per-stream differences: the streams are shared, so their difficulty cancels."""
    d = np.asarray(ours) - np.asarray(theirs)
    se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else float("nan")
    return f"{d.mean():+.3f} ± {se:.3f}"


def summary_row(name: str, columns: dict[str, list[float]]) -> tuple[list[str], list[str]]:
    """Header and cells of one setting's row."""
    order = sorted(columns, key=lambda c: (not c.startswith("default:"), c.startswith("moa:"),
                                           c.startswith("win"), c))
    head, cells = ["setting", "streams"], [name, str(len(next(iter(columns.values()))))]
    for c in order:
        v = np.asarray(columns[c])
        head.append(c)
        cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.3f}")
    dcol, dval = best(columns, "default:")
    wcol, wval = best(columns, "win")
    mcol, mval = best(columns, "moa:")
    head += ["best window", "default - best window ± se", "default - MOA ± se",
             "default ≥ both"]
    cells.append(f"{wcol} {wval:.3f}" if wcol else "-")
    cells.append(paired_gap(columns[dcol], columns[wcol]) if dcol and wcol else "-")
    cells.append(paired_gap(columns[dcol], columns[mcol]) if dcol and mcol else "-")
    meets = dcol and wcol and mcol and dval >= wval and dval >= mval
    cells.append(("yes" if meets else "no") if dcol and wcol and mcol else "-")
    return head, cells


def notes(meta: dict, results: dict) -> list[str]:
    """What a reader of the table must know about the run that made it."""
    out = []
    fewest = min((len(e["seeds"]) for e in results.values()), default=0)
    if not meta.get("quick") and fewest < 10:
        out.append(f"**{fewest} streams per setting**, not the protocol's 10 (full-length "
                   "streams; the window forests and MOA take 15 to 28 min per 2 streams with --jobs 2 "
                   "on 2 shared vCPUs): differences below ~0.2 are within the stream-to-stream "
                   "spread.")
    if meta.get("quick"):
        out.append("**Quick run** (`--quick`): 3 streams per setting, each cut to a fifth of "
                   "its rows (at least 1,000; switches every 400 rows): a smoke run, not the "
                   "protocol's 10 full-length streams; at T = 1e-4 a drifting weight moves "
                   "0.6 units in 6,000 rows instead of 3.")
    out.append("MOA columns: `FeatureImportanceHoeffdingTreeEnsemble` around "
               "`meta.AdaptiveRandomForest -s 10` (capymoa's `MOAFeatureImportanceClassifier`), "
               "importances normalized at each ask; one forest per measure (MDI, COVER).")
    out.append("Per-stream scores, seeds and seconds per method: the JSON beside this file.")
    return out


def all_seeds_table(results: dict) -> list[str]:
    """With a baseline: this run's own columns over all the seeds it scored."""
    rows = [(name, e["all_seeds"], e["all_scores"]) for name, e in results.items()
            if "all_scores" in e]
    if not rows:
        return []
    cols = sorted(rows[0][2])
    lines = ["", "This run's columns over all its streams (the table above joins the baseline's "
                 "columns on the streams both runs scored):", "",
             "| setting | streams | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 2)]
    for name, seeds, scores in rows:
        cells = [f"{np.mean(scores[c]):.3f} ± {np.std(scores[c], ddof=1):.3f}"
                 if len(scores[c]) > 1 else f"{scores[c][0]:.3f}" for c in cols]
        lines.append(f"| {name} | {len(seeds)} | " + " | ".join(cells) + " |")
    return lines


def write_report(results: dict, meta: dict, out: Path) -> None:
    """The markdown table and the JSON of all per-stream scores beside it."""
    lines = ["# Feature-ranking fidelity under drift at many speeds", "",
             f"Wall time: {meta['wall_s'] / 60:.1f} min with {meta['jobs']} process(es)  ",
             f"Default rankers: {', '.join(meta['default_rankers']) or 'none'}; window forests "
             f"of {meta['trees']} trees. Protocol: `tests/benchmarks/rankings/bench_rankings_drift.py`.",
             "", "Score: Cassidy & Deviney's mean correlation between a ranking's importance "
             "series and the true |a_i| of the drifting features (mean ± sd over streams); "
             "the default's and MOA's scores are their best columns.", ""]
    header = None
    for name, entry in results.items():
        head, cells = summary_row(name, entry["scores"])
        if head != header:
            header = head
            lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += all_seeds_table(results)
    lines += [""] + [f"* {n}" for n in notes(meta, results)]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out, "\n".join(lines))
    write_results(out.with_suffix(".json"), {**meta, "settings": results})


def merge_baselines(runs: list[dict]) -> dict:
    """Several earlier runs' settings as one: per setting, the union of their streams (runs
    over disjoint seeds, such as ``--first-seed`` batches; a seed scored twice keeps its
    first run's scores) and the columns every run has."""
    merged: dict = {}
    for run in runs:
        for name, entry in run.items():
            into = merged.setdefault(name, {**entry, "seeds": [], "scores": {}})
            have = set(into["seeds"])
            keep = [i for i, seed in enumerate(entry["seeds"]) if seed not in have]
            if into["seeds"] and set(into["scores"]) != set(entry["scores"]):
                common = set(into["scores"]) & set(entry["scores"])
                into["scores"] = {c: v for c, v in into["scores"].items() if c in common}
            into["seeds"] += [entry["seeds"][i] for i in keep]
            for c in list(into["scores"]) or list(entry["scores"]):
                into["scores"].setdefault(c, []).extend(entry["scores"][c][i] for i in keep)
    return merged


def with_baseline(results: dict, baseline: dict) -> dict:
    """``results`` joined with an earlier run's per-stream scores, on the seeds both scored.

    Columns this run computed win; the earlier run's default becomes ``former-default:*``, so
    a changed default can be compared with the windows and MOA without recomputing them (the
    streams are the same: seeds are fixed per setting). Settings the earlier run lacks keep
    this run's scores alone.
    """
    joined = {}
    for name, entry in results.items():
        base = baseline.get(name)
        if base is None:
            joined[name] = entry
            continue
        common = sorted(set(entry["seeds"]) & set(base["seeds"]))
        ours = {seed: i for i, seed in enumerate(entry["seeds"])}
        theirs = {seed: i for i, seed in enumerate(base["seeds"])}
        scores = {c: [v[ours[seed]] for seed in common] for c, v in entry["scores"].items()}
        for c, v in base["scores"].items():
            key = "former-" + c if c.startswith("default:") else c
            scores.setdefault(key, [v[theirs[seed]] for seed in common])
        joined[name] = {**entry, "seeds": common, "scores": scores,
                        "all_seeds": entry["seeds"], "all_scores": entry["scores"]}
    return joined


# --------------------------------------------------------------------------------- main

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="streams per setting")
    parser.add_argument("--first-seed", type=int, default=1,
                        help="index of the first stream per setting (1: the protocol's first; "
                             "3 with --seeds 2 scores streams 3 and 4 of every setting)")
    parser.add_argument("--jobs", type=int, default=1, help="processes over streams")
    parser.add_argument("--settings", action="append",
                        help='only settings with all these tokens, e.g. "K=2,T=0.01,clipped" '
                             "(repeatable: any of them)")
    parser.add_argument("--ranker", action="append", default=[],
                        help="also score NAME[:JSON-params], a registered ranker (repeatable)")
    parser.add_argument("--profile", action="append", default=[],
                        help="also score the default rankers with a profile's learner params, "
                             "JSON such as '{\"block_forest\":{\"pool\":0}}' (repeatable)")
    parser.add_argument("--trees", type=int, default=10, help="trees per window forest")
    parser.add_argument("--features", type=int, default=D,
                        help=f"features per stream (default {D}, the protocol's; others name "
                             "their width in the settings, d=N)")
    parser.add_argument("--window-mdi-only", action="store_true",
                        help="window forests without their permutation importance (no "
                             "win*:mda columns): it costs a forest's predictions per feature "
                             "and ask, which wide streams cannot afford")
    parser.add_argument("--no-default", action="store_true", help="skip the default rankers")
    parser.add_argument("--no-windows", action="store_true", help="skip the window forests")
    parser.add_argument("--no-moa", action="store_true", help="skip MOA's ARF importances")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 3 seeds, a fifth of the rows")
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown output path")
    parser.add_argument("--baseline", type=Path, action="append", default=[],
                        help="JSON of an earlier run: its columns this run lacks (window forests, "
                             "MOA; its default as former-default:*) join the table, on the seeds "
                             "both runs scored (repeatable: runs over other seeds add streams)")
    return parser.parse_args(argv)


def method_specs(args) -> list[str]:
    specs = [] if args.no_default else ["default"]
    specs += [f"profile:{p}" for p in args.profile]
    specs += list(args.ranker)
    kind = "window-mdi" if args.window_mdi_only else "window"
    specs += [] if args.no_windows else [f"{kind}:{w}" for w in WINDOWS]
    specs += [] if args.no_moa else ["moa"]
    return specs


def main(argv=None) -> int:
    from worker.pipeline.config import PipelineConfig

    args = parse_args(argv)
    settings = select(all_settings(args.features), args.settings)
    seeds = 3 if args.quick else args.seeds
    if args.quick:
        settings = [s.quick() for s in settings]
    specs = method_specs(args)
    # read once, before any stream: the workers build the same default (a profile edit in
    # the middle of a run would show as a mix; compare with the JSON's default_rankers)
    default_rankers = PipelineConfig().rankers_for("classification")
    print(f"default rankers: {default_rankers}; warming numba for {specs} ...", flush=True)
    warm(specs)
    jobs = [(s, s.seed_base + args.first_seed - 1 + i, specs, args.trees)
            for s in settings for i in range(seeds)]
    results = {s.name: {"n_rows": s.n_rows, "S": s.sigma, "seeds": [], "scores": {},
                        "seconds": {}} for s in settings}
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")  # no fork of a process that may hold a JVM or threads
    with ctx.Pool(args.jobs) as pool:
        for done, (name, seed, scores, seconds, wall) in enumerate(
                pool.imap_unordered(_job, jobs), 1):
            entry = results[name]
            entry["seeds"].append(seed)
            for c, v in scores.items():
                entry["scores"].setdefault(c, []).append(v)
            for spec, sec in seconds.items():
                entry["seconds"].setdefault(spec, []).append(round(sec, 2))
            shown = " ".join(f"{c}={v:+.2f}" for c, v in sorted(scores.items()))
            print(f"[{done}/{len(jobs)} {time.perf_counter() - t0:6.0f}s] {name} seed={seed} "
                  f"({wall:.0f}s): {shown}", flush=True)
    for entry in results.values():  # streams came back in any order: order them by seed
        order = np.argsort(entry["seeds"])
        entry["seeds"] = [entry["seeds"][i] for i in order]
        entry["scores"] = {c: [v[i] for i in order] for c, v in entry["scores"].items()}
    if args.baseline:
        results = with_baseline(results, merge_baselines(
            [json.loads(path.read_text())["settings"] for path in args.baseline]))
    meta = {"wall_s": time.perf_counter() - t0, "jobs": args.jobs, "trees": args.trees,
            "quick": args.quick, "methods": specs,
            "default_rankers": default_rankers,
            "baseline": [str(path) for path in args.baseline] or None}
    write_report(results, meta, args.out)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
