"""``streamforest evaluate`` on a real broker: a replay publishes exactly the worker's outputs,
its metrics equal an in-process computation, the served mode equals the replay mode for a
topic the worker processed, several configurations in one pass, declared true importances,
refused records counted, and every bad option a clear error with exit code 2. The served mode
scores the labels that came later (LabelEvents) as an in-process pipeline does; a range of
transaction markers only, or of no matching stream, exits 2; ``tail`` reads a published replay
and starts at an offset or a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import msgpack
import numpy as np
import pytest
from worker_support import (
    REPO,
    WorkerProc,
    make_streams,
    new_prefix,
    produce_streams,
    read_topic,
    regression_stream,
    settings_from,
    unpack,
    worker_env,
)

from schemas.deadletter import parse_deadletter_headers
from worker.pipeline import Pipeline
from worker.settings import stream_profiles
from worker.tools.dev.broker import free_port
from worker.tools.evaluate.report import json_safe
from worker.tools.evaluate.scores import StreamMetrics
from worker.tools.evaluate.summary import rows as summary_rows
from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka


def _evaluate(env: dict, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "worker", "evaluate", "--no-progress", *args],
                          cwd=str(REPO), env=full, capture_output=True, text=True,
                          timeout=timeout)


def _report(out) -> dict:
    return json.loads((out / "report.json").read_text())


def _same(a, b) -> bool:
    """Equal up to float rounding (lists and maps compared element by element)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12, abs=1e-12)
    return a == b


def _without_timings(report: dict) -> dict:
    r = json.loads(json.dumps(report))
    r.pop("timings")
    for c in r["configurations"]:
        c.pop("throughput")
    return r


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    """A topic of two classification streams and a regression stream, with a sf-truth header
    on one stream, a few malformed records, and a worker that processed all of it."""
    tmp = tmp_path_factory.mktemp("evaluate")
    prefix = new_prefix("eval")
    env = worker_env(kafka_bootstrap, prefix, "w1", LEARNERS__PREDICTOR="forgetful_tree,isoup_symrf")
    settings = settings_from(env)
    create_topics(settings)
    streams = make_streams(2, 1500, seed=4)
    streams["reg-0"] = regression_stream(1200, seed=4)
    from worker.tools.dev.produce import make_producer

    p = make_producer(kafka_bootstrap)
    t = settings.topics.instances
    # stream-0 declares its true feature weights on its first instance
    truth = {f"x{j}": w for j, w in enumerate([0.5, 0.3, 0.1, 0.05, 0.05])}
    X, y = streams["stream-0"]
    p.produce(t, msgpack.packb({"v": 1, "stream": "stream-0", "id": -1, "ts": 1,
                                "x": X[0].tolist(), "y": y[1]}), b"stream-0",
              headers=[("sf-truth", json.dumps(truth).encode())])
    p.flush(30)
    n = 1 + produce_streams(kafka_bootstrap, settings.topics.instances, streams)
    for bad in (b"\x00not msgpack", msgpack.packb({"v": 1, "stream": "stream-1"})):
        p.produce(t, bad, b"stream-1")
    p.flush(30)
    w = WorkerProc(env, tmp, "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n,
                           timeout_s=240)
    finally:
        assert w.terminate() == 0, w.log()[-3000:]
    assert len(preds) == n
    streams["stream-0"] = (np.vstack((X[:1], X)), [y[1]] + list(y))
    return {"env": env, "settings": settings, "streams": streams, "preds": preds, "tmp": tmp,
            "prefix": prefix, "bootstrap": kafka_bootstrap}


