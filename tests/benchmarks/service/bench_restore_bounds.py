"""What restoring a stream costs, and what the bounds on checkpoint records let through.

Part 1: how far the pipelines' states compress (msgpack over zlib level 1), for every learner
family, 1 to 5,000 rows, on a hyperplane stream (random features) and on a stream of small
integers (few distinct values: the most a real stream repeats). ``worker.checkpoint_store`` lets an
envelope inflate to 64 times its stored bytes, or to the state budget.

Part 2: the peak memory of restoring one stream (``tracemalloc``: the chunks joined, the blob
inflated and decoded, the pipeline rebuilt), as a multiple of the inflated msgpack and of the
restored state's bytes.

Part 3: crafted records, each refused: time and peak memory until the refusal (a bloated
capacity, parameters out of range, a zlib bomb, a manifest claiming 10^9 chunks, a msgpack of
empty lists).

Usage::

    python tests/benchmarks/service/bench_restore_bounds.py          # writes results/restore_bounds.md
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import msgpack
import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models import registry  # noqa: E402
from models.generators.hyperplane import RotatingHyperplane  # noqa: E402
from schemas import StreamCheckpoint  # noqa: E402
from schemas.codec import encode, encode_state  # noqa: E402
from tests.benchmarks.common import write_results  # noqa: E402
from worker import checkpoint_store as ckpt  # noqa: E402
from worker.pipeline import PipelineConfig, make_pipeline  # noqa: E402
from worker.recovery import stream_pipeline  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "restore_bounds.md"
AGES = (1, 10, 50, 200, 1000, 5000)
REGRESSORS = ("isoup_tree", "isoup_symrf", "block_forest_regression")


def configs() -> dict[str, PipelineConfig]:
    """The default pipeline and one per learner family in each role it can take."""
    out = {"default": PipelineConfig()}
    for name in registry.names(role="predictor"):
        if not registry.get(name).arrivals:
            out[f"predictor {name}"] = PipelineConfig(predictor=name, rankers="none")
    for name in registry.names(role="ranker"):
        if not registry.get(name).arrivals:
            base = "isoup_tree" if name in REGRESSORS else "naive_bayes"
            out[f"ranker {name}"] = PipelineConfig(predictor=base, rankers=name)
    out["selector abfs"] = PipelineConfig(predictor="hoeffding_tree", selector="abfs",
                                          rankers="none")
    out["detectors adwin, ddm"] = PipelineConfig(predictor="naive_bayes", rankers="none",
                                                 detectors=["adwin", "ddm"])
    return out


def rows(kind: str, n: int, regression: bool):
    X, y, _ = RotatingHyperplane(n_features=10, n_drift_features=2, mag_change=0.005,
                                 seed=1).take(n)
    if kind == "integers":  # few distinct values, as counts and categories
        X = np.floor(X * 4.0)
    if regression:
        Y = np.column_stack([X[:, 0] * 3, X[:, 1] - X[:, 2], X[:, 3]])
        return np.ascontiguousarray(X), [list(map(float, r)) for r in Y]
    return np.ascontiguousarray(X), [int(v) for v in y]


def envelope(pipeline) -> StreamCheckpoint:
    return StreamCheckpoint(group="g", topics=["t"], partition=0, stream=pipeline.stream,
                            config={}, offsets={"t": 0}, state=pipeline.to_state(), ts=0)


def part1() -> tuple[list[str], list]:
    lines, states = [], []
    for data in ("hyperplane", "integers"):
        for name, cfg in configs().items():
            regression = name.split()[-1] in REGRESSORS
            X, y = rows(data, AGES[-1], regression)
            p, done, ratios = make_pipeline("s", cfg, X.shape[1]), 0, []
            for stop in AGES:
                p.process(X[done:stop], y[done:stop])
                done = stop
                packed = encode_state(p.to_state())
                ratios.append(len(packed) / len(zlib.compress(packed, 1)))
            states.append((f"{name}, {data}", envelope(p), p.nbytes))
            lines.append(f"| {name} | {data} | " + " | ".join(f"{r:.1f}" for r in ratios)
                         + f" | {max(ratios):.1f} |")
    return lines, states


def measure(fn):
    """``(seconds, peak bytes traced, result or the exception)`` of ``fn()``."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        out = fn()
    except Exception as exc:  # what a refusal raises is the result
        out = exc
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak, out


