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
"""

from __future__ import annotations

import os

import numba
from numba.core import cpu

CACHE = os.environ.get("STREAMFOREST_NUMBA_CACHE", "1") != "0"

_DEFAULTS = {"nogil": True, "cache": CACHE, "fastmath": False}
_PRIVATE_OK = hasattr(cpu.CPUTargetOptions, "_nrt")


def njit(*args, **kwargs):
    """Compile a kernel with the project's options.

    Usable bare (``@njit``) or with overrides (``@njit(inline="always")``).
    """
    options = dict(_DEFAULTS)
    options.update(kwargs)
    if not _PRIVATE_OK:
        options.pop("_nrt", None)
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return numba.njit(**options)(args[0])
    return numba.njit(*args, **options)
