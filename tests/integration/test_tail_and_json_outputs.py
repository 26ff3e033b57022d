"""JSON outputs and ``streamforest tail`` on a real broker.

A worker writes predictions as JSON (with their ``content-type`` header), drift alerts as
JSON by default, and rankings as msgpack (no header, as configured); every record it wrote,
and the dead letter's headers, validate against the published JSON Schemas
(``docs/schemas/``). ``tail`` then prints every record of a topic as one JSON object per
line: predictions with the contract's fields, a malformed input's dead letter with its reason,
only the streams ``--stream`` matches, and exits 2 for a topic that is not the product's.
Ctrl-C and a closed pipe end it with exit code 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import msgpack
import pytest
from jsonschema import Draft202012Validator
from worker_support import (
    REPO,
    WorkerProc,
    make_streams,
    new_prefix,
    produce_streams,
    read_topic,
    settings_from,
    worker_env,
)

from schemas import DriftAlert, Prediction, Ranking
from schemas.codec import decode
from worker.tools.dev.produce import make_producer
from worker.tools.topics import create_topics

pytestmark = pytest.mark.kafka

N_ROWS = 300  # per stream; two streams
LAYOUT = ["topic", "partition", "offset", "timestamp", "key", "format", "value"]


def _tail_command() -> list[str]:
    """``python -m worker tail`` once the CLI registers it, else the module on its own."""
    from worker import cli

    if "worker.tools.tail" in cli._COMMAND_MODULES:
        return [sys.executable, "-m", "worker", "tail"]
    return [sys.executable, "-m", "worker.tools.tail"]


def _env(env: dict[str, str]) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    full.update(env)
    return full


def tail(env: dict[str, str], *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([*_tail_command(), *args], cwd=str(REPO), env=_env(env),
                          capture_output=True, text=True, timeout=timeout)


def lines(proc: subprocess.CompletedProcess) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module")
def ran(kafka_bootstrap, tmp_path_factory):
    """A worker ran two streams and one malformed instance to completion, then stopped."""
    prefix = new_prefix("tail")
    env = worker_env(kafka_bootstrap, prefix, "w1", OUTPUT__PREDICTIONS="json",
                     OUTPUT__RANKINGS="msgpack", LEARNERS__RANKERS="online_random_forest",
                     LEARNERS__RANKING_EVERY="100")
    settings = settings_from(env)
    create_topics(settings)
    streams = make_streams(2, N_ROWS, seed=3)
    n = produce_streams(kafka_bootstrap, settings.topics.instances, streams)
    p = make_producer(kafka_bootstrap)
    p.produce(settings.topics.instances, b"\xc1 not an instance", b"stream-0")
    p.flush(30)
    w = WorkerProc(env, tmp_path_factory.mktemp("tail"), "w1")
    try:
        preds = read_topic(kafka_bootstrap, settings.topics.predictions, expected=n,
                           timeout_s=90, idle_s=1.0)
        dead = read_topic(kafka_bootstrap, settings.topics.deadletter, expected=1,
                          timeout_s=30, idle_s=0.5)
        assert w.alive(), w.log()[-3000:]
    finally:
        rc = w.terminate()
    assert rc == 0, w.log()[-3000:]
    assert len(preds) == n and len(dead) == 1
    return env, settings, streams, preds


def test_json_predictions_carry_their_content_type_and_msgpack_rankings_none(ran):
    env, settings, _streams, preds = ran
    for m in preds:
        assert m.headers() == [("content-type", b"application/json")]
        assert m.value().startswith(b"{")
        decode(m.value(), Prediction, m.headers())
    ranks = read_topic(env["STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS"], settings.topics.rankings,
                       timeout_s=30, idle_s=1.0)
    assert ranks
    for m in ranks:
        assert m.headers() is None and m.value()[0] >= 0x80  # a msgpack map, as before
        decode(m.value(), Ranking)


def _schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((REPO / "docs" / "schemas" / f"{name}.schema.json").read_text()))


def test_every_record_the_worker_wrote_validates_against_the_published_schemas(ran):
    env, settings, _streams, preds = ran
    bootstrap = env["STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS"]
    prediction = _schema("prediction")
    for m in preds:
        prediction.validate(json.loads(m.value()))
    drift = read_topic(bootstrap, settings.topics.drift, timeout_s=30, idle_s=1.0)
    for m in drift:  # JSON by default
        assert m.headers() == [("content-type", b"application/json")]
        _schema("drift-alert").validate(json.loads(m.value()))
    ranks = read_topic(bootstrap, settings.topics.rankings, timeout_s=30, idle_s=1.0)
    assert ranks
    for m in ranks:  # msgpack here: the schema describes the map whatever its format
        _schema("ranking").validate(msgpack.unpackb(m.value()))
    [dead] = read_topic(bootstrap, settings.topics.deadletter, expected=1, timeout_s=30, idle_s=0.5)
    _schema("dead-letter-headers").validate({k: v.decode() for k, v in dead.headers()})


def test_tail_prints_one_json_object_per_prediction(ran):
    env, settings, streams, _preds = ran
    got = lines(tail(env, "predictions"))
    assert len(got) == N_ROWS * len(streams)
    by_stream: dict[str, list] = {}
    for rec in got:
        assert list(rec)[:len(LAYOUT)] == LAYOUT and "error" not in rec
        assert rec["topic"] == settings.topics.predictions and rec["format"] == "json"
        pred = Prediction.model_validate(rec["value"])
        assert rec["key"] == pred.stream and pred.topic == settings.topics.instances
        by_stream.setdefault(pred.stream, []).append(pred)
    for s, (_X, y) in streams.items():
        assert [p.id for p in by_stream[s]] == list(range(N_ROWS))
        assert [p.y_true for p in by_stream[s]] == y
    # the configured name reads the same records
    assert len(lines(tail(env, settings.topics.predictions, "--max", "7"))) == 7


def test_tail_filters_streams_by_glob(ran):
    env, _settings, _streams, _preds = ran
    got = lines(tail(env, "predictions", "--stream", "*-1"))
    assert len(got) == N_ROWS and {r["key"] for r in got} == {"stream-1"}
    ranks = lines(tail(env, "rankings", "--stream", "stream-1"))
    assert ranks and {r["key"] for r in ranks} == {"stream-1"}
    for r in ranks:
        assert r["format"] == "msgpack" and Ranking.model_validate(r["value"]).stream == "stream-1"
    for r in lines(tail(env, "drift")):
        DriftAlert.model_validate(r["value"])
    assert lines(tail(env, "predictions", "--stream", "nothing-*")) == []


def test_tail_shows_a_dead_letter_with_its_reason(ran):
    env, settings, _streams, _preds = ran
    [rec] = lines(tail(env, "deadletter"))
    assert rec["key"] == "stream-0" and rec["value"] is None
    assert rec["value_base64"] == "wSBub3QgYW4gaW5zdGFuY2U="  # the refused bytes, as they came
    dl = rec["deadletter"]
    assert dl["code"] == "not_decodable" and "msgpack" in dl["reason"]
    assert (dl["topic"], dl["error_class"]) == (settings.topics.instances, "DecodeError")


def test_tail_summarises_checkpoints_without_their_state(ran):
    env, _settings, _streams, _preds = ran
    got = lines(tail(env, "checkpoints"))
    kinds = {r["checkpoint"]["kind"] for r in got}
    assert kinds == {"chunk", "manifest"}
    for r in got:
        assert r["value"] is None and "state" not in r["checkpoint"]


def test_tail_refuses_a_topic_that_is_not_the_products(ran):
    env, _settings, _streams, _preds = ran
    proc = tail(env, "sf.nonsense")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unknown topic 'sf.nonsense'" in proc.stderr and "Traceback" not in proc.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_and_a_closed_pipe_end_tail_quietly(ran):
    env, _settings, streams, _preds = ran
    # --follow waits for more once every record is out; Ctrl-C ends it
    # Ctrl-C's default action, whatever the runner's: a job a script puts in the background
    # starts with SIGINT ignored, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen([*_tail_command(), "predictions", "--follow"], cwd=str(REPO),
                            env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint)
    try:
        for _ in range(N_ROWS * len(streams)):
            assert proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    # `| head -n 1`: the pipe closes long before 600 lines are written
    cmd = " ".join(_tail_command()) + " predictions | head -n 1; exit ${PIPESTATUS[0]}"
    piped = subprocess.run(["bash", "-c", cmd], cwd=str(REPO), env=_env(env),
                           capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and piped.stderr == ""
    assert json.loads(piped.stdout)["format"] == "json"
