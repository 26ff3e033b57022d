"""scikit-learn's conventions over the learners: matrices in, estimator parameters.

:class:`SklearnStyleClassifier` and :class:`SklearnStyleRegressor` are built from a learner
class and its constructor arguments, ``SklearnStyleClassifier(AdaptiveRandomForest,
n_models=5)``, and follow scikit-learn's estimator conventions without importing it:
``get_params`` / ``set_params`` (the learner's constructor parameters, read from its
``__init__`` signature as ``BaseEstimator`` reads an estimator's, plus ``learner_class``), so
``sklearn.base.clone`` and the search classes work; ``fit`` (a fresh learner, then
``partial_fit``), ``partial_fit`` (the learner's ``learn_many``: rows learned in order, the
model kept between calls), ``predict``, ``predict_proba``, ``score``, and the fitted
attributes ``learner_``, ``classes_``, ``n_features_in_``, ``feature_names_in_`` (when ``X``
is a frame whose ``.columns`` are strings) and ``feature_importances_``.

The answers are the learner's, bit for bit: ``predict`` is its ``predict_many`` (ties go to
the class seen first, as everywhere in the core), ``predict_proba`` its
``predict_proba_many`` with the columns moved to the sorted ``classes_``.
``feature_importances_`` is the learner's first ranking as it reports it (not normalised to
sum 1). :meth:`~SklearnStyleClassifier.wrap` adapts a learner that learned already.
"""

from __future__ import annotations

import inspect
import warnings
from typing import ClassVar

import numpy as np

from ..cart.feature_stream_forest import FeatureStreamForest
from ._importances import pick
from ._labels import LabelCodes
from ._params import build, current_params, init_parameters
from ._sklearn_compat import NotFittedError, conversion_warning, not_fitted, sklearn_tags

__all__ = ["NotFittedError", "SklearnStyleClassifier", "SklearnStyleRegressor"]


