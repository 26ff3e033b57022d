"""The river-style and scikit-learn-style adapters (:mod:`models.adapters`).

Each adapter must answer what its learner answers when called directly with the equivalent
arrays, bit for bit: dicts in any key order, labels of any hashable type, a class appearing
mid-stream, named importances, parameters and clones, states and pickles.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import (
    ABFS,
    ABFSClassifier,
    AdaptiveRandomForest,
    BlockForestRanker,
    BlockForestRegressionRanker,
    DriftDetectionClassifier,
    FeatureStreamForest,
    ISOUPTree,
    NaiveBayes,
    OnlineRandomForest,
    RiverStyleClassifier,
    RiverStyleRegressor,
    SklearnStyleClassifier,
    SklearnStyleRegressor,
    registry,
)
from models.adapters import NotFittedError
from schemas.codec import decode_state, encode_state

NAMES = ("temp", "load", "price", "hour")


def _stream(n: int = 600, seed: int = 0, late: int = 300):
    """Four features; classes 0 and 1 from the start, class 2 from row ``late`` on."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, len(NAMES)))
    y = (X[:, 0] + X[:, 1] > 1.0).astype(int)
    y[late:][X[late:, 2] > 0.7] = 2
    return X, y.tolist()


def _dicts(X, order=NAMES):
    return [{k: float(row[NAMES.index(k)]) for k in order} for row in X]


def _arf():
    return AdaptiveRandomForest(n_models=3, grace_period=20, seed=1)


# ------------------------------------------------------------------ river style


def test_river_classifier_answers_what_the_learner_answers_bit_for_bit():
    X, y = _stream()
    label = {0: "low", 1: "high", 2: "spike"}  # strings for the adapter, ints for the learner
    model, direct = RiverStyleClassifier(_arf()), _arf()
    for row, x, t in zip(X, _dicts(X), y):
        got = model.predict_proba_one(x)
        want = direct.predict_proba_many(row.reshape(1, -1))[0]
        assert list(got.values()) == want.tolist()
        assert list(got) == [label[c] for c in direct.classes]
        assert model.predict_one(x) == (None if not want.size else label[direct.predict_one(row)])
        model.learn_one(x, label[t])
        direct.learn_one(row, t)
    imp = model.importances()
    assert list(imp) == list(NAMES)
    assert list(imp.values()) == direct.importances()["split_gain"].tolist()
    assert model.learner.n_seen == direct.n_seen == len(y)


def test_river_classifier_reads_later_dicts_in_any_key_order():
    X, y = _stream(400)
    rng = np.random.default_rng(7)
    orders = [tuple(rng.permutation(NAMES)) for _ in range(len(y))]
    plain, shuffled = RiverStyleClassifier(_arf()), RiverStyleClassifier(_arf())
    for i, (row, t) in enumerate(zip(X, y)):
        plain.learn_one(_dicts([row])[0], t)
        shuffled.learn_one(_dicts([row], NAMES if i == 0 else orders[i])[0], t)
    assert shuffled.feature_names == list(NAMES)
    probe = _dicts(X[:50], tuple(reversed(NAMES)))
    assert plain.predict_proba_many(probe) == shuffled.predict_proba_many(probe)
    assert plain.importances() == shuffled.importances()


def test_river_classifier_features_given_up_front_fix_the_columns():
    X, y = _stream(300)
    given_order = RiverStyleClassifier(_arf(), features=NAMES)
    direct = _arf()
    given_order.learn_many(_dicts(X, tuple(reversed(NAMES))), y)
    direct.learn_many(X, y)
    assert np.array_equal(np.array([list(p.values()) for p in given_order.predict_proba_many(_dicts(X))]),
                          direct.predict_proba_many(X))


def test_river_classifier_takes_a_class_that_appears_mid_stream():
    X, y = _stream(600, late=300)
    model = RiverStyleClassifier(_arf())
    for x, t in zip(_dicts(X[:300]), y[:300]):
        model.learn_one(x, ("class", t))
    assert sorted(model.predict_proba_one(_dicts(X[:1])[0])) == [("class", 0), ("class", 1)]
    for x, t in zip(_dicts(X[300:]), y[300:]):
        model.learn_one(x, ("class", t))
    proba = model.predict_proba_one({"temp": 0.5, "load": 0.5, "price": 0.95, "hour": 0.5})
    assert set(proba) == {("class", 0), ("class", 1), ("class", 2)}
    assert max(proba, key=proba.get) == ("class", 2)
    assert model.classes == [("class", 0), ("class", 1), ("class", 2)]


