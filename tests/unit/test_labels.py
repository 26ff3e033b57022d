"""Labels that arrive later: the held store's bounds and refusals, the pipeline's join, and
that outputs depend neither on how the input was cut nor on a restore in between."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from models.generators.hyperplane import RotatingHyperplane
from models.hoeffding.adaptive_forest import AdaptiveRandomForest
from schemas.codec import decode_state, encode_state
from worker.pipeline import PipelineConfig, PipelineError
from worker.pipeline.engine import Pipeline
from worker.pipeline.held import DUPLICATE_LABEL, EXPIRED_ID, UNKNOWN_ID, HeldInstances

# --------------------------------------------------------------------------- the held store


def _refusal(held, ident, ts=0) -> str:
    with pytest.raises(PipelineError) as err:
        held.take(ident, ts)
    return err.value.code


def test_the_oldest_row_falls_out_and_its_label_is_expired_not_unknown():
    held = HeldInstances(1, max_rows=3, max_age_ms=0)
    for i in range(5):
        held.put(i, np.array([float(i)]), i % 2, ts=i)
    assert len(held) == 3 and held.dropped == 2
    assert _refusal(held, 0) == EXPIRED_ID and _refusal(held, 1) == EXPIRED_ID
    row, served = held.take(4, ts=9)
    assert row.tolist() == [4.0] and served == 0
    assert _refusal(held, 4) == DUPLICATE_LABEL
    assert _refusal(held, 99) == UNKNOWN_ID
    assert _refusal(held, "2") == UNKNOWN_ID  # the instance is 2, not "2"


def test_rows_older_than_the_age_bound_fall_out_in_event_time():
    held = HeldInstances(1, max_rows=100, max_age_ms=50)
    held.put("a", np.zeros(1), "x", ts=1000)
    held.put("b", np.zeros(1), "y", ts=1040)
    assert held.take("a", ts=1050)[1] == "x"  # 50 ms old: still held
    held.put("c", np.zeros(1), "z", ts=1100)  # b is 60 ms older than c
    assert _refusal(held, "b", ts=1100) == EXPIRED_ID
    assert held.take("c", ts=1100)[1] == "z"


def test_a_store_of_no_rows_holds_nothing():
    held = HeldInstances(1, max_rows=0, max_age_ms=0)
    held.put(1, np.zeros(1), 0, ts=0)
    assert len(held) == 0 and held.empty and _refusal(held, 1) == UNKNOWN_ID


def test_the_store_restores_exactly_and_refuses_a_forged_state():
    held = HeldInstances(2, max_rows=4, max_age_ms=0)
    for i, ident in enumerate([1, "1", 2, "x", 3]):
        held.put(ident, np.array([i, -i], float), [0.5, 1.5] if i % 2 else "UP", ts=i)
    held.take(2, ts=9)
    state = decode_state(encode_state(held.to_state()))
    back = HeldInstances.from_state(state, 2, 4, 0)
    assert back.to_state().keys() == held.to_state().keys()
    assert encode_state(back.to_state()) == encode_state(held.to_state())
    for bad in ({"served": [{"a": 1}] * 3}, {"ids": [1.5, "1", "x"]}, {"X": np.full((3, 2), 1e300)},
                {"ts": np.zeros(2, np.int64)}):
        with pytest.raises(ValueError):
            HeldInstances.from_state({**state, **bad}, 2, 4, 0)
    with pytest.raises(ValueError):
        HeldInstances.from_state(state, 2, 2, 0)  # more rows than the bound


@pytest.mark.parametrize("served", [[1.0], [1.0, 2.0, 3.0, 4.0], "UP", 3])
def test_a_checkpoint_whose_held_prediction_the_task_does_not_serve_is_refused(served):
    # a 3-target regression stream holding two unlabelled instances: a forged checkpoint
    # that says one of them was served a prediction of another shape is refused at restore,
    # where the worker falls back to the checkpoint beneath, instead of failing its label's join
    X = np.random.default_rng(0).random((22, 2))
    p = Pipeline("r", PipelineConfig(seed=1), 2, held_rows=10)
    p.process(X[:20], [[float(a), 2.0 * a, 1.0] for a in X[:20, 0]])
    p.process(X[20:], [None, None], ids=[1, 2], ts=[0, 0])
    state = decode_state(encode_state(p.to_state()))
    back = Pipeline.from_state(state)  # as written: restores, and the labels join
    out = back.process(np.zeros((2, 2)), [[0.5, 1.0, 1.0]] * 2, ids=[1, 2], ts=[1, 1],
                       labels=np.array([True, True]))
    assert out.labels_joined == 2
    state["held"]["served"] = [served, state["held"]["served"][1]]
    with pytest.raises(ValueError, match="3 targets"):
        Pipeline.from_state(state)


def test_a_classification_checkpoint_holding_regression_predictions_is_refused():
    X, y = _stream(60)
    p = Pipeline("c", PipelineConfig(seed=1), X.shape[1], held_rows=10)
    p.process(X[:50], y[:50])
    p.process(X[50:52], [None, None], ids=[1, 2], ts=[0, 0])
    state = decode_state(encode_state(p.to_state()))
    Pipeline.from_state(state)
    state["held"]["served"] = [[0.5], state["held"]["served"][1]]
    with pytest.raises(ValueError, match="class label"):
        Pipeline.from_state(state)


# --------------------------------------------------------------------------- the pipeline's join


def _stream(n: int = 1200, seed: int = 3):
    X, y, _ = RotatingHyperplane(n_features=4, mag_change=0.005, seed=seed).take(n)
    return X, [int(v) for v in y]


def _delayed(X, y, delay: int):
    """Rows of a stream whose labels come ``delay`` instances late: ``X, ys, ids, ts, labels``
    with one LabelEvent row per instance."""
    n = len(y)
    rows, ys, ids, ts, labels = [], [], [], [], []

    def label(i):
        rows.append(np.zeros(X.shape[1]))
        ys.append(y[i])
        ids.append(i)
        ts.append(min(i + delay, n - 1))
        labels.append(True)

    for i in range(n):
        rows.append(X[i])
        ys.append(None)
        ids.append(i)
        ts.append(i)
        labels.append(False)
        if i >= delay:
            label(i - delay)
    for i in range(max(0, n - delay), n):
        label(i)
    return np.array(rows), ys, ids, ts, np.array(labels)


def _outputs(res_list):
    preds = [v for res in res_list for b in res.blocks for v in b.y_pred]
    alerts = [(a.source, a.level, a.position) for res in res_list for a in res.alerts]
    ranks = [(r.method, r.features, r.n_seen) for res in res_list for r in res.rankings]
    return preds, alerts, ranks


@pytest.mark.parametrize("predictor", ["hoeffding_tree", "forgetful_tree", "naive_bayes"])
def test_a_label_that_follows_its_instance_at_once_gives_the_labelled_streams_outputs(predictor):
    X, y = _stream()
    # rankings after every block of the rankers only: the one every ranking_every instances
    # comes after the instance that completes the interval, so before its label
    cfg = PipelineConfig(predictor=(predictor,), ranking_every=10**9)
    plain = Pipeline("s", cfg, 4)
    want = _outputs([plain.process(X, y)])
    late = Pipeline("s", cfg, 4)
    Xd, ys, ids, ts, labels = _delayed(X, y, 0)
    got = _outputs([late.process(Xd, ys, ids=ids, ts=ts, labels=labels)])
    assert got == want
    assert (late.n_instances, late.n_labelled) == (plain.n_instances, plain.n_labelled)
    assert late.accuracy == plain.accuracy


def test_an_instance_is_predicted_by_the_model_before_its_label_and_learned_after():
    cfg = PipelineConfig(predictor=("naive_bayes",), rankers=(), detectors=())
    p = Pipeline("s", cfg, 1)
    X = np.array([[0.0], [5.0], [0.1], [5.0], [0.0]])
    # an instance labelled "a", one unlabelled (predicted "a", held), its label "b", then one
    # more unlabelled row: the model has now seen "b"
    res = p.process(X, ["a", None, "b", None, "b"], ids=[0, 1, 1, 2, 9], ts=[0, 1, 2, 3, 4],
                    labels=np.array([False, False, True, False, True]))
    served = [v for b in res.blocks for v in b.y_pred]
    assert served == [None, "a", "b"]  # rows 0, 1, 3: no model yet, "a" only, then "a" and "b"
    assert p.n_instances == 3 and p.n_labelled == 2  # the label for 9 was refused
    assert p.loss_sum == 2.0  # row 0 (nothing to predict) and row 1 (served "a", label "b")
    [(offsets, err)] = res.rejected
    assert err.code == UNKNOWN_ID and offsets.tolist() == [-1]
    assert len(p.held) == 1 and 2 in p.held


@pytest.mark.parametrize("predictor", ["adaptive_random_forest", "forgetful_tree"])
def test_outputs_with_late_labels_do_not_depend_on_the_cuts_or_a_restore(predictor):
    X, y = _stream(900, seed=5)
    y = [v if i % 7 else None for i, v in enumerate(y)]  # some instances never labelled
    Xd, ys, ids, ts, labels = _delayed(X, y, 40)
    keep = [k for k in range(len(ys)) if not (labels[k] and ys[k] is None)]
    Xd, labels = Xd[keep], labels[keep]
    ys, ids, ts = ([v[k] for k in keep] for v in (ys, ids, ts))
    cfg = PipelineConfig(predictor=(predictor,))
    whole = Pipeline("s", cfg, 4, held_rows=30)  # some labels come after their row fell out
    full = whole.process(Xd, ys, ids=ids, ts=ts, labels=labels)
    want = _outputs([full])
    rng = np.random.default_rng(1)
    cuts = sorted({0, len(ys), *rng.integers(1, len(ys), 12).tolist()})
    p, results = Pipeline("s", cfg, 4, held_rows=30), []
    for a, b in zip(cuts, cuts[1:]):
        if a == cuts[len(cuts) // 2]:  # a restore in the middle
            p = Pipeline.from_state(decode_state(encode_state(p.to_state())))
        results.append(p.process(Xd[a:b], ys[a:b], ids=ids[a:b], ts=ts[a:b],
                                 labels=labels[a:b]))
    assert _outputs(results) == want
    assert encode_state(p.to_state()) == encode_state(whole.to_state())
    rejected = [(o.tolist(), e.code) for res in results for o, e in res.rejected]
    assert rejected == [(o.tolist(), e.code) for o, e in full.rejected]
    assert rejected and {code for _o, code in rejected} == {EXPIRED_ID}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 12), st.sampled_from(["a", "b", None])),
                max_size=40))
def test_any_sequence_of_instances_and_labels_is_taken_or_refused_never_crashes(events):
    """Arbitrary interleavings (labels before, twice, for unknown ids, of unlabelled-looking
    rows): every label is joined or refused with one of the store's codes, and the state
    restores and continues identically."""
    X = np.array([[float(i % 5)] for i in range(len(events))]).reshape(-1, 1)
    ys = [(y or "a") if is_label else y for is_label, _i, y in events]  # a label has one
    ids = [i for _l, i, _y in events]
    labels = np.array([e[0] for e in events], dtype=bool)
    cfg = PipelineConfig(predictor=("hoeffding_tree",), rankers=(), detectors=("adwin",))
    p = Pipeline("s", cfg, 1, held_rows=4)
    half = len(events) // 2
    res = p.process(X[:half], ys[:half], ids=ids[:half], ts=list(range(half)),
                    labels=labels[:half])
    q = Pipeline.from_state(decode_state(encode_state(p.to_state())))
    rest = list(range(half, len(events)))
    args = (X[half:], ys[half:])
    kw = dict(ids=ids[half:], ts=rest, labels=labels[half:])
    r1, r2 = p.process(*args, **kw), q.process(*args, **kw)
    for r, part in ((res, labels[:half]), (r1, labels[half:])):
        assert {e.code for _o, e in r.rejected} <= {UNKNOWN_ID, EXPIRED_ID, DUPLICATE_LABEL}
        assert r.labels_joined + len(r.rejected) == int(part.sum())
    # joined: the labels whose instance a store of four rows, held row by row, still holds
    held, joined = OrderedDict(), 0
    for is_label, ident, y in events:
        if is_label:
            joined += held.pop(ident, None) is not None
        elif y is None:
            held.pop(ident, None)
            held[ident] = True
            if len(held) > 4:
                held.popitem(last=False)
    assert res.labels_joined + r1.labels_joined == joined
    assert _outputs([r1]) == _outputs([r2]) and r1.labels_joined == r2.labels_joined
    assert encode_state(p.to_state()) == encode_state(q.to_state())
    assert p.n_instances == int((~labels).sum())


def _instance_predictions(res_list, labels_list):
    return [b.y_pred[r - b.start] for res, labels in zip(res_list, labels_list)
            for b in res.blocks for r in range(b.start, b.stop) if not labels[r]]


def test_the_forests_one_call_per_segment_serves_what_one_call_per_run_serves(monkeypatch):
    """The adaptive random forest takes unlabelled rows in its test-then-train kernel: a
    segment of alternating instances and labels is one call; the predictions, the scores,
    the detectors' alerts and the rankings are those of one call per run of rows."""
    X, y = _stream(1500, seed=8)
    y = [v if i % 3 else None for i, v in enumerate(y)]  # some labels with their instance
    Xd, ys, ids, ts, labels = _delayed(X, [None if v is None else v for v in y], 30)
    keep = [k for k in range(len(ys)) if not (labels[k] and ys[k] is None)]
    Xd, labels = Xd[keep], labels[keep]
    ys, ids, ts = ([v[k] for k in keep] for v in (ys, ids, ts))
    ys = [ys[k] if labels[k] else (y[ids[k]] if ids[k] % 3 == 1 else None)
          for k in range(len(ys))]  # every third instance carries its own label instead
    results = {}
    for fused in (True, False):
        p = Pipeline("s", PipelineConfig(), 4)
        if not fused:
            monkeypatch.setattr(AdaptiveRandomForest, "predicts_unlabelled_rows", False)
        res = p.process(Xd, ys, ids=ids, ts=ts, labels=labels)
        monkeypatch.undo()
        alerts = [(a.source, a.level, a.position) for a in res.alerts
                  if a.source != "adaptive_random_forest"]  # its events count per call
        results[fused] = (_instance_predictions([res], [labels]), p.n_labelled, p.loss_sum,
                          alerts, [(r.features, r.n_seen) for r in res.rankings],
                          [len(x[2]) for x in res.scored])
    assert results[True][:5] == results[False][:5]
    assert sum(results[True][5]) == sum(results[False][5])


