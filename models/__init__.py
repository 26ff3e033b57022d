"""The numba core of streamforest: online tree-ensemble learners and drift detectors.

Only numpy and numba are imported here; the learners know nothing about Kafka or any wire
format. Every learner follows the surface described in :mod:`models.core.base`; the adapters
of :mod:`models.adapters` give them river's and scikit-learn's surfaces.
"""

from __future__ import annotations

from .adapters import (
    RiverStyleClassifier,
    RiverStyleRegressor,
    SklearnStyleClassifier,
    SklearnStyleRegressor,
)
from .cart.block_forest import BlockForestRanker
from .cart.block_forest_regression import BlockForestRegressionRanker
from .cart.feature_stream_forest import FeatureStreamForest
from .core.base import ClassIndex, Learner, check_X, learner_class
from .drift.adwin import ADWIN, ADWINBank
from .drift.ddm import DDM, DDMBank
from .drift.drift_wrapper import DriftDetectionClassifier
from .forgetful.forgetful_forest import ForgetfulRandomForest
from .forgetful.forgetful_tree import ForgetfulDecisionTree
from .generators.hyperplane import RotatingHyperplane
from .hoeffding.abfs import ABFS, ABFSClassifier
from .hoeffding.adaptive_forest import AdaptiveRandomForest
from .hoeffding.hoeffding_tree import HoeffdingTree
from .hoeffding.naive_bayes import NaiveBayes
from .isoup.isoup_forest import ISOUPSymRF
from .isoup.isoup_tree import ISOUPTree
from .orf.online_forest import OnlineRandomForest

__all__ = ["ABFS", "ABFSClassifier", "ADWIN", "ADWINBank", "AdaptiveRandomForest",
           "BlockForestRanker", "BlockForestRegressionRanker", "DDM", "DDMBank",
           "DriftDetectionClassifier", "FeatureStreamForest", "ForgetfulDecisionTree",
           "ForgetfulRandomForest", "HoeffdingTree", "ISOUPSymRF", "ISOUPTree", "NaiveBayes",
           "OnlineRandomForest", "RotatingHyperplane", "ClassIndex", "Learner", "check_X",
           "learner_class", "RiverStyleClassifier", "RiverStyleRegressor",
           "SklearnStyleClassifier", "SklearnStyleRegressor"]
