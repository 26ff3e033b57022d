"""The worker's default classification predictor holds the product target on a real stream.

Target: a default predictor (docs/library.md) within 0.5 accuracy points of river's
ARF-10 on every real classification stream, run as the worker runs it (each mini-batch of
100 predicted by the model as it stands, then learned). The whole streams are measured by
``tests/benchmarks/learners/bench_arf.py`` (``tests/benchmarks/learners/results/arf.md``); this guard runs the first 20,000
rows of Electricity in a few seconds. River takes about 20 s per seed on these rows, too
slow for the default run, and one seed moves either forest by a few tenths of a point
there, so our mean over seeds 1-5 is held against river's mean over seeds 1-5 measured
with::

    python tests/benchmarks/learners/bench_arf.py --streams electricity --rows 20000 --seeds 5 \\
        --no-sqrt1 --out /tmp/arf_slice.md

which gave river ARF-10 0.8088 +- 0.0022 (ours 0.8075 +- 0.0027, -0.14 points). The
forgetful forest, the default before the adaptive random forest, must stay behind it
there (0.8010 for seed 1; on the first 10,000 rows it is ahead, 0.7977 against 0.7950).
"""

from __future__ import annotations

import numpy as np
import pytest

from models import registry
from tests.shared_data import data_dir
from worker.pipeline import PipelineConfig
from worker.tools.dev.datasets import load

pytestmark = pytest.mark.slow  # accuracy on Electricity against river's ARF

RIVER_ARF10 = 0.8088  # mean over seeds 1-5, command in the module doc
ROWS = 20_000
SEEDS = (1, 2, 3, 4, 5)


def _electricity():
    d = load("electricity", data_dir())  # ../shared/data beside the checkout (CI clones too)
    return np.ascontiguousarray(d.X[:ROWS], dtype=np.float64), list(d.y[:ROWS])


def _build(name: str, seed: int):
    """A predictor as the worker builds it for a classification stream."""
    cfg = PipelineConfig()
    return registry.get(name).build(cfg.params_of(name), (registry.PREDICTOR,), seed)


def _prequential_accuracy(model, X, y, batch=100) -> float:
    """The worker's protocol: predict a mini-batch with the model as it stands, then learn it."""
    hits = 0
    for s in range(0, len(y), batch):
        pred = model.predict_many(X[s:s + batch])
        hits += sum(p == t for p, t in zip(pred, y[s:s + batch]))
        model.learn_many(X[s:s + batch], y[s:s + batch])
    return hits / len(y)


def test_default_predictor_is_within_half_a_point_of_river_arf10_on_electricity():
    name = PipelineConfig().predictor_for(registry.CLASSIFICATION)
    X, y = _electricity()
    ours = np.mean([_prequential_accuracy(_build(name, s), X, y) for s in SEEDS])
    assert abs(ours - RIVER_ARF10) <= 0.005, (name, ours, RIVER_ARF10)
    forgetful = _prequential_accuracy(_build("forgetful_forest", SEEDS[0]), X, y)
    assert ours > forgetful, (name, ours, forgetful)
