"""The warm-up (``make setup``, the image's build step, ``streamforest warmup``) compiles every
pipeline kind without error, covers every learner of the registry in every role, and leaves
nothing for a worker's default pipelines to compile."""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
from numba.core.registry import CPUDispatcher

import models
from models import registry
from models.generators.hyperplane import RotatingHyperplane
from schemas.checkpoint import StreamCheckpoint
from worker import wire
from worker.checkpoint_store import decode_blob, encode_blob
from worker.pipeline import Pipeline, PipelineConfig, pipeline_from_state
from worker.tools import warmup


def _signatures() -> dict[str, set[str]]:
    """Every compiled signature of every kernel of :mod:`models` and of the bulk decoder."""
    out = {}
    for info in pkgutil.walk_packages(models.__path__, "models."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == module.__name__:
                out[f"{module.__name__}.{name}"] = set(map(str, obj.signatures))
    out["worker.wire._PARSE"] = set(map(str, wire._PARSE.signatures)) if wire._PARSE else set()
    return out


def _restored(pl: Pipeline) -> Pipeline:
    """``pl`` through a checkpoint's encoding, as a worker restores it."""
    blob = encode_blob(StreamCheckpoint(
        group="g", topics=["i", "f"], partition=0, stream=pl.stream, config=pl.cfg.as_dict(),
        offsets={"i": 0, "f": 0}, state=pl.to_state(), ts=0))
    return pipeline_from_state(decode_blob(blob).state)


def _default_runs(X: np.ndarray, y: np.ndarray) -> None:
    """What a worker with default settings runs on rows ``X, y``: both tasks, labels as the
    decoders give them (ints from the bulk decoder, strings), unlabelled rows, a restore,
    then more rows."""
    for labels in ([int(v) for v in y], ["up" if v else "down" for v in y]):
        pl = Pipeline("s", PipelineConfig(), X.shape[1])
        pl.process(X[:600], labels[:600])
        pl = _restored(pl)
        rest = [None if i % 7 == 0 else v for i, v in enumerate(labels[600:])]
        pl.process(np.ascontiguousarray(X[600:]), rest)
    targets = np.column_stack([X[:, :3].sum(axis=1), X[:, 3] * X[:, 4]]).tolist()
    pl = Pipeline("r", PipelineConfig(), X.shape[1])
    pl.process(X[:600], targets[:600])
    _restored(pl).process(X[600:], targets[600:])


def test_warmup_covers_every_learner_in_every_role():
    covered = set()
    for cfg in warmup.configs():
        covered.update((name, registry.PREDICTOR, cfg.task) for name in cfg.predictor)
        covered.update((name, registry.RANKER, cfg.task) for name in cfg.rankers)
        covered.update((name, registry.DETECTOR, cfg.task) for name in cfg.detectors)
        if cfg.selector:
            covered.add((cfg.selector, registry.SELECTOR, cfg.task))
    for name in registry.names():
        spec = registry.get(name)
        for role in spec.roles:
            for task in spec.tasks:
                assert (name, role, task) in covered


def test_warmup_leaves_nothing_for_the_default_pipelines_to_compile():
    assert warmup.main(rows=120) > 0.0
    # the rows come from a generator whose kernels the worker never runs: drawn before the
    # count, so that the count holds only what a worker compiles
    X, y, _ = RotatingHyperplane(n_features=6, n_drift_features=2, seed=3).take(1200)
    before = _signatures()
    _default_runs(X, y)
    after = _signatures()
    new = {k: sorted(v - before.get(k, set())) for k, v in after.items()}
    assert {k: v for k, v in new.items() if v} == {}


def test_each_kernel_compiled_once_per_argument_layout():
    """Constants passed between kernels do not add literal-typed specialisations."""
    warmup.main(rows=120)
    literal = {k: [s for s in v if "Literal[" in s] for k, v in _signatures().items()}
    assert {k: v for k, v in literal.items() if v} == {}


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_plain_progress_line_per_step_when_not_on_a_terminal():
    import io

    out, clock = io.StringIO(), _Clock()
    progress = warmup.Progress(stream=out, clock=clock)  # a StringIO is not a terminal
    assert progress.live is False
    progress.begin(2)
    progress.start("bulk decoder")
    clock.t = 2.9
    progress.done("bulk decoder")
    progress.start("classification adaptive_random_forest")
    clock.t = 15.34
    progress.done("classification adaptive_random_forest")
    progress.end()
    assert out.getvalue().splitlines() == [
        "warmup: 1/2 bulk decoder (2.9 s)",
        "warmup: 2/2 classification adaptive_random_forest (12.4 s)",
    ]


def test_progress_names_every_step_of_the_warmup():
    """One step for the decoder, then one per configuration, each labelled by what it
    compiles (the learners' names), counted to the total."""
    labels = [warmup.label(cfg) for cfg in warmup.configs()]
    assert all(label.startswith(("classification ", "regression ")) for label in labels)
    for cfg, label in zip(warmup.configs(), labels, strict=True):
        named = cfg.selector or (cfg.rankers[0] if cfg.rankers else cfg.predictor[0])
        assert named in label and "(" not in label

    class Recorder:
        def __init__(self):
            self.calls = []

        def begin(self, total):
            self.calls.append(("begin", total))

        def start(self, name):
            self.calls.append(("start", name))

        def done(self, name):
            self.calls.append(("done", name))

        def end(self):
            self.calls.append(("end",))

    rec = Recorder()
    warmup.main(rows=120, progress=rec)
    steps = ["bulk decoder", *labels]
    assert rec.calls[0] == ("begin", len(steps))
    assert [c[1] for c in rec.calls if c[0] == "done"] == steps
    assert rec.calls[-1] == ("end",)
