"""ADWIN drift detectors: many independent adaptive windows updated by one kernel call.

ADWIN (Bifet & Gavaldà, 2007) keeps a window of recent values, compressed into exponential
histogram buckets (ADWIN2): row ``r`` of a detector holds up to ``max_buckets`` buckets, each
summarising ``2**r`` values by their sum and their sum of squared deviations. When the means of
an old and a recent sub-window differ by more than the cut threshold, the oldest bucket is
dropped and a change is reported.

State layout (structure of arrays, leading axis = detector)::

    bucket_total     (n_detectors, n_rows, max_buckets + 1)  float64  sum of a bucket's values
    bucket_variance  (n_detectors, n_rows, max_buckets + 1)  float64  its sum of squared deviations
    bucket_count     (n_detectors, n_rows)                   int64    buckets used in each row
    n_rows           (n_detectors,)                          int64    rows in use (>= 1)
    total, variance, width  (n_detectors,)                   float64  window sum, sum of squared
                                                                      deviations, length
    tick             (n_detectors,)                          int64    updates since the last reset
    drift            (n_detectors,)                          bool     the last update reported drift
    n_detections     (n_detectors,)                          int64    drifts over its whole life

A detector's memory is logarithmic in its window (about ``log2(width / max_buckets)`` rows), so
the row axis starts small and is doubled from Python when a kernel reports that a detector may
need one row more than the capacity.

Semantics are those of ``river.drift.ADWIN`` (river 0.26): the same floating-point operations
in the same order, so detections land on the same indices (tests/models/test_adwin.py checks
this against river). The one difference: the cut threshold's two logarithms are the core's
(:mod:`models.core._fmath`), the same on every CPU, where river's C library may differ in the last
bit from one CPU to another. Where river departs from the paper we follow river, because the
worker's alerts must agree with the reference users compare us to:

* After a drift the next update starts a fresh, empty window (river's wrapper resets the whole
  detector), whereas the paper keeps the shrunk window ``W1`` and continues.
* Cuts are only tested every ``clock`` updates and once ``width > grace_period``; each cut drops
  the single oldest bucket and the scan restarts, as in river and MOA.
* The cut threshold uses MOA's sub-window correction ``1/(n0 - min_window_length + 1) +
  1/(n1 - min_window_length + 1)`` in place of the paper's ``1/n0 + 1/n1``.
* ``variance`` is the window's sum of squared deviations, which is the number river's
  ``ADWIN.variance`` returns; :attr:`ADWINBank.variance_in_window` divides it by the width.
* ``n_detections`` counts every drift over the detector's life; river's counter lives in the
  window helper and restarts with each reset.
* river panics with ``max_buckets=1`` (it removes from an empty trailing row); here empty trailing
  rows are dropped after a removal, which changes nothing when ``max_buckets >= 2`` (rows other
  than the last one are never empty then).

References
----------
Bifet, A. and Gavaldà, R. (2007). Learning from time-changing data with adaptive windowing.
Proceedings of the 2007 SIAM International Conference on Data Mining, 443-448.
Babcock, B., Datar, M., Motwani, R. and O'Callaghan, L. (2003). Maintaining variance and
k-medians over data stream windows. PODS 2003 (merging the variances of two buckets).
"""

from __future__ import annotations

import math

import numpy as np

from ..core import _fmath as fm
from ..core._jit import njit
from ..core._trees import grow_axis
from ..core.base import Learner, StateField, check_index, check_shapes
from ._bank import DetectorBank, check_int, check_values

_INITIAL_ROWS = 8  # windows of up to ~640 values; most per-tree detectors never grow past it


# --------------------------------------------------------------------------------------------
# Kernels. The arithmetic lives in small scalar functions, written with the reference's operation
# order; the bucket bookkeeping is written out in one loop body, because numba reference-counts
# every array handed to an inlined helper and that bookkeeping would cost more than ADWIN itself.
# error_model="numpy" gives IEEE semantics for x/0, as the Rust reference has.
# --------------------------------------------------------------------------------------------


