"""Every results file under ``tests/benchmarks/*/results/`` names the run that wrote it.

A results file is written by its script through ``tests.benchmarks.common.write_results``
(or, for a file of several sections, ``stamp_markdown`` in each), which stamps the commit,
the machine, the command and the date: a figure whose run cannot be named is not a result.
A JSON file is the data of the markdown file of the same name, or carries its own stamp.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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
    assert STAMP.search(path.read_text()), \
        f"{path.name} names no commit, machine, command and date"


@pytest.mark.parametrize("path", [p for p in RESULTS if p.suffix == ".json"],
                         ids=_name)
def test_a_json_results_file_is_stamped_or_a_stamped_files_data(path):
    data = json.loads(path.read_text())
    companion = path.with_suffix(".md")
    assert "stamp" in data or (companion.exists() and STAMP.search(companion.read_text())), \
        f"{path.name}: no stamp, and no stamped {companion.name} beside it"


def test_results_files_are_markdown_or_json():
    assert {p.suffix for p in RESULTS} <= {".md", ".json"}


SCRIPTS = sorted(Path(__file__).resolve().parents[1].glob("benchmarks/*/*.py"))


@pytest.mark.parametrize("path", [p for p in SCRIPTS if "__main__" in p.read_text()],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_benchmark_script_parses_its_arguments(path):
    """``script --help`` prints the usage and stops: a script that ignored its arguments ran
    in full and stamped its results file with the command ``... --help``."""
    assert "ArgumentParser(" in path.read_text(), f"{path.name} ignores its arguments"


def test_stamps_name_no_help_run():
    assert not [p.name for p in RESULTS if re.search(r"^Command: `python \S+ .*--help", p.read_text(),
                                                        re.M)]