def test_river_classifier_keeps_bool_labels_bool():
    X, y = _stream(300, late=300)
    model = RiverStyleClassifier(_arf())
    model.learn_many(_dicts(X), [bool(t) for t in y])
    assert model.learner.classes == [0, 1] or model.learner.classes == [1, 0]
    assert {type(label) for label in model.predict_many(_dicts(X[:20]))} == {bool}
    assert all(isinstance(k, bool) for k in model.predict_proba_one(_dicts(X[:1])[0]))


def test_river_classifier_refuses_missing_unknown_and_non_numeric_features():
    model = RiverStyleClassifier(_arf())
    model.learn_one({"a": 1.0, "b": 2.0}, "x")
    with pytest.raises(ValueError, match="lacks feature 'b'"):
        model.learn_one({"a": 1.0}, "x")
    with pytest.raises(ValueError, match="feature 'c' that the columns"):
        model.predict_one({"a": 1.0, "b": 2.0, "c": 3.0})
    with pytest.raises(ValueError, match="feature 'b' is 'high', not a number"):
        model.learn_one({"a": 1.0, "b": "high"}, "x")
    with pytest.raises(ValueError, match="NaN"):  # the learner's own refusal
        model.learn_one({"a": 1.0, "b": float("nan")}, "x")
    with pytest.raises(ValueError, match="label is needed"):
        model.learn_one({"a": 1.0, "b": 2.0}, None)
    assert model.learner.n_seen == 1


def test_river_classifier_may_ignore_unknown_features():
    ignoring, plain = RiverStyleClassifier(_arf(), unknown="ignore"), RiverStyleClassifier(_arf())
    X, y = _stream(200)
    for i, (x, t) in enumerate(zip(_dicts(X), y)):
        ignoring.learn_one(x if i == 0 else {**x, "note": 7.0}, t)  # the first fixes the columns
        plain.learn_one(x, t)
    assert ignoring.feature_names == list(NAMES)
    assert ignoring.predict_one({**_dicts(X[:1])[0], "note": 1.0}) == plain.predict_one(_dicts(X[:1])[0])
    assert ignoring.predict_proba_many(_dicts(X[:30])) == plain.predict_proba_many(_dicts(X[:30]))


def test_a_first_dict_that_fails_fixes_no_columns():
    model = RiverStyleClassifier(_arf())
    with pytest.raises(ValueError, match="not a number"):
        model.learn_one({"a": "x"}, 0)
    assert model.feature_names is None
    model.learn_one({"b": 1.0, "c": 2.0}, 0)
    assert model.feature_names == ["b", "c"]


def test_river_ranker_names_the_learners_importances_and_predicts_nothing():
    X, y = _stream(300)
    model = RiverStyleClassifier(BlockForestRanker(block_size=20, stride=5, n_trees=4, seed=1))
    direct = BlockForestRanker(block_size=20, stride=5, n_trees=4, seed=1)
    assert model.importances() == {}
    for x, row, t in zip(_dicts(X), X, y):
        model.learn_one(x, t)
        direct.learn_one(row, t)
    assert list(model.importances().values()) == direct.importances()["mdi"].tolist()
    with pytest.raises(TypeError, match="ranks features and predicts nothing"):
        model.predict_one(_dicts(X[:1])[0])


def test_river_importances_pick_a_ranking_by_name():
    X, y = _stream(300)
    orf = OnlineRandomForest(**registry.get("online_random_forest").small_params, seed=1)
    model = RiverStyleClassifier(orf)
    model.learn_many(_dicts(X), y)
    imps = orf.importances()
    assert list(model.importances().values()) == imps[next(iter(imps))].tolist()
    assert list(model.importances("mda").values()) == imps["mda"].tolist()
    with pytest.raises(ValueError, match="no importances 'gain'"):
        model.importances("gain")


def test_river_adapter_refuses_what_it_cannot_serve():
    with pytest.raises(TypeError, match="use RiverStyleRegressor"):
        RiverStyleClassifier(ISOUPTree())
    with pytest.raises(TypeError, match="use RiverStyleClassifier"):
        RiverStyleRegressor(_arf())
    with pytest.raises(TypeError, match="generation of trees"):
        RiverStyleClassifier(FeatureStreamForest())
    with pytest.raises(TypeError, match="not its class"):
        RiverStyleClassifier(AdaptiveRandomForest)
    with pytest.raises(ValueError, match="unknown must be one of"):
        RiverStyleClassifier(_arf(), unknown="drop")


