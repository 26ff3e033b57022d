"""Every output and checkpoint is the same bits under three CPU feature sets, and a state written
under one continues identically under another.

One machine emulates three CPUs (:mod:`tests.determinism.feature_sets`): itself; the same
without AVX-512; and without AVX2 or FMA either (x86-64-v2). Each computes every digest of
:mod:`tests.determinism.cases` (the golden pipelines, the wire messages, every learner family
with the parameters a user gets, the states of pipelines and learners checkpointed halfway and
what they answer after the cut), each in a process of its own (:mod:`tests.determinism.run`;
the machine's own in the environment it was given, less the feature settings). Each also restores the states another
set wrote and continues, as a partition moved to a node with another CPU does. A fourth CPU,
an Intel Nehalem emulated by QEMU (``.ci/run`` installs it; under CI the test fails without
it), computes the pipelines and the messages and continues the native states.

The feature sets other than the machine's own compile numba's kernels for their own targets,
into caches of their own (pytest's cache directory, so a second run reuses them): about a
minute and a half on a first run, on two cores. Every run, the restores across sets and the
emulated CPU's (about 40 s) included, starts at collection so that it overlaps the rest of the
suite; this test runs last and collects them (``conftest.py``, ``runs.py``).
"""

from __future__ import annotations

import json

import pytest

from tests.determinism import cases
from tests.determinism.runs import RUNS, FeatureSetRuns, cache_root, under_ci

pytestmark = pytest.mark.slow  # every kernel compiled for two more CPU targets


@pytest.fixture(scope="module")
def runs(request) -> dict[str, dict]:
    """Per feature set: its digests, and those of another set's states continued under it."""
    started = request.config.stash.get(RUNS, None)  # by conftest.py, at collection
    if started is None:
        started = FeatureSetRuns(cache_root(request.config)).start()
        request.addfinalizer(started.close)
    if started.emulated is None and under_ci():
        pytest.fail("qemu-x86_64-static is not installed: .ci/run installs it (qemu-user-static)")
    return started.finish()


def test_the_feature_sets_are_different_cpus(runs):
    sets = {name: run["feature_set"] for name, run in runs.items()}
    if "nehalem_emulated" in sets:  # what numpy itself found on the emulated CPU
        assert sets["nehalem_emulated"]["numpy_dispatch"] == []
    assert sets["no_avx512"]["numba_cpu"] == "x86-64-v3"
    assert sets["x86_64_v2"]["numba_cpu"] == "x86-64-v2"
    assert not any("AVX512" in t or t == "X86_V4" for t in sets["no_avx512"]["numpy_dispatch"])
    assert sets["x86_64_v2"]["numpy_dispatch"] == []  # numpy's baseline only
    assert "-FMA" in sets["x86_64_v2"]["glibc_tunables"]


@pytest.mark.parametrize("part", ["functions", "pipelines", "wire", "learners", "states",
                                  "after_cut"])
def test_every_digest_is_the_same_under_every_feature_set(runs, part):
    native = runs["native"][part]
    sets = {name: got for name, got in runs.items() if part in got}
    assert set(native) and all(set(got[part]) == set(native) for got in sets.values())
    differing = {key: {name: got[part][key] for name, got in sets.items()}
                 for key in native if len({json.dumps(got[part][key]) for got in sets.values()}) > 1}
    assert not differing, f"{part} that depend on the CPU: {json.dumps(differing, indent=1)}"


def test_the_digests_are_the_pinned_ones(runs):
    got = runs["native"]
    assert got["pipelines"] == {n: [d, a, r] for n, (_, d, a, r) in cases.PIPELINES.items()}
    assert got["wire"] == {n: d for n, (_, d) in cases.WIRE.items()}
    assert got["learners"] == cases.LEARNERS
    assert got["functions"] == {"fmath": cases.FUNCTIONS}


def test_a_state_written_under_one_cpu_continues_identically_under_another(runs):
    after_cut = runs["native"]["after_cut"]
    for name, got in runs.items():
        assert got["restored"] == after_cut, f"{name} restoring another set's states"
