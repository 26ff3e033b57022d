"""Pipeline of a stream of features: held instances, columns that arrive, a generation each.

A :class:`FeatureStreamPipeline` serves one stream whose predictor learns from feature
arrivals (its registry spec has ``arrivals``: the random forest on a stream of features of
Motl & Kordík 2019, :class:`models.cart.feature_stream_forest.FeatureStreamForest`). The paper's
setting is the transpose of a stream of instances: the rows are fixed and the columns
arrive, one at a time. Like :class:`~worker.pipeline.engine.Pipeline` it is plain Python
and knows nothing about Kafka.

Semantics

* Instances come first (:meth:`~FeatureStreamPipeline.add`), labelled or not, each with an
  id. The pipeline holds them: values of the features known so far (the *base* features
  named by the stream's first instance, perhaps none, then those arrived), label, id,
  source offset and timestamp. Ids are compared in their string form (instance id ``7``
  and ``"7"`` are one entity), as the keys of a FeatureArrival's map are strings.
* A feature column arrives later (:meth:`~FeatureStreamPipeline.arrive`: a name and a map
  from instance id to value) and is joined to the held rows by id; held rows it does not
  name get a missing value, ids it names that no held row has are reported.
* Each arrival trains one *generation* of trees on every held labelled row with every
  column known so far (Algorithm 1 of the paper: ``learn_many`` with ``X`` one column
  wider than the time before) and re-scores every held unlabelled row; those scores are
  what the stream's users wait for, and each arrival updates them. The forest's ranking of
  all features (its mean decrease in impurity, under the method its registry spec
  declares) follows each generation. While no labelled row is held, an arriving column is
  joined and nothing is learned.
* Instances added after a generation are predicted when they arrive (labelled ones too,
  before their label is ever learned), by the latest generation.

Missing values are held as NaN. Whenever a generation is trained, each column's *fill
value* becomes the mean of its non-missing held values (0.0 for a column with none), and
those fill values stand in for missing values in that generation's training rows and in
every prediction until the next generation. Before the first generation nothing is
predicted. The paper's experiments have no missing values (the authors' code replaces NaN
by -1); the forest's CART trees take finite values only, and a column mean is a neutral
value for a split that depends on nothing but what is held at the arrival, so a replay or a
restored checkpoint reproduces it exactly.

A stream of features runs its forest alone. The profile's rankers and detectors are not
used (the forest publishes its own ranking, and there is no prequential loss for a detector
to watch: rows are scored again at every arrival); they are not an error, because the
default profile names rankers for every stream. A second predictor candidate or a selector
is refused by :func:`~worker.pipeline.config.check_config`.

The held store is bounded (``max_rows``: ``row_store_full`` names the setting that raises
it; ``max_features``: ``feature_cap``) and kept in arrays that grow by doubling.
:meth:`~FeatureStreamPipeline.to_state` and :meth:`~FeatureStreamPipeline.from_state`
continue exactly: the same later inputs give the same outputs as an uninterrupted run.

References
----------
.. [1] J. Motl, P. Kordík, "Learning on a Stream of Features with Random Forest",
   ITAT 2019, CEUR Workshop Proceedings vol. 2473, paper 12.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models import registry
from models.registry import CLASSIFICATION, PREDICTOR, RANKER

from .config import PipelineConfig, stream_seed
from .errors import PipelineError
from .protocol import no_instance_batches
from .results import FeatureResult, HeldPredictions, RankingOut
from .stages import Stage
from .tasks import Task, make_task

STATE_VERSION = 1
ROWS_SETTING = "STREAMFOREST_LEARNERS__FEATURE_STREAM_ROWS"
_MIN_ROWS = 64  # first capacities of the held store (it doubles from there)
_MIN_COLS = 8


def column_means(X: np.ndarray) -> np.ndarray:
    """Mean of each column's non-missing (non-NaN) values; 0.0 for a column with none.

    Examples
    --------
    >>> column_means(np.array([[1.0, np.nan, np.nan], [3.0, 5.0, np.nan]])).tolist()
    [2.0, 5.0, 0.0]
    """
    known = ~np.isnan(X)
    count = known.sum(axis=0)
    total = np.where(known, X, 0.0).sum(axis=0)
    return np.divide(total, count, out=np.zeros(X.shape[1]), where=count > 0)


def _filled(X: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``X`` with each missing value replaced by its column's fill."""
    return np.ascontiguousarray(np.where(np.isnan(X), fill, X))


def _capacity(cap: int, need: int, limit: int) -> int:
    """``cap`` doubled until it holds ``need``, but no more than ``limit`` (or ``need``)."""
    while cap < need:
        cap *= 2
    return max(need, min(cap, limit))


