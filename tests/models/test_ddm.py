"""DDM and DDMBank: river parity (drift and warning positions, error rate), banks, state.

river's ``drift.binary.DDM`` is the reference: every stream below is run through both
detectors in the same test and the drift and warning positions must be identical.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import drift

from models.drift.ddm import DDM, DDMBank
from schemas.codec import decode_state, encode_state


def river_trace(xs, **params):
    """Drift positions, warning positions and error rates (after each value) of river's DDM."""
    det = drift.binary.DDM(**params)
    drifts, warnings, rates = [], [], []
    for i, x in enumerate(np.asarray(xs).tolist()):
        det.update(x)
        if det.drift_detected:
            drifts.append(i)
        if det.warning_detected:
            warnings.append(i)
        rates.append(det._p.get())
    return drifts, warnings, rates


def _errors(rng, p):
    return (rng.random(len(p)) < p).astype(np.int64)


def _streams():
    rng = np.random.default_rng(31)
    n = 20_000
    yield "abrupt", _errors(rng, np.where(np.arange(n) < 8000, 0.15, 0.45))
    yield "gradual", _errors(rng, np.clip(np.linspace(0.05, 0.6, n), 0.0, 1.0))
    yield "improving", _errors(rng, np.linspace(0.5, 0.05, n))
    yield "stationary", _errors(rng, np.full(n, 0.3))
    yield "zeros_then_ones", np.r_[np.zeros(500, np.int64), np.ones(500, np.int64)]
    # long stream with several regimes: many detections and resets
    yield "long_120k", _errors(rng, np.repeat([0.1, 0.3, 0.05, 0.5, 0.2, 0.25], 20_000))


STREAMS = dict(_streams())
PARAMS = [{}, {"warm_start": 5, "warning_threshold": 1.0, "drift_threshold": 1.5},
          {"warm_start": 100, "warning_threshold": 2.5, "drift_threshold": 4.0}]


@pytest.mark.parametrize("params", PARAMS, ids=["defaults", "eager", "lazy"])
@pytest.mark.parametrize("name", list(STREAMS))
def test_matches_river_exactly(name, params):
    xs = STREAMS[name]
    drifts, warnings, rates = river_trace(xs, **params)
    det = DDM(**params)
    got_drifts, got_warnings = [], []
    for start in range(0, len(xs), 1013):  # in chunks, checking the error rate in between
        d, w = det.update_many(xs[start:start + 1013], return_warnings=True)
        got_drifts += (d + start).tolist()
        got_warnings += (w + start).tolist()
        assert det.estimation == rates[min(start + 1013, len(xs)) - 1]
    assert got_drifts == drifts
    assert got_warnings == warnings
    assert det.n_detections == len(drifts) and det.n_seen == len(xs)


def test_pinned_positions_on_a_long_stream():
    """Positions captured from river 0.26.1 on this seeded stream: a regression guard that does
    not depend on the installed river. DDM only reacts to a rising error rate, so the falls at
    40k and 80k, and the small rise at 100k, give no drift."""
    drifts, warnings = DDM().update_many(STREAMS["long_120k"], return_warnings=True)
    assert drifts.tolist() == [21435, 60537]
    assert warnings.size == 11044


def test_rivers_documented_example():
    rng = random.Random(42)
    stream = rng.choices([0, 1], k=1000) + rng.choices([0, 1], k=1000, weights=[0.3, 0.7])
    drifts, warnings = DDM().update_many(stream, return_warnings=True)
    assert drifts.tolist() == [1334]
    assert warnings[0] == 1084 and warnings[warnings > 1334][0] == 1492


def test_single_updates_match_river_at_every_step():
    xs = STREAMS["abrupt"][6000:11000]
    ref = drift.binary.DDM()
    det = DDM()
    for x in xs.tolist():
        ref.update(x)
        assert det.update(x) == ref.drift_detected
        assert (det.drift_detected, det.warning_detected) == (
            ref.drift_detected, ref.warning_detected)


def test_drift_clears_warning_and_restarts_the_detector():
    xs = STREAMS["abrupt"]
    det = DDM()
    first = int(det.update_many(xs)[0])
    det = DDM()
    det.update_many(xs[:first + 1])
    assert det.drift_detected and not det.warning_detected
    det.update(xs[first + 1])
    assert not det.drift_detected and det.estimation == float(xs[first + 1])


def test_booleans_are_accepted():
    xs = STREAMS["abrupt"]
    assert DDM().update_many(xs.astype(bool)).tolist() == DDM().update_many(xs).tolist()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 3000),
    p0=st.floats(0.0, 1.0),
    p1=st.floats(0.0, 1.0),
    warm_start=st.integers(0, 60),
    warning_threshold=st.floats(0.5, 3.0),
    extra=st.floats(0.0, 2.0),
)
def test_random_streams_and_settings_match_river(seed, n, p0, p1, warm_start,
                                                 warning_threshold, extra):
    rng = np.random.default_rng(seed)
    cut = rng.integers(0, n + 1)
    xs = _errors(rng, np.where(np.arange(n) < cut, p0, p1))
    params = dict(warm_start=warm_start, warning_threshold=warning_threshold,
                  drift_threshold=warning_threshold + extra)
    drifts, warnings, _ = river_trace(xs, **params)
    got = DDM(**params).update_many(xs, return_warnings=True)
    assert (got[0].tolist(), got[1].tolist()) == (drifts, warnings)


# ------------------------------------------------------------------------------------- banks


