"""iSOUP-Tree and iSOUP-SymRF: statistics against slow twins, the paper's definitions, and
quick fidelity checks (the full runs are ``tests/benchmarks/fidelity/fidelity_isoup.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.hoeffding import _hoeffding as hs
from models.isoup import _ebst as eb
from models.isoup import _isoup_kernels as ik
from models.isoup.isoup_forest import ISOUPSymRF
from models.isoup.isoup_tree import ISOUPTree
from schemas.checkpoint import state_equal
from tests.models import isoup_streams as streams
from tests.models.reference import isoup_reference as ref

#: replacements per tree and answers of :func:`test_the_drift_path_answers_the_pinned_bits`
DRIFT_PIN = ([1, 1, 1, 1], "5cd9e3546e4c179a")


def _observer(K: int, M: int):
    return np.zeros((1, 1, 1), np.int64), np.zeros((1, 1, 1, K)), np.zeros((1, 1, 1, K, 1 + 2 * M))


@pytest.mark.parametrize(("K", "distinct"), [(64, 20), (8, 1000), (2, 1000)])
def test_bounded_ebst_scores_every_kept_threshold_exactly(K, distinct):
    rng = np.random.default_rng(K)
    n, M = 600, 3
    x = rng.integers(0, distinct, n) / 7.0
    Y = np.column_stack([x * 2, np.sin(x), rng.normal(size=n)]) + rng.normal(0, 0.1, (n, M))
    w = rng.integers(1, 4, n).astype(float)
    obs = _observer(K, M)
    watch = np.zeros((1, 1, 1), np.int64)  # the one observer watches feature 0
    for i in range(n):
        eb.ebst_learn(*obs, watch, 0, 0, x[i:i + 1], Y[i], w[i])
    eb.sort_bins(*obs, 0, 0, 0)
    n_keys, keys = int(obs[0][0, 0, 0]), obs[1][0, 0, 0]
    assert n_keys == min(K, len(np.unique(x)))
    assert np.all(np.diff(keys[:n_keys]) > 0)
    buf = [np.zeros(M) for _ in range(4)]
    for k in range(n_keys - 1):
        # the sums below every kept threshold are those of the rows at or below it
        wl = eb.ebst_totals(obs[0], obs[2], 0, 0, 0, k, buf[0], buf[1])
        below = x <= keys[k]
        assert wl == pytest.approx(w[below].sum())
        np.testing.assert_allclose(buf[0], (w[below, None] * Y[below]).sum(0), rtol=1e-9)
        W = eb.ebst_totals(obs[0], obs[2], 0, 0, 0, n_keys, buf[2], buf[3])
        merit = hs.variance_reduction(wl, buf[0], buf[1], W, buf[2], buf[3], 0.05)
        assert merit == pytest.approx(ref.variance_reduction_split(x, Y, keys[k], w), abs=1e-9)
    best, k, W = eb.ebst_best_split(*obs, 0, 0, 0, 0.05, *buf)
    expected = max(ref.variance_reduction_split(x, Y, t, w) for t in keys[:n_keys - 1])
    assert best == pytest.approx(expected, abs=1e-9) and W == pytest.approx(w.sum())


def test_variance_reduction_needs_five_percent_in_each_branch_and_ignores_constant_targets():
    x = np.arange(100.0)
    Y = np.column_stack([x, np.full(100, 3.0)])
    s, q = Y.sum(0), (Y ** 2).sum(0)
    for cut, valid in ((3, False), (4, True), (94, True), (95, False)):
        left = Y[:cut + 1]
        m = hs.variance_reduction(cut + 1.0, left.sum(0), (left ** 2).sum(0), 100.0, s, q, 0.05)
        assert (m > 0) == valid
        if valid:  # the constant target does not dilute the mean
            assert m == pytest.approx(ref.variance_reduction_split(x, Y, float(cut)))


def test_subspace_sizes_are_the_papers():
    X, Y, _ = streams.bike_sharing() if streams.available("bike_sharing_hour.csv") else (
        np.random.default_rng(0).random((50, 12)), np.random.default_rng(1).random((50, 3)), None)
    for subspace, size in (("sqrt", 1 + math.ceil(math.sqrt(12))), ("log", 1 + math.ceil(math.log(12)))):
        f = ISOUPSymRF(n_models=3, subspace=subspace)
        f.learn_many(X[:50], Y[:50])
        assert f._arrays["slot_features"].shape[2] == size  # 5 and 4, as in the paper
        used = f._arrays["slot_features"][:, 0]
        assert all(len(set(row)) == size for row in used)  # distinct features per leaf


def test_every_new_leaf_draws_its_own_subspace_and_the_score_adds_every_split():
    X, Y, _ = streams.relevant_stream(6000, seed=3)
    f = ISOUPSymRF(n_models=4, seed=5)
    f.learn_many(X, Y)
    a = f._arrays
    leaves = (a["node_feature"] < 0) & (np.arange(a["node_feature"].shape[1]) < a["n_nodes"][:, None])
    subsets = {tuple(sorted(a["slot_features"][t, a["node_slot"][t, i]])) for t, i in zip(*np.nonzero(leaves))}
    assert len(subsets) > 3
    trees = [[(int(a["node_feature"][t, i]), int(a["node_depth"][t, i]))
              for i in range(a["n_nodes"][t]) if a["node_feature"][t, i] >= 0] for t in range(4)]
    assert any(len([d for g, d in nodes if g == f0]) > 1 for nodes in trees for f0 in range(10))
    np.testing.assert_allclose(f.importances()["symbolic"], ref.symbolic_scores(trees, 10))
    assert f.importances()["share"].sum() == pytest.approx(1.0)


def test_max_depth_bounds_the_trees():
    X, Y, _ = streams.relevant_stream(20_000, seed=9)
    free, capped = ISOUPSymRF(n_models=3, seed=4), ISOUPSymRF(n_models=3, seed=4, max_depth=2)
    free.learn_many(X, Y)
    capped.learn_many(X, Y)
    a = capped._arrays
    used = np.arange(a["node_depth"].shape[1]) < a["n_nodes"][:, None]
    assert a["node_depth"][used].max() == 2 and a["n_nodes"].max() <= 7
    assert free._arrays["node_depth"].max() > 2
    assert np.isfinite(capped.predict_many(X[:100])).all()


def test_zero_weight_rows_are_not_learned():
    X, Y, _ = streams.relevant_stream(3000, seed=4)
    w = np.ones(3000)
    w[::3] = 0.0
    a, b = ISOUPTree(grace_period=100), ISOUPTree(grace_period=100)
    a.learn_many(X, Y, sample_weight=w)
    b.learn_many(X[w > 0], Y[w > 0])
    np.testing.assert_array_equal(a.predict_many(X[:200]), b.predict_many(X[:200]))
    assert a.n_seen == 3000 and b.n_seen == 2000


def test_weights_count_like_repeated_rows_for_the_statistics():
    X, Y, _ = streams.relevant_stream(400, seed=6)
    a, b = ISOUPTree(grace_period=10_000), ISOUPTree(grace_period=10_000)
    a.learn_many(X, Y, sample_weight=np.full(400, 2.0))
    b.learn_many(X, Y)
    np.testing.assert_allclose(a._arrays["node_ysum"][0, 0], 2 * b._arrays["node_ysum"][0, 0])
    np.testing.assert_allclose(a._arrays["obs_stats"][..., 0].sum(), 2 * b._arrays["obs_stats"][..., 0].sum())


def test_prequential_kernel_equals_predict_then_learn():
    X, Y, _ = streams.relevant_stream(700, seed=8)
    a, b = ISOUPSymRF(n_models=3, grace_period=50), ISOUPSymRF(n_models=3, grace_period=50)
    P = a.predict_learn_many(X, Y)
    rows = [np.zeros(3)]
    b.learn_many(X[:1], Y[:1])
    for i in range(1, 700):
        rows.append(b.predict_many(X[i:i + 1])[0])
        b.learn_many(X[i:i + 1], Y[i:i + 1])
    np.testing.assert_allclose(P, np.array(rows), rtol=1e-12, atol=1e-12)


def test_ranking_puts_the_relevant_features_first():
    X, Y, _ = streams.relevant_stream(15_000, seed=11)
    forest = ISOUPSymRF(n_models=20, seed=2)
    forest.learn_many(X, Y)
    score = forest.importances()["symbolic"]
    top = np.argsort(-score, kind="stable")
    assert set(top[:4].tolist()) == set(streams.RELEVANT)
    assert score[top[3]] > 2 * score[top[4]]  # clearly apart, not a tie broken by index


def test_top_features_help_a_tree_more_than_bottom_ones():
    X, Y, _ = streams.relevant_stream(15_000, seed=12)
    forest = ISOUPSymRF(n_models=20, seed=3)
    forest.learn_many(X, Y)
    order = np.argsort(-forest.importances()["symbolic"], kind="stable")

    def armae(cols):
        tree = ISOUPTree()
        return streams.rmae_terms(Y, tree.predict_learn_many(np.ascontiguousarray(X[:, cols]), Y)).mean()

    top = [armae(order[:n]) for n in (1, 2, 3, 4)]
    assert all(b < a for a, b in zip(top, top[1:]))  # each top feature helps
    assert armae(order[:6]) > top[-1] - 0.02  # adding noise features barely matters
    assert armae(order[-4:]) > 0.95  # the bottom features alone predict no better than a mean


def test_synthetic_error_is_within_five_percent_of_moa():
    X, Y, _ = streams.relevant_stream(50_000)
    P = ISOUPTree().predict_learn_many(X, Y)
    assert np.abs(P - Y).mean() < 1.05 * 0.5267  # MOA's ISOUPTree on the same rows (bench_isoup.py)


@pytest.mark.skipif(not streams.available("scm20d.arff"), reason="SCM20d not available")
def test_raw_scales_do_not_make_the_perceptrons_diverge():
    X, Y, _ = streams.scm20d()
    P = ISOUPTree().predict_learn_many(X, Y)
    assert np.isfinite(P).all()
    mae = np.abs(P - Y).mean()
    assert mae < 0.5 * np.abs(Y - Y.mean(0)).mean()
    assert mae < 1.05 * 85.32  # MOA's ISOUPTree on the same rows (bench_isoup.py)


@pytest.mark.slow
@pytest.mark.skipif(not streams.available("bike_sharing_hour.csv"), reason="Bike Sharing not available")
def test_bike_sharing_error_and_top_five():
    X, Y, names = streams.bike_sharing()
    P = ISOUPTree().predict_learn_many(X, Y)
    assert np.abs(P - Y).mean() < 1.05 * 42.58  # MOA's ISOUPTree on the same rows
    forest = ISOUPSymRF(n_models=100, subspace="sqrt", seed=1)
    forest.learn_many(X, Y)
    top = np.argsort(-forest.importances()["symbolic"], kind="stable")[:5]
    assert {names[i] for i in top} <= {"hr", "hum", "workingday", "temp", "atemp", "weekday", "weathersit"}


# ------------------------------------------------------------------ leaf models


def test_the_capped_perceptron_reaches_the_least_squares_fit_that_unit_l1_weights_cannot():
    """One leaf (no split), two targets linear in two of three features. On standardised
    values their least-squares weights are ``(1/sqrt 2, 1/sqrt 2, 0)`` and ``(1, 0, 0)``:
    an L1 norm of 1.41 for the first, which MOA's unit-L1 rescaling cannot reach (it shrinks
    that target's answers by about a third), while the capped delta rule converges to it."""
    rng = np.random.default_rng(5)
    X = rng.random((6000, 3))
    Y = np.column_stack([2 * X[:, 0] + 2 * X[:, 1], 3 * X[:, 0]]) + rng.normal(0, 0.01, (6000, 2))
    fits = {}
    for perceptron in ("capped", "unit_l1"):
        leaf = ISOUPTree(grace_period=10**9, leaf_prediction="perceptron", perceptron=perceptron)
        P = leaf.predict_learn_many(X, Y)
        fits[perceptron] = (np.abs(P[-1000:] - Y[-1000:]).mean(0), leaf._arrays["node_lin"][0, 0])
    mae, weights = fits["capped"]
    assert (mae < 0.05).all()
    np.testing.assert_allclose(weights[0, :3], [2 ** -0.5, 2 ** -0.5, 0.0], atol=0.03)
    np.testing.assert_allclose(weights[1, :3], [1.0, 0.0, 0.0], atol=0.03)
    mae_l1, weights_l1 = fits["unit_l1"]
    assert np.abs(weights_l1).sum(axis=1) == pytest.approx([1.0, 1.0])
    assert mae_l1[0] > 5 * mae[0]  # the first target's fit is out of reach
    assert mae_l1[1] < 0.05  # the second's has norm 1: reachable either way