def test_rows_held_from_the_bulk_decoders_arrays_checkpoint_and_restore():
    """The bulk decoder hands ids and times as arrays: the held ids are Python integers."""
    X, y = _stream(50)
    p = Pipeline("s", PipelineConfig(predictor=("naive_bayes",)), 4)
    p.process(X, [v if i % 2 else None for i, v in enumerate(y)],
              ids=np.arange(50, dtype=np.int64), ts=np.arange(50, dtype=np.int64))
    assert len(p.held) == 25 and all(type(i) is int for i in p.held.rows)
    back = Pipeline.from_state(decode_state(encode_state(p.to_state())))
    assert encode_state(back.to_state()) == encode_state(p.to_state())


@pytest.mark.parametrize("publish", ["block", "top_k"])
def test_rankings_made_once_the_poll_is_through_are_those_made_per_block(monkeypatch, publish):
    """With late labels the block ranker still learns a poll's rows in one call, the
    rankings made afterwards from its importances at each ask: the outputs and the state are
    those of a learn and an ask per block, whatever the cuts (some labels refused too)."""
    X, y = _stream(1500, seed=4)
    Xd, ys, ids, ts, labels = _delayed(X, y, 40)
    ids = [i + 7 if k % 97 == 5 else i for k, i in enumerate(ids)]  # unknown ids: refused
    cuts = [3, 500, 1100, 2200, len(ys)]

    def run():
        p = Pipeline("s", PipelineConfig(publish_rankings=publish, ranking_every=250), 4)
        outs, a = [], 0
        for b in cuts:
            res = p.process(Xd[a:b], ys[a:b], ids=ids[a:b], ts=ts[a:b],
                            labels=np.asarray(labels[a:b]))
            outs.append(([(blk.start, blk.y_pred, None if blk.proba is None else
                           blk.proba.tolist()) for blk in res.blocks],
                         [(r.row, r.source, r.level, r.position, r.detail) for r in res.alerts],
                         [(r.row, r.method, r.features, r.scores, r.n_seen)
                          for r in res.rankings], [(e.code, o.tolist()) for o, e in res.rejected]))
            a = b
        return outs, encode_state(p.to_state())

    deferred = run()
    monkeypatch.setattr(Pipeline, "_defer_rankings", lambda self: None)
    per_block = run()
    assert deferred == per_block
    assert sum(len(o[2]) for o in deferred[0]) > 10 and any(o[3] for o in deferred[0])