def _targets(X):
    return np.column_stack([X[:, 0] + X[:, 1], X[:, 2] * 3.0])


def test_river_regressor_answers_what_the_learner_answers_with_named_targets():
    X, _ = _stream(400)
    Y = _targets(X)
    model, direct = RiverStyleRegressor(ISOUPTree(grace_period=50)), ISOUPTree(grace_period=50)
    assert model.predict_one(_dicts(X[:1])[0]) is None
    for x, row, t in zip(_dicts(X), X, Y):
        model.learn_one(x, {"sum": t[0], "triple": t[1]})
        direct.learn_one(row, t)
    assert model.target_names == ["sum", "triple"]
    got = model.predict_many(_dicts(X[:40]))
    assert np.array_equal(np.array([[p["sum"], p["triple"]] for p in got]), direct.predict_many(X[:40]))
    # a dict target in another key order is read by name
    model.learn_one(_dicts(X[:1])[0], {"triple": Y[0, 1], "sum": Y[0, 0]})
    direct.learn_one(X[0], Y[0])
    assert np.array_equal(np.array(list(model.predict_one(_dicts(X[:1])[0]).values())),
                          direct.predict_many(X[:1])[0])
    with pytest.raises(ValueError, match="a dict of the targets"):
        model.learn_one(_dicts(X[:1])[0], 1.0)


def test_river_regressor_with_one_unnamed_target_answers_floats():
    X, _ = _stream(300)
    model, direct = RiverStyleRegressor(ISOUPTree(grace_period=50)), ISOUPTree(grace_period=50)
    model.learn_many(_dicts(X), (X[:, 0] * 2).tolist())
    direct.learn_many(X, (X[:, 0] * 2).reshape(-1, 1))
    got = model.predict_one(_dicts(X[:1])[0])
    assert isinstance(got, float) and got == direct.predict_many(X[:1])[0, 0]
    with pytest.raises(ValueError, match="a number"):
        model.learn_one(_dicts(X[:1])[0], {"y": 1.0})


def test_river_regression_ranker_names_its_importances():
    X, _ = _stream(300)
    Y = _targets(X)
    params = {"block_size": 20, "stride": 5, "n_trees": 4, "seed": 1}
    model = RiverStyleRegressor(BlockForestRegressionRanker(**params))
    direct = BlockForestRegressionRanker(**params)
    model.learn_many(_dicts(X), [{"a": a, "b": b} for a, b in Y.tolist()])
    direct.learn_many(X, Y)
    assert model.importances() == dict(zip(NAMES, direct.importances()["mdi"].tolist()))


def test_river_state_round_trip_through_msgpack_continues_exactly():
    X, y = _stream(600, late=300)
    labels = {0: True, 1: False, 2: "other"}
    model = RiverStyleClassifier(_arf())
    model.learn_many(_dicts(X[:300]), [labels[t] for t in y[:300]])
    restored = RiverStyleClassifier.from_state(decode_state(encode_state(model.to_state())))
    assert restored.feature_names == model.feature_names and restored.classes == model.classes
    for m in (model, restored):
        m.learn_many(_dicts(X[300:]), [labels[t] for t in y[300:]])
    probe = _dicts(X[:50])
    assert restored.predict_proba_many(probe) == model.predict_proba_many(probe)
    assert restored.importances() == model.importances()
    with pytest.raises(ValueError, match="not 'river_style_regressor'"):
        RiverStyleRegressor.from_state(model.to_state())


def test_river_regressor_state_round_trip():
    X, _ = _stream(300)
    model = RiverStyleRegressor(ISOUPTree(grace_period=50))
    model.learn_many(_dicts(X), [{"s": v} for v in X[:, 0].tolist()])
    restored = RiverStyleRegressor.from_state(decode_state(encode_state(model.to_state())))
    assert restored.target_names == ["s"]
    assert restored.predict_many(_dicts(X[:20])) == model.predict_many(_dicts(X[:20]))


