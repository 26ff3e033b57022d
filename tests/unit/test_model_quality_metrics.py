"""The models' quality in the worker's metrics: prequential accuracy and error per profile, the
counters behind them, drift alerts by profile; one series per profile whatever the number of
streams; the late labels joined, held and fallen out (no broker: records are built in memory
and run through the worker's step)."""

from __future__ import annotations

import numpy as np
import pytest
from confluent_kafka import Message

from worker import gauges
from worker.intake import LABEL_HEADERS, Caps, RecordDecoder
from worker.merge import Released
from worker.metrics import MAX_PROFILES, OTHER_PROFILE, WorkerMetrics
from worker.output import Outbox, OutputEncoder
from worker.pipeline import PipelineConfig, Profiles
from worker.pipeline.results import Alert
from worker.residency import Budget
from worker.settings import load_settings
from worker.step import StreamStep
from worker.task import PartitionTask
from worker.tools.dev.produce import instance_values, label_value

FAST = dict(rankers=[], detectors=[], batch_size=10)
CLS = PipelineConfig(predictor="forgetful_tree", profile="default", **FAST)


def _series(m: WorkerMetrics, name: str) -> dict[str, float]:
    """Labels (as exposed) -> value of every sample of ``name`` in the scrape."""
    out = {}
    for line in m.render().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, value = line.rsplit(" ", 1)
            out[key[len(name):]] = float(value)
    return out


def _value(m: WorkerMetrics, name: str, **labels) -> float:
    return m.registry.get_sample_value(name, labels)


# ------------------------------------------------------------------------------ the window, by hand


def test_accuracy_over_the_latest_labelled_instances_checked_by_hand():
    m = WorkerMetrics(quality_window=4)
    q = m.quality
    # poll 1: two streams of profile p, 1 miss of 2 and 0 of 1 -> 1 miss in 3
    q.observe([("p", "classification", 1.0, 2), ("p", "classification", 0.0, 1)])
    assert _value(m, "streamforest_prequential_accuracy", profile="p") == pytest.approx(2 / 3)
    # poll 2: 0 misses of 2 -> window 5 (poll 1 stays: poll 2 alone holds fewer than 4)
    q.observe([("p", "classification", 0.0, 2)])
    assert _value(m, "streamforest_prequential_accuracy", profile="p") == pytest.approx(4 / 5)
    # poll 3: 3 misses of 3 -> poll 1 drops (polls 2 and 3 hold 5 >= 4): 3 misses in 5
    q.observe([("p", "classification", 3.0, 3)])
    assert _value(m, "streamforest_prequential_accuracy", profile="p") == pytest.approx(2 / 5)
    # poll 4: 0 of 4 -> polls 2 and 3 drop (poll 4 alone holds 4)
    q.observe([("p", "classification", 0.0, 4)])
    assert _value(m, "streamforest_prequential_accuracy", profile="p") == 1.0
    # calls without labelled rows change nothing; a profile without labels has no series
    q.observe([("p", "classification", 0.0, 0), ("q", "classification", 0.0, 0)])
    assert _value(m, "streamforest_prequential_accuracy", profile="p") == 1.0
    assert _value(m, "streamforest_prequential_accuracy", profile="q") is None
    # the counters hold every scored instance, not the window
    assert _value(m, "streamforest_scored_instances_total", profile="p", task="classification") == 12
    assert _value(m, "streamforest_prequential_loss_total", profile="p", task="classification") == 4


def test_error_of_regression_profiles_apart_from_their_accuracy():
    m = WorkerMetrics(quality_window=10)
    m.quality.observe([("mixed", "regression", 0.5, 2), ("mixed", "classification", 1.0, 4),
                       ("mixed", "regression", 0.25, 2)])
    assert _value(m, "streamforest_prequential_error", profile="mixed") == pytest.approx(0.75 / 4)
    assert _value(m, "streamforest_prequential_accuracy", profile="mixed") == pytest.approx(0.75)
    assert _value(m, "streamforest_scored_instances_total", profile="mixed", task="regression") == 4
    assert _value(m, "streamforest_prequential_loss_total", profile="mixed",
                  task="regression") == pytest.approx(0.75)