def test_unit_l1_leaves_without_drift_handling_are_the_former_default():
    """``perceptron="unit_l1", drift_delta=None`` is the forest of the state version 1, bit
    for bit: its pinned answers (the digest below, of version 1's defaults) are unchanged."""
    import hashlib

    X, Y, _ = streams.relevant_stream(3000, seed=2)
    P = ISOUPSymRF(n_models=4, seed=3, perceptron="unit_l1", drift_delta=None).predict_learn_many(X, Y)
    Q = ISOUPTree(perceptron="unit_l1").predict_learn_many(X, Y)
    assert hashlib.sha256(P.tobytes() + Q.tobytes()).hexdigest()[:16] == "921ae3fc2a111bfe"


# ------------------------------------------------------------------ drift: the replacement rule


def _compared(differences, fade: float = 1.0) -> np.ndarray:
    cmp = np.zeros((1, 5))
    for d in differences:
        ik.push_difference(cmp, 0, d, fade)
    return cmp


def test_a_background_replaces_only_when_better_on_average_by_z_standard_errors():
    # 20 rows better by 0.1 then 0.3: mean 0.2, sd 0.1, standard error 0.1 / sqrt(20) = 0.0224
    cmp = _compared([0.1] * 10 + [0.3] * 10)
    assert ik.background_better(cmp, 0, 8.9, 20)  # 0.2 > 8.9 * 0.0224 = 0.199
    assert not ik.background_better(cmp, 0, 9.0, 20)  # 0.2 < 9 * 0.0224 = 0.201
    assert not ik.background_better(cmp, 0, 0.0, 21)  # compared on too few rows
    # equal errors, or a background better on some rows and worse on as many, never replace
    assert not ik.background_better(_compared([0.0] * 500), 0, 0.0, 1)
    assert not ik.background_better(_compared([0.2, -0.2] * 250), 0, 0.0, 1)
    # better by the same margin on every row: no spread, so any z is passed
    assert ik.background_better(_compared([0.01] * 30), 0, 100.0, 30)