def test_river_adapter_over_a_learner_that_learned_before():
    X, y = _stream(400, late=400)
    direct, wrapped = _arf(), _arf()
    direct.learn_many(X[:200], [str(t) for t in y[:200]])
    wrapped.learn_many(X[:200], [str(t) for t in y[:200]])
    model = RiverStyleClassifier(wrapped, features=NAMES)
    model.learn_many(_dicts(X[200:]), [str(t) for t in y[200:]])
    direct.learn_many(X[200:], [str(t) for t in y[200:]])
    assert model.predict_many(_dicts(X[:30])) == direct.predict_many(X[:30])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), perm=st.permutations(NAMES),
       labels=st.lists(st.one_of(st.booleans(), st.text(max_size=3), st.integers(-5, 5),
                                 st.tuples(st.integers(0, 3), st.text(max_size=2))),
                       min_size=3, max_size=3, unique=True))
def test_property_any_key_order_and_label_type_give_the_learners_answers(seed, perm, labels):
    rng = np.random.default_rng(seed)
    X = rng.random((120, len(NAMES)))
    y = rng.integers(0, 3, 120) * (X[:, 0] > 0.3)
    model = RiverStyleClassifier(NaiveBayes(), features=perm)
    direct = NaiveBayes()
    cols = [NAMES.index(k) for k in perm]
    for x, row, t in zip(_dicts(X, tuple(rng.permutation(NAMES))), X, y.tolist()):
        model.learn_one(x, labels[t])
        direct.learn_one(row[cols], t)
    proba = model.predict_proba_many(_dicts(X[:10]))
    want = direct.predict_proba_many(X[:10][:, cols])
    assert [list(p.values()) for p in proba] == want.tolist()
    assert [list(p) for p in proba] == [[labels[c] for c in direct.classes]] * 10


# ------------------------------------------------------------------ scikit-learn style


def test_sklearn_classifier_answers_what_the_learner_answers_bit_for_bit():
    X, y = _stream(600, late=300)
    names = np.array(["b-low", "a-high", "c-spike"])  # sorted: a-high, b-low, c-spike
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, grace_period=20, seed=1)
    direct = _arf()
    for a in range(0, 600, 50):
        clf.partial_fit(X[a:a + 50], names[y[a:a + 50]])
        direct.learn_many(X[a:a + 50], y[a:a + 50])
    assert clf.classes_.tolist() == ["a-high", "b-low", "c-spike"]
    proba, want = clf.predict_proba(X), direct.predict_proba_many(X)
    order = [clf.classes_.tolist().index(names[c]) for c in direct.classes]
    assert np.array_equal(proba[:, order], want)
    assert clf.predict(X).tolist() == names[direct.predict_many(X)].tolist()
    assert np.array_equal(clf.feature_importances_, direct.importances()["split_gain"])
    assert clf.n_features_in_ == 4 and clf.learner_.n_seen == 600
    assert clf.score(X, names[y]) == np.mean(clf.predict(X) == names[y])


def test_sklearn_fit_starts_afresh_and_equals_partial_fit_from_nothing():
    X, y = _stream(300)
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=2)
    first = clf.fit(X, y).predict_proba(X)
    clf.partial_fit(X, y)
    assert clf.learner_.n_seen == 600
    assert np.array_equal(clf.fit(X, y).predict_proba(X), first)
    assert clf.learner_.n_seen == 300


def test_sklearn_classes_given_up_front_have_columns_before_rows_bring_them():
    X, y = _stream(200, late=200)
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=1)
    clf.partial_fit(X, y, classes=[0, 1, 2])
    assert clf.classes_.tolist() == [0, 1, 2]
    proba = clf.predict_proba(X[:5])
    assert proba.shape == (5, 3) and not proba[:, 2].any()
    assert np.allclose(proba.sum(axis=1), 1.0)


def test_sklearn_params_round_trip_and_clone():
    from sklearn.base import clone, is_classifier, is_regressor

    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=4)
    params = clf.get_params()
    assert params["learner_class"] is AdaptiveRandomForest
    assert params["n_models"] == 3 and params["seed"] == 4 and params["grace_period"] == 50
    assert set(params) == {"learner_class"} | set(AdaptiveRandomForest(n_models=3).params)
    assert clf.set_params(grace_period=20, seed=5) is clf
    assert clf.get_params()["grace_period"] == 20
    with pytest.raises(ValueError, match="Invalid parameter 'n_trees'"):
        clf.set_params(n_trees=3)
    X, y = _stream(200)
    clf.fit(X, y)
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    assert "learner_" not in vars(twin)
    with pytest.raises(NotFittedError):
        twin.predict(X)
    assert np.array_equal(twin.fit(X, y).predict_proba(X), clf.predict_proba(X))
    assert is_classifier(clf) and is_regressor(SklearnStyleRegressor(ISOUPTree))
    assert repr(clf) == "SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=5, grace_period=20)"