def test_the_profiles_named_are_capped():
    m = WorkerMetrics(quality_window=10)
    m.quality.observe([(f"p{i}", "classification", 0.0, 1) for i in range(MAX_PROFILES + 5)])
    labels = set(_series(m, "streamforest_prequential_accuracy"))
    assert len(labels) == MAX_PROFILES + 1
    assert f'{{profile="{OTHER_PROFILE}"}}' in labels and '{profile="p0"}' in labels
    assert m.profile_label("p0") == "p0" and m.profile_label(f"p{MAX_PROFILES}") == OTHER_PROFILE


# ------------------------------------------------------------------------------ through the worker's step


def _messages(stream: str, X, y, first_offset: int):
    values = instance_values(stream, X, y, start_id=first_offset, ts0=1000 + first_offset)
    return [Message(topic="in", partition=0, offset=first_offset + i, key=stream.encode(), value=v)
            for i, v in enumerate(values)]


def _run(step, task, msgs) -> list:
    offsets = np.array([mm.offset() for mm in msgs], dtype=np.int64)
    stepped = step.run(task, Released(a=msgs, a_offsets=offsets), Outbox("test"))
    return stepped.learned.results


def test_many_streams_of_one_profile_make_one_series_with_their_pooled_accuracy():
    m = WorkerMetrics(quality_window=100_000)
    step = StreamStep(RecordDecoder(Profiles(CLS), Caps()), None, m, 1 << 20)
    task = PartitionTask("g", "in", 0, "in.features")
    rng = np.random.default_rng(7)
    hits = n = 0
    for poll in range(2):
        msgs = []
        for s in range(100):  # 100 streams, 6 instances each per poll
            X = rng.random((6, 3))
            y = [int(v > 0.5) for v in X[:, 0]]
            y[-1] = None  # one unlabelled instance: predicted, not scored
            msgs += _messages(f"s{s}", X, y, first_offset=len(msgs) + 600 * poll)
        for _stream, _pl, _sr, _lo, res in _run(step, task, msgs):
            for _pos, served, labels in res.scored:
                hits += sum(p == t for p, t in zip(served, labels))
                n += len(labels)
    assert n == 2 * 100 * 5
    assert _series(m, "streamforest_prequential_accuracy") == {'{profile="default"}': pytest.approx(hits / n)}
    assert _series(m, "streamforest_scored_instances_total") == {
        '{profile="default",task="classification"}': n}
    assert _series(m, "streamforest_prequential_loss_total") == {
        '{profile="default",task="classification"}': n - hits}
    assert _series(m, "streamforest_prequential_error") == {}


def test_profiles_are_kept_apart_and_regression_reports_its_error():
    reg = PipelineConfig(predictor=["forgetful_tree", "isoup_symrf"], profile="sensors", task="regression",
                         params={"isoup_symrf": {"n_models": 2}}, **FAST)
    m = WorkerMetrics(quality_window=100_000)
    step = StreamStep(RecordDecoder(Profiles(CLS, [("sensor-*", reg)]), Caps()), None, m, 1 << 20)
    task = PartitionTask("g", "in", 0, "in.features")
    rng = np.random.default_rng(3)
    X = rng.random((40, 2))
    msgs = _messages("web", X, [int(v > 0.5) for v in X[:, 0]], 0)
    msgs += _messages("sensor-1", X, [[float(2 * a + b)] for a, b in X], 40)
    msgs += _messages("sensor-2", X, [[float(a - b)] for a, b in X], 80)
    results = {stream: pl for stream, pl, *_ in _run(step, task, msgs)}
    assert {pl.cfg.profile for pl in results.values()} == {"default", "sensors"}
    sensors = [results["sensor-1"], results["sensor-2"]]
    expected = sum(pl.loss_sum for pl in sensors) / sum(pl.n_labelled for pl in sensors)
    assert 0 < expected < 1
    assert _series(m, "streamforest_prequential_error") == {'{profile="sensors"}': pytest.approx(expected)}
    assert _series(m, "streamforest_prequential_accuracy") == {
        '{profile="default"}': pytest.approx(results["web"].accuracy)}


