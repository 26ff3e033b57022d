"""Forgetful random forest: confidence test, feature subsets, random forgetting, bagging,
tree replacement, and every tree equal to a from-scratch build on the rows it retains."""

from __future__ import annotations

import numpy as np
import pytest
from reference import forgetful_reference as ref
from scipy import stats

from models.core._stats import betainc_regularized, student_t_sf
from models.forgetful import _forgetful_kernels as fk
from models.forgetful.forgetful_forest import (
    F_LAST_ALL,
    F_LAST_T,
    ForgetfulRandomForest,
    confidence_test,
    draw_features,
    pooled_t_test,
)

# --------------------------------------------------------------------------- statistics


def test_student_t_tail_matches_scipy():
    rng = np.random.default_rng(0)
    for _ in range(300):
        t = float(rng.normal() * 4)
        df = float(rng.integers(1, 20000))
        assert student_t_sf(t, df) == pytest.approx(stats.t.sf(t, df), abs=1e-9)
    assert student_t_sf(0.0, 7.0) == pytest.approx(0.5)
    assert student_t_sf(np.inf, 3.0) == 0.0
    assert betainc_regularized(2.0, 3.0, 0.4) == pytest.approx(0.5248, abs=1e-12)


@pytest.mark.parametrize("last_t,last_all,correct,b", [
    (80, 100, 60, 100), (450, 500, 40, 50), (30, 48, 33, 48), (5, 10, 9, 10), (70, 100, 70, 100),
])
def test_pooled_t_test_matches_scipy(last_t, last_all, correct, b):
    old = np.r_[np.ones(last_t), np.zeros(last_all - last_t)]
    new = np.r_[np.ones(correct), np.zeros(b - correct)]
    t, p = pooled_t_test(last_t, last_all, correct, b)
    res = stats.ttest_ind(old, new, equal_var=True)
    if np.isnan(res.statistic):
        assert (t, p) == (0.0, 1.0)
    else:
        assert t == pytest.approx(res.statistic, rel=1e-9)
        assert p == pytest.approx(res.pvalue / 2, rel=1e-7, abs=1e-12)


def test_constant_windows():
    assert pooled_t_test(50, 50, 50, 50) == (0.0, 1.0)
    t, p = pooled_t_test(50, 50, 0, 50)
    assert t == np.inf and p == 0.0


def test_confidence_test_intent_branches():
    # significant drop 0.9 -> 0.6: replace ceil(0.3 / 0.9 * 20) = 7 trees, new window
    assert confidence_test(90, 100, 60, 100, 0.05, False, 20) == (7, 60, 100)
    # significant rise: new window, nothing replaced
    assert confidence_test(60, 100, 90, 100, 0.05, False, 20) == (0, 90, 100)
    # no significant change: the window is extended
    assert confidence_test(80, 100, 78, 100, 0.05, False, 20) == (0, 158, 200)


def test_confidence_test_literal_branches():
    # the reference code: significant -> extend; non-significant drop -> replace; rise -> new
    assert confidence_test(90, 100, 60, 100, 0.05, True, 20) == (0, 150, 200)
    assert confidence_test(80, 100, 78, 100, 0.05, True, 20) == (1, 78, 100)
    assert confidence_test(78, 100, 80, 100, 0.05, True, 20) == (0, 80, 100)


# --------------------------------------------------------------------------- feature subsets


def test_feature_subset_sizes_and_draws():
    rng = np.random.default_rng(0).integers(0, 2**63, 1).astype(np.uint64)
    sizes = {F: set() for F in (1, 2, 4, 7, 46)}
    for F in sizes:
        for _ in range(300):
            feats = np.zeros(F, np.int32)
            ti = np.zeros(fk.N_TREE_INT, np.int64)
            draw_features(F, rng, 0, feats, ti)
            m = int(ti[fk.N_FEAT])
            assert sorted(set(feats[:m].tolist())) == sorted(feats[:m].tolist())
            assert set(range(F)) == set(feats.tolist())
            sizes[F].add(m)
    assert sizes[1] == {1} and sizes[2] == {2} and sizes[4] == {4}
    assert sizes[7] == {4, 5, 6, 7}
    assert sizes[46] == set(range(8, 47))


