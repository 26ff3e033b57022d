"""The report of ``streamforest evaluate`` (worker/tools/evaluate/report.py and plots.py)."""

from __future__ import annotations

import base64
import doctest
import json
import re
import struct
import subprocess
import sys
from io import BytesIO

import numpy as np
import pytest

from worker.tools.evaluate import plots, report
from worker.tools.evaluate.report import write_report
from worker.tools.evaluate.scores import StreamMetrics, spearman

IMG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="[^"]*" width="(\d+)" height="(\d+)">')
FEATURES = [f"f{i}" for i in range(12)]


def _metrics(task: str, n: int, drift: int, quality: float, seed: int) -> StreamMetrics:
    """Metrics of a model right with probability ``quality`` (halved for a while after the drift)."""
    rng = np.random.default_rng(seed)
    m = StreamMetrics(task, window=500, every=250)
    for lo in range(0, n, 1000):
        pos = np.arange(lo, min(n, lo + 1000))
        q = np.where((pos >= drift) & (pos < drift + 2000), quality / 2, quality)
        if task == "classification":
            y = rng.integers(0, 3, len(pos))
            p = np.where(rng.random(len(pos)) < q, y, (y + 1) % 3).tolist()
            if lo == 0:
                p[:10] = [None] * 10
            m.update(y.tolist(), p, pos.tolist())
        else:
            y = rng.normal(size=(len(pos), 2))
            p = y + rng.normal(size=y.shape) * (1.5 - q)[:, None]
            m.update(y.tolist(), p.tolist(), pos.tolist())
    return m


def _rankings(seed: int, n: int, drift: int) -> tuple[list, list, list]:
    """Rankings every 1000 rows that find f0-f2 before the drift and f3-f5 after it, the truth,
    and the rankings' Spearman correlation with the truth."""
    rng = np.random.default_rng(seed)
    truth = [{"position": 0, "scores": {f: (1.0 if f in ("f0", "f1", "f2") else 0.0) for f in FEATURES}},
             {"position": drift, "scores": {f: (1.0 if f in ("f3", "f4", "f5") else 0.0) for f in FEATURES}}]
    snaps, corr = [], []
    for pos in range(1000, n + 1, 1000):
        relevant = (0, 1, 2) if pos < drift + 1500 else (3, 4, 5)
        scores = rng.random(len(FEATURES)) * 0.3
        scores[list(relevant)] += 1.0
        order = np.argsort(-scores)
        snaps.append({"position": pos, "features": [FEATURES[i] for i in order], "scores": scores[order].tolist()})
        weights = truth[1 if pos >= drift else 0]["scores"]
        corr.append({"position": pos, "spearman": spearman(scores, [weights[f] for f in FEATURES])})
    return snaps, truth, corr


def _stream(task: str, model: str, m: StreamMetrics, n: int, alerts: list, rankings: dict | None = None) -> dict:
    s = {"task": task, "model": model, "instances": n, "labelled": m.n, "cumulative": m.cumulative(),
         "window": m.windowed(), "history": m.history(), "alerts": alerts, "rankings": {}}
    if rankings:
        snaps, truth, corr = rankings
        s.update(rankings={"mdi": snaps}, truth=truth, truth_correlation={"mdi": corr})
    return s


def synthetic_report(n: int = 20_000, drift: int = 10_000) -> dict:
    """Two configurations; a classification stream with drift alerts and a ranking with the
    truth, and a two-target regression stream."""
    configurations = []
    for k, (name, quality, rate) in enumerate([("forest-10", 0.8, 41_250.5), ("forest-30", 0.9, 17_980.25)]):
        alerts = [{"position": drift + 150 + 250 * k, "source": "detector", "level": "drift", "feature": None},
                  {"position": drift + 60, "source": "detector", "level": "warning", "feature": None},
                  {"position": 4_200 + k, "source": "detector", "level": "warning", "feature": None}]
        if k == 0:
            alerts += [{"position": 15_000 + i, "source": "learner", "level": "warning", "feature": f"f{i}"}
                       for i in range(6)]
        configurations.append({
            "name": name, "config": {"profile": "default", "trees": 10 + 20 * k},
            "throughput": {"instances": 2 * n, "seconds": 2 * n / rate, "per_second": rate},
            "memory": {"peak_bytes": 310_000_000 + k * 200_000_000, "state_bytes": 2_500_000 * (k + 1)},
            "streams": {
                "sensors/clf": _stream("classification", f"forest ({name})",
                                       _metrics("classification", n, drift, quality, k), n, alerts,
                                       _rankings(k, n, drift)),
                "plant-7/reg": _stream("regression", f"tree ({name})",
                                       _metrics("regression", n, drift, quality, 10 + k), n, []),
            }})
    return {"version": 1, "mode": "replay",
            "source": {"topic": "instances", "partitions": {0: [0, n], 1: [5, n + 5]}, "streams": None,
                       "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"},
            "records": {"read": 2 * n + 7, "decoded": 2 * n, "malformed": {"bad msgpack": 5, "unknown schema": 2}},
            "configurations": configurations,
            "timings": {"seconds": 3.25}}


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (no imaging library needed)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    data = synthetic_report()
    return out, data, write_report(out, data)