def test_replay_publishes_the_workers_outputs_and_scores_them_as_in_process(served):
    env, settings, tmp = served["env"], served["settings"], served["tmp"]
    out = tmp / "replay"
    pub = served["prefix"] + ".replay"
    r = _evaluate(env, "--out", str(out), "--publish", pub)
    assert r.returncode == 0, r.stderr
    report = _report(out)
    # the backfill equals what the worker published, record for record, per stream
    def by_stream(msgs, fields):
        got: dict = {}
        for m in msgs:
            d = unpack(m)
            got.setdefault(d["stream"], []).append(tuple(json.dumps(d[f]) for f in fields))
        return got

    fields = ("id", "y_pred", "proba", "y_true", "offset")
    assert by_stream(read_topic(served["bootstrap"], pub + ".predictions"), fields) == \
        by_stream(served["preds"], fields)
    for kind, fields in (("drift", ("source", "level", "position")),
                         ("rankings", ("method", "features", "scores", "n_seen"))):
        mine = by_stream(read_topic(served["bootstrap"], f"{pub}.{kind}", idle_s=2), fields)
        theirs = by_stream(read_topic(served["bootstrap"], getattr(settings.topics, kind),
                                      idle_s=2), fields)
        assert mine == theirs, kind
        assert mine or kind == "drift", kind
    # metrics equal StreamMetrics over an in-process run of the same pipelines
    profiles = stream_profiles(settings)
    (cfg,) = report["configurations"]
    for s, (Xs, ys) in served["streams"].items():
        pl = Pipeline(s, profiles.for_stream(s), Xs.shape[1])
        res = pl.process(np.ascontiguousarray(Xs), list(ys))
        y_pred = [v for b in res.blocks for v in b.y_pred]
        lab = [i for i, v in enumerate(ys) if v is not None]
        m = StreamMetrics(pl.task.name, 1000, 500, getattr(pl.task, "n_targets", None))
        m.update([ys[i] for i in lab], [y_pred[i] for i in lab], lab)
        assert _same(cfg["streams"][s]["cumulative"], json_safe(m.cumulative())), s
        assert _same(cfg["streams"][s]["window"], json_safe(m.windowed())), s
        assert cfg["streams"][s]["instances"] == len(ys)
    # refused records counted by reason; the declared truth compared with each ranking
    assert sum(report["records"]["malformed"].values()) == 2
    corr = cfg["streams"]["stream-0"]["truth_correlation"]
    assert corr and all(len(v) >= 1 for v in corr.values())
    # a second run gives the same report apart from timings
    again = tmp / "again"
    assert _evaluate(env, "--out", str(again)).returncode == 0
    assert _without_timings(_report(again)) == _without_timings(
        {**report, "published": None})
    html = (out / "report.html").read_text()
    assert "stream-0" in html and "http://" not in html and "https://" not in html


def test_served_mode_equals_the_replay(served):
    env, tmp = served["env"], served["tmp"]
    r1 = _evaluate(env, "--out", str(tmp / "r"))
    r2 = _evaluate(env, "--served", "--out", str(tmp / "s"))
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    replay, srv = _report(tmp / "r"), _report(tmp / "s")
    assert srv["mode"] == "served"
    models = {c["name"]: c for c in srv["configurations"]}
    assert set(models) == {"forgetful_tree", "isoup_symrf"}
    for s, st in replay["configurations"][0]["streams"].items():
        got = models[st["model"]]["streams"][s]
        assert _same(got["cumulative"], st["cumulative"]), s
        assert got["labelled"] == st["labelled"]


def test_several_configurations_in_one_pass(served):
    env, tmp = served["env"], served["tmp"]
    cfg = tmp / "candidates.toml"
    cfg.write_text('[[configuration]]\nname = "tree"\npredictor = "forgetful_tree"\n'
                   'rankers = []\n\n[[configuration]]\nname = "hoeffding"\n'
                   'predictor = "hoeffding_tree"\nrankers = []\n')
    r = _evaluate(env, "--configs", str(cfg), "--streams", "stream-*", "--out", str(tmp / "c"))
    assert r.returncode == 0, r.stderr
    report = _report(tmp / "c")
    names = [c["name"] for c in report["configurations"]]
    assert names == ["tree", "hoeffding"]
    for c in report["configurations"]:
        assert set(c["streams"]) == {"stream-0", "stream-1"}
        assert c["throughput"]["per_second"] > 0 and c["memory"]["state_bytes"] > 0
        for st in c["streams"].values():
            assert 0.5 < st["cumulative"]["accuracy"] <= 1.0
    accs = [c["streams"]["stream-1"]["cumulative"]["accuracy"] for c in report["configurations"]]
    assert accs[0] != accs[1]  # two learners, two results
    assert "tree" in r.stdout and "hoeffding" in r.stdout


