"""Per-stream pipeline: predictor, importance tracker and drift detector, test-then-train.

One :class:`Pipeline` serves one stream (the Kafka key of its instances). It is plain Python
around the numba learners of :mod:`models` and knows nothing about Kafka: the worker hands it
the decoded rows of one stream, in partition order, and turns what it returns into messages.

Semantics (the same for every predictor, so that results never depend on how the input was
cut into consume batches)

* Every instance is predicted by the model as it stands; labelled instances are appended to a
  pending buffer after they were predicted (test-then-train).
* When the buffer holds ``batch_size`` labelled rows, the predictor (and the importance
  tracker) learn it as one mini-batch (``learn_many``). The forgetful learners are mini-batch
  learners by definition (Yuan et al. 2023, Sec. 3: each batch is tested before it is
  learned); the online random forest (Saffari et al. 2009) learns the same mini-batches row
  by row inside its kernel, so an instance is still predicted before it is learned, by a model
  at most ``batch_size - 1`` labelled rows old.
* The prequential error (0/1 of each labelled prediction) feeds the drift detector (ADWIN,
  Bifet & Gavaldà 2007, or DDM, Gama et al. 2004); every warning or drift becomes an alert.
* A forgetful tree that finds a batch at or below chance forgets all its old rows (Yuan et
  al. 2023, Sec. 3.2, the abrupt-drift case of the adaptive retain size); the pipeline reports
  it as an alert from the predictor: ``drift`` when at least half of the trees collapsed at
  that batch (a single tree: always), ``warning`` when fewer did.
* Rankings (one per importance method) are emitted every ``ranking_every`` instances and
  after a mini-batch whenever the top-k order of a method changed.

Input is processed in *segments* whose boundaries depend only on the stream itself (the
point where the buffer fills, the next ranking point), so an uninterrupted run, a run cut
into other consume batches and a run restored from a checkpoint give identical outputs.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

STATE_VERSION = 1

#: predictor name -> models attribute
_PREDICTORS = {
    "forgetful_forest": "ForgetfulRandomForest",
    "forgetful_tree": "ForgetfulDecisionTree",
    "online_random_forest": "OnlineRandomForest",
}
_DETECTORS = {"adwin": "ADWIN", "ddm": "DDM"}
_MASK63 = (1 << 63) - 1
_ne = operator.ne  # 1.0 for a wrong prediction (prequential error)


class PipelineError(ValueError):
    """A message a stream's pipeline cannot take (dead-lettered with ``code`` and reason)."""

    def __init__(self, code: str, reason: str):
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def stream_seed(stream: str, seed: int, salt: str = "") -> int:
    """Seed of one stream's learners: blake2b of the stream id mixed with the worker seed.

    The seed depends on nothing but the stream id, the configured seed and the component
    (``salt``), so a stream's results do not depend on which worker holds it.

    Examples
    --------
    >>> stream_seed("s1", 1) == stream_seed("s1", 1)
    True
    >>> stream_seed("s1", 1) != stream_seed("s2", 1) != stream_seed("s1", 2)
    True
    """
    digest = hashlib.blake2b(
        f"{salt}\x00{stream}".encode(), digest_size=8, person=b"streamforest"
    ).digest()
    h = int.from_bytes(digest, "little")
    return (h ^ ((int(seed) * 0x9E3779B97F4A7C15) & ((1 << 64) - 1))) & _MASK63


@dataclass(frozen=True)
class PipelineConfig:
    """What a new stream's pipeline is made of (a copy of the ``learners`` settings)."""

    task: str = "classification"
    predictor: str = "forgetful_forest"
    importance: bool = True
    drift_detector: str = "adwin"
    batch_size: int = 100
    n_trees: int = 20
    orf_trees: int = 10
    ranking_every: int = 1000
    top_k: int = 5
    seed: int = 1
    params: dict = field(default_factory=dict)

    @classmethod
    def from_settings(cls, learners: Any) -> PipelineConfig:
        """Build from the ``learners`` settings section (or any object with those fields)."""
        names = [f for f in cls.__dataclass_fields__]
        return cls(**{n: getattr(learners, n) for n in names if hasattr(learners, n)})

    def as_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


# --- learner construction ------------------------------------------------------------------


_MODULES = ("online_forest", "forgetful_forest", "forgetful_tree", "adwin", "ddm")


