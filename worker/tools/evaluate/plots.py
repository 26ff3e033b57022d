"""PNG plots of the evaluation report (:mod:`worker.tools.evaluate.report`).

matplotlib (the ``report`` extra) is imported when the first figure is drawn, not with this
module. Figures are drawn on the Agg canvas directly, without pyplot, so drawing neither
needs a display nor changes the backend of a program that imported this module.

* :func:`metric_plot`: a stream's windowed metric over its positions, one line per
  configuration; drift alerts as vertical lines, warnings as ticks at the bottom (a detector
  may warn hundreds of times, which full-height lines would bury the curves under);
* :func:`ranking_plot`: a stream's feature scores of one ranking method over time, one panel
  per configuration, and the truth beside them when known;
* :func:`throughput_plot`: instances per second of each configuration.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import NamedTuple

from .headline import MAIN_METRIC, natural_key

WIDTH, HEIGHT, DPI = 1000, 450, 100
MAX_PANELS = 4  # configurations side by side in a heatmap figure
# matplotlib's tab10, so configurations keep their colour in every plot
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


class Plot(NamedTuple):
    """A written plot: its file (relative to the report directory), its stream (``None``
    when about all of them), what it shows, and its size in pixels."""

    file: str
    stream: str | None
    title: str
    caption: str = ""
    width: int = WIDTH
    height: int = HEIGHT


def draw_all(data: dict, streams: list[str], out: Path, max_features: int = 20) -> list[Plot]:
    """Every plot of a report: the throughput, then per stream its metric and its rankings."""
    folder = Path(out) / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    configs = data.get("configurations", [])
    plots = []
    throughput = throughput_plot(configs, folder)
    if throughput is not None:
        plots.append(throughput)
    for sid in streams:
        runs = [(i, c.get("name", "?"), c["streams"][sid]) for i, c in enumerate(configs)
                if sid in c.get("streams", {})]
        plots.append(metric_plot(sid, runs, folder))
        methods = sorted({m for _, _, s in runs for m, snaps in (s.get("rankings") or {}).items() if snaps})
        plots += [ranking_plot(sid, m, runs, folder, max_features) for m in methods]
    return plots


def _figure(height: int = HEIGHT):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH / DPI, height / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, folder: Path, name: str) -> str:
    # no version stamp in the file, so equal reports give equal PNGs
    fig.savefig(folder / name, dpi=DPI, format="png", metadata={"Software": None})
    return f"{folder.name}/{name}"


def file_stem(text: str) -> str:
    """A file name part for a stream id or method: readable, and unique by a short hash.

    Examples
    --------
    >>> file_stem("sensors/room 1")
    'sensors_room_1-93bb9b6e'
    """
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._")[:40] or "stream"
    return f"{readable}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def _short(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _number(value) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


# -- metric over time -------------------------------------------------------------------------


def metric_plot(sid: str, runs: list, folder: Path) -> Plot:
    """The windowed main metric of a stream over positions; ``runs``: (index, name, stream)."""
    task = next((s.get("task") for _, _, s in runs if s.get("task")), "classification")
    metric, higher = MAIN_METRIC.get(task, ("accuracy", True))
    fig = _figure()
    ax = fig.add_subplot()
    drawn = False
    for i, name, s in runs:
        color = COLORS[i % len(COLORS)]
        history = s.get("history") or []
        xs = [_number(h.get("position")) for h in history]
        ys = [_number(h.get(metric)) for h in history]
        ax.plot(xs, ys, color=color, lw=1.6, label=_short(name, 40), marker="o" if len(xs) < 3 else None)
        drawn = drawn or bool(history)
        _alert_marks(ax, s.get("alerts") or [], color)
    levels = {a.get("level") for _, _, s in runs for a in s.get("alerts") or []}
    _legend(ax, levels)
    if not drawn:
        ax.text(0.5, 0.5, "no windowed metrics yet (too few labelled rows)", transform=ax.transAxes,
                ha="center", va="center", color="0.4")
    ax.set_title(f"{_short(sid, 70)}: {metric} over the sliding window")
    ax.set_xlabel("stream position (instances)")
    ax.set_ylabel(f"{metric} ({'higher' if higher else 'lower'} is better)")
    ax.grid(alpha=0.3)
    file = _save(fig, folder, f"{file_stem(sid)}-metric.png")
    caption = (f"Windowed {metric} of every configuration, at the history snapshots."
               + (" Vertical lines: drift alerts; ticks at the bottom: warnings." if levels else ""))
    return Plot(file, sid, f"{sid}: windowed {metric}", caption)


def _alert_marks(ax, alerts: list, color: str) -> None:
    """Drifts as full-height lines, warnings (and other levels) as ticks at the bottom."""
    drifts = [a["position"] for a in alerts if a.get("level") == "drift" and a.get("position") is not None]
    others = [a["position"] for a in alerts if a.get("level") != "drift" and a.get("position") is not None]
    axis = ax.get_xaxis_transform()  # x in data, y in axes fraction
    if drifts:
        ax.vlines(drifts, 0, 1, transform=axis, colors=color, linestyles="--", lw=1.0, alpha=0.6)
    if others:
        ax.vlines(others, 0, 0.06, transform=axis, colors=color, lw=1.2, alpha=0.7)


def _legend(ax, levels: set) -> None:
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    if "drift" in levels:
        handles.append(Line2D([], [], color="0.3", ls="--", lw=1.0))
        labels.append("drift alert")
    if levels - {"drift"}:
        handles.append(Line2D([], [], color="0.3", lw=0, marker="|", markersize=9))
        labels.append("warning")
    if handles:
        ax.legend(handles, labels, loc="best", fontsize=9, framealpha=0.85)


# -- rankings over time -----------------------------------------------------------------------


def ranking_plot(sid: str, method: str, runs: list, folder: Path, max_features: int = 20) -> Plot:
    """Heatmaps of one method's feature scores over time, per configuration, and the truth."""
    ranked = [(i, name, s["rankings"][method]) for i, name, s in runs if (s.get("rankings") or {}).get(method)]
    shown, left_out = ranked[:MAX_PANELS], len(ranked) - MAX_PANELS
    truth = next((s["truth"] for _, _, s in runs if s.get("truth")), None)
    ranking_columns = [_columns(snaps, "features", "scores") for _, _, snaps in shown]
    truth_columns = _truth_columns(truth) if truth else None
    features, total = heat_features(ranking_columns, truth_columns, max_features)
    fig = _figure()
    widths = [3] * len(shown) + ([1 if len(truth_columns) == 1 else 2] if truth_columns else [])
    axes = fig.subplots(1, len(widths), sharey=True, width_ratios=widths, squeeze=False)[0]
    negative = any(v < 0 for cols in ranking_columns + [truth_columns or []] for _, col in cols for v in col.values())
    style = {"cmap": "RdBu_r", "vmin": -1, "vmax": 1} if negative else {"cmap": "viridis", "vmin": 0, "vmax": 1}
    mesh = None
    for ax, (_, name, _), columns in zip(axes, shown, ranking_columns):
        mesh = _heatmap(ax, columns, features, style)
        ax.set_title(_short(name, 36), fontsize=10)
        ax.set_xlabel("stream position")
        ax.locator_params(axis="x", nbins=4)  # panels share the width: long positions collide
    if truth_columns:
        # a true weight holds from its position to the next one, or to the last ranking
        end = max([p for cols in ranking_columns for p, _ in cols] + [truth_columns[-1][0] + 1])
        _heatmap(axes[-1], truth_columns, features, style, [p for p, _ in truth_columns] + [end])
        axes[-1].set_title("truth", fontsize=10)
        if len(truth_columns) == 1:  # one weight per feature for the whole stream
            axes[-1].set_xticks([])
            axes[-1].set_xlabel("every position")
        else:
            axes[-1].set_xlabel("stream position")
            axes[-1].locator_params(axis="x", nbins=3)  # a narrow panel: few ticks, or their labels collide
    _feature_ticks(axes[0], features)
    fig.colorbar(mesh, ax=list(axes), pad=0.01, fraction=0.04,
                 label="score / best score" + (" (truth: weight / largest)" if truth_columns else ""))
    fig.suptitle(f"{_short(sid, 50)}: feature scores of {_short(method, 30)} over time", fontsize=12)
    file = _save(fig, folder, f"{file_stem(sid)}-ranking-{file_stem(method)}.png")
    order = "highest true weight, then mean score" if truth_columns else "highest mean score"
    caption = (f"Rows: {len(features)} of {total} features ({order}, top first). "
               "Each ranking is divided by its best score; hatched: not ranked at that position.")
    if left_out > 0:
        caption += f" {left_out} more configuration(s) are not drawn."
    return Plot(file, sid, f"{sid}: feature scores of {method}", caption)


