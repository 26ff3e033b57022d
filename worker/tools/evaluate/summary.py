"""The few lines ``streamforest evaluate`` prints: one table row per configuration and stream.

Examples
--------
>>> report = {"mode": "replay", "records": {"read": 3, "malformed": {}}, "configurations": [
...     {"name": "a", "throughput": {"per_second": 1000.0}, "streams": {"s1": {
...         "task": "classification", "instances": 3, "labelled": 3, "alerts": [],
...         "cumulative": {"accuracy": 0.5}, "window": {"accuracy": 0.6}}}}]}
>>> rows(report)
[['a', 's1', 'classification', '3', 'accuracy 0.5000', '0.6000', '0', '1,000']]
"""

from __future__ import annotations

from .headline import MAIN_METRIC

COLUMNS = ("configuration", "stream", "task", "instances", "cumulative", "window", "alerts",
           "instances/s")


def rows(report: dict) -> list[list[str]]:
    out = []
    for cfg in report["configurations"]:
        rate = cfg.get("throughput", {}).get("per_second")
        for stream, s in cfg["streams"].items():
            key = MAIN_METRIC.get(s.get("task"), (None,))[0]
            cum = s.get("cumulative", {}).get(key) if key else None
            win = s.get("window", {}).get(key) if key else None
            out.append([cfg["name"], stream, s.get("task") or "-", f"{s['instances']:,}",
                        f"{key} {cum:.4f}" if cum is not None else "-",
                        f"{win:.4f}" if win is not None else "-", _alerts(s.get("alerts")),
                        f"{rate:,.0f}" if rate else "-"])
    return out


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
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{report['mode']}: {report['records']['read']:,} records read")
    for c in COLUMNS:
        table.add_column(c, justify="right" if c not in ("configuration", "stream", "task")
                         else "left")
    for r in rows(report):
        table.add_row(*r)
    console = Console(width=120) if not _tty() else Console()
    console.print(table)
    late = unlabelled_line(report)
    if late:
        console.print(late)
    bad = report["records"].get("malformed") or {}
    if bad:
        console.print("refused records by reason: " + ", ".join(f"{k} {v}" for k, v in bad.items()))


def _tty() -> bool:
    import sys

    return sys.stdout.isatty()
