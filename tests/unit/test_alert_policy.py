"""Alert rules: which learner events and detector signals become drift alerts, which are counted.

The rules are declared in the registry (:class:`models.registry.AlertRule`) and applied by the
pipeline after each mini-batch; a stand-in forest with a planned number of collapsing trees
per mini-batch checks the forgetful forest's rule exactly, the real forest, DDM and ABFS check
what their streams give.
"""

from __future__ import annotations

import numpy as np
import pytest

from models import registry
from models.core.base import Learner, LearnerEvent
from models.registry import CLASSIFICATION, DETECTOR, PREDICTOR, AlertRule, LearnerSpec
from schemas.codec import decode_state, encode_state
from worker.pipeline import Pipeline, PipelineConfig

FOREST_RULE = registry.get("forgetful_forest").alerts


class PlannedForest(Learner):
    """Predicts class 0; at its k-th mini-batch ``plan[k]`` of its trees collapse, reported
    as the forgetful forest reports them (a drift from half the trees on)."""

    kind = "test_planned_forest"
    state_arrays = {"n_seen": ("<i8", 1), "batches": ("<i8", 1)}
    plan: dict[int, int] = {}  # mini-batch index -> trees collapsing at it

    def __init__(self, n_trees: int = 20, seed: int = 1):
        self.params = {"n_trees": int(n_trees), "seed": int(seed)}
        self._arrays = {"n_seen": np.zeros(1, np.int64), "batches": np.zeros(1, np.int64)}

    @property
    def classes(self):
        return [0, 1]

    @property
    def n_trees(self) -> int:
        return self.params["n_trees"]

    @property
    def n_collapsed(self) -> int:
        return self.plan.get(int(self._arrays["batches"][0]) - 1, 0)

    def learn_many(self, X, y):
        self._arrays["n_seen"][0] += len(y)
        self._arrays["batches"][0] += 1

    def predict_many(self, X):
        return [0] * X.shape[0]

    def predict_proba_many(self, X):
        return np.tile([1.0, 0.0], (X.shape[0], 1))

    def events(self):
        k, n = self.n_collapsed, self.n_trees
        if not k:
            return []
        level = "drift" if 2 * k >= n else "warning"
        return [LearnerEvent("collapse", level, -1, -1, f"{k} of {n} trees collapsed")]


SPEC = LearnerSpec(name="test_planned_forest", cls=PlannedForest,
                   tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR}),
                   summary="test-only forest with planned collapses", events=("collapse",),
                   alerts=FOREST_RULE)


@pytest.fixture(autouse=True)
def planned():
    registry.register(SPEC)
    yield
    registry.unregister(SPEC.name)
    PlannedForest.plan = {}


def planned_pipeline(plan: dict[int, int], batch_size: int = 100) -> Pipeline:
    PlannedForest.plan = plan
    cfg = PipelineConfig(predictor="test_planned_forest", rankers=[], detectors=[],
                         batch_size=batch_size, task="classification")
    return Pipeline("s", cfg, 2)


def run(p: Pipeline, n: int, cuts=()) -> tuple[list, dict]:
    """Alerts ``(source, level, position)`` and counted events of ``n`` labelled rows fed in
    the calls ``cuts`` delimit."""
    X, y = np.zeros((n, 2)), [0] * n
    alerts, events = [], {}
    bounds = [0, *cuts, n]
    for a, b in zip(bounds[:-1], bounds[1:]):
        res = p.process(X[a:b], y[a:b])
        alerts += [(al.source, al.level, al.position) for al in res.alerts]
        for key, k in res.events.items():
            events[key] = events.get(key, 0) + k
    return alerts, events


def test_one_tree_collapsing_is_counted_not_published():
    alerts, events = run(planned_pipeline({3: 1, 9: 4}), 2000)
    assert alerts == []
    assert events == {("test_planned_forest", "collapse"): 2}


def test_a_quarter_of_the_forest_collapsing_at_once_is_one_alert():
    # 5 of 20 trees at the 11th mini-batch (instances 1000..1099): a warning at its last row
    alerts, events = run(planned_pipeline({10: 5}), 2000)
    assert alerts == [("test_planned_forest", "warning", 1099)]
    assert events == {}


def test_half_the_forest_is_a_drift():
    alerts, _ = run(planned_pipeline({10: 10}), 2000)
    assert alerts == [("test_planned_forest", "drift", 1099)]


def test_an_episode_is_announced_once_and_again_only_when_it_turns_into_a_drift():
    # qualifying batches 0.1k to 0.9k instances apart are one episode; the 12 trees at batch
    # 12 raise it to a drift; batch 30 is 1800 instances after the episode's last: a new one
    plan = {10: 5, 11: 6, 12: 12, 15: 16, 20: 5, 30: 7, 31: 1}
    alerts, events = run(planned_pipeline(plan), 4000)
    assert alerts == [("test_planned_forest", "warning", 1099),
                      ("test_planned_forest", "drift", 1299),
                      ("test_planned_forest", "warning", 3099)]
    assert events == {("test_planned_forest", "collapse"): 4}  # batches 11, 15, 20, 31


@pytest.mark.parametrize("cuts", [(1,), (99, 100, 101), tuple(range(37, 4000, 37)), (1250, 1251)])
def test_the_same_alerts_however_the_input_is_cut(cuts):
    plan = {10: 5, 11: 6, 12: 12, 15: 16, 20: 5, 30: 7, 31: 1}
    assert run(planned_pipeline(plan), 4000, cuts) == run(planned_pipeline(plan), 4000)


