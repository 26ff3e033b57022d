"""FeatureStreamForest (Motl & Kordík 2019) and its CART kernel.

The contract suite (``test_contract.py``) leaves this learner out (``GROWING``: its columns
grow), so the contract checks are here in the growing form: the same seed gives the same
forest, the state survives the checkpoint codec and keeps learning identically (new columns
included), bad input and corrupted states raise ``ValueError``. The CART kernel is checked
against scikit-learn's ``DecisionTreeClassifier``, the learner the authors used, and the
weighting against the property the authors' own tests check: after each generation the new
column's weighted use equals the mean weighted use of the old columns.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.tree import DecisionTreeClassifier

from models.cart import _cart
from models.cart._cart_columns import prepare_columns
from models.cart.feature_stream_forest import FeatureStreamForest
from schemas.codec import decode_state, encode_state

SMALL = {"n_trees": 6}


def _data(seed: int = 0, n: int = 400, d: int = 5, labels=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    score = X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 2]
    cuts = np.quantile(score, np.linspace(0, 1, len(labels) + 1)[1:-1])
    return X, [labels[int(k)] for k in np.searchsorted(cuts, score)]


def _feed(model, X, y, widths) -> None:
    for d in widths:
        model.learn_many(X[:, :d], y)


def _same_outputs(a, b, X) -> None:
    np.testing.assert_array_equal(a.predict_proba_many(X), b.predict_proba_many(X))
    assert a.predict_many(X) == b.predict_many(X)
    ia, ib = a.importances(), b.importances()
    assert ia.keys() == ib.keys()
    for key in ia:
        np.testing.assert_array_equal(ia[key], ib[key])


def _restored(model):
    return FeatureStreamForest.from_state(decode_state(encode_state(model.to_state())))


# --- the CART kernel against scikit-learn ------------------------------------------------------


def _one_tree(X, codes, weights, max_depth=6, n_classes=2):
    slots = _cart.n_node_slots(max_depth)
    nodes = (np.zeros(slots, np.int64), np.zeros(slots), np.zeros(slots, np.int64),
             np.zeros(slots, np.int64), np.zeros((slots, n_classes)))
    n = _cart.grow_tree(X, codes, prepare_columns(X, codes), np.arange(X.shape[1]), weights,
                        max_depth, *nodes)
    return n, nodes


def _columns_of(kind: str, rng, n: int = 3000):
    """Continuous columns, discrete ones (histogram search), or both with a binary one."""
    X = rng.random((n, 4))
    if kind == "discrete":
        X = np.floor(X * np.array([2, 5, 12, 40])) / 3.0
    elif kind == "mixed":
        X[:, 1] = np.floor(X[:, 1] * 5)
        X[:, 3] = (X[:, 3] > 0.7).astype(float)
    return X


def _labels(X, rng):
    score = X[:, 0] + X[:, 1] * X[:, 2]
    return (score + rng.normal(0, 0.3, X.shape[0]) > np.median(score)).astype(np.int64)


@pytest.mark.parametrize("bootstrap", [False, True])
@pytest.mark.parametrize(("columns", "max_depth"), [((0, 1, 2, 3), 3), ((1,), 6), ((0, 1, 2, 3), 6)])
def test_cart_kernel_grows_scikit_learns_tree(bootstrap, columns, max_depth):
    # continuous columns. scikit-learn breaks ties between equally good splits by a random
    # order of the features, so equal trees are expected where ties cannot happen: one
    # column, or shallow (large) nodes. Deep trees on several columns meet ties (two columns
    # that each cut off the same weights of the same classes); there the check is quality.
    rng = np.random.default_rng(3)
    X_all = _columns_of("continuous", rng)
    codes = _labels(X_all, rng)
    X = np.ascontiguousarray(X_all[:, columns])
    weights = rng.poisson(1.0, 3000).astype(float) if bootstrap else np.ones(3000)
    n, (feature, threshold, left, right, count) = _one_tree(X, codes, weights, max_depth)
    keep = weights > 0
    ref = DecisionTreeClassifier(max_depth=max_depth, random_state=0).fit(
        X[keep], codes[keep], sample_weight=weights[keep])
    out = np.zeros((X.shape[0], 2))
    _cart.predict_proba_trees(X, feature[None], threshold[None], left[None], right[None],
                              count[None], np.ones(1), out)
    if len(columns) > 1 and max_depth > 3:
        ours, theirs = roc_auc_score(codes, out[:, 1]), roc_auc_score(codes, ref.predict_proba(X)[:, 1])
        assert abs(ours - theirs) < 0.01, (ours, theirs)
        return
    assert n == ref.tree_.node_count
    np.testing.assert_allclose(out, ref.predict_proba(X), atol=1e-12)
    np.testing.assert_allclose(np.sort(threshold[feature >= 0]),
                               np.sort(ref.tree_.threshold[ref.tree_.feature >= 0]))
    imp = _cart.mdi(feature[None], left[None], right[None], count[None], np.array([n]),
                    np.ones(1), X.shape[1])
    np.testing.assert_allclose(imp, ref.feature_importances_, atol=1e-12)


@pytest.mark.parametrize("kind", ["discrete", "mixed"])
@pytest.mark.parametrize("max_depth", [3, 8])
def test_histogram_search_chooses_the_splits_of_the_sorted_scan(kind, max_depth):
    rng = np.random.default_rng(5)
    X = _columns_of(kind, rng)
    codes = _labels(X, rng)
    weights = rng.poisson(1.0, X.shape[0]).astype(float)
    columns = prepare_columns(X, codes)
    scanned = columns[:5] + (np.full(4, -1, np.int64),)  # no column ranked: scans only
    trees = []
    for cols in (columns, scanned):
        slots = _cart.n_node_slots(max_depth)
        nodes = (np.zeros(slots, np.int64), np.zeros(slots), np.zeros(slots, np.int64),
                 np.zeros(slots, np.int64), np.zeros((slots, 2)))
        n = _cart.grow_tree(X, codes, cols, np.array([2, 0, 3, 1]), weights, max_depth, *nodes)
        trees.append((n, nodes))
    assert trees[0][0] == trees[1][0] > 7
    for a, b in zip(trees[0][1], trees[1][1]):
        np.testing.assert_array_equal(a, b)


def test_columns_are_sorted_and_discrete_ones_ranked():
    rng = np.random.default_rng(4)
    X = _columns_of("mixed", rng, n=500)
    X[:, 2] = 7.0
    codes = rng.integers(0, 3, 500)
    order, values, sorted_codes, rank, distinct, n_distinct = prepare_columns(X, codes)
    assert n_distinct.tolist() == [-1, 5, 1, 2]
    for j in range(4):
        np.testing.assert_array_equal(values[j], np.sort(X[:, j]))
        np.testing.assert_array_equal(values[j], X[order[j], j])
        np.testing.assert_array_equal(sorted_codes[j], codes[order[j]])
        if n_distinct[j] > 0:
            k = n_distinct[j]
            np.testing.assert_array_equal(distinct[j, :k], np.unique(X[:, j]))
            np.testing.assert_array_equal(distinct[j, rank[j]], X[:, j])


def test_cart_kernel_stops_at_pure_nodes_and_constant_columns():
    X = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 3.0], [0.0, 4.0]])
    n, (feature, threshold, *_rest) = _one_tree(X, np.array([0, 0, 1, 1]), np.ones(4))
    assert n == 3 and feature[0] == 1 and threshold[0] == 2.5  # the constant column is never used
    n, _ = _one_tree(X[:, :1], np.array([0, 0, 1, 1]), np.ones(4))
    assert n == 1  # no column separates anything: a single leaf
    n, _ = _one_tree(X, np.zeros(4, np.int64), np.ones(4))
    assert n == 1  # pure


def test_stratified_bootstrap_keeps_class_sizes():
    codes = np.array([0] * 30 + [1] * 10)
    rows = np.argsort(codes, kind="stable")
    start = np.array([0, 30, 40])
    rng = np.array([12345], np.uint64)
    w = np.zeros(40)
    for _ in range(20):
        _cart.stratified_bootstrap(rng, 0, rows, start, np.ones(40), w)
        assert w[:30].sum() == 30 and w[30:].sum() == 10
        assert (w == np.floor(w)).all() and (w == 0).any()


# --- contract, growing form --------------------------------------------------------------------


def test_predictions_before_learning_are_defined():
    model = FeatureStreamForest(**SMALL)
    assert model.predict_proba_many(np.zeros((3, 2))).shape == (3, 0)
    assert model.predict_many(np.zeros((3, 2))) == [None] * 3
    assert model.n_seen == 0 and model.n_generations == 0 and model.n_features is None
    assert model.importances() == {}
    assert _restored(model).n_seen == 0


def test_each_call_is_a_generation_on_all_columns():
    X, y = _data(1)
    model = FeatureStreamForest(**SMALL)
    _feed(model, X, y, (2, 2, 5))  # same width again adds a generation; widths may jump
    assert (model.n_generations, model.n_features, model.n_seen) == (3, 5, 3 * X.shape[0])
    assert model.to_state()["arrays"]["node_feature"].shape[0] == 3 * SMALL["n_trees"]
    proba = model.predict_proba_many(X)
    assert proba.shape == (X.shape[0], 3) and set(model.classes) == {"a", "b", "c"}
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.mean(np.array(model.predict_many(X)) == np.array(y)) > 0.8
    imp = model.importances()["mdi"]
    assert imp.shape == (5,) and abs(imp.sum() - 1.0) < 1e-12 and np.argmax(imp) == 0


def test_inputs_are_not_mutated_and_same_seed_same_forest():
    X, y = _data(2)
    X_copy, y_copy = X.copy(), list(y)
    a, b = FeatureStreamForest(**SMALL, seed=7), FeatureStreamForest(**SMALL, seed=7)
    _feed(a, X, y, (1, 3, 5))
    _feed(b, X, y, (1, 3, 5))
    np.testing.assert_array_equal(X, X_copy)
    assert y == y_copy
    _same_outputs(a, b, X)
    c = FeatureStreamForest(**SMALL, seed=8)
    _feed(c, X, y, (1, 3, 5))
    assert not np.array_equal(a.predict_proba_many(X), c.predict_proba_many(X))


@pytest.mark.parametrize("mode", ["challenger", "baseline"])
def test_state_round_trip_predicts_and_continues_identically(mode):
    X, y = _data(4, d=6)
    original = FeatureStreamForest(**SMALL, mode=mode, seed=3)
    _feed(original, X, y, (1, 2, 3))
    restored = _restored(original)
    assert restored.n_seen == original.n_seen and restored.classes == original.classes
    _same_outputs(original, restored, X[:, :3])
    for model in (original, restored):  # new columns, a repeated width, a new label
        _feed(model, X, y, (5, 5))
        model.learn_many(X[:50], ["d"] * 50)
    _same_outputs(original, restored, X)
    so, sr = original.to_state(), restored.to_state()
    assert so["arrays"].keys() == sr["arrays"].keys()
    for key in so["arrays"]:
        np.testing.assert_array_equal(so["arrays"][key], sr["arrays"][key], err_msg=key)


def test_bad_input_raises_clear_value_error():
    X, y = _data(5, n=100)
    model = FeatureStreamForest(**SMALL)
    model.learn_many(X[:, :4], y)
    with pytest.raises(ValueError, match="features"):
        model.learn_many(X[:, :3], y)  # columns never disappear
    with pytest.raises(ValueError, match="features"):
        model.predict_many(X[:, :3])
    with pytest.raises(ValueError, match="features"):
        model.predict_many(X)  # columns the forest has not learned yet
    bad = X[:, :4].copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.learn_many(bad, y)
    with pytest.raises(ValueError, match="NaN"):
        model.predict_proba_many(bad)
    with pytest.raises(ValueError, match="2-D"):
        model.predict_many(X[0, :4])
    with pytest.raises(ValueError, match="labels"):
        model.learn_many(X[:10], y[:9])
    with pytest.raises(ValueError, match="labels"):
        model.learn_many(X, None)
    with pytest.raises(ValueError, match="sample_weight"):
        model.learn_many(X, y, sample_weight=-np.ones(100))
    with pytest.raises(ValueError, match="sample_weight"):
        model.learn_many(X, y, sample_weight=np.ones(99))
    for params in ({"n_trees": 0}, {"mtry": 0.0}, {"mtry": 1.5}, {"max_depth": 0},
                   {"mode": "offline"}, {"max_generations": -1}):
        with pytest.raises(ValueError):
            FeatureStreamForest(**params)
    assert model.n_generations == 1  # nothing above changed the forest


def _corrupt(state, name, fn):
    state = decode_state(encode_state(state))
    state["arrays"][name] = fn(np.array(state["arrays"][name]))
    return state


def _set(index, value):
    def fn(arr):
        arr[index] = value
        return arr
    return fn


CORRUPTIONS = {
    "child before its parent (a cycle)": ("node_left", _set((0, 0), 0)),
    "child outside the tree": ("node_right", _set((0, 0), 10**6)),
    "column the tree never had": ("node_feature", _set((0, 0), 2)),  # first generation: 2 columns
    "node count over capacity": ("n_nodes", _set(0, 10**6)),
    "missing generation": ("gen_weight", lambda a: a[:-1]),
    "shrinking widths": ("gen_width", _set(0, 4)),
    "NaN weight": ("gen_weight", _set(0, np.nan)),
    "negative counts": ("node_count", _set((0, 0, 0), -1.0)),
    "wrong dtype": ("node_left", lambda a: a.astype(np.float64)),
    "extra class column": ("node_count", lambda a: np.concatenate((a, a[:, :, :1]), axis=2)),
    "rng of two states": ("rng", lambda a: np.concatenate((a, a))),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupted_state_raises_value_error(case):
    X, y = _data(6)
    model = FeatureStreamForest(**SMALL)
    _feed(model, X, y, (2, 3))
    name, fn = CORRUPTIONS[case]
    with pytest.raises(ValueError):
        FeatureStreamForest.from_state(_corrupt(model.to_state(), name, fn))


def test_state_without_an_array_or_with_a_stranger_raises_value_error():
    X, y = _data(6)
    model = FeatureStreamForest(**SMALL)
    model.learn_many(X, y)
    state = model.to_state()
    del state["arrays"]["weighted_use"]
    with pytest.raises(ValueError, match="missing"):
        FeatureStreamForest.from_state(state)
    state = model.to_state()
    state["extra"]["classes"] = []
    with pytest.raises(ValueError):
        FeatureStreamForest.from_state(state)


def test_sample_weight_scales_out_and_zero_weight_rows_are_ignored():
    X, y = _data(7, d=3)
    plain, doubled = FeatureStreamForest(**SMALL), FeatureStreamForest(**SMALL)
    plain.learn_many(X, y)
    doubled.learn_many(X, y, sample_weight=np.full(X.shape[0], 2.0))
    np.testing.assert_array_equal(plain.predict_proba_many(X), doubled.predict_proba_many(X))
    # rows of weight 0 never reach a leaf: their label gets no probability anywhere
    ignored = FeatureStreamForest(**SMALL)
    ignored.learn_many(X, ["z"] * 50 + y[50:], sample_weight=np.r_[np.zeros(50), np.ones(350)])
    assert ignored.classes.index("z") == 0
    proba = ignored.predict_proba_many(X)
    assert (proba[:, 0] == 0).all() and np.allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("mode", ["challenger", "baseline"])
def test_max_generations_keeps_the_newest_trees_of_the_unbounded_forest(mode):
    X, y = _data(11, d=5)
    capped = FeatureStreamForest(**SMALL, mode=mode, max_generations=2)
    full = FeatureStreamForest(**SMALL, mode=mode)
    for model in (capped, full):
        _feed(model, X, y, (1, 2, 3, 5, 5))
    assert (capped.n_generations, full.n_generations) == (2, 5)
    a, b = capped.to_state()["arrays"], full.to_state()["arrays"]
    T = 2 * SMALL["n_trees"]
    for name in ("node_feature", "node_threshold", "node_left", "node_right", "node_count",
                 "n_nodes"):
        np.testing.assert_array_equal(a[name], b[name][-T:], err_msg=name)
    np.testing.assert_array_equal(a["gen_weight"], b["gen_weight"][-2:])
    np.testing.assert_array_equal(a["weighted_use"], b["weighted_use"])  # chances given stay
    restored = _restored(capped)
    _same_outputs(capped, restored, X)
    capped.learn_many(X, y)
    restored.learn_many(X, y)
    _same_outputs(capped, restored, X)


# --- the algorithm -----------------------------------------------------------------------------


def test_new_column_weighted_use_equals_the_old_mean_and_newer_generations_weigh_more():
    X, y = _data(8, d=8)
    model = FeatureStreamForest(n_trees=30, seed=2)
    for d in range(1, 9):
        model.learn_many(X[:, :d], y)
        use = model.feature_use
        if d > 1:
            assert use[-1] == pytest.approx(use[:-1].mean(), rel=1e-12)
    w = model.generation_weights
    assert w[-1] == 1.0 and (np.diff(w) > 0).all()
    # each generation weighs about 1 / (1 - p_old) = (d - 1) / ((1 - mtry) d) times the last
    d = np.arange(2, 9)
    np.testing.assert_allclose(w[1:] / w[:-1], 3.0 * (d - 1) / d, rtol=0.4)
    baseline = FeatureStreamForest(n_trees=30, mode="baseline", seed=2)
    _feed(baseline, X, y, range(1, 9))
    np.testing.assert_array_equal(baseline.generation_weights, np.ones(8))


def _auc(model, X, y):
    return roc_auc_score(y, model.predict_proba_many(X)[:, model.classes.index(1)])


def test_an_informative_column_raises_auc():
    rng = np.random.default_rng(9)
    X = rng.random((900, 4))
    y = (X[:, 3] + 0.2 * rng.standard_normal(900) > 0.5).astype(int)
    model = FeatureStreamForest(n_trees=20, seed=4)
    _feed(model, X[:600], y[:600], (1, 2, 3))
    before = _auc(model, X[600:, :3], y[600:])
    model.learn_many(X[:600], y[:600])
    after = _auc(model, X[600:], y[600:])
    assert before < 0.6 < 0.85 < after
    assert np.argmax(model.importances()["mdi"]) == 3


def test_challenger_beats_baseline_when_late_columns_matter():
    # six noise columns first, then the two that decide the label: the baseline keeps
    # voting with the many early trees that never saw them
    rng = np.random.default_rng(10)
    wins = []
    for seed in range(3):
        X = rng.random((900, 8))
        y = ((X[:, 6] > 0.5) ^ (X[:, 7] > 0.5)).astype(int)
        y = np.where(rng.random(900) < 0.1, 1 - y, y)
        aucs = {}
        for mode in ("challenger", "baseline"):
            model = FeatureStreamForest(n_trees=20, mode=mode, seed=seed)
            _feed(model, X[:600], y[:600], range(1, 9))
            aucs[mode] = _auc(model, X[600:], y[600:])
        wins.append(aucs["challenger"] - aucs["baseline"])
    assert min(wins) > 0.02, wins