# --------------------------------------------------------------------------- trees


def _stream(seed, n, F, K, flip_at=None):
    rng = np.random.default_rng(seed)
    X = rng.random((n, F))
    X[:, -1] = rng.integers(0, 3, n)
    score = X @ rng.normal(size=F)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, K + 1)[1:-1]))
    noise = rng.random(n) < 0.05
    y[noise] = rng.integers(0, K, noise.sum())
    if flip_at is not None:
        y[flip_at:] = (y[flip_at:] + 1) % K
    order: dict[int, int] = {}
    return X, np.array([order.setdefault(int(v), len(order)) for v in y])


def _assert_trees_are_rebuilds(model):
    a = model._arrays
    K = a["node_counts"].shape[2]
    for t in range(model.n_trees):
        ti = a["tree_int"][t]
        n = int(ti[fk.N_ROWS])
        if n == 0:
            continue
        rows = [(tuple(a["rows_x"][t, :, r]), int(a["rows_y"][t, r])) for r in range(n)]
        feats = a["features"][t, :ti[fk.N_FEAT]].tolist()
        expected = ref.pad(ref.build(rows, 0, int(ti[fk.MAX_HEIGHT]), feats, K), K)
        assert model._nested(t) == expected, f"tree {t}"
        assert n <= ti[fk.RETAIN]


@pytest.mark.slow
@pytest.mark.parametrize("bagging", [False, True])
def test_every_tree_is_a_rebuild_on_its_retained_rows(bagging):
    X, y = _stream(1, 1500, 4, 3, flip_at=900)
    model = ForgetfulRandomForest(n_trees=5, bagging=bagging, seed=3)
    for s in range(0, 1500, 50):
        model.learn_many(X[s:s + 50], list(y[s:s + 50]))
        _assert_trees_are_rebuilds(model)
    assert model.n_replaced_total > 0


def test_forest_trees_forget_random_old_rows():
    X, y = _stream(2, 3000, 3, 2)
    X[:, 0] = np.arange(3000)                      # the arrival position, to see what is kept
    model = ForgetfulRandomForest(n_trees=4, seed=1)
    gaps = 0
    for s in range(0, 3000, 100):
        model.learn_many(X[s:s + 100], list(y[s:s + 100]))
        a = model._arrays
        for t in range(4):
            n = int(a["tree_int"][t, fk.N_ROWS])
            kept = a["rows_x"][t, 0, :n]
            assert np.all(np.diff(kept) > 0)       # arrival order is preserved
            newest = kept[-100:]
            assert newest.tolist() == list(range(s, s + 100))   # new rows are never forgotten
            gaps += int(kept[-1] - kept[0] + 1 > n)             # holes: random forgetting
    assert gaps > 20