def test_the_comparison_forgets_old_rows_at_the_fading_rate():
    # worse by 1 on 100 rows, then better by 1 on 20: over all rows the mean is -0.67, but
    # with fading 0.9 the last 20 rows weigh (1 - 0.9^20) / (1 - 0.9^120) = 88% of the
    # window: mean +0.76
    rows = [-1.0] * 100 + [1.0] * 20
    assert not ik.background_better(_compared(rows, 1.0), 0, 0.0, 1)
    cmp = _compared(rows, 0.9)
    recent, older = 1 - 0.9 ** 20, 0.9 ** 20 * (1 - 0.9 ** 100)
    assert cmp[0, 2] / cmp[0, 0] == pytest.approx((recent - older) / (recent + older))
    assert ik.background_better(cmp, 0, 2.0, 120)
    # effective rows of the faded window: (sum w)^2 / sum w^2 = (1 + 0.9) / (1 - 0.9) = 19
    assert cmp[0, 0] ** 2 / cmp[0, 1] == pytest.approx(19.0, rel=1e-3)


# ------------------------------------------------------------------ drift: forests


def test_backgrounds_replace_the_trees_after_an_abrupt_switch_and_the_ranking_follows():
    X, Y = streams.switching_stream(n=6000, switch=4000, seed=1)
    watched, paper = ISOUPSymRF(seed=1), ISOUPSymRF(seed=1, drift_delta=None)
    P, Q = watched.predict_learn_many(X, Y), paper.predict_learn_many(X, Y)
    # before the switch no detector fired: both forests answered the same bits
    np.testing.assert_array_equal(P[:4000], Q[:4000])
    assert (watched.n_drifts == 1).all() and (watched.n_backgrounds == 1).all()
    assert np.abs(P - Y)[4000:].mean() < 0.8 * np.abs(Q - Y)[4000:].mean()
    top = np.argsort(-watched.importances()["share"], kind="stable")[:3]
    assert set(top.tolist()) == set(streams.SWITCH_AFTER)
    old = np.argsort(-paper.importances()["share"], kind="stable")[:3]
    assert set(old.tolist()) == set(streams.SWITCH_BEFORE)  # the paper's trees only grew


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bike", "scm20d"])
def test_following_drift_costs_the_real_streams_nothing(name):
    """Bike Sharing's daily cycle raises every tree's error each day: backgrounds start, but
    the default's error stays below the former default's (MOA's perceptron update, trees
    that only grow) and below its own without drift handling; so on SCM20d."""
    X, Y = (streams.bike_sharing if name == "bike" else streams.scm20d)()[:2]
    armae = {}
    for label, kw in {"default": {}, "no_drift": {"drift_delta": None},
                      "former": {"perceptron": "unit_l1", "drift_delta": None}}.items():
        model = ISOUPSymRF(seed=1, **kw)
        armae[label] = streams.rmae_terms(Y, model.predict_learn_many(X, Y)).mean()
    assert armae["default"] <= armae["no_drift"] < armae["former"]