def test_report_json_round_trips_with_sorted_keys(written):
    out, data, paths = written
    text = paths["report.json"].read_text()
    loaded = json.loads(text)
    assert loaded == report.json_safe(data)
    assert text == json.dumps(loaded, indent=1, sort_keys=True, allow_nan=False) + "\n"
    assert sorted(loaded) == ["configurations", "mode", "records", "source", "timings", "version"]
    assert loaded["source"]["partitions"] == {"0": [0, 20_000], "1": [5, 20_005]}
    stream = loaded["configurations"][0]["streams"]["sensors/clf"]
    assert stream["cumulative"]["accuracy"] == pytest.approx(data["configurations"][0]["streams"]["sensors/clf"]
                                                             ["cumulative"]["accuracy"])
    assert len(stream["history"]) == 80 and stream["rankings"]["mdi"][0]["position"] == 1000


def test_nan_and_numpy_values_become_plain_json(tmp_path):
    data = synthetic_report(n=3_000, drift=1_000)
    s = data["configurations"][0]["streams"]["sensors/clf"]
    s["cumulative"]["kappa"] = float("nan")
    s["instances"] = np.int64(3_000)
    s["truth_correlation"]["mdi"][0]["spearman"] = np.float64("nan")
    loaded = json.loads(write_report(tmp_path, data)["report.json"].read_text())
    s = loaded["configurations"][0]["streams"]["sensors/clf"]
    assert s["cumulative"]["kappa"] is None and s["instances"] == 3_000
    assert s["truth_correlation"]["mdi"][0]["spearman"] is None


def test_html_is_self_contained_and_its_images_decode(written):
    out, data, paths = written
    page = paths["report.html"].read_text()
    assert "http://" not in page and "https://" not in page
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing loaded from elsewhere
    images = IMG.findall(page)
    # throughput; per stream the metric; the classification stream's ranking heatmap
    assert len(images) == 4 == page.count("<img ")
    for encoded, width, height in images:
        png = base64.b64decode(encoded, validate=True)
        assert _png_size(png) == (int(width), int(height))
        assert int(width) == 1000 and 250 <= int(height) <= 450
    import matplotlib.image

    pixels = matplotlib.image.imread(BytesIO(base64.b64decode(images[1][0])), format="png")
    assert pixels.shape[:2] == (450, 1000) and pixels.std() > 0.05  # drawn, not blank
    written_pngs = sorted(p for p in paths if p.endswith(".png"))
    assert len(written_pngs) == 4 and all((out / p).stat().st_size > 5_000 for p in written_pngs)


def test_html_tells_what_a_reader_needs(written):
    _, data, paths = written
    page = paths["report.html"].read_text()
    text = re.sub(r"<[^>]+>", " ", page)
    for expected in ("forest-10", "forest-30", "sensors/clf", "plant-7/reg", "41,250", "17,980",
                     "295.6 MiB", "2.4 MiB", "bad msgpack", "unknown schema", "Rankings against the truth"):
        assert expected in text, expected
    c0 = data["configurations"][0]["streams"]["sensors/clf"]["cumulative"]["accuracy"]
    c1 = data["configurations"][1]["streams"]["sensors/clf"]["cumulative"]["accuracy"]
    assert c1 > c0 and f'<td class="n first best">{c1:.4f}</td>' in page  # the better one in bold
    # 9 alerts of forest-10: the count by level and the earliest 5 listed
    assert re.search(r"Alerts of forest-10</b>: 9 \(1 drift, 8 warning\) \(the earliest 5 below\)", page)
    section = page[page.index("Alerts of forest-10"):page.index("Alerts of forest-30")]
    listed = re.findall(r'<tr><td class="n">([\d,]+)</td>', section)
    assert listed == ["4,200", "10,060", "10,150", "15,000", "15,001"]