def test_bank_step_updates_equal_independent_detectors():
    rng = np.random.default_rng(9)
    k, n = 5, 6000
    shifts = rng.integers(1000, 5000, k)
    p = np.where(np.arange(n)[:, None] < shifts, 0.1, rng.uniform(0.2, 0.6, k))
    data = (rng.random((n, k)) < p).astype(np.int64)
    bank = DDMBank(k)
    steps = [bank.update(row, return_warnings=True) for row in data]
    drift_mask = np.array([s[0] for s in steps])
    warning_mask = np.array([s[1] for s in steps])
    for i in range(k):
        drifts, warnings, _ = river_trace(data[:, i])
        assert np.flatnonzero(drift_mask[:, i]).tolist() == drifts
        assert np.flatnonzero(warning_mask[:, i]).tolist() == warnings
    np.testing.assert_array_equal(bank.drift_detected, drift_mask[-1])
    np.testing.assert_array_equal(bank.warning_detected, warning_mask[-1])
    assert bank.n_seen == n * k


def test_bank_update_at_and_update_many_address_one_detector():
    a, b = STREAMS["abrupt"][:6000], STREAMS["gradual"][:6000]
    bank = DDMBank(3)
    order = np.tile([0, 1], 6000)
    values = np.empty(12_000)
    values[0::2], values[1::2] = a, b
    d, w = bank.update_at(order, values, return_warnings=True)
    ra, rb = river_trace(a), river_trace(b)
    assert np.flatnonzero(d[0::2]).tolist() == ra[0]
    assert np.flatnonzero(w[1::2]).tolist() == rb[1]
    rest = STREAMS["abrupt"][6000:]
    got_d, got_w = bank.update_many(0, rest, return_warnings=True)
    full = river_trace(STREAMS["abrupt"])
    assert (got_d + 6000).tolist() == [i for i in full[0] if i >= 6000]
    assert (got_w + 6000).tolist() == [i for i in full[1] if i >= 6000]
    assert bank.estimation[2] == 0.0 and bank.n_detections[2] == 0


def test_bank_reset_and_add_detectors():
    bank = DDMBank(2)
    for _ in range(50):
        bank.update([1, 0])
    bank.reset(0)
    assert bank.estimation.tolist() == [0.0, 0.0] and bank._arrays["n"].tolist() == [0.0, 50.0]
    assert bank.add_detectors(2).tolist() == [2, 3] and bank.params["n_detectors"] == 4
    bank.update([1, 1, 1, 0])
    assert bank.estimation.tolist() == [1.0, 1 / 51, 1.0, 0.0]


# ------------------------------------------------------------------------------------- state


@pytest.mark.parametrize("at_drift", [False, True])
def test_state_round_trip_through_msgpack_continues_identically(at_drift):
    xs = STREAMS["long_120k"]
    split = int(DDM().update_many(xs)[0]) + 1 if at_drift else 33_333
    det = DDM()
    det.update_many(xs[:split])
    assert det.drift_detected == at_drift
    restored = DDM.from_state(decode_state(encode_state(det.to_state())))
    assert restored.n_seen == det.n_seen and restored.params == det.params
    a = det.update_many(xs[split:], return_warnings=True)
    b = restored.update_many(xs[split:], return_warnings=True)
    assert (a[0].tolist(), a[1].tolist()) == (b[0].tolist(), b[1].tolist())
    sa, sb = det.to_state()["arrays"], restored.to_state()["arrays"]
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
        assert sa[key].dtype == sb[key].dtype


def test_bank_state_round_trip():
    rng = np.random.default_rng(12)
    data = (rng.random((4000, 3)) < [0.1, 0.3, 0.5]).astype(float)
    data[2000:, 0] = rng.random(2000) < 0.5
    bank = DDMBank(3, warm_start=50)
    for row in data[:2100]:
        bank.update(row)
    restored = DDMBank.from_state(decode_state(encode_state(bank.to_state())))
    for row in data[2100:]:
        for x, y in zip(bank.update(row, return_warnings=True),
                        restored.update(row, return_warnings=True)):
            np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(bank.n_detections, restored.n_detections)


# -------------------------------------------------------------------------------- validation


def test_bad_input_raises_clear_value_errors():
    det = DDM()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        det.update(2)
    with pytest.raises(ValueError, match="position 1"):
        det.update_many([0, -1, 1])
    with pytest.raises(ValueError, match="NaN"):
        det.update_many([0.0, np.nan])
    with pytest.raises(ValueError, match="1-D"):
        det.update_many(np.zeros((2, 2)))
    assert det.n_seen == 0
    bank = DDMBank(2)
    with pytest.raises(ValueError, match="2 detectors"):
        bank.update([1])
    with pytest.raises(ValueError, match="detector index"):
        bank.update_many(-1, [1])


@pytest.mark.parametrize("params, match", [
    ({"warm_start": -1}, "warm_start"), ({"warning_threshold": 0.0}, "threshold"),
    ({"warning_threshold": 3.0, "drift_threshold": 2.0}, "threshold"),
])
def test_bad_parameters_are_refused(params, match):
    with pytest.raises(ValueError, match=match):
        DDM(**params)


def test_state_read_outs_are_copies_and_read_only():
    from models.drift.adwin import ADWINBank

    for bank in (ADWINBank(3), DDMBank(3)):
        flags = bank.drift_detected
        flags[:] = True  # a copy: the detectors' state is untouched
        assert not bank.drift_detected.any()
        with pytest.raises(AttributeError, match="read-only"):
            bank.n_detections = 5
