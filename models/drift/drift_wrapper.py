"""A classifier wrapped with DDM: background learner on warning, replacement on drift."""

from __future__ import annotations

import numpy as np

from ..core.base import Classifier, ClassIndex, LearnerEvent, check_X, learner_class
from .ddm import DDM


def fresh_copy(learner, mask=None):
    """A new, untrained learner with the same parameters (and the feature mask ``mask``)."""
    new = learner.fresh() if hasattr(learner, "fresh") else type(learner)(**learner.params)
    if mask is not None and hasattr(new, "set_feature_mask"):
        new.set_feature_mask(mask)
    return new


def learner_from_state(state: dict):
    """Rebuild a nested learner by its state ``kind`` (any learner class of the core)."""
    return learner_class(state.get("kind", "")).from_state(state)


_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE
# MOA DDM state: n, p, s, ps_min, p_min, s_min, change, warning, initialised
_N, _P, _S, _PSMIN, _PMIN, _SMIN, _CHANGE, _WARNING, _INIT = range(9)


def moa_ddm_update(st: np.ndarray, error: float, min_n: float, warning_level: float,
                   drift_level: float) -> tuple[bool, bool]:
    """One step of MOA's ``DDM`` (``moa.classifiers.core.driftdetection.DDM``) on ``st``.

    It differs from river's (:mod:`models.drift.ddm`) in ways that move accuracies by points:
    the error rate and its deviation use the count *before* the value is added (``n``
    starts at 1 after a reset), the minimum is tracked once that count reaches 29 values
    (``n >= 30``) and a drift needs ``n > 30``.
    """
    if st[_CHANGE] or not st[_INIT]:
        st[:] = (1.0, 1.0, 0.0, _MAX, _MAX, _MAX, 0.0, 0.0, 1.0)
    st[_P] += (error - st[_P]) / st[_N]
    st[_S] = float(np.sqrt(st[_P] * (1.0 - st[_P]) / st[_N]))
    st[_N] += 1.0
    st[_CHANGE] = 0.0
    st[_WARNING] = 0.0
    if st[_N] < min_n:
        return False, False
    ps = st[_P] + st[_S]
    if ps <= st[_PSMIN]:
        st[_PMIN], st[_SMIN], st[_PSMIN] = st[_P], st[_S], ps
    if st[_N] > min_n and ps > st[_PMIN] + drift_level * st[_SMIN]:
        st[_CHANGE] = 1.0
    elif ps > st[_PMIN] + warning_level * st[_SMIN]:
        st[_WARNING] = 1.0
    return bool(st[_CHANGE]), bool(st[_WARNING])


