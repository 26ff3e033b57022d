"""Forgetful decision tree: the adaptation rule, the split search and the incremental update.

The adaptation rule is checked on the worked vectors of the reference binary's trace
(``algorithms.md`` Sec. 1.3); the split search and the incremental update against the plain-Python
twin in ``reference/forgetful_reference.py``, which keeps per-node sorted lists and count tables
as the authors' code does, and against a from-scratch build on the retained rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from reference import forgetful_reference as ref

from models.forgetful import _forgetful_kernels as fk
from models.forgetful._forgetful_split import best_split
from models.forgetful._retain import adapt_retain, max_height_for, round_half_away
from models.forgetful.forgetful_tree import ForgetfulDecisionTree

INF = float("inf")

# --------------------------------------------------------------------------- adaptation rule


def _step(n_rows, b, correct, retain, irate, last_t, last_all, forget_rate, round_no, k=2,
          lo=0.0, hi=INF):
    out = adapt_retain(n_rows, b, correct, k, retain, irate, last_t, last_all, forget_rate,
                       round_no, lo, hi)
    keys = ("retain", "irate", "max_height", "last_t", "last_all", "forget_rate", "round_no",
            "collapsed")
    return dict(zip(keys, out))


def test_worked_vector_cold_start_second_batch():
    # 0.9388 = 46/49 on the 2nd batch: 49 -> 98 rows, forget rate -10 -> -5, height 6
    s = _step(49, 49, 46, retain=49, irate=0.3, last_t=1, last_all=2, forget_rate=-10,
              round_no=64)
    assert (s["retain"], s["forget_rate"], s["round_no"], s["max_height"]) == (98, -5, 128, 6)
    assert s["irate"] == 0.3 and (s["last_t"], s["last_all"]) == (46, 49)


def test_worked_vector_cold_start_ends_on_third_batch():
    # 0.9592 = 47/49: 98 -> 147 rows, forget rate -> 0 (normal mode), height 7
    s = _step(98, 49, 47, retain=98, irate=0.3, last_t=46, last_all=49, forget_rate=-5,
              round_no=128)
    assert (s["retain"], s["forget_rate"], s["round_no"], s["max_height"]) == (147, 0, 256, 7)


def test_worked_vector_accuracy_drop_shrinks_retain():
    # 0.7347 = 36/49 after 0.9592 = 47/49: iRate 0.3 -> 0.5870, retain 147 -> 56, height 5
    s = _step(147, 49, 36, retain=147, irate=0.3, last_t=47, last_all=49, forget_rate=0,
              round_no=256)
    assert s["retain"] == 56 and s["max_height"] == 5
    assert s["irate"] == pytest.approx(0.5870, abs=5e-5)
    assert (s["last_t"], s["last_all"]) == (36, 49) and not s["collapsed"]


def test_worked_vector_cap_retain_plus_batch_binds():
    # 0.6327 = 31/49 after 0.6939 = 34/49: iRate 4.3105 -> 6.3000, retain 241 -> 290 (cap)
    s = _step(241, 49, 31, retain=241, irate=4.3105, last_t=34, last_all=49, forget_rate=0,
              round_no=256)
    assert s["retain"] == 290 and s["max_height"] == 8
    assert s["irate"] == pytest.approx(6.3000, abs=5e-4)


def test_worked_vector_batch_at_chance_forgets_everything():
    # 0.3673 = 18/49 <= 1/2 after 0.7551: retain 127 -> 49 (= b), iRate unchanged
    s = _step(127, 49, 18, retain=127, irate=4.3105, last_t=37, last_all=49, forget_rate=0,
              round_no=256)
    assert s["retain"] == 49 and s["max_height"] == 5 and s["irate"] == 4.3105
    assert s["collapsed"] and (s["last_t"], s["last_all"]) == (18, 49)


def test_previous_window_at_chance_keeps_everything():
    s = _step(100, 50, 40, retain=100, irate=0.3, last_t=20, last_all=50, forget_rate=0,
              round_no=256)
    assert s["retain"] == 150 and (s["last_t"], s["last_all"]) == (40, 50)


def test_equal_accuracy_extends_window_and_grows_by_irate():
    # 30/50 == 30/50: retain += round(0.3 * 50) = 15 and the window is summed
    s = _step(100, 50, 30, retain=100, irate=0.3, last_t=30, last_all=50, forget_rate=0,
              round_no=256)
    assert s["retain"] == 115 and (s["last_t"], s["last_all"]) == (60, 100)


def test_rounding_is_half_away_from_zero():
    assert round_half_away(2.5) == 3 and round_half_away(3.5) == 4 and round_half_away(2.49) == 2
    # iRate 0.25 * 10 = 2.5 rows -> 3 (Python's round would give 2)
    s = _step(100, 10, 8, retain=100, irate=0.25, last_t=8, last_all=10, forget_rate=0,
              round_no=256)
    assert s["retain"] == 103


def test_retain_never_below_one_batch_and_height_rule():
    s = _step(10, 50, 49, retain=10, irate=1e-6, last_t=40, last_all=50, forget_rate=0,
              round_no=256)
    assert s["retain"] == 50
    assert [max_height_for(r) for r in (1, 2, 3, 4, 63, 64, 65, 1024)] == [1, 1, 1, 2, 5, 6, 6,
                                                                            10]


def test_cold_start_resets_on_a_batch_at_chance():
    s = _step(98, 49, 20, retain=98, irate=0.3, last_t=46, last_all=49, forget_rate=-5,
              round_no=128)
    assert s["forget_rate"] == -10 and s["retain"] == 147 and s["round_no"] == 256


def test_increase_rate_is_clamped():
    # q = (0.9 - 0.5) / (0.52 - 0.5) = 20 -> iRate 0.3 / 20 = 0.015 -> clamped at 0.05
    s = _step(200, 50, 45, retain=200, irate=0.3, last_t=26, last_all=50, forget_rate=0,
              round_no=256, lo=0.05, hi=10.0)
    assert s["irate"] == 0.05
    # q = 0.02 / 0.4 = 0.05 -> iRate 0.3 / 0.05 = 6 -> clamped at 5
    s = _step(200, 50, 26, retain=200, irate=0.3, last_t=45, last_all=50, forget_rate=0,
              round_no=256, lo=0.05, hi=5.0)
    assert s["irate"] == 5.0


def test_twin_rule_matches_kernel_rule():
    rng = np.random.default_rng(5)
    state = ref.RetainState()
    n_rows, retain, irate, lt, la, fr, rn = 0, 0, 0.3, 1, 2, -10, 64
    for _ in range(400):
        b = int(rng.integers(1, 60))
        k = int(rng.integers(2, 5))
        correct = int(rng.binomial(b, rng.uniform(0.1, 1.0)))
        out = adapt_retain(n_rows, b, correct, k, retain, irate, lt, la, fr, rn, 1e-3, 1e3)
        state.step(n_rows, b, correct, k)
        retain, irate, h, lt, la, fr, rn, _ = out
        assert (retain, h, lt, la, fr, rn) == (state.retain, state.max_height, state.last_t,
                                               state.last_all, state.forget_rate, state.round_no)
        assert irate == state.irate
        n_rows = min(n_rows + b, retain)


# --------------------------------------------------------------------------- split search


def _kernel_best_split(X, y, features, dense_max):
    """Run ``best_split`` on all rows of ``X`` (rows x features) with the given scan order."""
    n, F = X.shape
    K = int(y.max()) + 1
    R = n
    Xc = np.ascontiguousarray(X.T)
    yy = y.astype(np.int32)
    dense = np.zeros(F, np.uint8)
    D = max(dense_max, 1)
    dvals = np.zeros((F, D))
    dcount = np.zeros(F, np.int64)
    for f in range(F):
        vals = np.unique(X[:, f])
        if len(vals) <= dense_max:
            dense[f] = 1
            dvals[f, :len(vals)] = vals
            dcount[f] = len(vals)
    work = np.zeros((F, R), np.int32)
    for f in range(F):
        work[f] = np.argsort(Xc[f], kind="mergesort")
    rows = np.arange(n, dtype=np.int32)
    tot = np.bincount(y, minlength=K).astype(np.int64)
    feats = np.asarray(features, np.int32)
    f, v, found = best_split(Xc, yy, 0, n, K, feats, len(feats), dense, dvals, dcount, work,
                                rows, fk.xlogx_table(n), tot, np.zeros(K, np.int64),
                                np.zeros((D, K), np.int64), np.zeros(D, np.int64))
    return (int(f), float(v)) if found else None


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("dense_max", [0, 8])
def test_split_search_matches_twin(n_classes, dense_max):
    rng = np.random.default_rng(100 * n_classes + dense_max)
    for trial in range(40):
        n = int(rng.integers(2, 60))
        F = int(rng.integers(1, 5))
        X = np.empty((n, F))
        for f in range(F):
            kind = rng.integers(3)
            if kind == 0:
                X[:, f] = rng.random(n)                       # continuous
            elif kind == 1:
                X[:, f] = rng.integers(0, 2, n)               # binary
            else:
                X[:, f] = np.round(rng.random(n) * 5) / 5     # few values, many ties
        if F > 1 and trial % 4 == 0:
            X[:, 1] = X[:, 0]                                 # exact ties between features
        if n < n_classes:
            continue
        y = rng.integers(0, n_classes, n)
        y[:n_classes] = np.arange(n_classes)
        order = list(rng.permutation(F))
        rows = [(tuple(x), int(t)) for x, t in zip(X, y)]
        expected = ref.best_split(rows, order, n_classes)
        got = _kernel_best_split(X, y, order, dense_max)
        if expected is None:
            assert got is None
        else:
            assert got == (int(expected[0]), float(expected[1]))


def test_split_ties_go_to_the_first_feature_and_lowest_threshold():
    X = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    y = np.array([0, 0, 1, 1])
    assert _kernel_best_split(X, y, [1, 0], 0) == (1, 1.0)
    assert _kernel_best_split(X, y, [0, 1], 0) == (0, 1.0)
    # mirror-image splits tie exactly: 0 1 | 0 1 ... the lowest threshold wins
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([0, 1, 1, 0])
    assert _kernel_best_split(X, y, [0], 0) == ref.best_split(
        [((float(v),), int(t)) for v, t in zip(X[:, 0], y)], [0], 2)


def test_no_candidate_threshold_makes_a_leaf():
    model = ForgetfulDecisionTree()
    model.learn_many(np.ones((6, 2)), [0, 1, 0, 1, 0, 1])
    assert model._nested() == (3, 3)
    assert model.predict_many(np.ones((1, 2))) == [0]


# --------------------------------------------------------------------------- incremental update


def _stream(seed, n, F, K):
    rng = np.random.default_rng(seed)
    X = np.round(rng.random((n, F)) * rng.integers(2, 12, F), 0)
    X[:, 0] = rng.random(n)
    score = X @ rng.normal(size=F)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, K + 1)[1:-1]))
    noise = rng.random(n) < 0.1
    y[noise] = rng.integers(0, K, noise.sum())
    y[n // 2:] = (y[n // 2:] + 1) % K          # abrupt drift halfway
    order: dict[int, int] = {}
    return X, np.array([order.setdefault(int(v), len(order)) for v in y])


@pytest.mark.parametrize("seed", range(12))
def test_incremental_tree_matches_twin_and_rebuild(seed):
    rng = np.random.default_rng(seed)
    F, K = int(rng.integers(1, 5)), int(rng.integers(2, 5))
    b = int(rng.integers(5, 40))
    X, y = _stream(seed, b * int(rng.integers(5, 25)), F, K)
    model = ForgetfulDecisionTree(dense_max_values=int(rng.integers(0, 8)))
    twin = ref.ForgetfulTreeReference(F, dense=[f for f in range(F)
                                                if len(np.unique(X[:, f])) <= 6])
    for s in range(0, len(y), b):
        model.learn_many(X[s:s + b], list(y[s:s + b]))
        twin.learn(X[s:s + b].tolist(), list(y[s:s + b]))
        assert model.retained_rows[0] == len(twin.rows)
        assert model._nested() == twin.nested() == twin.rebuilt()


def test_long_stream_reaches_normal_mode_forgets_and_collapses():
    X, y = _stream(7, 3000, 3, 3)
    model = ForgetfulDecisionTree(dense_max_values=4)
    twin = ref.ForgetfulTreeReference(3, dense=[1])
    normal = shrinks = collapses = 0
    for s in range(0, 3000, 30):
        before = model.retained_rows[0]
        model.learn_many(X[s:s + 30], list(y[s:s + 30]))
        twin.learn(X[s:s + 30].tolist(), list(y[s:s + 30]))
        assert model._nested() == twin.nested() == twin.rebuilt()
        assert model.retained_rows[0] == min(before + 30, twin.state.retain)
        normal += twin.state.forget_rate == 0
        shrinks += model.retained_rows[0] < before + 30
        collapses += model.collapsed
    assert normal > 50 and shrinks > 20 and collapses >= 1


def test_count_tables_and_sorted_values_give_the_same_tree():
    X, y = _stream(3, 1500, 4, 2)
    a, b = ForgetfulDecisionTree(dense_max_values=0), ForgetfulDecisionTree(dense_max_values=16)
    for s in range(0, 1500, 50):
        a.learn_many(X[s:s + 50], list(y[s:s + 50]))
        b.learn_many(X[s:s + 50], list(y[s:s + 50]))
        assert a._nested() == b._nested()
    assert b._arrays["dense"].sum() >= 2 and a._arrays["dense"].sum() == 0


def test_feature_leaving_count_tables_switches_to_sorted_values():
    rng = np.random.default_rng(0)
    model = ForgetfulDecisionTree(dense_max_values=3)
    X = rng.integers(0, 3, (40, 2)).astype(float)
    y = (X[:, 0] > 0).astype(int)
    model.learn_many(X, y)
    assert model._arrays["dense"].tolist() == [1, 1]
    X2 = X.copy()
    X2[:, 0] = rng.random(40) * 3          # many new values: feature 0 leaves count tables
    model.learn_many(X2, (X2[:, 0] > 1).astype(int))
    assert model._arrays["dense"].tolist() == [0, 1]
    twin = ref.ForgetfulTreeReference(2)
    index = {label: k for k, label in enumerate(model.classes)}   # first-appearance order
    twin.learn(X.tolist(), [index[v] for v in y])
    twin.learn(X2.tolist(), [index[v] for v in (X2[:, 0] > 1).astype(int)])
    assert model._nested() == twin.nested()


# --------------------------------------------------------------------------- surface


def test_predictions_follow_the_leaves():
    rng = np.random.default_rng(1)
    X = rng.random((200, 3))
    y = np.where(X[:, 0] > 0.5, "hi", "lo")
    model = ForgetfulDecisionTree()
    for s in range(0, 200, 50):
        model.learn_many(X[s:s + 50], list(y[s:s + 50]))
    assert model.classes == ["hi", "lo"] or model.classes == ["lo", "hi"]
    pred = model.predict_many(X)
    proba = model.predict_proba_many(X)
    assert np.mean(np.array(pred) == y) > 0.95
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert [model.classes[k] for k in proba.argmax(axis=1)] == pred


def test_new_class_mid_stream_grows_the_count_axis():
    model = ForgetfulDecisionTree()
    X = np.arange(40, dtype=float).reshape(-1, 1)
    model.learn_many(X[:20], [0] * 10 + [1] * 10)
    model.learn_many(X[20:], [2] * 20)
    assert model.classes == [0, 1, 2]
    assert model.predict_proba_many(X).shape == (40, 3)


def test_deterministic_and_state_round_trip():
    X, y = _stream(11, 1200, 3, 2)
    a, b = ForgetfulDecisionTree(), ForgetfulDecisionTree()
    for s in range(0, 600, 40):
        a.learn_many(X[s:s + 40], list(y[s:s + 40]))
        b.learn_many(X[s:s + 40], list(y[s:s + 40]))
    c = ForgetfulDecisionTree.from_state(a.to_state())
    for s in range(600, 1200, 40):
        for m in (a, b, c):
            m.learn_many(X[s:s + 40], list(y[s:s + 40]))
    assert a._nested() == b._nested() == c._nested()
    for key, arr in a.to_state()["arrays"].items():
        np.testing.assert_array_equal(arr, c.to_state()["arrays"][key], err_msg=key)


def test_retained_memory_is_bounded_by_retain():
    X, y = _stream(2, 4000, 2, 2)
    model = ForgetfulDecisionTree()
    peak = 0
    for s in range(0, 4000, 100):
        peak = max(peak, model.retained_rows[0] + 100)
        model.learn_many(X[s:s + 100], list(y[s:s + 100]))
        ti = model._arrays["tree_int"][0]
        assert 100 <= ti[fk.N_ROWS] <= ti[fk.RETAIN]
        assert ti[fk.N_USED] - ti[fk.N_FREE] <= 2 * ti[fk.N_ROWS] - 1
    # capacity grows by doubling to the largest need (retained rows + one batch), never beyond
    assert model._arrays["rows_x"].shape[2] < 2 * max(64, peak)


def test_learn_one_and_empty_batch():
    model = ForgetfulDecisionTree()
    model.learn_many(np.zeros((0, 2)), [])
    assert model.n_seen == 0 and model.predict_many(np.zeros((1, 2))) == [None]
    model.learn_one([0.0, 1.0], "a")
    model.learn_one([1.0, 0.0], "b")
    assert model.n_seen == 2 and model.predict_one([0.0, 1.0]) in ("a", "b")


def test_bad_parameters_raise():
    with pytest.raises(ValueError):
        ForgetfulDecisionTree(increase_rate=0)
    with pytest.raises(ValueError):
        ForgetfulDecisionTree(increase_rate_min=1.0, increase_rate=0.3)
    with pytest.raises(ValueError):
        ForgetfulDecisionTree(dense_max_values=-1)
    with pytest.raises(ValueError, match="labels"):
        ForgetfulDecisionTree().learn_many(np.zeros((2, 1)), None)