def _columns(snapshots: list, names_key: str, scores_key: str) -> list[tuple[float, dict]]:
    """``(position, {feature: score / largest |score|})`` per snapshot, by position (the
    last of equal positions wins)."""
    by_position = {}
    for snap in snapshots:
        scores = {str(f): _number(v) for f, v in zip(snap.get(names_key) or [], snap.get(scores_key) or [])}
        by_position[_number(snap.get("position"))] = _scaled(scores)
    return sorted((p, col) for p, col in by_position.items() if not math.isnan(p))


def _truth_columns(truth: list) -> list[tuple[float, dict]]:
    snapshots = [{"position": t.get("position", 0), "features": list((t.get("scores") or {}).keys()),
                  "weights": list((t.get("scores") or {}).values())} for t in truth]
    return _columns(snapshots, "features", "weights")


def _scaled(scores: dict) -> dict:
    largest = max((abs(v) for v in scores.values() if not math.isnan(v)), default=0.0)
    return {f: (v / largest if largest > 0 else 0.0) for f, v in scores.items() if not math.isnan(v)}


def heat_features(rankings: list, truth: list | None, limit: int) -> tuple[list[str], int]:
    """The features of a heatmap, top first, and how many there were.

    Features with a true weight come first (largest first), then by mean scaled score over
    every ranking (unranked counts 0); ties by name.

    Examples
    --------
    >>> r = [[(0, {"a": 1.0, "b": 0.5}), (1, {"a": 0.2, "b": 1.0, "c": 0.1})]]
    >>> heat_features(r, None, 2)
    (['b', 'a'], 3)
    >>> heat_features(r, [(0, {"c": 1.0})], 2)
    (['c', 'b'], 3)
    """
    totals: dict[str, float] = {}
    count = 0
    for columns in rankings:
        for _, col in columns:
            count += 1
            for f, v in col.items():
                totals[f] = totals.get(f, 0.0) + v
    weights: dict[str, float] = {}
    for _, col in truth or []:
        for f, v in col.items():
            weights[f] = max(weights.get(f, -math.inf), abs(v))
    names = set(totals) | set(weights)
    ordered = sorted(names, key=lambda f: (-weights.get(f, 0.0), -totals.get(f, 0.0) / max(count, 1), natural_key(f)))
    return ordered[:limit], len(names)


