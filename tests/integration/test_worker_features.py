"""Streams of features through the worker on a real broker: instances and FeatureArrivals on
two co-partitioned topics, merged by timestamp; the paper's protocol gives the same AUC as in
process; bad inputs are dead-lettered with their reasons; crashes and a rebalance leave the
outputs of an uninterrupted run."""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest
from worker_support import (
    WorkerProc,
    assert_exact,
    new_prefix,
    read_topic,
    scenario,
    settings_from,
    unpack,
    wait_for,
    worker_env,
)

from models.registry import PREDICTOR, RANKER, get
from schemas.deadletter import parse_deadletter_headers
from worker.pipeline import FeatureStreamPipeline
from worker.pipeline.config import stream_seed
from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka

FAST_GROUP = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}
PARAMS = {"n_trees": 10}
#: record timestamps an hour back: recent enough for the topics' retention
T0 = int(time.time() * 1000) - 3_600_000
PROFILE = [{"match": "fs-*", "name": "features", "predictor": "feature_stream",
            "params": {"feature_stream": PARAMS}}]


def _env(bootstrap, prefix, member, **over):
    return worker_env(bootstrap, prefix, member, KAFKA__EXTRA=FAST_GROUP, PROFILES=PROFILE,
                      LEARNERS__FEATURE_STREAM_ROWS="600", **over)


def _scenario(bootstrap, tag, member, *, streams=(), **over):
    """:func:`scenario` with the settings of :func:`_env`."""
    return scenario(bootstrap, tag, member, streams=streams, KAFKA__EXTRA=FAST_GROUP, PROFILES=PROFILE,
                    LEARNERS__FEATURE_STREAM_ROWS="600", **over)


def _producer(bootstrap):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "linger.ms": 5})


def _send(p, topic, stream, value: dict, ts: int, base: int = T0) -> None:
    """One record keyed by its stream, with the record timestamp the merge orders by."""
    p.produce(topic, msgpack.packb(value), stream.encode(), timestamp=base + ts)


def _instance(stream, ident, x, y, ts):
    return {"v": 1, "stream": stream, "id": ident, "ts": ts, "x": x, "y": y}


def _arrival(stream, feature, values: dict, ts):
    return {"v": 1, "stream": stream, "feature": feature, "values": values, "ts": ts}


