"""Start the feature-set digests when their test is collected, and run that test last.

See :mod:`tests.determinism.runs`: the other CPU feature sets compile numba's kernels in the
background while the rest of the suite runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.determinism.runs import RUNS, FeatureSetRuns

HERE = Path(__file__).resolve().parent


def _ours(item) -> bool:
    return Path(str(item.path)).resolve().parent == HERE


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    items.sort(key=_ours)  # stable: every other test keeps its order, these run last


def pytest_collection_finish(session):
    config = session.config
    if config.option.collectonly or not any(map(_ours, session.items)):
        return
    cache = getattr(config, "cache", None)
    root = Path(cache.mkdir("numba-feature-sets")) if cache is not None \
        else Path(session.startpath) / ".numba-feature-sets"
    config.stash[RUNS] = FeatureSetRuns(root).start()


def pytest_sessionfinish(session):
    runs = session.config.stash.get(RUNS, None)
    if runs is not None:
        runs.close()
