"""The report of ``streamforest evaluate``: ``report.json``, a self-contained ``report.html``, PNG plots.

:func:`write_report` writes into a directory

* ``report.json``: the report dict as given (NaN and infinities as ``null``, keys sorted);
* ``plots/*.png``: per stream, its windowed metric over time (one line per configuration,
  drift alerts as vertical lines) and, per ranking method, a heatmap of feature scores over
  time (the truth beside it when known); the throughput of each configuration;
* ``report.html``: one file that opens from disk anywhere: CSS inline, plots embedded as
  ``data:`` URIs, no external reference. A summary table (stream x configuration: the
  cumulative and windowed metric; per configuration instances/s, peak memory, state size),
  then per stream its metrics, plots, alerts and truth correlations, then the records read
  and the malformed ones by reason.

Plots need matplotlib (the ``report`` extra, :data:`INSTALL_HINT`), imported only when they
are drawn. Without it, :func:`write_report` writes ``report.json`` and an HTML of the tables;
:func:`plots_available` tells the caller so it can say how to get the plots. A report of many
streams stays readable: plots and detailed sections cover at most :data:`MAX_STREAMS` streams
(those with the most labelled rows), heatmaps the top :data:`MAX_FEATURES` features; the HTML
says what was left out, and ``report.json`` holds everything.

The report dict
---------------
::

    {"version": 1, "mode": "replay" | "served",
     "source": {"topic": str, "partitions": {p: [start, end]}, "streams": pattern or None,
                "start": str, "end": str},
     "records": {"read": int, "decoded": int, "malformed": {reason: count}},
     "configurations": [
       {"name": str, "config": {...},
        "throughput": {"instances": int, "seconds": float, "per_second": float},
        "memory": {"peak_bytes": int, "state_bytes": int},
        "streams": {stream_id: {
            "task": "classification" | "regression", "model": str,
            "instances": int, "labelled": int,
            "labelled_later": int, "unlabelled": int,                 # served mode only
            "cumulative": {...}, "window": {...}, "history": [...],  # StreamMetrics
            "alerts": [{"position": int, "source": str, "level": str, "feature": str | None}]
                      or None,                                       # None: not read

            "rankings": {method: [{"position": int, "features": [names, best first],
                                   "scores": [floats]}]},
            "truth": [{"position": int, "scores": {feature: weight}}],            # optional
            "truth_correlation": {method: [{"position": int, "spearman": float}]}  # optional
        }}}],
     "late_labels": None or {"label_events": int, "joined": int, "refused": {code: count},
                             "partitions": {"topic:p": [start, end]}, "missing_topics": [str],
                             "held_rows": int, "held_age_ms": int},
     "timings": {"seconds": float}}

``cumulative``, ``window`` and ``history`` are :meth:`StreamMetrics.cumulative`,
:meth:`~StreamMetrics.windowed` and :meth:`~StreamMetrics.history` of
:mod:`worker.tools.evaluate.scores`. In served mode there is one pseudo-configuration per model
name, whose ``throughput``, ``memory`` and ``rankings`` are empty and whose ``alerts`` are
``None`` (the drift topic is not read); ``labelled`` counts the predictions scored, those
labelled by a later LabelEvent (``labelled_later``) included, and ``unlabelled`` those never
labelled (not scored). ``late_labels`` says what the served mode read of the LabelEvents
(:mod:`worker.tools.evaluate.late`); None when every prediction carried its label, and in a
replay.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import json
import math
from pathlib import Path

from .headline import MAIN_METRIC, natural_key

INSTALL_HINT = "pip install 'streamforest[report]'"
MAX_STREAMS = 20  # streams with plots and a section of their own
MAX_FEATURES = 20  # rows of a ranking heatmap
MAX_ALERTS_LISTED = 5  # alerts listed per stream and configuration
MAX_TABLE_STREAMS = 500  # rows of the summary table

DETAIL_METRICS = {"classification": ("accuracy", "kappa", "kappa_t", "macro_f1"),
                  "regression": ("mae", "rmse", "amrae")}
_FIXED_POINT = {"accuracy", "kappa", "kappa_t", "macro_f1", "amrae", "spearman"}


def plots_available() -> bool:
    """Whether matplotlib can be imported (the ``report`` extra), so plots are drawn."""
    return importlib.util.find_spec("matplotlib") is not None


def write_report(out_dir: Path | str, report: dict) -> dict[str, Path]:
    """Writes report.json, report.html and the plots (see the module doc).

    Parameters
    ----------
    out_dir : Path or str
        Directory to write into (created if needed); existing files of the same names are
        replaced.
    report : dict
        The report (layout: the module doc).

    Returns
    -------
    dict of str to Path
        The written files by their path relative to ``out_dir``.

    Examples
    --------
    >>> import json, tempfile
    >>> report = {"version": 1, "mode": "served", "source": {"topic": "instances"},
    ...           "records": {"read": 2, "decoded": 2, "malformed": {}}, "configurations": [],
    ...           "timings": {"seconds": float("nan")}}
    >>> with tempfile.TemporaryDirectory() as out:
    ...     written = write_report(out, report)
    ...     print(sorted(written), json.loads(written["report.json"].read_text())["timings"])
    ['report.html', 'report.json'] {'seconds': None}
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = json_safe(report)
    written = {"report.json": out / "report.json"}
    written["report.json"].write_text(json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n")
    shown, omitted = choose_streams(data)
    figures = _draw(data, shown, out)
    for figure in figures or []:
        written[figure.file] = out / figure.file
    written["report.html"] = out / "report.html"
    written["report.html"].write_text(render_html(data, shown, omitted, figures, out), encoding="utf-8")
    return written


def _draw(data: dict, shown: list[str], out: Path) -> list | None:
    """The plots (``None`` without matplotlib)."""
    if not plots_available():
        return None
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
    except ImportError:  # installed but broken (e.g. a missing shared library): tables only
        return None
    from . import plots

    return plots.draw_all(data, shown, out, max_features=MAX_FEATURES)


def json_safe(value):
    """The report as plain JSON values: NaN and infinities as None, numpy scalars and arrays
    as Python ones, tuples as lists, mapping keys as strings.

    Examples
    --------
    >>> json_safe({"a": float("nan"), 3: (1.5, float("inf"))})
    {'a': None, '3': [1.5, None]}
    """
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):  # numpy scalars and arrays
        return json_safe(value.tolist())
    return value


