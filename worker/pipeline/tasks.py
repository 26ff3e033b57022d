"""Learning tasks: what differs between classification and multi-target regression streams.

A :class:`Task` owns, for one stream,

* how a label ``y`` is checked (a class label, or a list of a fixed number of targets; a
  single-target stream also takes its target as a plain number, ``3.7`` for ``[3.7]``),
* the bounded per-row *prequential loss* in ``[0, 1]`` that drift detectors watch,
* how the stream's predictor is asked for a prediction and what a prediction carries
  (``y_pred``, ``proba`` and ``classes`` for classifiers; a list of floats for regression).

A stream's task is fixed by its first labelled instance (a class label, an integer or a
string, means classification; a list of numbers or a float regression) unless its profile
names it (:func:`task_of_label`, :func:`make_task`); labels of the other kind are refused
later.

Examples
--------
>>> t = make_task("regression", [3.0, 1.0])
>>> t.n_targets, t.name
(2, 'regression')
>>> task_of_label("UP"), task_of_label([1.0, 2.0]), task_of_label(3.7)
('classification', 'regression', 'regression')
>>> make_task("regression", 3.7).n_targets
1
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from models.registry import CLASSIFICATION, REGRESSION

from .errors import PipelineError

_ne = operator.ne  # 1.0 for a wrong prediction (0/1 loss)


def task_of_label(y: Any) -> str:
    """The task a label implies: a list of numbers or a float (one target) is regression,
    anything else (an integer, a string) a class."""
    return REGRESSION if isinstance(y, list | float) else CLASSIFICATION


def _is_number(y: Any) -> bool:
    """A plain number: one regression target (``bool`` is not one)."""
    return type(y) is float or type(y) is int


class Task:
    """Base class (see the module doc)."""

    name = ""
    n_targets: int | None = None  # regression: targets per label

    def check_label(self, y: Any) -> None:
        """Raise :class:`PipelineError` when ``y`` is no label of this stream."""

    def check_served(self, pred: Any) -> None:
        """Raise ``ValueError`` when ``pred``, a prediction a checkpoint says was served for
        a held instance, is none this task serves (``None``: served before anything was
        learned). A checkpoint is untrusted input: its label's join must not fail."""

    def losses(self, y_pred: list, y_true: list) -> np.ndarray:
        """Per-row prequential loss in ``[0, 1]`` of labelled rows, in row order."""
        raise NotImplementedError

    def predict(self, predictor, X: np.ndarray, emit: bool):
        """``(classes, y_pred, proba)`` of rows ``X`` by ``predictor`` (``None``: nothing yet)."""
        raise NotImplementedError

    def predict_learn(self, predictor, X: np.ndarray, ys: list, emit: bool):
        """``(classes, y_pred, proba)`` of labelled rows ``X`` (labels ``ys``, checked), each
        predicted by ``predictor`` as it stood just before learning it, then learned, in one
        call (the learner's test-then-train kernel)."""
        raise NotImplementedError

    def prequential(self, predictor) -> bool:
        """Whether ``predictor`` has a test-then-train kernel for this task."""
        return False

    def learn_targets(self, ys: list):
        """The ``y`` a predictor's ``learn_many`` takes, from a list of checked labels."""
        return ys

    def classes(self, predictor) -> list:
        """Class labels the predictor knows (empty for regression)."""
        return []

    def to_state(self) -> dict:
        return {"name": self.name}

    @staticmethod
    def from_state(state: dict | None) -> Task | None:
        if state is None:
            return None
        if state["name"] == CLASSIFICATION:
            return ClassificationTask(state.get("max_classes"), state.get("labels", ()))
        task = RegressionTask(int(state["n_targets"]))
        task.load(state)
        return task


