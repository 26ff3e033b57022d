"""The block-forest ranker on multi-target regression streams: the regression trees'
importances, the shared memory rule, exact state and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from models.cart import _block_cart
from models.cart import _cart_regression as cr
from models.cart.block_forest_regression import BlockForestRegressionRanker
from models.core._rng import seed_states
from schemas.codec import decode_state, encode_state


def _switching(n: int, switch: int, seed: int = 0):
    """Features 0 and 1 drive two targets on different scales before ``switch``, feature 2
    after it (5 features)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 5))
    before = np.arange(n)[:, None] < switch
    Y = np.where(before, np.column_stack([X[:, 0] + 0.5 * X[:, 1], 1000 * X[:, 0] ** 2]),
                 np.column_stack([X[:, 2], 1000 * X[:, 2] ** 2]))
    return X, Y + rng.normal(0, 0.02, Y.shape) * [1, 1000]


def _columns(X):
    """The block's sorted columns, as the ranker passes them to the trees."""
    order, values = np.empty(X.shape[::-1], np.int64), np.empty(X.shape[::-1])
    _block_cart.sort_columns(X, order, values)
    return order, values


def test_one_tree_finds_the_split_that_explains_the_targets():
    # y is a step at x_1 = 0.5 (x_0 is noise): the root splits on feature 1, halfway
    rng = np.random.default_rng(1)
    X = rng.random((400, 2))
    Y = np.column_stack([np.where(X[:, 1] > 0.5, 1.0, -1.0), np.where(X[:, 1] > 0.5, 2.0, 0.0)])
    out = np.zeros(2)
    cr.tree_decreases(X, Y, np.ones(400), _columns(X), np.array([0, 1]), 2, 1,
                      seed_states(1, 1, 1), out)
    # the split removes all of the squared error, counted over the root's weight
    assert out[0] == 0.0 and out[1] == pytest.approx(((Y - Y.mean(axis=0)) ** 2).sum() / 400)


def test_targets_count_alike_whatever_their_scale():
    # target 0 depends on x_0, target 1 (a thousand times larger) on x_1: both matter equally
    rng = np.random.default_rng(2)
    X = rng.random((3000, 3))
    Y = np.column_stack([X[:, 0], 1000 * X[:, 1]])
    ranker = BlockForestRegressionRanker(seed=1)
    ranker.learn_many(X, Y)
    imp = ranker.importances()["mdi"]
    assert abs(imp[0] - imp[1]) < 0.1 and imp[2] < 0.05


def test_an_abrupt_switch_moves_the_ranking_to_the_new_feature():
    X, Y = _switching(6000, 3000)
    ranker = BlockForestRegressionRanker(seed=4)
    ranker.learn_many(X[:3000], Y[:3000])
    before = ranker.importances()["mdi"]
    assert int(np.argmax(before)) == 0 and before[2] < 0.05
    assert (ranker.window_blocks > 32).all()  # a stationary stream: long memories
    ranker.learn_many(X[3000:3300], Y[3000:3300])
    assert int(np.argmax(ranker.importances()["mdi"])) == 2
    # the switched features' memories shrink (to 16-17 measurements within 300 rows and 8
    # within 400; on their own evidence alone, ``pool`` 0: 8-9 and 5); the untouched noise
    # features keep theirs
    assert ranker.window_blocks[[0, 2]].max() < 20
    ranker.learn_many(X[3300:3400], Y[3300:3400])
    window = ranker.window_blocks
    assert window[[0, 2]].max() < 10 and window[[3, 4]].min() > 32


def test_state_round_trip_mid_block_continues_identically_and_chunks_do_not_matter():
    X, Y = _switching(3000, 1500, seed=5)
    whole = BlockForestRegressionRanker(seed=7)
    whole.learn_many(X, Y)
    parts = BlockForestRegressionRanker(seed=7)
    for s in range(0, 1733, 97):
        parts.learn_many(X[s:min(s + 97, 1733)], Y[s:min(s + 97, 1733)])
    parts = BlockForestRegressionRanker.from_state(decode_state(encode_state(parts.to_state())))
    parts.learn_many(X[1733:], Y[1733:])
    np.testing.assert_array_equal(whole.importances()["mdi"], parts.importances()["mdi"])
    for key, value in whole.to_state()["arrays"].items():
        np.testing.assert_array_equal(value, parts.to_state()["arrays"][key], err_msg=key)


def test_bad_targets_are_refused_and_a_corrupt_state_too():
    X, Y = _switching(300, 10**9)
    ranker = BlockForestRegressionRanker(block_size=50, stride=10, seed=1)
    ranker.learn_many(X, Y)
    with pytest.raises(ValueError, match="targets"):
        ranker.learn_many(X[:5], Y[:5, :1])
    with pytest.raises(ValueError, match="NaN"):
        ranker.learn_many(X[:5], np.full((5, 2), np.nan))
    state = ranker.to_state()
    state["arrays"]["block_y"][0, 0] = np.inf
    with pytest.raises(ValueError, match="finite"):
        BlockForestRegressionRanker.from_state(state)


def test_the_forest_kernel_is_deterministic_per_seed():
    rng = np.random.default_rng(3)
    X, Y = rng.random((200, 6)), rng.random((200, 2))
    a, b = np.zeros((10, 6)), np.zeros((10, 6))
    cr.forest_decreases(X, Y, _columns(X), 10, 0.5, 6, 4, seed_states(9, 1, 1), a)
    cr.forest_decreases(X, Y, _columns(X), 10, 0.5, 6, 4, seed_states(9, 1, 1), b)
    np.testing.assert_array_equal(a, b)
    # mtry 0.5: trees differ in their features, so some tree leaves some feature out
    assert (a == 0.0).any() and (a.sum(axis=1) > 0).all()
