"""The numba core of streamforest: online tree-ensemble learners and drift detectors.

Only numpy and numba are imported here; the learners know nothing about Kafka or any wire
format. Every learner follows the surface described in :mod:`models.base`.
"""

from __future__ import annotations

from .adwin import ADWIN, ADWINBank
from .base import ClassIndex, Learner, check_X
from .ddm import DDM, DDMBank
from .forgetful_forest import ForgetfulRandomForest
from .forgetful_tree import ForgetfulDecisionTree
from .hyperplane import RotatingHyperplane
from .online_forest import OnlineRandomForest

__all__ = ["ADWIN", "ADWINBank", "DDM", "DDMBank", "ForgetfulDecisionTree",
           "ForgetfulRandomForest", "OnlineRandomForest", "RotatingHyperplane",
           "ClassIndex", "Learner", "check_X"]