class DriftDetectionClassifier(Classifier):
    """MOA's ``DriftDetectionMethodClassifier`` with DDM (Gama et al. 2004).

    Every row is first predicted by the active learner and its 0/1 error fed to a DDM
    detector (:class:`models.drift.ddm.DDM`). While DDM is in its warning zone a background
    learner (restarted at the first warning row after an in-control row) learns the rows
    too; at a drift the background learner replaces the active one and a new background
    learner is prepared. The active learner then learns the row.

    Parameters
    ----------
    learner : Learner
        The wrapped classifier (its parameters are used for every replacement).
    warm_start, warning_threshold, drift_threshold
        DDM's settings (MOA and river: 30, 2.0, 3.0).
    detector : {"moa", "river"}, default "moa"
        ``"moa"``: MOA's DDM (:func:`moa_ddm_update`), which MOA's wrapper uses;
        ``"river"``: river's (:class:`models.drift.ddm.DDM`).

    Examples
    --------
    >>> import numpy as np
    >>> from models.hoeffding.naive_bayes import NaiveBayes
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 2))
    >>> y = np.where(np.arange(4000) < 2000, X[:, 0] > 0, X[:, 0] < 0).astype(int)
    >>> model = DriftDetectionClassifier(NaiveBayes())
    >>> model.learn_many(X, y)
    >>> model.n_drifts >= 1, model.predict_many(np.array([[2.0, 0.0]]))
    (True, [0])

    References
    ----------
    Gama, J., Medas, P., Castillo, G. and Rodrigues, P. (2004). Learning with drift
    detection. SBIA 2004, 286-295.
    """

    kind = "ddm_classifier"
    state_arrays = {"n_seen": ("<i8", 1), "counters": ("<i8", 1), "moa_ddm": ("<f8", 1)}

    def __init__(self, learner, warm_start: int = 30, warning_threshold: float = 2.0,
                 drift_threshold: float = 3.0, detector: str = "moa"):
        if detector not in ("moa", "river"):
            raise ValueError(f"detector must be 'moa' or 'river', got {detector!r}")
        self.params = {"warm_start": warm_start, "warning_threshold": warning_threshold,
                       "drift_threshold": drift_threshold, "detector": detector}
        self._template = learner
        self._active = learner
        self._background = None
        self._ddm = DDM(warm_start, warning_threshold, drift_threshold)
        self._moa_settings = (float(warm_start), float(warning_threshold),
                              float(drift_threshold))
        self._classes = ClassIndex()
        # counters: drifts, warnings, restart-background flag
        self._arrays = {"n_seen": np.zeros(1, np.int64), "counters": np.zeros(3, np.int64),
                        "moa_ddm": np.zeros(9)}
        self._events: list[LearnerEvent] = []
        self._mask_columns = None

    @property
    def n_drifts(self) -> int:
        """Drifts detected (active learner replaced) so far."""
        return int(self._arrays["counters"][0])

    @property
    def learner(self):
        """The active learner."""
        return self._active

    def fresh(self):
        """An untrained wrapper around a fresh copy of the learner."""
        new = DriftDetectionClassifier(fresh_copy(self._template), **self.params)
        new.set_feature_mask(self._mask_columns)
        return new

    def set_feature_mask(self, columns=None) -> None:
        """Pass a feature mask on to the wrapped learners (see the learners' method)."""
        self._mask_columns = None if columns is None else list(columns)
        for m in (self._active, self._background):
            if m is not None and hasattr(m, "set_feature_mask"):
                m.set_feature_mask(self._mask_columns)

    def events(self) -> list[LearnerEvent]:
        """``concept_drift`` events (one per replacement) of the last ``learn_many``."""
        return list(self._events)

    def learn_many(self, X, y, sample_weight=None) -> None:
        """Test each row with the active learner, update DDM, then learn it (see class doc)."""
        self._run(X, y, sample_weight, None)

    def predict_proba_learn_many(self, X, y, sample_weight=None) -> np.ndarray:
        """Test-then-train in one call: row ``i``'s probabilities (columns in this
        wrapper's class order after the call) by the active learner as it stood before
        row ``i``, which DDM then judges, then the row learned (:meth:`learn_many`).

        The wrapper tests every row before learning it anyway (MOA's
        ``DriftDetectionMethodClassifier``); this returns those tests instead of a second
        pass. A row met by an untrained active learner (the first, or right after a
        drift) gets zeros.
        """
        out: list = []
        self._run(X, y, sample_weight, out)
        n = len(self._classes)
        proba = np.zeros((len(out), n))
        for i, (cols, row) in enumerate(out):
            proba[i, cols] = row
        return proba

    def _run(self, X, y, sample_weight, out: list | None) -> None:
        """The rows test-then-train; ``out`` (a list) receives each row's test as
        ``(wrapper columns, probabilities)``."""
        X = check_X(X, getattr(self._active, "n_features", None))
        if y is None:
            raise ValueError("DriftDetectionClassifier needs labels: y must not be None")
        self._classes.encode(y, n_rows=X.shape[0])
        labels = list(y) if not isinstance(y, list) else y
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w is not None and w.shape != (X.shape[0],):
            raise ValueError(f"sample_weight has shape {w.shape}, expected ({X.shape[0]},)")
        self._events = []
        c = self._arrays["counters"]
        for i in range(X.shape[0]):
            row = X[i:i + 1]
            label = [labels[i]]
            wi = None if w is None else w[i:i + 1]
            if self._active.n_seen:
                pred = self._active.predict_many(row)[0]
                if out is not None:
                    out.append((self._classes.encode(self._active.classes),
                                self._active.predict_proba_many(row)[0]))
            else:  # MOA: the largest of no votes is class 0 (of the labels known up front)
                pred = next(iter(self._active.classes), None)
                if out is not None:
                    out.append(([], np.zeros(0)))
            error = 0.0 if pred is not None and pred == labels[i] else 1.0
            if self.params["detector"] == "moa":
                drift, warning = moa_ddm_update(self._arrays["moa_ddm"], error,
                                                *self._moa_settings)
            else:
                drift = self._ddm.update(error)
                warning = self._ddm.warning_detected
            if drift:
                c[0] += 1
                self._active = self._background or fresh_copy(self._template, self._mask_columns)
                self._background = None
                self._events.append(LearnerEvent("concept_drift", "drift", i, -1,
                                                 "DDM drift: the background learner took over"))
            elif warning:
                if c[2] or self._background is None:
                    c[1] += 1
                    self._background = fresh_copy(self._template, self._mask_columns)
                    c[2] = 0
                self._background.learn_many(row, label, wi)
            else:
                c[2] = 1
            self._active.learn_many(row, label, wi)
        self._arrays["n_seen"][0] += X.shape[0]

    def predict_proba_many(self, X) -> np.ndarray:
        """The active learner's probabilities, columns in this wrapper's class order."""
        X = check_X(X, getattr(self._active, "n_features", None))
        if not self._active.n_seen:
            return np.zeros((X.shape[0], 0))
        inner = self._active.predict_proba_many(X)
        cols = self._classes.encode(self._active.classes)  # labels it knew up front too
        out = np.zeros((X.shape[0], len(self._classes)))
        out[:, cols] = inner
        return out

    def predict_many(self, X) -> list:
        """The active learner's labels (its own class order breaks ties)."""
        X = check_X(X, getattr(self._active, "n_features", None))
        if not self._active.n_seen:
            return [None] * X.shape[0]
        return self._active.predict_many(X)

    def importances(self) -> dict:
        return self._active.importances()

    # ------------------------------------------------------------------ state

    def to_state(self) -> dict:
        state = super().to_state()
        state["extra"] = {
            "classes": list(self._classes.classes),
            "template": self._template.to_state(),
            "active": self._active.to_state(),
            "background": None if self._background is None else self._background.to_state(),
            "ddm": self._ddm.to_state(),
            "mask": self._mask_columns,
        }
        return state

    @classmethod
    def from_state(cls, state: dict):
        extra = cls._state_extra(state)
        try:
            template = learner_from_state(extra["template"])
            obj = cls(template, **state["params"])
            obj._active = learner_from_state(extra["active"])
            bg = extra.get("background")
            obj._background = None if bg is None else learner_from_state(bg)
            obj._ddm = DDM.from_state(extra["ddm"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{cls.kind} state is incomplete: {exc}") from None
        obj._classes = ClassIndex(extra.get("classes", ()))
        obj._mask_columns = extra.get("mask")
        arrays = {k: np.ascontiguousarray(np.array(v, copy=True))
                  for k, v in state["arrays"].items()}
        from ..core.base import check_layout

        check_layout(arrays, cls.state_arrays, cls.kind)
        if arrays["counters"].shape != (3,) or arrays["n_seen"].shape != (1,) \
                or arrays["moa_ddm"].shape != (9,):
            raise ValueError(f"{cls.kind} state arrays have the wrong shapes")
        obj._arrays = arrays
        return obj
