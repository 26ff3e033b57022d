"""The core's elementary functions: as accurate as the C library's, defined everywhere.

Their reason to exist, the same bits on every CPU, is checked across CPU feature sets by
``tests/determinism/test_cpu_feature_sets.py`` (the ``functions`` digest among others); here,
accuracy against glibc (the reference a user would otherwise get) and the edge cases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.core import _fmath as fm
from models.core._jit import njit


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place (same-sign finite values)."""
    return np.abs(a.view(np.int64) - b.view(np.int64))


# not cached: its cache key holds the type of the function it is passed, which numba keeps by
# weak reference, and an index written by another process then fails to compare
# ("underlying object has vanished") when this one saves a new entry
@njit(cache=False)
def _map(f, x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = f(x[i])
    return out


RNG = np.random.default_rng(2024)
SAMPLES = {
    "exp": (fm.exp, math.exp, np.concatenate([RNG.uniform(-745, 709.7, 40000),
                                              RNG.uniform(-1, 1, 40000), RNG.normal(0, 1e-9, 1000)]), 1),
    "log": (fm.log, math.log, np.concatenate([np.exp(RNG.uniform(-700, 700, 40000)),
                                              RNG.uniform(0.5, 2.0, 40000), [5e-324, 1e-310, 1.0]]), 1),
    "log2": (fm.log2, math.log2, np.concatenate([np.exp(RNG.uniform(-700, 700, 40000)),
                                                 RNG.uniform(0.5, 2.0, 40000),
                                                 np.arange(1.0, 3000.0)]), 2),
    "erf": (fm.erf, math.erf, np.concatenate([RNG.uniform(-7, 7, 40000), RNG.uniform(-1, 1, 40000),
                                              RNG.normal(0, 1e-6, 1000)]), 2),
}


def test_the_values_are_the_pinned_ones():
    from tests.determinism import cases

    assert cases.functions_digest() == cases.FUNCTIONS


@pytest.mark.parametrize("name", list(SAMPLES))
def test_within_a_few_ulps_of_glibc(name):
    ours, theirs, x, bound = SAMPLES[name]
    got = _map(ours, x)
    want = np.array([theirs(v) for v in x])
    worst = int(_ulps(got, want).max())
    assert worst <= bound, f"{name}: {worst} ulps at x={x[_ulps(got, want).argmax()]!r}"
    assert (got == want).mean() > 0.7  # mostly the very same double


def test_lgamma_within_1e_14_of_glibc():
    x = np.concatenate([RNG.uniform(1e-4, 60.0, 30000), RNG.uniform(60.0, 1e7, 3000), [0.5, 1.5, 3.0]])
    got = _map(fm.lgamma, x)
    want = np.array([math.lgamma(v) for v in x])
    assert np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))) < 1e-14


def test_edge_values():
    inf, nan = math.inf, math.nan
    assert (fm.exp(inf), fm.exp(-inf), fm.exp(709.79), fm.exp(-746.0)) == (inf, 0.0, inf, 0.0)
    assert math.isnan(fm.exp(nan)) and math.isnan(fm.log(nan)) and math.isnan(fm.erf(nan))
    assert (fm.log(0.0), fm.log(inf), fm.log2(0.0), fm.log2(inf)) == (-inf, inf, -inf, inf)
    assert math.isnan(fm.log(-1.0)) and math.isnan(fm.log2(-0.5)) and math.isnan(fm.lgamma(-1.0))
    assert fm.log(5e-324) == math.log(5e-324)  # the smallest subnormal
    assert (fm.erf(inf), fm.erf(-inf), fm.erf(-0.0), fm.erf(6.0)) == (1.0, -1.0, 0.0, 1.0)
    assert [fm.log2(2.0 ** k) for k in range(-1074, 1024)] == list(map(float, range(-1074, 1024)))
    assert fm.exp(fm.log(7.0)) == pytest.approx(7.0, rel=1e-15)
    assert (fm.lgamma(0.0), fm.lgamma(1.0), fm.lgamma(2.0)) == (inf, 0.0, 0.0)


def test_powers():
    assert [fm.ipow(0.999, n) for n in (0, 1, 2, 10, 192)] == pytest.approx(
        [0.999 ** n for n in (0, 1, 2, 10, 192)], rel=1e-14)
    assert fm.ipow(2.0, 10) == 1024.0 and fm.ipow(-2.0, 3) == -8.0
    assert fm.pow_positive(0.5, 2.5) == pytest.approx(0.5 ** 2.5, rel=1e-15)
    assert (fm.pow_positive(0.0, 1.0), fm.pow_positive(0.0, -1.0), fm.pow_positive(3.0, 0.0)) \
        == (0.0, math.inf, 1.0)


def test_array_forms_equal_the_scalar_ones():
    x = RNG.uniform(-20, 20, (7, 5))
    assert fm.exp_array(x).shape == (7, 5)
    assert fm.exp_array(x).ravel().tolist() == [fm.exp(v) for v in x.ravel()]
    assert fm.log_array(np.abs(x)).ravel().tolist() == [fm.log(v) for v in np.abs(x).ravel()]


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-700.0, max_value=700.0))
def test_exp_and_log_invert_each_other(x):
    y = fm.exp(x)
    assert y > 0.0
    assert abs(fm.log(y) - x) <= 4 * math.ulp(max(abs(x), 1.0))


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-10.0, max_value=10.0), st.floats(min_value=1e-9, max_value=1.0))
def test_erf_is_odd_bounded_and_increasing(x, step):
    assert fm.erf(-x) == -fm.erf(x)
    assert -1.0 <= fm.erf(x) <= 1.0
    assert fm.erf(x + step) >= fm.erf(x)
