"""The block-forest ranker: memory per feature (the window mixture), exact state, older states,
determinism."""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path

import numpy as np
import pytest

from models.cart.block_forest import STATE_VERSION, BlockForestRanker
from models.cart.block_forest_regression import BlockForestRegressionRanker
from schemas.codec import decode_state, encode_state

REFERENCE = Path(__file__).parent / "reference"


def _switching(n: int, switch: int, seed: int = 0):
    """Feature 0 decides the label before ``switch``, feature 2 after it (4 features)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = np.where(np.arange(n) < switch, X[:, 0] > 0.5, X[:, 2] > 0.5).astype(int)
    return X, y


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


@pytest.mark.parametrize("pool,longest", [(0.5, 192), (0.0, 6), (0.5, 0)])
def test_mixture_weights_are_the_faded_errors_of_each_window_by_hand(pool, longest):
    X, y = _noisy(170, seed=8)  # 16 measurements: after 20, 30, ..., 170 rows
    ranker = BlockForestRanker(block_size=20, stride=10, max_blocks=8, rate=0.25, eta=0.4,
                               paired_eta=1.5, long_prior=0.5, pool=pool, longest=longest,
                               seed=2)
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
    mass = _faded(np.ones(len(preds)), 0.25)  # the weight the faded means have gathered
    assert np.ptp(L, axis=0).min() > 0  # the windows differ
    logw = -(L - L.min(0)) / (0.4 * L.min(0) + 1e-12)
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
    # a prior toward the longer windows
    logw = logw + 0.5 * (np.log(windows) / np.log(windows[-1]))[:, None]
    w = np.exp(logw - logw.max(0))
    w /= w.sum(0)
    means = np.stack([H[-k:].mean(axis=0) for k in windows])
    np.testing.assert_allclose(ranker.importances()["mdi"], (w * means).sum(axis=0), rtol=1e-12)


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
    state = _as_version_1(old.to_state())
    del state["params"]["longest"]  # written before the longest candidate was a setting
    restored = BlockForestRanker.from_state(state)
    assert restored.params["longest"] == 0
    for learner in (old, restored):
        learner.learn_many(X[800:], y[800:])
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


def test_a_state_of_this_version_missing_an_array_is_refused():
    X, y = _noisy(400, seed=1)
    ranker = BlockForestRanker(block_size=20, stride=10, seed=1)
    ranker.learn_many(X, y)
    for name in ("loss_cross", "losses", "history"):
        state = ranker.to_state()
        del state["arrays"][name]
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
    for bad in ({"block_size": 5}, {"stride": 0}, {"stride": 300}, {"mtry": 0.0},
                {"max_blocks": 0}, {"rate": 0.0}, {"rate": 1.5}, {"eta": 0.0},
                {"paired_eta": 0.0}, {"long_prior": -0.5}, {"pool": -0.1}, {"pool": 1.5},
                {"longest": -1}):
        with pytest.raises(ValueError):
            BlockForestRanker(**bad)


# ------------------------------------------------------------------ older states

def _as_version_1(state: dict) -> dict:
    """What version 1 wrote for the same ranker under its default rule: the parameters and
    arrays of the alternatives kept then for comparison, and no ``state_version``."""
    a = state["arrays"]
    K, F = a["losses"].shape
    state["params"].update(memory="mixture", kappa=1.5, noise="trees", weights="paired",
                           corr_eta=0.0, young_prior=0.0, young_blocks=50.0)
    a.update(spread=np.zeros_like(a["history"]), pred_moments=np.zeros((3, K, F)),
             target_moments=np.zeros((3, F)))
    del state["extra"]["state_version"]
    return state


def _replay(ranker, X, y) -> str:
    """Digest of the importances and memories after each 50 rows of ``X``, learned."""
    h = hashlib.sha256()
    for s in range(0, X.shape[0], 50):
        ranker.learn_many(X[s:s + 50], y[s:s + 50])
        h.update(np.ascontiguousarray(ranker.importances()["mdi"]).tobytes())
        h.update(np.ascontiguousarray(ranker.window_blocks).tobytes())
    return h.hexdigest()


def _reference(name: str) -> dict:
    return decode_state(zlib.decompress((REFERENCE / f"{name}.msgpack.zlib").read_bytes()))


def _targets(n: int, seed: int):
    """Two targets: a linear one and a step, with noise (4 features)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    Y = np.column_stack([2 * X[:, 0] + X[:, 1], np.where(X[:, 2] > 0.5, 1.0, -1.0)]) \
        + rng.normal(0, 0.1, (n, 2))
    return X, Y


def test_a_state_writes_its_version_and_a_later_one_is_refused():
    X, y = _noisy(300, seed=1)
    ranker = BlockForestRanker(block_size=20, stride=10, seed=1)
    ranker.learn_many(X, y)
    state = ranker.to_state()
    assert state["extra"]["state_version"] == STATE_VERSION == 2
    assert not {"memory", "weights", "corr_eta", "young_prior"} & set(state["params"])
    assert not {"spread", "pred_moments", "target_moments"} & set(state["arrays"])
    state["extra"]["state_version"] = 3
    with pytest.raises(ValueError, match="version 3 is not supported"):
        BlockForestRanker.from_state(state)
    state = ranker.to_state()
    state["params"]["weights"] = "paired"  # version 2 has no such parameter
    with pytest.raises(ValueError, match=r"does not have: \['weights'\]"):
        BlockForestRanker.from_state(state)


