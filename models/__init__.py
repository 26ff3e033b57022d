"""The numba core of streamforest: online tree-ensemble learners and drift detectors.

Only numpy and numba are imported here; the learners know nothing about Kafka or any wire
format. Every learner follows the surface described in :mod:`models.base`.
"""

from __future__ import annotations

from .abfs import ABFS, ABFSClassifier
from .adwin import ADWIN, ADWINBank
from .base import ClassIndex, Learner, check_X, learner_class
from .ddm import DDM, DDMBank
from .drift_wrapper import DriftDetectionClassifier
from .feature_stream_forest import FeatureStreamForest
from .forgetful_forest import ForgetfulRandomForest
from .forgetful_tree import ForgetfulDecisionTree
from .hoeffding_tree import HoeffdingTree
from .hyperplane import RotatingHyperplane
from .isoup_forest import ISOUPSymRF
from .isoup_tree import ISOUPTree
from .naive_bayes import NaiveBayes
from .online_forest import OnlineRandomForest

__all__ = ["ABFS", "ABFSClassifier", "ADWIN", "ADWINBank", "DDM", "DDMBank",
           "DriftDetectionClassifier", "FeatureStreamForest", "ForgetfulDecisionTree",
           "ForgetfulRandomForest", "HoeffdingTree", "ISOUPSymRF", "ISOUPTree", "NaiveBayes",
           "OnlineRandomForest", "RotatingHyperplane", "ClassIndex", "Learner", "check_X",
           "learner_class"]
