"""river's conventions over the learners: a dict per row, one row at a time.

:class:`RiverStyleClassifier` and :class:`RiverStyleRegressor` take ``learn_one(x, y)`` with
``x`` a dict ``{feature name: number}`` and answer ``predict_one(x)``,
``predict_proba_one(x) -> {label: probability}`` and ``importances() -> {feature name:
importance}``, as river's estimators do. They hold no model of their own: each call builds the
row the learner takes and calls its batch method on it, so the answers are the learner's,
bit for bit, and the learner stays reachable as ``.learner``.

* *Features*: the first dict's keys fix the columns, in its order (or ``features=`` fixes
  them up front); later dicts may list them in any order. A missing key is an error (no
  learner takes missing values); an unknown key too, as the worker refuses an instance with
  one, unless ``unknown="ignore"``.
* *Labels*: any hashable (river's streams label with bools); each new label gets an int code
  for the learner as it comes, and every classifier here takes a class appearing mid-stream.
* *Targets* of a regressor: a number (one target) or a dict ``{target name: number}``
  (multi-target, iSOUP), fixed by the first ``y`` as the features are by the first ``x``.

:class:`~models.cart.feature_stream_forest.FeatureStreamForest` learns a generation of trees
per batch of arriving columns, not rows one at a time: it takes the scikit-learn-style
adapter (:mod:`models.adapters.sklearn_style`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..cart.feature_stream_forest import FeatureStreamForest
from ..core.base import learner_class
from ._columns import Columns
from ._importances import pick
from ._labels import LabelCodes


class _RiverStyle:
    """What the two adapters share: the learner, its feature columns, importances, state."""

    kind: ClassVar[str] = ""

    def __init__(self, learner, features=None, unknown: str = "raise"):
        if isinstance(learner, type):
            raise TypeError(f"a learner is needed, not its class: {learner.__name__}()")
        if isinstance(learner, FeatureStreamForest):
            raise TypeError("FeatureStreamForest learns a generation of trees per batch of "
                            "arriving columns, not a row at a time: use "
                            "SklearnStyleClassifier.partial_fit with the wider matrix")
        self.learner = learner
        self._features = Columns(features, unknown)

    @property
    def feature_names(self) -> list | None:
        """The feature names in the learner's column order (``None`` before the first row)."""
        return None if self._features.names is None else list(self._features.names)

    def importances(self, method: str | None = None) -> dict:
        """``{feature name: importance}`` of one of the learner's rankings.

        Parameters
        ----------
        method : str, optional
            Which ranking (a key of the learner's ``importances()``, e.g. ``"mda"`` of an
            online random forest); ``None``: the first the learner reports.

        Returns
        -------
        dict
            Empty while the learner reports none (before its first rows or first block, or
            a learner that ranks nothing, such as naive Bayes).
        """
        values = pick(self.learner.importances(), method)
        return self._features.named(values) if values.shape[0] else {}

    def _row(self, x) -> np.ndarray:
        return self._features.row(x)

    def _rows(self, xs) -> np.ndarray:
        return self._features.rows(xs)

    def _needs(self, method: str) -> None:
        if not hasattr(self.learner, method):
            raise TypeError(f"{type(self.learner).__name__} has no {method}: it ranks features "
                            "and predicts nothing (see importances())")

    def to_state(self) -> dict:
        """Plain values: the learner's :meth:`~models.core.base.Learner.to_state` with the
        adapter's feature names and maps (labels and names are kept as given: msgpack takes
        them when they are ints, strings, bools or floats)."""
        return {"kind": self.kind, "learner": self.learner.to_state(),
                "features": self.feature_names, "unknown": self._features.unknown,
                **self._extra_state()}

    @classmethod
    def from_state(cls, state: dict):
        """Rebuild an adapter from :meth:`to_state` output; its learner continues exactly."""
        if state.get("kind") != cls.kind:
            raise ValueError(f"state is for {state.get('kind')!r}, not {cls.kind!r}")
        inner = state["learner"]
        learner = learner_class(inner.get("kind", "")).from_state(inner)
        obj = cls(learner, features=_names(state.get("features")),
                  unknown=state.get("unknown", "raise"))
        obj._load_extra_state(state)
        return obj

    def _extra_state(self) -> dict:
        return {}

    def _load_extra_state(self, state: dict) -> None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.learner!r})"


