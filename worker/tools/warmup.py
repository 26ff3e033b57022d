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

import sys
import time
from collections.abc import Callable

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


def label(cfg: PipelineConfig) -> str:
    """What one configuration of :func:`configs` compiles, in a few words."""
    if cfg.selector:
        return f"{cfg.task} selector {cfg.selector}"
    if cfg.rankers:
        return f"{cfg.task} ranker {', '.join(cfg.rankers)}"
    return f"{cfg.task} {', '.join(cfg.predictor)}"


def main(rows: int = 400, progress: Progress | None = None) -> float:
    """Run every configuration of :func:`configs` on ``rows`` instances; return the seconds.

    ``progress`` (optional) is told of each step: the bulk decoder, then each configuration."""
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    steps: list[tuple[str, Callable[[], None]]] = [("bulk decoder", _decoder)]
    for cfg in configs():
        steps.append((label(cfg), lambda cfg=cfg: _run(cfg, rows, rng)))
    if progress is not None:
        progress.begin(len(steps))
    for name, run in steps:
        if progress is not None:
            progress.start(name)
        run()
        if progress is not None:
            progress.done(name)
    if progress is not None:
        progress.end()
    return time.perf_counter() - started


def _run(cfg: PipelineConfig, rows: int, rng) -> None:
    X, y = _stream(cfg.task, rows, rng)
    if cfg.arrivals:
        _arrivals(cfg, X, y)
    else:
        Pipeline("warmup", cfg, X.shape[1]).process(X, y)


class Progress:
    """The warm-up's steps on ``stream`` (stderr by default): one plain line per finished step,
    ``warmup: 3/9 classification adaptive_random_forest (12.4 s)``, or a rich progress line
    (the step compiling, n of N) when ``live`` (default: the stream is a terminal)."""

    def __init__(self, stream=None, live: bool | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.stream = stream if stream is not None else sys.stderr
        self.live = live if live is not None else _isatty(self.stream)
        self.clock = clock
        self.total = self.n = 0
        self.t0 = 0.0
        self.bar = None

    def begin(self, total: int) -> None:
        self.total, self.n = total, 0
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn("warmup"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), TextColumn("{task.description}"),
                           console=Console(file=self.stream), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=total)

    def start(self, name: str) -> None:
        self.t0 = self.clock()
        if self.bar is not None:
            self.bar.update(self.task, description=f"compiling {name}")

    def done(self, name: str) -> None:
        self.n += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1)
        else:
            print(f"warmup: {self.n}/{self.total} {name} ({self.clock() - self.t0:.1f} s)",
                  file=self.stream, flush=True)

    def end(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


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
        "compiling while its partitions wait. Takes a few minutes; shows each step on stderr (a "
        "progress line on a terminal, otherwise one line per step) and prints the seconds "
        "spent.")
    p.set_defaults(func=_cmd_warmup)


def _cmd_warmup(args) -> int:
    print(f"numba kernels compiled in {main(progress=Progress()):.1f} s")
    return 0


if __name__ == "__main__":
    _cmd_warmup(None)
