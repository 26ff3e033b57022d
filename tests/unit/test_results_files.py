"""Every results file under ``tests/benchmarks/*/results/`` names the run that wrote it.

A results file is written by its script through ``tests.benchmarks.common.write_results``
(or, for a file of several sections, ``stamp_markdown`` in each), which stamps the commit,
the machine, the command and the date: a figure whose run cannot be named is not a result.
A JSON file is the data of the markdown file of the same name, or carries its own stamp.

:data:`BEFORE_STAMPS` lists the files of runs made before the stamp existed (ranking runs of up
to hours each): each names the last commit before its run's date instead. The
list may only shrink: a file regenerated since must leave it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

#: runs from before the stamp: the last commit before their date, said so in the file
BEFORE_STAMPS = frozenset({"rankings/rankings_drift_windows_s11-20.md"})
BEFORE = re.compile(r"^Commit: `[0-9a-f]{12}`, the last commit before the run's date \(this "
                    r"run predates the script's stamp", re.M)
RESULTS = sorted(Path(__file__).resolve().parents[1].glob("benchmarks/*/results/*"))
STAMP = re.compile(r"^Commit: `[0-9a-f]{7,40}(\+dirty)?`  \nMachine: .+  \nCommand: `python "
                   r"\S+.*`  \nDate: \d{4}-\d\d-\d\d \d\d:\d\d UTC$", re.M)


def _name(path: Path) -> str:
    """``kind/file`` of a results file."""
    return f"{path.parent.parent.name}/{path.name}"


def test_there_are_results_files():
    assert len(RESULTS) > 40


@pytest.mark.parametrize("path", [p for p in RESULTS if p.suffix == ".md"],
                         ids=_name)
def test_a_markdown_results_file_is_stamped(path):
    text = path.read_text()
    if _name(path) in BEFORE_STAMPS:
        assert BEFORE.search(text) and not STAMP.search(text), \
            f"{_name(path)} is stamped now: take it off BEFORE_STAMPS"
    else:
        assert STAMP.search(text), f"{path.name} names no commit, machine, command and date"


@pytest.mark.parametrize("path", [p for p in RESULTS if p.suffix == ".json"],
                         ids=_name)
def test_a_json_results_file_is_stamped_or_a_stamped_files_data(path):
    data = json.loads(path.read_text())
    companion = path.with_suffix(".md")
    assert "stamp" in data or (companion.exists() and (
        STAMP.search(companion.read_text()) or _name(companion) in BEFORE_STAMPS)), \
        f"{path.name}: no stamp, and no stamped {companion.name} beside it"


def test_every_run_from_before_the_stamp_is_still_there():
    assert BEFORE_STAMPS <= {_name(p) for p in RESULTS}


def test_results_files_are_markdown_or_json():
    assert {p.suffix for p in RESULTS} <= {".md", ".json"}