class RiverStyleClassifier(_RiverStyle):
    """A classifier (or classification ranker) of the core with river's surface.

    Parameters
    ----------
    learner : Learner
        Any classifier of :mod:`models` (``AdaptiveRandomForest``, ``BlockForestRanker``,
        ...), fresh or trained: the labels it knows stand for themselves.
    features : sequence of hashable, optional
        Feature names in column order; ``None``: the keys of the first dict learned.
    unknown : {"raise", "ignore"}, default "raise"
        What a feature the columns do not name does (see :mod:`models.adapters.river_style`).

    Examples
    --------
    >>> import numpy as np
    >>> from models import AdaptiveRandomForest
    >>> rng = np.random.default_rng(0)
    >>> model = RiverStyleClassifier(AdaptiveRandomForest(n_models=3, seed=1))
    >>> for a, b in rng.random((600, 2)).tolist():
    ...     model.learn_one({"a": a, "b": b}, a > 0.5)
    >>> model.predict_one({"b": 0.5, "a": 0.9})
    True
    >>> p = model.predict_proba_one({"a": 0.1, "b": 0.5})
    >>> sorted(p), p[False] > 0.5
    ([False, True], True)
    >>> imp = model.importances()
    >>> list(imp), imp["a"] > imp["b"]
    (['a', 'b'], True)
    >>> model.learner.n_seen
    600
    """

    kind = "river_style_classifier"

    def __init__(self, learner, features=None, unknown: str = "raise"):
        super().__init__(learner, features, unknown)
        if not hasattr(learner, "classes"):
            raise TypeError(f"{type(learner).__name__} learns no classes: "
                            "use RiverStyleRegressor")
        self._codes = LabelCodes(learner.classes)
        self._columns: list = []  # the labels of the learner's probability columns

    @property
    def classes(self) -> list:
        """The labels in order of first appearance."""
        return self._codes.labels

    def learn_one(self, x: dict, y) -> None:
        """Learn the row ``x`` with its label ``y``."""
        self.learner.learn_many(self._row(x), [self._codes.encode_one(y)])

    def learn_many(self, xs, ys) -> None:
        """Learn the dicts ``xs`` with their labels ``ys`` in one call of the learner's
        ``learn_many`` (for a learner of mini-batches, such as the forgetful forest, one
        mini-batch; for the others the same as ``learn_one`` per row)."""
        X = self._rows(xs)
        self.learner.learn_many(X, self._codes.encode(list(ys)))

    def predict_one(self, x: dict):
        """The learner's label for ``x``; ``None`` before it learned anything."""
        self._needs("predict_many")
        return self._codes.from_learner.get(self.learner.predict_many(self._row(x))[0])

    def predict_proba_one(self, x: dict) -> dict:
        """``{label: probability}`` over the classes the learner knows (``{}`` before it
        learned anything)."""
        self._needs("predict_proba_many")
        proba = self.learner.predict_proba_many(self._row(x))
        return dict(zip(self._labels_of(proba.shape[1]), proba[0].tolist()))

    def predict_many(self, xs) -> list:
        """:meth:`predict_one` of each dict, in one call of the learner."""
        self._needs("predict_many")
        return self._codes.decode(self.learner.predict_many(self._rows(xs)))

    def predict_proba_many(self, xs) -> list[dict]:
        """:meth:`predict_proba_one` of each dict, in one call of the learner."""
        self._needs("predict_proba_many")
        proba = self.learner.predict_proba_many(self._rows(xs))
        labels = self._labels_of(proba.shape[1])
        return [dict(zip(labels, row)) for row in proba.tolist()]

    def _labels_of(self, k: int) -> list:
        """The labels of the learner's first ``k`` probability columns (its classes only
        ever grow, so the list is rebuilt only when their number changes)."""
        if len(self._columns) != k:
            self._columns = self._codes.decode(self.learner.classes[:k])
        return self._columns

    def _extra_state(self) -> dict:
        return {"labels": self._codes.items()}

    def _load_extra_state(self, state: dict) -> None:
        self._codes = LabelCodes.from_items(state.get("labels") or ())