def choose_streams(data: dict) -> tuple[list[str], list[str]]:
    """Streams with plots and a section (the most labelled first), and the others.

    Both in natural order (``s2`` before ``s10``).

    Examples
    --------
    >>> data = {"configurations": [{"streams": {"s10": {"labelled": 5}, "s2": {"labelled": 9},
    ...                                         "s1": {"labelled": 1}}}]}
    >>> import worker.tools.evaluate.report as r
    >>> r.MAX_STREAMS, saved = 2, r.MAX_STREAMS
    >>> r.choose_streams(data)
    (['s2', 's10'], ['s1'])
    >>> r.MAX_STREAMS = saved
    """
    labelled: dict[str, int] = {}
    for c in data.get("configurations", []):
        for sid, s in c.get("streams", {}).items():
            labelled[sid] = labelled.get(sid, 0) + (s.get("labelled") or 0)
    by_rows = sorted(labelled, key=lambda sid: (-labelled[sid], natural_key(sid)))
    return sorted(by_rows[:MAX_STREAMS], key=natural_key), sorted(by_rows[MAX_STREAMS:], key=natural_key)


# -- formatting -------------------------------------------------------------------------------


def fmt_metric(name: str, value) -> str:
    """A metric value for a table: rates with 4 decimals, errors with 4 significant digits.

    Examples
    --------
    >>> fmt_metric("accuracy", 0.91), fmt_metric("mae", 0.596), fmt_metric("mae", 1234.567)
    ('0.9100', '0.5960', '1235')
    >>> fmt_metric("kappa", None), fmt_metric("rmse", float("nan"))
    ('–', '–')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if name in _FIXED_POINT:
        return f"{value:.4f}"
    return f"{value:#.4g}".rstrip(".")  # '#' keeps trailing zeros, so columns show 4 digits alike


def fmt_bytes(n) -> str:
    """Bytes in binary units.

    Examples
    --------
    >>> fmt_bytes(512), fmt_bytes(3 * 2**20 + 2**19), fmt_bytes(None)
    ('512 B', '3.5 MiB', '–')
    """
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""  # not reached


def fmt_count(n) -> str:
    """A count or rate with thousands separators (``–`` when unknown)."""
    return "–" if n is None else f"{n:,.0f}"


def _e(text) -> str:
    return html.escape(str(text), quote=True)


# -- HTML -------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1d2329;
 margin:0 auto;padding:24px 28px 60px;max-width:1120px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 10px;padding-bottom:4px;
 border-bottom:2px solid #e3e7eb}h3{font-size:16px;margin:28px 0 6px}
.meta{color:#56606b;margin:0 0 4px}.note{color:#56606b;font-size:13px;margin:6px 0}
.warn{background:#fff7e0;border:1px solid #f0d68a;padding:8px 12px;border-radius:4px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:6px 0 10px;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e3e7eb;text-align:left;vertical-align:top}
th{background:#f4f6f8;font-weight:600;white-space:nowrap}
td.n,th.n{text-align:right;white-space:nowrap}tbody tr:hover{background:#f8fafc}
td.best{font-weight:700}th.group{text-align:center;border-left:2px solid #d5dbe1}
td.first,th.first{border-left:2px solid #d5dbe1}tr.config td{background:#fafbfc;color:#3a434c}
code{font:12.5px ui-monospace,"DejaVu Sans Mono",monospace;background:#f4f6f8;padding:1px 4px;border-radius:3px}
pre{font:12px ui-monospace,"DejaVu Sans Mono",monospace;background:#f4f6f8;padding:8px 10px;overflow-x:auto}
img{max-width:100%;height:auto;display:block;margin:8px 0 2px;border:1px solid #eef0f2}
.caption{color:#56606b;font-size:12.5px;margin:0 0 14px}
details{margin:4px 0}summary{cursor:pointer;color:#2b5d8a}
td.model{white-space:nowrap}section.stream h3{margin-top:34px}
"""


