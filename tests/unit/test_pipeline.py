"""The per-stream pipeline: test-then-train, segment boundaries, alerts, rankings, state, tasks.

Pure logic is checked with small test-only learners that enter through the registry, the one
door every learner family uses (they record what the pipeline asks of them); determinism and
the state round trip with the real learners.
"""

from __future__ import annotations

import numpy as np
import pytest

from models import registry
from models.core.base import Learner, LearnerEvent
from models.registry import CLASSIFICATION, DETECTOR, PREDICTOR, RANKER, REGRESSION, SELECTOR
from schemas.codec import decode_state, encode_state
from worker.pipeline import Pipeline, PipelineConfig, PipelineError, stream_seed
from worker.pipeline.stages import zone_entries
from worker.settings import ConfigError, load_settings, stream_profiles


class FakeLearner(Learner):
    """Predicts the majority label learned so far, ranks columns by their running mean and
    reports a collapse whenever its ``plan`` says so; records every call."""

    kind = "fake_majority"
    state_arrays = {"n_seen": ("<i8", 1), "imp": ("<f8", 1)}
    plans: dict = {}  # id(learner) -> iterator of collapse levels (None: no event)

    def __init__(self, width: int = 3, seed: int = 1):
        self.params = {"width": int(width), "seed": int(seed)}
        self._arrays = {"n_seen": np.zeros(1, np.int64), "imp": np.zeros(int(width))}
        self.counts: dict = {}
        self.calls: list = []

    @property
    def classes(self):
        return sorted(self.counts)

    def predict_many(self, X):
        self.calls.append(("predict", X.shape[0], self.n_seen))
        if not self.counts:
            return [None] * X.shape[0]
        best = max(sorted(self.counts), key=lambda c: self.counts[c])
        return [best] * X.shape[0]

    def predict_proba_many(self, X):
        cl = self.classes
        tot = sum(self.counts.values())
        return np.tile([self.counts[c] / tot for c in cl], (X.shape[0], 1))

    def learn_many(self, X, y):
        self.calls.append(("learn", X.shape[0], list(y)))
        for v in y:
            self.counts[v] = self.counts.get(v, 0) + 1
        self._arrays["n_seen"][0] += len(y)
        self._arrays["imp"] = self._arrays["imp"] + X.mean(axis=0)

    def importances(self):
        return {"mean": self._arrays["imp"].copy()} if self.n_seen else {}

    def events(self):
        level = next(self.plans.get(id(self), iter(())), None)
        return [LearnerEvent("collapse", level, -1, -1, f"fake {level}")] if level else []

    def _extra_state(self):
        return {"counts": [[k, v] for k, v in sorted(self.counts.items())]}

    def _load_extra_state(self, extra):
        self.counts = {k: v for k, v in extra["counts"]}
        self.calls = []


class FakeDetector(Learner):
    """Fires a drift at every 7th value fed to it."""

    kind = "fake_every7"
    state_arrays = {"n": ("<i8", 1)}

    def __init__(self):
        self.params = {}
        self._arrays = {"n": np.zeros(1, np.int64)}

    def update_many(self, xs):
        n = int(self._arrays["n"][0])
        idx = [i for i in range(len(xs)) if (n + i + 1) % 7 == 0]
        self._arrays["n"][0] = n + len(xs)
        return np.array(idx, dtype=np.int64)


class FakeSelector(Learner):
    """Selects column 0 once it has learned more than 2 rows."""

    kind = "fake_first_column"
    state_arrays = {"n_seen": ("<i8", 1)}

    def __init__(self, seed: int = 1):
        self.params = {"seed": int(seed)}
        self._arrays = {"n_seen": np.zeros(1, np.int64)}

    def learn_many(self, X, y):
        self._arrays["n_seen"][0] += X.shape[0]

    def selected(self):
        return [0] if self.n_seen > 2 else []


class FakeFilter(Learner):
    """The predictor behind the fake selector: the selector learns each batch first, then the
    predictor learns it with the columns not selected read as 0."""

    kind = "fake_filter"
    state_arrays = {"n_seen": ("<i8", 1)}

    def __init__(self, learner, selector):
        self.params = {}
        self.learner, self.selector = learner, selector
        self._arrays = {"n_seen": np.zeros(1, np.int64)}

    @property
    def classes(self):
        return self.learner.classes

    def _seen(self, X):
        cols = self.selector.selected()
        if not cols:
            return X
        out = np.zeros_like(X)
        out[:, cols] = X[:, cols]
        return out

    def learn_many(self, X, y):
        self.selector.learn_many(X, y)
        self.learner.learn_many(self._seen(X), y)
        self._arrays["n_seen"][0] += len(y)

    def predict_many(self, X):
        return self.learner.predict_many(self._seen(X))

    def predict_proba_many(self, X):
        return self.learner.predict_proba_many(self._seen(X))

    def importances(self):
        return self.learner.importances()

    def events(self):
        return self.learner.events()


