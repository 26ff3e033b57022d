"""The pipeline of a stream of features: held rows joined by id, one generation per arriving
column, the missing-value rule, refusals that change nothing, and exact state round trips.

The central property: the pipeline scores its unlabelled rows exactly as a forest trained in
process on the same columns (Motl & Kordík 2019, Algorithm 1), so the worker's AUC is the
in-process AUC.
"""

from __future__ import annotations

import numpy as np
import pytest

from models import registry
from models.registry import PREDICTOR, RANKER
from schemas.codec import decode_state, encode_state
from worker.pipeline import (
    FeatureStreamPipeline,
    Pipeline,
    PipelineConfig,
    PipelineError,
    check_config,
    make_pipeline,
    pipeline_from_state,
    stream_seed,
)

CFG = PipelineConfig(predictor="feature_stream", params={"feature_stream": {"n_trees": 4}})


def _pipeline(names=(), **kw) -> FeatureStreamPipeline:
    return FeatureStreamPipeline("s1", CFG, list(names), **kw)


def _reference(stream: str = "s1"):
    """The forest the pipeline builds, built here from the registry and the stream's seed."""
    return registry.get("feature_stream").build(CFG.params_of("feature_stream"),
                                                (PREDICTOR, RANKER), stream_seed(stream, CFG.seed))


