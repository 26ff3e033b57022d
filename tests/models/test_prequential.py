"""Test-then-train in one kernel call: each row predicted by the model that learned every
earlier row, exactly as one predict and one learn call per row would.

Every learner that learns row by row (the adaptive random forest, the Hoeffding tree, naive
Bayes, the online random forest, the iSOUP tree and forest, the DDM drift wrapper) has a
fused call:
``predict_proba_learn_many(X, y)`` for classifiers, ``predict_learn_many(X, Y)`` for
regressors. The worker's pipeline feeds its predictor through it, so an instance is never
predicted by a model a mini-batch old (``tests/unit/test_pipeline.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from models import registry
from models.generators.hyperplane import RotatingHyperplane
from models.hoeffding.adaptive_forest import AdaptiveRandomForest
from models.hoeffding.naive_bayes import NaiveBayes
from models.registry import CLASSIFICATION, DETECTOR, PREDICTOR, REGRESSION
from schemas.codec import decode_state, encode_state

FUSED = [n for n in registry.names(PREDICTOR)
         if hasattr(registry.get(n).cls, "predict_proba_learn_many")
         or (REGRESSION in registry.get(n).tasks and hasattr(registry.get(n).cls, "predict_learn_many"))]


def _build(name: str, seed: int = 5):
    spec = registry.get(name)
    return spec.build({}, tuple(spec.roles - {DETECTOR}), seed=seed)


def _data(name: str, n: int = 900):
    X, y, _ = RotatingHyperplane(n_features=5, n_drift_features=2, mag_change=0.01, seed=3).take(n)
    if REGRESSION in registry.get(name).tasks:
        return X, np.column_stack([X[:, 0] + X[:, 1], X[:, 2] * 3.0])
    labels = ["u" if v else "d" for v in y]
    labels[n // 2:n // 2 + 15] = ["z"] * 15  # a class that appears mid-stream
    return X, labels


def _fused(model, X, y):
    if hasattr(model, "predict_proba_learn_many"):
        return model.predict_proba_learn_many(X, y)
    return model.predict_learn_many(X, y)


def _row_by_row(model, X, y):
    """One predict and one learn call per row, predictions padded to the final classes."""
    rows = []
    classifier = hasattr(model, "predict_proba_learn_many")
    for i in range(X.shape[0]):
        rows.append(model.predict_proba_many(X[i:i + 1])[0] if classifier
                    else model.predict_many(X[i:i + 1])[0])
        model.learn_many(X[i:i + 1], y[i:i + 1])
    width = len(model.classes) if classifier else y.shape[1]
    out = np.zeros((len(rows), width))
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def test_every_row_by_row_predictor_has_a_fused_kernel():
    assert {"adaptive_random_forest", "hoeffding_tree", "naive_bayes", "online_random_forest",
            "isoup_tree", "isoup_symrf"} <= set(FUSED)


@pytest.mark.parametrize("name", FUSED)
def test_the_fused_kernel_equals_a_predict_and_a_learn_call_per_row(name):
    X, y = _data(name)
    fused = _fused(_build(name), X, y)
    np.testing.assert_array_equal(fused, _row_by_row(_build(name), X, y))


@pytest.mark.parametrize("name", FUSED)
def test_a_restored_learner_goes_on_as_the_uninterrupted_one(name):
    X, y = _data(name)
    whole = _build(name)
    expected = _fused(whole, X, y)
    part = _build(name)
    first = _fused(part, X[:450], y[:450])
    restored = type(part).from_state(decode_state(encode_state(part.to_state())))
    rest = _fused(restored, X[450:], y[450:])
    got = np.zeros_like(expected)
    got[:450, :first.shape[1]] = first
    got[450:, :rest.shape[1]] = rest
    np.testing.assert_array_equal(got, expected)


def test_naive_bayes_rows_checked_by_hand():
    """MOA's naive Bayes (point masses for a class seen at one value): row 0 is predicted by
    an empty model (no probabilities), row 1 by a model that knows only ``a``, row 2 by one
    that saw ``a`` at 0 and ``b`` at 1, row 3 by one that saw ``a`` twice at 0."""
    X = np.array([[0.0], [1.0], [0.0], [1.0]])
    P = NaiveBayes().predict_proba_learn_many(X, ["a", "b", "a", "b"])
    assert P.tolist() == [[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]


def test_unlabelled_rows_are_predicted_and_not_learned():
    X, y = _data("adaptive_random_forest", 600)
    labels = [None if i % 5 == 2 else v for i, v in enumerate(y)]
    a = AdaptiveRandomForest(n_models=4, seed=2)
    P = a.predict_proba_learn_many(X, labels)
    b = AdaptiveRandomForest(n_models=4, seed=2)
    for i in range(len(labels)):
        row = b.predict_proba_many(X[i:i + 1])[0]
        np.testing.assert_array_equal(P[i, :len(row)], row)
        if labels[i] is not None:
            b.learn_many(X[i:i + 1], labels[i:i + 1])
    assert a.n_seen == b.n_seen == sum(v is not None for v in labels)
    assert a.predict_learn_many(X[:1], [None]) == b.predict_many(X[:1])


@pytest.mark.parametrize("name", [n for n in FUSED if CLASSIFICATION in registry.get(n).tasks])
def test_labels_are_the_most_probable_class_and_none_before_learning(name):
    X, y = _data(name, 200)
    model = _build(name)
    labels = model.predict_learn_many(X, y)
    assert labels[0] is None
    other = _build(name)
    P = other.predict_proba_learn_many(X, y)
    expect = [other.classes[k] for k in np.argmax(P, axis=1)]
    assert labels[1:] == [e if p.sum() > 0 else None for e, p in zip(expect, P)][1:]


@pytest.mark.parametrize("inner", ["naive_bayes", "hoeffding_tree"])
def test_the_drift_wrapper_returns_the_tests_it_makes(inner):
    # MOA's DriftDetectionMethodClassifier tests every row before learning it; its fused
    # call returns those tests, equal to one predict and one learn call per row, through a
    # drift (the labels flip at row 450: the background learner takes over)
    from models.drift.drift_wrapper import DriftDetectionClassifier

    X, y = _data("naive_bayes")
    flip = {"u": "d", "d": "u", "z": "z"}
    y = y[:450] + [flip[v] for v in y[450:]]
    fused = DriftDetectionClassifier(_build(inner))
    got = fused.predict_proba_learn_many(X, y)
    ref_model = DriftDetectionClassifier(_build(inner))
    want = _row_by_row(ref_model, X, np.array(y, dtype=object))
    assert fused.n_drifts == ref_model.n_drifts >= 1
    assert fused.classes == ref_model.classes
    np.testing.assert_array_equal(got, want)
    assert fused.n_seen == len(y)