def _grown(a: np.ndarray, size: int, fill) -> np.ndarray:
    """``a`` copied into a longer first axis of ``size`` (new entries are ``fill``)."""
    out = np.full((size,) + a.shape[1:], fill, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


def _ranked(scores: np.ndarray) -> np.ndarray:
    """Column indices, best score first; ties by column index (the order of
    :meth:`Pipeline._rank <worker.pipeline.engine.Pipeline._rank>`, reproducible)."""
    return np.lexsort((np.arange(scores.shape[0]), -scores))


def _shown(keys: list, limit: int = 5) -> str:
    """The first few of ``keys`` for an error message."""
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(repr(str(k)[:64]) for k in keys[:limit]) + more


class FeatureStreamPipeline:
    """The forest of one stream of features, its held rows and their predictions.

    Parameters
    ----------
    stream : str
        Stream id (the Kafka key).
    cfg : PipelineConfig
        The stream's profile; its first predictor learns from feature arrivals
        (:attr:`PipelineConfig.arrivals`).
    feature_names : list of str
        The base features, fixed by the stream's first instance (empty: every column
        arrives later).
    max_classes : int, optional
        Distinct class labels the stream may have (more are refused by :meth:`check_label`).
    max_rows : int, default 100_000
        Rows the stream may hold (more are refused with ``row_store_full``).
    max_features : int, default 2000
        Columns the stream may have (more arrivals are refused with ``feature_cap``).

    Examples
    --------
    Sixty instances without features, forty of them labelled; a column of noise arrives,
    then one that tells the classes apart:

    >>> import numpy as np
    >>> cfg = PipelineConfig(predictor="feature_stream",
    ...                      params={"feature_stream": {"n_trees": 4}})
    >>> p = FeatureStreamPipeline("s1", cfg, feature_names=[])
    >>> rng = np.random.default_rng(0)
    >>> ys = [int(v) for v in rng.integers(0, 2, 60)]
    >>> res = p.add([[]] * 60, ys[:40] + [None] * 20, list(range(60)), np.arange(60), [0] * 60)
    >>> res = p.arrive("noise", {str(i): float(v) for i, v in enumerate(rng.random(60))})
    >>> res = p.arrive("signal", {str(i): float(y) for i, y in enumerate(ys)})
    >>> p.n_generations, p.feature_names, len(res.predictions.ids)
    (2, ['noise', 'signal'], 20)
    >>> res.predictions.y_pred == ys[40:], res.ranking.features[0]
    (True, 'signal')
    """

    #: the worker sends this stream's FeatureArrivals to :meth:`arrive`
    arrivals = True

    def __init__(self, stream: str, cfg: PipelineConfig, feature_names: list[str],
                 max_classes: int | None = None, max_rows: int = 100_000,
                 max_features: int = 2000):
        if not cfg.arrivals:
            raise ValueError(f"profile {cfg.profile!r} has no predictor that learns from "
                             f"feature arrivals (first predictor: {cfg.model_name})")
        self.stream, self.cfg = stream, cfg
        self.max_classes = max_classes
        self.max_rows, self.max_features = int(max_rows), int(max_features)
        self.seed = stream_seed(stream, cfg.seed)
        # a classification profile fixes the task at once, as in Pipeline
        self.task: Task | None = (make_task(CLASSIFICATION, None, max_classes)
                                  if cfg.task == CLASSIFICATION else None)
        name = cfg.predictor[0]
        # as a ranker too, the forest publishes the rankings its spec declares
        roles = (PREDICTOR, RANKER) if RANKER in registry.get(name).roles else (PREDICTOR,)
        self.predictor = Stage.build(name, cfg.params_of(name), roles, self.seed)
        names = [str(f) for f in feature_names]
        if len(set(names)) != len(names):
            raise ValueError("feature names must be distinct")
        self.n_instances = 0
        self._hold_store(names, np.zeros((0, len(names))), [], [], np.zeros(0, np.int64),
                         np.zeros(0, np.int64), np.zeros(0))

    def _hold_store(self, names: list, X: np.ndarray, labels: list, ids: list,
                    offsets: np.ndarray, ts: np.ndarray, fill: np.ndarray) -> None:
        """Set the held rows (capacity beyond them; the unused cells hold NaN)."""
        n, d = X.shape
        rows, cols = max(n, _MIN_ROWS), max(d, _MIN_COLS)
        self.feature_names = list(names)
        self._col = {f: j for j, f in enumerate(self.feature_names)}
        self._X = np.full((rows, cols), np.nan)
        self._X[:n, :d] = X
        self._y = list(labels)
        self._ids = list(ids)
        self._row = {str(i): r for r, i in enumerate(self._ids)}
        self._labelled = _grown(np.array([v is not None for v in self._y], dtype=bool), rows,
                                False)
        self._offsets = _grown(np.asarray(offsets, dtype=np.int64), rows, -1)
        self._ts = _grown(np.asarray(ts, dtype=np.int64), rows, 0)
        self._fill = np.asarray(fill, dtype=np.float64).copy()
        self.n_rows = n

    # -- what the stream is --------------------------------------------------------------------

    @property
    def n_features(self) -> int:
        """Columns known so far (base features and arrived ones)."""
        return len(self.feature_names)

    @property
    def names(self) -> list[str]:
        """Feature names in column order (used in rankings)."""
        return self.feature_names

    @property
    def model_name(self) -> str:
        """Registry name of the forest (the ``model`` of predictions)."""
        return self.predictor.name

    @property
    def classes(self) -> list:
        """Class labels known to the forest (class-index order)."""
        return [] if self.task is None else self.task.classes(self.predictor.learner)

    @property
    def n_generations(self) -> int:
        """Generations of trees trained so far (those dropped past ``max_generations`` too)."""
        return int(self.predictor.learner.n_generations)

    @property
    def n_labelled(self) -> int:
        """Labelled rows held."""
        return int(self._labelled[: self.n_rows].sum())

    # -- what the intake asks (worker.pipeline.protocol.StreamPipeline) ------------------------

    #: columns grow as features arrive: an instance is checked when its turn comes (:meth:`add`)
    fixed_columns = None
    #: rows are checked by the pipeline, never taken by the bulk kernels
    bulk_ready = False

    def check_instance_batch(self) -> None:
        """InstanceBatch records are refused: a stream of features holds its rows one by one."""
        raise no_instance_batches(self.stream)

    def check_arrival(self) -> None:
        """FeatureArrivals are what the stream learns from."""

    def check_label_event(self, y: Any) -> None:
        """LabelEvents are refused: a stream of features learns a row when its features have
        arrived, with the label its instance carried."""
        raise PipelineError(
            "no_label_events", f"stream {self.stream!r} is a stream of features: its instances "
            "carry their labels (LabelEvents are for streams of instances)")

    def check_label(self, y: Any) -> None:
        """Refuse (:class:`PipelineError`) a label this stream cannot take; fix the task at the
        first label (a stream of features is a classification stream)."""
        if isinstance(y, list):
            raise PipelineError(
                "invalid_target", f"stream {self.stream!r} is a stream of features "
                f"({self.model_name}, a classifier): y must be a class label, not a list of "
                "targets")
        if self.task is None:
            self.task = make_task(CLASSIFICATION, None, self.max_classes)
        self.task.check_label(y)

    # -- instances -----------------------------------------------------------------------------

    def add(self, xs: list, ys: list, ids: list, offsets: np.ndarray, ts: list,
            emit: bool = True) -> FeatureResult:
        """Hold instances; predict them when a generation exists.

        Parameters
        ----------
        xs : list
            Each a list of ``n_features`` values in column order, or a map from feature
            name to value (known names only; features it lacks are missing).
        ys : list
            Class labels, ``None`` for unlabelled instances.
        ids : list
            Instance ids (ints or strings), new to the stream.
        offsets : ndarray of int64
            Source offsets of the instances.
        ts : list of int
            Timestamps of the instances.
        emit : bool
            ``False`` while replaying input whose outputs were already committed: rows are
            held exactly as when emitting, but not predicted.

        Returns
        -------
        FeatureResult
            ``predictions`` of the accepted rows (``None`` before the first generation or
            when not emitting) and the refused rows in ``rejected``; a refused row changes
            no state.
        """
        out = FeatureResult()
        offsets = np.asarray(offsets, dtype=np.int64)
        start = self.n_rows
        for i, (x, y, id_) in enumerate(zip(xs, ys, ids)):
            try:
                self._hold(x, y, id_, int(offsets[i]), int(ts[i]))
            except PipelineError as err:
                out.rejected.append((offsets[i: i + 1].copy(), err))
        if emit and self.n_rows > start and self.n_generations:
            out.predictions = self._predict(np.arange(start, self.n_rows))
        return out

    def _hold(self, x, y, id_, offset: int, ts: int) -> None:
        """Check one instance, then append it to the held rows (all checks come first)."""
        key = str(id_)
        if self.n_rows >= self.max_rows:
            raise PipelineError(
                "row_store_full", f"stream {self.stream!r} holds {self.n_rows} rows, the "
                f"limit of a stream of features; {ROWS_SETTING} raises it")
        if key in self._row:
            raise PipelineError("duplicate_id", f"stream {self.stream!r} holds an instance "
                                f"with id {key[:64]!r} already (ids are compared as strings)")
        values = self._values(x)
        if y is not None:
            self.check_label(y)  # last: it may fix the task and learn a label name
        r = self.n_rows
        self._reserve(r + 1, self.n_features)
        self._X[r, : self.n_features] = values
        self._labelled[r] = y is not None
        self._offsets[r], self._ts[r] = offset, ts
        self._y.append(y)
        self._ids.append(id_)
        self._row[key] = r
        self.n_rows += 1
        self.n_instances += 1

    def _values(self, x) -> np.ndarray:
        """An instance's values in column order (NaN for features a map leaves out)."""
        if isinstance(x, dict):
            unknown = [k for k in x if k not in self._col]
            if unknown:
                raise PipelineError(
                    "unknown_feature", f"x names features stream {self.stream!r} does not "
                    f"know: {_shown(unknown)} (it knows {self.n_features}: its first "
                    "instance's and those arrived since)")
            row = np.full(self.n_features, np.nan)
            row[[self._col[k] for k in x]] = self._numbers(list(x.values()))
            return row
        if len(x) != self.n_features:
            raise PipelineError(
                "feature_count", f"expected {self.n_features} features (the stream's first "
                f"instance's and those arrived since), got {len(x)}")
        return self._numbers(x)

    @staticmethod
    def _numbers(values: list) -> np.ndarray:
        try:
            arr = np.asarray(values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise PipelineError("invalid_field", "feature values must be numbers") from None
        if not np.isfinite(arr).all():
            raise PipelineError("non_finite", "feature values must be finite numbers")
        return arr

    def _reserve(self, n_rows: int, n_cols: int) -> None:
        """Room for ``n_rows`` rows and ``n_cols`` columns (capacities double)."""
        rows, cols = self._X.shape
        if n_rows <= rows and n_cols <= cols:
            return
        rows2 = _capacity(rows, n_rows, self.max_rows)
        cols2 = _capacity(cols, n_cols, self.max_features)
        X = np.full((rows2, cols2), np.nan)
        X[:rows, :cols] = self._X
        self._X = X
        if rows2 > rows:
            self._labelled = _grown(self._labelled, rows2, False)
            self._offsets = _grown(self._offsets, rows2, -1)
            self._ts = _grown(self._ts, rows2, 0)

    # -- feature arrivals ----------------------------------------------------------------------

    def arrive(self, feature: str, values: dict, emit: bool = True) -> FeatureResult:
        """Join a new column to the held rows; learn a generation and re-score.

        Parameters
        ----------
        feature : str
            Name of the arriving feature (new to the stream).
        values : dict
            Instance id (string form) to value; held rows it leaves out get a missing value.
        emit : bool
            ``False`` while replaying: the generation is trained exactly as when emitting,
            but nothing is predicted or ranked.

        Returns
        -------
        FeatureResult
            ``predictions`` of every unlabelled held row and the forest's ``ranking`` after
            the generation (both ``None`` when no labelled row is held, so nothing was
            learned, or when not emitting; ``predictions`` also when no unlabelled row is
            held), and the ``unknown_ids`` of ``values``, in its order.

        Raises
        ------
        PipelineError
            ``duplicate_feature`` (the name is known), ``feature_cap`` (the stream has
            ``max_features`` columns), ``non_finite`` or ``invalid_field`` (a value that is
            no finite number); the pipeline is unchanged.
        """
        if feature in self._col:
            raise PipelineError("duplicate_feature", f"stream {self.stream!r} knows feature "
                                f"{str(feature)[:64]!r} already; a column arrives once")
        if self.n_features >= self.max_features:
            raise PipelineError("feature_cap", f"stream {self.stream!r} has {self.n_features} "
                                "features, the limit (worker.max_features); feature "
                                f"{str(feature)[:64]!r} is refused")
        column, unknown = self._column(values)
        d = self.n_features
        self._reserve(self.n_rows, d + 1)
        self._X[: self.n_rows, d] = column
        self._col[feature] = d
        self.feature_names.append(feature)
        out = FeatureResult(unknown_ids=unknown)
        if not self._labelled[: self.n_rows].any():
            return out
        self._learn()
        if emit:
            rows = np.flatnonzero(~self._labelled[: self.n_rows])
            if rows.shape[0]:
                out.predictions = self._predict(rows)
            out.ranking = self._ranking()
        return out

    def _column(self, values: dict) -> tuple[np.ndarray, list]:
        """The arriving column over the held rows (NaN where missing) and the unknown ids."""
        rows, given, unknown = [], [], []
        for key, value in values.items():
            r = self._row.get(str(key))
            if r is None:
                unknown.append(key)
            else:
                rows.append(r)
                given.append(value)
        column = np.full(self.n_rows, np.nan)
        column[rows] = self._numbers(given)
        return column, unknown

    def _learn(self) -> None:
        """One generation on the labelled held rows, all columns, missing values filled."""
        n = self.n_rows
        X = self._X[:n, : self.n_features]
        self._fill = column_means(X)
        lab = np.flatnonzero(self._labelled[:n])
        self.predictor.learner.learn_many(_filled(X[lab], self._fill),
                                          [self._y[r] for r in lab.tolist()])

    def _predict(self, rows: np.ndarray) -> HeldPredictions:
        """Scores of held ``rows`` by the latest generation (one vectorised call)."""
        learner = self.predictor.learner
        width = int(learner.n_features)  # the columns known at the latest generation
        proba = np.asarray(learner.predict_proba_many(_filled(self._X[rows, :width],
                                                              self._fill)))
        classes = self.classes
        # argmax keeps the lowest class index on ties, as the learner's predict_many does
        y_pred = [classes[k] for k in np.argmax(proba, axis=1).tolist()]
        idx = rows.tolist()
        return HeldPredictions([self._ids[r] for r in idx], [self._y[r] for r in idx],
                               self._offsets[rows], self._ts[rows], classes, y_pred, proba,
                               width)

    def _ranking(self) -> RankingOut | None:
        """The forest's ranking of every feature (its spec's first ranking method)."""
        n_seen = int(self.predictor.learner.n_seen)
        names = self.names
        for method, scores in self.predictor.rankings():
            order = _ranked(scores)
            return RankingOut(-1, method, [names[c] for c in order],
                              [float(scores[c]) for c in order], n_seen)
        return None

    # -- state ---------------------------------------------------------------------------------

    @property
    def n_held(self) -> int:
        """Instances held for their labels: none (a stream of features takes no LabelEvent;
        its rows wait for features, not labels)."""
        return 0

    @property
    def nbytes(self) -> int:
        """Bytes of the learner's state and of the row store."""
        store = sum(a.nbytes for a in (self._X, self._labelled, self._offsets, self._ts))
        return self.predictor.learner.nbytes + store

    def to_state(self) -> dict:
        """Everything that decides the stream's future outputs, as plain values and arrays.

        ``kind`` is the registry name of the stream's forest, a learner of feature arrivals
        (:func:`worker.pipeline.pipeline_from_state` tells the states apart by it).
        """
        n, d = self.n_rows, self.n_features
        return {
            "v": STATE_VERSION,
            "kind": self.predictor.name,
            "stream": self.stream,
            "config": self.cfg.as_dict(),
            "feature_names": list(self.feature_names),
            "max_classes": self.max_classes,
            "max_rows": self.max_rows,
            "max_features": self.max_features,
            "task": None if self.task is None else self.task.to_state(),
            "predictor": self.predictor.to_state(),
            "X": np.ascontiguousarray(self._X[:n, :d]),
            "labels": list(self._y),
            "ids": list(self._ids),
            "offsets": self._offsets[:n].copy(),
            "ts": self._ts[:n].copy(),
            "fill": self._fill.copy(),
            "n_instances": self.n_instances,
        }

    @classmethod
    def from_state(cls, state: dict) -> FeatureStreamPipeline:
        """Rebuild a pipeline that continues exactly where :meth:`to_state` left it."""
        if state.get("v") != STATE_VERSION:
            raise ValueError(f"feature stream state version {state.get('v')!r} is not "
                             "supported")
        cfg = PipelineConfig.from_dict(state["config"])
        p = cls.__new__(cls)
        p.stream, p.cfg = state["stream"], cfg
        p.max_classes = state["max_classes"]
        p.max_rows, p.max_features = int(state["max_rows"]), int(state["max_features"])
        p.seed = stream_seed(p.stream, cfg.seed)
        p.task = Task.from_state(state["task"])
        p.predictor = Stage.restore(state["predictor"])
        names = list(state["feature_names"])
        X = np.asarray(state["X"], dtype=np.float64).reshape(len(state["ids"]), len(names))
        p._hold_store(names, X, state["labels"], state["ids"], state["offsets"], state["ts"],
                      state["fill"])
        p.n_instances = int(state["n_instances"])
        return p