@pytest.mark.parametrize("args,message", [
    (("--topic", "no-such-topic"), "does not exist"),
    (("--start", "latest"), "no record"),
    (("--start", "100", "--end", "50"), "before the start"),
    (("--start", "yesterday"), "is not a bound"),
    (("--window", "0"), "at least 1"),
    (("--served", "--publish", "x"), "neither"),
])
def test_bad_options_exit_2_with_the_reason(served, args, message):
    r = _evaluate(served["env"], "--out", str(served["tmp"] / "bad"), *args)
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr)


def test_bad_configuration_files_exit_2(served):
    tmp = served["tmp"]
    bad = tmp / "bad.json"
    bad.write_text(json.dumps({"configuration": [{"name": "x", "predictor": "forgetful_tre"}]}))
    r = _evaluate(served["env"], "--configs", str(bad), "--out", str(tmp / "bad"))
    assert r.returncode == 2 and "forgetful_tre" in r.stderr, r.stderr
    two = tmp / "two.json"
    two.write_text(json.dumps([{"name": "a"}, {"name": "b"}]))
    r = _evaluate(served["env"], "--configs", str(two), "--publish", "p", "--out", str(tmp / "b"))
    assert r.returncode == 2 and "one configuration" in r.stderr, r.stderr


def _late(X, ys, delay: int):
    """A stream's rows with each label ``delay`` instances late, as ``--label-delay`` replays
    it: ``(rows, labels, ids, event times, which rows are LabelEvents)``; labels due after the
    last instance are left out."""
    n = len(ys)
    rows, out_y, ids, ts, is_label = [], [], [], [], []
    due: dict[int, list] = {}
    for k in range(n):
        rows.append(X[k]), out_y.append(None), ids.append(k), ts.append(k), is_label.append(False)
        if ys[k] is not None:
            due.setdefault(k + delay, []).append(k)
        for j in due.pop(k, []):
            rows.append(np.zeros(X.shape[1])), out_y.append(ys[j]), ids.append(j)
            ts.append(k), is_label.append(True)
    return np.array(rows), out_y, ids, ts, np.array(is_label)


def test_labels_replayed_later_are_scored_against_the_prediction_served(served):
    env, tmp = served["env"], served["tmp"]
    cfg = tmp / "hoeffding.toml"
    cfg.write_text('[[configuration]]\nname = "hoeffding"\npredictor = "hoeffding_tree"\n')
    r = _evaluate(env, "--configs", str(cfg), "--streams", "stream-1", "--label-delay", "0,100",
                  "--out", str(tmp / "late"))
    assert r.returncode == 0, r.stderr
    report = _report(tmp / "late")
    assert [(c["name"], c["label_delay"]) for c in report["configurations"]] == [
        ("hoeffding, labels 0 late", "0"), ("hoeffding, labels 100 late", "100")]
    now = _evaluate(env, "--configs", str(cfg), "--streams", "stream-1", "--out", str(tmp / "now"))
    assert now.returncode == 0, now.stderr
    plain = _report(tmp / "now")["configurations"][0]["streams"]["stream-1"]
    at_once, late = (c["streams"]["stream-1"] for c in report["configurations"])
    # a label right after its instance: the scores of labelled instances
    assert _same(at_once["cumulative"], plain["cumulative"])
    assert at_once["instances"] == plain["instances"] == late["instances"]
    # 100 instances late: each label scored against what was served for its instance, as an
    # in-process pipeline fed the same LabelEvents scores it
    X, ys = served["streams"]["stream-1"]
    profile = stream_profiles(served["settings"]).for_stream("stream-1")
    pl = Pipeline("stream-1", type(profile)(**{**profile.as_dict(), "predictor": ("hoeffding_tree",)}),
                  X.shape[1])
    rows, out_y, ids, ts, is_label = _late(X, ys, 100)
    res = pl.process(rows, out_y, ids=ids, ts=ts, labels=is_label)
    m = StreamMetrics(pl.task.name, 1000, 500, None)
    m.update([v for _p, _yp, yt in res.scored for v in yt],
             [v for _p, yp, _yt in res.scored for v in yp],
             np.concatenate([p for p, _yp, _yt in res.scored]).tolist())
    assert _same(late["cumulative"], json_safe(m.cumulative()))
    assert late["labelled"] == pl.n_labelled == plain["labelled"] - sum(
        v is not None for v in ys[-100:])
    assert late["cumulative"]["accuracy"] < at_once["cumulative"]["accuracy"]


