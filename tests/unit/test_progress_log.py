"""The worker's periodic throughput log line: its setting and its fields, from counters and a
clock (no Kafka, no worker)."""

from __future__ import annotations

import io
import json
import logging

import pytest
from pydantic import ValidationError

from worker.logs import JsonFormatter, event
from worker.metrics import WorkerMetrics
from worker.progress_log import ThroughputLog, counter_total
from worker.settings import WorkerSettings


def test_setting_defaults_to_a_minute_and_zero_turns_it_off():
    assert WorkerSettings().progress_log_s == 60.0
    assert WorkerSettings(progress_log_s=0).progress_log_s == 0.0
    off = ThroughputLog(0.0, now=0.0)
    assert not off.due(1e9)


@pytest.mark.parametrize("bad", [-1, float("inf"), float("nan"), 86_401, "soon"])
def test_setting_refuses_negative_infinite_or_huge_values(bad):
    with pytest.raises(ValidationError, match="progress_log_s"):
        WorkerSettings(progress_log_s=bad)


def test_fields_over_each_interval():
    t = ThroughputLog(60.0, now=1000.0)
    assert not t.due(1059.9)
    assert t.due(1060.0)
    assert t.fields(1060.0, instances=12_000, streams=7, dead_letters=2) == {
        "instances": 12_000, "instances_per_s": 200.0, "interval_s": 60.0,
        "instances_total": 12_000, "streams": 7, "dead_letters": 2, "dead_letters_total": 2}
    assert not t.due(1100.0)  # the next interval starts at the line
    assert t.fields(1130.0, instances=15_500, streams=9, dead_letters=2) == {
        "instances": 3_500, "instances_per_s": 50.0, "interval_s": 70.0,
        "instances_total": 15_500, "streams": 9, "dead_letters": 0, "dead_letters_total": 2}


def test_reset_restarts_the_interval_keeping_the_totals():
    t = ThroughputLog(10.0, now=0.0)
    t.fields(10.0, instances=100, streams=1, dead_letters=0)
    t.reset(50.0)  # e.g. the worker's start after a slow preflight
    assert not t.due(55.0)
    assert t.fields(60.0, instances=300, streams=1, dead_letters=0)["instances_per_s"] == 20.0


def test_totals_read_from_the_worker_metrics_over_all_labels():
    m = WorkerMetrics()
    m.instances_in.inc(40)
    m.deadletters.labels(reason="decode").inc(2)
    m.deadletters.labels(reason="too_large").inc()
    assert counter_total(m.instances_in) == 40
    assert counter_total(m.deadletters) == 3


def test_the_line_is_one_json_object_at_info():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("streamforest.test_progress_log")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        t = ThroughputLog(60.0, now=0.0)
        event(logger, logging.INFO, "progress", **t.fields(60.0, 600, 3, 1))
    finally:
        logger.removeHandler(handler)
    line = json.loads(out.getvalue())
    assert line["level"] == "info" and line["msg"] == "progress"
    assert line["instances"] == 600 and line["instances_per_s"] == 10.0
    assert line["streams"] == 3 and line["dead_letters"] == 1
