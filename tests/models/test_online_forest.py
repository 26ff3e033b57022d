"""Tests of models.OnlineRandomForest (Saffari 2009) and its online MDA/MDG (Cassidy 2014).

The central test compares the numba learner with a slow, obviously-sequential pure-Python
twin (``_TwinORF`` below) that draws from the same SplitMix64 generators in the same order:
trees, test thresholds, counts, OOB statistics, importances and predictions must agree.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.core import _rng
from models.core.base import ClassIndex
from models.orf.online_forest import _SALT_IMPORTANCE, _SALT_TREES, OnlineRandomForest

SMALL = {"n_trees": 3, "n_tests": 4, "min_samples": 8, "max_depth": 4, "gamma": 0.0}


def _stream(n=600, seed=0, n_features=4):
    """Two informative features, a discrete one, a feature constant for the first 150 rows,
    and a third class that appears at row 200."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, n_features))
    X[:, 2] = rng.integers(0, 3, n)
    X[:150, 3] = 0.25
    y = np.where(X[:, 0] > 0.5, 1, 0)
    y[200:][X[200:, 1] > 0.75] = 2
    flip = rng.random(n) < 0.05
    y[flip] = rng.integers(0, 3, flip.sum()) % np.where(np.arange(n)[flip] < 200, 2, 3)
    return X, y


def _trees(model):
    """Node structure of every tree in creation order (comparable across learners)."""
    a = model._arrays
    out = []
    for t in range(model.params["n_trees"]):
        n = a["n_nodes"][t]
        out.append((a["node_feature"][t, :n].tolist(), a["node_threshold"][t, :n].tolist(),
                    a["node_left"][t, :n].tolist(), a["node_right"][t, :n].tolist(),
                    a["node_depth"][t, :n].tolist(), a["node_count"][t, :n].tolist()))
    return out


# ---------------------------------------------------------------------------- the twin


def _gini(counts):
    total = 0.0
    for v in counts:
        total += v
    if total <= 0.0:
        return 0.0
    s = 0.0
    for v in counts:
        p = v / total
        s += p * p
    return 1.0 - s