@njit(error_model="numpy", inline="always")
def _bucket_size(r):
    """Values summarised by one bucket of row ``r``: ``2**r``, exactly."""
    size = 1.0
    for _ in range(r):
        size *= 2.0
    return size


@njit(error_model="numpy", inline="always")
def _insert_increment(value, total, width):
    """Growth of the sum of squared deviations when ``value`` joins a window of ``width - 1``
    values summing to ``total``: ``(w-1)/w * (x - mean)**2`` (Welford's update on the sum)."""
    if width > 1.0:
        dv = value - total / (width - 1.0)
        return (width - 1.0) * dv * dv / width
    return 0.0


@njit(error_model="numpy", inline="always")
def _merged_variance(t0, t1, v0, v1, size):
    """Sum of squared deviations of two merged buckets of ``size`` values each.

    ``v0 + v1 + n0*n1/(n0+n1) * (mu0 - mu1)**2`` (Babcock et al., 2003) with ``n0 = n1 =
    size``, written ``size * 0.5 * ...`` as in the reference so rounding is the same.
    """
    mu1 = t0 / size
    mu2 = t1 / size
    return v0 + v1 + size * 0.5 * (mu1 - mu2) * (mu1 - mu2)


@njit(error_model="numpy", inline="always")
def _removed_variance(u, v, n, total, width):
    """Share of the sum of squared deviations that leaves with a bucket of ``n`` values summing
    to ``u`` (own deviations ``v``), ``total`` and ``width`` being what remains."""
    mu = u / n
    mu_window = total / width
    return v + n * width * (mu - mu_window) * (mu - mu_window) / (n + width)


@njit(error_model="numpy", inline="always")
def _is_cut(n0, n1, u0, u1, min_window_length, window_variance, delta_prime):
    """ADWIN's test: are the means of ``W0`` (``n0`` oldest values, sum ``u0``) and ``W1``
    (``n1`` newest, sum ``u1``) farther apart than ``epsilon_cut``?

    ``epsilon_cut = sqrt(2 m s2 d') + 2/3 d' m`` with ``s2`` the window variance,
    ``d' = ln(2 ln(width) / delta)`` and ``m = 1/(n0 - mwl + 1) + 1/(n1 - mwl + 1)``.
    """
    delta_mean = (u0 / n0) - (u1 / n1)
    m_recip = 1.0 / (n0 - min_window_length + 1.0) + 1.0 / (n1 - min_window_length + 1.0)
    epsilon = (math.sqrt(2.0 * m_recip * window_variance * delta_prime)
               + 2.0 / 3.0 * delta_prime * m_recip)
    return abs(delta_mean) > epsilon


