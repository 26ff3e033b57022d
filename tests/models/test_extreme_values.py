"""Every learner answers finite numbers for any input the contracts accept.

The contracts refuse feature values and targets beyond +-1e100 (``schemas.messages``:
their squares, summed by every learner's statistics, would overflow to infinity and the
predictions turn NaN). Within the bound the answers must stay finite whatever the values:
the bound itself, tiny subnormals, constant columns, huge and tiny values mixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import registry
from models.registry import DETECTOR, REGRESSION
from schemas.values import MAX_MAGNITUDE

EDGES = [MAX_MAGNITUDE, -MAX_MAGNITUDE, 5e-324, -5e-324, 0.0, 1e-300, 1.0, -1.0, 9.5e99]
values = st.one_of(st.sampled_from(EDGES), st.floats(-MAX_MAGNITUDE, MAX_MAGNITUDE))
LEARNERS = [n for n in registry.names() if DETECTOR not in registry.get(n).roles]


def _finite(answer) -> bool:
    if isinstance(answer, dict):
        return all(_finite(v) for v in answer.values())
    a = np.asarray(answer)
    return a.dtype.kind not in "fc" or bool(np.isfinite(a).all())


def _answers(model, X, regression: bool) -> list:
    out = []
    if hasattr(model, "predict_proba_many"):
        out.append(model.predict_proba_many(X))
    if hasattr(model, "predict_many") and regression:
        out.append(np.asarray(model.predict_many(X), dtype=np.float64))
    if hasattr(model, "importances"):
        out.append(model.importances())
    return out


@pytest.mark.parametrize("name", LEARNERS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_answers_stay_finite_for_values_within_the_bound(name, data):
    spec = registry.get(name)
    d = 4
    rows = data.draw(st.lists(st.lists(values, min_size=d, max_size=d), min_size=40, max_size=240))
    X = np.array(rows, dtype=np.float64)
    seed = data.draw(st.integers(0, 2**31))
    model = spec.build({}, tuple(spec.roles - {DETECTOR}), seed=seed)
    regression = REGRESSION in spec.tasks
    if regression:
        y = np.column_stack([X[:, 0], X[:, 1] - X[:, 2]]) / 2  # within the bound too
    else:
        y = ["a" if v > 0 else ("b" if v < 0 else "c") for v in X[:, 0]]
    if spec.arrivals:  # a learner of arriving columns: one generation per column count
        for k in range(1, d + 1):
            model.learn_many(X[:, :k], y)
        assert all(_finite(a) for a in _answers(model, X, regression))
        return
    for a in range(0, len(X), 40):
        if a:
            assert all(_finite(ans) for ans in _answers(model, X[a:a + 40], regression)), a
        model.learn_many(X[a:a + 40], y[a:a + 40])
    assert all(_finite(ans) for ans in _answers(model, X, regression))