def test_sklearn_new_learner_class_keeps_the_parameters_it_takes():
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=4)
    clf.set_params(learner_class=OnlineRandomForest)
    assert clf.get_params()["seed"] == 4 and clf.get_params()["n_trees"] == 10
    assert "n_models" not in clf.get_params()


def test_sklearn_wrapped_learners_and_their_templates():
    X, y = _stream(300)
    trained = _arf()
    trained.learn_many(X[:150], y[:150])
    clf = SklearnStyleClassifier.wrap(trained)
    assert clf.learner_ is trained and clf.get_params()["grace_period"] == 20
    clf.partial_fit(X[150:], y[150:])
    direct = _arf()
    direct.learn_many(X, y)
    assert np.array_equal(clf.predict_proba(X), direct.predict_proba_many(X))
    # a wrapper's downstream learner is a parameter: fitting copies it, never trains it
    ddm = SklearnStyleClassifier(DriftDetectionClassifier, learner=NaiveBayes(), warm_start=40)
    ddm.fit(X, y)
    assert ddm.get_params()["learner"].n_seen == 0 and ddm.learner_.n_seen == 300
    assert SklearnStyleClassifier.wrap(ddm.learner_).get_params()["learner"].n_seen == 0
    abfs = SklearnStyleClassifier(ABFSClassifier, learner=NaiveBayes(), selector=ABFS(grace_period=50))
    abfs.fit(X, y)
    assert abfs.get_params()["selector"].n_seen == 0 and abfs.learner_.selector.n_seen == 300
    river = RiverStyleClassifier(ABFSClassifier(NaiveBayes(), ABFS(grace_period=50)))
    river.learn_many(_dicts(X), y)
    assert river.predict_many(_dicts(X)) == abfs.predict(X).tolist()
    assert set(river.importances("abfs")) == set(NAMES)


def test_sklearn_frames_name_the_features():
    import pandas as pd
    X, y = _stream(300)
    frame = pd.DataFrame(X, columns=list(NAMES))
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=1).fit(frame, pd.Series(y))
    assert clf.feature_names_in_.tolist() == list(NAMES)
    assert np.array_equal(clf.predict_proba(frame), clf.predict_proba(X))
    with pytest.raises(ValueError, match="feature names should match"):
        clf.predict(frame[list(reversed(NAMES))])
    assert not hasattr(SklearnStyleClassifier(AdaptiveRandomForest).fit(X, y), "feature_names_in_")


def test_sklearn_feature_stream_forest_takes_arriving_columns():
    import pandas as pd
    X, y = _stream(300)
    clf = SklearnStyleClassifier(FeatureStreamForest, n_trees=5, seed=1)
    direct = FeatureStreamForest(n_trees=5, seed=1)
    for d in (1, 2, 4):
        clf.partial_fit(pd.DataFrame(X[:, :d], columns=list(NAMES[:d])), y)
        direct.learn_many(X[:, :d], y)
    assert clf.n_features_in_ == 4 and clf.feature_names_in_.tolist() == list(NAMES)
    assert np.array_equal(clf.predict_proba(X), direct.predict_proba_many(X))
    with pytest.raises(ValueError, match="X has 2 features, but SklearnStyleClassifier is expecting 4"):
        clf.partial_fit(X[:, :2], y)


def test_sklearn_regressor_single_and_multi_target():
    X, _ = _stream(400)
    Y = _targets(X)
    one = SklearnStyleRegressor(ISOUPTree, grace_period=50).fit(X, Y[:, 0])
    direct = ISOUPTree(grace_period=50)
    direct.learn_many(X, Y[:, :1])
    assert one.predict(X).shape == (400,)
    assert np.array_equal(one.predict(X), direct.predict_many(X)[:, 0])
    many = SklearnStyleRegressor(ISOUPTree, grace_period=50).fit(X, Y)
    assert many.predict(X[:7]).shape == (7, 2)
    assert many.score(X, Y) > 0.8
    with pytest.raises(ValueError, match="shape it had"):
        many.partial_fit(X, Y[:, 0])


def test_sklearn_regression_ranker_importances_and_no_predictions():
    X, _ = _stream(300)
    Y = _targets(X)
    params = {"block_size": 20, "stride": 5, "n_trees": 4, "seed": 1}
    reg = SklearnStyleRegressor(BlockForestRegressionRanker, **params)
    direct = BlockForestRegressionRanker(**params)
    reg.partial_fit(X, Y)
    direct.learn_many(X, Y)
    assert np.array_equal(reg.feature_importances_, direct.importances()["mdi"])
    with pytest.raises(TypeError, match="predicts nothing"):
        reg.predict(X)