@njit(error_model="numpy", _nrt=False)
def _update_pairs(detectors, values, start, out, delta, clock, max_buckets, min_window_length,
                  grace_period, bucket_total, bucket_variance, bucket_count, n_rows, total,
                  variance, width, tick, drift, n_detections, n_seen):
    """Feed ``values[j]`` to detector ``detectors[j]`` for ``j = start, start+1, ...``.

    ``detectors`` holds one index per value, or a single index used for every value.
    ``out[j]`` receives the drift flag. Returns the position of the first value not processed:
    ``len(values)`` when done, earlier when that value's detector has every row of the
    capacity in use (an insertion could need one more): Python doubles the rows and resumes.
    """
    capacity = bucket_total.shape[1]
    mb = max_buckets
    one = detectors.shape[0] == 1
    j = start
    while j < values.shape[0]:
        d = detectors[0] if one else detectors[j]
        if n_rows[d] >= capacity:
            break
        x = values[j]

        # river starts a fresh window at the update that follows a drift
        if drift[d]:
            for r in range(n_rows[d]):
                for k in range(mb + 1):
                    bucket_total[d, r, k] = 0.0
                    bucket_variance[d, r, k] = 0.0
                bucket_count[d, r] = 0
            n_rows[d] = 1
            total[d] = 0.0
            variance[d] = 0.0
            width[d] = 0.0
            tick[d] = 0

        # insert x as a bucket of one value in row 0, then update the window's moments
        c = bucket_count[d, 0]
        bucket_total[d, 0, c] = x
        bucket_variance[d, 0, c] = 0.0
        bucket_count[d, 0] = c + 1
        w = width[d] + 1.0
        width[d] = w
        variance[d] += _insert_increment(x, total[d], w)
        total[d] += x

        # a row holding mb + 1 buckets merges its two oldest into one bucket of the next row
        r = 0
        size = 1.0  # values per bucket of row r: 2**r
        while bucket_count[d, r] == mb + 1:
            t0 = bucket_total[d, r, 0]
            t1 = bucket_total[d, r, 1]
            merged = _merged_variance(t0, t1, bucket_variance[d, r, 0],
                                      bucket_variance[d, r, 1], size)
            if r + 1 == n_rows[d]:
                n_rows[d] = r + 2  # rows past n_rows are always clean (zeroed when emptied)
            c = bucket_count[d, r + 1]
            bucket_total[d, r + 1, c] = t0 + t1
            bucket_variance[d, r + 1, c] = merged
            bucket_count[d, r + 1] = c + 1
            for k in range(mb - 1):
                bucket_total[d, r, k] = bucket_total[d, r, k + 2]
                bucket_variance[d, r, k] = bucket_variance[d, r, k + 2]
            for k in range(mb - 1, mb + 1):
                bucket_total[d, r, k] = 0.0
                bucket_variance[d, r, k] = 0.0
            bucket_count[d, r] = mb - 1
            if bucket_count[d, r + 1] <= mb:
                break
            r += 1
            size *= 2.0

        # every clock updates, test each cut from the oldest end; after a significant cut drop
        # the oldest bucket and test the shrunk window again
        change = False
        ticks = tick[d] + 1
        tick[d] = ticks
        if ticks % clock == 0 and width[d] > grace_period:
            scan = True
            while scan:
                scan = False
                w = width[d]
                # constant during one scan: the same value river computes at every cut
                delta_prime = fm.log(2.0 * fm.log(w) / delta)  # CPU-independent logs
                window_variance = variance[d] / w
                n0 = 0.0
                n1 = w
                u0 = 0.0
                u1 = total[d]
                r = n_rows[d] - 1
                size = _bucket_size(r)
                while r >= 0 and not scan:
                    count = bucket_count[d, r]
                    for k in range(count):
                        n0 += size
                        n1 -= size
                        t = bucket_total[d, r, k]
                        u0 += t
                        u1 -= t
                        if r == 0 and k == count - 1:
                            break  # W1 would be empty
                        if (n1 >= min_window_length and n0 >= min_window_length
                                and _is_cut(n0, n1, u0, u1, min_window_length,
                                            window_variance, delta_prime)):
                            change = True
                            if width[d] > 0.0:
                                # drop the oldest bucket: the front of the last row
                                last = n_rows[d] - 1
                                n = _bucket_size(last)
                                u = bucket_total[d, last, 0]
                                v = bucket_variance[d, last, 0]
                                width[d] -= n
                                total[d] -= u
                                variance[d] -= _removed_variance(u, v, n, total[d], width[d])
                                c = bucket_count[d, last]
                                for q in range(c - 1):
                                    bucket_total[d, last, q] = bucket_total[d, last, q + 1]
                                    bucket_variance[d, last, q] = bucket_variance[d, last, q + 1]
                                bucket_total[d, last, c - 1] = 0.0
                                bucket_variance[d, last, c - 1] = 0.0
                                bucket_count[d, last] = c - 1
                                while n_rows[d] > 1 and bucket_count[d, n_rows[d] - 1] == 0:
                                    n_rows[d] -= 1
                                scan = True
                                break
                    r -= 1
                    size *= 0.5
        drift[d] = change
        if change:
            n_detections[d] += 1
        out[j] = change
        j += 1
    n_seen[0] += j - start
    return j

