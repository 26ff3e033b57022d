"""``streamforest demo`` end to end on the test broker (small streams)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient
from worker_support import REPO

pytestmark = pytest.mark.kafka


def test_demo_consumes_every_stream_and_stops_its_workers(kafka_bootstrap):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    proc = subprocess.run(
        [sys.executable, "-m", "worker", "demo", "--bootstrap", kafka_bootstrap,
         "--rows", "1500", "--electricity-rows", "1000", "--bike-rows", "800",
         "--timeout", "240"],
        cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "all streams consumed" in out
    # its 8 topics are deleted at the end
    prefix = re.search(r"topics (demo-[0-9a-f]+)\.\*", out).group(1)
    assert f"deleted the topics {prefix}.* and the consumer groups {prefix}-workers, demo-view-" \
        in out
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert [t for t in topics if t.startswith(prefix + ".")] == []
    # and so are the consumer groups of its workers and of its live view
    groups = [g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid]
    assert [g for g in groups if g.startswith((prefix, "demo-view-"))] == []
    final = out.split("final view:")[1]
    assert "1500/1500" in final and "1000/1000" in final and "800/800" in final
    # the live view shows the importance ranking beside the true weights
    assert "hyperplane" in final and "x" in final.split("hyperplane")[1]
    # the regression stream: its error over the three targets and its SymRF ranking
    bikes = next(line for line in final.splitlines() if line.startswith("bikes"))
    assert " mae " in bikes and any(f in bikes for f in ("hr", "temp", "atemp", "hum"))
    # not a terminal: plain lines, the alerts counted per stream in the table and at the end
    assert "\x1b[" not in out
    assert final.splitlines()[1].rstrip().endswith("alerts")
    assert re.search(r"drift alerts: hyperplane \d+, electricity \d+, bikes \d+", final)
    # a forest's collapse is an alert only when a quarter of its 20 trees collapsed at once
    for k in re.findall(r"(\d+) of 20 forgetful tree\(s\) discarded", out):
        assert int(k) >= 5, k