def _full_outputs(res_list) -> list:
    return [([(b.start, b.stop, list(b.classes), b.y_pred,
               None if b.proba is None else b.proba.tolist()) for b in res.blocks],
             [(a.row, a.source, a.level, a.position, a.detail) for a in res.alerts],
             [(r.row, r.method, r.features, r.scores, r.n_seen) for r in res.rankings],
             [(o.tolist(), e.code) for o, e in res.rejected],
             [(pos.tolist(), served, truth) for pos, served, truth in res.scored],
             res.held_dropped, res.labels_joined) for res in res_list]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["inst", "inst", "label", "plain"]),
                          st.integers(0, 40), st.sampled_from(["a", "b", "c"])),
                min_size=1, max_size=160),
       st.lists(st.integers(1, 159), max_size=4), st.booleans())
def test_a_poll_with_late_labels_learned_in_one_call_answers_as_per_segment_calls(
        events, cuts, emit):
    """A poll of unlabelled instances, label events (some for unknown, expired or already
    labelled ids) and labelled instances is learned in one call of the forest: every output
    and the state are those of one call per run of rows, whatever the cuts."""
    rng = np.random.default_rng(len(events))
    X = rng.random((len(events), 3))
    kinds = [k for k, _i, _y in events]
    ys = [None if k == "inst" else y for k, _i, y in events]
    ids = [i for _k, i, _y in events]
    labels = np.array([k == "label" for k in kinds], dtype=bool)
    bounds = sorted({c for c in cuts if c < len(events)}) + [len(events)]
    cfg = PipelineConfig(ranking_every=7, params={
        "adaptive_random_forest": {"n_models": 3, "grace_period": 5}})

    def run():
        p = Pipeline("s", cfg, 3, held_rows=6)
        outs, a = [], 0
        for b in bounds:
            outs.append(p.process(X[a:b], ys[a:b], ids=ids[a:b], ts=list(range(a, b)),
                                  labels=labels[a:b], emit=emit))
            a = b
        return _full_outputs(outs), encode_state(p.to_state())

    with pytest.MonkeyPatch.context() as mp:
        planned = []
        plan = Pipeline._plan_mixed

        def spy(self, *args):
            out = plan(self, *args)
            planned.append(out is not None)
            return out

        mp.setattr(Pipeline, "_plan_mixed", spy)
        whole = run()
        mp.setattr(Pipeline, "_plan_mixed", lambda self, *args: None)
        mp.setattr(Pipeline, "_defer_rankings", lambda self: None)
        per_run = run()
    assert whole == per_run
    if "label" in kinds:  # a poll holding a label event is one of those learned in one call
        assert any(planned)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["inst", "inst", "label", "plain"]),
                          st.integers(0, 60), st.sampled_from(["a", "b"])),
                min_size=1, max_size=120),
       st.lists(st.integers(1, 119), max_size=3), st.sampled_from([4, 40, 400]))