class ClassificationTask(Task):
    """Class labels (ints or strings); the loss is 0/1 (the prequential error).

    ``max_classes`` caps the distinct labels of the stream (every prediction carries all of
    them); ``labels`` keeps them in order of first appearance.
    """

    name = CLASSIFICATION

    def __init__(self, max_classes: int | None = None, labels=()):
        self.max_classes = max_classes
        self.labels = dict.fromkeys(labels)

    def check_label(self, y: Any) -> None:
        if isinstance(y, list | float):
            raise PipelineError(
                "invalid_target", "the stream's task is classification (fixed by its first "
                "labelled instance or its profile): y must be a class label (an integer or a "
                "string), not regression targets")
        if y not in self.labels:
            if self.max_classes is not None and len(self.labels) >= self.max_classes:
                raise PipelineError(
                    "too_many_classes", f"the stream has {len(self.labels)} classes already, "
                    f"the limit (worker.max_classes); label {str(y)[:64]!r} is refused")
            self.labels[y] = None

    def check_served(self, pred: Any) -> None:
        if type(pred) is list:
            raise ValueError(f"held instances: {pred!r} is not a class label")

    def knows(self, labels) -> bool:
        """Whether every label is one the stream has seen (checked in bulk)."""
        return all(v in self.labels for v in labels)

    def to_state(self) -> dict:
        return {"name": self.name, "max_classes": self.max_classes, "labels": list(self.labels)}

    def losses(self, y_pred: list, y_true: list) -> np.ndarray:
        return np.fromiter(map(_ne, y_pred, y_true), dtype=np.float64, count=len(y_true))

    def classes(self, predictor) -> list:
        if predictor is None:
            return []
        c = predictor.classes
        return list(c) if c is not None else []

    def predict(self, predictor, X: np.ndarray, emit: bool):
        n = X.shape[0]
        classes = self.classes(predictor)
        if not classes:  # nothing learned yet: no class to predict
            return classes, [None] * n, (np.zeros((n, 0)) if emit else None)
        y_pred = predictor.predict_many(X)
        if type(y_pred) is not list:
            y_pred = list(y_pred)
        proba = np.asarray(predictor.predict_proba_many(X)) if emit else None
        return classes, y_pred, proba

    def prequential(self, predictor) -> bool:
        return hasattr(predictor, "predict_proba_learn_many")

    def predict_learn(self, predictor, X: np.ndarray, ys: list, emit: bool):
        fresh = predictor.n_seen == 0  # the first row is predicted by an empty model
        proba = np.asarray(predictor.predict_proba_learn_many(X, ys))
        classes = self.classes(predictor)
        # the most probable class, lowest index on ties, as predict_many gives it (a class
        # that appeared after a row has probability 0 there: the same as over those before)
        y_pred = [classes[k] for k in np.argmax(proba, axis=1).tolist()] if classes \
            else [None] * X.shape[0]
        if fresh and y_pred:
            y_pred[0] = None
            if emit:
                proba[0] = 0.0
        return classes, y_pred, (proba if emit else None)


