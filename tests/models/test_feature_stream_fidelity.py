"""Small, fast version of the fidelity experiment of Motl & Kordík (2019).

The full run (``tests/benchmarks/fidelity/fidelity_feature_stream.py``: 15 datasets x 10 seeds; table
in ``tests/benchmarks/fidelity/results/feature_stream.md``) follows the paper's protocol: random column
order, stratified 2/3-1/3 split, columns fed one at a time, test AUC after the last. Here: the
same protocol and code on three small datasets shipped with river, two seeds each (about
four seconds). Measured on these seeds (challenger / baseline / offline, mean of the two):
Bananas 0.917 / 0.844 / 0.957, river's Phishing 0.976 / 0.971 / 0.973, Image segments
0.995 / 0.983 / 0.995. The assertions are the paper's claims with margins from those numbers:
the challenger's mean AUC is above the baseline's on every dataset and on most dataset-seed
pairs, and close to the offline forest's.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.benchmarks.fidelity.fidelity_feature_stream import DATASETS, FIRST_SEED, run_pair

pytestmark = pytest.mark.slow  # accuracy runs against the reference

NAMES = ("bananas", "river_phishing", "segment")


@pytest.fixture(scope="module")
def results():
    out = {}
    for name in NAMES:
        X, y = DATASETS[name][0]()
        out[name] = [run_pair(X, y, FIRST_SEED + k) for k in range(2)]
    return out


def _mean(runs, key):
    return float(np.mean([r[key] for r in runs]))


@pytest.mark.parametrize("name", NAMES)
def test_challenger_beats_baseline_on_average(results, name):
    runs = results[name]
    assert _mean(runs, "challenger") > _mean(runs, "baseline"), runs
    # the online forest ends close to one trained on all columns at once (Bananas, two
    # columns only, is the farthest: 0.04 below)
    assert _mean(runs, "challenger") > _mean(runs, "offline") - 0.06, runs


def test_challenger_beats_baseline_on_most_pairs(results):
    wins = sum(r["challenger"] > r["baseline"] for runs in results.values() for r in runs)
    assert wins >= 4, results  # 5 of 6 measured