# -- labels that came later, read off the topics ------------------------------------------------

LATE_ROWS, LATE_DELAY, LATE_HELD, LATE_INLINE = 600, 30, 40, 200


def _late_records(streams: dict) -> dict:
    """Per stream its records in order, ``(value, headers)``: stream-0's labels all
    ``LATE_DELAY`` instances late, stream-1's first ``LATE_INLINE`` instances labelled and the
    other labels late; rows without a label (every 11th) are never labelled. Then labels the
    worker refuses: an id of the wrong type ("250" for 250), a second label, the label of an
    instance that fell out of the held store (a row never labelled), targets for a class."""
    from worker.tools.dev.produce import delayed_label_values, instance_values, label_value

    out = {}
    for s, (X, y) in streams.items():
        a = LATE_INLINE if s == "stream-1" else 0
        recs = [(v, None) for v in instance_values(s, X[:a], y[:a], ts0=1_000_000)]
        values, headers = delayed_label_values(s, X[a:], y[a:], LATE_DELAY, start_id=a,
                                               ts0=1_000_000 + a)
        recs += [(v, headers.get(k)) for k, v in enumerate(values)]
        out[s] = recs
    label = [("sf-kind", b"label")]
    out["stream-1"] += [(label_value("stream-1", "250", 1, 2_000_000), label),
                        (label_value("stream-1", 300, [1.0, 2.0], 2_000_000), label)]
    out["stream-0"] += [(label_value("stream-0", LATE_ROWS - 1, 1, 2_000_000), label),
                        (label_value("stream-0", 212, 1, 2_000_000), label)]
    return out


def _in_process_late(settings, records: dict, streams: dict) -> dict:
    """Per stream, what an uninterrupted pipeline scores of the same records: its metrics,
    labelled rows and refused labels by code (the targets for a class are refused before the
    pipeline, by the worker's intake)."""
    profiles = stream_profiles(settings)
    out = {}
    for s, recs in records.items():
        d = streams[s][0].shape[1]
        rows, ys, ids, ts, labels = [], [], [], [], []
        for value, headers in recs:
            m = msgpack.unpackb(value)
            if headers and isinstance(m["y"], list):
                continue
            rows.append(np.zeros(d) if headers else np.asarray(m["x"]))
            ys.append(m.get("y")), ids.append(m["id"]), ts.append(m["ts"])
            labels.append(bool(headers))
        pl = Pipeline(s, profiles.for_stream(s), d, held_rows=LATE_HELD)
        res = pl.process(np.array(rows), ys, ids=ids, ts=ts, labels=np.array(labels))
        m = StreamMetrics(pl.task.name, 1000, 500, None)
        m.update([v for _p, _yp, yt in res.scored for v in yt],
                 [v for _p, yp, _yt in res.scored for v in yp],
                 np.concatenate([p for p, _yp, _yt in res.scored]).tolist())
        codes = [exc.code for _offs, exc in res.rejected]
        out[s] = {"metrics": m, "labelled": pl.n_labelled, "instances": pl.n_instances,
                  "refused": codes, "joined": res.labels_joined, "dropped": res.held_dropped,
                  "held": pl.n_held}
    return out


