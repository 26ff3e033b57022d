"""Every file the README and the docs name exists: a path in backticks (``tests/...``,
``worker/...``, with ``:name`` a function or class defined in it) and a relative link target.
A results file that moves or a module that is renamed must take its citations along."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# a repository path in backticks; globs and placeholders (*, {}, [], <>) name no one file
CITED = re.compile(r"`((?:tests|docs|worker|models|schemas|deploy|\.ci)/[^`\s]+?)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _citations(page: Path) -> list[str]:
    text = page.read_text()
    paths = [m.group(1).rstrip(".,;:)") for m in CITED.finditer(text)]
    links = [m.group(1).split("#")[0] for m in LINK.finditer(text)]
    links = [str((page.parent / t).resolve().relative_to(REPO)) for t in links
             if t and "://" not in t and not t.startswith("mailto:")]
    return [p for p in paths + links if not any(c in p for c in "*{}[]<>")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_file_a_page_names_exists(page):
    missing = []
    for cited in _citations(page):
        path, _, name = cited.partition(":")
        target = REPO / path
        if not target.exists():
            missing.append(cited)
        elif name and not re.search(rf"^\s*(?:def|class) {re.escape(name)}\b", target.read_text(),
                                    re.M):
            missing.append(cited)
    assert not missing, f"{page.name} names what is not there: {missing}"


def test_the_pages_name_files():
    assert sum(len(_citations(p)) for p in PAGES) > 100