class FakeRegressor(Learner):
    """Predicts the running mean of every target."""

    kind = "fake_mean"
    state_arrays = {"n_seen": ("<i8", 1), "sum": ("<f8", 1)}

    def __init__(self, seed: int = 1):
        self.params = {"seed": int(seed)}
        self._arrays = {"n_seen": np.zeros(1, np.int64), "sum": np.zeros(0)}

    def learn_many(self, X, Y):
        Y = np.asarray(Y, dtype=float)
        if self._arrays["sum"].shape[0] == 0:
            self._arrays["sum"] = np.zeros(Y.shape[1])
        self._arrays["sum"] = self._arrays["sum"] + Y.sum(axis=0)
        self._arrays["n_seen"][0] += Y.shape[0]

    def predict_many(self, X):
        if not self.n_seen:
            return np.zeros((X.shape[0], 0))
        return np.tile(self._arrays["sum"] / self.n_seen, (X.shape[0], 1))

    def importances(self):
        return {}


FAKES = [
    registry.LearnerSpec(
        name="fake_majority", cls=FakeLearner, tasks=frozenset({CLASSIFICATION}),
        roles=frozenset({PREDICTOR, RANKER}), summary="test-only majority-class learner",
        rankings=(("mean", "fake_mean_rank"),), events=("collapse",), defaults={"width": 3}),
    registry.LearnerSpec(
        name="fake_every7", cls=FakeDetector, tasks=frozenset({CLASSIFICATION, REGRESSION}),
        roles=frozenset({DETECTOR}), summary="test-only detector"),
    registry.LearnerSpec(
        name="fake_first_column", cls=FakeSelector, tasks=frozenset({CLASSIFICATION}),
        roles=frozenset({SELECTOR}), summary="test-only selector", composes=FakeFilter),
    registry.LearnerSpec(
        name="fake_mean", cls=FakeRegressor, tasks=frozenset({REGRESSION}),
        roles=frozenset({PREDICTOR}), summary="test-only mean regressor"),
]


@pytest.fixture(autouse=True)
def fakes():
    for spec in FAKES:
        registry.register(spec)
    yield
    for spec in FAKES:
        registry.unregister(spec.name)
    FakeLearner.plans.clear()


def fake_pipeline(batch_size=4, ranking_every=10, top_k=2, detector=False, d=3, **kw):
    kw.setdefault("task", "classification")  # stages built at once (no label needed first)
    cfg = PipelineConfig(predictor="fake_majority", rankers=["fake_majority"],
                         detectors=["fake_every7"] if detector else [],
                         batch_size=batch_size, ranking_every=ranking_every, top_k=top_k,
                         params={"fake_majority": {"width": d}}, **kw)
    return Pipeline("s", cfg, d)


def calls(p):
    return p.predictor.learner.calls


def test_stream_seed_is_stable_and_distinct():
    assert stream_seed("a", 1) == stream_seed("a", 1)
    assert len({stream_seed(s, k) for s in "abc" for k in (1, 2)}) == 6
    assert stream_seed("a", 1, "importance") != stream_seed("a", 1)
    assert 0 <= stream_seed("x" * 1000, 2**70) < 2**63


def test_a_registered_test_only_learner_is_accepted_by_settings_and_run_by_a_pipeline():
    env = {"STREAMFOREST_LEARNERS__PREDICTOR": "fake_majority",
           "STREAMFOREST_LEARNERS__RANKERS": "fake_majority",
           "STREAMFOREST_LEARNERS__DETECTORS": "fake_every7",
           "STREAMFOREST_LEARNERS__BATCH_SIZE": "10",
           "STREAMFOREST_LEARNERS__PARAMS": '{"fake_majority": {"width": 2}}'}
    cfg = stream_profiles(load_settings(env)).for_stream("any")
    p = Pipeline("any", cfg, 2)
    res = p.process(np.ones((30, 2)), [1] * 30)
    assert p.model_name == "fake_majority" and p.n_labelled == 30
    assert {r.method for r in res.rankings} == {"fake_mean_rank"}
    assert {a.source for a in res.alerts} == {"fake_every7"}
    # and a misspelt parameter of it is refused at start, naming the variable
    env["STREAMFOREST_LEARNERS__PARAMS"] = '{"fake_majority": {"widht": 2}}'
    with pytest.raises(ConfigError, match=r"LEARNERS__PARAMS \(field fake_majority.widht\).*"
                                          r"did you mean width"):
        load_settings(env)
    registry.unregister("fake_majority")
    with pytest.raises(ConfigError, match="unknown learner 'fake_majority'"):
        load_settings(env)
    registry.register(FAKES[0])


