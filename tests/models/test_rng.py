"""The array-state random-number generator behind every learner."""

from __future__ import annotations

import numpy as np

from models.core import _rng


def test_seed_states_are_deterministic_and_distinct():
    a = _rng.seed_states(7, 50)
    b = _rng.seed_states(7, 50)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.uint64 and len(set(a.tolist())) == 50
    assert not np.array_equal(a, _rng.seed_states(8, 50))
    assert not np.array_equal(a, _rng.seed_states(7, 50, salt=1))


def test_state_array_is_the_whole_state():
    state = _rng.seed_states(3, 2)
    saved = state.copy()
    first = [_rng.next_u64(state, 0) for _ in range(10)]
    np.testing.assert_array_equal(state[1:], saved[1:])  # generators are independent
    state[:] = saved
    assert [_rng.next_u64(state, 0) for _ in range(10)] == first


def test_draw_distributions():
    state = _rng.seed_states(11, 1)
    u = np.array([_rng.uniform(state, 0) for _ in range(50_000)])
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    k = np.array([_rng.poisson(state, 0, 1.0) for _ in range(50_000)])
    assert abs(k.mean() - 1.0) < 0.02 and abs(k.var() - 1.0) < 0.05
    k6 = np.array([_rng.poisson(state, 0, 6.0) for _ in range(20_000)])
    assert abs(k6.mean() - 6.0) < 0.1
    r = np.array([_rng.randint(state, 0, 7) for _ in range(20_000)])
    assert set(r.tolist()) == set(range(7))


def test_shuffle_is_a_permutation():
    state = _rng.seed_states(5, 1)
    arr = np.arange(100)
    _rng.shuffle(state, 0, arr)
    assert sorted(arr.tolist()) == list(range(100)) and arr.tolist() != list(range(100))
