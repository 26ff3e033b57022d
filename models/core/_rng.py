"""Random numbers whose whole state is a ``uint64`` array.

The generator is SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014): one 64-bit word of state per stream, advanced by a Weyl increment
and finalised by a bijective mixer. Because a learner's random state is just one ``uint64``
per generator in its state arrays, it serializes exactly with the rest of the learner and a
restored learner continues the same random sequence. numba's own ``np.random`` state lives
outside our arrays (numba/numba#3249), so kernels never use it.

Kernels receive the state array and the index of the generator to advance (one generator per
tree, per detector, per stream ...), so independent components never share a sequence.
"""

from __future__ import annotations

import numpy as np

from . import _fmath as fm
from ._jit import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


def _mix_py(z: int) -> int:
    mask = (1 << 64) - 1
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def seed_states(seed: int, n: int, salt: int = 0) -> np.ndarray:
    """Derive ``n`` independent generator states from one master seed.

    Parameters
    ----------
    seed : int
        Master seed of the learner.
    n : int
        Number of generators (for example one per tree).
    salt : int, default 0
        Distinguishes families of generators drawn from the same seed (trees vs. detectors).

    Returns
    -------
    numpy.ndarray
        ``uint64`` array of shape ``(n,)``.
    """
    mask = (1 << 64) - 1
    base = _mix_py((int(seed) * 0x9E3779B97F4A7C15 + int(salt) * 0xD1B54A32D192ED03 + 1) & mask)
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = _mix_py((base + (i + 1) * 0x9E3779B97F4A7C15) & mask)
    return out


@njit(_nrt=False)
def next_u64(state, i):
    """Advance generator ``i`` of ``state`` and return 64 random bits."""
    s = state[i] + _GOLDEN
    state[i] = s
    z = s
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@njit(_nrt=False)
def uniform(state, i):
    """A float in ``[0, 1)`` with 53 random bits."""
    return float(next_u64(state, i) >> _S11) * _INV53


@njit(_nrt=False)
def randint(state, i, n):
    """An integer in ``[0, n)`` (``n >= 1``); the modulo bias is below ``n / 2**53``."""
    return int(uniform(state, i) * n)


@njit(_nrt=False)
def poisson(state, i, lam):
    """A Poisson(``lam``) draw by Knuth's multiplication method (fine for ``lam`` <= 30)."""
    return poisson_below(state, i, fm.exp(-lam))  # the core's exp: the same draws on every CPU


@njit(_nrt=False)
def poisson_below(state, i, limit):
    """:func:`poisson` of the rate whose ``exp(-lam)`` is ``limit`` (a caller drawing many
    times with one rate computes it once)."""
    k = 0
    p = uniform(state, i)
    while p > limit:
        k += 1
        p *= uniform(state, i)
    return k


@njit(inline="always")
def pick_next(state, i, arr, q):
    """One step of a partial Fisher-Yates shuffle from the front: a uniform draw among
    ``arr[q:]`` is swapped into ``arr[q]`` and returned (``arr[:q]`` are the earlier picks)."""
    j = q + randint(state, i, arr.shape[0] - q)
    picked = arr[j]
    arr[j] = arr[q]
    arr[q] = picked
    return picked


@njit
def shuffle(state, i, arr):
    """Fisher-Yates shuffle of ``arr`` in place."""
    for k in range(arr.shape[0] - 1, 0, -1):
        j = randint(state, i, k + 1)
        tmp = arr[k]
        arr[k] = arr[j]
        arr[j] = tmp
