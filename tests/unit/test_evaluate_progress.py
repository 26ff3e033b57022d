"""``streamforest evaluate``'s progress when stderr is not a terminal: a plain line every 10 s
(rows done, rows/s), and one at the end; nothing with --no-progress."""

from __future__ import annotations

import io

from worker.tools.evaluate.cli import _Progress


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_line_every_ten_seconds_and_at_the_end():
    out, clock = io.StringIO(), _Clock()
    with _Progress(10_000, False, stream=out, clock=clock) as advance:
        clock.t = 104.0
        advance(1_000)  # 4 s: too soon
        assert out.getvalue() == ""
        clock.t = 110.0
        advance(1_500)  # 10 s: 2,500 rows, 250 rows/s
        clock.t = 115.0
        advance(2_000)  # 5 s after the last line: too soon
        clock.t = 120.0
        advance(500)  # 20 s: 5,000 rows
    clock.t = 125.0
    assert out.getvalue().splitlines() == [
        "evaluate: 2,500/10,000 rows (25.0%), 250 rows/s",
        "evaluate: 5,000/10,000 rows (50.0%), 250 rows/s",
        "evaluate: 5,000/10,000 rows (50.0%), 250 rows/s",  # the final line, at exit
    ]


def test_an_empty_range_says_rows_without_a_share():
    out, clock = io.StringIO(), _Clock()
    with _Progress(0, False, stream=out, clock=clock):
        clock.t = 101.0
    assert out.getvalue() == "evaluate: 0/0 rows, 0 rows/s\n"


def test_no_progress_prints_nothing():
    out, clock = io.StringIO(), _Clock()
    with _Progress(100, True, stream=out, clock=clock) as advance:
        clock.t = 200.0
        advance(100)
    assert out.getvalue() == ""


def test_no_final_line_when_the_replay_fails():
    out, clock = io.StringIO(), _Clock()
    try:
        with _Progress(100, False, stream=out, clock=clock) as advance:
            advance(10)
            raise RuntimeError("brokers gone")
    except RuntimeError:
        pass
    assert out.getvalue() == ""
