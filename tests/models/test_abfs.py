"""ABFS: selection under feature drift, events, the BOLE order, the classifier wrapper."""

from __future__ import annotations

import numpy as np
import pytest

from models.drift.drift_wrapper import DriftDetectionClassifier
from models.hoeffding import _abfs_kernels as ak
from models.hoeffding.abfs import ABFS, ABFSClassifier
from models.hoeffding.hoeffding_tree import HoeffdingTree
from models.hoeffding.naive_bayes import NaiveBayes
from schemas.codec import decode_state, encode_state
from tests.models.feature_drift_data import feature_drift_stream, relevant

ASSIS = {"grace_period": 100, "selection_threshold": 0.05}
SWITCH = 5000
BOUND = 1500  # rows after a switch by which the new pair must be selected


def _run(model, X, y, batch=250):
    """Learn in batches; returns ``[(row, selected after it)]`` and all events (stream rows)."""
    trace, events = [], []
    for s in range(0, X.shape[0], batch):
        model.learn_many(X[s:s + batch], y[s:s + batch])
        events += [e._replace(row=e.row + s) for e in model.events()]
        trace.append((s + batch, set(model.layers())))
    return trace, events


@pytest.mark.parametrize("boosting", ["oza", "bole"])
def test_relevant_features_are_selected_after_each_switch(boosting):
    X, y, _ = feature_drift_stream(3 * SWITCH, switch_every=SWITCH)
    model = ABFS(boosting=boosting, bole_normaliser="layer", **ASSIS)
    trace, events = _run(model, X, y)
    for c in range(3):
        due = c * SWITCH + BOUND
        chosen = next(sel for row, sel in trace if row >= due)
        assert set(relevant(c, 10)) <= chosen, (c, chosen)
    drifts = [e for e in events if e.kind == "feature_drift"]
    # after each switch a detector fires on a feature of the pair that stopped being relevant
    for c in (1, 2):
        old = set(relevant(c - 1, 10))
        fired = [e for e in drifts if c * SWITCH <= e.row < c * SWITCH + BOUND]
        assert fired and fired[0].feature in old and fired[0].level == "drift"
        assert "window()" in fired[0].detail


def test_selection_events_name_the_added_feature_and_report_retrain():
    X, y, _ = feature_drift_stream(2 * SWITCH, switch_every=SWITCH)
    model = ABFS(**ASSIS)
    model.learn_many(X[:SWITCH], y[:SWITCH])
    kinds = [(e.kind, e.feature) for e in model.events()]
    assert kinds and all(k == "selection" for k, _ in kinds)
    assert {f for _, f in kinds} == set(model.layers())
    assert not model.retrain
    model.learn_many(X[SWITCH:], y[SWITCH:])
    assert model.retrain
    WX, codes = model.window()
    assert WX.shape == (100, 10) and codes.shape == (100,)
    np.testing.assert_array_equal(WX[-1], X[-1])
    assert [model.classes[k] for k in codes] == list(y[-100:])


def test_importances_are_layer_accuracies_and_nothing_is_selected_before_selection():
    X, y, _ = feature_drift_stream(3000)
    model = ABFS(**ASSIS)
    model.learn_many(X[:50], y[:50])
    assert model.selected() == [] and model.layers() == []
    model.learn_many(X[50:], y[50:])
    scores = model.importances()["abfs"]
    assert scores.shape == (10,)
    chosen = model.layers()
    assert scores[chosen[0]] > 0.6 and (np.delete(scores, chosen) == 0).all()


def test_bole_visits_worst_first_then_best_after_a_hit():
    order = np.zeros(4, np.int64)
    ak._order_by_accuracy(4, np.array([9.0, 1.0, 5.0, 0.0]), np.array([1.0, 1.0, 5.0, 0.0]),
                          order)
    assert order.tolist() == [3, 1, 2, 0]  # accuracy 0 (unseen), 0.5 (1 of 2), 0.5, 0.9


def test_omega_speeds_up_selection():
    X, y, _ = feature_drift_stream(2000)
    rows = []
    for omega in (1.0, 3.0):
        model = ABFS(omega=omega, **ASSIS)
        _, events = _run(model, X, y, batch=100)
        rows.append(len(model.layers()))
    assert rows[1] >= rows[0]


def test_classifier_filters_retrains_and_round_trips():
    X, y, _ = feature_drift_stream(2 * SWITCH, switch_every=SWITCH)
    model = ABFSClassifier(DriftDetectionClassifier(HoeffdingTree()), ABFS(**ASSIS))
    hits = []
    for s in range(0, SWITCH + 1000, 500):
        hits += [p == t for p, t in zip(model.predict_many(X[s:s + 500]), y[s:s + 500])]
        model.learn_many(X[s:s + 500], y[s:s + 500])
    assert np.mean(hits[:SWITCH]) > 0.75
    assert model.learner.n_seen < SWITCH  # replaced at the drift, retrained on the window
    restored = ABFSClassifier.from_state(decode_state(encode_state(model.to_state())))
    rest = slice(SWITCH + 1000, SWITCH + 3000)
    np.testing.assert_array_equal(restored.predict_proba_many(X[rest]),
                                  model.predict_proba_many(X[rest]))
    model.learn_many(X[rest], y[rest])
    restored.learn_many(X[rest], y[rest])
    assert restored.predict_many(X[:500]) == model.predict_many(X[:500])
    assert restored.selector.layers() == model.selector.layers()


