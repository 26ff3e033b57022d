"""DDM drift detectors: many independent error-rate monitors updated by one kernel call.

DDM (Gama, Medas, Castillo & Rodrigues, 2004) watches a stream of errors (1 = the model was
wrong, 0 = right). With ``p_i`` the error rate over the ``i`` values since the last reset and
``s_i = sqrt(p_i (1 - p_i) / i)`` its binomial standard deviation, it remembers ``p_min`` and
``s_min`` at the point where ``p_i + s_i`` was lowest, and after ``warm_start`` values signals

* a warning while ``p_i + s_i > p_min + warning_threshold * s_min``,
* a drift when ``p_i + s_i > p_min + drift_threshold * s_min``; the next value starts afresh.

State layout (structure of arrays, leading axis = detector)::

    n             float64  values since the last reset
    mean          float64  error rate p_i
    p_min, s_min  float64  p and s where p + s was lowest (NaN until warm_start is passed)
    ps_min        float64  p_min + s_min (inf until then)
    warning       bool     the last update was in the warning zone
    drift         bool     the last update reported drift
    n_detections  int64    drifts over the detector's life

Semantics are those of ``river.drift.binary.DDM`` (river 0.26), bit for bit, so our alerts
agree with the reference users compare us to: the error rate is river's running mean
``mean += (1/n) * (x - mean)`` (not Welford's ``(x - mean)/n``, which rounds differently),
``warm_start`` counts values since
the last reset, the zone tests are strict (``>``), ``p_min`` and ``s_min`` move whenever
``p_i + s_i <= p_min + s_min``, a drift clears the warning, and the reset happens at the
update that follows a drift.

References
----------
Gama, J., Medas, P., Castillo, G. and Rodrigues, P. (2004). Learning with drift detection.
SBIA 2004, Lecture Notes in Computer Science 3171, 286-295.
"""

from __future__ import annotations

import math

import numpy as np

from ..core._jit import njit
from ..core.base import Learner, StateField
from ._bank import DetectorBank, check_int, check_values


@njit(error_model="numpy")
def _update_pairs(detectors, values, out_drift, out_warning, warm_start, warning_threshold,
                  drift_threshold, n, mean, p_min, s_min, ps_min, warning, drift, n_detections,
                  n_seen):
    """Feed ``values[j]`` to detector ``detectors[j]`` (or to ``detectors[0]`` when it holds a
    single index) and write the drift and warning flags of each update."""
    one = detectors.shape[0] == 1
    for j in range(values.shape[0]):
        d = detectors[0] if one else detectors[j]
        if drift[d]:  # river starts afresh at the update that follows a drift
            n[d] = 0.0
            mean[d] = 0.0
            p_min[d] = np.nan
            s_min[d] = np.nan
            ps_min[d] = np.inf
            warning[d] = False
            drift[d] = False
        count = n[d] + 1.0
        n[d] = count
        p = mean[d] + (1.0 / count) * (values[j] - mean[d])
        mean[d] = p
        s = math.sqrt(p * (1.0 - p) / count)
        if count > warm_start:
            if p + s <= ps_min[d]:
                p_min[d] = p
                s_min[d] = s
                ps_min[d] = p + s
            warning[d] = p + s > p_min[d] + warning_threshold * s_min[d]
            if p + s > p_min[d] + drift_threshold * s_min[d]:
                drift[d] = True
                warning[d] = False
                n_detections[d] += 1
        out_drift[j] = drift[d]
        out_warning[j] = warning[d]
    n_seen[0] += values.shape[0]


# name -> (dtype, initial value)
_LAYOUT = {
    "n": (np.float64, 0.0),
    "mean": (np.float64, 0.0),
    "p_min": (np.float64, np.nan),
    "s_min": (np.float64, np.nan),
    "ps_min": (np.float64, np.inf),
    "warning": (np.bool_, False),
    "drift": (np.bool_, False),
    "n_detections": (np.int64, 0),
}
_KERNEL_ARRAYS = tuple(_LAYOUT) + ("n_seen",)


def _check_errors(values, name: str) -> np.ndarray:
    arr = check_values(values, name)
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        bad = int(np.flatnonzero((arr < 0.0) | (arr > 1.0))[0])
        raise ValueError(f"{name} must hold errors in [0, 1] (1 = wrong prediction), got "
                         f"{arr[bad]} at position {bad}")
    return arr


