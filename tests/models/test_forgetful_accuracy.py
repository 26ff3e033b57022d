"""Accuracy of the forgetful tree and forest under the reference drivers' protocol.

Yuan, Sun & Shasha's drivers (``algorithms.md`` Sec. 1.8) test each mini-batch with the current
model before learning it and leave a warm-up prefix out of the accuracy: Electricity in daily
batches of 48 rows (first batch excluded), Phishing in batches of 100 (first 5 excluded), Power
supply in batches of 100 (first 10 excluded), MIXED abrupt and gradual in batches of 100 (first
excluded). The thresholds are the reference implementation's accuracies we measured
(Sec. 1.9) minus half a point.

Two departures from the drivers, both in the reference code's favour: Electricity is read once
per row (45,312 rows; the reference reader repeats the last row of each day), and Power supply
excludes the same 10 batches from the numerator and the denominator (the reference counts
correct rows from batch 5 on but rows from batch 10 on, which adds about 0.3 points).
"""

from __future__ import annotations

import pytest

from models.forgetful.forgetful_forest import ForgetfulRandomForest
from models.forgetful.forgetful_tree import ForgetfulDecisionTree
from tests.shared_data import data_dir
from worker.tools.dev import datasets

pytestmark = pytest.mark.slow  # accuracy on real and synthetic streams

DATA_DIR = data_dir()

# dataset -> (batch size, warm-up batches excluded)
PROTOCOL = {
    "electricity": (48, 1),
    "phishing": (100, 5),
    "powersupply": (100, 10),
    "mixed_abrupt": (100, 1),
    "mixed_gradual": (100, 1),
}
# reference accuracies (algorithms.md Sec. 1.9): single tree, forest of 20 without bagging
REFERENCE_TREE = {"electricity": 0.772, "phishing": 0.902, "powersupply": 0.174,
                  "mixed_abrupt": 0.957, "mixed_gradual": 0.927}
REFERENCE_FOREST = {"electricity": 0.804, "phishing": 0.929, "powersupply": 0.183,
                    "mixed_abrupt": 0.971, "mixed_gradual": 0.9375}
REFERENCE_FOREST_BAGGING = {"phishing": 0.944}
SLACK = 0.005

_CACHE: dict[str, datasets.Dataset] = {}


def _load(name: str) -> datasets.Dataset:
    if name not in _CACHE:
        _CACHE[name] = datasets.load(name, DATA_DIR)
    return _CACHE[name]


def prequential_accuracy(model, name: str) -> float:
    """Test-then-train over the stream in the protocol's batches; accuracy after the warm-up."""
    data = _load(name)
    b, warm = PROTOCOL[name]
    X, y = data.X, list(data.y)
    correct = total = 0
    for i, start in enumerate(range(0, X.shape[0], b)):
        Xb, yb = X[start:start + b], y[start:start + b]
        if i >= warm:
            pred = model.predict_many(Xb)
            correct += sum(p == t for p, t in zip(pred, yb))
            total += len(yb)
        model.learn_many(Xb, yb)
    return correct / total


def test_electricity_is_read_as_the_reference_uses_it():
    data = _load("electricity")
    assert data.X.shape == (45312, 7) and "date" not in data.feature_names
    assert len({tuple(r) for r in data.X.tolist()}) > 45000


@pytest.mark.parametrize("name", list(PROTOCOL))
def test_forgetful_tree_accuracy(name):
    acc = prequential_accuracy(ForgetfulDecisionTree(), name)
    assert acc >= REFERENCE_TREE[name] - SLACK, f"{name}: {acc:.4f}"


@pytest.mark.parametrize("name", list(PROTOCOL))
def test_forgetful_forest_accuracy(name):
    acc = prequential_accuracy(ForgetfulRandomForest(n_trees=20, bagging=False, seed=1), name)
    assert acc >= REFERENCE_FOREST[name] - SLACK, f"{name}: {acc:.4f}"


@pytest.mark.parametrize("name", list(REFERENCE_FOREST_BAGGING))
def test_forgetful_forest_with_bagging_accuracy(name):
    acc = prequential_accuracy(ForgetfulRandomForest(n_trees=20, bagging=True, seed=1), name)
    assert acc >= REFERENCE_FOREST_BAGGING[name] - SLACK, f"{name}: {acc:.4f}"