@pytest.fixture(scope="module")
def late(kafka_bootstrap, tmp_path_factory):
    """A worker ran two streams whose labels came later (a small held store), and labels it
    refused."""
    from worker.tools.dev.produce import make_producer

    tmp = tmp_path_factory.mktemp("late")
    prefix = new_prefix("late")
    port = free_port()
    env = worker_env(kafka_bootstrap, prefix, "w1", LEARNERS__HELD_ROWS=str(LATE_HELD),
                     WORKER__METRICS_PORT=str(port))
    settings = settings_from(env)
    create_topics(settings)
    streams = make_streams(2, LATE_ROWS, seed=7)
    records = _late_records(streams)
    reference = _in_process_late(settings, records, streams)
    p = make_producer(kafka_bootstrap)
    # streams interleaved; one partition each, whatever their keys' hashes (their predictions
    # go by key: the predictions of both may share a partition)
    for a in range(0, max(map(len, records.values())), 40):
        for k, (s, recs) in enumerate(sorted(records.items())):
            for value, headers in recs[a:a + 40]:
                p.produce(settings.topics.instances, value, s.encode(), partition=k,
                          headers=headers)
    assert p.flush(60) == 0
    n = 2 * LATE_ROWS
    w = WorkerProc(env, tmp, "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n,
                           timeout_s=240)
        dead = read_topic(kafka_bootstrap, settings.topics.deadletter, expected=4,
                          timeout_s=60, idle_s=1)
        # the held gauge is read once a second: wait for the reference's value
        held = sum(r["held"] for r in reference.values())
        metrics = _late_metrics(port)
        for _ in range(40):
            if metrics.get("streamforest_held_instances") == held:
                break
            time.sleep(0.5)
            metrics = _late_metrics(port)
    finally:
        assert w.terminate() == 0, w.log()[-3000:]
    assert len(preds) == n
    return {"env": env, "settings": settings, "tmp": tmp, "prefix": prefix, "preds": preds,
            "refused": sorted(parse_deadletter_headers(m.headers())["code"] for m in dead),
            "inline": sum(v is not None for v in streams["stream-1"][1][:LATE_INLINE]),
            "reference": reference, "metrics": metrics}


def _late_metrics(port: int) -> dict[str, float]:
    """The worker's late-label series, scraped from ``/metrics``."""
    names = ("streamforest_labels_joined_total", "streamforest_held_dropped_total",
             "streamforest_held_instances")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        lines = r.read().decode().splitlines()
    return {name: float(value) for name, _sp, value in (ln.partition(" ") for ln in lines)
            if name in names}


def test_the_late_labels_metrics_count_what_an_uninterrupted_pipeline_joined_and_holds(late):
    """Labels joined, instances fallen out of the held store and instances held at the end,
    as the worker exports them, are the in-process pipelines' (the refused labels are dead
    letters, not joins)."""
    ref = late["reference"].values()
    assert late["metrics"] == {
        "streamforest_labels_joined_total": sum(r["joined"] for r in ref),
        "streamforest_held_dropped_total": sum(r["dropped"] for r in ref),
        "streamforest_held_instances": sum(r["held"] for r in ref)}
    assert all(r["joined"] > 0 and r["dropped"] > 0 for r in ref)


def test_served_scores_labels_that_came_later_as_in_process(late):
    env, tmp = late["env"], late["tmp"]
    r = _evaluate(env, "--served", "--out", str(tmp / "served"))
    assert r.returncode == 0, r.stderr
    report = _report(tmp / "served")
    (cfg,) = report["configurations"]
    refused: dict = {}
    for s, ref in late["reference"].items():
        st = cfg["streams"][s]
        # every label joined as the worker joined it, scored against the prediction served
        assert _same(st["cumulative"], json_safe(ref["metrics"].cumulative())), s
        assert st["cumulative"]["accuracy"] == ref["metrics"].cumulative()["accuracy"]
        assert _same(st["window"], json_safe(ref["metrics"].windowed())), s
        assert _same(st["history"], json_safe(ref["metrics"].history())), s
        assert st["instances"] == ref["instances"] == LATE_ROWS
        assert st["labelled"] == ref["labelled"]
        inline = late["inline"] if s == "stream-1" else 0
        assert st["labelled_later"] == ref["labelled"] - inline > 0
        assert st["unlabelled"] == LATE_ROWS - ref["labelled"] > 0
        assert st["alerts"] is None  # the drift topic is not read
        for code in ref["refused"]:
            refused[code] = refused.get(code, 0) + 1
    refused["invalid_target"] = 1
    labels = report["late_labels"]
    # the labels the worker dead-lettered, refused for the same reasons
    assert labels["refused"] == refused == dict(Counter(late["refused"]))
    assert set(refused) == {"label_unknown_id", "label_duplicate", "label_expired",
                            "invalid_target"}
    assert labels["joined"] == sum(cfg["streams"][s]["labelled_later"] for s in cfg["streams"])
    assert labels["held_rows"] == LATE_HELD
    never = sum(st["unlabelled"] for st in cfg["streams"].values())
    assert f"never labelled: {never:,} predictions not scored" in r.stdout
    assert {row["alerts"] for row in summary_rows(report)} == {"-"}  # alerts: not read


