"""Fidelity of iSOUP-SymRF's ranking to Osojnik, Panov & Džeroski: stability (TTF, TTF5),
the top features of Bike Sharing, and the utility of the ranking (forward feature addition).

* *Top five*: 100 trees, square-root subspaces, Bike Sharing hourly; the paper finds hr,
  hum, workingday, temp, atemp, weekday and weathersit at the top.
* *TTF / TTF5* (the paper's Table 2): the ranking is read every ``STEP`` rows; TTF is the
  number of rows after which the full ranking (features ordered by score, ties by column) no
  longer differs from the final one, TTF5 the same for the ordered top five. Ensembles of
  10, 20, 50 and 100 trees with log and square-root subspaces, seeds 1..``SEEDS`` (median).
* *FFA*: the final ranking of 100 trees with square-root subspaces orders the features; an
  iSOUP tree is then run prequentially on the top ``n`` features (``n = 1..5``) and on all
  but the bottom ``n``; the table gives aRMAE, the mean over targets of the tree's absolute
  errors over those of the mean of the targets seen before each row.

Streams: Bike Sharing (17,379 rows, 12 features), SCM20d (8,966 rows, 61 features; SCM1d is
not in the shared data) and the synthetic :func:`relevant_stream` (20,000 rows, 10
features of which ``x2, x4, x7, x9`` are relevant).

Run::

    python tests/benchmarks/fidelity/fidelity_isoup.py      # ~3 minutes, writes tests/benchmarks/learners/results/isoup.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models.isoup.isoup_forest import ISOUPSymRF  # noqa: E402
from models.isoup.isoup_tree import ISOUPTree  # noqa: E402
from tests.benchmarks.isoup_common import write_section  # noqa: E402
from tests.models import isoup_streams as streams  # noqa: E402

STEP = 25
SEEDS = 3
PAPER_TOP = {"hr", "hum", "workingday", "temp", "atemp", "weekday", "weathersit"}


def load(name: str):
    if name == "bicycles":
        return streams.bike_sharing()
    if name == "scm20d":
        return streams.scm20d()
    return streams.relevant_stream(20_000)


def ranking(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-scores, kind="stable")


def ranking_path(X, Y, n_models: int, subspace: str, seed: int):
    """The rankings after every ``STEP`` rows (the scores in ranking order beside them), and
    the final scores."""
    forest = ISOUPSymRF(n_models=n_models, subspace=subspace, seed=seed)
    path, ordered = [], []
    for s in range(0, X.shape[0], STEP):
        forest.learn_many(X[s:s + STEP], Y[s:s + STEP])
        score = forest.importances()["symbolic"]
        path.append(ranking(score))
        ordered.append(score[path[-1]])
    return (np.array(path), np.array(ordered)), forest.importances()["symbolic"]


def time_to_final(path, n_rows: int, top: int | None = None, as_set: bool = False) -> int:
    """Rows after which the (top-``top``) ranking stays equal to the final one (with
    ``as_set``, the set of the top ``top`` features, in any order).

    A top ``top`` counts only when its last score is strictly above the next one: features
    tied there (all at 0 before the first split, say) are ordered by column index, which
    says nothing about the data.
    """
    order, scores = path
    cut = order[:, :top] if top else order
    if as_set:
        cut = np.sort(cut, axis=1)
    same = (cut == cut[-1]).all(axis=1)
    if top:
        same &= scores[:, top - 1] > scores[:, top]
    changed = np.flatnonzero(~same)
    if changed.size == 0:
        return STEP
    return min(int(changed[-1] + 2) * STEP, n_rows)


def stability_table(datasets) -> list[str]:
    notes = []
    lines = ["## Parameter stability: TTF and TTF5 (the paper's Table 2)", "",
             f"Rows until the ranking reaches its final order for good (read every {STEP} rows); "
             f"median over seeds 1..{SEEDS}, min-max in brackets. Our copy of the paper has the "
             "caption of Table 2 but not its values, so they cannot be shown beside ours; the "
             "paper's text says square-root subspaces mostly win on TTF, log and sqrt split "
             "TTF5 evenly, larger ensembles help on Bicycles and TTF5 is much lower than TTF on "
             "Bicycles but close to it on SCM20d. SCM1d is not in the shared data.", "",
             "On the synthetic stream only x2, x4, x7 and x9 matter, so places 5 and below are held by noise "
             "features whose scores are near 0 and keep trading places: TTF5 is then close to TTF. "
             "The four relevant features also have close scores and swap places late (TTF4); "
             "the set of the top four settles much earlier (the notes below the table).", "",
             "| dataset | trees | TTF log | TTF sqrt | TTF5 log | TTF5 sqrt | TTF4 log | TTF4 sqrt |",
             "|---|---|---|---|---|---|---|---|"]
    for name in datasets:
        X, Y, _ = load(name)
        for n_models in (10, 20, 50, 100):
            cells = {}
            for subspace in ("log", "sqrt"):
                ttf, ttf5, ttf4 = [], [], []
                for seed in range(1, SEEDS + 1):
                    path, _ = ranking_path(X, Y, n_models, subspace, seed)
                    ttf.append(time_to_final(path, X.shape[0]))
                    ttf5.append(time_to_final(path, X.shape[0], 5))
                    ttf4.append(time_to_final(path, X.shape[0], 4))
                    if name == "synthetic":
                        notes.append((n_models, subspace, time_to_final(path, X.shape[0], 4, True)))
                cells[subspace] = (ttf, ttf5, ttf4)
                print(name, n_models, subspace, ttf, ttf5, ttf4, flush=True)

            def fmt(v):
                return f"{int(np.median(v)):,} ({min(v):,}-{max(v):,})"

            lines.append(f"| {name} | {n_models} | {fmt(cells['log'][0])} | {fmt(cells['sqrt'][0])} | "
                         f"{fmt(cells['log'][1])} | {fmt(cells['sqrt'][1])} | "
                         f"{fmt(cells['log'][2])} | {fmt(cells['sqrt'][2])} |")
    if notes:
        lines += ["", "Synthetic stream, rows until the *set* of the top four is final (x2, x4, x7, x9), per "
                  "ensemble and seed: " + "; ".join(f"{n} {sub} {rows:,}" for n, sub, rows in notes)]
    return lines


def armae(X, Y, cols) -> float:
    P = ISOUPTree().predict_learn_many(np.ascontiguousarray(X[:, cols]), Y)
    return float(streams.rmae_terms(Y, P).mean())


def ffa_table(datasets) -> tuple[list[str], list[str]]:
    lines = ["## Ranking utility: forward feature addition with an iSOUP tree", "",
             "aRMAE (lower is better) of a prequential iSOUP tree on the top n features of the final "
             "ranking of iSOUP-SymRF (100 trees, sqrt subspaces, seed 1), and on all features but "
             "the bottom n (columns 'all - n'; the paper's Fig. 3, iSOUP-Tree panels, lines -5..-1).", "",
             "| dataset | all features | top 1 | top 2 | top 3 | top 4 | top 5 | all - 5 | all - 4 | "
             "all - 3 | all - 2 | all - 1 | ranking (top 6, share) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for name in datasets:
        X, Y, names = load(name)
        _, scores = ranking_path(X, Y, 100, "sqrt", 1)
        order = ranking(scores)
        F = X.shape[1]
        top = [armae(X, Y, order[:n]) for n in range(1, 6)]
        bottom = [armae(X, Y, order[:F - n]) for n in (5, 4, 3, 2, 1)]
        full = armae(X, Y, np.arange(F))
        share = scores / scores.sum()
        shown = ", ".join(f"{names[i]} {share[i]:.3f}" for i in order[:6])
        lines.append(f"| {name} | {full:.4f} | " + " | ".join(f"{v:.4f}" for v in top + bottom)
                     + f" | {shown} |")
        gain_top = top[0] - top[-1]
        gain_bottom = max(bottom) - min(bottom)
        notes.append(f"{name}: top 1 -> top 5 lowers aRMAE by {gain_top:.4f}; the bottom five move it by "
                     f"at most {gain_bottom:.4f} ({'top features help more' if gain_top > gain_bottom else 'CHECK'})")
        if name == "bicycles":
            top5 = [names[i] for i in order[:5]]
            inside = set(top5) <= PAPER_TOP
            notes.append(f"bicycles, 100 trees, sqrt: final top five {', '.join(top5)} "
                         f"({'all' if inside else 'NOT all'} among the paper's {', '.join(sorted(PAPER_TOP))})")
        if name == "synthetic":
            first = {int(i) for i in order[:4]}
            notes.append(f"synthetic: the four relevant features x2, x4, x7, x9 are ranked "
                         f"{'first' if first == set(streams.RELEVANT) else 'NOT first'}")
    return lines, notes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="bicycles,scm20d,synthetic")
    parser.add_argument("--no-stability", action="store_true")
    args = parser.parse_args(argv)
    datasets = args.datasets.split(",")
    lines = ["Generated by `python tests/benchmarks/fidelity/fidelity_isoup.py` (protocol in its docstring).", ""]
    ffa, notes = ffa_table(datasets)
    lines += ffa + ["", "Checks:", ""] + [f"* {n}" for n in notes] + [""]
    if not args.no_stability:
        lines += stability_table(datasets)
    write_section("fidelity", "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
