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
  zones, announced once when the stream enters them;
* the spec's ``alerts`` (:class:`~models.registry.AlertRule`) decide which events and detector
  signals are published as drift alerts (:func:`alert_level`); the others are only counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models import registry
from models.core.base import learner_class
from models.registry import AlertRule, LearnerSpec

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
        # the state names its class: a predictor behind a selector is an ABFSClassifier
        learner = learner_class(entry["state"].get("kind", spec.cls.kind)).from_state(entry["state"])
        return cls(entry["name"], spec, learner, tuple(entry["roles"]))

    def to_state(self) -> dict:
        return {"name": self.name, "roles": list(self.roles), "state": self.learner.to_state()}

    # -- capabilities -------------------------------------------------------------------------

    def events(self) -> list:
        """Events of the last ``learn_many`` (none unless the spec declares some)."""
        return self.learner.events() if self.spec.events else []

    def rankings(self, imps: dict | None = None) -> list[tuple[str, np.ndarray]]:
        """``(method, scores)`` of every ranking the spec declares that has scores now (or
        in ``imps``, importances the learner gave earlier)."""
        imps = self.learner.importances() if imps is None else imps
        return [(method, np.asarray(imps[key], dtype=np.float64))
                for key, method in self.spec.rankings if key in imps]

    def selected(self) -> list[int]:
        """Columns a selector chose, in selection order (empty: none yet, all columns pass)."""
        return [int(c) for c in self.learner.selected()]

    def alert_rule(self, kind: str) -> AlertRule | None:
        """The spec's rule for events of ``kind`` (``None``: they are only counted)."""
        if self.spec.alerts is None:  # a spec without rules publishes every event as it is
            return AlertRule(kind)
        return next((r for r in self.spec.alerts if r.kind == kind), None)

    def members(self, rule: AlertRule) -> tuple[int, int]:
        """``(involved, in all)`` members of the learner at its last ``learn_many``."""
        involved = int(getattr(self.learner, rule.involved)) if rule.involved else 1
        total = int(getattr(self.learner, rule.members)) if rule.members else 1
        return involved, total

    def selection_rankings(self) -> list[tuple[str, list[int], list[float]]]:
        """``(method, columns in selection order, their scores)`` of a selector's rankings."""
        if not self.spec.rankings:
            return []
        cols = self.selected()
        imps = self.learner.importances()
        return [(method, cols, [float(imps[key][c]) for c in cols])
                for key, method in self.spec.rankings if key in imps]


def alert_level(stage: Stage, kind: str, level: str, position: int,
                episodes: dict[str, list]) -> str | None:
    """The level at which an event is published as a drift alert, or ``None``: counted only.

    The stage's :class:`~models.registry.AlertRule` for ``kind`` decides: the event must
    involve a large enough share of the learner's members, and start an episode or raise its
    level (``episodes`` keeps each open episode, ``[position of its last event, level]``, per
    source and kind). Positions are stream positions, so the decision depends on the stream
    alone, never on how its input was cut into calls.

    Examples
    --------
    A forgetful forest of 20 trees (Yuan, Sun & Shasha 2023, Sec. 3.3) in which 2 trees
    collapse at one mini-batch (their housekeeping), then 6 (a quarter: published at the
    event's level, a warning), 100 instances later 12 (half the forest: the episode turns into
    a drift), then 8 (the same episode), then 5 once the episode is over:

    >>> from types import SimpleNamespace
    >>> forest = SimpleNamespace(n_trees=20, n_collapsed=0)
    >>> stage = Stage("forgetful_forest", registry.get("forgetful_forest"), forest, ())
    >>> seen, levels = {}, []
    >>> for position, collapsed in [(999, 2), (1099, 6), (1199, 12), (1299, 8), (2999, 5)]:
    ...     forest.n_collapsed = collapsed
    ...     level = "drift" if 2 * collapsed >= 20 else "warning"  # the forest's event level
    ...     levels.append(alert_level(stage, "collapse", level, position, seen))
    >>> levels
    [None, 'warning', 'drift', None, 'warning']
    """
    rule = stage.alert_rule(kind)
    if rule is None or not rule.qualifies(*stage.members(rule)):
        return None
    level = rule.level or level
    if not rule.quiet:
        return level
    key = f"{stage.name}:{kind}"
    published, episode = rule.step(position, level, episodes.get(key))
    episodes[key] = list(episode)
    return level if published else None


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


def detect(stage: Stage, loss: np.ndarray, rows: np.ndarray,
           positions: np.ndarray) -> list[Alert]:
    """Feed ``loss`` to a detector; alerts at the input rows where it fired, in row order.

    ``loss[m]`` is the loss of input row ``rows[m]``; ``positions[r]`` is the stream position
    of input row ``r``. Warning-zone entries come before a drift at the same row.
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
            alerts.append(Alert(r, stage.name, "warning", int(positions[r]),
                                "prequential error above the warning level"))
    else:
        drifts = det.update_many(loss)
    for d in np.asarray(drifts, dtype=np.int64):
        r = int(rows[d])
        alerts.append(Alert(r, stage.name, "drift", int(positions[r]),
                            "prequential error changed"))
    alerts.sort(key=lambda a: (a.row, a.level != "warning"))
    return alerts
