"""Where the block-forest ranker's time goes as features grow.

The default classification ranker (:class:`models.cart.block_forest.BlockForestRanker`, built as
the worker builds it) learns a ``d``-feature rotating hyperplane in mini-batches of 100 rows
and is asked for its importances after each, as the worker's pipeline does. Its methods are
wrapped with CPU-time counters (``time.process_time``), so each part is timed where it runs:

* ``columns``: the block's columns sorted for the split search (``_sorted_columns``; in
  versions whose forest kernel sorts them itself, :mod:`models.cart._cart`, the same kernel timed
  on the same block beside the forest and subtracted from the run);
* ``trees``: the block forest's split search and growth (the forest kernel less ``columns``);
* ``importances per block``: the rest of a block's importances (the forest's MDI and its
  spread over the trees, the class layout);
* ``window scoring``: the window mixture's faded losses, their products and moments
  (``_score_windows``);
* ``ring``: the rest of a measurement (the measurement ring);
* ``asks``: ``importances()`` (the mixture's weights and means), once per mini-batch;
* ``other``: the rest of ``learn_many`` (the ring of rows, label codes).

Usage::

    python tests/benchmarks/rankings/profile_block_forest.py --features 10 90 500 --rows 3000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models import registry  # noqa: E402
from models.cart import _cart  # noqa: E402
from tests.benchmarks.common import default_learner, hyperplane, write_results  # noqa: E402
from tests.benchmarks.rankings.bench_ranker_features import BATCH  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "ranker_profile.md"
PARTS = ("columns", "trees", "importances per block", "window scoring", "ring", "asks",
         "other")


class Timers:
    """CPU seconds per part, and the number of blocks measured."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.blocks = 0

    def wrap(self, owner, name: str, part: str) -> None:
        """Count the CPU time of ``owner.name`` under ``part`` (nested parts subtract)."""
        inner = getattr(owner, name)
        timers = self

        def timed(*args, **kwargs):
            t0 = time.process_time()
            out = inner(*args, **kwargs)
            timers.seconds[part] += time.process_time() - t0
            return out

        setattr(owner, name, timed)
        return inner


def _forest_kernel():
    """``(module, name, column kernel)`` of the forest kernel the ranker calls: the block
    trees (nothing prepared per column) or, in versions before them, :mod:`models.cart._cart`'s
    forest, which prepares every column first (:func:`models.cart._cart_columns.prepare_columns`)."""
    try:
        from models.cart import _block_cart
    except ImportError:
        return _cart, "grow_forest", _cart.prepare_columns
    return _block_cart, "forest_importances", None


def profile(d: int, rows: int, params: dict | None) -> tuple[dict[str, float], int, float]:
    """``(CPU seconds per part, blocks, total CPU seconds)`` of one run on ``d`` features."""
    X, y = hyperplane(d, rows)
    # compile (or load) the kernels on a short stream first
    warm = default_learner(registry.RANKER, params)
    warm.learn_many(X[:400], y[:400])
    warm.importances()
    module, kernel, columns = _forest_kernel()
    if columns is not None:
        columns(X[:100], np.zeros(100, np.int64))
    timers = Timers()
    ranker = default_learner(registry.RANKER, params)
    cls = type(ranker)
    originals = {}
    # whole measurement, forest included (the forest's parts are subtracted below)
    originals["_measure"] = timers.wrap(cls, "_measure", "measure")
    originals["_block_importances"] = timers.wrap(cls, "_block_importances", "block")
    originals["_score_windows"] = timers.wrap(cls, "_score_windows", "scoring")
    originals["importances"] = timers.wrap(cls, "importances", "asks")
    if hasattr(cls, "_sorted_columns"):
        originals["_sorted_columns"] = timers.wrap(cls, "_sorted_columns", "sorted")
    grow = getattr(module, kernel)

    def grow_timed(X, codes, *args):
        t0 = time.process_time()
        if columns is not None:
            columns(X, codes)
        t1 = time.process_time()
        grow(X, codes, *args)
        t2 = time.process_time()
        timers.seconds["columns"] += t1 - t0
        timers.seconds["forest"] += t2 - t1
        timers.blocks += 1

    setattr(module, kernel, grow_timed)
    try:
        t0 = time.process_time()
        for a in range(0, rows, BATCH):
            ranker.learn_many(X[a:a + BATCH], y[a:a + BATCH])
            ranker.importances()
        total = time.process_time() - t0
    finally:
        setattr(module, kernel, grow)
        for attr, fn in originals.items():
            setattr(cls, attr, fn)
    s = timers.seconds
    # the forest kernel prepares the columns itself: the timed copy is subtracted from the
    # run's total, so the parts add up to the run without the duplicate
    total -= s["columns"]
    parts = {"columns": s["columns"] + s["sorted"], "trees": s["forest"] - s["columns"],
             "importances per block": s["block"] - s["forest"] - s["columns"] - s["sorted"],
             "window scoring": s["scoring"],
             "ring": s["measure"] - s["block"] - s["scoring"], "asks": s["asks"]}
    parts["other"] = total - sum(parts.values())
    return parts, timers.blocks, total


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", type=int, nargs="+", default=[10, 90, 500])
    ap.add_argument("--rows", type=int, default=3_000)
    ap.add_argument("--profile", type=json.loads, default=None,
                    help="learner params, JSON ('{\"block_forest\":{\"n_trees\":5}}')")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    lines = ["# Where the block-forest ranker's time goes", "",
             f"The default ranker on {args.rows:,} rows of a rotating hyperplane, mini-batches of "
             "100 rows, importances asked after each; CPU milliseconds per block forest "
             "(share of the run).", "",
             "| features | blocks | " + " | ".join(PARTS) + " | total | rows per CPU-s |",
             "|---|---|" + "---|" * (len(PARTS) + 2)]
    for d in args.features:
        parts, blocks, total = profile(d, args.rows, args.profile)
        cells = [f"{1e3 * parts[p] / blocks:.3f} ({parts[p] / total:.0%})" for p in PARTS]
        lines.append(f"| {d} | {blocks} | " + " | ".join(cells)
                     + f" | {1e3 * total / blocks:.3f} | {args.rows / total:,.0f} |")
        print(lines[-1], flush=True)
    write_results(args.out, "\n".join(lines))
    print(args.out.read_text())


if __name__ == "__main__":
    main()