def test_a_poll_whose_order_cannot_matter_is_held_at_once_as_row_by_row(events, cuts, rows):
    """When no id of a poll is both taken and held, held twice, held already or labelled
    before, and nothing falls out (:meth:`HeldInstances.orderless`), the label events take
    their instances first and the instances are held after the kernel call, with their
    predictions: every output and the state are those of holding and taking row by row."""
    X = np.random.default_rng(len(events)).random((len(events), 2))
    ys = [None if k == "inst" else y for k, _i, y in events]
    ids = [i for _k, i, _y in events]
    labels = np.array([k == "label" for k, _i, _y in events], dtype=bool)
    bounds = sorted({c for c in cuts if c < len(events)}) + [len(events)]
    cfg = PipelineConfig(ranking_every=9, params={
        "adaptive_random_forest": {"n_models": 2, "grace_period": 5}})

    def run():
        p = Pipeline("s", cfg, 2, held_rows=rows)
        outs, a = [], 0
        for b in bounds:
            outs.append(p.process(X[a:b], ys[a:b], ids=ids[a:b], ts=list(range(a, b)),
                                  labels=labels[a:b]))
            a = b
        return _full_outputs(outs), encode_state(p.to_state())

    at_once = run()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(HeldInstances, "orderless", lambda self, *poll: False)
        in_order = run()
    assert at_once == in_order


