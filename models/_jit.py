"""The one place where numba compilation options are set.

Every kernel in :mod:`models` is compiled through :func:`njit`, so caching, ``nogil`` and
``fastmath`` are decided once for the whole core.

* ``cache=True``: compiled machine code is written next to the sources (or to
  ``NUMBA_CACHE_DIR``) and reused by later processes; a worker restart or a test run then
  pays the compilation only once. Set ``STREAMFOREST_NUMBA_CACHE=0`` to disable it.
* ``nogil=True``: kernels release the GIL, so a worker's Kafka client threads keep serving
  heartbeats and delivery reports while a learner trains.
* ``fastmath=False``: learners must be bit-for-bit reproducible from a seed and from a
  checkpoint, which re-association of floating-point sums would break.
* ``_nrt=False`` (asked by a few hot helpers that allocate nothing, to skip reference
  counting of their array arguments) is a private numba option: it is dropped when the
  installed numba no longer knows it, so a numba upgrade costs speed, never an import error.

One specialisation per kernel: when a kernel calls another with a constant (``next_u64(s, 0)``,
``grow(..., False, ...)``), numba types the argument as a literal (``Literal[int](0)``) and
would compile the callee once more for it, beside the ``int64`` version its other callers use.
The dispatcher of :func:`njit` types such calls with the plain type instead, so each kernel
compiles (and the warm-up caches) one version per argument layout; a literal is cast to its
plain type at the call, so the results do not change. A kernel that can only be typed with a
literal still gets one.
"""

from __future__ import annotations

import os

import numba
from numba.core import cpu, errors, types
from numba.core.registry import CPUDispatcher

CACHE = os.environ.get("STREAMFOREST_NUMBA_CACHE", "1") != "0"

_DEFAULTS = {"nogil": True, "cache": CACHE, "fastmath": False}
_PRIVATE_OK = hasattr(cpu.CPUTargetOptions, "_nrt")


class _PlainDispatcher(CPUDispatcher):
    """A CPU dispatcher that compiles calls from other kernels for plain argument types."""

    def get_call_template(self, args, kws):
        """The call template for ``args`` with literal types replaced by their plain types.

        Falls back to the literal types when the kernel cannot be typed without them.
        """
        plain = tuple(types.unliteral(a) for a in args)
        plain_kws = {k: types.unliteral(v) for k, v in kws.items()}
        if plain == tuple(args) and plain_kws == kws:
            return super().get_call_template(args, kws)
        try:
            return super().get_call_template(plain, plain_kws)
        except errors.TypingError:
            return super().get_call_template(args, kws)


def _plain(dispatcher):
    # numba.njit builds a CPUDispatcher (or returns the function itself when
    # NUMBA_DISABLE_JIT is set); only the call typing changes, so switching the class of the
    # built dispatcher keeps every other part of numba's construction (caching included)
    if type(dispatcher) is CPUDispatcher:
        dispatcher.__class__ = _PlainDispatcher
    return dispatcher


def njit(*args, **kwargs):
    """Compile a kernel with the project's options.

    Usable bare (``@njit``) or with overrides (``@njit(inline="always")``).
    """
    options = dict(_DEFAULTS)
    options.update(kwargs)
    if not _PRIVATE_OK:
        options.pop("_nrt", None)
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return _plain(numba.njit(**options)(args[0]))
    decorator = numba.njit(*args, **options)
    if isinstance(decorator, CPUDispatcher):
        return _plain(decorator)
    return lambda fn: _plain(decorator(fn))