def test_the_drift_path_answers_the_pinned_bits():
    """Detectors, backgrounds and replacements (every tree is replaced after the switch)
    give the bits pinned here; a change of them must be deliberate."""
    import hashlib

    X, Y = streams.switching_stream(n=6000, switch=3000, seed=4)
    model = ISOUPSymRF(n_models=4, seed=5)
    P = model.predict_learn_many(X, Y)
    assert model.n_drifts.tolist() == DRIFT_PIN[0]
    assert hashlib.sha256(P.tobytes()).hexdigest()[:16] == DRIFT_PIN[1]


def _periodic_noise(n: int = 12_000, period: int = 300, seed: int = 0):
    """Targets learnable from the features, whose noise is ten times louder every other
    ``period`` rows: the trees' errors rise and fall with a cycle no tree can learn."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    loud = (np.arange(n) // period) % 2 == 1
    Y = np.column_stack([3 * X[:, 0] + np.where(X[:, 1] > 0.5, 2.0, 0.0), 2 * X[:, 2]])
    return X, Y + rng.normal(0, 1, Y.shape) * np.where(loud, 1.0, 0.1)[:, None]


def test_a_periodic_rise_of_the_error_starts_backgrounds_but_replaces_no_tree():
    X, Y = _periodic_noise()
    watched, paper = ISOUPSymRF(seed=1), ISOUPSymRF(seed=1, drift_delta=None)
    P, Q = watched.predict_learn_many(X, Y), paper.predict_learn_many(X, Y)
    assert watched.n_backgrounds.sum() > 100  # every loud phase raises the errors ...
    assert watched.n_drifts.sum() == 0  # ... but no young background was better than a tree
    # backgrounds draw from generators of their own: the forest answered the paper's bits
    np.testing.assert_array_equal(P, Q)


def test_replaced_trees_and_live_backgrounds_restore_exactly_and_chunks_do_not_matter():
    from schemas.codec import decode_state, encode_state

    X, Y = streams.switching_stream(n=7000, switch=4000, seed=2)
    whole = ISOUPSymRF(seed=3)
    whole.learn_many(X, Y)
    parts = ISOUPSymRF(seed=3)
    for s in range(0, 4200, 777):
        parts.learn_many(X[s:min(s + 777, 4200)], Y[s:min(s + 777, 4200)])
    assert (parts._arrays["bg_n_nodes"] > 0).any()  # the cut falls while backgrounds learn
    parts = ISOUPSymRF.from_state(decode_state(encode_state(parts.to_state())))
    parts.learn_many(X[4200:], Y[4200:])
    assert whole.n_drifts.sum() > 0
    np.testing.assert_array_equal(whole.n_drifts, parts.n_drifts)
    np.testing.assert_array_equal(whole.predict_many(X[:50]), parts.predict_many(X[:50]))
    np.testing.assert_array_equal(whole.importances()["symbolic"], parts.importances()["symbolic"])
    assert state_equal(whole.to_state(), parts.to_state())


# ------------------------------------------------------------------ states


def _as_version_1(state: dict) -> dict:
    """A version-2 state as version 1 wrote it: no ``perceptron`` or replacement parameter,
    no background trees, no state version."""
    params = {k: v for k, v in state["params"].items()
              if k not in ("perceptron", "replacement_window", "replacement_z")}
    arrays = {k: v for k, v in state["arrays"].items() if not k.startswith("bg_") and k != "n_backgrounds"}
    return {**state, "params": params, "arrays": arrays, "extra": {}}


@pytest.mark.parametrize("detectors", [True, False])
def test_a_version_1_forest_continues_as_written(detectors):
    """Version 1's default (MOA's perceptron update, trees that only grow) restores and goes
    on bit for bit as that forest; one written before the per-tree detectors too."""
    X, Y, _ = streams.relevant_stream(3000, seed=4)
    model = ISOUPSymRF(seed=2, perceptron="unit_l1", drift_delta=None)
    model.learn_many(X[:2000], Y[:2000])
    old = _as_version_1(model.to_state())
    if not detectors:
        old["arrays"] = {k: v for k, v in old["arrays"].items() if not k.startswith("d_") and k != "n_drifts"}
    restored = ISOUPSymRF.from_state(old)
    assert restored.params["perceptron"] == "unit_l1" and restored.params["drift_delta"] is None
    np.testing.assert_array_equal(restored.predict_learn_many(X[2000:], Y[2000:]),
                                  model.predict_learn_many(X[2000:], Y[2000:]))
    assert state_equal(restored.to_state(), model.to_state())


def test_a_version_1_forest_with_detectors_on_continues_with_backgrounds():
    X, Y = streams.switching_stream(n=6000, switch=3000, seed=3)
    model = ISOUPSymRF(seed=2, perceptron="unit_l1", drift_delta=0.001)
    model.learn_many(X[:2000], Y[:2000])
    restored = ISOUPSymRF.from_state(_as_version_1(model.to_state()))
    assert restored.params["drift_delta"] == 0.001
    restored.learn_many(X[2000:], Y[2000:])
    assert restored.n_backgrounds.sum() > 0


def test_a_version_1_tree_continues_with_unit_l1_weights():
    X, Y, _ = streams.relevant_stream(2000, seed=6)
    tree = ISOUPTree(perceptron="unit_l1")
    tree.learn_many(X[:1000], Y[:1000])
    state = tree.to_state()
    old = {**state, "params": {k: v for k, v in state["params"].items() if k != "perceptron"}, "extra": {}}
    restored = ISOUPTree.from_state(old)
    np.testing.assert_array_equal(restored.predict_learn_many(X[1000:], Y[1000:]),
                                  tree.predict_learn_many(X[1000:], Y[1000:]))


@pytest.mark.parametrize("cls", [ISOUPTree, ISOUPSymRF])
def test_a_state_of_a_later_version_is_refused_with_the_reason(cls):
    X, Y, _ = streams.relevant_stream(300, seed=1)
    model = cls()
    model.learn_many(X, Y)
    state = model.to_state()
    with pytest.raises(ValueError, match="state version 3 is not supported"):
        cls.from_state({**state, "extra": {"state_version": 3}})


def test_a_background_tree_pointing_past_its_nodes_is_refused():
    X, Y = streams.switching_stream(n=4200, switch=4000, seed=2)
    model = ISOUPSymRF(seed=3)
    model.learn_many(X, Y)
    state = model.to_state()
    t = int(np.argmax(state["arrays"]["bg_n_nodes"]))
    assert state["arrays"]["bg_n_nodes"][t] > 0
    broken = {k: v.copy() for k, v in state["arrays"].items()}
    broken["bg_n_nodes"][t] = 0  # its nodes are still there, and its observers
    with pytest.raises(ValueError, match="without nodes"):
        ISOUPSymRF.from_state({**state, "arrays": broken})


def test_drift_settings_are_checked():
    for kw in ({"drift_delta": 1.5}, {"replacement_window": 0}, {"replacement_z": -1.0},
               {"perceptron": "moa"}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            ISOUPSymRF(**kw)
