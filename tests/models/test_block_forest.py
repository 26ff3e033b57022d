"""The block-forest ranker: memory per feature set by Lepski's rule, exact state, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from models.block_forest import BlockForestRanker


def _switching(n: int, switch: int, seed: int = 0):
    """Feature 0 decides the label before ``switch``, feature 2 after it (4 features)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = np.where(np.arange(n) < switch, X[:, 0] > 0.5, X[:, 2] > 0.5).astype(int)
    return X, y


def test_stationary_stream_uses_the_longest_memory():
    X, y = _switching(2000, 10**9)
    ranker = BlockForestRanker(block_size=50, stride=50, max_blocks=16, seed=3)
    ranker.learn_many(X, y)
    assert ranker.n_blocks == 40
    # every feature's block importances agree over the 16 kept blocks
    assert (ranker.window_blocks == 16).all()
    imp = ranker.importances()["mdi"]
    assert int(np.argmax(imp)) == 0 and imp[0] > 0.5


def test_an_abrupt_switch_shortens_the_memory_of_the_switched_features():
    X, y = _switching(3000, 2000)
    ranker = BlockForestRanker(block_size=50, stride=50, max_blocks=32, seed=3)
    ranker.learn_many(X[:2000], y[:2000])
    assert ranker.window_blocks[0] == 32
    ranker.learn_many(X[2000:2200], y[2000:2200])  # four blocks of the new concept
    window = ranker.window_blocks
    assert window[0] <= 4 and window[2] <= 4
    imp = ranker.importances()["mdi"]
    assert int(np.argmax(imp)) == 2


def test_state_round_trip_mid_block_continues_identically():
    X, y = _switching(1500, 700, seed=5)
    a = BlockForestRanker(block_size=40, stride=15, n_trees=8, max_blocks=8, seed=11)
    a.learn_many(X[:630], y[:630])  # 15 blocks and 30 rows of the next
    b = BlockForestRanker.from_state(a.to_state())
    for learner in (a, b):
        learner.learn_many(X[630:], y[630:])
    np.testing.assert_array_equal(a.importances()["mdi"], b.importances()["mdi"])
    np.testing.assert_array_equal(a.window_blocks, b.window_blocks)
    assert a.n_seen == b.n_seen == 1500


def test_same_seed_same_importances_and_chunking_does_not_matter():
    X, y = _switching(1200, 600, seed=2)
    y = np.where(np.random.default_rng(9).random(1200) < 0.2, 1 - y, y)  # noise: trees differ
    whole = BlockForestRanker(block_size=30, stride=10, seed=4)
    whole.learn_many(X, y)
    chunked = BlockForestRanker(block_size=30, stride=10, seed=4)
    for s in range(0, 1200, 7):
        chunked.learn_many(X[s:s + 7], y[s:s + 7])
    np.testing.assert_array_equal(whole.importances()["mdi"], chunked.importances()["mdi"])
    other = BlockForestRanker(block_size=30, stride=10, seed=5)
    other.learn_many(X, y)
    assert not np.array_equal(whole.importances()["mdi"], other.importances()["mdi"])


def test_nothing_before_the_first_block_and_bad_parameters_refused():
    ranker = BlockForestRanker(block_size=20, stride=20)
    ranker.learn_many(np.zeros((5, 3)), [0, 1, 0, 1, 0])
    assert ranker.importances() == {}
    for bad in ({"block_size": 5}, {"stride": 0}, {"stride": 300}, {"kappa": 0.0}, {"mtry": 0.0},
                {"max_blocks": 0}, {"noise": "spread"}):
        with pytest.raises(ValueError):
            BlockForestRanker(**bad)
