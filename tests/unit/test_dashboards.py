"""The Grafana dashboard and the Prometheus alert rules use only metrics the worker exports.

Every expression (dashboard targets and template variables, rule expressions) is parsed as PromQL
(promql-parser); each ``streamforest_*`` series it selects must be one that
:class:`worker.metrics.WorkerMetrics` exports, read from its registry, and each label it matches on or
aggregates by must be one of that metric's labels (or one Prometheus adds). Renaming a metric in the
worker without updating the dashboard or the rules fails here. The registry also holds prometheus_client's
process, platform and garbage-collector collectors: their series (``process_*``, ``python_*``) are checked
the same way, and every panel names at least one series the worker exports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import promql_parser
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from worker.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "streamforest.json"
RULES = ROOT / "deploy" / "prometheus" / "alerts.yaml"
PREFIX = "streamforest_"
# the standard collectors' series (ProcessCollector, PlatformCollector, GCCollector)
STANDARD_PREFIXES = ("process_", "python_")
# labels Prometheus attaches at scrape time (target labels of a pod scrape included); `le` is the bucket
# label of histograms
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "service", "endpoint"}
# what the dashboard and the rules promise to show and watch (issue 17): at least these series
DASHBOARD_MUST_SHOW = {
    "streamforest_instances_total",                   # throughput
    "streamforest_partition_lag",                     # lag per partition
    "streamforest_batch_seconds_bucket",              # batch latency
    "streamforest_checkpoint_age_seconds",            # checkpoint age
    "streamforest_checkpoint_bytes",                  # checkpoint size
    "streamforest_restore_seconds_count",             # restores
    "streamforest_restore_failures_total",
    "streamforest_dead_letters_total",                # dead letters by reason
    "streamforest_drift_alerts_total",                # drift alerts
    "streamforest_streams",                           # streams resident
    "streamforest_streams_passivated",                # passivation (state budget)
    "streamforest_state_bytes",
    "streamforest_passivations_total",
    "streamforest_streams_restored_total",
    "streamforest_prequential_accuracy",              # the models' quality per profile (issue 39)
    "streamforest_prequential_error",
    "streamforest_prequential_loss_total",
    "streamforest_scored_instances_total",
    "streamforest_labels_joined_total",               # late labels (issue 38)
    "streamforest_held_dropped_total",
    "streamforest_held_instances",
    "streamforest_build_info",                        # versions running
    "process_cpu_seconds_total",                      # the process
    "process_resident_memory_bytes",
    "python_gc_collections_total",
}
RULES_MUST_WATCH = {
    "streamforest_partition_lag",                     # lag growing
    "streamforest_checkpoint_age_seconds",            # checkpoint age
    "streamforest_dead_letters_total",                # dead-letter rate
    "streamforest_restore_failures_total",            # restore failures
    "streamforest_assigned_partitions",               # no partitions assigned
}
# Grafana's own variables, replaced by a valid value before parsing
GRAFANA_INTERVALS = re.compile(r"\$__(rate_interval|interval|range)|\$\{__(rate_interval|interval|range)\}")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("", "_sum", "_count"), "info": ("_info",), "stateset": ("",), "unknown": ("",)}


# ------------------------------------------------------------------------------------------------ exported


def exported_series() -> dict[str, set[str]]:
    """Series name -> label names, for every series the worker's registry exports.

    Names come from the registry's collected families and their types (a labelled metric with no
    child yet has no samples, so the sample names alone would miss it); the labels from the metric
    objects registered there.
    """
    metrics = WorkerMetrics()
    labels_of = {m._name: set(m._labelnames) for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)}
    series: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        labels = labels_of.get(family.name, set())
        for suffix in SUFFIXES[family.type]:
            series[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
        for sample in family.samples:  # anything the type rules above did not foresee
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


def test_exported_series_come_from_the_registry():
    series = exported_series()
    # a counter is exported as <name>_total, a histogram as _bucket/_sum/_count: never under the bare name
    assert "streamforest_instances_total" in series and "streamforest_instances" not in series
    assert {"streamforest_batch_seconds_bucket", "streamforest_batch_seconds_count"} <= set(series)
    assert series["streamforest_partition_lag"] == {"partition"}
    assert series["streamforest_prequential_accuracy"] == {"profile"}
    assert series["streamforest_drift_alerts_total"] == {"profile", "source", "level"}
    assert all(name.startswith((PREFIX, *STANDARD_PREFIXES)) for name in series)
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "python_info",
            "python_gc_collections_total"} <= set(series)
    assert not [n for n in series if n.endswith("_created")]


# ------------------------------------------------------------------------------------------------ parsing


def dashboard_exprs() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    found = []
    for panel in _walk_panels(board["panels"]):
        for target in panel.get("targets", []):
            found.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            found.append((f"variable {var['name']}", _variable_promql(query)))
    return found


def _walk_panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from _walk_panels(panel.get("panels", []))


def _variable_promql(query: str) -> str:
    """The PromQL inside a Grafana Prometheus variable query (label_values(expr, label), query_result(expr))."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.S)
    if match:
        return match[1]
    match = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
    return match[1] if match else query