class _Models:
    """Learner classes by name, from :mod:`models` (imported on first use: it is slow)."""

    def __getattr__(self, name: str):
        import importlib

        import models

        cls = getattr(models, name, None)
        if cls is None:  # not re-exported: look in the learner modules
            for mod in _MODULES:
                try:
                    cls = getattr(importlib.import_module(f"models.{mod}"), name, None)
                except ImportError:
                    continue
                if cls is not None:
                    break
        if cls is None:
            raise AttributeError(f"models has no learner {name!r}")
        return cls


def _models():
    return _Models()


def build_predictor(cfg: PipelineConfig, seed: int):
    """The stream's predictor, from the configuration and the stream's seed."""
    if cfg.predictor not in _PREDICTORS:
        raise ValueError(f"unknown predictor {cfg.predictor!r}; choose one of {list(_PREDICTORS)}")
    cls = getattr(_models(), _PREDICTORS[cfg.predictor])
    kwargs = dict(cfg.params.get(cfg.predictor, {}))
    if cfg.predictor == "forgetful_forest":
        kwargs.setdefault("n_trees", cfg.n_trees)
    elif cfg.predictor == "online_random_forest":
        kwargs.setdefault("n_trees", cfg.orf_trees)
        # the predictor doubles as the importance tracker (no second forest)
        kwargs.setdefault("track_importance", bool(cfg.importance))
    kwargs["seed"] = seed
    return cls(**kwargs)


def build_importance(cfg: PipelineConfig, seed: int):
    """The online random forest that tracks MDA/MDG (Cassidy & Deviney 2014), or ``None``."""
    if not cfg.importance or cfg.predictor == "online_random_forest":
        return None
    kwargs = dict(cfg.params.get("online_random_forest", {}))
    kwargs.setdefault("n_trees", cfg.orf_trees)
    kwargs["track_importance"] = True
    kwargs["seed"] = seed
    return _models().OnlineRandomForest(**kwargs)


def build_detector(cfg: PipelineConfig):
    """Drift detector on the prequential error, or ``None``."""
    if cfg.drift_detector == "none":
        return None
    if cfg.drift_detector not in _DETECTORS:
        raise ValueError(f"unknown drift detector {cfg.drift_detector!r}")
    kwargs = dict(cfg.params.get(cfg.drift_detector, {}))
    return getattr(_models(), _DETECTORS[cfg.drift_detector])(**kwargs)


def _learner_from_state(state):
    """Rebuild a learner (or detector) from its ``to_state`` output, by its ``kind``."""
    if state is None:
        return None
    models = _models()
    for name in list(_PREDICTORS.values()) + list(_DETECTORS.values()):
        try:
            cls = getattr(models, name)
        except AttributeError:
            continue
        if getattr(cls, "kind", None) == state.get("kind"):
            return cls.from_state(state)
    raise ValueError(f"no learner of kind {state.get('kind')!r}")


# --- results ----------------------------------------------------------------------------------


@dataclass
class PredictionBlock:
    """Predictions of rows ``start:stop`` of the input, made by the same model."""

    start: int
    stop: int
    classes: list
    y_pred: list
    proba: np.ndarray | None  # (stop - start, len(classes)), None when not asked for


@dataclass
class Alert:
    row: int  # input row that triggered it (its timestamp is used)
    source: str
    level: str  # "warning" | "drift"
    position: int  # stream position (0-based instance index)
    detail: str = ""
    feature: str | None = None


@dataclass
class RankingOut:
    row: int
    method: str
    features: list
    scores: list
    n_seen: int


@dataclass
class StreamResult:
    """What :meth:`Pipeline.process` produced for one run of rows."""

    blocks: list = field(default_factory=list)
    alerts: list = field(default_factory=list)
    rankings: list = field(default_factory=list)
    rejected: list = field(default_factory=list)  # (row offsets, PipelineError) of a failed learn


def _collapsed(learner) -> int:
    """Trees of a forgetful learner that discarded all their retained rows at its last batch.

    Forgetful learners expose ``n_collapsed`` (Yuan et al. 2023, Sec. 3.2: a batch at or below
    chance accuracy makes a tree forget every old row, the abrupt-drift case of the adaptive
    retain size); other learners do not collapse.
    """
    value = getattr(learner, "n_collapsed", None)
    return int(value) if value is not None else 0


def _own(a: np.ndarray) -> np.ndarray:
    """``a`` itself if it owns its data, else a copy."""
    return a if a.base is None else np.array(a)