def test_a_stream_of_late_labels_is_served_at_once_as_row_by_row(monkeypatch):
    """Labels 25 instances late in polls of 200 rows: most join an instance held in the
    same poll, the rest one held before it; outputs and state equal row-by-row holding."""
    X, y = _stream(900, seed=5)
    Xd, ys, ids, ts, labels = _delayed(X, y, 25)

    def run():
        p = Pipeline("s", PipelineConfig(), 4, held_rows=1000)
        outs = [p.process(Xd[a:a + 200], ys[a:a + 200], ids=ids[a:a + 200],
                          ts=ts[a:a + 200], labels=labels[a:a + 200])
                for a in range(0, len(ys), 200)]
        return _full_outputs(outs), encode_state(p.to_state())

    served = []
    take_many = HeldInstances.take_many
    monkeypatch.setattr(HeldInstances, "take_many",
                        lambda self, *a: served.append(take_many(self, *a)) or served[-1])
    at_once = run()
    joined = sum(len(poll[1]) for poll in served)
    assert joined > 400 and sum(len(poll[0].at) for poll in served) > 50  # both kinds of join
    monkeypatch.setattr(HeldInstances, "orderless", lambda self, *poll: False)
    assert run() == at_once


def _poll(events: list) -> tuple:
    """``(ids, positions)`` of a poll's holds and of its takes: ``(hold, id)`` per position;
    a hold is a new id (10-19, once), a take any id."""
    puts, takes, new = ([], []), ([], []), set()
    for pos, (hold, ident) in enumerate(events):
        if hold and ident >= 10 and ident not in new:
            new.add(ident)
            puts[0].append(ident), puts[1].append(pos)
        elif not hold:
            takes[0].append(ident), takes[1].append(pos)
    return puts, takes


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(0, 9), max_size=6, unique=True),
       st.lists(st.tuples(st.booleans(), st.integers(0, 19)), max_size=30))
