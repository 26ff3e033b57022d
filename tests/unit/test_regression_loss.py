"""The regression task's loss: each target's absolute error over its running MAD, clipped to
[0, 1], averaged over the targets, with the running statistics updated after each row.

The task computes a call's losses with array operations over its rows and the running
statistics on Python floats; the reference here is the row-by-row definition on arrays of
one row. Both must give the same bits, losses and state alike, over any sequence of calls.
"""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.pipeline.tasks import RegressionTask


class RowByRow:
    """The loss as defined, one row at a time on arrays."""

    def __init__(self, n_targets: int):
        self.n, self.mean, self.mad = 0, np.zeros(n_targets), np.zeros(n_targets)

    def losses(self, y_pred: list, y_true: list) -> np.ndarray:
        out = np.empty(len(y_true))
        for r, (p, t) in enumerate(zip(y_pred, y_true)):
            t = np.asarray(t, dtype=np.float64)
            if p is None:
                out[r] = 1.0
            else:
                err = np.abs(np.asarray(p, dtype=np.float64) - t)
                with np.errstate(over="ignore"):  # as the task: inf, then capped at 1
                    scaled = np.where(self.mad > 0, err / np.where(self.mad > 0, self.mad, 1.0),
                                      (err > 0).astype(np.float64))
                out[r] = float(np.minimum(scaled, 1.0).mean())
            self.n += 1
            self.mean += (t - self.mean) / self.n
            self.mad += (np.abs(t - self.mean) - self.mad) / self.n
        return out


# few distinct values, so that errors of 0 and MADs of 0 occur, and values of any scale
VALUES = st.one_of(st.sampled_from([0.0, 1.0, -2.5, 3.0]),
                   st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
                   st.integers(-5, 5))


@st.composite
def calls(draw):
    T = draw(st.integers(1, 12))
    out = []
    for _ in range(draw(st.integers(1, 4))):
        rows = draw(st.integers(0, 12))
        ys = [draw(st.lists(VALUES, min_size=T, max_size=T)) for _ in range(rows)]
        if T == 1:  # a single target may come as a plain number
            ys = [y[0] if draw(st.booleans()) else y for y in ys]
        preds = [None if draw(st.integers(0, 4)) == 0 else
                 [float(v) for v in draw(st.lists(VALUES, min_size=T, max_size=T))]
                 for _ in range(rows)]
        out.append((preds, ys))
    return T, out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_the_losses_and_the_running_statistics_are_those_of_the_row_by_row_definition(case):
    T, seq = case
    task, ref = RegressionTask(T), RowByRow(T)
    for preds, ys in seq:
        got, want = task.losses(preds, ys), ref.losses(preds, ys)
        assert got.tobytes() == want.tobytes()
        assert task.n == ref.n
        assert task.mean.tobytes() == ref.mean.tobytes()
        assert task.mad.tobytes() == ref.mad.tobytes()
    assert RegressionTask(T).to_state()["mad"].shape == (T,)


def test_a_row_predicted_by_an_empty_model_is_a_full_miss_and_an_exact_one_costs_nothing():
    task = RegressionTask(2)
    assert task.losses([None, [1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]]).tolist() == [1.0, 0.0]
    # MAD 0 on both targets so far: any error is a full miss
    assert task.losses([[1.0, 2.5]], [[1.0, 2.0]]).tolist() == [0.5]


def test_an_error_over_a_subnormal_spread_is_a_full_miss_without_a_warning():
    # a MAD of 2.5e-321 scales an error of 1e300 past the largest float: inf, capped at 1,
    # and no RuntimeWarning in the worker's log for it
    task = RegressionTask(1)
    task.losses([None, [0.0]], [[0.0], [1e-320]])
    assert 0.0 < task.mad[0] < 1e-300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert task.losses([[1e300]], [[0.0]]).tolist() == [1.0]