def test_a_version_1_checkpoint_of_the_default_continues_exactly():
    """Checkpoints written by version 1 (``tests/models/reference/block_forest_v1*``: the
    default ranker, seed 7, after 700 rows) continue as version 1 continued them: the digests
    were taken with the version-1 code, over the same calls."""
    state = _reference("block_forest_v1")
    assert "state_version" not in state["extra"] and state["params"]["memory"] == "mixture"
    ranker = BlockForestRanker.from_state(state)
    assert ranker.params == BlockForestRanker(seed=7).params
    X, y = _noisy(1500, seed=21)
    assert _replay(ranker, X[700:], y[700:]) == \
        "223de28b6c0069634c517871ea6b283be2a1bb087de1b3d610121eebe39cd564"
    back = BlockForestRanker.from_state(ranker.to_state())  # it checkpoints as version 2
    assert back.to_state()["extra"]["state_version"] == STATE_VERSION
    regression = BlockForestRegressionRanker.from_state(_reference("block_forest_regression_v1"))
    X, Y = _targets(1500, seed=22)
    assert _replay(regression, X[700:], Y[700:]) == \
        "14697b62245c76b0b19308437619a7c0d43a2e6aa067585d8c0ad29b3abf38a0"


def test_a_version_1_state_continues_exactly_whatever_its_kept_parameters():
    X, y = _noisy(1200, seed=9)
    ranker = BlockForestRanker(block_size=40, stride=20, max_blocks=8, seed=7, pool=0.0,
                               longest=0)
    ranker.learn_many(X[:700], y[:700])
    state = _as_version_1(ranker.to_state())
    for name in ("pool", "longest"):  # written before the pooled evidence and ``longest``
        del state["params"][name]
    restored = BlockForestRanker.from_state(state)
    assert restored.params == ranker.params
    for learner in (ranker, restored):
        learner.learn_many(X[700:], y[700:])
    np.testing.assert_array_equal(ranker.importances()["mdi"], restored.importances()["mdi"])
    np.testing.assert_array_equal(ranker.window_blocks, restored.window_blocks)


@pytest.mark.parametrize("change,reason", [
    ({"memory": "lepski"}, "Lepski's rule"),
    ({"memory": None}, "Lepski's rule"),  # written before the mixture
    ({"weights": "relative"}, "weights relative to the best loss"),
    ({"weights": None}, "weights relative to the best loss"),  # before the paired weights
    ({"corr_eta": 0.3}, "correlation criterion"),
    ({"young_prior": 3.0}, "young stream's prior"),
])
def test_a_version_1_state_of_a_removed_rule_is_refused_with_its_reason(change, reason):
    state = _reference("block_forest_v1")
    for name, value in change.items():
        if value is None:
            del state["params"][name]
        else:
            state["params"][name] = value
    with pytest.raises(ValueError, match=f"version 1 ran .*{reason}.*start this ranker afresh"):
        BlockForestRanker.from_state(state)


def test_the_version_1_checkpoint_of_the_former_weights_is_refused():
    """``block_forest_v1_relative``: the default before the paired weights (weights relative
    to the best loss times the correlations), written by version 1."""
    state = _reference("block_forest_v1_relative")
    assert state["params"]["weights"] == "relative" and state["params"]["corr_eta"] == 0.3
    with pytest.raises(ValueError, match="weights relative to the best loss"):
        BlockForestRanker.from_state(state)


@pytest.mark.parametrize("stride,block_size,max_blocks", [(10, 100, 64), (1, 10, 64),
                                                          (25, 100, 2), (5, 50, 8)])
def test_learning_a_poll_at_once_gives_the_importances_of_an_ask_after_every_block(
        stride, block_size, max_blocks):
    # learn_many_ranked answers, for every measurement of one call, what importances()
    # answered after it with learn_many a block at a time; the state is the same, across
    # calls of any length, a restore, the ring of measurements growing and a class that
    # appears late
    rng = np.random.default_rng(stride)
    n, d = 2400, 3
    X = rng.random((n, d))
    X[:, 0] = np.round(X[:, 0], 1)  # ties in a column
    y = [str(int(v)) for v in X[:, 1] + 0.3 * rng.random(n) > 0.6]
    y[n // 2] = "late"
    kw = dict(seed=4, stride=stride, block_size=block_size, max_blocks=max_blocks)
    ref, ahead = BlockForestRanker(**kw), BlockForestRanker(**kw)
    expected = []
    for a in range(0, n, stride):
        before = ref.n_blocks
        ref.learn_many(X[a:a + stride], y[a:a + stride])
        if ref.n_blocks > before:
            expected.append((min(a + stride, n), ref.importances()["mdi"].tolist()))
    got, a = [], 0
    for b in (1, 150, 151, 900, 1333, n):
        if a == 900:
            ahead = BlockForestRanker.from_state(decode_state(encode_state(ahead.to_state())))
        rows, imps = ahead.learn_many_ranked(X[a:b], y[a:b])
        got += [(a + int(r), m.tolist()) for r, m in zip(rows, imps["mdi"])]
        a = b
    assert got == expected and len(got) > 20
    state, ref_state = ahead.to_state(), ref.to_state()
    assert state["params"] == ref_state["params"] and state["extra"] == ref_state["extra"]
    for k, v in ref_state["arrays"].items():
        np.testing.assert_array_equal(state["arrays"][k], v, err_msg=k)