# an id taken twice removes its row at its first take, and only then
@example(2, [0], [(False, 0), (True, 10), (True, 11), (False, 0)])
@example(1, [0], [(False, 0), (False, 0), (True, 10), (True, 11)])
def test_a_poll_fits_exactly_when_holding_it_row_by_row_lets_no_row_fall_out(cap, before,
                                                                             events):
    """``_fits`` counts the store's size at each hold as taking and holding row by row would
    (held ids 0-9 before the poll; a hold is a new id, 10-19; a take may name any id)."""
    held = HeldInstances(1, max_rows=cap, max_age_ms=0)
    for ident in before:
        held.put(ident, np.zeros(1), "a", ts=0)
    puts, takes = _poll(events)
    by_row = HeldInstances.from_state(held.to_state(), 1, cap, 0)
    dropped = by_row.dropped
    for pos in sorted(puts[1] + takes[1]):
        if pos in puts[1]:
            by_row.put(puts[0][puts[1].index(pos)], np.zeros(1), "a", ts=0)
        else:
            try:
                by_row.take(takes[0][takes[1].index(pos)], ts=0)
            except PipelineError:
                pass
    assert held._fits(*puts, *takes) == (by_row.dropped == dropped)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=12),
       st.lists(st.tuples(st.booleans(), st.integers(0, 19)), max_size=30))