def _data(n=150, d=10, seed=3):
    """Rows whose class depends on columns 2 and 5 (the later one arrives after the first
    generations), three classes, every third row unlabelled."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = ["a" if X[r, 2] > 0.6 else ("b" if X[r, 5] > 0.5 else "c") for r in range(n)]
    labelled = np.arange(n) % 3 != 0
    return X, y, labelled


def _add_empty(p, y, labelled, emit=True):
    n = len(y)
    ys = [y[r] if labelled[r] else None for r in range(n)]
    return p.add([[]] * n, ys, list(range(n)), np.arange(100, 100 + n), list(range(n)), emit)


def _column(X, j, ids=None):
    ids = range(X.shape[0]) if ids is None else ids
    return {str(r): float(X[r, j]) for r in ids}


def _state(p) -> bytes:
    return encode_state(p.to_state())


def _round_trip(p) -> FeatureStreamPipeline:
    return FeatureStreamPipeline.from_state(decode_state(encode_state(p.to_state())))


def _same(a, b) -> None:
    """Two FeatureResults are equal, arrays included."""
    assert (a.predictions is None) == (b.predictions is None)
    if a.predictions is not None:
        pa, pb = a.predictions, b.predictions
        assert (pa.ids, pa.y_true, pa.classes, pa.y_pred, pa.n_features) == \
               (pb.ids, pb.y_true, pb.classes, pb.y_pred, pb.n_features)
        for name in ("offsets", "ts", "proba"):
            assert np.array_equal(getattr(pa, name), getattr(pb, name)), name
    assert a.ranking == b.ranking
    assert a.unknown_ids == b.unknown_ids
    assert [(o.tolist(), e.code) for o, e in a.rejected] == \
           [(o.tolist(), e.code) for o, e in b.rejected]


# -- joining by id -------------------------------------------------------------------------------


def test_arriving_values_land_in_the_rows_of_their_ids():
    p = _pipeline(["a", "b"])
    res = p.add([[1.0, 2.0], {"b": 4.0}, {"a": 5.0, "b": 6.0}], [None, "u", None],
                [7, "k", "9"], np.array([10, 11, 12]), [0, 1, 2])
    assert res.rejected == [] and p.n_rows == p.n_instances == 3
    # string keys reach int ids; held rows the arrival leaves out get a missing value
    res = p.arrive("c", {"9": 30.0, "7": 10.0})
    X = p.to_state()["X"]
    assert p.feature_names == ["a", "b", "c"]
    assert np.array_equal(X, [[1.0, 2.0, 10.0], [np.nan, 4.0, np.nan], [5.0, 6.0, 30.0]],
                          equal_nan=True)
    # a list instance after the arrival has the new width; a map may name the new feature
    res = p.add([[0.0, 0.5, 1.0], {"c": 2.0}], [None, None], [8, 10], np.array([13, 14]),
                [3, 4])
    assert res.rejected == []
    assert np.array_equal(p.to_state()["X"][3:], [[0.0, 0.5, 1.0], [np.nan, np.nan, 2.0]],
                          equal_nan=True)


def test_instance_ids_are_compared_in_their_string_form():
    p = _pipeline(["a"])
    p.add([[1.0]], [None], [7], np.array([0]), [0])
    res = p.add([[2.0]], [None], ["7"], np.array([1]), [1])
    assert [(o.tolist(), e.code) for o, e in res.rejected] == [([1], "duplicate_id")]
    assert p.n_rows == 1


def test_unknown_ids_are_reported_in_the_order_of_the_arrival():
    p = _pipeline()
    p.add([[], []], ["u", "v"], [1, 2], np.array([0, 1]), [0, 0])
    res = p.arrive("f", {"zz": 1.0, "2": 0.5, "3": 2.0, "1": 0.0, "aa": 3.0})
    assert res.unknown_ids == ["zz", "3", "aa"]
    assert np.array_equal(p.to_state()["X"], [[0.0], [0.5]])


# -- the missing-value rule ----------------------------------------------------------------------


def test_missing_values_take_the_column_mean_at_the_generation():
    p = _pipeline(["a"])
    # a: known for rows 0-3; the arriving column misses rows 2 and 4
    xs = [[1.0], [3.0], [5.0], [7.0], {}]
    ys = ["u", "v", "u", None, None]
    p.add(xs, ys, [0, 1, 2, 3, 4], np.arange(5), [0] * 5)
    res = p.arrive("b", {"0": 10.0, "1": 20.0, "3": 60.0})
    fill = p.to_state()["fill"]
    assert fill.tolist() == [4.0, 30.0]  # means of the non-missing held values, all rows
    # the generation learned the filled labelled rows; predictions used the same fills
    ref = _reference()
    ref.learn_many(np.array([[1.0, 10.0], [3.0, 20.0], [5.0, 30.0]]), ["u", "v", "u"])
    assert res.predictions.ids == [3, 4]
    assert np.array_equal(res.predictions.proba,
                          ref.predict_proba_many(np.array([[7.0, 60.0], [4.0, 30.0]])))
    # a row added later is scored with the fills of the latest generation (not its own mean)
    res = p.add([{"b": 1000.0}], [None], [5], np.array([5]), [0])
    assert np.array_equal(res.predictions.proba, ref.predict_proba_many(np.array([[4.0, 1000.0]])))
    assert p.to_state()["fill"].tolist() == [4.0, 30.0]


def test_a_column_with_no_value_fills_with_zero():
    p = _pipeline()
    p.add([[], []], ["u", "v"], [0, 1], np.arange(2), [0, 0])
    p.arrive("empty", {"9": 1.0})
    assert p.to_state()["fill"].tolist() == [0.0]


def test_without_a_labelled_row_an_arrival_is_joined_and_nothing_learned():
    p = _pipeline()
    p.add([[], []], [None, None], [0, 1], np.arange(2), [0, 0])
    res = p.arrive("f", {"0": 1.0})
    assert (p.n_features, p.n_generations, res.predictions, res.ranking) == (1, 0, None, None)
    assert p.task is None and p.classes == []


# -- refusals ------------------------------------------------------------------------------------


def test_a_duplicate_feature_raises_and_changes_nothing():
    p = _pipeline(["a"])
    p.add([[1.0], [2.0]], ["u", "v"], [0, 1], np.arange(2), [0, 0])
    p.arrive("b", {"0": 1.0})
    before = _state(p)
    for name in ("a", "b"):
        with pytest.raises(PipelineError) as err:
            p.arrive(name, {"1": 3.0})
        assert err.value.code == "duplicate_feature"
    assert _state(p) == before


def test_rejected_instances_change_nothing():
    p = _pipeline(["a", "b"], max_classes=2)
    p.add([[1.0, 2.0]], ["u"], [5], np.array([0]), [0])
    p.arrive("c", {"5": 1.0})
    before = _state(p)
    res = p.add([[1.0, 2.0, 3.0], [1.0, 2.0], {"a": 1.0, "zz": 2.0, "yy": 0.0},
                 [1.0, 2.0, 3.0], [1.0, 2.0, float("nan")], [1.0, 2.0, 3.0]],
                [None, None, None, [1.0], None, "v"],
                ["5", 6, 7, 8, 9, 10], np.array([1, 2, 3, 4, 5, 6]), [0] * 6)
    assert [(o.tolist(), e.code) for o, e in res.rejected] == [
        ([1], "duplicate_id"), ([2], "feature_count"), ([3], "unknown_feature"),
        ([4], "invalid_target"), ([5], "non_finite")]
    assert "'zz', 'yy'" in res.rejected[2][1].reason
    # the last row was accepted: its label is the stream's second class
    assert p.n_rows == 2
    p2 = FeatureStreamPipeline.from_state(decode_state(before))
    p2.add([[1.0, 2.0, 3.0]], ["v"], [10], np.array([6]), [0])
    assert _state(p2) == _state(p)
    # a third class is over max_classes: refused, nothing held
    before = _state(p)
    res = p.add([[0.0, 0.0, 0.0]], ["w"], [11], np.array([7]), [0])
    assert [e.code for _, e in res.rejected] == ["too_many_classes"]
    assert _state(p) == before


def test_a_full_row_store_refuses_rows_and_names_the_setting():
    p = _pipeline(["a"], max_rows=2)
    res = p.add([[1.0], [2.0], [3.0]], ["u", None, "v"], [0, 1, 2], np.array([5, 6, 7]),
                [0, 0, 0])
    assert [(o.tolist(), e.code) for o, e in res.rejected] == [([7], "row_store_full")]
    assert "STREAMFOREST_LEARNERS__FEATURE_STREAM_ROWS" in res.rejected[0][1].reason
    assert p.n_rows == 2 and p.classes == [] and p.task.labels == {"u": None}


def test_the_feature_cap_refuses_columns():
    p = _pipeline(["a"], max_features=2)
    p.add([[1.0]], ["u"], [0], np.array([0]), [0])
    p.arrive("b", {"0": 1.0})
    before = _state(p)
    with pytest.raises(PipelineError) as err:
        p.arrive("c", {"0": 1.0})
    assert err.value.code == "feature_cap"
    assert _state(p) == before


def test_a_stream_of_features_takes_class_labels_only():
    p = _pipeline()
    with pytest.raises(PipelineError) as err:
        p.check_label([1.0, 2.0])
    assert err.value.code == "invalid_target"
    p.check_label("UP")
    assert p.task.name == "classification"


# -- the learner as in process -------------------------------------------------------------------


def test_scores_equal_a_forest_trained_in_process_one_column_at_a_time():
    X, y, labelled = _data()
    p = _pipeline()
    assert _add_empty(p, y, labelled).predictions is None  # no model yet
    ref = _reference()
    ref_y = [y[r] for r in np.flatnonzero(labelled)]
    unl = np.flatnonzero(~labelled)
    for k in range(1, X.shape[1] + 1):
        res = p.arrive(f"f{k - 1}", _column(X, k - 1))
        ref.learn_many(X[labelled, :k], ref_y)
        assert p.n_generations == k
        assert res.predictions.ids == unl.tolist()
        assert res.predictions.y_true == [None] * unl.shape[0]
        assert res.predictions.offsets.tolist() == (100 + unl).tolist()
        assert res.predictions.n_features == k
        assert res.predictions.classes == ref.classes
        assert np.array_equal(res.predictions.proba, ref.predict_proba_many(X[unl, :k]))
        assert res.predictions.y_pred == ref.predict_many(X[unl, :k])
        # one ranking of all features by the forest's importances, best first
        mdi = ref.importances()["mdi"]
        order = sorted(range(k), key=lambda j: (-mdi[j], j))
        assert res.ranking.method == "feature_stream" and res.ranking.row == -1
        assert res.ranking.features == [f"f{j}" for j in order]
        assert res.ranking.scores == [float(mdi[j]) for j in order]
        assert res.ranking.n_seen == ref.n_seen
    # the two columns the classes depend on lead
    assert set(res.ranking.features[:2]) == {"f2", "f5"}


def test_instances_added_after_a_generation_are_predicted_on_arrival():
    X, y, labelled = _data(n=90, d=6)
    p = _pipeline()
    _add_empty(p, y[:80], labelled[:80])
    ref = _reference()
    for k in (1, 2):
        p.arrive(f"f{k - 1}", _column(X, k - 1, range(80)))
    ref.learn_many(X[:80][labelled[:80], :1], [y[r] for r in range(80) if labelled[r]])
    ref.learn_many(X[:80][labelled[:80], :2], [y[r] for r in range(80) if labelled[r]])
    xs = [list(X[r, :2]) for r in range(80, 90)]
    ys = [y[r] for r in range(80, 90)]  # labelled ones are predicted too, before learning
    res = p.add(xs, ys, list(range(80, 90)), np.arange(180, 190), list(range(10)))
    assert res.predictions.ids == list(range(80, 90))
    assert res.predictions.y_true == ys
    assert res.predictions.ts.tolist() == list(range(10))
    assert np.array_equal(res.predictions.proba, ref.predict_proba_many(X[80:90, :2]))
    # not emitting: held alike, nothing predicted
    assert p.add([[0.0, 0.0]], [None], [99], np.array([199]), [0], emit=False).predictions \
        is None
    assert p.n_rows == 91


# -- state ---------------------------------------------------------------------------------------


def _script(X, y, labelled):
    """Calls of a stream: instances, arrivals, more instances, more arrivals; every column
    misses some rows (so the fill values matter)."""
    n = len(y)
    half = n // 2
    ys = [y[r] if labelled[r] else None for r in range(n)]
    calls = [("add", [[]] * half, ys[:half], list(range(half)))]
    for j in range(3):
        calls.append(("arrive", f"f{j}", _column(X, j, [r for r in range(half) if r % 7 != j])))
    xs = [list(X[r, :3]) if r % 2 else {"f0": X[r, 0], "f2": X[r, 2]} for r in range(half, n)]
    calls.append(("add", xs, ys[half:], [str(r) for r in range(half, n)]))
    for j in range(3, X.shape[1]):
        calls.append(("arrive", f"f{j}",
                      {**_column(X, j, [r for r in range(n) if r % 5 != j - 3]), "ghost": 1.0}))
    return calls


def _run(p, call, emit=True):
    if call[0] == "add":
        _, xs, ys, ids = call
        offs = np.arange(len(ids), dtype=np.int64) + 1000 + p.n_rows
        return p.add(xs, ys, ids, offs, [7] * len(ids), emit)
    return p.arrive(call[1], call[2], emit)


def test_a_restored_pipeline_continues_exactly():
    X, y, labelled = _data(n=100, d=6, seed=5)
    calls = _script(X, y, labelled)
    whole = _pipeline()
    outs = [_run(whole, c) for c in calls]
    for cut in (1, 3, 4, 6):
        p = _pipeline()
        for c in calls[:cut]:
            _run(p, c)
        p = _round_trip(p)
        for c, expected in zip(calls[cut:], outs[cut:]):
            _same(_run(p, c), expected)
        assert _state(p) == _state(whole)
    assert outs[-1].unknown_ids == ["ghost"] and outs[-1].predictions is not None


def test_replaying_without_emitting_reaches_the_emitting_state():
    X, y, labelled = _data(n=100, d=6, seed=5)
    calls = _script(X, y, labelled)
    emitting, silent = _pipeline(), _pipeline()
    for c in calls:
        _run(emitting, c)
        res = _run(silent, c, emit=False)
        assert res.predictions is None and res.ranking is None
    assert _state(silent) == _state(emitting)


def test_the_state_is_plain_and_tagged_with_the_forest():
    p = _pipeline(["a"])
    p.add([[1.0], [2.0]], [1, None], [0, "x"], np.arange(2), [0, 0])
    p.arrive("b", {"0": 1.0})
    state = decode_state(encode_state(p.to_state()))
    assert state["kind"] == "feature_stream"
    assert state["config"] == CFG.as_dict()
    assert state["ids"] == [0, "x"] and state["labels"] == [1, None]
    q = pipeline_from_state(state)
    assert isinstance(q, FeatureStreamPipeline)
    assert (q.feature_names, q.n_rows, q.n_generations, q.classes) == (["a", "b"], 2, 1, [1])


# -- configuration and factories -----------------------------------------------------------------


def test_make_pipeline_and_pipeline_from_state_choose_the_kind():
    p = make_pipeline("s1", CFG, 2, None, max_rows=10, max_features=5)
    assert isinstance(p, FeatureStreamPipeline) and p.arrivals
    assert (p.feature_names, p.max_rows, p.max_features) == (["x0", "x1"], 10, 5)
    assert make_pipeline("s1", CFG, 1, ["temp"]).feature_names == ["temp"]
    q = make_pipeline("s1", PipelineConfig(predictor="naive_bayes", rankers=[]), 2,
                      max_classes=3)
    assert type(q) is Pipeline and not q.arrivals and q.max_classes == 3
    assert type(pipeline_from_state(q.to_state())) is Pipeline
    with pytest.raises(ValueError):
        pipeline_from_state({**p.to_state(), "kind": "naive_bayes"})


def test_a_learner_of_arrivals_runs_alone():
    assert CFG.arrivals and not PipelineConfig().arrivals
    assert check_config(CFG) == []  # the default rankers and detectors are left unused
    problems = dict(check_config(PipelineConfig(predictor=["forgetful_forest", "feature_stream"],
                                                selector="abfs")))
    assert set(problems) == {"predictor", "selector"}
    assert "forgetful_forest" in problems["predictor"] and "abfs" in problems["selector"]
    with pytest.raises(ValueError):
        FeatureStreamPipeline("s1", PipelineConfig(), [])
