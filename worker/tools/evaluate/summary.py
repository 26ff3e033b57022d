"""The few lines ``streamforest evaluate`` prints: one table row per configuration and stream.

The table fits 80 columns: the configuration column only when several are compared, the
metric's name in its header when every row shares it, and the throughput (one per
configuration) on a line of its own under the table.

Examples
--------
>>> report = {"mode": "replay", "records": {"read": 3, "malformed": {}}, "configurations": [
...     {"name": "a", "throughput": {"per_second": 1000.0}, "streams": {"s1": {
...         "task": "classification", "instances": 3, "labelled": 3, "alerts": [],
...         "cumulative": {"accuracy": 0.5}, "window": {"accuracy": 0.6}}}}]}
>>> [(r["stream"], r["metric"], r["cumulative"], r["window"], r["alerts"]) for r in rows(report)]
[('s1', 'accuracy', '0.5000', '0.6000', '0')]
>>> throughput_line(report)
'instances/s: a 1,000'
"""

from __future__ import annotations

from .headline import MAIN_METRIC


def rows(report: dict) -> list[dict[str, str]]:
    """One row per configuration and stream: its name, the stream, its instances, its main
    metric's name, cumulative and window values, and its alerts (``-``: not read)."""
    out = []
    for cfg in report["configurations"]:
        for stream, s in cfg["streams"].items():
            key = MAIN_METRIC.get(s.get("task"), (None,))[0]
            cum = s.get("cumulative", {}).get(key) if key else None
            win = s.get("window", {}).get(key) if key else None
            out.append({"configuration": cfg["name"], "stream": stream,
                        "instances": f"{s['instances']:,}", "metric": key or "-",
                        "cumulative": f"{cum:.4f}" if cum is not None else "-",
                        "window": f"{win:.4f}" if win is not None else "-",
                        "alerts": _alerts(s.get("alerts"))})
    return out


def throughput_line(report: dict) -> str:
    """The replay's instances per second, per configuration."""
    rates = [(c["name"], c.get("throughput", {}).get("per_second")) for c in
             report["configurations"]]
    return "instances/s: " + ", ".join(f"{name} {rate:,.0f}" if rate else f"{name} -"
                                       for name, rate in rates)


def _alerts(alerts) -> str:
    """How many alerts; ``-`` when they were not read (the served mode)."""
    return "-" if alerts is None else str(len(alerts))


def unlabelled_line(report: dict) -> str | None:
    """What the served mode scored of the predictions served without a label.

    Examples
    --------
    >>> unlabelled_line({"late_labels": {"joined": 5, "refused": {"label_expired": 2}},
    ...                  "configurations": [{"streams": {"s1": {"unlabelled": 3}}}]})
    'labelled later: 5 predictions scored; never labelled: 3 predictions not scored; labels refused: label_expired 2'
    """
    late = report.get("late_labels")
    if late is None:
        return None
    never = sum(s.get("unlabelled", 0) for c in report["configurations"]
                for s in c["streams"].values())
    line = (f"labelled later: {late['joined']:,} predictions scored; never labelled: "
            f"{never:,} predictions not scored")
    if late.get("refused"):
        line += "; labels refused: " + ", ".join(f"{k} {v:,}" for k, v in late["refused"].items())
    if late.get("missing_topics"):
        line += "; not read (no such topic): " + ", ".join(late["missing_topics"])
    return line


def print_summary(report: dict) -> None:
    """The table (rich; plain text when stdout is not a terminal) and the refused records."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    body = rows(report)
    several = len(report["configurations"]) > 1
    metrics = {r["metric"] for r in body}
    one_metric = metrics.pop() if len(metrics) == 1 else None
    table = Table(title=f"{report['mode']}: {report['records']['read']:,} records read",
                  box=box.SIMPLE_HEAD)
    # the metric's name as the header when every row shares it, else beside each value; the
    # numbers never wrap, names fold when the terminal is narrow
    columns = (["configuration"] if several else []) + [
        "stream", "instances", one_metric or "metric", "window", "alerts"]
    for c in columns:
        named = c in ("configuration", "stream")
        table.add_column(c, justify="left" if named else "right", overflow="fold",
                         no_wrap=not named)
    for r in body:
        metric = r["cumulative"] if one_metric else f"{r['metric']} {r['cumulative']}"
        table.add_row(*([r["configuration"]] if several else []), r["stream"], r["instances"],
                      metric, r["window"], r["alerts"])
    console = Console(width=120) if not _tty() else Console()
    console.print(table)
    console.print(throughput_line(report))
    late = unlabelled_line(report)
    if late:
        console.print(late)
    bad = report["records"].get("malformed") or {}
    if bad:
        console.print("refused records by reason: " + ", ".join(f"{k} {v}" for k, v in bad.items()))


def _tty() -> bool:
    import sys

    return sys.stdout.isatty()
