"""The block forests' growers (:mod:`models.cart._block_cart`, :mod:`models.cart._cart_regression`), their
sorted block columns and the window mixture's bookkeeping (:mod:`models.cart._block_windows`)."""

from __future__ import annotations

import numpy as np
import pytest

from models.cart import _block_cart, _block_windows, _cart
from models.cart.block_forest import BlockForestRanker
from models.cart.block_forest_regression import BlockForestRegressionRanker
from models.core import _fmath as fm
from models.core._rng import seed_states


def _columns(X):
    order, values = np.empty(X.shape[::-1], np.int64), np.empty(X.shape[::-1])
    _block_cart.sort_columns(X, order, values)
    return order, values


def _block(seed: int, n: int = 100, d: int = 7, n_classes: int = 3):
    """A block with ties (values on a grid of 20) and classes from a hyperplane."""
    rng = np.random.default_rng(seed)
    X = np.floor(rng.random((n, d)) * 20) / 20
    score = X @ rng.normal(size=d)
    codes = np.searchsorted(np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]), score)
    return np.ascontiguousarray(X), codes.astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mtry", [1.0, 0.5])
def test_searching_every_feature_gives_the_cart_forests_importances_bit_for_bit(seed, mtry):
    # with every feature of a tree searched at every split, the block trees are those of
    # models.cart._cart (same draws, splits and order of the sums): the ranker on up to
    # SPLIT_FEATURES features measures what it did before them
    X, codes = _block(seed)
    T, depth, d = 10, 4, X.shape[1]
    class_rows, class_start = _cart.class_layout(codes, 3)
    slots = _cart.n_node_slots(depth)
    nodes = [np.zeros((T, slots), np.int64), np.zeros((T, slots)),
             np.zeros((T, slots), np.int64), np.zeros((T, slots), np.int64),
             np.zeros((T, slots, 3))]
    n_nodes = np.zeros(T, np.int64)
    _cart.grow_forest(X, codes, np.ones(X.shape[0]), class_rows, class_start, 0, 0.0, mtry,
                      depth, seed_states(seed, 1, 5), np.zeros((T, d), np.int64), *nodes,
                      n_nodes)
    feature, _, left, right, count = nodes
    forest, per_tree = np.zeros(d), np.zeros((T, d))
    _block_cart.forest_importances(X, _columns(X), codes, 3, T, mtry, d, depth,
                                   seed_states(seed, 1, 5), forest, per_tree)
    assert forest.tobytes() == _cart.mdi(feature, left, right, count, n_nodes, np.ones(T),
                                         d).tobytes()
    assert per_tree.tobytes() == _cart.mdi_per_tree(feature, left, right, count, n_nodes,
                                                    d).tobytes()


def test_the_features_each_split_searches():
    assert [_block_cart.split_features(d) for d in (1, 10, 16, 17, 90, 256, 257, 500)] == \
        [1, 10, 16, 16, 16, 16, 17, 23]


def test_a_split_searching_a_few_features_still_finds_a_feature_that_splits():
    # 40 features, 39 of them constant: a node draws features until one splits it
    rng = np.random.default_rng(1)
    X = np.zeros((100, 40))
    X[:, 27] = rng.random(100)
    codes = (X[:, 27] > 0.5).astype(np.int64)
    forest, per_tree = np.zeros(40), np.zeros((5, 40))
    _block_cart.forest_importances(X, _columns(X), codes, 2, 5, 1.0, 3, 4,
                                   seed_states(2, 1, 1), forest, per_tree)
    assert forest[27] == 1.0 and (per_tree[:, 27] == 1.0).all()


@pytest.mark.parametrize("seed", range(3))
def test_merging_the_new_rows_gives_the_full_sort(seed):
    X, _ = _block(seed, d=5)
    order, values = _columns(X)
    rng = np.random.default_rng(seed)
    scratch = tuple(np.empty(X.shape[0] + 1, t)
                    for t in (np.int64, np.int64, float, np.int64, float))
    for start in (0, 95, 40):  # overwrite 10 rows of the ring, wrapping once
        changed = np.zeros(X.shape[0], np.bool_)
        changed[(start + np.arange(10)) % X.shape[0]] = True
        X[changed] = np.floor(rng.random((10, X.shape[1])) * 20) / 20
        _block_cart.update_columns(X, changed, order, values, scratch)
        want_order, want_values = _columns(X)
        np.testing.assert_array_equal(order, want_order)
        np.testing.assert_array_equal(values, want_values)


