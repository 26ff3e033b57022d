"""The demo's view: the figures per stream, the live ``rich`` table and the plain-line fallback."""

from __future__ import annotations

import doctest
import io

import numpy as np
from rich.console import Console

from worker.tools.dev import demo
from worker.tools.dev.demo import Board, watch

NAMES = [f"x{j}" for j in range(4)]
W = np.tile([0.1, 0.9, 0.5, 0.2], (100, 1))  # true weights: x1, x2, x3 lead


def board(feed: int = 3) -> Board:
    b = Board({"hyperplane": 100, "bikes": 50}, {"hyperplane": (NAMES, W)}, feed=feed)
    for i in range(40):
        b.prediction({"stream": "hyperplane", "y_true": 1, "y_pred": int(i % 4 != 0)})
    for _ in range(10):
        b.prediction({"stream": "bikes", "y_true": [1.0, 3.0], "y_pred": [2.0, 3.0]})
    b.prediction({"stream": "bikes", "y_true": None, "y_pred": [2.0, 3.0]})  # unlabelled
    b.ranking({"stream": "hyperplane", "method": "block_mdi", "features": ["x1", "x3", "x0", "x2"],
               "n_seen": 40})
    b.ranking({"stream": "hyperplane", "method": "orf_mdg", "features": ["x0"], "n_seen": 40})
    b.ranking({"stream": "bikes", "method": "symrf", "features": ["hr", "temp"], "n_seen": 10})
    for k in range(5):
        b.alert({"stream": "hyperplane", "source": "adwin", "level": "drift", "position": 10 * k,
                 "detail": f"prequential error changed ({k})"})
    b.tick(0.0)
    b.done["hyperplane"] += 20
    b.tick(2.0)
    return b


def rendered(renderable, width: int = 120) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_rows_hold_every_figure_of_a_stream():
    rows = {r["stream"]: r for r in board().rows()}
    hyper, bikes = rows["hyperplane"], rows["bikes"]
    assert hyper["done"] == "60/100" and hyper["ips"] == "10"  # 20 more in 2 s
    assert hyper["score"] == "acc 0.750"
    assert hyper["top"] == "x1, x3, x0" and hyper["true"] == "x1, x2, x3"
    assert hyper["alerts"] == "5"
    # regression: the mean absolute error over the targets of the labelled rows
    assert bikes["done"] == "11/50" and bikes["score"] == "mae 0.500"
    assert bikes["top"] == "hr, temp" and bikes["true"] == "" and bikes["alerts"] == "0"


def test_a_stream_with_two_shown_rankings_shows_the_preferred_one():
    b = board()
    b.ranking({"stream": "bikes", "method": "block_mdi", "features": ["temp", "hr"], "n_seen": 20})
    b.ranking({"stream": "bikes", "method": "symrf", "features": ["hum", "hr"], "n_seen": 30})
    assert {r["stream"]: r for r in b.rows()}["bikes"]["top"] == "temp, hr"


def test_the_table_has_one_row_per_stream_and_the_feed_the_latest_alerts():
    text = rendered(board().renderable())
    lines = text.splitlines()
    hyper = next(line for line in lines if line.strip().startswith("hyperplane"))
    for cell in ("60/100", "acc 0.750", "x1, x3, x0", "x1, x2, x3"):
        assert cell in hyper
    assert hyper.rstrip().endswith("5")
    assert any(line.strip().startswith("bikes") and "mae 0.500" in line for line in lines)
    # the feed is bounded: the 3 newest of 5 alerts, oldest first
    feed = text.split("recent drift alerts")[1]
    assert "(0)" not in feed and "(1)" not in feed
    assert feed.index("(2)") < feed.index("(3)") < feed.index("(4)")
    assert "at 40" in feed and "adwin" in feed


def test_a_narrow_terminal_keeps_one_line_per_alert():
    b = board()
    b.alert({"stream": "hyperplane", "source": "adaptive_random_forest", "level": "drift",
             "position": 1099, "detail": "4 of 10 trees replaced after their drift detector "
                                         "fired " + "x" * 200})
    feed = rendered(b.feed(), width=80)
    line = next(line for line in feed.splitlines() if "adaptive_random_forest" in line)
    assert "at 1099" in line and "drift" in line and line.rstrip().endswith("…")
    assert all(len(line) <= 80 for line in rendered(b.renderable(), width=80).splitlines())


def test_plain_text_is_the_fallback_and_the_final_view():
    text = board().text()
    header, hyper, bikes = text.splitlines()
    assert header.split()[:2] == ["stream", "done"] and header.endswith("alerts")
    assert hyper.split()[:5] == ["hyperplane", "60/100", "10", "acc", "0.750"]
    assert bikes.startswith("bikes") and " mae " in bikes


class FakeView:
    """Delivers one alert and finishes the streams at the second poll."""

    def __init__(self, b: Board):
        self.board = b
        self.polls = 0

    def poll(self, seconds: float) -> list[str]:
        self.polls += 1
        if self.polls == 2:
            for s, n in self.board.totals.items():
                self.board.done[s] = n
            return [self.board.alert({"stream": "bikes", "source": "adwin", "level": "drift",
                                      "position": 42, "detail": "prequential error changed"})]
        return []


class Running:
    def poll(self):
        return None


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_a_terminal_the_view_prints_new_alerts_and_the_table_as_lines():
    out = io.StringIO()
    assert watch(FakeView(board()), [Running()], out, deadline=float("inf"))
    text = out.getvalue()
    assert "\x1b[" not in text  # no terminal control sequences
    assert "! drift alert  bikes" in text and "at instance     42" in text
    assert text.count("stream ") == 2 and "100/100" in text.splitlines()[-2]


def test_on_a_terminal_the_table_is_updated_in_place(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    out = Terminal()
    assert watch(FakeView(board()), [Running()], out, deadline=float("inf"))
    text = out.getvalue()
    assert "\x1b[" in text  # cursor movements: the table is redrawn, not appended
    assert "! drift alert" not in text
    assert "100/100" in text and "50/50" in text and "at 42" in text


def test_the_view_stops_when_a_worker_exits():
    class Exited:
        def poll(self):
            return 1

    assert not watch(FakeView(board()), [Exited()], io.StringIO(), deadline=float("inf"))


def test_the_examples_of_the_demo_module_run():
    assert doctest.testmod(demo).failed == 0