def part2(states) -> list[str]:
    lines = []
    limits = ckpt.Limits()
    for label, env, _ in sorted(states, key=lambda s: -s[2])[:12]:
        blob = ckpt.encode_blob(env, level=1)  # compressed: what inflating costs
        chunks = ckpt.split(blob, 1024 * 1024 - 4096)
        packed = ckpt.inflate(blob)

        def restore(chunks=chunks, env=env):
            got = b"".join(chunks)
            return stream_pipeline(env.stream, ckpt.decode_blob(got, limits))

        seconds, peak, pl = measure(restore)
        assert not isinstance(pl, Exception), pl
        lines.append(f"| {label} | {len(blob):,} | {len(packed):,} | {pl.nbytes:,} | "
                     f"{peak:,} | {peak / len(packed):.2f} | {peak / max(pl.nbytes, 1):.2f} | "
                     f"{seconds * 1000:.1f} |")
    return lines


def _arf_state(rows_: int = 600) -> dict:
    from models.hoeffding.adaptive_forest import AdaptiveRandomForest

    X, y = rows("hyperplane", rows_, False)
    arf = AdaptiveRandomForest(seed=1)
    arf.learn_many(X, y)
    return arf.to_state()


def _bomb(inflated: int) -> bytes:
    """A zlib stream of a msgpack map whose one value is ``inflated`` zero bytes."""
    head = msgpack.packb({"v": 1, "state": None})[:-1] + b"\xc6" + inflated.to_bytes(4, "big")
    z = zlib.compressobj(9)
    out = [z.compress(head)]
    block = bytes(1 << 20)
    for _ in range(inflated >> 20):
        out.append(z.compress(block))
    out.append(z.flush())
    return b"".join(out)


def part3() -> list[str]:
    from models.cart.block_forest import BlockForestRanker
    from models.hoeffding.adaptive_forest import AdaptiveRandomForest

    cases = []
    st = _arf_state()
    bloated = {**st, "capacity": {**st.get("capacity", {}), "nodes": 524_288}}
    cases.append(("ARF state, capacity 524,288 (600 rows)",
                  len(zlib.compress(encode_state(bloated), 1)),
                  lambda: AdaptiveRandomForest.from_state(bloated)))
    split = {**st, "params": {**st["params"], "n_splits": 10**6}}
    cases.append(("ARF state, n_splits 10^6", len(zlib.compress(encode_state(split), 1)),
                  lambda: AdaptiveRandomForest.from_state(split)))
    X, y = rows("hyperplane", 300, False)
    bf = BlockForestRanker(seed=1)
    bf.learn_many(X, y)
    bst = bf.to_state()
    trees = {**bst, "params": {**bst["params"], "n_trees": 10**5}}
    cases.append(("block forest state, n_trees 10^5", len(zlib.compress(encode_state(trees))),
                  lambda: BlockForestRanker.from_state(trees)))
    bomb = _bomb(1600 << 20)
    for budget_mb in (1024, 64):
        limits = ckpt.Limits(state_budget=budget_mb << 20)
        cases.append((f"zlib bomb inflating to 1.6 GB, budget {budget_mb} MB", len(bomb),
                      lambda limits=limits: ckpt.decode_blob(bomb, limits)))
    empties = zlib.compress(b"\xdd" + (50_000_000).to_bytes(4, "big") + b"\x90" * 50_000_000, 9)
    cases.append(("msgpack list of 5 x 10^7 empty lists", len(empties),
                  lambda: ckpt.decode_blob(empties)))
    m = ckpt.empty_manifest("g", "t", 0, 0).model_copy(
        update={"streams": {"s": [10, 10**9, 2100]}})
    cases.append(("manifest claiming 10^9 chunks", len(encode(m)[0]),
                  lambda: ckpt.check_spans(m, 100)))
    lines = []
    for label, size, fn in cases:
        seconds, peak, out = measure(fn)
        what = f"{type(out).__name__}: {str(out)[:90]}" if isinstance(out, Exception) \
            else "accepted"
        lines.append(f"| {label} | {size:,} | {seconds * 1000:,.1f} | {peak / 1e6:,.1f} | "
                     f"{what} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(RESULTS), help="results file (default: %(default)s)")
    args = parser.parse_args(argv)
    t0 = time.time()
    p1, states = part1()
    p2 = part2(states)
    p3 = part3()
    text = "\n".join([
        "# Restoring a stream: compression, peak memory, crafted records",
        "",
        f"Wall time: {time.time() - t0:.0f} s.",
        "",
        "## Compression of the pipelines' states (msgpack / zlib level 1)",
        "",
        "| pipeline | features | " + " | ".join(f"{a} rows" for a in AGES) + " | most |",
        "|---|---|" + "---|" * (len(AGES) + 1),
        *p1,
        "",
        "## Peak memory of restoring one stream (tracemalloc; the 12 largest states)",
        "",
        "| pipeline | stored | inflated msgpack | state in memory | peak | peak / inflated "
        "| peak / state | ms |",
        "|---|---|---|---|---|---|---|---|",
        *p2,
        "",
        "## Crafted records",
        "",
        "| record | bytes | ms | peak (MB) | outcome |",
        "|---|---|---|---|---|",
        *p3,
        "",
    ])
    write_results(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