def _protocol(seed: int = 0):
    """Motl & Kordik's protocol on breast cancer: random feature order, stratified 2/3-1/3."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    X, y = data.data, (data.target == 1).astype(int)
    order = np.random.RandomState(seed).permutation(X.shape[1])
    X_tr, X_te, y_tr, y_te = train_test_split(X[:, order], y, test_size=1 / 3,
                                              random_state=seed, stratify=y)
    names = [str(data.feature_names[j]) for j in order]
    return np.ascontiguousarray(X_tr), np.ascontiguousarray(X_te), y_tr, y_te, names


def _in_process_auc(stream, X_tr, y_tr, X_te, y_te) -> tuple[float, np.ndarray]:
    """The same forest (registry defaults, the stream's seed) trained one feature at a time."""
    from sklearn.metrics import roc_auc_score

    spec = get("feature_stream")
    forest = spec.cls(**spec.kwargs(PARAMS, (PREDICTOR, RANKER), stream_seed(stream, 1)))
    for d in range(1, X_tr.shape[1] + 1):
        forest.learn_many(X_tr[:, :d], [int(v) for v in y_tr])
    proba = forest.predict_proba_many(X_te)[:, forest.classes.index(1)]
    return float(roc_auc_score(y_te, proba)), proba


def test_stream_of_features_through_the_broker(kafka_bootstrap, tmp_path):
    """The paper's protocol through the worker: after the last arrival the test rows' scores
    are the in-process forest's (same AUC); every arrival re-scores the unlabelled rows and
    publishes a ranking; a later instance is predicted on arrival; bad inputs are
    dead-lettered with their reasons and processing goes on."""
    prefix = new_prefix("features")
    env = _env(kafka_bootstrap, prefix, "w1")
    settings = settings_from(env)
    create_topics(settings)
    t = settings.topics
    X_tr, X_te, y_tr, y_te, names = _protocol()
    n_tr, n_te, d = X_tr.shape[0], X_te.shape[0], X_tr.shape[1]
    X = np.vstack((X_tr, X_te))
    s = "fs-cancer"
    p = _producer(kafka_bootstrap)
    for i in range(n_tr + n_te):
        y = int(y_tr[i]) if i < n_tr else None
        _send(p, t.instances, s, _instance(s, i, {}, y, 1_000 + i), 1_000 + i)
    # bad inputs, each before the good arrivals (ts 5_000..) in the merged order
    _send(p, t.instances, "plain", _instance("plain", 0, [0.5], 1, 1_000), 1_000)
    _send(p, t.instances, "plain", _instance("plain", 1, [], 1, 1_001), 1_001)  # empty row
    _send(p, t.features, "plain", _arrival("plain", "f", {"0": 1.0}, 2_000), 2_000)
    _send(p, t.features, "fs-nobody", _arrival("fs-nobody", "f", {"0": 1.0}, 2_000), 2_000)
    for i in range(601):  # one more than the row store takes
        _send(p, t.instances, "fs-full", _instance("fs-full", i, {}, i % 2, 1_000), 1_000)
    for k in range(d):
        values = {str(i): float(X[i, k]) for i in range(n_tr + n_te)}
        if k == 3:
            values.update({"ghost-1": 1.0, "ghost-2": 2.0})  # ids the stream does not hold
        _send(p, t.features, s, _arrival(s, names[k], values, 5_000 + k), 5_000 + k)
        if k == 4:  # the same feature again: refused, no state change
            _send(p, t.features, s, _arrival(s, names[k], values, 5_000 + k), 5_000 + k)
    late = {names[k]: float(X_te[0, k]) for k in range(d)}
    _send(p, t.instances, s, _instance(s, "late", late, None, 9_000), 9_000)
    p.flush(60)

    w = WorkerProc(env, tmp_path, "w1")
    try:
        # one prediction per unlabelled row per arrival, the late instance, the plain stream's
        # one instance (the first arrival compiles the tree kernels when the cache is cold)
        preds = read_topic(kafka_bootstrap, t.predictions, expected=d * n_te + 2,
                           timeout_s=240)
        dead = read_topic(kafka_bootstrap, t.deadletter, timeout_s=60, idle_s=3.0)
        ranks = read_topic(kafka_bootstrap, t.rankings, timeout_s=60, idle_s=3.0)
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    got = [unpack(m) for m in preds if unpack(m)["stream"] == s]
    # one prediction per unlabelled held row per arrival (the first one has a model already:
    # rows are held before the first arrival), and the late instance on arrival
    assert len(got) == d * n_te + 1, (len(got), d * n_te + 1)
    last = {g["id"]: g for g in got if g["n_features"] == d and g["id"] != "late"}
    assert sorted(last) == list(range(n_tr, n_tr + n_te))
    auc, proba = _in_process_auc(s, X_tr, y_tr, X_te, y_te)
    from sklearn.metrics import roc_auc_score

    worker_p = np.array([last[n_tr + r]["proba"][last[n_tr + r]["classes"].index(1)]
                         for r in range(n_te)])
    np.testing.assert_array_equal(worker_p, proba)
    assert roc_auc_score(y_te, worker_p) == auc > 0.95
    late_pred = [g for g in got if g["id"] == "late"]
    assert len(late_pred) == 1 and late_pred[0]["n_features"] == d
    assert late_pred[0]["proba"] == [float(v) for v in
                                     np.array(last[n_tr]["proba"])]  # same row as test row 0
    # a ranking per arrival, over the features known at that point
    fr = [unpack(m) for m in ranks if unpack(m)["method"] == "feature_stream"]
    assert [len(r["features"]) for r in fr] == list(range(1, d + 1))
    assert sorted(fr[-1]["features"]) == sorted(names)
    heads = [parse_deadletter_headers(m.headers()) for m in dead]
    reasons = [(h["code"], m.key().decode()) for h, m in zip(heads, dead)]
    assert ("feature_count", "plain") in reasons
    assert ("no_feature_profile", "plain") in reasons
    assert ("unknown_stream", "fs-nobody") in reasons
    assert ("unknown_ids", s) in reasons
    assert ("duplicate_feature", s) in reasons
    assert reasons.count(("row_store_full", "fs-full")) == 1
    ghost = next(h for h in heads if h["code"] == "unknown_ids")
    assert "'ghost-1'" in ghost["reason"] and ghost["topic"] == t.features


def _interleaved(seed: int, n_rows: int, d: int):
    """A stream of features whose arrivals fall between its instances (by timestamp)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n_rows, d))
    y = (X[:, 0] + X[:, 1] > 1.0).astype(int)
    ys = [int(v) if i % 3 else None for i, v in enumerate(y)]
    every = n_rows // (d + 1)
    arrivals = [(every * (k + 1), k) for k in range(d)]  # (instances before it, feature)
    return X, ys, arrivals


def _feature_reference(cfg, stream, X, ys, arrivals, max_rows=600):
    """The stream's predictions in process, in timestamp order."""
    pl = FeatureStreamPipeline(stream, cfg, [], max_rows=max_rows)
    out, done = [], 0
    names = [f"c{k}" for k in range(X.shape[1])]

    def add(lo, hi):
        res = pl.add([{names[k]: float(X[i, k]) for k in range(pl.n_features)}
                      for i in range(lo, hi)], ys[lo:hi], list(range(lo, hi)),
                     np.arange(lo, hi), list(range(lo, hi)))
        _collect(res, out)

    for before, k in arrivals:
        add(done, before)
        done = before
        res = pl.arrive(names[k], {str(i): float(X[i, k]) for i in range(before)})
        _collect(res, out)
    add(done, X.shape[0])
    return out


def _collect(res, out):
    h = res.predictions
    if h is not None:
        for j, ident in enumerate(h.ids):
            out.append((ident, h.n_features, [float(v) for v in h.proba[j]]))


def _produce_features(bootstrap, settings, base, stream, X, ys, arrivals):
    t = settings.topics
    p = _producer(bootstrap)
    names = [f"c{k}" for k in range(X.shape[1])]
    k_at = dict(arrivals)
    known = 0
    for i in range(X.shape[0]):
        if i in k_at:
            k = k_at[i]
            _send(p, t.features, stream, _arrival(
                stream, names[k], {str(j): float(X[j, k]) for j in range(i)}, 10_000 + 2 * i),
                10_000 + 2 * i, base)
            known = k + 1
        x = {names[k]: float(X[i, k]) for k in range(known)}
        _send(p, t.instances, stream, _instance(stream, i, x, ys[i], 10_001 + 2 * i),
              10_001 + 2 * i, base)
    p.flush(60)


def test_crashes_and_a_rebalance_with_both_topics_are_exact(kafka_bootstrap, tmp_path):
    """kill -9 before a commit, right after one and at an arbitrary moment, then two members
    sharing the partitions: the predictions of a stream of features (held rows re-scored at
    every arrival) and of a plain stream equal an uninterrupted in-process run."""
    from worker.settings import stream_profiles

    sc = _scenario(kafka_bootstrap, "featcrash", "w1", streams=(1, 600, 5),
                   CHECKPOINT__EVERY_INSTANCES="500")
    env, settings, streams = sc.env, sc.settings, sc.streams
    n_plain = sc.produce()
    feats = {}
    # after the plain streams' records (timestamped when produced), one stream after the
    # other: the merge compares the heads of the two topics, so each topic's records should
    # follow the time order
    base = int(time.time() * 1000)
    for k, s in enumerate(("fs-a", "fs-b")):
        feats[s] = _interleaved(k, 550, 6)
        _produce_features(kafka_bootstrap, settings, base + 5_000 * k, s, *feats[s])
    ref = sc.reference()
    profiles = stream_profiles(settings)
    fref = {s: _feature_reference(profiles.for_stream(s), s, *feats[s]) for s in feats}
    n = n_plain + sum(len(r) for r in fref.values())
    topic = settings.topics.predictions

    runs = []
    for fault in ("crash_before_commit=4", "crash_after_commit=3"):  # in the merged part
        runs.append(WorkerProc(env, tmp_path, fault.split("=")[0], fault=fault))
        assert runs[-1].wait(180) == -9, runs[-1].log()[-3000:]
    w = WorkerProc(env, tmp_path, "external")
    runs.append(w)
    wait_for(lambda: any(e.get("msg") == "partition caught up" for e in w.log_events()), 120,
             "restore")
    time.sleep(0.5)
    w.kill()
    members = [WorkerProc(sc.member_env(m), tmp_path, m) for m in ("m1", "m2")]
    try:
        preds = read_topic(kafka_bootstrap, topic, expected=n, timeout_s=300)
    finally:
        rcs = [m.terminate() for m in members]
    assert rcs == [0, 0], [m.log()[-2000:] for m in members]
    plain = [m for m in preds if unpack(m)["stream"] in streams]
    assert_exact(ref, plain, streams)
    for s in feats:
        got = [(d["id"], d["n_features"], d["proba"]) for d in map(unpack, preds)
               if d["stream"] == s]
        assert got == fref[s], f"{s}: {len(got)} predictions vs {len(fref[s])} expected"
    restores = [e for r in runs + members for e in r.log_events()
                if e.get("msg") == "partition restored"]
    # restores replayed both topics from a checkpoint up to the committed offsets
    assert any(e["start"] < e["committed"] for e in restores), restores
    assert any(0 < e["features_start"] < e["features_committed"] for e in restores), restores


def test_features_topic_with_another_partition_count_stops_the_start(kafka_bootstrap, tmp_path,
                                                                      admin):
    """The two input topics are co-partitioned: a features topic with another partition count
    (or none at all) ends the start with exit code 2 and says what to fix."""
    from confluent_kafka.admin import NewTopic

    prefix = new_prefix("copart")
    env = _env(kafka_bootstrap, prefix, "w1")
    settings = settings_from(env)
    create_topics(settings)
    feats = settings.topics.features
    admin.delete_topics([feats], operation_timeout=30)[feats].result()
    wait_for(lambda: feats not in admin.list_topics(timeout=10).topics, 60, "topic deletion")
    w = WorkerProc(env, tmp_path, "no-features")
    assert w.wait(90) == 2, w.log()[-3000:]
    assert f"topic {feats} does not exist" in w.log()
    admin.create_topics([NewTopic(feats, 3, 1)])[feats].result()
    wait_for(lambda: feats in admin.list_topics(timeout=10).topics, 60, "topic creation")
    w = WorkerProc(env, tmp_path, "three-partitions")
    assert w.wait(90) == 2, w.log()[-3000:]
    assert (f"topic {feats} has 3 partitions but {settings.topics.instances} has 2" in w.log()
            and "co-partitioned" in w.log())