def test_a_poll_served_at_once_takes_refuses_and_remembers_as_row_by_row(cap, before, events):
    """``take_many`` then ``put_many`` leave the store and give each refusal the reason that
    taking and holding row by row would (a store of ids 0-9 held or labelled before the
    poll; a hold is a new id, 10-19; a take may name any id, twice too), whenever the store
    allows a poll at once."""
    held = HeldInstances(1, max_rows=cap, max_age_ms=0)
    for label, ident in before:
        held.put(ident, np.zeros(1), "a", ts=0)
        if label:
            held.take(ident, ts=0)
    puts, takes = _poll(events)
    if not held.orderless(*puts, *takes):
        return
    by_row = HeldInstances.from_state(held.to_state(), 1, cap, 0)
    codes = []
    for pos in sorted(puts[1] + takes[1]):
        if pos in puts[1]:
            by_row.put(puts[0][puts[1].index(pos)], np.full(1, pos), "b", ts=0)
        else:
            try:
                by_row.take(takes[0][takes[1].index(pos)], ts=0)
            except PipelineError as exc:
                codes.append((pos, exc.code))
    put_at = dict(zip(*puts))
    _taken, _joined, refused = held.take_many(*takes, put_at)
    assert [(pos, exc.code) for pos, exc in refused] == codes
    held.put_many(list(put_at), np.array([[put_at[i]] for i in put_at], float),
                  ["b"] * len(put_at), [0] * len(put_at))
    assert list(held.labelled) == list(by_row.labelled)
    assert list(held.rows) == list(by_row.rows) and held.dropped == by_row.dropped


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 6), st.lists(st.integers(0, 12), max_size=10, unique=True),
       st.lists(st.integers(0, 12), max_size=12))
# a store restored with more labelled ids than its bound keeps as many as it had
@example(2, [0, 1, 2, 3], [7, 8])
@example(2, [0, 1, 2, 3], [1, 8])
def test_ids_labelled_at_once_are_remembered_as_one_at_a_time(limit, before, idents):
    """The labelled ids of a poll taken at once are those remembered one at a time: each
    moves to the newest, each beyond the bound lets the oldest go (a store restored under
    a smaller bound than it was written with included)."""
    held = HeldInstances(1, max_rows=limit, max_age_ms=0)
    held.labelled = OrderedDict.fromkeys(before)
    one_at_a_time = OrderedDict.fromkeys(before)
    for ident in idents:
        one_at_a_time.pop(ident, None)
        one_at_a_time[ident] = None
        if len(one_at_a_time) > limit:
            one_at_a_time.popitem(last=False)
    held._remember_many(idents)
    assert list(held.labelled) == list(one_at_a_time)