def test_an_empty_range_or_no_matching_stream_exits_2(late):
    env, tmp = late["env"], late["tmp"]
    last = max(m.offset() for m in late["preds"])
    # past the last prediction only the marker of its transaction's commit (in the partition
    # that holds it; the other partitions end before): no record
    r = _evaluate(env, "--served", "--start", str(last + 1), "--out", str(tmp / "empty"))
    assert r.returncode == 2 and "transaction markers" in r.stderr, (r.returncode, r.stderr)
    assert not (tmp / "empty" / "report.json").exists()
    for mode in (("--served",), ()):
        r = _evaluate(env, *mode, "--streams", "zzz*", "--out", str(tmp / "none"))
        assert r.returncode == 2 and "matching --streams 'zzz*'" in r.stderr, r.stderr


def _tail(env: dict, *args: str) -> list[dict]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    full.update(env)
    r = subprocess.run([sys.executable, "-m", "worker", "tail", *args], cwd=str(REPO),
                       env=full, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_tail_reads_a_published_replay_and_starts_at_an_offset_or_a_time(late):
    env, tmp, preds = late["env"], late["tmp"], late["preds"]
    pub = late["prefix"] + ".bf"
    r = _evaluate(env, "--publish", pub, "--out", str(tmp / "bf"))
    assert r.returncode == 0, r.stderr
    # the replay scores the labels that came later as the served mode does
    served = _evaluate(env, "--served", "--out", str(tmp / "served-again"))
    assert served.returncode == 0, served.stderr
    srv = _report(tmp / "served-again")["configurations"][0]["streams"]
    for s, st in _report(tmp / "bf")["configurations"][0]["streams"].items():
        assert _same(st["cumulative"], srv[s]["cumulative"]), s
    got = _tail(env, pub + ".predictions")
    assert len(got) == len(preds) and {g["key"] for g in got} == {"stream-0", "stream-1"}
    assert all("error" not in g and g["value"]["stream"] == g["key"] for g in got)
    # from an offset, and from a time: the first record at or after it
    # from an offset (in every partition), and from a time: each partition's first record
    # at or after it
    mid = sorted(m.offset() for m in preds)[len(preds) // 2]
    from_offset = _tail(env, "predictions", "--start", str(mid))
    assert sorted((g["partition"], g["offset"]) for g in from_offset) == sorted(
        (m.partition(), m.offset()) for m in preds if m.offset() >= mid)
    stamps = sorted(m.timestamp()[1] for m in preds)
    t = stamps[len(stamps) // 2]
    from_time = _tail(env, "predictions", "--start", f"@{t}")
    assert from_time and all(g["timestamp"] >= t for g in from_time)
    assert len(from_time) == sum(ts >= t for ts in stamps)
    recent = _tail(env, "predictions", "--start", "now-1h")
    assert len(recent) == len(preds)


def test_tail_refuses_a_start_it_cannot_read(late):
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    full.update(late["env"])
    r = subprocess.run([sys.executable, "-m", "worker", "tail", "predictions", "--start",
                        "yesterday"], cwd=str(REPO), env=full, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "is not a bound" in r.stderr and r.stdout == "", r.stderr