def render_html(data: dict, shown: list[str], omitted: list[str], figures: list | None, out: Path) -> str:
    """The whole page (``figures``: the drawn plots, ``None`` when plots are unavailable)."""
    by_stream: dict = {}
    for f in figures or []:
        by_stream.setdefault(f.stream, []).append(f)
    source = data.get("source") or {}
    title = f"streamforest evaluate: {source.get('topic') or 'report'}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _header(data),
        _missing_plots_note(figures),
        "<h2>Summary</h2>",
        _summary_table(data),
        *(_figure_html(f, out) for f in by_stream.get(None, [])),
        "<h2>Streams</h2>" if shown else "",
        _omitted_note(omitted),
        *(_stream_section(data, sid, by_stream.get(sid, []), out) for sid in shown),
        "<h2>Records</h2>",
        _records(data),
        "<h2>Configurations</h2>",
        _configurations(data),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _header(data: dict) -> str:
    source = data.get("source") or {}
    partitions = source.get("partitions") or {}
    ranges = ", ".join(f"{p}: {r[0]}–{r[1]}" if isinstance(r, list | tuple) and len(r) == 2 else f"{p}: {r}"
                       for p, r in sorted(partitions.items(), key=lambda kv: natural_key(kv[0])))
    seconds = (data.get("timings") or {}).get("seconds")
    lines = [
        f"mode <b>{_e(data.get('mode', '–'))}</b> · topic <code>{_e(source.get('topic', '–'))}</code>"
        + (f" · streams <code>{_e(source['streams'])}</code>" if source.get("streams") else " · all streams"),
        f"from {_e(source.get('start') or '–')} to {_e(source.get('end') or '–')}"
        + (f" · partitions (offsets) {_e(ranges)}" if ranges else ""),
        f"{len(data.get('configurations', []))} configuration(s)"
        + (f" · evaluated in {seconds:,.1f} s" if isinstance(seconds, int | float) else ""),
    ]
    return "\n".join(f'<p class="meta">{line}</p>' for line in lines)


def _missing_plots_note(figures) -> str:
    if figures is not None:
        return ""
    return (f'<p class="warn">Plots need matplotlib: <code>{_e(INSTALL_HINT)}</code>, then run the '
            "evaluation again. The tables below are complete.</p>")


def _omitted_note(omitted: list[str]) -> str:
    if not omitted:
        return ""
    names = ", ".join(f"<code>{_e(s)}</code>" for s in omitted[:30]) + (" …" if len(omitted) > 30 else "")
    return (f'<p class="note">{len(omitted)} stream(s) with fewer labelled rows have no section of their '
            f"own (their metrics are in the summary and in report.json): {names}</p>")


def _streams_of(data: dict) -> list[str]:
    seen = {sid for c in data.get("configurations", []) for sid in c.get("streams", {})}
    return sorted(seen, key=natural_key)


