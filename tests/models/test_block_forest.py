"""The block-forest ranker: memory per feature (the window mixture, Lepski's rule), exact state,
determinism."""

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


def test_lepski_keeps_the_longest_memory_on_a_stationary_stream():
    X, y = _switching(2000, 10**9)
    ranker = BlockForestRanker(block_size=50, stride=50, max_blocks=16, seed=3, memory="lepski")
    ranker.learn_many(X, y)
    assert ranker.n_blocks == 40
    # every feature's block importances agree over the 16 kept blocks
    assert (ranker.window_blocks == 16).all()
    imp = ranker.importances()["mdi"]
    assert int(np.argmax(imp)) == 0 and imp[0] > 0.5


def test_lepski_shortens_the_memory_of_the_switched_features_after_an_abrupt_switch():
    X, y = _switching(3000, 2000)
    ranker = BlockForestRanker(block_size=50, stride=50, max_blocks=32, seed=3, memory="lepski")
    ranker.learn_many(X[:2000], y[:2000])
    assert ranker.window_blocks[0] == 32
    ranker.learn_many(X[2000:2200], y[2000:2200])  # four blocks of the new concept
    window = ranker.window_blocks
    assert window[0] <= 4 and window[2] <= 4
    imp = ranker.importances()["mdi"]
    assert int(np.argmax(imp)) == 2


@pytest.mark.parametrize("memory", ["mixture", "lepski"])
def test_state_round_trip_mid_block_continues_identically(memory):
    X, y = _switching(1500, 700, seed=5)
    a = BlockForestRanker(block_size=40, stride=15, n_trees=8, max_blocks=8, seed=11,
                          memory=memory)
    a.learn_many(X[:630], y[:630])  # 15 blocks and 30 rows of the next
    b = BlockForestRanker.from_state(a.to_state())
    for learner in (a, b):
        learner.learn_many(X[630:], y[630:])
    np.testing.assert_array_equal(a.importances()["mdi"], b.importances()["mdi"])
    np.testing.assert_array_equal(a.window_blocks, b.window_blocks)
    assert a.n_seen == b.n_seen == 1500


def test_mixture_weighs_long_windows_on_a_stationary_stream_and_short_ones_after_a_switch():
    X, y = _switching(6000, 4000)
    ranker = BlockForestRanker(seed=3)  # the defaults: blocks of 100 every 10 rows
    ranker.learn_many(X[:4000], y[:4000])
    before = ranker.window_blocks
    assert before.min() > 32  # more than 32 measurements, i.e. about 400 rows and more
    assert int(np.argmax(ranker.importances()["mdi"])) == 0
    ranker.learn_many(X[4000:4400], y[4000:4400])
    after = ranker.window_blocks
    # the switched features' memory shrinks to a few blocks; feature 2 leads within 400 rows
    assert after[0] < before[0] / 4 and after[2] < before[2] / 4
    assert int(np.argmax(ranker.importances()["mdi"])) == 2