def _zone_entries(warnings: np.ndarray, was_warning: bool) -> np.ndarray:
    """Positions where a run of consecutive warning flags starts.

    ``was_warning`` is the detector's flag before this run of values, so a zone that began in
    an earlier batch is not announced again.
    """
    if warnings.shape[0] == 0:
        return warnings
    starts = np.ones(warnings.shape[0], dtype=bool)
    starts[1:] = np.diff(warnings) > 1
    if was_warning and warnings[0] == 0:
        starts[0] = False
    return warnings[starts]


# --- the pipeline -----------------------------------------------------------------------------


class Pipeline:
    """Predictor + importance tracker + drift detector of one stream.

    Parameters
    ----------
    stream : str
        Stream id (the Kafka key).
    cfg : PipelineConfig
        What to build.
    n_features : int
        Feature count, fixed by the stream's first message.
    feature_names : list of str, optional
        Names, when the first message carried ``x`` as a mapping; they fix the column order.
    """

    def __init__(self, stream: str, cfg: PipelineConfig, n_features: int,
                 feature_names: list[str] | None = None, *, _build: bool = True):
        if cfg.task != "classification":
            raise ValueError(f"task {cfg.task!r} is not supported yet (classification only)")
        self.stream = stream
        self.cfg = cfg
        self.n_features = int(n_features)
        self.feature_names = list(feature_names) if feature_names else None
        self.seed = stream_seed(stream, cfg.seed)
        if _build:
            self.predictor = build_predictor(cfg, self.seed)
            self.importance = build_importance(cfg, stream_seed(stream, cfg.seed, "importance"))
            self.detector = build_detector(cfg)
        self._pending_X: list[np.ndarray] = []
        self._pending_y: list = []
        self._pending_off: list[np.ndarray] = []
        self.n_pending = 0
        self.n_instances = 0
        self.n_labelled = 0
        self.n_correct = 0
        self.next_ranking = cfg.ranking_every
        self.last_topk: dict[str, list] = {}
        self.n_collapses = 0

    # -- public helpers ----------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Feature names used in rankings (``x0, x1, ...`` when the stream sends lists)."""
        if self.feature_names:
            return self.feature_names
        return [f"x{j}" for j in range(self.n_features)]

    @property
    def model_name(self) -> str:
        return self.cfg.predictor

    @property
    def accuracy(self) -> float:
        """Prequential accuracy so far (labelled instances)."""
        return self.n_correct / self.n_labelled if self.n_labelled else float("nan")

    def importance_source(self):
        """The learner whose ``importances()`` feed rankings, or ``None``."""
        if not self.cfg.importance:
            return None
        return self.importance if self.importance is not None else self.predictor

    # -- processing ----------------------------------------------------------------------------

    def process(self, X: np.ndarray, y: list, offsets: np.ndarray | None = None,
                emit: bool = True) -> StreamResult:
        """Test-then-train over consecutive rows of this stream.

        Parameters
        ----------
        X : ndarray of shape (n, n_features)
            Finite float64 rows, in stream order.
        y : list of length n
            Class labels, ``None`` for unlabelled rows.
        offsets : ndarray of int64, optional
            Source offsets of the rows (kept with pending rows, reported if a learn fails).
        emit : bool
            ``False`` while replaying input whose outputs were already committed: the state
            advances exactly as when emitting, but probabilities are not computed.
        """
        n = X.shape[0]
        if offsets is None:
            offsets = np.full(n, -1, dtype=np.int64)
        out = StreamResult()
        if None in y:
            labelled = np.fromiter((v is not None for v in y), dtype=bool, count=n)
        else:  # all labelled (the common case): no per-row test
            labelled = np.ones(n, dtype=bool)
        lab_idx = np.flatnonzero(labelled)
        B = self.cfg.batch_size
        every = self.cfg.ranking_every if self.importance_source() is not None else 0
        start = self.n_instances  # stream position of input row 0
        errors: list[np.ndarray] = []  # prequential error of the labelled rows, in row order
        self._classes = self.classes
        i = 0
        while i < n:
            j = n
            need = B - self.n_pending
            k = int(np.searchsorted(lab_idx, i))
            if k + need - 1 < lab_idx.shape[0]:
                j = int(lab_idx[k + need - 1]) + 1
            if every:
                j = min(j, i + (self.next_ranking - self.n_instances))
            self._segment(X, y, labelled, offsets, i, j, emit, out, errors)
            i = j
        if self.detector is not None and errors:
            # the detector only reads the error sequence, never feeds the learners: one call
            # over the whole run gives the alerts the per-segment calls would
            self._detect(np.concatenate(errors), lab_idx, start, out)
        # pending rows may be views of the caller's arrays, which it may reuse: keep copies
        if self._pending_X:
            self._pending_X = [_own(a) for a in self._pending_X]
            self._pending_off = [_own(a) for a in self._pending_off]
        return out

    def _segment(self, X, y, labelled, offsets, i, j, emit, out: StreamResult,
                 errors: list) -> None:
        """Rows ``i:j``: one model predicts them all; then learn / rank if a boundary is hit."""
        Xs = X[i:j]
        classes = self._classes
        if classes:
            y_pred = self.predictor.predict_many(Xs)
            if type(y_pred) is not list:
                y_pred = list(y_pred)
            proba = np.asarray(self.predictor.predict_proba_many(Xs)) if emit else None
        else:  # nothing learned yet: no class to predict
            y_pred = [None] * (j - i)
            proba = np.zeros((j - i, 0)) if emit else None
        out.blocks.append(PredictionBlock(i, j, classes, y_pred, proba))

        if labelled[i:j].all():  # all labelled (the common case): no index lists
            n_lab = j - i
            y_true = y[i:j]
            preds = y_pred
            Xl, offs = Xs, offsets[i:j]
        else:
            lab = np.flatnonzero(labelled[i:j])
            n_lab = lab.shape[0]
            y_true = [y[i + r] for r in lab.tolist()]
            preds = [y_pred[r] for r in lab.tolist()]
            Xl, offs = Xs[lab], offsets[i + lab]
        if n_lab:
            err = np.fromiter(map(_ne, preds, y_true), dtype=np.float64, count=n_lab)
            errors.append(err)
            self.n_correct += n_lab - int(err.sum())
            self.n_labelled += n_lab
            self._pending_X.append(Xl)
            self._pending_y.extend(y_true)
            self._pending_off.append(offs)
            self.n_pending += n_lab
        self.n_instances += j - i
        if self.n_pending >= self.cfg.batch_size:
            self._learn(j - 1, out)
        if self.cfg.ranking_every and self.n_instances >= self.next_ranking:
            if self.importance_source() is not None:
                self._rank(j - 1, out, only_changed=False)
            self.next_ranking += self.cfg.ranking_every

    def _detect(self, err: np.ndarray, rows: np.ndarray, start: int, out: StreamResult) -> None:
        """Feed the prequential error to the detector; alerts at the rows where it fired.

        ``err[m]`` is the error of input row ``rows[m]``; ``start`` is the stream position of
        input row 0. Alerts are merged into ``out.alerts`` in row order, the detector's before
        a collapse reported at the same row (the order of one call per segment).
        """
        det = self.detector
        source = self.cfg.drift_detector
        new: list[Alert] = []
        if source == "ddm":
            was_warning = bool(det.warning_detected)
            drifts, warnings = det.update_many(err, return_warnings=True)
            # DDM flags every position inside its warning zone; users want one alert when the
            # stream enters the zone, not one per instance while it stays there.
            for w in _zone_entries(np.asarray(warnings, dtype=np.int64), was_warning):
                r = int(rows[w])
                new.append(Alert(r, source, "warning", start + r,
                                 "prequential error above the warning level"))
        else:
            drifts = det.update_many(err)
        for d in np.asarray(drifts, dtype=np.int64):
            r = int(rows[d])
            new.append(Alert(r, source, "drift", start + r, "prequential error changed"))
        if new:
            new.sort(key=lambda a: (a.row, a.level != "warning"))
            merged = new + out.alerts  # stable sort: the detector's first at equal rows
            merged.sort(key=lambda a: a.row)
            out.alerts[:] = merged

    def _learn(self, row: int, out: StreamResult) -> None:
        """Learn the pending mini-batch (predictor, then importance tracker)."""
        pX, yp, pO = self._pending_X, self._pending_y, self._pending_off
        Xp = pX[0] if len(pX) == 1 else np.concatenate(pX)
        self._pending_X, self._pending_y, self._pending_off = [], [], []
        self.n_pending = 0
        try:
            self.predictor.learn_many(Xp, yp)
            if self.importance is not None:
                self.importance.learn_many(Xp, yp)
        except ValueError as exc:
            out.rejected.append((np.concatenate(pO).astype(np.int64, copy=False),
                                 PipelineError("learner_rejected", str(exc))))
            return
        finally:
            self._classes = self.classes
        collapsed = _collapsed(self.predictor)
        if collapsed:
            self.n_collapses += 1
            kept = getattr(self.predictor, "retained_rows", None)
            n_trees = int(np.size(kept)) if kept is not None else 1
            detail = (f"{collapsed} of {n_trees} forgetful tree(s) discarded their retained "
                      "data (batch accuracy at or below chance)")
            if kept is not None:
                detail += f"; rows now retained: {int(np.max(kept))} at most"
            # in a forest single trees collapse now and then; a drift is when most do
            level = "drift" if 2 * collapsed >= n_trees else "warning"
            out.alerts.append(Alert(row, self.cfg.predictor, level,
                                    self.n_instances - 1, detail))
        if self.importance_source() is not None:
            self._rank(row, out, only_changed=True)

    def _rank(self, row: int, out: StreamResult, only_changed: bool) -> None:
        """Rankings of every importance method (all of them, or those whose top-k changed)."""
        imps = self.importance_source().importances()
        names = self.names
        for key in sorted(imps):
            method = f"orf_{key}"
            scores = np.asarray(imps[key], dtype=np.float64)
            # stable order: ties broken by column index, so rankings are reproducible
            order = np.lexsort((np.arange(scores.shape[0]), -scores))
            top = [int(c) for c in order[: self.cfg.top_k]]
            if only_changed and self.last_topk.get(method) == top:
                continue
            self.last_topk[method] = top
            out.rankings.append(RankingOut(
                row, method, [names[c] for c in order], [float(scores[c]) for c in order],
                int(self.importance_source().n_seen),
            ))

    @property
    def classes(self) -> list:
        """Class labels known to the predictor (class-index order)."""
        c = getattr(self.predictor, "classes", None)
        return list(c) if c is not None else []

    # -- state ---------------------------------------------------------------------------------

    def to_state(self) -> dict:
        """Everything that decides the stream's future outputs, as plain values and arrays."""
        if self._pending_X:
            pX = np.ascontiguousarray(np.concatenate(self._pending_X))
            pO = np.concatenate(self._pending_off)
        else:
            pX = np.zeros((0, self.n_features))
            pO = np.zeros(0, dtype=np.int64)
        return {
            "v": STATE_VERSION,
            "stream": self.stream,
            "config": self.cfg.as_dict(),
            "n_features": self.n_features,
            "feature_names": self.feature_names,
            "predictor": self.predictor.to_state(),
            "importance": None if self.importance is None else self.importance.to_state(),
            "detector": None if self.detector is None else self.detector.to_state(),
            "pending_X": pX,
            "pending_y": list(self._pending_y),
            "pending_offsets": pO,
            "counters": [self.n_instances, self.n_labelled, self.n_correct,
                         self.next_ranking, self.n_collapses],
            "last_topk": {k: list(v) for k, v in self.last_topk.items()},
        }

    @classmethod
    def from_state(cls, state: dict) -> Pipeline:
        """Rebuild a pipeline that continues exactly where :meth:`to_state` left it."""
        if state.get("v") != STATE_VERSION:
            raise ValueError(f"pipeline state version {state.get('v')!r} is not supported")
        cfg = PipelineConfig(**state["config"])
        p = cls(state["stream"], cfg, state["n_features"], state["feature_names"], _build=False)
        p.predictor = _learner_from_state(state["predictor"])
        p.importance = _learner_from_state(state["importance"])
        p.detector = _learner_from_state(state["detector"])
        pX = np.asarray(state["pending_X"], dtype=np.float64).reshape(-1, p.n_features)
        if pX.shape[0]:
            p._pending_X = [pX]
            p._pending_y = list(state["pending_y"])
            p._pending_off = [np.asarray(state["pending_offsets"], dtype=np.int64)]
            p.n_pending = int(pX.shape[0])
        (p.n_instances, p.n_labelled, p.n_correct, p.next_ranking,
         p.n_collapses) = (int(v) for v in state["counters"])
        p.last_topk = {k: [int(c) for c in v] for k, v in state["last_topk"].items()}
        return p