class RegressionTask(Task):
    """``y`` is a list of ``n_targets`` floats (with one target, a plain number too);
    predictions are lists of floats.

    The loss watched by detectors is the mean over targets of the absolute error divided
    by the target's running mean absolute deviation (MAD) so far, each term clipped to
    ``[0, 1]``: an error as large as the target's usual spread counts as a full miss, so the
    loss is bounded like the 0/1 error of classifiers and comparable across targets of any
    scale. The running statistics are updated after each row's loss (test, then learn).
    """

    name = REGRESSION

    def __init__(self, n_targets: int):
        if n_targets < 1:
            raise ValueError("a regression stream has at least one target")
        self.n_targets = int(n_targets)
        self.n = 0
        self.mean = np.zeros(self.n_targets)
        self.mad = np.zeros(self.n_targets)

    def check_label(self, y: Any) -> None:
        if _is_number(y):
            if self.n_targets != 1:
                raise PipelineError(
                    "target_count", f"expected {self.n_targets} targets (fixed by the stream's "
                    "first labelled instance), got a single number")
            return
        if not isinstance(y, list):
            raise PipelineError(
                "invalid_target", "the stream's task is regression (fixed by its first "
                "labelled instance or its profile): y must be a list of numbers (or, with one "
                "target, a number), not a class label")
        if len(y) != self.n_targets:
            raise PipelineError(
                "target_count", f"expected {self.n_targets} targets (fixed by the stream's "
                f"first labelled instance), got {len(y)}")

    def learn_targets(self, ys: list) -> np.ndarray:
        """Checked labels as an ``(n, n_targets)`` array (a single target may come as a
        number or as a list of one)."""
        if self.n_targets == 1:
            return np.array([y[0] if type(y) is list else y for y in ys],
                            dtype=np.float64).reshape(len(ys), 1)
        return np.asarray(ys, dtype=np.float64).reshape(len(ys), self.n_targets)

    def check_served(self, pred: Any) -> None:
        if pred is not None and (type(pred) is not list or len(pred) != self.n_targets):
            raise ValueError(f"held instances: {pred!r} is not a prediction of "
                             f"{self.n_targets} targets")

    def losses(self, y_pred: list, y_true: list) -> np.ndarray:
        Y = self.learn_targets(y_true)
        mad = self._advance(Y)  # each row's MAD before it
        out = np.ones(len(y_true))  # a row predicted by an empty model: a full miss
        served = [r for r, p in enumerate(y_pred) if p is not None]
        if served:
            P = np.array([y_pred[r] for r in served], dtype=np.float64).reshape(len(served), -1)
            err, m = np.abs(P - Y[served]), mad[served]
            # min(err, m) / m is min(err / m, 1) to the bit, and cannot overflow where a
            # subnormal MAD would scale an error past the largest float
            scaled = np.where(m > 0, np.minimum(err, m) / np.where(m > 0, m, 1.0),
                              (err > 0).astype(np.float64))
            # row by row, each row's mean over its targets is the one a 1-D mean gives
            out[served] = scaled.mean(axis=1)
        return out

    def _advance(self, Y: np.ndarray) -> np.ndarray:
        """Update the running mean and MAD with the rows of ``Y`` in order; returns the MAD
        each row's loss is scaled by (the one before the row). The recurrence runs on Python
        floats: the same IEEE operations as on arrays of one row, without an array per row."""
        mean, mad, n = self.mean.tolist(), self.mad.tolist(), self.n
        before = []
        for t in Y.tolist():
            before.append(mad.copy())
            n += 1
            for j, v in enumerate(t):
                mean[j] += (v - mean[j]) / n
                mad[j] += (abs(v - mean[j]) - mad[j]) / n
        self.n, self.mean, self.mad = n, np.array(mean), np.array(mad)
        return np.array(before, dtype=np.float64).reshape(Y.shape)

    def predict(self, predictor, X: np.ndarray, emit: bool):
        n = X.shape[0]
        if predictor is None or predictor.n_seen == 0:
            return None, [None] * n, None
        Y = np.asarray(predictor.predict_many(X), dtype=np.float64)
        return None, [list(map(float, row)) for row in Y], None

    def prequential(self, predictor) -> bool:
        return hasattr(predictor, "predict_learn_many")

    def predict_learn(self, predictor, X: np.ndarray, ys: list, emit: bool):
        fresh = predictor.n_seen == 0
        Y = np.asarray(predictor.predict_learn_many(X, self.learn_targets(ys)), dtype=np.float64)
        y_pred = [list(map(float, row)) for row in Y]
        if fresh and y_pred:
            y_pred[0] = None  # predicted before anything was learned
        return None, y_pred, None

    def to_state(self) -> dict:
        return {"name": self.name, "n_targets": self.n_targets, "n": self.n,
                "mean": self.mean.copy(), "mad": self.mad.copy()}

    def load(self, state: dict) -> None:
        self.n = int(state["n"])
        self.mean = np.asarray(state["mean"], dtype=np.float64).copy()
        self.mad = np.asarray(state["mad"], dtype=np.float64).copy()


def make_task(name: str, first_label: Any = None, max_classes: int | None = None) -> Task:
    """The task object of a stream; regression takes its target count from ``first_label``."""
    if name == CLASSIFICATION:
        return ClassificationTask(max_classes)
    if name == REGRESSION:
        if _is_number(first_label):
            first_label = [first_label]  # one target
        if not isinstance(first_label, list) or not first_label:
            raise PipelineError("invalid_target", "a regression stream's labels are non-empty "
                                "lists of numbers (or, with one target, numbers)")
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in first_label):
            raise PipelineError("invalid_target", "regression targets must be finite numbers")
        return RegressionTask(len(first_label))
    raise ValueError(f"unknown task {name!r}")