class _TwinORF:
    """Plain-Python online random forest following the documented algorithm step by step."""

    def __init__(self, F, C, n_trees, n_tests, min_samples, max_depth, min_gain=0.01,
                 gamma=0.0, lambda_value=1.0, track_importance=False, importance_decay=0.0,
                 seed=1):
        self.F, self.C, self.T, self.M = F, C, n_trees, n_tests
        self.min_samples, self.max_depth, self.min_gain = min_samples, max_depth, min_gain
        self.gamma, self.lam = gamma, lambda_value
        self.track, self.decay = track_importance, importance_decay
        self.rng = _rng.seed_states(seed, n_trees + 1, _SALT_TREES)
        self.rng_imp = _rng.seed_states(seed, n_trees if self.track else 0, _SALT_IMPORTANCE)
        self.lo = [math.inf] * F
        self.hi = [-math.inf] * F
        self.scale = 1.0
        self.n_replaced = 0
        self.trees = [None] * n_trees
        for t in range(n_trees):
            self._reset(t)

    def _draw(self, t, lo, hi):
        tests = []
        for _ in range(self.M):
            f = _rng.randint(self.rng, t, self.F)
            thr = lo[f] + _rng.uniform(self.rng, t) * (hi[f] - lo[f]) if hi[f] > lo[f] else None
            tests.append([f, thr, [0.0] * self.C, [0.0] * self.C])
        return tests

    def _leaf(self, t, lo, hi):
        return {"lo": lo, "hi": hi, "n": 0.0, "tests": self._draw(t, lo, hi)}

    def _reset(self, t):
        root = {"f": -1, "thr": 0.0, "l": -1, "r": -1, "depth": 0, "count": [0.0] * self.C,
                "imp": [0.0] * self.C,
                "leaf": self._leaf(t, list(self.lo), list(self.hi)) if self.max_depth > 0 else None}
        self.trees[t] = {"nodes": [root], "age": 0.0, "oob_n": 0.0, "oob_err": 0.0,
                         "imp_oob": [0.0, 0.0], "imp_delta": [0.0] * self.F}

    def _route(self, t, x):
        nodes = self.trees[t]["nodes"]
        i = 0
        path = [0]
        while nodes[i]["f"] >= 0:
            i = nodes[i]["l"] if x[nodes[i]["f"]] <= nodes[i]["thr"] else nodes[i]["r"]
            path.append(i)
        return path

    def _vote(self, counts):
        best, best_n = -1, 0.0
        for c, v in enumerate(counts):
            if v > best_n:
                best, best_n = c, v
        return best

    def _learn_in_bag(self, t, x, c, k, w):
        tree = self.trees[t]
        nodes = tree["nodes"]
        path = self._route(t, x)
        if self.track:
            for i in path:
                nodes[i]["imp"][c] += w * k
        tree["age"] += k
        node = nodes[path[-1]]
        node["count"][c] += k
        leaf = node["leaf"]
        if leaf is None:
            return
        leaf["n"] += k
        for f in range(self.F):
            leaf["lo"][f] = min(leaf["lo"][f], x[f])
            leaf["hi"][f] = max(leaf["hi"][f], x[f])
        for test in leaf["tests"]:
            f = test[0]
            if test[1] is None:
                if leaf["hi"][f] <= leaf["lo"][f]:
                    continue
                test[1] = leaf["lo"][f] + _rng.uniform(self.rng, t) * (leaf["hi"][f] - leaf["lo"][f])
            (test[2] if x[f] <= test[1] else test[3])[c] += k
        if leaf["n"] < self.min_samples or node["depth"] >= self.max_depth:
            return
        best, best_gain = -1, 0.0
        for m, (_, thr, left, right) in enumerate(leaf["tests"]):
            n_l, n_r = sum(left), sum(right)
            if thr is None or n_l <= 0 or n_r <= 0:
                continue
            n = n_l + n_r
            gain = (_gini([a + b for a, b in zip(left, right)]) - (n_l / n) * _gini(left)
                    - (n_r / n) * _gini(right))
            if gain > best_gain:
                best, best_gain = m, gain
        if best < 0 or best_gain < self.min_gain:
            return
        f, thr, left_counts, right_counts = leaf["tests"][best]
        node.update(f=f, thr=thr, l=len(nodes), r=len(nodes) + 1, leaf=None)
        depth = node["depth"] + 1
        lo_r, hi_r = list(leaf["lo"]), list(leaf["hi"])
        lo_r[f] = max(lo_r[f], thr)
        lo_l, hi_l = list(leaf["lo"]), list(leaf["hi"])
        hi_l[f] = min(hi_l[f], thr)
        for counts in (left_counts, right_counts):
            nodes.append({"f": -1, "thr": 0.0, "l": -1, "r": -1, "depth": depth,
                          "count": list(counts), "imp": [w * v for v in counts], "leaf": None})
        if depth < self.max_depth:
            nodes[-2]["leaf"] = self._leaf(t, lo_l, hi_l)
            nodes[-1]["leaf"] = self._leaf(t, lo_r, hi_r)

    def _random_route(self, t, x, j):
        nodes = self.trees[t]["nodes"]
        i = 0
        while nodes[i]["f"] >= 0:
            nd = nodes[i]
            if nd["f"] == j:
                n_l, n_r = sum(nodes[nd["l"]]["imp"]), sum(nodes[nd["r"]]["imp"])
                u = _rng.uniform(self.rng_imp, t)
                go_left = u * (n_l + n_r) < n_l if n_l + n_r > 0 else u < 0.5
            else:
                go_left = x[nd["f"]] <= nd["thr"]
            i = nd["l"] if go_left else nd["r"]
        return i

    def _out_of_bag(self, t, x, c, w):
        tree = self.trees[t]
        nodes = tree["nodes"]
        path = self._route(t, x)
        pred = self._vote(nodes[path[-1]]["count"])
        tree["oob_n"] += 1.0
        tree["oob_err"] += 1.0 if pred != c else 0.0
        if not self.track:
            return
        correct = 1.0 if pred == c else 0.0
        tree["imp_oob"][0] += w
        tree["imp_oob"][1] += w * correct
        seen = []
        for i in path[:-1]:
            f = nodes[i]["f"]
            if f in seen:
                continue
            seen.append(f)
            correct_f = 1.0 if self._vote(nodes[self._random_route(t, x, f)]["count"]) == c else 0.0
            tree["imp_delta"][f] += w * (correct_f - correct)

    def learn(self, X, y):
        for x, c in zip(X.tolist(), [int(v) for v in y]):
            for f in range(self.F):
                self.lo[f] = min(self.lo[f], x[f])
                self.hi[f] = max(self.hi[f], x[f])
            w = 1.0
            if self.track:
                w = self.scale / (1.0 - self.decay) if self.decay > 0 else self.scale
                self.scale = w
            for t in range(self.T):
                k = _rng.poisson(self.rng, t, self.lam)
                if k > 0:
                    self._learn_in_bag(t, x, c, float(k), w)
                elif self.track or self.gamma > 0:
                    self._out_of_bag(t, x, c, w)
            if self.gamma > 0:
                old = [t for t in range(self.T) if self.trees[t]["age"] > 1.0 / self.gamma]
                if old:
                    t = old[_rng.randint(self.rng, self.T, len(old))]
                    tree = self.trees[t]
                    err = tree["oob_err"] / tree["oob_n"] if tree["oob_n"] > 0 else 0.0
                    if err > _rng.uniform(self.rng, self.T):
                        self._reset(t)
                        self.n_replaced += 1

    def proba(self, X):
        out = np.zeros((len(X), self.C))
        for i, x in enumerate(X.tolist()):
            votes = 0
            for t in range(self.T):
                counts = self.trees[t]["nodes"][self._route(t, x)[-1]]["count"]
                total = sum(counts)
                if total > 0:
                    votes += 1
                    out[i] += np.array(counts) / total
            out[i] = out[i] / votes if votes else 1.0 / self.C
        return out

    def importances(self):
        mdg = np.zeros((self.T, self.F))
        for t, tree in enumerate(self.trees):
            nodes = tree["nodes"]
            if nodes[0]["f"] < 0:
                continue
            n_root = sum(nodes[nodes[0]["l"]]["imp"]) + sum(nodes[nodes[0]["r"]]["imp"])
            for nd in nodes:
                if nd["f"] < 0:
                    continue
                left, right = nodes[nd["l"]]["imp"], nodes[nd["r"]]["imp"]
                n_l, n_r = sum(left), sum(right)
                n = n_l + n_r
                if n > 0:
                    both = [a + b for a, b in zip(left, right)]
                    dec = _gini(both) - (n_l / n) * _gini(left) - (n_r / n) * _gini(right)
                    mdg[t, nd["f"]] += (n / n_root) * dec
        drops = [[-d / tr["imp_oob"][0] for d in tr["imp_delta"]]
                 for tr in self.trees if tr["imp_oob"][0] > 0]
        mda = np.mean(drops, axis=0) if drops else np.zeros(self.F)
        return {"mdg": mdg.mean(axis=0), "mda": mda}

    def structure(self):
        return [([n["f"] for n in tr["nodes"]], [n["thr"] for n in tr["nodes"]],
                 [n["l"] for n in tr["nodes"]], [n["r"] for n in tr["nodes"]],
                 [n["depth"] for n in tr["nodes"]], [list(n["count"]) for n in tr["nodes"]])
                for tr in self.trees]