def test_drift_alerts_are_counted_by_profile_and_source():
    settings = load_settings({})
    m = WorkerMetrics()
    enc = OutputEncoder(settings.topics, m, output=settings.output)
    sensors = PipelineConfig(predictor="forgetful_tree", profile="sensors", **FAST)
    step = StreamStep(RecordDecoder(Profiles(CLS, [("sensor-*", sensors)]), Caps()), None, m, 1 << 20)
    task = PartitionTask("g", "in", 0, "in.features")
    X = np.random.default_rng(1).random((5, 2))
    y = [int(v > 0.5) for v in X[:, 0]]
    for stream, pl, sr, lo, res in _run(step, task, _messages("sensor-9", X, y, 0) + _messages("web", X, y, 5)):
        res.alerts = [Alert(row=1, source="adwin", level="drift", position=1),
                      Alert(row=3, source="adwin", level="warning", position=3)]
        enc.encode(task, stream, pl, res, sr, lo, Outbox("test"))
    for profile in ("sensors", "default"):
        for level in ("drift", "warning"):
            assert _value(m, "streamforest_drift_alerts_total", profile=profile, source="adwin", level=level) == 1


def test_label_events_are_not_counted_as_instances():
    """``streamforest_instances_total`` counts instances: a LabelEvent joins one, it is not
    another (the worker and ``evaluate`` read the same count)."""
    from worker.tools.dev.produce import delayed_label_values

    step = StreamStep(RecordDecoder(Profiles(CLS), Caps()), None, WorkerMetrics(), 1 << 20)
    task = PartitionTask("g", "in", 0, "in.features")
    X = np.random.default_rng(2).random((20, 3))
    values, headers = delayed_label_values("s", X, [int(v > 0.5) for v in X[:, 0]], delay=5)
    msgs = [Message(topic="in", partition=0, offset=k, key=b"s", value=v,
                    headers=headers.get(k)) for k, v in enumerate(values)]
    stepped = step.run(task, Released(a=msgs, a_offsets=np.arange(len(msgs))), Outbox("test"))
    assert len(msgs) == 40 and stepped.learned.n_live == 20 and stepped.learned.n_replay == 0
    assert sum(len(labels) for res in stepped.learned.results
               for _p, _s, labels in res[4].scored) == 20


def test_labels_joined_held_and_fallen_out_are_counted_and_refused_ones_are_dead_letters():
    """Of ten unlabelled instances in a store of four, six fall out; of five LabelEvents, two
    join their instances, and the expired, duplicate and unknown ones are dead letters, not
    joins; the gauge shows the two instances still held, then the poll's new ones."""
    settings = load_settings({})
    m = WorkerMetrics()
    enc = OutputEncoder(settings.topics, m, output=settings.output)
    step = StreamStep(RecordDecoder(Profiles(CLS), Caps(held_rows=4)), enc, m, 1 << 20)
    task = PartitionTask("g", "in", 0, "in.features")
    X = np.random.default_rng(4).random((13, 2))
    labels = [(9, 1), (8, 0), (5, 1), (8, 0), (99, 1)]  # joined, joined, expired, twice, unknown
    values = instance_values("s", X[:10], [None] * 10, ts0=1000) + [
        label_value("s", ident, y, 2000 + k) for k, (ident, y) in enumerate(labels)]

    def poll(values, first, headers):
        msgs = [Message(topic="in", partition=0, offset=first + k, key=b"s", value=v,
                        headers=headers(k)) for k, v in enumerate(values)]
        outbox = Outbox("test")
        step.run(task, Released(a=msgs, a_offsets=np.arange(first, first + len(msgs))), outbox)
        gauges.streams(m, {0: task}, Budget(1 << 30))
        return outbox

    outbox = poll(values, 0, lambda k: LABEL_HEADERS if k >= 10 else None)
    assert _value(m, "streamforest_labels_joined_total") == 2
    assert _value(m, "streamforest_held_dropped_total") == 6
    assert _value(m, "streamforest_held_instances") == 2  # instances 6 and 7
    assert outbox.refused_codes() == ["label_expired", "label_duplicate", "label_unknown_id"]
    poll(instance_values("s", X[10:], [None] * 3, start_id=10, ts0=3000), 15, lambda k: None)
    assert _value(m, "streamforest_held_instances") == 4  # 6, 7 and two of the new three
    assert _value(m, "streamforest_held_dropped_total") == 7
    assert _value(m, "streamforest_labels_joined_total") == 2