def test_html_escapes_stream_ids(tmp_path):
    data = synthetic_report(n=2_000, drift=1_000)
    for c in data["configurations"]:
        c["streams"]['<script>alert("x")</script>'] = c["streams"].pop("plant-7/reg")
    page = write_report(tmp_path, data)["report.html"].read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_without_matplotlib_json_and_plain_html_are_written(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "plots_available", lambda: False)
    paths = write_report(tmp_path, synthetic_report(n=2_000, drift=1_000))
    assert sorted(paths) == ["report.html", "report.json"]
    page = paths["report.html"].read_text()
    assert "<img" not in page and "streamforest[report]" in page and "sensors/clf" in page
    assert json.loads(paths["report.json"].read_text())["version"] == 1
    assert not (tmp_path / "plots").exists()


def test_the_report_module_does_not_import_matplotlib():
    code = ("import sys; import worker.tools.evaluate.report, worker.tools.evaluate.plots, worker.tools.evaluate.scores; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_many_streams_are_bounded_and_the_rest_named(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "MAX_STREAMS", 2)
    data = synthetic_report(n=1_000, drift=500)
    for c in data["configurations"]:
        base = c["streams"]["plant-7/reg"]
        for i in range(5):
            c["streams"][f"extra{i}"] = dict(base, labelled=i)  # fewer labelled rows than the others
    paths = write_report(tmp_path, data)
    page = paths["report.html"].read_text()
    assert page.count('<section class="stream">') == 2
    assert "5 stream(s) with fewer labelled rows have no section" in page
    assert all(f"<code>extra{i}</code>" in page for i in range(5))  # still in the summary table
    assert not any("extra" in p for p in paths)


def test_heatmap_rows_put_true_features_first():
    ranking = [[(1000.0, {"f9": 1.0, "f1": 0.4, "f2": 0.2})]]
    truth = [(0.0, {"f2": 1.0, "f1": 0.5, "f9": 0.0})]
    assert plots.heat_features(ranking, truth, 2) == (["f2", "f1"], 3)
    assert plots.heat_features(ranking, None, 5) == (["f9", "f1", "f2"], 3)


def test_served_report_without_throughput_alerts_or_rankings(tmp_path):
    data = synthetic_report(n=2_000, drift=1_000)
    data["mode"] = "served"
    for c in data["configurations"]:
        c.update(throughput={}, memory={})
        for s in c["streams"].values():
            s.update(alerts=[], rankings={})
            s.pop("truth", None)
            s.pop("truth_correlation", None)
    paths = write_report(tmp_path, data)
    page = paths["report.html"].read_text()
    assert sorted(p for p in paths if p.endswith(".png")) == [
        f"plots/{plots.file_stem('plant-7/reg')}-metric.png", f"plots/{plots.file_stem('sensors/clf')}-metric.png"]
    assert "No drift alerts" not in page and "no throughput measured" in page


@pytest.mark.parametrize("module", ["report", "plots", "headline", "summary", "ranges"])
def test_docstring_examples(module):
    # worker/tools/evaluate is outside pytest's doctest paths: run them here
    import importlib

    module = importlib.import_module(f"worker.tools.evaluate.{module}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0



def test_the_summary_reads_at_80_columns(capsys, monkeypatch):
    """Two configurations, two tasks and long names: every line fits 80 columns and every
    number stands whole on one line (names fold)."""
    from rich.console import Console

    from worker.tools.evaluate import summary

    monkeypatch.setattr(summary, "_tty", lambda: True)
    monkeypatch.setattr("rich.console.Console", lambda **kw: Console(width=80, **kw))
    stream = {"task": "classification", "instances": 90624, "labelled": 90624,
              "alerts": [{}] * 17, "cumulative": {"accuracy": 0.8912},
              "window": {"accuracy": 0.87}}
    bikes = {"task": "regression", "instances": 20000, "labelled": 20000, "alerts": [],
             "cumulative": {"mae": 34.0}, "window": {"mae": 30.1}}
    cfgs = [{"name": name, "throughput": {"per_second": 21345.2},
             "streams": {"electricity-of-a-long-name": stream, "bikes": bikes}}
            for name in ("default", "a-much-longer-candidate-name")]
    summary.print_summary({"mode": "replay", "records": {"read": 110624, "malformed": {}},
                           "configurations": cfgs})
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    for number in ("90,624", "accuracy 0.8912", "0.8700", "mae 34.0000", "30.1000", "17"):
        assert number in out
    assert "instances/s: default 21,345, a-much-longer-candidate-name 21,345" in out