def test_an_episode_survives_a_checkpoint():
    plan = {10: 5, 11: 6, 12: 12, 15: 16, 20: 5, 30: 7, 31: 1}
    whole = run(planned_pipeline(plan), 4000)
    a = planned_pipeline(plan)
    first = run(a, 1150)  # inside the episode opened at instance 1099
    state = decode_state(encode_state(a.to_state()))
    b = Pipeline.from_state(state)
    rest = run(b, 2850)  # positions are stream positions: no offset to add
    assert first[0] + rest[0] == whole[0]
    assert b.episodes == {"test_planned_forest:collapse": [3099, "warning"]}
    # without the open episode, the 6 trees at instance 1199 would be announced again
    del state["episodes"]
    lost = run(Pipeline.from_state(state), 2850)
    assert ("test_planned_forest", "warning", 1199) in lost[0]


def _flip_stream(n=6000, flip=3000, noise=0.2, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = ((X[:, 0] + X[:, 1]) > 1.0).astype(int)
    y = np.where(rng.random(n) < noise, 1 - y, y)
    y[flip:] = 1 - y[flip:]
    return X, [int(v) for v in y]


def test_the_real_forest_counts_its_trees_housekeeping_and_alerts_on_a_collapse():
    # a noisy concept (80 % learnable) makes a few trees forget now and then; inverting the
    # labels at instance 3000 drops every tree's batch accuracy below chance: all 20 forget
    # their rows (Yuan, Sun & Shasha 2023, Sec. 3.2), a drift at the batch after the flip
    X, y = _flip_stream()
    p = Pipeline("flip1", PipelineConfig(predictor="forgetful_forest", rankers=[], detectors=[]),
                 4)
    res = p.process(X, y)
    forest = [(a.level, a.position) for a in res.alerts if a.source == "forgetful_forest"]
    assert ("drift", 3099) in forest
    assert all(lvl == "warning" for lvl, pos in forest if pos < 3000)
    assert res.events[("forgetful_forest", "collapse")] >= 1
    assert p.n_events == len(forest) + res.events[("forgetful_forest", "collapse")]


def test_the_default_forest_alerts_once_when_the_flip_replaces_many_of_its_trees():
    # the default predictor, ARF-10 (Gomes et al. 2017): before the flip single trees are
    # replaced now and then (each tree's ADWIN on its own error), counted only; inverting the
    # labels makes most trees' errors jump at once: a drift alert, once for the episode
    X, y = _flip_stream()
    p = Pipeline("flip1", PipelineConfig(rankers=[], detectors=[]), 4)
    res = p.process(X, y)
    assert p.predictor.name == "adaptive_random_forest"
    forest = [(a.level, a.position) for a in res.alerts if a.source == "adaptive_random_forest"]
    assert len(forest) == 1 and forest[0][0] == "drift" and 3000 <= forest[0][1] < 3500
    counted = res.events[("adaptive_random_forest", "tree_drift")]
    assert counted >= 1 and ("adaptive_random_forest", "tree_warning") in res.events
    assert p.n_events == len(forest) + counted + res.events[("adaptive_random_forest",
                                                             "tree_warning")]
    assert p.predictor.learner.n_drifts >= 10


def test_ddm_warnings_are_counted_and_its_drifts_published():
    X, y = _flip_stream(noise=0.1)
    cfg = PipelineConfig(predictor="naive_bayes", rankers=[], detectors=["ddm"])
    res = Pipeline("ddm", cfg, 4).process(X, y)
    assert {(a.source, a.level) for a in res.alerts} == {("ddm", "drift")}
    assert res.events.get(("ddm", "warning"), 0) >= 1


def test_abfs_feature_drifts_are_published_and_subset_changes_counted():
    from tests.models.feature_drift_data import feature_drift_stream

    X, y, _ = feature_drift_stream(10000, 10, switch_every=5000, seed=3)
    cfg = PipelineConfig(predictor=("hoeffding_tree",), selector="abfs", rankers=(),
                         detectors=(), params={"abfs": {"grace_period": 100}})
    res = Pipeline("s", cfg, 10).process(X, [int(v) for v in y])
    assert {(a.source, a.level) for a in res.alerts} == {("abfs", "drift")}
    assert res.events[("abfs", "selection")] >= 2


def test_a_spec_without_rules_publishes_every_event_as_it_is():
    assert registry.get("online_random_forest").alerts is None
    spec = LearnerSpec(name="x", cls=PlannedForest, tasks=frozenset({CLASSIFICATION}),
                       roles=frozenset({PREDICTOR}), summary="", events=("collapse",))
    assert spec.alerts is None


def test_rules_name_kinds_and_attributes_the_learner_has():
    base = dict(cls=PlannedForest, tasks=frozenset({CLASSIFICATION}),
                roles=frozenset({PREDICTOR}), summary="", events=("collapse",))
    with pytest.raises(ValueError, match="unknown kind or attribute"):
        LearnerSpec(name="x", alerts=("colapse",), **base)
    with pytest.raises(ValueError, match="unknown kind or attribute"):
        LearnerSpec(name="x", alerts=(AlertRule("collapse", share=0.5, involved="n_gone"),),
                    **base)
    with pytest.raises(ValueError, match="level must be"):
        AlertRule("collapse", level="info")
    # a detector's kinds are its signals; warnings only when it reports them
    det = dict(cls=PlannedForest, tasks=frozenset({CLASSIFICATION}),
               roles=frozenset({DETECTOR}), summary="")
    assert LearnerSpec(name="d", alerts=("drift",), **det).alerts[0].kind == "drift"
    with pytest.raises(ValueError, match="unknown kind"):
        LearnerSpec(name="d", alerts=("warning",), **det)