def test_bagging_draws_up_to_ten_copies_per_tree():
    X, y = _stream(3, 100, 3, 2)
    model = ForgetfulRandomForest(n_trees=12, bagging=True, seed=5)
    model.learn_many(X, list(y))
    kept = model.retained_rows
    assert set(kept.tolist()) <= {100 * k for k in range(11)}
    assert len(set(kept.tolist())) > 3
    # a tree that drew k = 0 learned nothing and does not vote
    proba = model.predict_proba_many(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_significant_drop_replaces_the_worst_trees():
    X, y = _stream(4, 4000, 3, 2, flip_at=3000)
    intent = ForgetfulRandomForest(n_trees=10, seed=2)
    literal = ForgetfulRandomForest(n_trees=10, seed=2, replacement="literal")
    for s in range(0, 3000, 100):
        intent.learn_many(X[s:s + 100], list(y[s:s + 100]))
        literal.learn_many(X[s:s + 100], list(y[s:s + 100]))
    before = intent._arrays["features"].copy()
    acc_old = intent._arrays["forest_int"][F_LAST_T] / intent._arrays["forest_int"][F_LAST_ALL]
    pred = np.array([[intent._arrays["node_class"][t, fk.find_leaf(
        intent._arrays["node_feature"][t], intent._arrays["node_threshold"][t],
        intent._arrays["node_left"][t], intent._arrays["node_right"][t], x)] for x in
        X[3000:3100]] for t in range(10)])
    correct = (pred == y[3000:3100]).sum(axis=1)
    intent.learn_many(X[3000:3100], list(y[3000:3100]))
    literal.learn_many(X[3000:3100], list(y[3000:3100]))
    # accuracy collapses after the flip: a significant drop
    assert intent.n_replaced >= 1 and literal.n_replaced == 0
    votes = (pred.sum(axis=0) * 2 > 10).astype(int)
    acc_new = np.mean(votes == y[3000:3100])
    assert intent.n_replaced == min(10, int(np.ceil((acc_old - acc_new) / acc_old * 10)))
    changed = np.flatnonzero((intent._arrays["features"] != before).any(axis=1))
    worst = np.argsort(correct, kind="stable")[:intent.n_replaced]
    assert set(changed.tolist()) <= set(worst.tolist())
    new = intent._arrays["tree_int"][worst]
    assert (new[:, fk.FORGET_RATE] == -10).all()     # brand-new trees start cold
    assert intent.collapsed


def test_vote_and_mean_distribution():
    X, y = _stream(5, 600, 3, 3)
    model = ForgetfulRandomForest(n_trees=7, seed=9)
    for s in range(0, 600, 60):
        model.learn_many(X[s:s + 60], list(y[s:s + 60]))
    a = model._arrays
    leaves = np.array([[fk.find_leaf(a["node_feature"][t], a["node_threshold"][t],
                                     a["node_left"][t], a["node_right"][t], x) for x in X[:50]]
                       for t in range(7)])
    classes = np.array([[a["node_class"][t, leaf] for leaf in leaves[t]] for t in range(7)])
    votes = np.array([np.bincount(classes[:, i], minlength=3) for i in range(50)])
    assert model.predict_many(X[:50]) == model._classes.decode(votes.argmax(axis=1))
    counts = np.array([[a["node_counts"][t, leaf] for leaf in leaves[t]] for t in range(7)])
    dist = (counts / counts.sum(axis=2, keepdims=True)).mean(axis=0)
    np.testing.assert_allclose(model.predict_proba_many(X[:50]), dist)


def test_seed_decides_everything():
    X, y = _stream(6, 800, 5, 2, flip_at=500)
    runs = []
    for seed in (1, 1, 2):
        model = ForgetfulRandomForest(n_trees=6, bagging=True, seed=seed)
        for s in range(0, 800, 80):
            model.learn_many(X[s:s + 80], list(y[s:s + 80]))
        runs.append(model.to_state()["arrays"])
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    assert not np.array_equal(runs[0]["features"], runs[2]["features"])


def test_state_round_trip_continues_identically():
    X, y = _stream(7, 1200, 4, 2, flip_at=700)
    a = ForgetfulRandomForest(n_trees=5, seed=4)
    for s in range(0, 600, 60):
        a.learn_many(X[s:s + 60], list(y[s:s + 60]))
    b = ForgetfulRandomForest.from_state(a.to_state())
    for s in range(600, 1200, 60):
        a.learn_many(X[s:s + 60], list(y[s:s + 60]))
        b.learn_many(X[s:s + 60], list(y[s:s + 60]))
    assert a.predict_many(X) == b.predict_many(X)
    for t in range(5):
        assert a._nested(t) == b._nested(t)


def test_bad_parameters_raise():
    with pytest.raises(ValueError):
        ForgetfulRandomForest(n_trees=0)
    with pytest.raises(ValueError):
        ForgetfulRandomForest(replacement="sometimes")
    with pytest.raises(ValueError):
        ForgetfulRandomForest(t_threshold=2.0)