def test_each_labelled_row_is_predicted_before_it_is_learned():
    p = fake_pipeline(batch_size=4)
    X = np.arange(30, dtype=float).reshape(10, 3)
    y = [0, 1, None, 1, 1, None, 0, 1, 1, 1]
    res = p.process(X, y)
    # the first 4 labelled rows are rows 0,1,3,4: one segment 0..5 predicted by the empty
    # model, then learned; rows 5..9 (labels 0,1,1,1 at 6..9) predicted by the new model
    assert [(b.start, b.stop) for b in res.blocks] == [(0, 5), (5, 10)]
    assert res.blocks[0].y_pred == [None] * 5
    assert res.blocks[1].y_pred == [1] * 5
    learns = [c for c in calls(p) if c[0] == "learn"]
    assert learns == [("learn", 4, [0, 1, 1, 1]), ("learn", 4, [0, 1, 1, 1])]
    assert p.n_pending == 0 and p.n_instances == 10 and p.n_labelled == 8
    # prequential accuracy counts only labelled rows: block 2 predicts 1 for 0,1,1,1
    assert p.accuracy == 3 / 8


def test_unlabelled_rows_are_only_predicted():
    p = fake_pipeline(batch_size=2)
    res = p.process(np.ones((5, 3)), [None] * 5)
    assert sum(b.stop - b.start for b in res.blocks) == 5
    assert not [c for c in calls(p) if c[0] == "learn"]
    assert p.n_pending == 0 and p.n_labelled == 0


def _flatten(res, offset=0):
    preds = [(offset + r, b.y_pred[r - b.start],
              None if b.proba is None else tuple(np.round(b.proba[r - b.start], 12)))
             for b in res.blocks for r in range(b.start, b.stop)]
    alerts = [(offset + a.row, a.source, a.level, a.position) for a in res.alerts]
    ranks = [(offset + k.row, k.method, tuple(k.features), tuple(k.scores), k.n_seen)
             for k in res.rankings]
    return preds, alerts, ranks


