"""kill -9 of the broker mid-stream, then the broker again on the same data directory: the
member rides it out (no crash loop) and every output is still exactly once and identical to an
uninterrupted run."""

from __future__ import annotations

import os
import signal
import time

import pytest
from worker_support import (
    WorkerProc,
    assert_exact,
    assert_same_alerts_and_rankings,
    count_committed,
    read_topic,
    scenario,
    wait_for,
)

pytestmark = pytest.mark.kafka


@pytest.fixture
def own_broker(tmp_path, kafka_bootstrap):
    """A broker of this test alone (the session's one is left alone), stopped at the end.

    Asks for ``kafka_bootstrap`` only so that the session broker's jars are fetched first.
    """
    from worker.tools.dev.broker import DEFAULT_JVM_OPTS, QUICK_JVM_OPTS, LocalBroker, free_port

    port = free_port()
    broker = LocalBroker(port=port, controller_port=free_port(exclude=[port]),
                         data_dir=tmp_path / "kafka", jvm_opts=DEFAULT_JVM_OPTS + QUICK_JVM_OPTS,
                         detach=False)
    broker.start(timeout=240)
    yield broker
    broker.stop()


def test_a_broker_killed_and_restarted_mid_stream_keeps_outputs_exact(own_broker, tmp_path):
    bootstrap = own_broker.bootstrap
    sc = scenario(bootstrap, "bkill", streams=(3, 4000, 12), CHECKPOINT__EVERY_INSTANCES="500",
                  WORKER__STARTUP_TIMEOUT_S="120", WORKER__SHUTDOWN_TIMEOUT_S="5",
                  KAFKA__EXTRA={"session.timeout.ms": "45000", "heartbeat.interval.ms": "3000"})
    env, settings, streams = sc.env, sc.settings, sc.streams
    n_first = sc.produce(stop=2000)
    topic = settings.topics.predictions
    w = WorkerProc(env, tmp_path, "w1")
    try:
        wait_for(lambda: count_committed(bootstrap, topic) >= n_first // 3, 120, "progress")
        os.kill(own_broker.pid(), signal.SIGKILL)  # mid-stream, transactions open
        time.sleep(5.0)
        assert w.alive(), w.log()[-3000:]
        own_broker.start(timeout=240)
        n = n_first + sc.produce(start=2000)
        preds = read_topic(bootstrap, topic, expected=n, timeout_s=300)
        assert w.alive(), "the member died with the broker:\n" + w.log()[-3000:]
    finally:
        rc = w.terminate(timeout=90)
    assert rc == 0, w.log()[-3000:]
    ref = sc.reference()
    assert len(preds) == n
    assert_exact(ref, preds, streams)
    assert_same_alerts_and_rankings(ref, bootstrap, settings, streams)
