"""The default pipeline's state per stream, seed by seed (and, optionally, against a revision).

What a stream's pipeline holds (``Pipeline.nbytes``: the learners' arrays, capacity included,
as the worker's state budget counts it, 1 MB per stream by default) and its checkpoint
(msgpack over zlib level 1, as the worker writes it) after 2,000 rows, fed in consume batches
of 100 rows; "peak" is the largest ``nbytes`` after any batch. Streams: the rotating
hyperplane (10 features, 2 drifting, T=0.001), SEA concepts and an Agrawal-like loan stream
(:mod:`tests.synthetic`), and the first 2,000 rows of Electricity and Phishing
(``shared/data``). Seeds 1..N are the pipeline's seed and, for the generators, the stream's.

With ``--before REV`` the code of that git revision is measured too ("before"), exported with
``git archive`` and run in a child process with its own numba cache, on the same rows.

Usage::

    python tests/benchmarks/learners/bench_state_size.py --seeds 10       # writes results/state_size.md
    python tests/benchmarks/learners/bench_state_size.py --seeds 10 --before main --out /tmp/s.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import write_results  # noqa: E402

STREAMS = ("hyperplane", "sea", "agrawal", "electricity", "phishing")
ROWS = 2000
BATCH = 100
BUDGET = 1_000_000


def _synthetic():
    """:mod:`tests.synthetic` of this checkout (the measured tree may not have it)."""
    spec = importlib.util.spec_from_file_location("synthetic", ROOT / "tests" / "synthetic.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stream(name: str, seed: int):
    """``(X, y)``: the first :data:`ROWS` rows of stream ``name`` (generators seeded)."""
    import numpy as np

    if name == "hyperplane":
        from models.generators.hyperplane import RotatingHyperplane

        X, y, _ = RotatingHyperplane(n_features=10, mag_change=0.001, seed=seed).take(ROWS)
        return np.ascontiguousarray(X), [int(v) for v in y]
    if name in ("sea", "agrawal"):
        return getattr(_synthetic(), name)(ROWS, seed=seed)
    from tests.shared_data import data_dir
    from worker.tools.dev.datasets import load

    d = load(name, data_dir())
    return np.ascontiguousarray(d.X[:ROWS], dtype=np.float64), list(d.y[:ROWS])


def measure(streams, seeds) -> list[dict]:
    """Per stream and seed: the state after the last batch, its peak and its checkpoint."""
    from schemas.codec import encode_state
    from worker.pipeline import Pipeline, PipelineConfig

    out = []
    for name in streams:
        for seed in seeds:
            X, y = stream(name, seed)
            p = Pipeline("s", PipelineConfig(seed=seed), X.shape[1])
            peak = 0
            for a in range(0, len(y), BATCH):
                p.process(X[a:a + BATCH], y[a:a + BATCH])
                peak = max(peak, p.nbytes)
            out.append({"stream": name, "seed": seed, "final": p.nbytes, "peak": peak,
                        "checkpoint": len(zlib.compress(encode_state(p.to_state()), 1))})
    return out


def _export(rev: str, into: Path) -> Path:
    """The files of git revision ``rev`` under ``into``."""
    tar = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), rev], check=True)
    with tarfile.open(tar) as fh:
        fh.extractall(into / "tree", filter="data")
    return into / "tree"


def run_side(tree: Path, cache: Path, streams, seeds) -> list[dict]:
    """:func:`measure` in a child process with ``tree``'s code first on the path."""
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(cache),
               STREAMFOREST_TEST_DATA=str(_data_dir()))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                          "--streams", ",".join(streams), "--seeds", str(max(seeds))],
                         env=env, cwd=str(tree), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _data_dir() -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.shared_data import data_dir

    return data_dir()


def _mb(n: float) -> str:
    return f"{n / 1e6:.3f}"


def report(before: list[dict] | None, after: list[dict], rev: str, head: str, seeds) -> str:
    """The results as markdown: per stream and seed, then the mean and worst per stream
    (``before``: another revision's, beside; ``None``: this checkout's only)."""
    sides = [("after", after)] if before is None else [("before", before), ("after", after)]
    key = {(r["stream"], r["seed"]): r for r in before or ()}
    what = f"before: `{rev}`; after: `{head}`. " if before is not None else ""
    lines = [
        "# Default pipeline state per stream", "",
        f"The default pipeline after {ROWS:,} rows fed in batches of {BATCH}; MB = 10^6 bytes of "
        "state arrays (`Pipeline.nbytes`, capacity included: what the worker's state budget "
        "counts), peak over the batches, and the checkpoint (msgpack + zlib 1); "
        f"{what}budget: 1 MB per stream.", ""]
    cols = [f"{side} {c}" if before is not None else c for side, _ in sides
            for c in ("MB", "peak MB", "checkpoint kB")]
    lines += ["| stream | seed | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for r in after:
        cells = []
        for _side, runs in sides:
            x = r if runs is after else key[(r["stream"], r["seed"])]
            cells += [_mb(x["final"]), _mb(x["peak"]), f"{x['checkpoint'] / 1e3:.1f}"]
        lines.append(f"| {r['stream']} | {r['seed']} | " + " | ".join(cells) + " |")
    cols = [f"{side} {c}" if before is not None else c for side, _ in sides
            for c in ("mean MB", "worst peak MB", "seeds over 1 MB")]
    lines += ["", "| stream | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name in dict.fromkeys(r["stream"] for r in after):
        cells = []
        for _side, runs in sides:
            rs = [r for r in runs if r["stream"] == name]
            cells += [_mb(sum(r["final"] for r in rs) / len(rs)), _mb(max(r["peak"] for r in rs)),
                      f"{sum(r['peak'] > BUDGET for r in rs)} of {len(rs)}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--streams", default=",".join(STREAMS))
    ap.add_argument("--before", default=None, help="a git revision measured beside ('before')")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results"
                    / "state_size.md")
    args = ap.parse_args()
    seeds = range(1, args.seeds + 1)
    streams = args.streams.split(",")
    if args.child:
        print(json.dumps(measure(streams, seeds)))
        return
    before, rev = None, ""
    if args.before:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.before],
                             capture_output=True, text=True, check=True).stdout.strip()
        with tempfile.TemporaryDirectory() as tmp:
            tree = _export(rev, Path(tmp))
            before = run_side(tree, Path(tmp) / "cache", streams, seeds)
    cache = Path(os.environ.get("NUMBA_CACHE_DIR", ROOT / ".numba_cache"))
    after = run_side(ROOT, cache, streams, seeds)
    head = subprocess.run(["git", "-C", str(ROOT), "describe", "--all", "--always", "--dirty"],
                          capture_output=True, text=True, check=True).stdout.strip()
    text = report(before, after, f"{args.before} ({rev})", head, seeds)
    write_results(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
