"""The numba core of streamforest: online tree-ensemble learners and drift detectors.

Only numpy and numba are imported here; the learners know nothing about Kafka or any wire
format. Every learner follows the surface described in :mod:`models.base`.
"""

from __future__ import annotations

from .base import ClassIndex, Learner, check_X

__all__ = ["ClassIndex", "Learner", "check_X"]