class _DDMArrays(Learner):
    """State and kernel calls shared by :class:`DDMBank` and :class:`DDM`."""

    state_arrays = {**{name: (np.dtype(dtype).str, 1) for name, (dtype, _) in _LAYOUT.items()},
                    "n_seen": ("<i8", 1)}

    def _init_ddm(self, n_detectors, warm_start, warning_threshold, drift_threshold) -> None:
        warning_threshold, drift_threshold = float(warning_threshold), float(drift_threshold)
        if not 0.0 < warning_threshold <= drift_threshold:
            raise ValueError("thresholds must satisfy 0 < warning_threshold <= drift_threshold, "
                             f"got {warning_threshold} and {drift_threshold}")
        self._settings = (float(check_int("warm_start", warm_start, 0)), warning_threshold,
                          drift_threshold)
        self._arrays = self._allocate(check_int("n_detectors", n_detectors, 1))
        self._refresh()

    @staticmethod
    def _allocate(n: int) -> dict[str, np.ndarray]:
        arrays = {name: np.full(n, fill, dtype=dtype) for name, (dtype, fill) in _LAYOUT.items()}
        arrays["n_seen"] = np.zeros(1, dtype=np.int64)
        return arrays

    def _refresh(self) -> None:
        """Cache the kernel's arguments (after construction, growth or a restore)."""
        self._n_detectors = self._arrays["n"].shape[0]
        self._every = np.arange(self._n_detectors, dtype=np.int64)
        self._args = self._settings + tuple(self._arrays[k] for k in _KERNEL_ARRAYS)

    def _load_extra_state(self, extra: dict) -> None:
        n = self._arrays["n"].shape[0]
        for name, (dtype, _) in _LAYOUT.items():
            if self._arrays[name].shape != (n,):
                raise ValueError(f"state array {name!r} has shape {self._arrays[name].shape}, "
                                 f"expected {(n,)}")
            self._arrays[name] = np.ascontiguousarray(self._arrays[name], dtype=dtype)
        self._arrays["n_seen"] = np.ascontiguousarray(self._arrays["n_seen"], dtype=np.int64)
        self._refresh()

    def _run(self, detectors: np.ndarray, values: np.ndarray):
        drift = np.zeros(values.shape[0], dtype=np.bool_)
        warning = np.zeros(values.shape[0], dtype=np.bool_)
        _update_pairs(detectors, values, drift, warning, *self._args)
        return drift, warning

    def _allocate_detectors(self, n: int) -> dict[str, np.ndarray]:
        return self._allocate(n)

    def _reset_detectors(self, detectors) -> None:
        fresh = self._allocate(len(detectors))
        for name in _LAYOUT:
            if name != "n_detections":
                self._arrays[name][detectors] = fresh[name]


class DDMBank(DetectorBank, _DDMArrays):
    """``n_detectors`` independent DDM detectors updated together (one per tree, per stream).

    Parameters
    ----------
    n_detectors : int
        Number of detectors.
    warm_start, warning_threshold, drift_threshold
        As in :class:`DDM` (the same defaults), for every detector of the bank.

    Examples
    --------
    Two detectors; the error rate of the second one jumps from 10% to 60% at step 1000:

    >>> import numpy as np
    >>> bank = DDMBank(2)
    >>> rng = np.random.default_rng(5)
    >>> fired = []
    >>> for t in range(2000):
    ...     p = np.array([0.1, 0.6 if t >= 1000 else 0.1])
    ...     drift = bank.update(rng.random(2) < p)
    ...     fired += [(t, int(i)) for i in np.flatnonzero(drift)]
    >>> fired
    [(1072, 1)]

    References
    ----------
    Gama, J., Medas, P., Castillo, G. and Rodrigues, P. (2004). Learning with drift
    detection. SBIA 2004, 286-295.
    """

    kind = "ddm_bank"
    _detector_layout = tuple(_LAYOUT)
    _check = staticmethod(_check_errors)

    def __init__(self, n_detectors: int, warm_start: int = 30, warning_threshold: float = 2.0,
                 drift_threshold: float = 3.0):
        self.params = {"n_detectors": n_detectors, "warm_start": warm_start,
                       "warning_threshold": warning_threshold, "drift_threshold": drift_threshold}
        self._init_ddm(n_detectors, warm_start, warning_threshold, drift_threshold)

    def update(self, values, return_warnings: bool = False):
        """Feed ``values[i]`` (1 = error, 0 = correct) to detector ``i``, for every detector.

        Returns
        -------
        numpy.ndarray or tuple of numpy.ndarray
            Boolean mask of the detectors that detected a drift; with ``return_warnings``,
            ``(drift_mask, warning_mask)``.
        """
        drift, warning = self._run(self._every, self._one_per_detector(values))
        return (drift, warning) if return_warnings else drift

    def update_many(self, i: int, xs, return_warnings: bool = False):
        """Feed the errors ``xs``, in order, to detector ``i``; returns what
        :meth:`DDM.update_many` returns for them."""
        drift, warning = self._run_one(i, xs)
        if return_warnings:
            return np.flatnonzero(drift), np.flatnonzero(warning)
        return np.flatnonzero(drift)

    def update_at(self, detectors, values, return_warnings: bool = False):
        """Feed ``values[j]`` to detector ``detectors[j]``, in order (indices may repeat).

        Returns
        -------
        numpy.ndarray or tuple of numpy.ndarray
            Boolean drift mask aligned with ``values``; with ``return_warnings``,
            ``(drift_mask, warning_mask)``.
        """
        drift, warning = self._run(*self._addressed(detectors, values))
        return (drift, warning) if return_warnings else drift

    warning_detected = StateField(
        "warning", "Per detector: whether its last update was in the warning zone."
    )
    estimation = StateField("mean", "Per detector: error rate since its last reset.")