def _run_chunked(make, X, y, cuts):
    p = make()
    preds, alerts, ranks = [], [], []
    bounds = [0, *cuts, len(y)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        pr, al, rk = _flatten(p.process(X[a:b], y[a:b]), a)
        preds += pr
        alerts += al
        ranks += rk
    return preds, alerts, ranks, p


def test_outputs_do_not_depend_on_how_input_is_cut():
    rng = np.random.default_rng(0)
    X = rng.random((200, 3))
    y = [int(v) if rng.random() > 0.2 else None for v in (X[:, 0] > 0.5)]

    def make():
        return fake_pipeline(batch_size=5, ranking_every=13, detector=True)

    whole = _run_chunked(make, X, y, [])
    for cuts in ([1, 2, 3], [50, 51, 150], list(range(7, 200, 17))):
        assert _run_chunked(make, X, y, cuts)[:3] == whole[:3]
    preds, alerts, ranks, _ = whole
    assert len(preds) == 200 and alerts and ranks


def _collapsing(batch_size=7, plan=None):
    p = fake_pipeline(batch_size=batch_size, ranking_every=1000, detector=True)
    levels = plan if plan is not None else (("drift" if k % 3 == 2 else None)
                                            for k in range(10**6))
    FakeLearner.plans[id(p.predictor.learner)] = iter(levels)
    return p


def test_detector_and_learner_event_alerts_keep_row_order_however_input_is_cut():
    # the detector is fed once per call, events come from learns inside the call: the merged
    # alerts must be in row order, the detector's first at a shared row, as when every row
    # is a call of its own
    X = np.zeros((120, 3))
    y = [r % 2 if r % 5 else None for r in range(120)]
    whole = _run_chunked(_collapsing, X, y, [])
    by_row = _run_chunked(_collapsing, X, y, list(range(1, 120)))
    assert by_row[1] == whole[1]
    rows = [a[0] for a in whole[1]]
    assert rows == sorted(rows)
    assert {a[1] for a in whole[1]} == {"fake_every7", "fake_majority"}
    shared = [r for r in set(rows) if rows.count(r) > 1]
    assert shared  # the 7th labelled value ends a batch: both fire at that row
    for r in shared:
        assert [a[1] for a in whole[1] if a[0] == r][0] == "fake_every7"


def test_learner_events_become_alerts_from_that_learner():
    p = _collapsing(batch_size=2, plan=["warning", None, "drift"])
    p.detectors = []
    res = p.process(np.zeros((7, 3)), [0, 1, 0, 1, 0, 1, 0])
    assert [(a.source, a.level, a.position, a.detail) for a in res.alerts] == [
        ("fake_majority", "warning", 1, "fake warning"), ("fake_majority", "drift", 5, "fake drift")]
    assert p.n_events == 2


def test_rankings_every_n_instances_and_when_top_k_changes():
    p = fake_pipeline(batch_size=4, ranking_every=10, top_k=1, publish_rankings="top_k")
    X = np.zeros((40, 3))
    X[:20, 0] = 1.0  # feature 0 leads at first ...
    X[20:, 2] = 5.0  # ... then feature 2 overtakes it
    res = p.process(X, [0] * 40)
    rows = [(k.row, k.features[0]) for k in res.rankings]
    # after the first batch (row 3) top-1 is x0 (change from nothing); rows 9,19,29,39 are
    # the periodic ones; after the batch ending at row 23 x2 only ties x0 (5 = 5; ties go
    # to the lower column), it overtakes after the batch ending at row 27
    assert (3, "x0") in rows
    assert {r for r, _ in rows} >= {9, 19, 29, 39}
    changed = [r for r, f in rows if f == "x2"]
    assert changed and changed[0] == 27
    for k in res.rankings:
        assert k.method == "fake_mean_rank"
        assert k.scores == sorted(k.scores, reverse=True)
        assert sorted(k.features) == ["x0", "x1", "x2"]


def test_drift_positions_are_stream_positions():
    p = fake_pipeline(batch_size=100, detector=True)
    X = np.zeros((10, 3))
    y = [0, None, 0, 0, 0, 0, 0, 0, 0, 0]
    p.process(X[:5], y[:5])
    res = p.process(X[5:], y[5:])
    # the 7th labelled value is input row 7 (row 2 of the second call), stream position 7
    assert [(a.row, a.position, a.level) for a in res.alerts] == [(2, 7, "drift")]


def test_learner_rejection_is_reported_with_offsets():
    p = fake_pipeline(batch_size=2)
    p.check_label(0)  # the task is fixed and the stages are built

    def reject(X, y):
        raise ValueError("no")

    p.predictor.learner.learn_many = reject
    res = p.process(np.zeros((2, 3)), [0, 1], offsets=np.array([10, 11]))
    assert len(res.rejected) == 1
    offs, err = res.rejected[0]
    assert offs.tolist() == [10, 11] and err.code == "learner_rejected"


def test_a_selector_chooses_the_columns_the_predictor_sees():
    p = fake_pipeline(batch_size=2, selector="fake_first_column")
    X = np.arange(24, dtype=float).reshape(8, 3)
    p.process(X, [0] * 8)
    inner = p.predictor.learner.learner  # the predictor behind the selector's composition
    learns = [c for c in inner.calls if c[0] == "learn"]
    assert len(learns) == 4 and p.selector.learner.n_seen == 8
    assert p.selector.learner is p.predictor.learner.selector
    # the selector learns each batch first; before its first selection the predictor saw
    # every column, afterwards only column 0 (the others read as 0)
    imp = p.predictor.learner.importances()["mean"]
    assert imp[1] == pytest.approx(X[:2, 1].mean()) and imp[2] == pytest.approx(X[:2, 2].mean())
    assert imp[0] == pytest.approx(sum(X[a:a + 2, 0].mean() for a in range(0, 8, 2)))


def test_the_first_label_fixes_the_task_and_later_labels_of_the_other_kind_are_refused():
    cfg = PipelineConfig(predictor=["fake_majority", "fake_mean"], rankers=[], detectors=[])
    c = Pipeline("c", cfg, 3)
    assert c.task is None and c.model_name == "fake_majority"
    c.check_label("UP")
    assert c.task.name == "classification"
    with pytest.raises(PipelineError, match="task is classification") as info:
        c.check_label([1.0, 2.0])
    assert info.value.code == "invalid_target"
    r = Pipeline("r", cfg, 3)
    r.check_label([1.0, 2.0])
    assert r.task.name == "regression" and r.model_name == "fake_mean"
    for bad, code in (("UP", "invalid_target"), ([1.0], "target_count")):
        with pytest.raises(PipelineError) as info:
            r.check_label(bad)
        assert info.value.code == code


def test_regression_is_refused_while_no_regression_predictor_is_configured():
    p = Pipeline("r", PipelineConfig(predictor="fake_majority", rankers=[]), 3)
    with pytest.raises(PipelineError, match="no regression predictor") as info:
        p.check_label([1.0, 2.0])
    assert info.value.code == "unsupported_task" and p.task is None


def test_a_regression_stream_predicts_lists_and_watches_a_bounded_loss():
    cfg = PipelineConfig(predictor="fake_mean", rankers=[], detectors=["fake_every7"],
                         batch_size=5)
    p = Pipeline("r", cfg, 2)
    rng = np.random.default_rng(1)
    X = rng.random((40, 2))
    Y = [[float(a), 10.0 * float(b)] for a, b in rng.random((40, 2))]
    res = p.process(X, Y)
    assert all(b.classes is None and b.proba is None for b in res.blocks)
    assert res.blocks[0].y_pred == [None] * 5  # nothing learned before the first batch
    later = res.blocks[-1].y_pred[0]
    assert isinstance(later, list) and len(later) == 2
    assert 0.0 <= p.mean_loss <= 1.0 and p.n_labelled == 40
    assert {a.source for a in res.alerts} == {"fake_every7"}
    # the state, the task's running statistics included, round-trips exactly
    q = Pipeline.from_state(decode_state(encode_state(p.to_state())))
    X2 = rng.random((12, 2))
    Y2 = [[1.0, 2.0]] * 12
    assert _flatten(q.process(X2, Y2)) == _flatten(p.process(X2, Y2))


def test_a_regression_stream_with_no_profile_publishes_both_default_rankings():
    # the default rankers: block_mdi (follows drift) beside the paper's symbolic ranking
    p = Pipeline("bikes", PipelineConfig(ranking_every=200), 3)
    rng = np.random.default_rng(4)
    X = rng.random((1200, 3))
    Y = [[float(3 * a + b), float(a * a)] for a, b, _ in X]
    res = p.process(X, Y)
    methods = {r.method for r in res.rankings}
    assert methods == {"block_mdi", "symrf"}
    last = [r for r in res.rankings if r.method == "block_mdi"][-1]
    assert last.features[0] == "x0" and last.features[-1] == "x2"  # x2 plays no part


def test_regression_profile_refuses_class_labels():
    cfg = PipelineConfig(task="regression", predictor="fake_mean", rankers=[], profile="rp")
    p = Pipeline("r", cfg, 2)
    with pytest.raises(PipelineError, match="profile rp"):
        p.check_label("UP")


def test_warning_zone_is_announced_once_per_entry():
    flags = np.array([0, 1, 2, 5, 6, 9], dtype=np.int64)
    # a zone that continues from the previous batch is not announced again
    assert zone_entries(flags, was_warning=True).tolist() == [5, 9]
    assert zone_entries(flags, was_warning=False).tolist() == [0, 5, 9]
    assert zone_entries(np.zeros(0, dtype=np.int64), was_warning=False).tolist() == []


# --- with the real learners ---------------------------------------------------------------------

REAL = [
    dict(predictor="online_random_forest", rankers=["online_random_forest"], detectors=["adwin"]),
    dict(predictor="forgetful_tree", detectors=["ddm"]),
    dict(predictor="forgetful_forest", detectors=["adwin"]),
    dict(predictor="adaptive_random_forest", detectors=["adwin"]),
]


def _real_cfg(**kw):
    base = dict(batch_size=40, ranking_every=150, top_k=3,
                params={"online_random_forest": {"n_trees": 3, "min_samples": 10, "n_tests": 4},
                        "forgetful_forest": {"n_trees": 3},
                        "adaptive_random_forest": {"n_models": 3}})
    base.update(kw)
    return PipelineConfig(**base)


def _stream(n=600, seed=3):
    from models.generators.hyperplane import RotatingHyperplane

    X, y, _ = RotatingHyperplane(n_features=5, n_drift_features=2, mag_change=0.01,
                                 seed=seed).take(n)
    ys = [int(v) for v in y]
    for i in range(0, n, 9):
        ys[i] = None  # some unlabelled rows
    return X, ys


@pytest.mark.parametrize("kw", REAL, ids=lambda kw: kw["predictor"])
def test_real_pipeline_state_round_trip_and_chunking(kw):
    cfg = _real_cfg(**kw)
    X, y = _stream()

    def make():
        return Pipeline("stream-1", cfg, X.shape[1])

    whole = _run_chunked(make, X, y, [])
    assert _run_chunked(make, X, y, [37, 38, 301, 450])[:3] == whole[:3]
    # stop after 290 rows, go through msgpack, continue: same outputs as the uninterrupted run
    p = make()
    first = _flatten(p.process(X[:290], y[:290]))
    blob = encode_state(p.to_state())
    q = Pipeline.from_state(decode_state(blob))
    second = _flatten(q.process(X[290:], y[290:]), 290)
    assert (first[0] + second[0], first[1] + second[1], first[2] + second[2]) == whole[:3]
    assert q.n_instances == 600 and q.accuracy > 0.5


def test_replay_without_outputs_reaches_the_same_state():
    cfg = _real_cfg(**REAL[0])
    X, y = _stream(400)
    a = Pipeline("s", cfg, X.shape[1])
    a.process(X, y)
    b = Pipeline("s", cfg, X.shape[1])
    res = b.process(X[:250], y[:250], emit=False)
    assert all(blk.proba is None for blk in res.blocks)
    b.process(X[250:], y[250:])
    sa, sb = encode_state(a.to_state()), encode_state(b.to_state())
    assert sa == sb


def test_seeds_follow_the_stream_not_the_worker():
    cfg = _real_cfg(**REAL[0])
    X, y = _stream(200)
    outs = []
    for _ in range(2):
        p = Pipeline("same-id", cfg, X.shape[1])
        outs.append(_flatten(p.process(X, y)))
    assert outs[0] == outs[1]
    other = _flatten(Pipeline("other-id", cfg, X.shape[1]).process(X, y))
    assert other[0] != outs[0][0]  # another stream id draws other random tests


def _abfs_pipeline(predictor="hoeffding_tree"):
    cfg = PipelineConfig(predictor=(predictor,), selector="abfs", rankers=(), detectors=(),
                         params={"abfs": {"grace_period": 100, "selection_threshold": 0.05}})
    return Pipeline("s", cfg, 10, feature_names=[f"f{j}" for j in range(10)])


def test_a_selector_publishes_its_subset_and_names_the_feature_that_drifted():
    from tests.models.feature_drift_data import feature_drift_stream, relevant

    X, y, _ = feature_drift_stream(15000, 10, switch_every=5000, seed=3)
    p = _abfs_pipeline()
    res = p.process(X, [int(v) for v in y])
    drifts = [a for a in res.alerts if a.source == "abfs"]
    assert drifts and all(a.level == "drift" and a.feature for a in drifts)
    # the first feature drift after each switch names a feature of the pair that stopped mattering
    for c in (1, 2):
        after = [a for a in drifts if a.position >= 5000 * c]
        assert after[0].feature in {f"f{j}" for j in relevant(c - 1, 10)}
        assert after[0].position < 5000 * c + 1000
    ranks = [r for r in res.rankings if r.method == "abfs"]
    assert all(len(r.features) == len(r.scores) for r in ranks)
    # within 1000 rows of each switch the new pair is the subset, in selection order
    for c in (0, 1, 2):
        at = [r for r in ranks if r.n_seen <= 5000 * c + 1000][-1]
        assert set(at.features) == {f"f{j}" for j in relevant(c, 10)}, at
    # the predictor learns on the subset: better than chance on every concept
    preds = np.array([v for b in res.blocks for v in b.y_pred][200:])
    assert (preds == y[200:]).mean() > 0.75


def test_a_selector_pipeline_restored_mid_stream_continues_identically():
    from tests.models.feature_drift_data import feature_drift_stream

    X, y, _ = feature_drift_stream(12000, 10, switch_every=4000, seed=5)
    labels = [int(v) for v in y]
    whole = _abfs_pipeline("naive_bayes").process(X, labels)
    a = _abfs_pipeline("naive_bayes")
    first = a.process(X[:6100], labels[:6100])  # past a retrain at the first switch
    assert any(al.source == "abfs" for al in first.alerts)
    b = Pipeline.from_state(decode_state(encode_state(a.to_state())))
    rest = b.process(X[6100:], labels[6100:])
    got = [v for r in (first, rest) for blk in r.blocks for v in blk.y_pred]
    assert got == [v for blk in whole.blocks for v in blk.y_pred]
    assert [(k.method, k.features, k.n_seen) for r in (first, rest) for k in r.rankings] == \
        [(k.method, k.features, k.n_seen) for k in whole.rankings]


def test_rows_fed_one_at_a_time_from_a_reused_buffer_are_held_as_copies():
    """A caller may reuse its row buffer: pending rows waiting for the mini-batch are copies
    (made once per row), so outputs equal those of a run on the whole array."""
    rng = np.random.default_rng(4)
    X = rng.random((450, 4))
    y = [int(v) for v in X[:, 0] + X[:, 1] > 1.0]
    cfg = PipelineConfig(predictor="hoeffding_tree", rankers=[], batch_size=40)
    whole = Pipeline("s", cfg, 4).process(X, y)
    p = Pipeline("s", cfg, 4)
    buf = np.empty((1, 4))
    preds = []
    for i in range(450):
        buf[0] = X[i]
        res = p.process(buf, y[i:i + 1])
        preds += res.blocks[0].y_pred
        buf[0] = -1.0  # the caller overwrites its buffer before the next row
    assert preds == [v for b in whole.blocks for v in b.y_pred]
    assert p.n_pending == 450 % 40 and len(p._pending_X) == p.n_pending
    assert all(a.base is None for a in p._pending_X)


@pytest.mark.parametrize("predictor", ["adaptive_random_forest", "hoeffding_tree", "naive_bayes"])
def test_every_instance_is_predicted_by_a_model_that_learned_every_earlier_label(predictor):
    """Whatever the mini-batch and the consume batches, a row-by-row predictor gives each
    instance the prediction of one predict call per row, after one learn call per earlier
    labelled row (prequential, Gama et al. 2013)."""
    from models.generators.hyperplane import RotatingHyperplane

    X, y, _ = RotatingHyperplane(n_features=5, n_drift_features=2, mag_change=0.01, seed=4).take(700)
    labels = [None if i % 9 == 4 else int(v) for i, v in enumerate(y)]
    p = Pipeline("s", PipelineConfig(predictor=predictor, rankers=[], batch_size=100), 5)
    got = [v for a, b in ((0, 3), (3, 250), (250, 251), (251, 700))
           for blk in p.process(X[a:b], labels[a:b]).blocks for v in blk.y_pred]
    spec = registry.get(predictor)
    ref = spec.build({}, ("predictor",), seed=p.seed)
    want = []
    for i, label in enumerate(labels):
        want += ref.predict_many(X[i:i + 1]) if ref.n_seen else [None]
        if label is not None:
            ref.learn_many(X[i:i + 1], [label])
    assert got == want


@pytest.mark.parametrize("predictor", ["naive_bayes", "hoeffding_tree"])
def test_a_selector_pipeline_predicts_as_the_library_composition(predictor):
    """The predictor behind ABFS is the reference's composition (models.hoeffding.abfs.ABFSClassifier):
    the worker's predictions are the library's, row for row, whatever the cuts."""
    from models.hoeffding.abfs import ABFSClassifier
    from tests.models.feature_drift_data import feature_drift_stream

    X, y, _ = feature_drift_stream(5000, 8, switch_every=2000, seed=3)
    labels = [int(v) for v in y]
    params = {"abfs": {"grace_period": 100, "selection_threshold": 0.05}}
    cfg = PipelineConfig(predictor=predictor, selector="abfs", rankers=["abfs"], params=params)
    p = Pipeline("s", cfg, 8)
    got = [v for a, b in ((0, 777), (777, 778), (778, 3100), (3100, 5000))
           for blk in p.process(X[a:b], labels[a:b]).blocks for v in blk.y_pred]
    lib = ABFSClassifier(registry.get(predictor).build({}, (PREDICTOR,), p.seed),
                         registry.get("abfs").build(params["abfs"], (SELECTOR,),
                                                    stream_seed("s", cfg.seed, "selector")))
    assert got == lib.predict_learn_many(X, labels)
    assert p.selector.learner.layers()  # it selected, and drifts retrained the predictor


# -- rankings as fresh as the ranker's blocks --------------------------------------------------

def _block_pipeline(predictor="naive_bayes", **kw):
    cfg = PipelineConfig(predictor=predictor, rankers=["block_forest"], detectors=[],
                         params={"block_forest": {"n_trees": 3}}, **kw)
    return Pipeline("ranked", cfg, 4)


def _block_stream(n=700):
    rng = np.random.default_rng(5)
    X = rng.random((n, 4))
    y = [int(a + 0.3 * b > 0.6) for a, b in X[:, :2]]
    return X, y


@pytest.mark.parametrize("predictor", ["naive_bayes", "forgetful_tree"])
def test_the_ranker_learns_each_block_whatever_the_mini_batch(predictor):
    # a block forest measures every stride (10) rows once its first block (100 rows) is
    # full: it is fed that often, so with publish_rankings="block" a ranking follows every
    # block, the same for mini-batches of 100, 10, 64 and 7 rows, and for a predictor that
    # learns row by row or per mini-batch (the ranker sees the same rows)
    X, y = _block_stream()
    runs = []
    for batch_size in (100, 10, 64, 7):
        cuts = [3, 150, 151, 333, 600]
        _, _, ranks, p = _run_chunked(lambda b=batch_size: _block_pipeline(
            predictor, batch_size=b, ranking_every=1000), X, y, cuts)
        runs.append(ranks)
    assert runs[0] == runs[1] == runs[2] == runs[3]
    ranks = runs[0]
    assert [r[4] for r in ranks] == list(range(100, 701, 10))  # n_seen: one per block
    assert [r[0] for r in ranks] == [n - 1 for n in range(100, 701, 10)]  # its last row
    if predictor == "naive_bayes":
        ref = _run_chunked(lambda: _block_pipeline("forgetful_tree", batch_size=100,
                                                   ranking_every=1000), X, y, [])[2]
        assert ref == ranks


def test_the_published_ranking_is_the_rankers_state():
    X, y = _block_stream()
    p = _block_pipeline(batch_size=100, ranking_every=1000)
    last = None
    for a in range(0, 700, 37):
        res = p.process(X[a:a + 37], y[a:a + 37])
        if res.rankings:
            last = res.rankings[-1]
        if last is not None:  # the subscriber's ranking equals the ranker's now
            (method, scores), = p.rankers[0].rankings()
            order = np.lexsort((np.arange(4), -scores))
            assert last.features == [f"x{c}" for c in order]
            assert last.scores == [float(scores[c]) for c in order]
            assert last.n_seen == (a + min(37, 700 - a)) // 10 * 10


def test_publishing_rules_block_top_k_and_interval():
    X, y = _block_stream()
    out = {}
    for rule in ("block", "top_k", "interval"):
        out[rule] = _run_chunked(lambda r=rule: _block_pipeline(publish_rankings=r,
                                                                ranking_every=250), X, y, [])[2]
    block, top_k, interval = out["block"], out["top_k"], out["interval"]
    assert [r[0] for r in interval] == [249, 499]
    assert set(interval) <= set(block) and set(top_k) <= set(block)
    assert len(interval) < len(top_k) < len(block)
    # top_k keeps a ranking only when its top 5 (all 4 features here) order changed, or at
    # the periodic rows
    for prev, cur in zip(top_k, top_k[1:]):
        assert cur[2] != prev[2] or cur[0] in (249, 499)


def test_a_pipeline_restored_between_two_blocks_continues_identically():
    # forgetful trees learn per mini-batch (100 rows), the ranker per block (10 rows): a
    # checkpoint between them holds rows the ranker learned and the predictor has not
    X, y = _block_stream()

    def make():
        return _block_pipeline("forgetful_tree", batch_size=100, ranking_every=300)

    whole = _run_chunked(make, X, y, [])
    p = make()
    first = _flatten(p.process(X[:235], y[:235]))
    state = p.to_state()
    assert (state["n_ranked"], p.n_pending) == (30, 35)
    q = Pipeline.from_state(decode_state(encode_state(state)))
    second = _flatten(q.process(X[235:], y[235:]), 235)
    assert (first[0] + second[0], first[1] + second[1], first[2] + second[2]) == whole[:3]


def test_a_state_claiming_more_ranked_rows_than_pending_is_refused():
    X, y = _block_stream()
    p = _block_pipeline("forgetful_tree")
    p.process(X[:235], y[:235])
    state = decode_state(encode_state(p.to_state()))
    state["n_ranked"] = 36
    with pytest.raises(ValueError, match="n_ranked"):
        Pipeline.from_state(state)
    state = decode_state(encode_state(p.to_state()))
    state["config"]["publish_rankings"] = "often"
    with pytest.raises(ValueError, match="publish_rankings"):
        Pipeline.from_state(state)


def test_a_state_written_before_the_rankers_learned_per_block_continues_without_repeats():
    # such a state holds up to a mini-batch of pending rows the rankers have not learned
    # (and no n_ranked): they learn them at the first row, and every row is processed once
    X, y = _block_stream()
    p = _block_pipeline("forgetful_tree", batch_size=100, ranking_every=1000)
    p.process(X[:135], y[:135])
    state = decode_state(encode_state(p.to_state()))
    del state["n_ranked"]  # as written then (here the ranker learns 30 of them again)
    q = Pipeline.from_state(state)
    assert (q.n_pending, q.n_ranked) == (35, 0)
    res = q.process(X[135:], y[135:])
    rows = [r for b in res.blocks for r in range(b.start, b.stop)]
    assert rows == list(range(700 - 135))
    assert q.n_instances == 700
    # the 35 pending rows and the first new one at once, then a block every 10 rows
    assert [(k.row, k.n_seen) for k in res.rankings] == [
        (r, 166 + r) for r in range(0, 700 - 135, 10)]


def _flipping_stream(n=3000, seed=3):
    """Four features, the concept flips every 700 rows (the class of ``x0 + x1 > 1`` is
    inverted): the forest replaces many trees at once, the ranker's ranking moves."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = (X[:, 0] + X[:, 1] > 1.0).astype(int)
    flip = (np.arange(n) // 700) % 2 == 1
    return X, [int(v) for v in np.where(flip, 1 - y, y)]


def _poll_outputs(X, y, cuts, **cfg):
    p = Pipeline("s1", PipelineConfig(**cfg), n_features=X.shape[1])
    preds, probas, alerts, ranks = [], [], [], []
    for a, b in zip([0, *cuts], [*cuts, len(y)]):
        res = p.process(X[a:b], y[a:b])
        for blk in res.blocks:
            preds += blk.y_pred
            probas += [row.tolist() for row in blk.proba]
        alerts += [(a + al.row, al.source, al.level, al.position, al.detail) for al in res.alerts]
        ranks += [(a + r.row, r.method, r.features, r.scores, r.n_seen) for r in res.rankings]
    return preds, probas, alerts, ranks, encode_state(p.to_state())


@pytest.mark.parametrize("publish", ["block", "top_k", "interval"])
def test_a_poll_learned_in_one_call_per_learner_answers_as_one_call_per_segment(
        monkeypatch, publish):
    # a poll of labelled instances is learned in one call of the forest (its replacements
    # counted per segment) and one of the block ranker (its importances per measurement,
    # the rankings made once the poll is through): every output and the state are those of
    # one call of each per segment
    X, y = _flipping_stream()
    y[1503] = 2  # a class that appears within a poll: earlier segments' answers omit it
    cfg = dict(publish_rankings=publish, ranking_every=333, seed=2)
    cuts = [1, 40, 1000, 1007, 2500]
    used = []
    for name in ("_plan_poll", "_defer_rankings"):
        original = getattr(Pipeline, name)

        def spy(self, *args, _original=original, _name=name):
            out = _original(self, *args)
            used.append((_name, out is not None))
            return out

        monkeypatch.setattr(Pipeline, name, spy)
    whole = _poll_outputs(X, y, cuts, **cfg)
    assert used and all(ok for _, ok in used) and len(used) == 2 * (len(cuts) + 1)
    for name in ("_plan_poll", "_defer_rankings"):
        monkeypatch.setattr(Pipeline, name, lambda self, *args: None)
    per_segment = _poll_outputs(X, y, cuts, **cfg)
    assert whole == per_segment
    sources = {a[1] for a in whole[2]}
    assert "adaptive_random_forest" in sources  # trees replaced together: a tree_drift alert
    assert len({tuple(r[2]) for r in whole[3]}) > 1  # the ranking moved


@pytest.mark.parametrize("publish", ["block", "top_k"])
def test_a_ranking_due_at_a_block_and_at_the_interval_is_published_once(publish):
    # every 1,000 instances a ranking is due, and a block of the ranker ends there too: one
    # ranking per stream, method and position, whatever the poll's cuts
    X, y = _flipping_stream(3000)
    p = Pipeline("s1", PipelineConfig(publish_rankings=publish, ranking_every=1000),
                 n_features=4)
    seen = []
    for a in range(0, 3000, 700):
        seen += [(r.method, r.n_seen) for r in p.process(X[a:a + 700], y[a:a + 700]).rankings]
    assert len(seen) == len(set(seen))
    assert {("block_mdi", n) for n in (1000, 2000, 3000)} <= set(seen)