# --------------------------------------------------------------------------------------------
# Python classes
# --------------------------------------------------------------------------------------------

# name -> (dtype, shape after the detector axis, from (rows, max_buckets))
_LAYOUT = {
    "bucket_total": (np.float64, lambda rows, mb: (rows, mb + 1)),
    "bucket_variance": (np.float64, lambda rows, mb: (rows, mb + 1)),
    "bucket_count": (np.int64, lambda rows, mb: (rows,)),
    "n_rows": (np.int64, lambda rows, mb: ()),
    "total": (np.float64, lambda rows, mb: ()),
    "variance": (np.float64, lambda rows, mb: ()),
    "width": (np.float64, lambda rows, mb: ()),
    "tick": (np.int64, lambda rows, mb: ()),
    "drift": (np.bool_, lambda rows, mb: ()),
    "n_detections": (np.int64, lambda rows, mb: ()),
}
_KERNEL_ARRAYS = tuple(_LAYOUT) + ("n_seen",)
_WINDOW_ARRAYS = ("bucket_total", "bucket_variance", "bucket_count", "n_rows", "total",
                  "variance", "width", "tick", "drift")


@njit
def reset_detector(d, bucket_total, bucket_variance, bucket_count, n_rows, total, variance,
                   width, tick, drift):
    """An empty window for detector ``d`` (river's ``detector.clone()``)."""
    bucket_total[d] = 0.0
    bucket_variance[d] = 0.0
    bucket_count[d] = 0
    n_rows[d] = 1
    total[d] = 0.0
    variance[d] = 0.0
    width[d] = 0.0
    tick[d] = 0
    drift[d] = False


#: buckets per row of the detectors a forest keeps per tree (river's default)
TREE_MAX_BUCKETS = 5


def tree_bank_layout(prefix: str) -> dict[str, tuple[str, int]]:
    """``state_arrays`` entries of one detector per tree, names prefixed with ``prefix``."""
    return {prefix + name: (np.dtype(dt).str, 1 + len(tail(1, 1)))
            for name, (dt, tail) in _LAYOUT.items()} | {prefix + "n_seen": ("<i8", 1)}


def new_tree_bank(n: int, prefix: str, rows: int = _INITIAL_ROWS) -> dict[str, np.ndarray]:
    """Empty windows for ``n`` detectors of ``rows`` bucket rows each."""
    a = {prefix + name: np.zeros((n, *tail(rows, TREE_MAX_BUCKETS)), dt)
         for name, (dt, tail) in _LAYOUT.items()}
    a[prefix + "n_rows"][:] = 1
    a[prefix + "n_seen"] = np.zeros(1, np.int64)
    return a


def tree_bank_names(prefix: str) -> tuple[str, ...]:
    """The names of the bank's arrays under ``prefix``, in the order :func:`_update_pairs`
    takes them."""
    return tuple(prefix + name for name in _KERNEL_ARRAYS)


def tree_bank_args(a: dict, prefix: str) -> tuple:
    """The bank's arrays in the order :func:`_update_pairs` takes them."""
    return tuple(a[name] for name in tree_bank_names(prefix))


def tree_bank_settings(delta: float) -> np.ndarray:
    """Kernel settings: ``delta`` and river's clock, buckets, minimum window and grace period."""
    return np.array([float(delta), 32.0, TREE_MAX_BUCKETS, 5.0, 10.0])


def grow_tree_bank(a: dict, prefix: str) -> None:
    """Double the bucket rows when some detector uses every row (a kernel stopped for it)."""
    rows = a[prefix + "bucket_total"].shape[1]
    if (a[prefix + "n_rows"] >= rows).any():
        for name in ("bucket_total", "bucket_variance", "bucket_count"):
            a[prefix + name] = grow_axis(a[prefix + name], 2 * rows, axis=1)


