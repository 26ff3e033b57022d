"""Every learner family answers the same bits as pinned, and a restored copy continues exactly.

The cases (every family of the registry with the parameters a user gets, test-then-train on a
fixed stream) and their digests are in :mod:`tests.determinism.cases`; these checks run in
process on this machine's CPU, ``tests/determinism/test_cpu_feature_sets.py`` under others.
"""

from __future__ import annotations

import pytest

from models import registry
from tests.determinism import cases


@pytest.mark.parametrize("name", registry.names())
def test_answers_and_state_equal_the_pinned_digest(name):
    assert cases.learner_run(name)[0] == cases.LEARNERS[name]


@pytest.mark.parametrize("case", cases.state_cases())
def test_a_state_restored_at_the_cut_continues_exactly(case):
    after, state = cases.restore_case(case)
    assert cases.restore_case(case, state)[0] == after
