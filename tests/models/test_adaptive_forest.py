"""Adaptive random forest (Gomes et al. 2017): determinism, exact state round trip, drift
recovery, accuracy against river's ARFClassifier. The registry-driven contract suite
(tests/models/test_contract.py) covers the Learner surface."""

from __future__ import annotations

import numpy as np
import pytest

from models.adaptive_forest import AdaptiveRandomForest
from schemas.codec import decode_state, encode_state
from tests.shared_data import data_dir

DATA = data_dir()


def _stream(n=4000, d=6, seed=0, flip_at=None):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = (X[:, 0] + X[:, 1] > 1.0).astype(int)
    if flip_at is not None:
        y[flip_at:] = 1 - y[flip_at:]
    return X, y


def _prequential(model, X, y, batch=100):
    """The worker's protocol: predict a mini-batch, then learn it."""
    hits = np.zeros(len(y), bool)
    for s in range(0, len(y), batch):
        pred = model.predict_many(X[s:s + batch])
        hits[s:s + batch] = [p == t for p, t in zip(pred, y[s:s + batch])]
        model.learn_many(X[s:s + batch], y[s:s + batch])
    return hits


def _same_arrays(a, b):
    assert a._arrays.keys() == b._arrays.keys()
    for k in a._arrays:
        np.testing.assert_array_equal(a._arrays[k], b._arrays[k], err_msg=k)


def test_same_seed_same_forest_and_other_seed_differs():
    X, y = _stream(3000)
    a, b, c = (AdaptiveRandomForest(n_models=5, seed=s) for s in (7, 7, 8))
    for m in (a, b, c):
        m.learn_many(X, y)
    _same_arrays(a, b)
    np.testing.assert_array_equal(a.predict_proba_many(X[:500]), b.predict_proba_many(X[:500]))
    assert not np.array_equal(a._arrays["rng"], c._arrays["rng"])


def test_state_round_trip_mid_stream_is_exact():
    X, y = _stream(6000, flip_at=3000)
    a = AdaptiveRandomForest(n_models=4, seed=3)
    a.learn_many(X[:3000], y[:3000])
    cut = 3000
    while not a._arrays["bg_active"].any():  # stop while a background tree is learning
        a.learn_many(X[cut:cut + 10], y[cut:cut + 10])
        cut += 10
    assert cut < 5000 and a.n_warnings > 0
    b = AdaptiveRandomForest.from_state(decode_state(encode_state(a.to_state())))
    _same_arrays(a, b)
    np.testing.assert_array_equal(a.predict_proba_many(X), b.predict_proba_many(X))
    for m in (a, b):
        m.learn_many(X[cut:], y[cut:])
    _same_arrays(a, b)
    assert a.n_seen == b.n_seen == 6000


def test_label_flip_is_detected_and_trees_are_replaced():
    X, y = _stream(12000, flip_at=6000)
    m = AdaptiveRandomForest(seed=1)
    hits = _prequential(m, X[:6000], y[:6000])
    before = m.n_drifts
    assert hits[3000:].mean() > 0.93
    hits = _prequential(m, X[6000:], y[6000:])
    # every tree's error jumps to ~1: each one is replaced, most within a few hundred rows
    assert m.n_drifts - before >= m.params["n_models"]
    assert (m._arrays["n_drifts"] > 0).all()
    assert hits[:500].mean() < 0.8 and hits[3000:].mean() > 0.93


def test_weighted_vote_weights_trees_by_their_accuracy():
    X, y = _stream(2000)
    m = AdaptiveRandomForest(n_models=3, seed=2)
    m.learn_many(X, y)
    a = m._arrays
    assert (a["tree_seen"] > 0).all() and (a["tree_correct"] <= a["tree_seen"]).all()
    proba = m.predict_proba_many(X[:50])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    flat = AdaptiveRandomForest.from_state({**m.to_state(), "params": {
        **m.params, "weighted_vote": False}})
    assert not np.allclose(flat.predict_proba_many(X[:50]), proba)


def test_leaves_keep_only_their_feature_subset():
    X, y = _stream(3000, d=16)
    m = AdaptiveRandomForest(n_models=3, seed=5)
    assert m.subset_size(16) == 4 and AdaptiveRandomForest(max_features="sqrt+1").subset_size(16) == 5
    m.learn_many(X, y)
    a = m._arrays
    for s in a["fg_slot"]:
        for node in range(int(a["n_nodes"][s, 0])):
            if a["node_feature"][s, node] >= 0:
                continue
            feats = a["leaf_feat"][s, node]
            assert len(set(feats.tolist())) == 4 and (np.diff(feats) > 0).all()
            assert a["g_w"].shape[2] == 4  # statistics for the subset only
        for node in np.flatnonzero(a["node_feature"][s, :int(a["n_nodes"][s, 0])] >= 0):
            # a split node splits on one of its own subset's features
            assert a["node_feature"][s, node] in a["leaf_feat"][s, node]


def test_importances_and_bad_input():
    X, y = _stream(3000)
    m = AdaptiveRandomForest(n_models=4, seed=1)
    m.learn_many(X, y)
    g = m.importances()["split_gain"]
    assert g.shape == (6,) and g[:2].min() > g[2:].max()
    with pytest.raises(ValueError):
        AdaptiveRandomForest(max_features="all")
    with pytest.raises(ValueError):
        AdaptiveRandomForest(drift_delta=0.0)
    with pytest.raises(ValueError):
        m.learn_many(X[:, :3], y)
    state = m.to_state()
    state["arrays"]["fg_slot"] = state["arrays"]["bg_slot"].copy()
    with pytest.raises(ValueError):
        AdaptiveRandomForest.from_state(state)


@pytest.mark.skipif(not DATA.is_dir(), reason="shared datasets not available")
def test_accuracy_near_river_arf_on_electricity():
    """Electricity, first 3,000 rows, worker protocol (batches of 100). Seeds move either
    forest by about +-2 points on this slice (ours 0.733-0.770 over seeds 1-5, river 0.731
    and 0.753 for seeds 2 and 1), so the mean of three of our seeds is held within 2 points
    of river's seed 1. Whole streams: tests/benchmarks/results/arf.md."""
    forest = pytest.importorskip("river.forest")
    from worker.dev.datasets import load

    d = load("electricity", DATA)
    X = np.ascontiguousarray(d.X[:3000], dtype=np.float64)
    y = list(d.y[:3000])
    river = forest.ARFClassifier(n_models=10, seed=1)
    rows = [dict(enumerate(r)) for r in X.tolist()]
    hits = 0
    for s in range(0, len(y), 100):
        hits += sum(river.predict_one(x) == t for x, t in zip(rows[s:s + 100], y[s:s + 100]))
        for x, t in zip(rows[s:s + 100], y[s:s + 100]):
            river.learn_one(x, t)
    river_acc = hits / len(y)
    ours = np.mean([_prequential(AdaptiveRandomForest(seed=s), X, y).mean() for s in (1, 2, 3)])
    assert abs(ours - river_acc) < 0.02, (ours, river_acc)