class _SklearnStyle:
    """Parameters, fitted state, frames and importances of the two adapters."""

    _estimator_type: ClassVar[str] = ""  # scikit-learn before 1.6 reads the type here
    _multi_output: ClassVar[bool] = False

    def __init__(self, learner_class, **params):
        # as scikit-learn asks: the parameters are stored as given, checked when fitting
        self.learner_class = learner_class
        self._params = params

    # ------------------------------------------------------------------ parameters

    def get_params(self, deep: bool = True) -> dict:
        """``{"learner_class": cls, **constructor parameters}``, defaults filled in.

        Parameters
        ----------
        deep : bool, default True
            Also list ``name__key`` for parameters that have ``get_params`` themselves.
        """
        out = {"learner_class": self.learner_class, **self._params}
        for name, default in self._known().items():
            if name not in out and default is not inspect.Parameter.empty:
                out[name] = default
        if deep:
            for name, value in list(out.items()):
                if hasattr(value, "get_params") and not isinstance(value, type):
                    out.update({f"{name}__{k}": v for k, v in value.get_params().items()})
        return out

    def set_params(self, **params):
        """Set constructor parameters (they take effect at the next ``fit``); returns self.

        A new ``learner_class`` drops the parameters the new class does not take.
        """
        if "learner_class" in params:
            self.learner_class = params.pop("learner_class")
            if isinstance(self.learner_class, type):
                known = self._known()
                self._params = {k: v for k, v in self._params.items() if k in known}
        known = self._known() if isinstance(self.learner_class, type) else self._params
        for name, value in params.items():
            if name not in known:
                raise ValueError(f"Invalid parameter {name!r} for {self.learner_class!r}; "
                                 f"valid parameters: {sorted(known)}")
            self._params[name] = value
        return self

    def _known(self) -> dict:
        """The learner class's constructor parameters (none while ``learner_class`` is no
        class: set_params stores anything, fit refuses it)."""
        if not isinstance(self.learner_class, type):
            return {}
        return init_parameters(self.learner_class)

    @classmethod
    def wrap(cls, learner):
        """An adapter over ``learner`` as it stands (trained or not): ``partial_fit`` goes
        on from it; ``fit`` and ``clone`` start from its parameters afresh."""
        est = cls(type(learner), **current_params(learner))
        est._adopt(learner)
        return est

    # ------------------------------------------------------------------ fitted state

    def __sklearn_is_fitted__(self) -> bool:
        return "learner_" in self.__dict__

    def __sklearn_tags__(self):
        return sklearn_tags(self._estimator_type, self._multi_output)

    def _fitted(self):
        """The learner, or :class:`NotFittedError` before the first fit."""
        learner = self.__dict__.get("learner_")
        if learner is None:
            raise not_fitted(f"This {type(self).__name__} instance is not fitted yet: "
                             "call fit or partial_fit first")
        return learner

    def _adopt(self, learner) -> None:
        self.learner_ = learner
        self._names: list | None = None

    def _reset(self) -> None:
        for name in ("learner_", "_names"):
            self.__dict__.pop(name, None)

    def _require_y(self, y) -> None:
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None")

    def _start(self) -> None:
        """A fresh learner from the parameters (those it does not take: its ``TypeError``)."""
        if not isinstance(self.learner_class, type):
            raise TypeError(f"learner_class must be a learner class, got {self.learner_class!r}")
        self._adopt(build(self.learner_class, self._params))

    @property
    def n_features_in_(self) -> int:
        """Features of the rows learned (``AttributeError`` before the first rows)."""
        n = getattr(self._fitted(), "n_features", None)
        if n is None:
            raise AttributeError("n_features_in_: no rows learned yet")
        return int(n)

    @property
    def feature_names_in_(self) -> np.ndarray:
        """The column names of the frame learned (``AttributeError`` when ``X`` had none)."""
        self._fitted()
        if self._names is None:
            raise AttributeError("feature_names_in_: X had no string column names")
        return np.asarray(self._names, dtype=object)

    @property
    def feature_importances_(self) -> np.ndarray:
        """The learner's first ranking (its ``importances()``' first key), one value per
        feature; ``AttributeError`` while it reports none."""
        values = pick(self._fitted().importances())
        if values.shape[0] == 0:
            raise AttributeError(f"feature_importances_: {type(self.learner_).__name__} "
                                 "reports no importances (yet)")
        return values

    # ------------------------------------------------------------------ matrices

    def _matrix(self, X, learning: bool):
        """``X`` as the learner's float64 matrix, and its column names (a frame's).

        Refused as scikit-learn's ``validate_data`` refuses them, with its messages: sparse
        or complex input, not two dimensions, no rows or no columns to learn, another
        number of columns than learned. Names must match those learned; while learning, new
        columns may follow them for a learner of arriving features (``FeatureStreamForest``).
        """
        names = _column_names(X)
        known = self.__dict__.get("_names")
        grows = learning and isinstance(self.__dict__.get("learner_"), FeatureStreamForest)
        if names is not None and known is not None and names != known and not (
                grows and names[:len(known)] == known):
            raise ValueError(f"The feature names should match those that were passed during "
                             f"fit: {known}, got {names}")
        X = _dense(X)
        n = getattr(self.__dict__.get("learner_"), "n_features", None)
        if n is not None and X.shape[1] != n and not (grows and X.shape[1] > n):
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {n} features as input")
        if learning and 0 in X.shape:
            raise ValueError(f"Found array with {X.shape[0]} sample(s) and {X.shape[1]} "
                             f"feature(s) (shape={X.shape}) while a minimum of 1 is required.")
        return X, names

    def _learned(self, names) -> None:
        """Record the column names of rows the learner took."""
        if names is not None:
            self._names = names

    def _needs(self, method: str):
        learner = self._fitted()
        if not hasattr(learner, method):
            raise TypeError(f"{type(learner).__name__} has no {method}: it ranks features and "
                            "predicts nothing (see feature_importances_)")
        return learner

    def __repr__(self) -> str:
        defaults = self._known()
        args = [getattr(self.learner_class, "__name__", repr(self.learner_class))] + [
            f"{k}={v!r}" for k, v in self._params.items()
            if k not in defaults or defaults[k] is inspect.Parameter.empty or v != defaults[k]]
        return f"{type(self).__name__}({', '.join(args)})"


