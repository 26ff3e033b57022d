"""The stages of a stream pipeline and how they meet learners: through the registry only.

A :class:`Stage` is one learner in one or more roles, with its registry spec. What the
engine asks of it follows from the spec's declarations, never from the learner's name or
from probing its attributes:

* a *selector* learns first and chooses the columns the predictor sees (``selected()``);
  unselected columns read as 0, as in the reference ABFS code, which hands the downstream
  learner a sparse copy of each instance;
* the *predictor* is asked through the stream's task (:mod:`worker.pipeline.tasks`);
* a *ranker* publishes one ranking per ``importances()`` key its spec declares, under the
  declared method name;
* a learner that declares ``events`` is asked for ``events()`` after each ``learn_many``;
* a *detector* is fed the loss sequence; one that declares ``warnings`` also reports warning
  zones, announced once when the stream enters them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models import registry
from models.registry import LearnerSpec

from .results import Alert


@dataclass
class Stage:
    """One learner of a pipeline: its registry name and spec, the instance, its roles."""

    name: str
    spec: LearnerSpec
    learner: object
    roles: tuple

    @classmethod
    def build(cls, name: str, params: dict, roles: tuple, seed: int | None) -> Stage:
        spec = registry.get(name)
        return cls(name, spec, spec.build(params, roles, seed), roles)

    @classmethod
    def restore(cls, entry: dict) -> Stage:
        spec = registry.get(entry["name"])
        return cls(entry["name"], spec, spec.cls.from_state(entry["state"]),
                   tuple(entry["roles"]))

    def to_state(self) -> dict:
        return {"name": self.name, "roles": list(self.roles), "state": self.learner.to_state()}

    # -- capabilities -------------------------------------------------------------------------

    def events(self) -> list:
        """Events of the last ``learn_many`` (none unless the spec declares some)."""
        return self.learner.events() if self.spec.events else []

    def rankings(self) -> list[tuple[str, np.ndarray]]:
        """``(method, scores)`` of every ranking the spec declares that has scores now."""
        imps = self.learner.importances()
        return [(method, np.asarray(imps[key], dtype=np.float64))
                for key, method in self.spec.rankings if key in imps]

    def selected(self) -> list[int]:
        """Columns a selector chose, in selection order (empty: none yet, all columns pass)."""
        return [int(c) for c in self.learner.selected()]

    def is_alert(self, kind: str) -> bool:
        """Whether events of ``kind`` are published as drift alerts."""
        return self.spec.alerts is None or kind in self.spec.alerts

    def wants_retrain(self) -> bool:
        """A selector asking for the predictor to be retrained on its window (spec: retrains)."""
        return bool(self.spec.retrains and self.learner.retrain)

    def selection_rankings(self) -> list[tuple[str, list[int], list[float]]]:
        """``(method, columns in selection order, their scores)`` of a selector's rankings."""
        if not self.spec.rankings:
            return []
        cols = self.selected()
        imps = self.learner.importances()
        return [(method, cols, [float(imps[key][c]) for c in cols])
                for key, method in self.spec.rankings if key in imps]


def zone_entries(warnings: np.ndarray, was_warning: bool) -> np.ndarray:
    """Positions where a run of consecutive warning flags starts.

    ``was_warning`` is the detector's flag before this run of values, so a zone that began in
    an earlier batch is not announced again.

    Examples
    --------
    >>> zone_entries(np.array([0, 1, 2, 5, 6, 9]), was_warning=True).tolist()
    [5, 9]
    """
    if warnings.shape[0] == 0:
        return warnings
    starts = np.ones(warnings.shape[0], dtype=bool)
    starts[1:] = np.diff(warnings) > 1
    if was_warning and warnings[0] == 0:
        starts[0] = False
    return warnings[starts]


def detect(stage: Stage, loss: np.ndarray, rows: np.ndarray, start: int) -> list[Alert]:
    """Feed ``loss`` to a detector; alerts at the input rows where it fired, in row order.

    ``loss[m]`` is the loss of input row ``rows[m]``; ``start`` is the stream position of
    input row 0. Warning-zone entries come before a drift at the same row.
    """
    det = stage.learner
    alerts: list[Alert] = []
    if stage.spec.warnings:
        was_warning = bool(det.warning_detected)
        drifts, warnings = det.update_many(loss, return_warnings=True)
        # a detector flags every position inside its warning zone; users want one alert when
        # the stream enters the zone, not one per instance while it stays there
        for w in zone_entries(np.asarray(warnings, dtype=np.int64), was_warning):
            r = int(rows[w])
            alerts.append(Alert(r, stage.name, "warning", start + r,
                                "prequential error above the warning level"))
    else:
        drifts = det.update_many(loss)
    for d in np.asarray(drifts, dtype=np.int64):
        r = int(rows[d])
        alerts.append(Alert(r, stage.name, "drift", start + r, "prequential error changed"))
    alerts.sort(key=lambda a: (a.row, a.level != "warning"))
    return alerts