def rule_exprs() -> list[tuple[str, str]]:
    doc = yaml.safe_load(RULES.read_text())
    return [(f"rule {rule.get('alert') or rule.get('record')}", rule["expr"])
            for group in doc["groups"] for rule in group["rules"]]


def parse(expr: str):
    return promql_parser.parse(GRAFANA_INTERVALS.sub("5m", expr))


def selectors(expr) -> list:
    found = []

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(expr, visit)
    return found


def selector_name(selector) -> str | None:
    if selector.name:
        return selector.name
    for matcher in selector.matchers.matchers:
        if matcher.name == "__name__" and matcher.op == promql_parser.MatchOp.Equal:
            return matcher.value
    return None


def used_metrics(exprs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Series name -> where it is used (every selector names the worker's series: its own, or its
    standard collectors')."""
    used: dict[str, list[str]] = {}
    for where, expr in exprs:
        for sel in selectors(parse(expr)):
            name = selector_name(sel)
            assert name is not None, f"{where}: a selector without a metric name: {expr}"
            used.setdefault(name, []).append(where)
    return used


# ------------------------------------------------------------------------------------------------ tests


def test_every_expression_is_valid_promql():
    exprs = dashboard_exprs() + rule_exprs()
    assert len(exprs) > 20
    for where, expr in exprs:
        try:
            parse(expr)
        except Exception as exc:
            pytest.fail(f"{where}: {exc}\n{expr}")


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_every_metric_used_is_exported_by_the_worker(source):
    exprs = dashboard_exprs() if source == "dashboard" else rule_exprs()
    used = used_metrics(exprs)
    exported = exported_series()
    unknown = {name: where for name, where in used.items() if name not in exported}
    assert not unknown, f"{source} uses series the worker does not export: {unknown}"
    must = DASHBOARD_MUST_SHOW if source == "dashboard" else RULES_MUST_WATCH
    assert must <= set(used), f"{source} leaves out {sorted(must - set(used))}"


def test_every_panel_shows_a_series_the_worker_exports():
    exported = exported_series()
    board = json.loads(DASHBOARD.read_text())
    for panel in _walk_panels(board["panels"]):
        if panel["type"] == "row":
            continue
        names = {selector_name(sel) for target in panel["targets"] for sel in selectors(parse(target["expr"]))}
        assert names, f"panel {panel['title']!r} selects no series"
        assert names <= set(exported), f"panel {panel['title']!r}: {sorted(names - set(exported))} not exported"


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_labels_used_are_labels_of_the_metrics(source):
    exported = exported_series()
    for where, expr in dashboard_exprs() if source == "dashboard" else rule_exprs():
        tree = parse(expr)
        # label matchers on a selector: the metric's own labels or the scrape's
        for sel in selectors(tree):
            allowed = exported.get(selector_name(sel), set()) | TARGET_LABELS | {"__name__"}
            for matcher in sel.matchers.matchers:
                assert matcher.name in allowed, f"{where}: {selector_name(sel)} has no label {matcher.name!r}"

        # by (...) of an aggregation: labels some series below it carries
        def visit(node, where=where):
            if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None \
                    and node.modifier.type == promql_parser.AggModifierType.By:
                below = set().union(*(exported.get(selector_name(s), set()) for s in selectors(node.expr)))
                missing = set(node.modifier.labels) - below - TARGET_LABELS
                assert not missing, f"{where}: aggregates by {sorted(missing)}, a label no series below has"

        promql_parser.walk(tree, visit)


def test_dashboard_is_importable_grafana_json():
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 30
    panels = list(_walk_panels(board["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in board["templating"]["list"]}
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            for var in re.findall(r"\$(?:\{(\w+)\}|(\w+))", target["expr"]):
                name = var[0] or var[1]
                assert name in variables or name.startswith("__"), f"{panel['title']}: unknown variable ${name}"
    # the layout: inside Grafana's 24 columns, no panel drawn over another
    taken: dict[tuple[int, int], str] = {}
    for panel in panels:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"{panel['title']!r} overlaps {taken[(x, y)]!r}"
                taken[(x, y)] = panel["title"]


def test_alert_rules_are_complete():
    doc = yaml.safe_load(RULES.read_text())
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}, rule["alert"]
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        if "for" in rule:
            assert re.fullmatch(r"(\d+[smhd])+", rule["for"]), rule["alert"]
        # template variables in annotations are Prometheus' own ($labels, $value)
        for text in rule["annotations"].values():
            for var in re.findall(r"\{\{[^}]*\$(\w+)", text):
                assert var in {"labels", "value", "externalLabels"}, (rule["alert"], var)