def test_the_rows_of_a_store_live_in_reused_slots_and_restore_exactly():
    """Rows taken free their slots for the next ones; the state lists the held rows in
    arrival order whatever their slots, and a state naming an id twice is refused."""
    held = HeldInstances(2, max_rows=3, max_age_ms=0)
    for i in range(3):
        held.put(i, np.full(2, float(i)), f"p{i}", ts=10 * i)
    held.take(1, ts=30)
    held.put_many([7], np.array([[7.0, 7.0]]), ["p7"], [70])
    assert held.rows[7] == 1  # the slot 1 left
    held.put(8, np.full(2, 8.0), "p8", ts=80)
    assert held._X.shape[0] == 16 and held.dropped == 1  # 0 fell out when 8 came
    state = held.to_state()
    assert state["ids"] == [2, 7, 8] and state["served"] == ["p2", "p7", "p8"]
    assert state["X"].tolist() == [[2.0, 2.0], [7.0, 7.0], [8.0, 8.0]]
    assert state["ts"].tolist() == [20, 70, 80]
    again = HeldInstances.from_state(decode_state(encode_state(state)), 2, 3, 0)
    assert {k: np.asarray(v).tolist() for k, v in again.to_state().items()} == \
        {k: np.asarray(v).tolist() for k, v in state.items()}
    assert again.take(7, ts=90)[0].tolist() == [7.0, 7.0]
    with pytest.raises(ValueError, match="held twice"):
        HeldInstances.from_state({**state, "ids": [2, 7, 7]}, 2, 3, 0)


def test_the_store_serves_a_poll_at_once_only_when_its_order_cannot_matter():
    held = HeldInstances(1, max_rows=4, max_age_ms=0)
    held.put(1, np.zeros(1), "a", ts=0)
    held.take(1, ts=0)
    held.put(2, np.zeros(1), "a", ts=0)
    assert held.orderless([3, 4], [0, 1], [], []) and held.orderless([], [], [2], [0])
    assert not held.orderless([3, 3], [0, 1], [], [])  # held twice
    assert not held.orderless([2], [0], [], [])  # held already
    assert not held.orderless([1], [0], [], [])  # labelled before: holding it forgets that
    assert not held.orderless([3, 4, 5, 6], [0, 1, 2, 3], [], [])  # one would fall out
    # ... unless labels take rows out before: 2 (held) at 1, 3 (held at 0) at 2, twice
    assert held.orderless([3, 4, 5, 6], [0, 3, 4, 5], [2, 3, 3], [1, 2, 2])
    assert not held.orderless([3, 4, 5, 6], [0, 3, 4, 5], [3], [6])  # too late
    assert not HeldInstances(1, max_rows=4, max_age_ms=10).orderless([3], [0], [], [])
    put_at = {5: 1, 6: 4}  # instances 5 and 6 held in this poll, at positions 1 and 4
    taken, joined, refused = held.take_many([2, 2, 6, 8, 5], [0, 2, 3, 5, 6], put_at)
    assert (taken.at, taken.served, taken.X.tolist()) == ([0], ["a"], [[0.0]])
    assert [(pos, e.code) for pos, e in refused] == [(2, DUPLICATE_LABEL), (3, UNKNOWN_ID),
                                                     (5, UNKNOWN_ID)]  # 6: before it
    assert joined == [(6, 1)] and put_at == {6: 4}  # 5 joins its instance, held in the poll
    held.put_many(list(put_at), np.ones((1, 1)), ["c"], [2])
    assert held.take(6, ts=3)[1] == "c" and not held.rows
    assert _refusal(held, 5) == DUPLICATE_LABEL