def _noisy(n: int, seed: int = 0):
    """Two features matter, with label noise: block importances vary from block to block."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0.75).astype(int)
    return X, y


def _faded(values, rate: float) -> np.ndarray:
    """``f = (1 - rate) f + rate v`` over ``values``, from zero."""
    out = np.zeros_like(values[0])
    for v in values:
        out = (1 - rate) * out + rate * v
    return out


@pytest.mark.parametrize("weights,corr_eta,pool,longest", [("paired", 0.0, 0.5, 192),
                                                           ("paired", 0.3, 0.0, 6),
                                                           ("relative", 0.3, 0.0, 0),
                                                           ("relative", 0.0, 0.5, 6)])
def test_mixture_weights_are_the_faded_errors_and_correlations_of_each_window_by_hand(
        weights, corr_eta, pool, longest):
    X, y = _noisy(170, seed=8)  # 16 measurements: after 20, 30, ..., 170 rows
    ranker = BlockForestRanker(block_size=20, stride=10, max_blocks=8, rate=0.25, eta=0.4,
                               weights=weights, paired_eta=1.5, long_prior=0.5,
                               corr_eta=corr_eta, pool=pool, young_prior=2.0, young_blocks=10.0,
                               longest=longest, seed=2)
    ranker.learn_many(X, y)
    windows, gap = ranker._windows(), ranker._gap()
    # 16 measurements kept: windows up to 8 (a longest candidate of 192 is cut to 8)
    assert gap == 2 and list(windows) == ([1, 2, 4, 6] if longest == 6 else [1, 2, 4, 8])
    H = ranker._recent()[::-1]  # oldest first: measurement m was taken after 20 + 10 m rows
    assert H.shape[0] == ranker.n_blocks == 16
    # each window's prediction of measurement m: its mean of those ending gap earlier
    preds = np.array([[H[max(0, m - gap - w + 1):m - gap + 1].mean(axis=0) for w in windows]
                      for m in range(gap, 16)])
    targets = H[gap:][:, None, :]
    L = _faded((preds - targets) ** 2, 0.25)
    np.testing.assert_allclose(ranker._arrays["losses"], L, rtol=1e-12)
    mass = _faded(np.ones(len(preds)), 0.25)  # the weight the moments have gathered

    def mean(v):
        return _faded(v, 0.25) / mass

    cov = mean(preds * targets) - mean(preds) * mean(targets)
    rho = cov / np.sqrt((mean(preds ** 2) - mean(preds) ** 2)
                        * (mean(targets ** 2) - mean(targets) ** 2))
    np.testing.assert_allclose(ranker._correlations(), rho, rtol=1e-9, atol=1e-12)
    assert np.ptp(L, axis=0).min() > 0 and np.ptp(rho, axis=0).min() > 0  # windows differ
    logw = -(L - L.min(0)) / (0.4 * L.min(0) + 1e-12)
    if weights == "paired":
        errors = ((preds - targets) ** 2)
        m1 = L / mass  # faded means of the squared errors and of their products
        m2 = _faded(errors[:, :, None] * errors[:, None, :], 0.25) / mass
        parts = 0.25 * 0.75 ** np.arange(len(preds))  # each error's weight in the faded mean
        n_eff = parts.sum() ** 2 / (parts ** 2).sum()
        z = np.zeros_like(L)
        for f in range(L.shape[1]):
            b = int(np.argmin(m1[:, f]))
            for k in range(len(windows)):
                d = m1[k, f] - m1[b, f]
                var = m2[k, k, f] - 2 * m2[k, b, f] + m2[b, b, f] - d * d
                z[k, f] = d / np.sqrt(var / n_eff) if d > 0 else 0.0
        np.testing.assert_allclose(ranker._paired_scores(), z, rtol=1e-9)
        assert z.max(axis=0).min() > 0  # every feature has a window worse than its best
        logw = np.minimum(logw, -z / 1.5)  # the larger of the two penalties
    # each feature's penalties shrunk toward their mean over the features
    logw = (1 - pool) * logw + pool * logw.mean(axis=1, keepdims=True)
    if weights == "paired":  # a prior toward the longer windows, stronger on a young stream
        logw = logw + (0.5 + 2.0 * np.exp(-15 / 10)) * (np.log(windows)
                                                         / np.log(windows[-1]))[:, None]
    if corr_eta:
        logw += (rho - rho.max(0)) / corr_eta
    w = np.exp(logw - logw.max(0))
    w /= w.sum(0)
    means = np.stack([H[-k:].mean(axis=0) for k in windows])
    np.testing.assert_allclose(ranker.importances()["mdi"], (w * means).sum(axis=0), rtol=1e-12)


def test_the_correlations_move_the_weight_to_the_windows_that_co_move_with_the_truth():
    X, y = _noisy(600, seed=3)
    without = BlockForestRanker(block_size=20, stride=10, max_blocks=8, corr_eta=0.0, seed=2)
    with_corr = BlockForestRanker(block_size=20, stride=10, max_blocks=8, corr_eta=0.05, seed=2)
    for ranker in (without, with_corr):
        ranker.learn_many(X, y)
    # same measurements and losses; only the correlation factor differs
    np.testing.assert_array_equal(without._arrays["losses"], with_corr._arrays["losses"])
    rho = with_corr._correlations()
    best = rho.argmax(axis=0)
    F = np.arange(rho.shape[1])
    assert (with_corr._weights()[best, F] > without._weights()[best, F]).all()


def _without_paired_weights(state: dict) -> dict:
    """What a checkpoint written before the paired weights held: none of their parameters
    (nor the later ``pool`` and young stream's prior) and no products of the windows'
    errors."""
    for name in ("weights", "paired_eta", "long_prior", "pool", "young_prior", "young_blocks",
                 "longest"):
        del state["params"][name]
    del state["arrays"]["loss_cross"]
    return state


def test_pooled_evidence_shrinks_each_features_penalties_toward_the_streams():
    X, y = _noisy(900, seed=5)
    rankers = {pool: BlockForestRanker(block_size=20, stride=10, max_blocks=8, pool=pool,
                                       seed=3) for pool in (0.0, 0.5, 1.0)}
    for ranker in rankers.values():
        ranker.learn_many(X, y)
    # the pool changes the weights only: same measurements and losses
    np.testing.assert_array_equal(rankers[0.0]._arrays["losses"], rankers[1.0]._arrays["losses"])
    w = {pool: r._weights() for pool, r in rankers.items()}
    assert np.ptp(w[0.0], axis=1).max() > 0.05  # on its own evidence, each feature differs
    # wholly pooled, every feature gets the stream's weights; half pooled, in between
    np.testing.assert_allclose(w[1.0], np.repeat(w[1.0][:, :1], w[1.0].shape[1], 1), rtol=1e-12)
    spread = {pool: np.abs(w[pool] - w[1.0]).sum() for pool in (0.0, 0.5)}
    assert 0 < spread[0.5] < spread[0.0]


def test_a_feature_no_block_splits_on_stays_out_of_the_pooled_evidence():
    X, y = _noisy(900, seed=6)
    X[:, 3] = 0.5  # a stuck sensor: no tree splits on it, its measurements are all 0
    alone, pooled = (BlockForestRanker(block_size=20, stride=10, max_blocks=8, pool=pool,
                                       seed=3) for pool in (0.0, 0.5))
    for ranker in (alone, pooled):
        ranker.learn_many(X, y)
    assert not alone._arrays["losses"][:, 3].any() and alone._arrays["losses"][:, :3].all()
    # exp(-P + prior) up to a factor per feature: pooling half of P over features 0-2 only
    logw = np.log(alone._weights())
    expected = np.exp(0.5 * logw + 0.5 * logw[:, :3].mean(axis=1, keepdims=True))
    np.testing.assert_allclose(pooled._weights(), expected / expected.sum(axis=0), rtol=1e-9)


def test_a_state_written_before_the_pooled_evidence_continues_without_it():
    X, y = _noisy(1200, seed=9)
    old = BlockForestRanker(block_size=40, stride=20, max_blocks=8, seed=7, pool=0.0)
    old.learn_many(X[:700], y[:700])
    state = old.to_state()
    for name in ("pool", "young_prior", "young_blocks", "longest"):
        del state["params"][name]
    restored = BlockForestRanker.from_state(state)
    assert restored.params["pool"] == 0.0 and restored.params["weights"] == "paired"
    assert restored.params["young_prior"] == 0.0
    for learner in (old, restored):
        learner.learn_many(X[700:], y[700:])
    np.testing.assert_array_equal(old.importances()["mdi"], restored.importances()["mdi"])


def test_a_young_streams_memory_grows_with_it_and_the_prior_fades_to_the_long_run_one():
    X, y = _noisy(3000, seed=12)
    rankers = {prior: BlockForestRanker(block_size=20, stride=10, max_blocks=32, seed=3,
                                        young_prior=prior, young_blocks=20.0)
               for prior in (0.0, 3.0)}
    young, old = {}, {}
    for prior, ranker in rankers.items():
        ranker.learn_many(X[:300], y[:300])  # 29 measurements: the prior is 3 e^-1.4 above
        young[prior] = ranker.window_blocks
        ranker.learn_many(X[300:], y[300:])  # 299: e^-14.9, nothing left of it
        old[prior] = ranker.window_blocks
    assert rankers[3.0]._prior() - 0.25 < 1e-5
    # same measurements and losses; only the weights differ, and only while the stream is young
    np.testing.assert_array_equal(rankers[0.0]._arrays["losses"], rankers[3.0]._arrays["losses"])
    assert (young[3.0] > young[0.0] + 1.0).all()
    np.testing.assert_allclose(old[3.0], old[0.0], rtol=1e-4)


def test_the_candidates_end_at_the_longest_memory_and_older_states_keep_powers_of_two():
    assert list(BlockForestRanker()._windows()) == [1, 2, 4, 8, 16, 32, 64, 128, 192]
    assert list(BlockForestRanker(longest=0)._windows()) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert list(BlockForestRanker(longest=100)._windows()) == [1, 2, 4, 8, 16, 32, 64, 100]
    # 48 measurements kept (12 blocks of 40 rows every 10): at most 24, half of them
    small = {"block_size": 40, "stride": 10, "max_blocks": 12, "seed": 7}
    assert list(BlockForestRanker(**small)._windows()) == [1, 2, 4, 8, 16, 24]
    X, y = _noisy(1500, seed=11)
    old = BlockForestRanker(**small, longest=0)
    assert list(old._windows()) == [1, 2, 4, 8, 16]
    old.learn_many(X[:800], y[:800])
    state = old.to_state()
    del state["params"]["longest"]  # written before the longest candidate was a setting
    restored = BlockForestRanker.from_state(state)
    assert restored.params["longest"] == 0
    for learner in (old, restored):
        learner.learn_many(X[800:], y[800:])
    np.testing.assert_array_equal(old.importances()["mdi"], restored.importances()["mdi"])


def test_a_state_written_before_the_correlations_continues_without_them():
    X, y = _noisy(1200, seed=6)
    old = BlockForestRanker(block_size=40, stride=20, max_blocks=8, seed=7, rate=0.005,
                            weights="relative", eta=0.3, corr_eta=0.0, pool=0.0)
    old.learn_many(X[:700], y[:700])
    state = _without_paired_weights(old.to_state())
    # ... and before that: no corr_eta and no moments
    del state["params"]["corr_eta"]
    del state["arrays"]["pred_moments"], state["arrays"]["target_moments"]
    restored = BlockForestRanker.from_state(state)
    assert restored.params["corr_eta"] == 0.0 and restored.params["rate"] == 0.005
    assert restored.params["weights"] == "relative"
    for learner in (old, restored):
        learner.learn_many(X[700:], y[700:])
    np.testing.assert_array_equal(old.importances()["mdi"], restored.importances()["mdi"])


def test_a_state_written_before_the_paired_weights_continues_with_the_relative_ones():
    X, y = _noisy(1200, seed=4)
    # the default of that version: weights relative to the best loss, times the correlations
    old = BlockForestRanker(block_size=40, stride=20, max_blocks=8, seed=7, rate=0.001,
                            weights="relative", eta=0.25, corr_eta=0.3, pool=0.0)
    old.learn_many(X[:700], y[:700])
    restored = BlockForestRanker.from_state(_without_paired_weights(old.to_state()))
    assert restored.params["weights"] == "relative" and restored.params["corr_eta"] == 0.3
    assert restored.params["eta"] == 0.25
    for learner in (old, restored):
        learner.learn_many(X[700:], y[700:])
    np.testing.assert_array_equal(old.importances()["mdi"], restored.importances()["mdi"])
    # the same checkpoint read as the paired rule would publish something else
    paired = BlockForestRanker.from_state({**old.to_state(), "params": {
        **old.params, "weights": "paired"}})
    assert not np.array_equal(paired.importances()["mdi"], old.importances()["mdi"])


def test_a_state_written_before_the_mixture_continues_under_lepskis_rule():
    X, y = _switching(1200, 600, seed=6)
    old = BlockForestRanker(block_size=40, stride=20, max_blocks=8, seed=7, memory="lepski")
    old.learn_many(X[:700], y[:700])
    state = old.to_state()
    # what a checkpoint of the earlier version held: no memory, rate, eta nor losses
    state["params"] = {k: v for k, v in state["params"].items()
                       if k not in ("memory", "rate", "eta")}
    del state["arrays"]["losses"]
    restored = BlockForestRanker.from_state(state)
    assert restored.params["memory"] == "lepski"
    for learner in (old, restored):
        learner.learn_many(X[700:], y[700:])
    np.testing.assert_array_equal(old.importances()["mdi"], restored.importances()["mdi"])


def test_corrupt_window_losses_are_refused():
    X, y = _switching(300, 10**9)
    ranker = BlockForestRanker(block_size=20, stride=10, seed=1)
    ranker.learn_many(X, y)
    for bad in (np.nan, -1.0):
        state = ranker.to_state()
        state["arrays"]["losses"][0, 0] = bad
        with pytest.raises(ValueError, match="losses"):
            BlockForestRanker.from_state(state)
    for bad in (np.inf, -1.0):
        state = ranker.to_state()
        state["arrays"]["loss_cross"][1, 0, 0] = bad
        with pytest.raises(ValueError, match="products"):
            BlockForestRanker.from_state(state)
    for name, index, bad in (("pred_moments", (1, 0, 0), -1.0), ("pred_moments", (0, 0, 0), np.inf),
                             ("target_moments", (0, 0), 1.5), ("target_moments", (2, 1), -0.1)):
        state = ranker.to_state()
        state["arrays"][name][index] = bad
        with pytest.raises(ValueError, match="moments"):
            BlockForestRanker.from_state(state)


def test_a_state_of_this_version_missing_an_array_is_refused():
    X, y = _noisy(400, seed=1)
    ranker = BlockForestRanker(block_size=20, stride=10, seed=1)
    ranker.learn_many(X, y)
    for name in ("loss_cross", "losses", "pred_moments"):
        state = ranker.to_state()
        del state["arrays"][name]
        # only a state written before an array existed starts it at zero
        with pytest.raises(ValueError, match=f"missing \\['{name}'\\]"):
            BlockForestRanker.from_state(state)


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
                {"max_blocks": 0}, {"noise": "spread"}, {"memory": "ici"}, {"rate": 0.0},
                {"rate": 1.5}, {"eta": 0.0}, {"corr_eta": -0.1}, {"weights": "best"},
                {"paired_eta": 0.0}, {"long_prior": -0.5}, {"pool": -0.1}, {"pool": 1.5},
                {"young_prior": -1.0}, {"young_blocks": 0.0}, {"longest": -1}):
        with pytest.raises(ValueError):
            BlockForestRanker(**bad)
