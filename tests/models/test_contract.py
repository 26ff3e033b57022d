"""One contract suite run over every learner of the numba core.

Learners are discovered, not listed: every :class:`models.base.Learner` subclass that defines a
``_contract_params()`` classmethod (small constructor arguments) is checked here, so a new
learner is covered the moment it exists. The checks follow the contract in
:mod:`models.base`: predictions before learning are defined, inputs are never mutated, equal
seeds give equal outputs, ``to_state() -> msgpack -> from_state()`` predicts identically and
keeps learning identically, and bad input raises a readable ``ValueError``.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

import models
from models.base import Learner
from schemas.codec import decode_state, encode_state


def _all_learners() -> list[type]:
    for info in pkgutil.iter_modules(models.__path__):
        importlib.import_module(f"models.{info.name}")
    found, todo = [], list(Learner.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "_contract_params" in vars(cls) or any(
            "_contract_params" in vars(b) for b in cls.__mro__[1:-1] if b is not Learner
        ):
            found.append(cls)
    return sorted(set(found), key=lambda c: c.__name__)


LEARNERS = _all_learners()


def _stream(seed: int, n: int = 400, d: int = 5, labels=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    score = X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 2]
    cuts = np.quantile(score, np.linspace(0, 1, len(labels) + 1)[1:-1])
    y = [labels[int(k)] for k in np.searchsorted(cuts, score)]
    return X, y


def _learn(model, X, y, batch: int = 50) -> None:
    for start in range(0, X.shape[0], batch):
        model.learn_many(X[start:start + batch], y[start:start + batch])


def _outputs(model, X):
    return np.asarray(model.predict_proba_many(X)), list(model.predict_many(X))


def _build(cls):
    return cls(**cls._contract_params())


def test_learners_are_discovered():
    names = {cls.__name__ for cls in LEARNERS}
    assert names, "no learner defines _contract_params()"


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_predictions_before_learning_are_defined(cls):
    model = _build(cls)
    X, _ = _stream(0, n=7)
    proba = np.asarray(model.predict_proba_many(X))
    labels = model.predict_many(X)
    assert len(labels) == 7
    assert proba.shape[0] == 7 and np.isfinite(proba).all()
    if proba.shape[1]:
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.n_seen == 0


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_learning_counts_and_predicts_known_labels(cls):
    model = _build(cls)
    X, y = _stream(1)
    _learn(model, X, y)
    assert model.n_seen == X.shape[0]
    proba, labels = _outputs(model, X)
    assert set(labels) <= set(y)
    assert proba.shape == (X.shape[0], len(set(y)))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # the stream is learnable: far better than the 1/3 of a constant guess
    assert np.mean(np.array(labels) == np.array(y)) > 0.5


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_inputs_are_not_mutated(cls):
    model = _build(cls)
    X, y = _stream(2)
    X_copy, y_copy = X.copy(), list(y)
    _learn(model, X, y)
    model.predict_many(X)
    model.predict_proba_many(X)
    np.testing.assert_array_equal(X, X_copy)
    assert y == y_copy


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_same_seed_same_outputs(cls):
    X, y = _stream(3)
    a, b = _build(cls), _build(cls)
    _learn(a, X, y)
    _learn(b, X, y)
    pa, la = _outputs(a, X)
    pb, lb = _outputs(b, X)
    np.testing.assert_array_equal(pa, pb)
    assert la == lb
    ia, ib = a.importances(), b.importances()
    assert ia.keys() == ib.keys()
    for key in ia:
        np.testing.assert_array_equal(ia[key], ib[key])


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_state_round_trip_through_msgpack(cls):
    X, y = _stream(4, n=600)
    original = _build(cls)
    _learn(original, X[:300], y[:300])
    restored = cls.from_state(decode_state(encode_state(original.to_state())))
    assert restored.n_seen == original.n_seen
    np.testing.assert_array_equal(_outputs(restored, X)[0], _outputs(original, X)[0])
    # both continue identically, random-number state included
    _learn(original, X[300:], y[300:])
    _learn(restored, X[300:], y[300:])
    po, lo = _outputs(original, X)
    pr, lr = _outputs(restored, X)
    np.testing.assert_array_equal(po, pr)
    assert lo == lr
    so, sr = original.to_state(), restored.to_state()
    assert so["arrays"].keys() == sr["arrays"].keys()
    for key in so["arrays"]:
        np.testing.assert_array_equal(so["arrays"][key], sr["arrays"][key], err_msg=key)


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_bad_input_raises_clear_value_error(cls):
    model = _build(cls)
    X, y = _stream(5, n=100)
    _learn(model, X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict_many(X[:, :3])
    with pytest.raises(ValueError, match="features"):
        model.learn_many(X[:, :3], y)
    bad = X.copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.learn_many(bad, y)
    with pytest.raises(ValueError, match="NaN"):
        model.predict_many(bad)
    with pytest.raises(ValueError, match="2-D"):
        model.predict_many(X[0])
    with pytest.raises(ValueError):
        model.learn_many(X[:10], y[:9])


def test_check_x_takes_float_matrices_as_they_are_and_finds_bad_values():
    from models.base import check_X

    huge = np.full((3, 2), 1.5e308)  # finite, although their sum is not
    assert check_X(huge) is huge  # a C-contiguous float64 matrix is taken as it is
    mixed = np.array([[1e308, -1e308], [np.inf, 1.0]])
    with pytest.raises(ValueError, match="row 1, column 0"):
        check_X(mixed)
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    out = check_X(strided)
    assert out.flags.c_contiguous and np.array_equal(out, strided)
    assert check_X([[1, 2], [3, 4]]).dtype == np.float64
    with pytest.raises(ValueError, match="numeric"):
        check_X([["a", "b"]])