def _heatmap(ax, columns: list, features: list[str], style: dict, edges: list | None = None):
    """Cells of ``columns`` (one per position) by ``features``, centred on the positions
    unless ``edges`` are given."""
    import numpy as np

    positions = np.array([p for p, _ in columns], dtype=np.float64)
    values = np.array([[col.get(f, np.nan) for _, col in columns] for f in features], dtype=np.float64)
    values = values.reshape(len(features), len(columns))
    # unranked cells are left transparent over a hatch, which no colour of the map resembles
    ax.patch.set_facecolor("white")
    ax.patch.set_hatch("xxx")
    ax.patch.set_edgecolor("0.78")
    x = _edges(positions) if edges is None else np.asarray(edges, dtype=np.float64)
    return ax.pcolormesh(x, np.arange(len(features) + 1), np.ma.masked_invalid(values),
                         shading="flat", **style)


def _edges(positions):
    """Cell edges around positions: halfway between neighbours, the outer ones mirrored.

    Examples
    --------
    >>> import numpy as np
    >>> _edges(np.array([0.0, 10.0, 30.0])).tolist()
    [-5.0, 5.0, 20.0, 40.0]
    >>> _edges(np.array([7.0])).tolist()
    [6.5, 7.5]
    """
    import numpy as np

    if len(positions) == 1:
        return np.array([positions[0] - 0.5, positions[0] + 0.5])
    middles = (positions[1:] + positions[:-1]) / 2
    return np.concatenate(([2 * positions[0] - middles[0]], middles, [2 * positions[-1] - middles[-1]]))


def _feature_ticks(ax, features: list[str]) -> None:
    ax.set_ylim(len(features), 0)  # the first feature on top
    ax.set_yticks([i + 0.5 for i in range(len(features))])
    ax.set_yticklabels([_short(f, 24) for f in features], fontsize=8 if len(features) > 12 else 9)
    ax.set_ylabel("feature")


# -- throughput -------------------------------------------------------------------------------


def throughput_plot(configs: list, folder: Path) -> Plot | None:
    """Instances per second of each configuration (``None`` when none was measured)."""
    bars = [(i, c.get("name", "?"), (c.get("throughput") or {}).get("per_second")) for i, c in enumerate(configs)]
    bars = [(i, name, v) for i, name, v in bars if isinstance(v, int | float) and math.isfinite(v)]
    if not bars:
        return None
    height = max(250, min(HEIGHT, 120 + 50 * len(bars)))  # a bar per configuration, not a poster
    fig = _figure(height)
    ax = fig.add_subplot()
    ys = list(range(len(bars)))[::-1]  # the first configuration on top
    drawn = ax.barh(ys, [v for _, _, v in bars], height=0.6, color=[COLORS[i % len(COLORS)] for i, _, _ in bars])
    ax.bar_label(drawn, labels=[f"{v:,.0f}/s" for _, _, v in bars], padding=4, fontsize=9)
    ax.set_yticks(ys)
    ax.set_yticklabels([_short(name, 30) for _, name, _ in bars])
    ax.set_xlabel("instances per second (higher is better)")
    ax.set_title("Throughput of each configuration")
    ax.margins(x=0.12)
    ax.grid(axis="x", alpha=0.3)
    file = _save(fig, folder, "throughput.png")
    return Plot(file, None, "Throughput of each configuration",
                "Instances through the stream pipelines per second of replay.", WIDTH, height)
