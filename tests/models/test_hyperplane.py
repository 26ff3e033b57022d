"""Tests of models.generators.hyperplane.RotatingHyperplane (MOA/river rotating hyperplane + ground truth)."""

from __future__ import annotations

import numpy as np
import pytest

from models.generators.hyperplane import RotatingHyperplane


def test_shapes_types_and_ranges():
    X, y, W = RotatingHyperplane(n_features=6, n_drift_features=3, seed=2).take(500)
    assert X.shape == (500, 6) and y.shape == (500,) and W.shape == (500, 6)
    assert X.dtype == np.float64 and y.dtype == np.int64
    assert ((X >= 0) & (X < 1)).all()
    assert set(np.unique(y).tolist()) <= {0, 1}
    assert (W >= 0).all()
    empty = RotatingHyperplane(seed=2).take(0)
    assert [a.shape[0] for a in empty] == [0, 0, 0]


def test_same_seed_same_stream_and_chunking_does_not_matter():
    a = RotatingHyperplane(seed=5).take(3000)
    gen = RotatingHyperplane(seed=5)
    parts = [gen.take(n) for n in (1, 999, 1000, 1000)]
    for full, chunks in zip(a, zip(*parts)):
        np.testing.assert_array_equal(full, np.concatenate(chunks))
    other = RotatingHyperplane(seed=6).take(3000)
    assert not np.array_equal(a[0], other[0])


def test_only_the_first_k_weights_drift_by_T_per_instance():
    T = 0.001
    _, _, W = RotatingHyperplane(n_features=10, n_drift_features=2, mag_change=T, seed=3).take(400)
    assert (W[:, 2:] == W[0, 2:]).all()
    steps = np.diff(W[:, :2], axis=0)
    assert W[:, :2].min() > 0.01  # no zero crossing on this seed, so |a_i| moves like a_i
    np.testing.assert_allclose(np.abs(steps), T, rtol=1e-9)


def test_direction_reverses_with_probability_S():
    S = 0.1
    _, _, W = RotatingHyperplane(n_features=3, n_drift_features=1, mag_change=1.0, sigma=S,
                                 seed=4).take(5001)
    # with T = 1 |a| moves by one unit per step except when it crosses zero, rarely here;
    # a reversal shows as a sign change between consecutive steps of the signed weight
    gen = RotatingHyperplane(n_features=3, n_drift_features=1, mag_change=1.0, sigma=S, seed=4)
    signed = []
    for _ in range(5001):
        signed.append(gen.weights[0])
        gen.take(1)
    steps = np.sign(np.diff(signed))
    reversals = np.mean(steps[1:] != steps[:-1])
    assert abs(reversals - S) < 0.02  # 5,000 Bernoulli(0.1): sd 0.004
    np.testing.assert_allclose(np.abs(signed), W[:, 0])


def test_labels_follow_the_hyperplane_with_the_requested_noise():
    clean = RotatingHyperplane(n_features=10, n_drift_features=2, mag_change=0.001, noise=0.0,
                               seed=7)
    noisy = RotatingHyperplane(n_features=10, n_drift_features=2, mag_change=0.001, noise=0.05,
                               seed=7)
    X, y0, W = clean.take(40000)
    X1, y1, _ = noisy.take(40000)
    np.testing.assert_array_equal(X, X1)  # the same draws, only the flips differ
    assert abs(np.mean(y0 != y1) - 0.05) < 0.005  # sd of the rate: 0.001
    assert abs(y0.mean() - 0.5) < 0.02  # a_0 = sum(a)/2 halves the unit cube
    # the clean label is the side of the hyperplane (weights are still positive here, so
    # |W| are the weights themselves)
    head = 2000
    assert W[:head].min() > 0
    expected = (np.einsum("ij,ij->i", W[:head], X[:head]) >= 0.5 * W[:head].sum(axis=1))
    np.testing.assert_array_equal(y0[:head], expected.astype(np.int64))


def test_invalid_parameters():
    with pytest.raises(ValueError):
        RotatingHyperplane(n_features=0)
    with pytest.raises(ValueError):
        RotatingHyperplane(n_features=3, n_drift_features=4)
    with pytest.raises(ValueError):
        RotatingHyperplane(sigma=1.5)
    with pytest.raises(ValueError):
        RotatingHyperplane(noise=-0.1)
    with pytest.raises(ValueError):
        RotatingHyperplane(mag_change=-1.0)



def test_defaults_are_the_unclipped_switch_free_stream():
    kw = dict(n_features=10, n_drift_features=5, mag_change=1e-3, sigma=0.01, seed=8)
    plain = RotatingHyperplane(**kw).take(2000)
    explicit = RotatingHyperplane(**kw, clip=False, switch_every=0).take(2000)
    for a, b in zip(plain, explicit):
        np.testing.assert_array_equal(a, b)
    # pinned from the stream before clip/switch_every existed: the defaults did not move
    X, y, W = plain
    assert (float(X.sum()), int(y.sum()), float(W.sum())) == (
        10040.232228897697, 1041, 9661.75407866417)
    np.testing.assert_array_equal(W[-1, :3], [0.5699722766055609, 0.6602768433379251,
                                              0.8897108384855172])


