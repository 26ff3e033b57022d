"""What every bank of drift detectors shares: ``n_detectors`` independent detectors of one kind
(one per tree of a forest, one per stream) whose state arrays have the detector as leading axis.

:class:`DetectorBank` is the base of :class:`models.drift.adwin.ADWINBank` and
:class:`models.drift.ddm.DDMBank`: the bank's size, the checks of values and detector indices, resets
and growth. A detector family supplies its arrays and kernel calls (``_allocate_detectors``,
``_reset_detectors``, ``_run``) and its value check (``_check``).
"""

from __future__ import annotations

import numpy as np

from ..core.base import StateField, as_float64


def check_values(values, name: str = "values") -> np.ndarray:
    """Return ``values`` as a finite, contiguous 1-D float64 array or raise ``ValueError``."""
    # contiguous for the kernels; a scalar becomes one value (ascontiguousarray gives ndim >= 1)
    arr = np.ascontiguousarray(as_float64(values, name))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} contains NaN or infinity at position {bad}")
    return arr


def check_int(name: str, value, low: int) -> int:
    """Return ``value`` as an int or raise ``ValueError`` when it is not an integer ``>= low``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


class DetectorBank:
    """Base of the detector banks (a mixin placed before the family's array class).

    The family's array class keeps ``self._arrays``, ``self._n_detectors`` and ``self._every``
    (``arange(n_detectors)``) up to date in ``_refresh``, and provides

    * ``_detector_layout``: the names of the per-detector arrays (``add_detectors`` extends
      them, other arrays such as ``n_seen`` are the bank's own);
    * ``_allocate_detectors(n)``: fresh arrays for ``n`` detectors;
    * ``_reset_detectors(indices)``: restart those detectors, keeping their detection counts;
    * ``_run(detectors, values)``: the kernel over ``values[j]`` for ``detectors[j]`` (or all
      for ``detectors[0]`` when it holds one index).

    ``_check`` turns values into the float64 array the kernel reads (``check_values`` by
    default; a family whose values must lie in a range checks that too).
    """

    _detector_layout: tuple[str, ...] = ()
    _check = staticmethod(check_values)

    def _refresh(self) -> None:
        super()._refresh()
        self.params["n_detectors"] = self._n_detectors

    @property
    def n_detectors(self) -> int:
        """Number of detectors in the bank."""
        return self._n_detectors

    def _detector_index(self, i) -> int:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) \
                or not 0 <= i < self._n_detectors:
            raise ValueError(f"detector index {i!r} is not an integer in "
                             f"[0, {self._n_detectors})")
        return int(i)

    def _one_per_detector(self, values) -> np.ndarray:
        """``values`` checked, one for each detector of the bank."""
        values = self._check(values, "values")
        if values.shape[0] != self._n_detectors:
            raise ValueError(f"values has {values.shape[0]} entries but the bank has "
                             f"{self._n_detectors} detectors")
        return values

    def _addressed(self, detectors, values) -> tuple[np.ndarray, np.ndarray]:
        """``(detector indices, values)`` checked for :meth:`update_at`."""
        values = self._check(values, "values")
        idx = np.ascontiguousarray(detectors, dtype=np.int64)
        if idx.shape != values.shape:
            raise ValueError(f"detectors has shape {idx.shape} but values has {values.shape}")
        if idx.size and (idx.min() < 0 or idx.max() >= self._n_detectors):
            raise ValueError(f"detector indices must be in [0, {self._n_detectors})")
        return idx, values

    def _run_one(self, i, xs):
        """The kernel over the values ``xs`` of detector ``i``."""
        i = self._detector_index(i)
        return self._run(self._every[i:i + 1], self._check(xs, "xs"))

    def reset(self, detectors=None) -> None:
        """Restart ``detectors`` (all when ``None``); detection counts are kept."""
        idx = self._every if detectors is None else [self._detector_index(i) for i in
                                                     np.atleast_1d(detectors).tolist()]
        self._reset_detectors(idx)

    def add_detectors(self, n: int = 1) -> np.ndarray:
        """Append ``n`` fresh detectors; returns their indices."""
        n = check_int("n", n, 1)
        first = self._n_detectors
        fresh = self._allocate_detectors(n)
        for name in self._detector_layout:
            self._arrays[name] = np.concatenate([self._arrays[name], fresh[name]])
        self._refresh()
        return np.arange(first, self._n_detectors)

    drift_detected = StateField("drift", "Per detector: whether its last update detected a drift.")
    n_detections = StateField("n_detections", "Per detector: number of drifts detected so far.")
