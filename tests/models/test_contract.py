"""One contract suite run over every learner family of the registry.

Learners are found through :mod:`models.registry`, not listed here, so a new family is
covered the moment it is registered: every predictor, ranker and selector is built with its
spec's ``small_params`` and checked for each task it serves (classification: labels and
probabilities; multi-target regression: ``(n, n_targets)`` targets and predictions);
every detector is checked on a loss sequence. The checks follow the contract in
:mod:`models.core.base`: predictions before learning are defined, inputs are never mutated,
equal seeds give equal outputs, ``to_state() -> msgpack -> from_state()`` predicts
identically and keeps learning identically, and bad input raises a readable ``ValueError``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import models
from models import registry
from models.registry import CLASSIFICATION, DETECTOR, PREDICTOR, REGRESSION
from schemas.codec import decode_state, encode_state
from tests.models.reference.least_squares import SPEC as LEAST_SQUARES

#: learners whose columns grow as features arrive: checked by their own suites
GROWING = frozenset({"feature_stream"})  # tests/models/test_feature_stream_forest.py


def _cases(task: str) -> list[str]:
    return [n for n in registry.names(task=task)
            if set(registry.get(n).roles) - {DETECTOR} and n not in GROWING]


@pytest.fixture(autouse=True, scope="module")
def reference_regressor():
    """A test-only regressor runs the regression cases beside the registered families."""
    registry.register(LEAST_SQUARES)
    yield
    registry.unregister(LEAST_SQUARES.name)


CLASSIFIERS = _cases(CLASSIFICATION)
REGRESSORS = _cases(REGRESSION) + [LEAST_SQUARES.name]
DETECTORS = registry.names(role=DETECTOR)


def _build(name: str, seed: int = 1):
    spec = registry.get(name)
    return spec.build(spec.small_params, tuple(spec.roles - {DETECTOR}), seed=seed)


def _stream(seed: int, n: int = 400, d: int = 5, labels=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    score = X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 2]
    cuts = np.quantile(score, np.linspace(0, 1, len(labels) + 1)[1:-1])
    y = [labels[int(k)] for k in np.searchsorted(cuts, score)]
    return X, y


def _targets(seed: int, n: int = 400, d: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = np.column_stack([2.0 * X[:, 0] + X[:, 1], np.where(X[:, 2] > 0.5, 3.0, -1.0),
                         X[:, 3] * X[:, 4]]) + rng.normal(0, 0.05, (n, 3))
    return X, Y


def _learn(model, X, y, batch: int = 50) -> None:
    for start in range(0, X.shape[0], batch):
        model.learn_many(X[start:start + batch], y[start:start + batch])


def _outputs(model, X):
    """Whatever the learner answers for ``X``, as comparable arrays/lists."""
    if hasattr(model, "predict_proba_many"):
        return np.asarray(model.predict_proba_many(X)), list(model.predict_many(X))
    if hasattr(model, "predict_many"):
        return np.asarray(model.predict_many(X), dtype=np.float64), []
    if hasattr(model, "selected"):
        return np.asarray(model.selected()), []
    imp = model.importances()  # a ranker only: its importances are what it answers
    return np.concatenate([np.asarray(imp[k], float) for k in sorted(imp)] or [np.zeros(0)]), []


def _importances_equal(a, b) -> None:
    ia, ib = a.importances(), b.importances()
    assert ia.keys() == ib.keys()
    for key in ia:
        np.testing.assert_array_equal(ia[key], ib[key])


def _round_trip(original, X, learn_rest) -> None:
    restored = type(original).from_state(decode_state(encode_state(original.to_state())))
    assert restored.n_seen == original.n_seen
    np.testing.assert_array_equal(_outputs(restored, X)[0], _outputs(original, X)[0])
    # both continue identically, random-number state included
    learn_rest(original)
    learn_rest(restored)
    po, lo = _outputs(original, X)
    pr, lr = _outputs(restored, X)
    np.testing.assert_array_equal(po, pr)
    assert lo == lr
    so, sr = original.to_state(), restored.to_state()
    assert so["arrays"].keys() == sr["arrays"].keys()
    for key in so["arrays"]:
        np.testing.assert_array_equal(so["arrays"][key], sr["arrays"][key], err_msg=key)


def test_the_registry_has_learners_of_every_role():
    assert CLASSIFIERS and DETECTORS
    for name in registry.names():
        spec = registry.get(name)
        assert spec.summary and spec.cls.__doc__, name
        if PREDICTOR in spec.roles and CLASSIFICATION in spec.tasks:
            assert hasattr(spec.cls, "predict_proba_many"), name


# --- classification ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_predictions_before_learning_are_defined(name):
    model = _build(name)
    X, _ = _stream(0, n=7)
    proba, labels = _outputs(model, X)
    if hasattr(model, "predict_many"):
        assert len(labels) == 7
        assert proba.shape[0] == 7 and np.isfinite(proba).all()
        if proba.shape[1]:
            np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.n_seen == 0


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_learning_counts_and_predicts_known_labels(name):
    model = _build(name)
    X, y = _stream(1)
    _learn(model, X, y)
    assert model.n_seen == X.shape[0]
    if not hasattr(model, "predict_many"):
        return
    proba, labels = _outputs(model, X)
    assert set(labels) <= set(y)
    assert proba.shape == (X.shape[0], len(set(y)))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # the stream is learnable: far better than the 1/3 of a constant guess
    assert np.mean(np.array(labels) == np.array(y)) > 0.5


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_inputs_are_not_mutated(name):
    model = _build(name)
    X, y = _stream(2)
    X_copy, y_copy = X.copy(), list(y)
    _learn(model, X, y)
    _outputs(model, X)
    np.testing.assert_array_equal(X, X_copy)
    assert y == y_copy


def _kernel_variants() -> int:
    """Kernel signatures compiled or loaded in this process so far, over the numba core."""
    import sys

    from numba.core.registry import CPUDispatcher

    return sum(len(obj.signatures) for mod in list(sys.modules.values())
               if getattr(mod, "__name__", "").startswith("models.")
               for obj in list(vars(mod).values()) if isinstance(obj, CPUDispatcher))


@pytest.mark.parametrize("name", CLASSIFIERS + REGRESSORS)
def test_read_only_inputs_and_state_compile_no_kernel_again(name):
    """Read-only rows (``np.frombuffer`` over a message, a memory map) and a learner whose
    unpickled arrays are read-only (``joblib.load(..., mmap_mode="r")``) answer as writable
    ones do, through the kernels already compiled: numba would compile each kernel again,
    for seconds each, for read-only array types."""
    import pickle

    X, y = (_stream(6) if name in CLASSIFIERS else _targets(6))
    a, b = _build(name), _build(name)
    _learn(a, X, y)
    before = _outputs(a, X)
    n_variants = _kernel_variants()
    frozen = X.copy()
    frozen.flags.writeable = False
    _learn(b, frozen, y)
    restored = pickle.loads(pickle.dumps(b))
    for value in [*vars(restored).values(), *getattr(restored, "_arrays", {}).values()]:
        if isinstance(value, np.ndarray):
            value.flags.writeable = False  # as a memory-mapped load leaves them
    restored = pickle.loads(pickle.dumps(restored))
    after = _outputs(restored, frozen)
    assert _kernel_variants() == n_variants
    for u, v in zip(before, after):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_same_seed_same_outputs(name):
    X, y = _stream(3)
    a, b = _build(name), _build(name)
    _learn(a, X, y)
    _learn(b, X, y)
    pa, la = _outputs(a, X)
    pb, lb = _outputs(b, X)
    np.testing.assert_array_equal(pa, pb)
    assert la == lb
    _importances_equal(a, b)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_bad_input_raises_clear_value_error(name):
    model = _build(name)
    X, y = _stream(5, n=100)
    _learn(model, X, y)
    with pytest.raises(ValueError, match="features"):
        model.learn_many(X[:, :3], y)
    bad = X.copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.learn_many(bad, y)
    with pytest.raises(ValueError):
        model.learn_many(X[:10], y[:9])
    if hasattr(model, "predict_many"):
        with pytest.raises(ValueError, match="features"):
            model.predict_many(X[:, :3])
        with pytest.raises(ValueError, match="NaN"):
            model.predict_many(bad)
        with pytest.raises(ValueError, match="2-D"):
            model.predict_many(X[0])


@pytest.mark.parametrize("name", [n for n in CLASSIFIERS
                                  if registry.SELECTOR in registry.get(n).roles])
def test_selector_selects_columns_and_reports_declared_events(name):
    spec = registry.get(name)
    model = _build(name)
    X, y = _stream(6, n=1500)
    kinds = set()
    for start in range(0, X.shape[0], 100):
        model.learn_many(X[start:start + 100], y[start:start + 100])
        kinds |= {e.kind for e in model.events()}
        chosen = list(model.selected())  # empty: nothing chosen yet, the predictor sees all
        assert len(set(chosen)) == len(chosen)
        assert all(0 <= int(c) < X.shape[1] for c in chosen)
    assert kinds <= set(spec.events) and chosen, "nothing selected on a stream with signal"
    keys = {key for key, _ in spec.rankings}
    scores = model.importances()
    assert keys <= set(scores) and all(np.asarray(scores[k]).shape == (X.shape[1],) for k in keys)


# --- multi-target regression ------------------------------------------------------------------


@pytest.mark.parametrize("name", REGRESSORS)
def test_regressor_predictions_before_learning_are_defined(name):
    model = _build(name)
    X, _ = _targets(0, n=7)
    answer = _outputs(model, X)[0]  # predictions, or a ranker's importances
    assert np.isfinite(answer).all() and model.n_seen == 0
    if hasattr(model, "predict_many"):
        assert answer.shape[0] == 7


@pytest.mark.parametrize("name", REGRESSORS)
def test_regressor_learns_every_target(name):
    model = _build(name)
    X, Y = _targets(1, n=2000)
    _learn(model, X, Y)
    assert model.n_seen == X.shape[0]
    if not hasattr(model, "predict_many"):  # a ranker: every declared ranking, every feature
        scores = model.importances()
        for key, _ in registry.get(name).rankings:
            values = np.asarray(scores[key])
            assert values.shape == (X.shape[1],) and np.isfinite(values).all()
            assert values.sum() > 0 and (values > 0).sum() >= 3  # all five features matter
        return
    P = np.asarray(model.predict_many(X))
    assert P.shape == Y.shape and np.isfinite(P).all()
    # better than predicting each target's mean
    assert np.abs(P - Y).mean() < np.abs(Y - Y.mean(axis=0)).mean()


@pytest.mark.parametrize("name", REGRESSORS)
def test_regressor_inputs_are_not_mutated_and_seeds_repeat(name):
    X, Y = _targets(2)
    X_copy, Y_copy = X.copy(), Y.copy()
    a, b = _build(name), _build(name)
    _learn(a, X, Y)
    _learn(b, X, Y)
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(Y, Y_copy)
    np.testing.assert_array_equal(_outputs(a, X)[0], _outputs(b, X)[0])
    _importances_equal(a, b)


@pytest.mark.parametrize("name", REGRESSORS)
def test_regressor_bad_input_raises_clear_value_error(name):
    model = _build(name)
    X, Y = _targets(5, n=100)
    _learn(model, X, Y)
    with pytest.raises(ValueError, match="features"):
        if hasattr(model, "predict_many"):
            model.predict_many(X[:, :3])
        else:
            model.learn_many(X[:, :3], Y)
    with pytest.raises(ValueError, match="target"):
        model.learn_many(X, Y[:, :2])
    bad = X.copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.learn_many(bad, Y)


# --- both tasks -------------------------------------------------------------------------------

BOTH = [pytest.param(n, _stream, id=n) for n in CLASSIFIERS] + [
    pytest.param(n, _targets, id=f"{n}-regression") for n in REGRESSORS]


@pytest.mark.parametrize(("name", "data"), BOTH)
def test_state_round_trip_through_msgpack(name, data):
    X, y = data(4, n=600)
    original = _build(name)
    _learn(original, X[:300], y[:300])
    _round_trip(original, X, lambda m: _learn(m, X[300:], y[300:]))


# --- restored state is a trust boundary -----------------------------------------------------


def _learned_state(name: str, data=None) -> tuple[type, dict]:
    model = _build(name)
    if DETECTOR in registry.get(name).roles:
        model.update_many((np.random.default_rng(8).random(300) < 0.3).astype(float))
    else:
        X, y = (data or _stream)(5, n=300)
        _learn(model, X, y)
    return type(model), model.to_state()


def _corruptions(state: dict):
    """(what, corrupted state) pairs every learner must refuse with ``ValueError``."""
    arrays = state["arrays"]
    largest = max(arrays, key=lambda k: arrays[k].size)
    for what, change in (
        ("missing array", lambda a: a.pop(largest)),
        ("unexpected array", lambda a: a.__setitem__("extra", np.zeros(3))),
        ("wrong dtype", lambda a: a.__setitem__(largest, a[largest].astype(np.float32))),
        ("wrong dimensions", lambda a: a.__setitem__(largest, a[largest].reshape(-1, 1)[:, :, None])),
        ("shape mismatch", lambda a: a.__setitem__(largest, np.ascontiguousarray(
            a[largest][..., :-1] if a[largest].shape[-1] > 1 else np.concatenate([a[largest]] * 2, -1)))),
    ):
        bad = {**state, "arrays": {k: v.copy() for k, v in arrays.items()}}
        change(bad["arrays"])
        yield what, bad
    # index arrays the kernels follow without bounds checks: one value far out of range
    for key, arr in arrays.items():
        if arr.dtype.kind == "i" and arr.size and key.split("_")[0] in INDEX_PREFIXES \
                and not key.endswith("counts"):
            bad = {**state, "arrays": {k: v.copy() for k, v in arrays.items()}}
            bad["arrays"][key].flat[arr.size // 2] = np.iinfo(arr.dtype).max
            yield f"{key} out of range", bad


#: integer state arrays whose values index other arrays (names start with one of these; class
#: tallies, ``*_counts``, are not indices)
INDEX_PREFIXES = frozenset({"node", "slot", "features", "rows", "sorted", "bucket"})


def _assert_corruptions_refused(name: str, cls, state: dict) -> None:
    seen = []
    for what, bad in _corruptions(state):
        with pytest.raises(ValueError):
            cls.from_state(bad)
            pytest.fail(f"{name} accepted a state with a {what}")
        seen.append(what)
    assert len(seen) >= 5


@pytest.mark.parametrize("name", CLASSIFIERS + DETECTORS)
def test_corrupt_state_is_refused_before_any_kernel_runs(name):
    cls, state = _learned_state(name)
    assert cls.from_state(decode_state(encode_state(state))).n_seen == state["arrays"]["n_seen"][0]
    _assert_corruptions_refused(name, cls, state)


@pytest.mark.parametrize("name", _cases(REGRESSION))
def test_corrupt_regressor_state_is_refused_before_any_kernel_runs(name):
    cls, state = _learned_state(name, _targets)
    _assert_corruptions_refused(name, cls, state)


# --- detectors --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DETECTORS)
def test_detector_reports_positions_and_round_trips(name):
    rng = np.random.default_rng(6)
    loss = np.concatenate([rng.random(2000) < 0.1, rng.random(2000) < 0.6]).astype(float)
    a = _build(name)
    drifts = np.asarray(a.update_many(loss[:2500]))
    assert drifts.dtype.kind == "i" and drifts.size and drifts.max() < 2500
    b = type(a).from_state(decode_state(encode_state(a.to_state())))
    np.testing.assert_array_equal(np.asarray(a.update_many(loss[2500:])),
                                  np.asarray(b.update_many(loss[2500:])))


def test_check_x_takes_float_matrices_as_they_are_and_finds_bad_values():
    from models.core.base import check_X

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


def test_every_learner_the_library_page_lists_is_importable_from_models():
    page = (Path(__file__).resolve().parents[2] / "docs" / "library.md").read_text()
    listed = {name for cell in re.findall(r"^\| (`[A-Z][^|]*) \|", page, re.M)
              for name in re.findall(r"`([A-Za-z]+)`", cell)}
    assert {"AdaptiveRandomForest", "BlockForestRanker", "ABFSClassifier"} <= listed
    assert listed <= set(models.__all__)
    assert all(isinstance(getattr(models, name), type) for name in listed)
