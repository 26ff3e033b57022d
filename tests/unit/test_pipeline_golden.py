"""The pipeline's outputs for fixed streams, seeds and configurations never change unnoticed.

The cases and their digests live in :mod:`tests.determinism.cases` (with the history of every
change of the digests); this module checks them in process, on this machine's CPU.
``tests/determinism/test_cpu_feature_sets.py`` checks the same digests under other CPU
feature sets. A deliberate change of outputs updates them in the same commit, with the reason.
"""

from __future__ import annotations

import pytest

from tests.determinism import cases


@pytest.mark.parametrize("name", list(cases.PIPELINES))
def test_outputs_equal_the_pinned_digests(name):
    _, digest, n_alerts, n_rankings = cases.PIPELINES[name]
    got, alerts, rankings = cases.pipeline_case(name)
    assert (alerts, rankings) == (n_alerts, n_rankings)
    assert got == digest


@pytest.mark.parametrize("name", list(cases.WIRE))
def test_output_messages_equal_the_pinned_digests(name):
    """Decoding, learning and encoding two interleaved streams in consume batches of 700
    gives the pinned message bytes, in the same order."""
    assert cases.wire_case(name) == cases.WIRE[name][1]
