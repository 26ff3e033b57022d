"""Compile every numba kernel a worker can use, once, into the numba cache.

The worker image runs this at build time (``deploy/docker/Dockerfile``) so that a new pod
starts processing at once instead of compiling its first stream's kernels while its
partitions wait. It runs each pipeline kind on a short synthetic stream.
"""

from __future__ import annotations

import time

import numpy as np

from .pipeline import Pipeline, PipelineConfig

_PREDICTORS = ("forgetful_forest", "forgetful_tree", "online_random_forest")
_DETECTORS = ("adwin", "ddm")


def main(rows: int = 400) -> float:
    """Run every predictor and detector on ``rows`` synthetic instances; return the seconds."""
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    X = rng.random((rows, 4))
    y = ["a" if v > 0.5 else "b" for v in X[:, 0]]
    for predictor in _PREDICTORS:
        for detector in _DETECTORS:
            cfg = PipelineConfig(predictor=predictor, drift_detector=detector, n_trees=3,
                                 orf_trees=3, batch_size=50, ranking_every=100)
            Pipeline("warmup", cfg, X.shape[1]).process(X, y)
    return time.perf_counter() - started


def add_parser(subparsers) -> None:
    """Register ``streamforest warmup``."""
    p = subparsers.add_parser(
        "warmup", help="compile every numba kernel into the cache (run once after install)")
    p.set_defaults(func=_cmd_warmup)


def _cmd_warmup(args) -> int:
    print(f"numba kernels compiled in {main():.1f} s")
    return 0


if __name__ == "__main__":
    _cmd_warmup(None)