def test_drift_wrapper_replaces_the_learner_and_round_trips():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 3))
    y = np.where(np.arange(6000) < 3000, X[:, 0] > 0, X[:, 0] < 0).astype(int)
    model = DriftDetectionClassifier(NaiveBayes())
    model.learn_many(X[:4000], y[:4000])
    assert model.n_drifts >= 1
    assert any(e.kind == "concept_drift" for e in model.events())
    restored = DriftDetectionClassifier.from_state(decode_state(encode_state(model.to_state())))
    model.learn_many(X[4000:], y[4000:])
    restored.learn_many(X[4000:], y[4000:])
    np.testing.assert_array_equal(model.predict_proba_many(X[:100]),
                                  restored.predict_proba_many(X[:100]))


def test_corrupt_selector_state_is_refused():
    X, y, _ = feature_drift_stream(2000)
    model = ABFS(**ASSIS)
    model.learn_many(X, y)
    state = model.to_state()
    for name, value in (("layer_feature", 99), ("layer_detector", -5), ("win_y", 7),
                        ("n_layers", 50)):
        bad = {**state, "arrays": {k: v.copy() for k, v in state["arrays"].items()}}
        bad["arrays"][name].flat[0] = value
        with pytest.raises(ValueError):
            ABFS.from_state(bad)


def test_batched_test_then_train_equals_row_by_row():
    X, y, _ = feature_drift_stream(7000, switch_every=3000)
    make = lambda: ABFSClassifier(HoeffdingTree(), ABFS(**ASSIS))  # noqa: E731
    a, b = make(), make()
    fast = []
    for s in range(0, 7000, 1000):
        fast += a.predict_learn_many(X[s:s + 1000], y[s:s + 1000])
    slow = []
    for i in range(7000):
        slow.append(b.predict_many(X[i:i + 1])[0])
        b.learn_many(X[i:i + 1], y[i:i + 1])
    assert fast == slow
    assert any(e.kind == "feature_drift" for e in a.selector.events()) or a.selector.layers()


def test_guard_rows_answer_with_the_learner_ahead_so_far():
    """Hand-checked: fade 0.5, the filtered learner right on rows 0-1, the unfiltered one on
    rows 1-4. Scores before each row (filtered, plain): (0, 0) tie -> filtered; (1, 0);
    (1.5, 1) ; (0.75, 1.5) -> plain; (0.375, 1.75) -> plain."""
    filtered = np.array([0, 1, 0, 0, 0])
    plain = np.array([1, 1, 2, 2, 2])
    codes = np.array([0, 1, 2, 2, 2])
    scores, use = np.zeros(2), np.zeros(5, np.bool_)
    ak.guard_rows(filtered, plain, codes, 0.5, scores, use)
    assert use.tolist() == [False, False, False, True, True]
    np.testing.assert_allclose(scores, [0.1875, 1.875])
    ak.guard_rows(np.array([-1]), np.array([-1]), np.array([0]), 0.5, scores, use[:1])
    np.testing.assert_allclose(scores, [0.09375, 0.9375])  # no prediction: wrong for both


@pytest.mark.slow
def test_the_guard_keeps_abfs_from_costing_accuracy():
    """A sparse stream of 500 word occurrences whose keywords change once (Assis' settings):
    filtered and reset at each feature drift, the tree falls more than 5 points below the
    plain tree; with the guard it is not below it, and the selection is the same."""
    from tests.synthetic import sparse_words

    X, y = sparse_words(40000, seed=1, switches=1)
    truth = np.array(y)
    plain = np.mean(np.array(HoeffdingTree().predict_learn_many(X, y)) == truth)
    got = {}
    for guard in (None, 0.99):
        model = ABFSClassifier(HoeffdingTree(), ABFS(**ASSIS), guard=guard)
        got[guard] = (np.mean(np.array(model.predict_learn_many(X, y), dtype=object) == truth),
                      model.selector.layers())
    assert got[None][0] < plain - 0.05
    assert got[0.99][0] >= plain and got[0.99][1] == got[None][1]


def test_the_guard_round_trips_and_older_states_go_on_without_it():
    X, y, _ = feature_drift_stream(6000, switch_every=3000)
    model = ABFSClassifier(NaiveBayes(), ABFS(**ASSIS))
    assert model.params["guard"] == 0.99
    model.predict_learn_many(X[:3500], y[:3500])
    restored = ABFSClassifier.from_state(decode_state(encode_state(model.to_state())))
    assert restored.predict_learn_many(X[3500:], y[3500:]) == \
        model.predict_learn_many(X[3500:], y[3500:])
    # written before the guard: no "guard" parameter, no unfiltered learner
    old = ABFSClassifier(NaiveBayes(), ABFS(**ASSIS), guard=None)
    old.predict_learn_many(X[:3500], y[:3500])
    state = old.to_state()
    del state["params"]["guard"]
    back = ABFSClassifier.from_state(decode_state(encode_state(state)))
    assert back.params["guard"] is None and back.plain is None
    assert back.predict_learn_many(X[3500:], y[3500:]) == \
        old.predict_learn_many(X[3500:], y[3500:])
    bad = model.to_state()
    bad["extra"]["scores"] = [1.0, float("nan")]
    with pytest.raises(ValueError, match="scores"):
        ABFSClassifier.from_state(bad)
    with pytest.raises(ValueError, match="guard"):
        ABFSClassifier(NaiveBayes(), guard=1.0)