def _pad_counts(structure, n_classes):
    return [(f, thr, le, ri, d, [c + [0.0] * (n_classes - len(c)) for c in counts])
            for f, thr, le, ri, d, counts in structure]


@pytest.mark.parametrize("params", [
    dict(SMALL),
    dict(SMALL, gamma=0.02, track_importance=True, importance_decay=0.01),
    dict(SMALL, n_trees=4, max_depth=2, gamma=0.05, lambda_value=2.0, track_importance=True,
         min_gain=0.0, seed=7),
])
def test_matches_pure_python_twin(params):
    X, y = _stream(600)
    model = OnlineRandomForest(**params)
    for start in range(0, 600, 97):  # uneven batches: batching must not matter
        model.learn_many(X[start:start + 97], y[start:start + 97])
    twin = _TwinORF(F=X.shape[1], C=3, **params)
    twin.learn(X, ClassIndex().encode(y))  # the twin works on class indices
    assert sorted(model.classes) == [0, 1, 2]
    assert _pad_counts(_trees(model), 3) == _pad_counts(twin.structure(), 3)
    assert model.n_replaced == twin.n_replaced
    if params.get("gamma", 0) > 0:
        assert model.n_replaced > 0  # the case really exercises tree discarding
    a = model._arrays
    assert a["tree_oob_err"].tolist() == [tr["oob_err"] for tr in twin.trees]
    Xq = np.random.default_rng(5).random((50, 4))
    np.testing.assert_allclose(model.predict_proba_many(Xq), twin.proba(Xq), rtol=0, atol=1e-12)
    if params.get("track_importance"):
        got, want = model.importances(), twin.importances()
        np.testing.assert_allclose(got["mdg"], want["mdg"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got["mda"], want["mda"], rtol=1e-9, atol=1e-12)
        assert np.abs(got["mdg"]).sum() > 0 and np.abs(got["mda"]).sum() > 0


def test_fading_rescale_keeps_ratios():
    """With strong fading the instance weight passes 1e100 and statistics are rescaled."""
    X, y = _stream(500)
    params = dict(SMALL, track_importance=True, importance_decay=0.5)
    model = OnlineRandomForest(**params)
    model.learn_many(X, y)
    assert model._arrays["imp_scale"][0] < 2.0 ** 500  # it was rescaled on the way
    twin = _TwinORF(F=4, C=3, **params)  # the twin never rescales (2**500 fits a double)
    twin.learn(X, ClassIndex().encode(y))
    got, want = model.importances(), twin.importances()
    np.testing.assert_allclose(got["mdg"], want["mdg"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["mda"], want["mda"], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------- surface


def test_before_learning_results_are_defined():
    model = OnlineRandomForest(track_importance=True)
    assert model.predict_proba_many(np.zeros((3, 2))).shape == (3, 0)
    assert model.predict_many(np.zeros((3, 2))) == [None, None, None]
    assert model.importances() == {}
    assert model.n_seen == 0 and model.classes == [] and model.n_features is None


def test_validation_errors():
    with pytest.raises(ValueError):
        OnlineRandomForest(n_trees=0)
    with pytest.raises(ValueError):
        OnlineRandomForest(importance_decay=1.0)
    with pytest.raises(ValueError):
        OnlineRandomForest(max_depth=0)
    with pytest.raises(ValueError):
        OnlineRandomForest(gamma=-0.1)
    model = OnlineRandomForest(**SMALL)
    model.learn_many(np.zeros((2, 3)), [0, 1])
    with pytest.raises(ValueError, match="features"):
        model.learn_many(np.zeros((2, 4)), [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        model.predict_many(np.array([[0.0, np.nan, 1.0]]))
    with pytest.raises(ValueError, match="labels"):
        model.learn_many(np.zeros((2, 3)), [0])
    with pytest.raises(ValueError):
        model.learn_many(np.zeros((1, 3)), None)


def test_learns_a_threshold_concept_with_string_labels():
    rng = np.random.default_rng(1)
    X = rng.random((4000, 3))
    y = np.where(X[:, 1] > 0.3, "up", "down")
    model = OnlineRandomForest(n_trees=5)
    model.learn_many(X[:3000], y[:3000])
    assert model.classes == [str(y[0]), "up" if y[0] == "down" else "down"]
    pred = model.predict_many(X[3000:])
    assert np.mean(np.array(pred) == y[3000:]) > 0.95
    proba = model.predict_proba_many(X[3000:])
    assert proba.shape == (1000, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.n_seen == 3000


def test_new_class_mid_stream_grows_the_class_axis():
    X, y = _stream(1500, seed=3)
    model = OnlineRandomForest(n_trees=5, min_samples=10)
    model.learn_many(X[:200], y[:200])
    assert sorted(model.classes) == [0, 1]
    assert model.predict_proba_many(X[:5]).shape == (5, 2)
    model.learn_many(X[200:], y[200:])
    assert sorted(model.classes) == [0, 1, 2]
    Xq = np.array([[0.8, 0.9, 1.0, 0.5], [0.2, 0.9, 1.0, 0.5], [0.8, 0.1, 1.0, 0.5]])
    assert model.predict_many(Xq) == [2, 2, 1]


def test_predict_learn_many_is_test_then_train():
    X, y = _stream(400, seed=2)
    a = OnlineRandomForest(**dict(SMALL, gamma=0.01, track_importance=True))
    b = OnlineRandomForest(**dict(SMALL, gamma=0.01, track_importance=True))
    got = a.predict_learn_many(X, y)
    want = []
    for i in range(len(X)):
        want.append(b.predict_many(X[i:i + 1])[0] if b.n_seen and b._arrays["node_count"].sum() > 0
                    else None)
        b.learn_many(X[i:i + 1], y[i:i + 1])
    assert got == want
    assert got[0] is None
    assert _trees(a) == _trees(b)


def test_same_seed_same_forest_other_seed_differs():
    X, y = _stream(600)
    a, b, c = (OnlineRandomForest(**SMALL, seed=s) for s in (3, 3, 4))
    for m in (a, b, c):
        m.learn_many(X, y)
    assert _trees(a) == _trees(b)
    assert _trees(a) != _trees(c)


def test_growth_from_tiny_capacity_is_transparent(monkeypatch):
    X, y = _stream(800)
    big = OnlineRandomForest(n_trees=3, min_samples=5, max_depth=8)
    monkeypatch.setattr(OnlineRandomForest, "_INITIAL_NODES", 512)
    monkeypatch.setattr(OnlineRandomForest, "_INITIAL_SLOTS", 256)
    big.learn_many(X, y)
    monkeypatch.setattr(OnlineRandomForest, "_INITIAL_NODES", 1)
    monkeypatch.setattr(OnlineRandomForest, "_INITIAL_SLOTS", 1)
    tiny = OnlineRandomForest(n_trees=3, min_samples=5, max_depth=8)
    tiny.learn_many(X, y)
    assert tiny._arrays["node_feature"].shape[1] < 512
    assert _trees(tiny) == _trees(big)
    assert max(len(s[0]) for s in _trees(big)) > 15  # trees really grew past the tiny sizes


def test_tracking_importance_does_not_change_the_forest():
    X, y = _stream(600)
    plain = OnlineRandomForest(**dict(SMALL, gamma=0.02))
    tracked = OnlineRandomForest(**dict(SMALL, gamma=0.02), track_importance=True,
                                 importance_decay=0.01)
    plain.learn_many(X, y)
    tracked.learn_many(X, y)
    assert _trees(plain) == _trees(tracked)
    # off costs nothing: no importance statistics are allocated
    assert plain._arrays["imp_count"].size == 0 and plain._arrays["imp_delta"].size == 0
    assert plain.importances() == {}


def test_state_round_trip_predicts_and_continues_identically():
    X, y = _stream(900)
    params = dict(SMALL, gamma=0.02, track_importance=True, importance_decay=0.01)
    ref = OnlineRandomForest(**params)
    ref.learn_many(X, y)
    first = OnlineRandomForest(**params)
    first.learn_many(X[:450], y[:450])
    state = first.to_state()
    restored = OnlineRandomForest.from_state(state)
    Xq = X[450:500]
    np.testing.assert_array_equal(restored.predict_proba_many(Xq), first.predict_proba_many(Xq))
    restored.learn_many(X[450:], y[450:])
    assert _trees(restored) == _trees(ref)
    assert restored.n_seen == ref.n_seen == 900
    np.testing.assert_array_equal(restored.importances()["mda"], ref.importances()["mda"])
    with pytest.raises(ValueError):
        OnlineRandomForest.from_state(dict(state, kind="other"))


# ---------------------------------------------------------------------------- structure


def test_tree_invariants_and_bounded_depth():
    X, y = _stream(3000, seed=4)
    model = OnlineRandomForest(n_trees=4, min_samples=5, max_depth=3, min_gain=0.0)
    model.learn_many(X, y)
    a = model._arrays
    max_nodes = 2 ** (3 + 1) - 1
    assert a["node_feature"].shape[1] <= max_nodes
    for t in range(4):
        n = a["n_nodes"][t]
        feat, left, right = a["node_feature"][t, :n], a["node_left"][t, :n], a["node_right"][t, :n]
        depth, slot = a["node_depth"][t, :n], a["node_slot"][t, :n]
        children = np.concatenate([left[feat >= 0], right[feat >= 0]])
        assert sorted(children.tolist()) == list(range(1, n))  # every node but the root once
        assert (depth[left[feat >= 0]] == depth[feat >= 0] + 1).all()
        assert depth.max() <= 3
        leaves = feat < 0
        assert ((slot >= 0) == (leaves & (depth < 3))).all()  # only splittable leaves own tests
        live = slot[slot >= 0]
        free = a["slot_free"][t, :a["n_free"][t]]
        assert sorted(live.tolist() + free.tolist()) == list(range(a["slot_free"].shape[1]))
        # a split's threshold lies inside the range of the values that reached it
        for i in np.flatnonzero(feat >= 0):
            assert X[:, feat[i]].min() <= a["node_threshold"][t, i] <= X[:, feat[i]].max()
    assert a["n_nodes"].max() > 7  # depth 3 was reached


def test_tree_discarding_only_with_gamma_and_it_recovers_from_abrupt_drift():
    rng = np.random.default_rng(11)
    X = rng.random((12000, 3))
    y = (X[:, 0] > 0.5).astype(int)
    y[6000:] = (X[6000:, 1] > 0.5).astype(int)  # abrupt change of the relevant feature
    accs = {}
    for gamma in (0.0, 0.002):
        model = OnlineRandomForest(n_trees=10, gamma=gamma, seed=2)
        pred = model.predict_learn_many(X, y)
        hits = np.array([p == t for p, t in zip(pred, y)])
        accs[gamma] = hits[6500:9000].mean()  # the rows right after the change
        assert (model.n_replaced > 0) == (gamma > 0)
    assert accs[0.002] > 0.9
    assert accs[0.002] > accs[0.0] + 0.2  # measured: 0.98 vs 0.60


def test_importances_find_the_informative_features():
    rng = np.random.default_rng(8)
    X = rng.random((6000, 5))
    y = ((X[:, 0] + X[:, 3]) > 1.0).astype(int)
    model = OnlineRandomForest(n_trees=10, track_importance=True, seed=3)
    model.learn_many(X, y)
    imp = model.importances()
    assert set(imp) == {"mdg", "mda"}
    for name in ("mdg", "mda"):
        assert imp[name].shape == (5,)
        top = set(np.argsort(imp[name])[-2:].tolist())
        assert top == {0, 3}, (name, imp[name])
        assert min(imp[name][0], imp[name][3]) > 5 * max(abs(imp[name][[1, 2, 4]]).max(), 1e-3)


def test_memory_is_reported_and_bounded_by_depth():
    X, y = _stream(5000, seed=9)
    shallow = OnlineRandomForest(n_trees=2, min_samples=5, max_depth=4, min_gain=0.0, gamma=0.0)
    shallow.learn_many(X, y)
    size = shallow.memory_bytes()
    shallow.learn_many(X, y)  # a second pass cannot grow a complete depth-4 tree further
    assert shallow.memory_bytes() == size
    assert shallow._arrays["node_feature"].shape[1] <= 31