class SklearnStyleClassifier(_SklearnStyle):
    """A classifier (or classification ranker) of the core with scikit-learn's surface.

    Parameters
    ----------
    learner_class : type
        A classifier class of :mod:`models` (``AdaptiveRandomForest``, ``FeatureStreamForest``,
        ``BlockForestRanker``, ...).
    **params
        Its constructor arguments (:meth:`get_params` lists them all).

    Examples
    --------
    >>> import numpy as np
    >>> from models import AdaptiveRandomForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((600, 3)); y = np.where(X[:, 0] > 0.5, "high", "low")
    >>> clf = SklearnStyleClassifier(AdaptiveRandomForest, n_models=3, seed=1)
    >>> clf.get_params()["n_models"], clf.get_params()["grace_period"]
    (3, 50)
    >>> for a in range(0, 600, 100):
    ...     _ = clf.partial_fit(X[a:a + 100], y[a:a + 100])
    >>> clf.classes_.tolist(), clf.n_features_in_
    (['high', 'low'], 3)
    >>> clf.predict([[0.9, 0.5, 0.5], [0.1, 0.5, 0.5]]).tolist()
    ['high', 'low']
    >>> clf.predict_proba([[0.9, 0.5, 0.5]]).round(1).tolist()
    [[1.0, 0.0]]
    >>> int(np.argmax(clf.feature_importances_))
    0
    """

    _estimator_type = "classifier"

    def fit(self, X, y):
        """A fresh learner, then :meth:`partial_fit` on all rows (one ``learn_many``)."""
        self._reset()
        return self.partial_fit(X, y)

    def partial_fit(self, X, y, classes=None):
        """Learn the rows ``X`` with their labels ``y``, in order; returns self.

        Parameters
        ----------
        X : array-like or frame of shape (n, d)
        y : array-like of shape (n,)
            Labels of any hashable type; new ones may come in any call.
        classes : array-like, optional
            Labels that :attr:`classes_` lists (with probability 0) before rows bring them:
            scikit-learn's convention, optional here since the learners take a class
            appearing mid-stream.
        """
        X, names = self._matrix(X, learning=True)
        self._require_y(y)
        if "learner_" not in self.__dict__:
            self._start()
        if classes is not None:
            self._codes.encode(_label_list(classes))
        self.learner_.learn_many(X, self._codes.encode(_label_list(y)))
        self._learned(names)
        self._order_classes()
        return self

    @property
    def classes_(self) -> np.ndarray:
        """The labels, sorted (in order of first appearance when they do not sort)."""
        self._fitted()
        return np.asarray(self._classes)

    def predict(self, X) -> np.ndarray:
        """The learner's label for each row."""
        learner = self._needs("predict_many")
        X, _ = self._matrix(X, learning=False)
        return np.asarray(self._codes.decode(learner.predict_many(X)))

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities ``(n, len(classes_))``, columns in :attr:`classes_` order."""
        learner = self._needs("predict_proba_many")
        X, _ = self._matrix(X, learning=False)
        proba = learner.predict_proba_many(X)
        out = np.zeros((proba.shape[0], len(self._classes)))
        out[:, self._positions[:proba.shape[1]]] = proba
        return out

    def score(self, X, y) -> float:
        """Accuracy of :meth:`predict` on ``X`` against ``y``."""
        return float(np.mean(self.predict(X) == np.asarray(_label_list(y), dtype=object)))

    def _order_classes(self) -> None:
        """Sort the labels and place the learner's probability columns among them, once per
        call that learned (prediction then changes nothing, as scikit-learn expects)."""
        learner_labels = self.learner_.classes
        if (len(self._classes), len(self._positions)) == (len(self._codes), len(learner_labels)):
            return  # the classes only ever grow: no new one, nothing moved
        labels = self._codes.labels
        try:
            labels = sorted(labels)
        except TypeError:
            pass  # labels of mixed types: numpy could not sort them either
        index = {label: j for j, label in enumerate(labels)}
        self._classes = labels
        self._positions = [index[label] for label in self._codes.decode(learner_labels)]

    def _adopt(self, learner) -> None:
        if not hasattr(learner, "classes"):
            raise TypeError(f"{type(learner).__name__} learns no classes: "
                            "use SklearnStyleRegressor")
        super()._adopt(learner)
        self._codes = LabelCodes(learner.classes)
        self._classes: list = []
        self._positions: list[int] = []
        self._order_classes()

    def _reset(self) -> None:
        super()._reset()
        for name in ("_codes", "_classes", "_positions"):
            self.__dict__.pop(name, None)


class SklearnStyleRegressor(_SklearnStyle):
    """A regressor (or regression ranker) of the core with scikit-learn's surface.

    ``y`` of shape ``(n,)`` is one target and :meth:`predict` answers ``(n,)``; ``(n, m)`` is
    ``m`` targets (iSOUP's multi-target regression) and :meth:`predict` answers ``(n, m)``.

    Parameters
    ----------
    learner_class : type
        A regressor class of :mod:`models` (``ISOUPTree``, ``ISOUPSymRF``,
        ``BlockForestRegressionRanker``).
    **params
        Its constructor arguments.

    Examples
    --------
    >>> import numpy as np
    >>> from models import ISOUPTree
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((400, 2)); y = X[:, 0] + X[:, 1]
    >>> reg = SklearnStyleRegressor(ISOUPTree, grace_period=50).fit(X, y)
    >>> reg.predict([[0.5, 0.25]]).shape, reg.score(X, y) > 0.9
    ((1,), True)
    """

    _estimator_type = "regressor"
    _multi_output = True

    def fit(self, X, y):
        """A fresh learner, then :meth:`partial_fit` on all rows (one ``learn_many``)."""
        self._reset()
        return self.partial_fit(X, y)

    def partial_fit(self, X, y):
        """Learn the rows ``X`` with their targets ``y`` (``(n,)`` or ``(n, m)``), in
        order; returns self."""
        X, names = self._matrix(X, learning=True)
        self._require_y(y)
        Y = np.ascontiguousarray(y, dtype=np.float64)  # the kernels' layout, as for X
        if Y.ndim not in (1, 2):
            raise ValueError(f"y must be (n,) or (n, n_targets), got shape {Y.shape}")
        single = Y.ndim == 1
        if self.__dict__.get("_single") not in (None, single):
            raise ValueError("y must have the shape it had in the first fit "
                             f"({'(n,)' if self._single else '(n, n_targets)'})")
        if "learner_" not in self.__dict__:
            self._start()
        self.learner_.learn_many(X, Y.reshape(-1, 1) if single else Y)
        self._single = single
        self._learned(names)
        return self

    def predict(self, X) -> np.ndarray:
        """Predicted targets: ``(n,)`` for one target learned as ``(n,)``, else ``(n, m)``."""
        learner = self._needs("predict_many")
        X, _ = self._matrix(X, learning=False)
        P = learner.predict_many(X)
        if P.shape[1] == 0:
            raise not_fitted(f"This {type(self).__name__} has learned no rows yet")
        if self._single or (self._single is None and P.shape[1] == 1):
            return P[:, 0].copy()
        return P

    def score(self, X, y) -> float:
        """The coefficient of determination R², averaged over the targets (scikit-learn's
        ``r2_score``: a constant target scores 1 when predicted exactly, else 0)."""
        Y = np.asarray(y, dtype=np.float64)
        P = self.predict(X)
        Y, P = Y.reshape(Y.shape[0], -1), P.reshape(P.shape[0], -1)
        residual = ((Y - P) ** 2).sum(axis=0)
        total = ((Y - Y.mean(axis=0)) ** 2).sum(axis=0)
        r2 = np.where(total > 0, 1.0 - residual / np.where(total > 0, total, 1.0),
                      np.where(residual == 0, 1.0, 0.0))
        return float(r2.mean())

    def _adopt(self, learner) -> None:
        if hasattr(learner, "classes"):
            raise TypeError(f"{type(learner).__name__} is a classifier: "
                            "use SklearnStyleClassifier")
        super()._adopt(learner)
        self._single: bool | None = None  # the first y's shape decides

    def _reset(self) -> None:
        super()._reset()
        self.__dict__.pop("_single", None)


def _column_names(X) -> list[str] | None:
    """The names of a frame's columns (anything with ``.columns``), when all are strings."""
    columns = getattr(X, "columns", None)
    if columns is None or not all(isinstance(c, str) for c in columns):
        return None
    return list(columns)


def _dense(X) -> np.ndarray:
    """``X`` as a 2-D C-ordered float64 array (no copy when it is one), with scikit-learn's
    refusals."""
    if hasattr(X, "toarray"):  # scipy's sparse matrices and arrays, without importing scipy
        raise TypeError("Sparse data was passed, but dense data is required: the learners "
                        "take dense rows (X.toarray())")
    arr = np.asarray(X)
    if arr.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    # C order and float64 whatever came in (a frame's values are often in Fortran order):
    # the kernels are compiled for that layout, another one would compile them again
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"Expected 2D array, got {arr.ndim}D array instead. Reshape your data "
                         "either using array.reshape(-1, 1) if your data has a single feature "
                         "or array.reshape(1, -1) if it contains a single sample.")
    return arr


def _label_list(y) -> list:
    """Labels as a list of plain Python values (a column vector is read as a vector)."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected: read as "
                      "one label per row", conversion_warning(), stacklevel=3)
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y must be one label per row, got shape {arr.shape}")
    if arr.dtype.kind == "f":  # as the learners' own labels: integral numbers only
        if not np.isfinite(arr).all():
            raise ValueError("Input y contains NaN or infinity: no class label")
        if (arr != np.round(arr)).any():
            raise ValueError("Unknown label type: continuous (a classifier's float labels "
                             "must be whole numbers; SklearnStyleRegressor learns targets)")
    return arr.tolist()