def _summary_table(data: dict) -> str:
    """Streams on rows, for each configuration its cumulative and windowed main metric; first
    rows: what each configuration cost (instances/s, peak memory, state size)."""
    configs = data.get("configurations", [])
    if not configs:
        return '<p class="note">No configuration was evaluated.</p>'
    streams = _streams_of(data)
    head = ['<div class="scroll"><table><thead><tr><th rowspan="2">Stream</th><th rowspan="2">Metric</th>'
            '<th rowspan="2" class="n">Labelled</th>']
    head += [f'<th colspan="2" class="group">{_e(c.get("name", "?"))}</th>' for c in configs]
    head.append("</tr><tr>" + "".join('<th class="n first">cumulative</th><th class="n">window</th>' for _ in configs))
    head.append("</tr></thead><tbody>")
    rows = [_cost_row("instances/s", configs, lambda c: fmt_count((c.get("throughput") or {}).get("per_second"))),
            _cost_row("peak memory", configs, lambda c: fmt_bytes((c.get("memory") or {}).get("peak_bytes"))),
            _cost_row("state size", configs, lambda c: fmt_bytes((c.get("memory") or {}).get("state_bytes")))]
    rows += [_stream_row(sid, configs) for sid in streams[:MAX_TABLE_STREAMS]]
    note = ""
    if len(streams) > MAX_TABLE_STREAMS:
        note = (f'<p class="note">{len(streams) - MAX_TABLE_STREAMS} more stream(s) are left out of this '
                "table; report.json has them all.</p>")
    legend = ('<p class="note">Cumulative: every labelled row; window: the last rows of the sliding window. '
              "Bold: the best configuration of the stream (cumulative).</p>")
    return "".join(head) + "\n".join(rows) + "</tbody></table></div>" + legend + note


def _cost_row(label: str, configs: list, value) -> str:
    cells = "".join(f'<td colspan="2" class="n first">{_e(value(c))}</td>' for c in configs)
    return f'<tr class="config"><td colspan="3">{_e(label)}</td>{cells}</tr>'


def _stream_row(sid: str, configs: list) -> str:
    entries = [c.get("streams", {}).get(sid) for c in configs]
    task = next((e.get("task") for e in entries if e), None)
    metric, higher = MAIN_METRIC.get(task, ("accuracy", True))
    values = [((e or {}).get("cumulative") or {}).get(metric) for e in entries]
    finite = [v for v in values if isinstance(v, int | float)]
    best = (max(finite) if higher else min(finite)) if len(finite) > 1 else None
    labelled = max(((e or {}).get("labelled") or 0 for e in entries), default=0)
    cells = []
    for e, v in zip(entries, values):
        if e is None:
            cells.append('<td class="n first">–</td><td class="n">–</td>')
            continue
        cls = "n first best" if best is not None and v == best else "n first"
        window = (e.get("window") or {}).get(metric)
        cells.append(f'<td class="{cls}">{fmt_metric(metric, v)}</td><td class="n">{fmt_metric(metric, window)}</td>')
    return (f"<tr><td><code>{_e(sid)}</code></td><td>{_e(metric)}</td><td class=\"n\">{fmt_count(labelled)}</td>"
            + "".join(cells) + "</tr>")


def _stream_section(data: dict, sid: str, figures: list, out: Path) -> str:
    configs = [(c.get("name", "?"), c["streams"][sid]) for c in data.get("configurations", [])
               if sid in c.get("streams", {})]
    task = configs[0][1].get("task", "?") if configs else "?"
    parts = [f'<section class="stream"><h3>Stream <code>{_e(sid)}</code> · {_e(task)}</h3>',
             _stream_metrics(configs, task)]
    parts += [_figure_html(f, out) for f in figures]
    parts += [_truth_correlation(configs), _alerts(configs, data.get("mode") != "served"), "</section>"]
    return "\n".join(p for p in parts if p)


def _stream_metrics(configs: list, task: str) -> str:
    """Per configuration two rows: the metrics over every labelled row, and over the window."""
    names = DETAIL_METRICS.get(task, ())
    head = ("<tr><th>Configuration</th><th>Model</th><th class=\"n\">Instances</th><th class=\"n\">Labelled</th>"
            '<th class="first">Rows</th>' + "".join(f'<th class="n">{_e(m)}</th>' for m in names) + "</tr>")
    rows = []
    for name, s in configs:
        shared = (f'<td rowspan="2">{_e(name)}</td><td rowspan="2" class="model">{_e(s.get("model", "–"))}</td>'
                  f'<td rowspan="2" class="n">{fmt_count(s.get("instances"))}</td>'
                  f'<td rowspan="2" class="n">{fmt_count(s.get("labelled"))}</td>')
        for label, key, lead in (("cumulative", "cumulative", shared), ("window", "window", "")):
            values = s.get(key) or {}
            rows.append(f'<tr>{lead}<td class="first">{label}</td>'
                        + "".join(f'<td class="n">{fmt_metric(m, values.get(m))}</td>' for m in names) + "</tr>")
    return f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>'


