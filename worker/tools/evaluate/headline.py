"""What sums a stream up in every view of an evaluation (the report, its plots, the printed
table), and the order streams and features are listed in."""

from __future__ import annotations

import re

#: the metric a stream is summed up by, and whether higher is better
MAIN_METRIC = {"classification": ("accuracy", True), "regression": ("mae", False)}


def natural_key(text: str) -> tuple:
    """Sort key reading digit runs as numbers: ``f2`` before ``f10``.

    Examples
    --------
    >>> sorted(["f10", "f2", "g1", "f1"], key=natural_key)
    ['f1', 'f2', 'f10', 'g1']
    """
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", str(text)) if p)
