"""Compile every numba kernel a worker can use, once, into the numba cache.

The worker image runs this at build time (``deploy/docker/Dockerfile``) and ``make setup``
after installing, so that a new pod or a fresh install starts processing at once instead of
compiling its first stream's kernels while its partitions wait. It runs every learner of the
registry (:mod:`models.registry`) in every role it can take, with its small parameters,
through a pipeline on a short synthetic stream of each task it serves, and every detector
behind it, and the worker's bulk decoder of instances (:func:`worker.wire.decode_bulk`).
Kernels are typed by their arguments' dtypes and layouts, not by sizes or parameter
values, so these small runs compile every specialisation the worker's default pipelines use
(``tests/unit/test_warmup.py`` checks it).
"""

from __future__ import annotations

import time

import msgpack
import numpy as np

from models import registry
from models.registry import CLASSIFICATION, DETECTOR, PREDICTOR, RANKER, REGRESSION, SELECTOR

from .. import wire
from ..pipeline import FeatureStreamPipeline, Pipeline, PipelineConfig


def _stream(task: str, rows: int, rng) -> tuple[np.ndarray, list]:
    X = rng.random((rows, 4))
    if task == CLASSIFICATION:
        return X, ["a" if v > 0.5 else "b" for v in X[:, 0]]
    return X, [[float(a), float(a + b)] for a, b in X[:, :2]]


def configs() -> list[PipelineConfig]:
    """One pipeline per (learner, role, task) of the registry, with every detector."""
    small = {n: dict(registry.get(n).small_params) for n in registry.names()}
    detectors = registry.names(role=DETECTOR)
    out = []
    for task in (CLASSIFICATION, REGRESSION):
        predictors = registry.names(PREDICTOR, task)
        if not predictors:
            continue
        # rankers and selectors run behind a test-then-train predictor (a stream of
        # features takes neither)
        first = next(n for n in predictors if not registry.get(n).arrivals)
        for name in predictors:
            out.append(PipelineConfig(task=task, predictor=name, rankers=[], detectors=detectors,
                                      params=small, batch_size=50, ranking_every=100))
        for name in registry.names(RANKER, task):
            out.append(PipelineConfig(task=task, predictor=first, rankers=[name], detectors=[],
                                      params=small, batch_size=50, ranking_every=100))
        for name in registry.names(SELECTOR, task):
            out.append(PipelineConfig(task=task, predictor=first, selector=name, rankers=[],
                                      detectors=[], params=small, batch_size=50,
                                      ranking_every=100))
    return out


def main(rows: int = 400) -> float:
    """Run every configuration of :func:`configs` on ``rows`` instances; return the seconds."""
    started = time.perf_counter()
    _decoder()
    rng = np.random.default_rng(0)
    for cfg in configs():
        X, y = _stream(cfg.task, rows, rng)
        if cfg.arrivals:
            _arrivals(cfg, X, y)
        else:
            Pipeline("warmup", cfg, X.shape[1]).process(X, y)
    return time.perf_counter() - started


def _decoder() -> None:
    """The bulk decoder a worker runs on every poll, on one plain instance."""
    value = msgpack.packb({"v": 1, "stream": "w", "id": 0, "ts": 0, "x": [0.5], "y": 1})
    wire.decode_bulk([value], [b"w"], 1 << 20)


def _arrivals(cfg: PipelineConfig, X: np.ndarray, y: list) -> None:
    """A stream of features: rows held, then its columns arriving one at a time."""
    n = X.shape[0]
    pl = FeatureStreamPipeline("warmup", cfg, [], max_rows=n)
    ys = [v if i % 3 else None for i, v in enumerate(y)]
    pl.add([{}] * n, ys, list(range(n)), np.arange(n), list(range(n)))
    for k in range(X.shape[1]):
        pl.arrive(f"x{k}", {str(i): float(v) for i, v in enumerate(X[:, k])})


def add_parser(subparsers) -> None:
    """Register ``streamforest warmup``."""
    p = subparsers.add_parser(
        "warmup", help="compile every numba kernel into the cache (run once after install)",
        description="Compile every numba kernel a worker can use into numba's cache: every "
        "learner of the registry in every role it can take, on short synthetic streams, and "
        "the bulk decoder of instances. Run it once after installing (the worker image runs "
        "it at build time), so a new worker processes its first stream at once instead of "
        "compiling while its partitions wait. Takes a few minutes; prints the seconds spent.")
    p.set_defaults(func=_cmd_warmup)


def _cmd_warmup(args) -> int:
    print(f"numba kernels compiled in {main():.1f} s")
    return 0


if __name__ == "__main__":
    _cmd_warmup(None)