class DDM(_DDMArrays):
    """Drift Detection Method on a stream of errors (a bank of one detector).

    Same semantics and defaults as ``river.drift.binary.DDM``: warnings and drifts at the same
    positions. Feed 1 for a wrong prediction and 0 for a right one.

    Parameters
    ----------
    warm_start : int, default 30
        No warning or drift before more than this many values were seen since the last reset.
    warning_threshold : float, default 2.0
        Warning zone: ``p + s > p_min + warning_threshold * s_min``.
    drift_threshold : float, default 3.0
        Drift: ``p + s > p_min + drift_threshold * s_min``.

    Examples
    --------
    River's documentation stream, with river's answer:

    >>> import random
    >>> rng = random.Random(42)
    >>> stream = rng.choices([0, 1], k=1000) + rng.choices([0, 1], k=1000, weights=[0.3, 0.7])
    >>> drifts, warnings = DDM().update_many(stream, return_warnings=True)
    >>> drifts.tolist(), int(warnings[0]), int(warnings[warnings > drifts[0]][0])
    ([1334], 1084, 1492)

    References
    ----------
    Gama, J., Medas, P., Castillo, G. and Rodrigues, P. (2004). Learning with drift
    detection. SBIA 2004, 286-295.
    """

    kind = "ddm"

    def __init__(self, warm_start: int = 30, warning_threshold: float = 2.0,
                 drift_threshold: float = 3.0):
        self.params = {"warm_start": warm_start, "warning_threshold": warning_threshold,
                       "drift_threshold": drift_threshold}
        self._init_ddm(1, warm_start, warning_threshold, drift_threshold)

    def update(self, x) -> bool:
        """Feed one error (1 = wrong, 0 = right); returns whether a drift was detected at it.

        Each call is one kernel call (a few microseconds of dispatch): feed streams through
        :meth:`update_many` whenever errors arrive in batches.
        """
        try:
            x = float(x)
        except (TypeError, ValueError):
            raise ValueError(f"x must be a number, got {x!r}") from None
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"x must be an error in [0, 1] (1 = wrong prediction), got {x}")
        return bool(self._run(self._every, np.array([x]))[0][0])

    def update_many(self, xs, return_warnings: bool = False):
        """Feed the errors ``xs`` in order.

        Returns
        -------
        numpy.ndarray or tuple of numpy.ndarray
            int64 positions within ``xs`` where a drift was detected; with
            ``return_warnings``, ``(drift_positions, warning_positions)``, the latter being
            every position at which the detector was in the warning zone.
        """
        drift, warning = self._run(self._every, _check_errors(xs, "xs"))
        if return_warnings:
            return np.flatnonzero(drift), np.flatnonzero(warning)
        return np.flatnonzero(drift)

    def reset(self) -> None:
        """Restart the detector (the detection count is kept)."""
        self._reset_detectors(self._every)

    drift_detected = StateField("drift", "Whether the last update detected a drift.", cast=bool)
    warning_detected = StateField(
        "warning", "Whether the last update was in the warning zone.", cast=bool
    )
    estimation = StateField("mean", "Error rate since the last reset.", cast=float)
    n_detections = StateField("n_detections", "Number of drifts detected so far.", cast=int)