class RiverStyleRegressor(_RiverStyle):
    """A regressor (or regression ranker) of the core with river's surface.

    Parameters
    ----------
    learner : Learner
        Any regressor of :mod:`models` (``ISOUPTree``, ``ISOUPSymRF``,
        ``BlockForestRegressionRanker``).
    features : sequence of hashable, optional
        Feature names in column order; ``None``: the keys of the first dict learned.
    targets : sequence of hashable, optional
        Target names: ``y`` is a dict of them. ``None``: the first ``y`` decides, a number
        (one target; :meth:`predict_one` answers a float) or a dict (its keys, in order).
    unknown : {"raise", "ignore"}, default "raise"
        What a feature or target the columns do not name does.

    Examples
    --------
    >>> import numpy as np
    >>> from models import ISOUPTree
    >>> rng = np.random.default_rng(0)
    >>> model = RiverStyleRegressor(ISOUPTree(grace_period=50))
    >>> for a, b in rng.random((400, 2)).tolist():
    ...     model.learn_one({"a": a, "b": b}, {"sum": a + b, "diff": a - b})
    >>> pred = model.predict_one({"a": 0.5, "b": 0.25})
    >>> list(pred), abs(pred["sum"] - 0.75) < 0.1
    (['sum', 'diff'], True)
    """

    kind = "river_style_regressor"

    def __init__(self, learner, features=None, targets=None, unknown: str = "raise"):
        super().__init__(learner, features, unknown)
        if hasattr(learner, "classes"):
            raise TypeError(f"{type(learner).__name__} is a classifier: "
                            "use RiverStyleClassifier")
        self._targets = Columns(targets, unknown, what="target")
        self._single: bool | None = False if targets is not None else None

    @property
    def target_names(self) -> list | None:
        """The target names (``None``: one unnamed target, or no ``y`` learned yet)."""
        return None if self._targets.names is None else list(self._targets.names)

    def learn_one(self, x: dict, y) -> None:
        """Learn the row ``x`` with its target(s) ``y``: a number or a dict."""
        self.learner.learn_many(self._row(x), self._target_rows([y]))

    def learn_many(self, xs, ys) -> None:
        """Learn the dicts ``xs`` with their targets ``ys`` in one call of the learner."""
        X = self._rows(xs)
        self.learner.learn_many(X, self._target_rows(list(ys)))

    def predict_one(self, x: dict):
        """The predicted target (a float) or targets (a dict); ``None`` before the learner
        learned anything."""
        return self._answers(self._predict(self._row(x)))[0]

    def predict_many(self, xs) -> list:
        """:meth:`predict_one` of each dict, in one call of the learner."""
        return self._answers(self._predict(self._rows(xs)))

    def _predict(self, X: np.ndarray) -> np.ndarray:
        self._needs("predict_many")
        return self.learner.predict_many(X)

    def _answers(self, P: np.ndarray) -> list:
        if P.shape[1] == 0:
            return [None] * P.shape[0]
        if self._single:
            return P[:, 0].tolist()
        names = self._targets.names or tuple(range(P.shape[1]))
        return [dict(zip(names, row)) for row in P.tolist()]

    def _target_rows(self, ys: list) -> np.ndarray:
        """The targets as the learner's ``(n, n_targets)`` matrix (the first fixes the form)."""
        if not ys:
            return np.zeros((0, max(len(self._targets), 1)))
        named = hasattr(ys[0], "keys")
        single = not named if self._single is None else self._single
        if named == single:
            raise ValueError("y must be " + ("a number (the first y was one)" if single
                                             else f"a dict of the targets {self.target_names}"))
        if named:
            Y = self._targets.rows(ys)
        else:
            try:
                Y = np.array(ys, dtype=np.float64).reshape(len(ys), 1)
            except (TypeError, ValueError):
                raise ValueError(f"y must be a number or a dict of numbers, got {ys!r:.80}") \
                    from None
        self._single = single  # the form is fixed once a y of it was read
        return Y

    def _extra_state(self) -> dict:
        return {"targets": self.target_names, "single": self._single}

    def _load_extra_state(self, state: dict) -> None:
        targets = _names(state.get("targets"))
        self._targets = Columns(targets, self._features.unknown, what="target")
        self._single = state.get("single")


def _names(names):
    """Names read back from a state: lists (tuples after msgpack or JSON) become tuples."""
    if names is None:
        return None
    return [tuple(n) if isinstance(n, list) else n for n in names]