def test_window_means_and_scores_are_numpys_bit_for_bit():
    rng = np.random.default_rng(4)
    history, n_blocks, gap = rng.random((32, 6)), 45, 3
    windows = np.array([1, 2, 4, 8, 12])
    recent = history[(n_blocks - 1 - np.arange(32)) % 32]  # newest first
    means = np.empty((5, 6))
    _block_windows.window_means(history, n_blocks, gap, windows, means)
    counts = np.minimum(windows, 32 - gap)
    want = np.cumsum(recent[gap:], axis=0)[counts - 1] / counts[:, None]
    assert means.tobytes() == want.tobytes()
    stats = [rng.random((5, 6)), rng.random((5, 5, 6))]  # the losses and their products
    expected = [s.copy() for s in stats]
    err = (want - recent[0]) * (want - recent[0])
    for s, new in zip(expected, (err, err[:, None] * err[None, :])):
        s *= 1.0 - 0.01
        s += 0.01 * new
    _block_windows.score_windows(history, n_blocks, gap, windows, 0.01, *stats,
                                 np.empty((2, 5, 6)))
    for got, want_s in zip(stats, expected):
        assert got.tobytes() == want_s.tobytes()


def test_paired_scores_are_numpys_bit_for_bit():
    rng = np.random.default_rng(8)
    L, C = rng.random((9, 40)), rng.random((9, 9, 40))
    L[3, :5] = L[1, :5]  # tied best windows: the first is the best, as numpy's argmin
    L[1, :5] = 0.0
    L[3, :5] = 0.0
    mass, squares = 0.37, 0.002
    m1, m2 = L / mass, C / mass
    cols = np.arange(40)
    b = m1.argmin(axis=0)
    own = np.einsum("kkf->kf", m2)
    diff = m1 - m1[b, cols]
    var = own - 2.0 * m2[:, b, cols] + own[b, cols] - diff * diff
    se = np.sqrt(np.maximum(var, 0.0) * squares) / mass
    want = np.where(diff > 0.0, diff / np.maximum(se, 1e-300), 0.0)
    got = np.empty_like(L)
    _block_windows.paired_scores(L, C, mass, squares, got)
    assert got.tobytes() == want.tobytes()


def _numpy_weights(L, P, log_windows, eta, paired_eta, pool, long_prior):
    """The window weights as numpy computed them before the kernel (the reference)."""
    best = L.min(axis=0)
    logw = np.minimum(-(L - best) / (eta * best + 1e-12), -P / paired_eta)
    seen = L.max(axis=0) > 0.0
    if pool > 0.0 and seen.any():
        logw = (1.0 - pool) * logw + pool * logw[:, seen].mean(axis=1, keepdims=True)
    logw = logw + long_prior * log_windows[:, None]
    w = fm.exp_array(logw - logw.max(axis=0))
    return w / w.sum(axis=0)


@pytest.mark.parametrize("seed", range(40))
def test_window_weights_and_mixture_are_numpys_bit_for_bit(seed):
    """Shapes where numpy sums differently: one window (a contiguous run: pairwise), one
    feature (the column sums pairwise), 8 and more of either, features never split on."""
    rng = np.random.default_rng(seed)
    K = int(rng.choice([1, 2, 8, 9, 12]))
    d = int(rng.choice([1, 2, 7, 8, 9, 17, 130, 300]))
    L = rng.random((K, d)) * 10.0 ** rng.integers(-8, 3)
    L[:, rng.random(d) < 0.3] = 0.0
    P = rng.random((K, d)) * 5 * (rng.random((K, d)) < 0.7)
    log_windows = np.sort(rng.random(K))
    pool = float(rng.choice([0.0, 0.5]))
    want = _numpy_weights(L, P, log_windows, 0.5, 3.0, pool, 0.25)
    got = np.empty_like(L)
    _block_windows.window_weights(L, P, log_windows, 0.5, 3.0, pool, 0.25, got)
    assert got.tobytes() == want.tobytes()
    means = rng.random((K, d))
    mixed = np.empty(d)
    _block_windows.mixture(got, means, mixed)
    assert mixed.tobytes() == (want * means).sum(axis=0).tobytes()


@pytest.mark.parametrize("cls", [BlockForestRanker, BlockForestRegressionRanker])
def test_a_wide_stream_restored_mid_block_continues_identically(cls):
    # 40 features: splits search a subset of them, on sorted columns that are not state (a
    # restored ranker sorts its block again and finds the same order)
    rng = np.random.default_rng(6)
    X = rng.random((900, 40))
    if cls is BlockForestRanker:
        y = (X[:, 3] + X[:, 17] > 1.0).astype(int)
    else:
        y = np.column_stack([X[:, 3] + X[:, 17], X[:, 5] * 2.0])
    a = cls(seed=3)
    a.learn_many(X[:455], y[:455])
    b = cls.from_state(a.to_state())
    for learner in (a, b):
        for s in range(455, 900, 100):
            learner.learn_many(X[s:s + 100], y[s:s + 100])
    assert a.importances()["mdi"].tobytes() == b.importances()["mdi"].tobytes()
    want = {3, 17} if cls is BlockForestRanker else {3, 5, 17}
    assert set(np.argsort(-a.importances()["mdi"])[:len(want)].tolist()) == want
