"""Thin adapters over the learners, for users of river's and of scikit-learn's conventions.

* :mod:`models.adapters.river_style`: :class:`RiverStyleClassifier`,
  :class:`RiverStyleRegressor` take a learner instance; a dict per row (``learn_one``,
  ``predict_one``, ``predict_proba_one``) and named importances.
* :mod:`models.adapters.sklearn_style`: :class:`SklearnStyleClassifier`,
  :class:`SklearnStyleRegressor` take a learner class and its parameters; ``partial_fit``,
  ``fit``, ``predict``, ``predict_proba``, ``get_params`` / ``set_params``.

Both hold no model of their own: the answers are the wrapped learner's, bit for bit. Only
numpy and the standard library are used here (neither river nor scikit-learn is imported).
"""

from __future__ import annotations

from .river_style import RiverStyleClassifier, RiverStyleRegressor
from .sklearn_style import NotFittedError, SklearnStyleClassifier, SklearnStyleRegressor

__all__ = ["NotFittedError", "RiverStyleClassifier", "RiverStyleRegressor",
           "SklearnStyleClassifier", "SklearnStyleRegressor"]