def test_clipped_weights_stay_in_the_unit_interval_and_reflect():
    T = 0.05
    gen = RotatingHyperplane(n_features=6, n_drift_features=3, mag_change=T, sigma=0.0,
                             clip=True, seed=9)
    _, _, W = gen.take(3000)
    assert W.min() >= 0.0 and W.max() <= 1.0
    assert (W[:, 3:] == W[0, 3:]).all()
    # with no random reversal, each drifting weight bounces between the bounds: it reaches
    # both, and every step is T except the ones cut short at a bound
    assert (W[:, :3].min(axis=0) == 0.0).all() and (W[:, :3].max(axis=0) == 1.0).all()
    steps = np.abs(np.diff(W[:, :3], axis=0))
    at_bound = np.isin(W[1:, :3], (0.0, 1.0)) | np.isin(W[:-1, :3], (0.0, 1.0))
    np.testing.assert_allclose(steps[~at_bound], T, rtol=1e-9)
    assert (steps <= T + 1e-12).all()


def test_clipped_matches_the_unclipped_walk_away_from_the_bounds():
    kw = dict(n_features=10, n_drift_features=2, mag_change=1e-4, sigma=0.1, seed=3)
    free = RotatingHyperplane(**kw).take(1000)
    clipped = RotatingHyperplane(**kw, clip=True).take(1000)
    assert 0.0 < free[2][:, :2].min() and free[2][:, :2].max() < 1.0  # no bound reached
    for a, b in zip(free, clipped):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(clip=True, mag_change=0.01, sigma=0.1),
                                dict(switch_every=700, mag_change=0.0),
                                dict(switch_every=500, clip=True, mag_change=0.003, sigma=0.03)])
def test_variants_are_chunk_consistent(kw):
    full = RotatingHyperplane(n_drift_features=5, seed=11, **kw).take(3000)
    gen = RotatingHyperplane(n_drift_features=5, seed=11, **kw)
    parts = [gen.take(n) for n in (1, 499, 700, 1, 1299, 500)]
    for a, chunks in zip(full, zip(*parts)):
        np.testing.assert_array_equal(a, np.concatenate(chunks))


def test_switches_permute_which_features_matter_every_P_instances():
    P = 1000
    gen = RotatingHyperplane(n_features=10, mag_change=0.0, switch_every=P, seed=12)
    _, _, W = gen.take(5 * P)
    blocks = W.reshape(5, P, 10)
    assert (blocks == blocks[:, :1]).all()  # constant between switches (T = 0)
    for b in range(1, 5):
        # the same weights, in another order: the top feature changes on these draws
        np.testing.assert_array_equal(np.sort(blocks[b, 0]), np.sort(blocks[0, 0]))
        assert not np.array_equal(blocks[b, 0], blocks[b - 1, 0])
    top = blocks[:, 0].argmax(axis=1)
    assert len(set(top.tolist())) > 1
    again = RotatingHyperplane(n_features=10, mag_change=0.0, switch_every=P, seed=12)
    np.testing.assert_array_equal(again.take(5 * P)[2], W)  # deterministic from the seed


def test_invalid_switch_period():
    with pytest.raises(ValueError):
        RotatingHyperplane(switch_every=-1)


@pytest.mark.slow
def test_drift_benchmark_settings_and_one_short_stream():
    # the protocol of tests/benchmarks/rankings/bench_rankings_drift.py on the generator's variants
    from tests.benchmarks.rankings.bench_rankings_drift import all_settings, ask_times, score_method

    settings = all_settings()
    assert len(settings) == 17 and len({s.name for s in settings}) == 17
    bases = sorted(s.seed_base for s in settings)
    assert all(b - a >= 1000 for a, b in zip(bases, bases[1:]))  # disjoint seeds per setting
    by_name = {s.name: s for s in settings}
    assert by_name["K=2,T=0.0001,clipped"].n_rows == 30000
    assert by_name["K=5,T=0.01,unclipped"].n_rows == 5000
    assert by_name["K=5,T=0.001,clipped"].sigma == pytest.approx(0.01)
    assert len(ask_times(30000)) == 996 and len(ask_times(5000)) == 490
    _, _, W = by_name["K=2,T=0.01,clipped"].stream(7, 3000)
    assert W.min() >= 0.0 and W.max() <= 1.0
    # a window forest over 300 rows follows K = 2 weights moving by 0.01 per instance
    scores = score_method("window:300", "K=2,T=0.01,clipped", seed=3, n_rows=1500, n_trees=5)
    assert set(scores) == {"win300:mdi", "win300:mda"}
    assert scores["win300:mdi"] > 0.2, scores
