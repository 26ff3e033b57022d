"""ADWIN and ADWINBank: river parity (detections and window statistics), banks, state.

river's ``drift.ADWIN`` is the reference: every stream below is run through both detectors in
the same test, and detection positions, ``width``, ``total``, ``variance`` and ``estimation``
must be *equal* (same floating-point operations in the same order), not merely close.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import drift

from models.drift.adwin import ADWIN, ADWINBank
from schemas.codec import decode_state, encode_state


def river_trace(xs, every: int = 0, **params):
    """Drift positions of river's ADWIN, and its window statistics after every ``every``-th
    value (position -> (width, total, variance, estimation))."""
    det = drift.ADWIN(**params)
    found, stats = [], {}
    for i, x in enumerate(np.asarray(xs, dtype=float).tolist()):
        det.update(x)
        if det.drift_detected:
            found.append(i)
        if every and (i + 1) % every == 0:
            stats[i] = (det.width, det.total, det.variance, det.estimation)
    return found, stats


def ours_trace(xs, every: int, **params):
    """The same through ``ADWIN.update_many`` fed in chunks of ``every`` values."""
    det = ADWIN(**params)
    xs = np.asarray(xs, dtype=float)
    found, stats = [], {}
    for start in range(0, len(xs), every):
        chunk = xs[start:start + every]
        found += (det.update_many(chunk) + start).tolist()
        if len(chunk) == every:
            stats[start + every - 1] = (det.width, det.total, det.variance, det.estimation)
    return found, stats, det


def _bernoulli(rng, p):
    return (rng.random(len(p)) < p).astype(float)


def _streams():
    rng = np.random.default_rng(20240601)
    n = 12_000
    yield "bernoulli_abrupt", _bernoulli(rng, np.where(np.arange(n) < 6000, 0.2, 0.6))
    yield "bernoulli_gradual", _bernoulli(rng, np.clip(np.linspace(-0.5, 1.5, n), 0.1, 0.7))
    mu = np.repeat([0.0, 1.5, -0.5, 0.2], n // 4)
    yield "gaussian_shifts", rng.normal(mu, 1.0)
    yield "stationary", rng.normal(3.0, 2.0, n)
    # Long stream: the window reaches tens of thousands of values (row growth, deep merges)
    mu = np.repeat([0.0, 0.3, 0.3, -0.2], 30_000)
    yield "long_120k", rng.normal(mu, 1.0)


STREAMS = dict(_streams())
PARAMS = [
    {},  # river's defaults
    {"delta": 0.05, "clock": 1},
    {"delta": 0.0001, "clock": 7, "max_buckets": 2, "min_window_length": 1, "grace_period": 0},
]


@pytest.mark.parametrize("params", PARAMS, ids=["defaults", "clock1", "mb2"])
@pytest.mark.parametrize("name", list(STREAMS))
def test_matches_river_exactly(name, params):
    xs = STREAMS[name]
    if name == "long_120k" and params:
        xs = xs[:40_000]  # the non-default settings are checked on a shorter prefix
    expected, expected_stats = river_trace(xs, every=997, **params)
    found, stats, det = ours_trace(xs, every=997, **params)
    assert found == expected
    assert stats == expected_stats  # exact equality of width, total, variance, estimation
    if name == "long_120k" and not params:
        assert det._arrays["bucket_count"].shape[1] > 8, "row capacity should have grown"
        assert max(width for width, *_ in stats.values()) > 50_000
        assert expected[:2] == [30207, 90111]  # river's positions, pinned for this stream
        assert det.n_detections == len(expected)


def test_detections_are_plausible():
    """Independent of river: the shifts are found shortly after they happen, and a stationary
    stream gives no alarm at delta = 0.002."""
    found = ADWIN().update_many(STREAMS["gaussian_shifts"])
    for shift in (3000, 6000, 9000):
        assert any(shift <= f < shift + 600 for f in found), (shift, found)
    assert ADWIN().update_many(STREAMS["stationary"]).size == 0


def test_rivers_documented_example():
    rng = random.Random(12345)
    stream = rng.choices([0, 1], k=1000) + rng.choices(range(4, 8), k=1000)
    assert ADWIN().update_many(stream).tolist() == [1023]


def test_single_updates_match_river_at_every_step():
    xs = STREAMS["bernoulli_abrupt"][4000:9000]
    ref = drift.ADWIN(clock=4)
    det = ADWIN(clock=4)
    for x in xs.tolist():
        ref.update(x)
        assert det.update(x) == ref.drift_detected
        assert det.drift_detected == ref.drift_detected
        assert (det.width, det.total, det.variance) == (ref.width, ref.total, ref.variance)
        assert det.estimation == ref.estimation
    assert det.n_seen == len(xs)


def test_variance_is_the_windows_sum_of_squared_deviations():
    xs = STREAMS["stationary"][:5000]
    det = ADWIN()
    det.update_many(xs)
    window = xs[-det.width:]
    assert det.width == 5000
    assert det.total == pytest.approx(window.sum(), rel=1e-12)
    assert det.variance == pytest.approx(((window - window.mean()) ** 2).sum(), rel=1e-9)
    assert det.variance_in_window == pytest.approx(window.var(), rel=1e-9)


def test_window_restarts_after_a_drift():
    xs = STREAMS["gaussian_shifts"]
    det = ADWIN()
    first = int(det.update_many(xs)[0])
    det = ADWIN()
    det.update_many(xs[:first + 1])
    assert det.drift_detected and det.width > 0
    det.update(xs[first + 1])
    assert not det.drift_detected and det.width == 1 and det.total == xs[first + 1]


def test_max_buckets_one_works():
    """river's Rust helper panics with max_buckets=1 (clock 32) when it removes from an empty
    trailing row; here such rows are dropped and the detector keeps working."""
    xs = np.concatenate([np.zeros(3000), np.ones(3000)]) + np.random.default_rng(0).normal(
        0, 0.1, 6000)
    found = ADWIN(max_buckets=1).update_many(xs)
    assert found.size and 3000 <= found[0] < 3200
    ref, _ = river_trace(xs, max_buckets=1, clock=1)
    assert ADWIN(max_buckets=1, clock=1).update_many(xs).tolist() == ref


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 1500),
    kind=st.sampled_from(["bits", "ints", "floats"]),
    delta=st.sampled_from([0.002, 0.05, 0.3]),
    clock=st.integers(1, 40),
    max_buckets=st.integers(2, 7),
    min_window_length=st.integers(0, 12),
    grace_period=st.integers(0, 30),
)
def test_random_streams_and_settings_match_river(seed, n, kind, delta, clock, max_buckets,
                                                 min_window_length, grace_period):
    rng = np.random.default_rng(seed)
    cut = rng.integers(0, n + 1)
    if kind == "bits":
        xs = (rng.random(n) < np.where(np.arange(n) < cut, 0.1, 0.8)).astype(float)
    elif kind == "ints":
        xs = rng.integers(-3, 4, n).astype(float) + np.where(np.arange(n) < cut, 0, 4)
    else:
        xs = rng.normal(np.where(np.arange(n) < cut, 0.0, 2.0), rng.uniform(0.01, 5))
    params = dict(delta=delta, clock=clock, max_buckets=max_buckets,
                  min_window_length=min_window_length, grace_period=grace_period)
    expected, expected_stats = river_trace(xs, every=97, **params)
    found, stats, _ = ours_trace(xs, every=97, **params)
    assert found == expected
    assert stats == expected_stats


# ------------------------------------------------------------------------------------- banks


def test_bank_step_updates_equal_independent_detectors():
    rng = np.random.default_rng(7)
    k, n = 6, 4000
    shifts = rng.integers(500, 3500, k)
    data = rng.normal(0.0, 1.0, (n, k)) + (np.arange(n)[:, None] >= shifts) * rng.uniform(
        0.5, 3.0, k)
    bank = ADWINBank(k, clock=8)
    masks = np.array([bank.update(row) for row in data])
    for i in range(k):
        expected, _ = river_trace(data[:, i], clock=8)
        assert np.flatnonzero(masks[:, i]).tolist() == expected
        single = ADWIN(clock=8)
        single.update_many(data[:, i])
        assert (bank.width[i], bank.total[i], bank.variance[i]) == (
            single.width, single.total, single.variance)
        assert bank.n_detections[i] == len(expected)
    assert bank.n_seen == n * k


def test_bank_update_at_and_update_many_address_one_detector():
    rng = np.random.default_rng(11)
    xs = rng.normal(0.0, 1.0, 3000) + (np.arange(3000) > 1500) * 2.0
    ys = rng.normal(5.0, 1.0, 3000)
    bank = ADWINBank(3)
    # interleave two detectors in one call; detector 2 is never touched
    order = np.empty(6000, dtype=np.int64)
    order[0::2], order[1::2] = 0, 1
    values = np.empty(6000)
    values[0::2], values[1::2] = xs, ys
    mask = bank.update_at(order, values)
    assert (np.flatnonzero(mask[0::2]).tolist(), np.flatnonzero(mask[1::2]).tolist()) == (
        river_trace(xs)[0], river_trace(ys)[0])
    assert bank.width[2] == 0 and bank.n_detections[2] == 0
    # update_many continues the same detector
    more = rng.normal(-3.0, 1.0, 2000)
    expected, _ = river_trace(np.concatenate([xs, more]))
    got = bank.update_many(0, more) + 3000
    assert got.tolist() == [e for e in expected if e >= 3000]


def test_bank_grows_rows_when_one_detector_has_a_long_window():
    bank = ADWINBank(4)
    rng = np.random.default_rng(5)
    assert bank._arrays["bucket_total"].shape == (4, 8, 6)
    long = rng.normal(0.0, 1.0, 50_000)
    bank.update_many(2, long)
    assert bank._arrays["bucket_total"].shape[1] >= 16
    assert bank.width.tolist() == [0, 0, 50_000, 0]
    ref = ADWIN()
    ref.update_many(long)
    assert (bank.total[2], bank.variance[2]) == (ref.total, ref.variance)
    # the other detectors still behave like fresh ones
    short = rng.normal(0.0, 1.0, 300)
    expected = ADWIN()
    expected.update_many(short)
    bank.update_many(0, short)
    assert (bank.width[0], bank.total[0], bank.variance[0]) == (
        expected.width, expected.total, expected.variance)


def test_bank_reset_and_add_detectors():
    bank = ADWINBank(2)
    rng = np.random.default_rng(2)
    for _ in range(200):
        bank.update(rng.normal(size=2))
    bank.reset([1])
    assert bank.width.tolist() == [200, 0]
    new = bank.add_detectors(3)
    assert new.tolist() == [2, 3, 4] and bank.n_detectors == 5
    assert bank.params["n_detectors"] == 5
    assert bank.update(rng.normal(size=5)).shape == (5,)
    assert bank.width.tolist() == [201, 1, 1, 1, 1]
    bank.reset()
    assert bank.width.tolist() == [0] * 5 and bank.estimation.tolist() == [0.0] * 5


# ------------------------------------------------------------------------------------- state


@pytest.mark.parametrize("cut", ["mid_window", "at_a_drift", "after_growth"])
def test_state_round_trip_through_msgpack_continues_identically(cut):
    xs = STREAMS["gaussian_shifts"]
    params = {"clock": 16} if cut != "after_growth" else {}
    found = ADWIN(**params).update_many(xs)
    split = {"mid_window": 4321, "at_a_drift": int(found[0]) + 1}.get(cut)
    if cut == "after_growth":  # a restored detector with 16 rows of buckets
        xs = np.concatenate([STREAMS["long_120k"][:20_000], xs])
        split = 20_000
    det = ADWIN(**params)
    det.update_many(xs[:split])
    if cut == "after_growth":
        assert det._arrays["bucket_total"].shape[1] == 16
    if cut == "at_a_drift":
        assert det.drift_detected  # the pending reset must survive the round trip
    restored = ADWIN.from_state(decode_state(encode_state(det.to_state())))
    assert restored.params == det.params and restored.n_seen == det.n_seen
    a, b = det.update_many(xs[split:]), restored.update_many(xs[split:])
    assert a.tolist() == b.tolist()
    sa, sb = det.to_state(), restored.to_state()
    assert sa["arrays"].keys() == sb["arrays"].keys()
    for key in sa["arrays"]:
        np.testing.assert_array_equal(sa["arrays"][key], sb["arrays"][key], err_msg=key)
        assert sa["arrays"][key].dtype == sb["arrays"][key].dtype


def test_bank_state_round_trip():
    rng = np.random.default_rng(4)
    data = rng.normal(size=(3000, 5)) + (np.arange(3000)[:, None] > 1500) * [0, 1, 2, 0, 3]
    bank = ADWINBank(5, delta=0.01)
    for row in data[:1700]:
        bank.update(row)
    restored = ADWINBank.from_state(decode_state(encode_state(bank.to_state())))
    assert restored.n_detectors == 5
    for row in data[1700:]:
        np.testing.assert_array_equal(bank.update(row), restored.update(row))
    np.testing.assert_array_equal(bank.n_detections, restored.n_detections)
    np.testing.assert_array_equal(bank.variance, restored.variance)


def test_state_from_another_kind_or_shape_is_refused():
    state = ADWIN().to_state()
    with pytest.raises(ValueError, match="adwin"):
        ADWINBank.from_state(state)
    state["arrays"]["bucket_count"] = np.zeros((1, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="bucket"):
        ADWIN.from_state(state)


# -------------------------------------------------------------------------------- validation


def test_bad_input_raises_clear_value_errors():
    det = ADWIN()
    with pytest.raises(ValueError, match="NaN"):
        det.update_many([0.0, np.nan])
    with pytest.raises(ValueError, match="finite"):
        det.update(float("inf"))
    with pytest.raises(ValueError, match="1-D"):
        det.update_many(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="numeric"):
        det.update_many(["a"])
    assert det.n_seen == 0 and det.width == 0  # nothing was learned from rejected input
    bank = ADWINBank(3)
    with pytest.raises(ValueError, match="3 detectors"):
        bank.update([1.0, 2.0])
    with pytest.raises(ValueError, match="detector index"):
        bank.update_many(3, [1.0])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        bank.update_at([0, 5], [1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        bank.update_at([0, 1], [1.0])


@pytest.mark.parametrize("params, match", [
    ({"delta": 0.0}, "delta"), ({"delta": 1.5}, "delta"), ({"clock": 0}, "clock"),
    ({"max_buckets": 0}, "max_buckets"), ({"min_window_length": -1}, "min_window_length"),
    ({"grace_period": 2.5}, "grace_period"),
])
def test_bad_parameters_are_refused(params, match):
    with pytest.raises(ValueError, match=match):
        ADWIN(**params)


def test_empty_input_is_a_no_op():
    det = ADWIN()
    assert det.update_many([]).tolist() == [] and det.n_seen == 0
    assert ADWINBank(2).update_at([], []).tolist() == []