def check_tree_bank(a: dict, prefix: str, n: int) -> None:
    """``ValueError`` unless the bank holds ``n`` detectors of consistent shapes and ranges."""
    count = a[prefix + "bucket_count"]
    rows = count.shape[1] if count.ndim == 2 else -1
    shapes = {prefix + name: (n, *tail(rows, TREE_MAX_BUCKETS)) for name, (_, tail) in _LAYOUT.items()}
    check_shapes(a, shapes | {prefix + "n_seen": (1,)})
    check_index(count, 0, TREE_MAX_BUCKETS + 2, prefix + "bucket_count")
    check_index(a[prefix + "n_rows"], 1, rows + 1, prefix + "n_rows")


class _ADWINArrays(Learner):
    """State, growth and kernel calls shared by :class:`ADWINBank` and :class:`ADWIN`."""

    state_arrays = {**{name: (np.dtype(dtype).str, 1 + len(tail(1, 1)))
                       for name, (dtype, tail) in _LAYOUT.items()}, "n_seen": ("<i8", 1)}

    def _check_state(self) -> None:
        """Bucket counts and row counts stay inside the bucket arrays."""
        a, mb = self._arrays, self._settings[2]
        check_index(a["bucket_count"], 0, mb + 2, "bucket_count")
        check_index(a["n_rows"], 1, a["bucket_count"].shape[1] + 1, "n_rows")

    def _init_adwin(self, n_detectors, delta, clock, max_buckets, min_window_length,
                    grace_period) -> None:
        if not 0.0 < float(delta) < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        self._settings = (float(delta), check_int("clock", clock, 1),
                          check_int("max_buckets", max_buckets, 1),
                          float(check_int("min_window_length", min_window_length, 0)),
                          float(check_int("grace_period", grace_period, 0)))
        self._arrays = self._allocate(check_int("n_detectors", n_detectors, 1), _INITIAL_ROWS)
        self._refresh()

    def _allocate(self, n: int, rows: int) -> dict[str, np.ndarray]:
        mb = self._settings[2]
        arrays = {name: np.zeros((n,) + tail(rows, mb), dtype=dtype)
                  for name, (dtype, tail) in _LAYOUT.items()}
        arrays["n_rows"][:] = 1
        arrays["n_seen"] = np.zeros(1, dtype=np.int64)
        return arrays

    def _refresh(self) -> None:
        """Cache the kernel's arguments (after construction, growth or a restore)."""
        self._n_detectors = self._arrays["total"].shape[0]
        self._every = np.arange(self._n_detectors, dtype=np.int64)
        self._args = self._settings + tuple(self._arrays[k] for k in _KERNEL_ARRAYS)

    def _load_extra_state(self, extra: dict) -> None:
        # from_state has just replaced self._arrays: check shapes and dtypes, refresh the cache
        n = self._arrays["total"].shape[0]
        rows = self._arrays["bucket_count"].shape[1]
        for name, (dtype, tail) in _LAYOUT.items():
            expected = (n,) + tail(rows, self._settings[2])
            if self._arrays[name].shape != expected:
                raise ValueError(f"state array {name!r} has shape {self._arrays[name].shape}, "
                                 f"expected {expected}")
            self._arrays[name] = np.ascontiguousarray(self._arrays[name], dtype=dtype)
        self._arrays["n_seen"] = np.ascontiguousarray(self._arrays["n_seen"], dtype=np.int64)
        self._refresh()

    def _grow_rows(self) -> None:
        """Double the row capacity of every detector, keeping their buckets."""
        rows = self._arrays["bucket_count"].shape[1]
        bigger = self._allocate(self._n_detectors, 2 * rows)
        for name, arr in self._arrays.items():
            if name in ("bucket_total", "bucket_variance", "bucket_count"):
                bigger[name][:, :rows] = arr
            else:
                bigger[name] = arr
        self._arrays = bigger
        self._refresh()

    def _run(self, detectors: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Run the kernel over ``values`` (growing rows when it asks); drift flags per value."""
        out = np.zeros(values.shape[0], dtype=np.bool_)
        done = _update_pairs(detectors, values, 0, out, *self._args)
        while done < values.shape[0]:
            self._grow_rows()
            done = _update_pairs(detectors, values, done, out, *self._args)
        return out

    def _reset_detectors(self, detectors) -> None:
        """Empty the windows of ``detectors`` (detection counts are kept)."""
        fresh = self._allocate_detectors(len(detectors))
        for name in _WINDOW_ARRAYS:
            self._arrays[name][detectors] = fresh[name]

    def _allocate_detectors(self, n: int) -> dict[str, np.ndarray]:
        """Empty windows for ``n`` detectors, with the bank's row capacity."""
        return self._allocate(n, self._arrays["bucket_count"].shape[1])


class ADWINBank(DetectorBank, _ADWINArrays):
    """``n_detectors`` independent ADWIN detectors updated together (one per tree, per stream).

    All detectors share the hyperparameters; each one behaves exactly like an :class:`ADWIN`
    fed with the values addressed to it.

    Parameters
    ----------
    n_detectors : int
        Number of detectors.
    delta, clock, max_buckets, min_window_length, grace_period
        As in :class:`ADWIN` (the same defaults), for every detector of the bank.

    Examples
    --------
    Three detectors; only the first one sees its mean jump at step 1000:

    >>> import numpy as np
    >>> bank = ADWINBank(3)
    >>> rng = np.random.default_rng(0)
    >>> shift = np.array([5.0, 0.0, 0.0])
    >>> fired = []
    >>> for t in range(2000):
    ...     drift = bank.update(rng.normal(size=3) + (shift if t >= 1000 else 0.0))
    ...     fired += [(t, int(i)) for i in np.flatnonzero(drift)]
    >>> fired
    [(1023, 0)]

    References
    ----------
    Bifet, A. and Gavaldà, R. (2007). Learning from time-changing data with adaptive
    windowing. SIAM SDM 2007, 443-448.
    """

    kind = "adwin_bank"
    _detector_layout = tuple(_LAYOUT)

    def __init__(self, n_detectors: int, delta: float = 0.002, clock: int = 32,
                 max_buckets: int = 5, min_window_length: int = 5, grace_period: int = 10):
        self.params = {"n_detectors": n_detectors, "delta": delta, "clock": clock,
                       "max_buckets": max_buckets, "min_window_length": min_window_length,
                       "grace_period": grace_period}
        self._init_adwin(n_detectors, delta, clock, max_buckets, min_window_length,
                         grace_period)

    def update(self, values) -> np.ndarray:
        """Feed ``values[i]`` to detector ``i``, for every detector, in one kernel call.

        Returns
        -------
        numpy.ndarray
            Boolean mask of shape ``(n_detectors,)``: the detectors that detected a drift.
        """
        return self._run(self._every, self._one_per_detector(values))

    def update_many(self, i: int, xs) -> np.ndarray:
        """Feed the values ``xs``, in order, to detector ``i``.

        Returns
        -------
        numpy.ndarray
            int64 positions within ``xs`` at which detector ``i`` detected a drift.
        """
        return np.flatnonzero(self._run_one(i, xs))

    def update_at(self, detectors, values) -> np.ndarray:
        """Feed ``values[j]`` to detector ``detectors[j]``, in order (indices may repeat).

        Returns
        -------
        numpy.ndarray
            Boolean mask aligned with ``values``: drift detected at that update.
        """
        return self._run(*self._addressed(detectors, values))

    width = StateField("width", "Per detector: number of values in the window.", dtype=np.int64)
    total = StateField("total", "Per detector: sum of the values in the window.")
    variance = StateField(
        "variance", "Per detector: sum of squared deviations in the window (river's ``variance``)."
    )

    @property
    def variance_in_window(self) -> np.ndarray:
        """Per detector: ``variance / width``, the window's population variance."""
        w = self._arrays["width"]
        return np.divide(self._arrays["variance"], w, out=np.zeros_like(w), where=w > 0)

    @property
    def estimation(self) -> np.ndarray:
        """Per detector: mean of the window (0 for an empty window)."""
        w = self._arrays["width"]
        return np.divide(self._arrays["total"], w, out=np.zeros_like(w), where=w > 0)



class ADWIN(_ADWINArrays):
    """ADaptive WINdowing drift detector (a bank of one detector).

    Same semantics and defaults as ``river.drift.ADWIN``: drifts are reported at the same
    positions, and after a drift the next value starts a new window. See :mod:`models.drift.adwin`
    for where river, and so this class, departs from the paper.

    Parameters
    ----------
    delta : float, default 0.002
        Significance of the cut test; smaller values mean fewer, later detections.
    clock : int, default 32
        Cuts are tested every ``clock`` updates.
    max_buckets : int, default 5
        Buckets of each size kept before the two oldest are merged (ADWIN2's ``M``).
    min_window_length : int, default 5
        Both sub-windows of a cut must hold at least this many values.
    grace_period : int, default 10
        No test until the window holds more than this many values.

    Examples
    --------
    The two-distribution stream of river's documentation, with river's answer (1023):

    >>> import random
    >>> rng = random.Random(12345)
    >>> stream = rng.choices([0, 1], k=1000) + rng.choices(range(4, 8), k=1000)
    >>> ADWIN().update_many(stream).tolist()
    [1023]

    References
    ----------
    Bifet, A. and Gavaldà, R. (2007). Learning from time-changing data with adaptive
    windowing. SIAM SDM 2007, 443-448.
    """

    kind = "adwin"

    def __init__(self, delta: float = 0.002, clock: int = 32, max_buckets: int = 5,
                 min_window_length: int = 5, grace_period: int = 10):
        self.params = {"delta": delta, "clock": clock, "max_buckets": max_buckets,
                       "min_window_length": min_window_length, "grace_period": grace_period}
        self._init_adwin(1, delta, clock, max_buckets, min_window_length, grace_period)

    def update(self, x) -> bool:
        """Feed one value; returns whether a drift was detected at it.

        Each call is one kernel call (a few microseconds of dispatch): feed streams through
        :meth:`update_many` whenever values arrive in batches.
        """
        try:
            x = float(x)
        except (TypeError, ValueError):
            raise ValueError(f"x must be a number, got {x!r}") from None
        if not math.isfinite(x):
            raise ValueError(f"x must be finite, got {x}")
        return bool(self._run(self._every, np.array([x]))[0])

    def update_many(self, xs) -> np.ndarray:
        """Feed the values ``xs`` in order.

        Returns
        -------
        numpy.ndarray
            int64 positions within ``xs`` at which a drift was detected.
        """
        return np.flatnonzero(self._run(self._every, check_values(xs, "xs")))

    def reset(self) -> None:
        """Empty the window (the detection count is kept)."""
        self._reset_detectors(self._every)

    drift_detected = StateField("drift", "Whether the last update detected a drift.", cast=bool)
    width = StateField("width", "Number of values in the window.", cast=int)
    total = StateField("total", "Sum of the values in the window.", cast=float)
    variance = StateField(
        "variance", "Sum of squared deviations in the window (river's ``variance``).", cast=float
    )

    @property
    def variance_in_window(self) -> float:
        """``variance / width``, the window's population variance (0 for an empty window)."""
        w = self._arrays["width"][0]
        return float(self._arrays["variance"][0] / w) if w > 0 else 0.0

    @property
    def estimation(self) -> float:
        """Mean of the window (0 for an empty window)."""
        w = self._arrays["width"][0]
        return float(self._arrays["total"][0] / w) if w > 0 else 0.0

    n_detections = StateField("n_detections", "Number of drifts detected so far.", cast=int)