def test_sklearn_adapter_pickles_with_its_learner():
    X, y = _stream(300)
    clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=1).fit(X, [str(v) for v in y])
    back = pickle.loads(pickle.dumps(clf))
    assert np.array_equal(back.predict_proba(X), clf.predict_proba(X))
    back.partial_fit(X, [str(v) for v in y])
    clf.partial_fit(X, [str(v) for v in y])
    assert np.array_equal(back.predict_proba(X), clf.predict_proba(X))


def test_sklearn_model_selection_runs_the_adapter():
    from sklearn.model_selection import GridSearchCV

    X, y = _stream(300)
    search = GridSearchCV(SklearnStyleClassifier(AdaptiveRandomForest, n_models=2, seed=1),
                          {"grace_period": [20, 50]}, cv=2).fit(X, y)
    assert search.best_params_["grace_period"] in (20, 50)
    assert search.best_estimator_.learner_.n_seen == 300


@pytest.mark.parametrize("estimator", [
    SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, grace_period=20),
    SklearnStyleRegressor(ISOUPTree, grace_period=20),
], ids=["arf", "isoup_tree"])
def test_sklearn_estimator_checks_pass(estimator):
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checks' own warnings about their test data
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    assert failed == {}
    assert sum(r["status"] == "passed" for r in results) >= 40


def _families(task: str) -> list[str]:
    return [n for n in registry.names(task=task)
            if registry.get(n).roles - {registry.DETECTOR} and not registry.get(n).arrivals]


@pytest.mark.parametrize("name", _families(registry.CLASSIFICATION))
def test_every_classification_family_answers_through_both_adapters(name):
    spec = registry.get(name)
    X, y = _stream(300, late=150)
    labels = ["no", "yes", "maybe"]
    river, direct = (spec.build(spec.small_params, seed=1) for _ in range(2))
    river = RiverStyleClassifier(river)
    sk = SklearnStyleClassifier(spec.cls, **spec.kwargs(spec.small_params, seed=1))
    for a in range(0, 300, 30):  # mini-batches: the same calls of learn_many for all three
        river.learn_many(_dicts(X[a:a + 30]), [labels[t] for t in y[a:a + 30]])
        sk.partial_fit(X[a:a + 30], [labels[t] for t in y[a:a + 30]])
        direct.learn_many(X[a:a + 30], y[a:a + 30])
    want = direct.importances()
    for method, values in want.items():
        assert list(river.importances(method).values()) == np.asarray(values).tolist()
    if want:
        assert np.array_equal(sk.feature_importances_, next(iter(want.values())))
    if hasattr(direct, "predict_proba_many"):
        proba = direct.predict_proba_many(X)
        assert [list(p.values()) for p in river.predict_proba_many(_dicts(X))] == proba.tolist()
        order = [sk.classes_.tolist().index(labels[c]) for c in direct.classes]
        assert np.array_equal(sk.predict_proba(X)[:, order], proba)
        assert river.predict_many(_dicts(X)) == [labels[c] for c in direct.predict_many(X)]


@pytest.mark.parametrize("name", _families(registry.REGRESSION))
def test_every_regression_family_answers_through_both_adapters(name):
    spec = registry.get(name)
    X, _ = _stream(300)
    Y = _targets(X)
    river = RiverStyleRegressor(spec.build(spec.small_params, seed=1), targets=["s", "t"])
    direct = spec.build(spec.small_params, seed=1)
    sk = SklearnStyleRegressor(spec.cls, **spec.kwargs(spec.small_params, seed=1))
    for a in range(0, 300, 30):
        river.learn_many(_dicts(X[a:a + 30]), [{"t": t, "s": s} for s, t in Y[a:a + 30].tolist()])
        sk.partial_fit(X[a:a + 30], Y[a:a + 30])
        direct.learn_many(X[a:a + 30], Y[a:a + 30])
    for method, values in direct.importances().items():
        assert list(river.importances(method).values()) == np.asarray(values).tolist()
    if hasattr(direct, "predict_many"):
        want = direct.predict_many(X)
        assert np.array_equal(sk.predict(X), want)
        assert [[p["s"], p["t"]] for p in river.predict_many(_dicts(X))] == want.tolist()
