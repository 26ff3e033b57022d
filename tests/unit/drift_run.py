"""One small stream run through a pipeline with predictions, drift alerts and rankings of two
methods: the results the output tests encode (shared, so that they encode the same run)."""

from __future__ import annotations

import numpy as np

from worker.intake import StreamRows
from worker.pipeline import Pipeline, PipelineConfig


def drift_run(unlabelled_every: int | None = None, first_id: int = 0):
    """``(pipeline, result, StreamRows)`` of 600 rows whose concept flips at row 300, learned
    by a forgetful tree with two online random forests ranking and ADWIN; every
    ``unlabelled_every``-th row (from the fourth) unlabelled; ids from ``first_id``, event
    times from 1,000."""
    cfg = PipelineConfig(predictor="forgetful_tree", rankers=["online_random_forest"],
                         detectors=["adwin"], batch_size=10, ranking_every=50,
                         params={"online_random_forest": {"n_trees": 2}})
    rng = np.random.default_rng(1)
    X = rng.random((600, 3))
    y = [int(v) if i < 300 else 1 - int(v) for i, v in enumerate(X[:, 0] > 0.5)]  # a drift
    if unlabelled_every:
        y = [None if i % unlabelled_every == 3 else v for i, v in enumerate(y)]
    offsets = np.arange(600, dtype=np.int64)
    pl = Pipeline("s", cfg, 3)
    res = pl.process(X, y, offsets)
    sr = StreamRows.from_columns(X, y, offsets, np.arange(600, dtype=np.int64) + first_id,
                                 np.arange(600, dtype=np.int64) + 1_000, 0)
    return pl, res, sr