def _figure_html(figure, out: Path) -> str:
    encoded = base64.b64encode((out / figure.file).read_bytes()).decode("ascii")
    caption = f'<p class="caption">{_e(figure.caption)}</p>' if figure.caption else ""
    return (f'<img src="data:image/png;base64,{encoded}" alt="{_e(figure.title)}" '
            f'width="{figure.width}" height="{figure.height}">{caption}')


def _truth_correlation(configs: list) -> str:
    rows = []
    for name, s in configs:
        for method, series in sorted((s.get("truth_correlation") or {}).items()):
            values = [e.get("spearman") for e in series if isinstance(e.get("spearman"), int | float)]
            if not series:
                continue
            last = series[-1].get("spearman")
            mean = sum(values) / len(values) if values else None
            rows.append(f"<tr><td>{_e(name)}</td><td>{_e(method)}</td><td class=\"n\">{len(series)}</td>"
                        f"<td class=\"n\">{fmt_metric('spearman', mean)}</td>"
                        f"<td class=\"n\">{fmt_metric('spearman', last)}</td></tr>")
    if not rows:
        return ""
    return ("<p><b>Rankings against the truth</b> (Spearman rank correlation of scores and true weights)</p>"
            "<table><thead><tr><th>Configuration</th><th>Method</th><th class=\"n\">Rankings</th>"
            "<th class=\"n\">mean</th><th class=\"n\">last</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _alerts(configs: list, detected: bool) -> str:
    blocks = []
    for name, s in configs:
        alerts = s.get("alerts") or []
        if not alerts:
            continue
        levels: dict[str, int] = {}
        for a in alerts:
            levels[a.get("level", "?")] = levels.get(a.get("level", "?"), 0) + 1
        counts = ", ".join(f"{n:,} {_e(level)}" for level, n in sorted(levels.items()))
        earliest = sorted(alerts, key=lambda a: a.get("position") if isinstance(a.get("position"), int) else -1)
        rows = "".join(
            f"<tr><td class=\"n\">{fmt_count(a.get('position'))}</td><td>{_e(a.get('level', '–'))}</td>"
            f"<td>{_e(a.get('source', '–'))}</td><td>{_e(a.get('feature') or '–')}</td></tr>"
            for a in earliest[:MAX_ALERTS_LISTED])
        more = f" (the earliest {MAX_ALERTS_LISTED} below)" if len(alerts) > MAX_ALERTS_LISTED else ""
        blocks.append(f"<p><b>Alerts of {_e(name)}</b>: {len(alerts):,} ({counts}){more}</p>"
                      "<table><thead><tr><th class=\"n\">Position</th><th>Level</th><th>Source</th>"
                      f"<th>Feature</th></tr></thead><tbody>{rows}</tbody></table>")
    if not blocks and detected:  # the served mode does not read the drift topic
        return '<p class="note">No drift alerts.</p>'
    return "\n".join(blocks)


def _records(data: dict) -> str:
    from .summary import unlabelled_line

    records = data.get("records") or {}
    malformed = records.get("malformed") or {}
    late = unlabelled_line(data)
    table = ((f'<p class="note">{_e(late)}</p>' if late else "") + "<table><tbody>"
             f"<tr><td>read</td><td class=\"n\">{fmt_count(records.get('read'))}</td></tr>"
             f"<tr><td>decoded</td><td class=\"n\">{fmt_count(records.get('decoded'))}</td></tr>"
             f"<tr><td>malformed</td><td class=\"n\">{fmt_count(sum(malformed.values()))}</td></tr>"
             "</tbody></table>")
    if not malformed:
        return table
    rows = "".join(f"<tr><td>{_e(reason)}</td><td class=\"n\">{fmt_count(n)}</td></tr>"
                   for reason, n in sorted(malformed.items(), key=lambda kv: (-kv[1], kv[0])))
    return (table + "<p><b>Malformed records by reason</b></p><table><thead><tr><th>Reason</th>"
            f"<th class=\"n\">Records</th></tr></thead><tbody>{rows}</tbody></table>")


def _configurations(data: dict) -> str:
    blocks = []
    for c in data.get("configurations", []):
        t = c.get("throughput") or {}
        cost = (f"{fmt_count(t.get('instances'))} instances in {fmt_metric('seconds', t.get('seconds'))} s"
                if t else "no throughput measured")
        config = json.dumps(c.get("config") or {}, indent=1, sort_keys=True)
        blocks.append(f"<details><summary><b>{_e(c.get('name', '?'))}</b> · {_e(cost)} · "
                      f"{len(c.get('streams', {})):,} stream(s)</summary><pre>{_e(config)}</pre></details>")
    return "\n".join(blocks) or '<p class="note">None.</p>'
