"""Start the feature-set digests when their test is collected, and run that test last.

See :mod:`tests.determinism.runs`: the other CPU feature sets compile numba's kernels in the
background while the rest of the suite runs. Under pytest-xdist the controller starts them
(``tests/conftest.py``) and a worker only finds the directory they write to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.determinism.runs import RUNS, FeatureSetRuns, cache_root, shared_work

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
    run_dir = getattr(config, "workerinput", {}).get("streamforest_run_dir")  # tests/conftest.py
    if run_dir is not None:  # a pytest-xdist worker: the controller started the runs
        config.stash[RUNS] = FeatureSetRuns(cache_root(config), shared_work(Path(run_dir)), owner=False)
    else:
        config.stash[RUNS] = FeatureSetRuns(cache_root(config)).start()


def pytest_sessionfinish(session):
    runs = session.config.stash.get(RUNS, None)
    if runs is not None:
        runs.close()
