"""Prequential (test-then-train) metrics of one stream: cumulative, windowed, and their history.

Every labelled row is scored once, with the prediction made before the model learned it
(interleaved test-then-train). :class:`StreamMetrics` keeps

* the *cumulative* metrics over every labelled row of the stream;
* the *windowed* metrics over the last ``window`` labelled rows, a sliding window as in MOA's
  ``WindowClassificationPerformanceEvaluator`` and river's ``evaluate.iter_progressive_val_score``
  with windowed metrics (Bifet et al., 2015, argue for windows over fading factors);
* a *history*: the windowed metrics every ``every`` labelled rows, for plots over time.

Classification: ``accuracy``; ``kappa``, Cohen's kappa from the confusion matrix (Cohen, 1960),
which discounts the agreement of a chance classifier with the same label frequencies;
``kappa_t``, kappa-temporal (Bifet, Morales, Read, Holmes and Pfahringer, 2015, "Efficient
online evaluation of big data stream classifiers", KDD), which discounts the no-change
classifier predicting the stream's previous label, so autocorrelated label streams do not
flatter a model; ``macro_f1``, the mean F1 of the classes seen (in the truth or predictions).

Regression (one or several targets): ``mae`` and ``rmse`` are the mean over targets of the
per-target values (``mae_per_target``, ``rmse_per_target``); ``amrae`` is the average relative
MAE of Osojnik, Panov and Dzeroski (2018, "Tree-based methods for online multi-target
regression"): per target, the model's MAE over the MAE of the running-mean predictor (the
mean of the labels before the row, 0 before the first), then the mean over targets. Below 1,
the model beats predicting the mean.

Metrics of no rows, and ratios whose denominator is 0 (``kappa`` when the truth and the
predictions are one and the same class, ``kappa_t`` when the label never changes) are NaN.
Only numpy is imported: the task names equal :data:`models.registry.CLASSIFICATION` and
:data:`models.registry.REGRESSION`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

CLASSIFICATION = "classification"
REGRESSION = "regression"

NAN = float("nan")


class StreamMetrics:
    """Prequential metrics of one stream (see the module doc).

    Parameters
    ----------
    task : str
        ``"classification"`` or ``"regression"``.
    window : int
        Rows of the sliding window: the last ``window`` labelled rows.
    every : int
        A history snapshot of the windowed metrics every ``every`` labelled rows.
    n_targets : int, optional
        Regression targets; taken from the first rows when not given.

    Examples
    --------
    Classification (``None``: no model yet, a wrong prediction):

    >>> m = StreamMetrics("classification", window=4, every=3)
    >>> m.update(["a", "b", "a", "a", "b", "b"], ["a", "a", "a", "b", "b", None])
    >>> c = m.cumulative()
    >>> c["n"], c["accuracy"], round(c["kappa"], 4), c["kappa_t"], round(c["macro_f1"], 4)
    (6, 0.5, 0.1429, 0.25, 0.5333)
    >>> m.windowed()["accuracy"]  # the last 4 rows
    0.5
    >>> [(h["position"], h["n"], round(h["accuracy"], 3)) for h in m.history()]
    [(2, 3, 0.667), (5, 6, 0.5)]

    Two-target regression (``None`` predictions are skipped):

    >>> r = StreamMetrics("regression", window=100, every=100)
    >>> r.update([[1, 10], [2, 20], [3, 30], [4, 40]], [None, [1, 10], [2, 20], [5, 40]])
    >>> c = r.cumulative()
    >>> c["n"], c["mae_per_target"], round(c["mae"], 4), round(c["amrae"], 4)
    (3, [1.0, 6.666666666666667], 3.8333, 0.5556)
    """

    def __init__(self, task: str, window: int = 1000, every: int = 500, n_targets: int | None = None):
        if task not in (CLASSIFICATION, REGRESSION):
            raise ValueError(f"task must be {CLASSIFICATION!r} or {REGRESSION!r}, not {task!r}")
        if window < 1 or every < 1:
            raise ValueError(f"window and every must be positive (window={window}, every={every})")
        self.task = task
        self.window = int(window)
        self.every = int(every)
        self.n = 0  # labelled rows seen
        self._scores = _ClassScores() if task == CLASSIFICATION else _TargetScores(n_targets)
        self._history: list[dict] = []

    def update(self, y_true, y_pred, positions=None) -> None:
        """Scores labelled rows, in stream order.

        Parameters
        ----------
        y_true : sequence
            Labels: class labels (any hashable: ints, strings) or regression targets (floats,
            or lists of floats for several targets). Unlabelled rows must be left out.
        y_pred : sequence
            The predictions made before learning each row; ``None`` where there was no model
            yet. Classification counts ``None`` as a wrong prediction (the stream did wait
            for a label); regression skips the row, since no error size is defined.
        positions : sequence of int, optional
            The stream position of each row, kept by the history; by default the 0-based
            count of labelled rows.
        """
        n = len(y_true)
        if len(y_pred) != n or (positions is not None and len(positions) != n):
            raise ValueError(f"{n} labels but {len(y_pred)} predictions"
                             + ("" if positions is None else f" and {len(positions)} positions"))
        if n == 0:
            return
        kept = self._scores.extend(y_true, y_pred)  # rows of the window before this batch
        self._snapshot(n, kept, positions)
        self._scores.trim(self.window)
        self.n += n

    def _snapshot(self, n: int, kept: int, positions) -> None:
        """History entries at the multiples of ``every`` that this batch of ``n`` rows reaches."""
        first = (self.n // self.every + 1) * self.every
        for count in range(first, self.n + n + 1, self.every):
            row = count - self.n - 1  # in this batch
            end = kept + row + 1  # in the scores' recent rows
            window = self._scores.window(max(0, end - self.window), end)
            position = self.n + row if positions is None else int(positions[row])
            self._history.append({"position": position, "n": count, "window_n": window.pop("n"), **window})

    def cumulative(self) -> dict:
        """Metrics over every labelled row so far (keys: see the module doc)."""
        return self._scores.cumulative()

    def windowed(self) -> dict:
        """Metrics over the last ``window`` labelled rows (the same keys as :meth:`cumulative`)."""
        return self._scores.window(0, None)

    def history(self) -> list[dict]:
        """Windowed metrics every ``every`` labelled rows, oldest first.

        Each entry: ``position`` (stream position of the row that completed it), ``n``
        (labelled rows so far), ``window_n`` (rows the window scored) and the windowed
        metrics but ``n``.
        """
        return list(self._history)


class _ClassScores:
    """Confusion counts of a classification stream and the codes of its recent rows.

    Labels are coded once as ints in order of appearance; ``None`` (no prediction) is -1.
    The confusion matrix has the true class on rows and ``1 +`` the predicted class on
    columns, column 0 counting rows without a prediction: they lower accuracy and recall
    but are no class of their own.
    """

    def __init__(self):
        self.codes = {None: -1}
        self.n_classes = 0
        self.confusion = np.zeros((0, 1), np.int64)
        self.no_change_hits = 0
        self.last = -1  # code of the stream's previous label (-1 before the first)
        # true and predicted codes, and whether the no-change classifier was right
        self.recent = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool))

    def encode(self, labels) -> np.ndarray:
        """Codes of labels, registering new ones (a dict lookup per row, done in C)."""
        if isinstance(labels, np.ndarray):
            labels = labels.tolist()  # Python scalars hash faster than numpy ones
        try:
            return np.fromiter(map(self.codes.__getitem__, labels), np.int64, len(labels))
        except KeyError:
            for label in dict.fromkeys(labels):  # first appearance order, so codes are reproducible
                if label not in self.codes:
                    self.codes[label] = self.n_classes
                    self.n_classes += 1
            return np.fromiter(map(self.codes.__getitem__, labels), np.int64, len(labels))

    def extend(self, y_true, y_pred) -> int:
        """Counts a batch; returns how many rows before it :attr:`recent` still holds."""
        t = self.encode(y_true)
        if t.min() < 0:
            raise ValueError("a label is None: unlabelled rows are not scored")
        p = self.encode(y_pred)
        self._grow()
        k = self.n_classes
        previous = np.concatenate(([self.last], t[:-1]))
        no_change = t == previous  # never at the stream's first row (-1)
        self.confusion += np.bincount(t * (k + 1) + p + 1, minlength=k * (k + 1)).reshape(k, k + 1)
        self.no_change_hits += int(np.count_nonzero(no_change))
        self.last = int(t[-1])
        kept = len(self.recent[0])
        self.recent = tuple(np.concatenate(pair) for pair in zip(self.recent, (t, p, no_change)))
        return kept

    def _grow(self) -> None:
        k0 = self.confusion.shape[0]
        if self.n_classes > k0:
            grown = np.zeros((self.n_classes, self.n_classes + 1), np.int64)
            grown[:k0, : k0 + 1] = self.confusion
            self.confusion = grown

    def trim(self, window: int) -> None:
        # a copy, so the batch's arrays are freed
        self.recent = tuple(a[-window:].copy() for a in self.recent)

    def window(self, lo: int, hi: int | None) -> dict:
        t, p, no_change = (a[lo:hi] for a in self.recent)
        k = self.n_classes
        confusion = np.bincount(t * (k + 1) + p + 1, minlength=k * (k + 1)).reshape(k, k + 1)
        return classification_metrics(confusion, int(np.count_nonzero(no_change)))

    def cumulative(self) -> dict:
        return classification_metrics(self.confusion, self.no_change_hits)


def classification_metrics(confusion: np.ndarray, no_change_hits: int) -> dict:
    """Accuracy, kappa, kappa-temporal and macro F1 from confusion counts.

    Parameters
    ----------
    confusion : ndarray, shape (k, k + 1)
        Rows: true class; column 0: no prediction; column ``j + 1``: predicted class ``j``.
    no_change_hits : int
        Rows where the label equalled the previous one (the no-change classifier was right).

    Examples
    --------
    Truth ``[0, 0, 1, 1]``, predictions ``[0, 1, 1, 1]``:

    >>> m = classification_metrics(np.array([[0, 1, 1], [0, 0, 2]]), no_change_hits=2)
    >>> m["accuracy"], m["kappa"], m["kappa_t"], round(m["macro_f1"], 4)
    (0.75, 0.5, 0.5, 0.7333)
    """
    n = int(confusion.sum())
    if n == 0:
        return {"n": 0, "accuracy": NAN, "kappa": NAN, "kappa_t": NAN, "macro_f1": NAN}
    hits = np.diagonal(confusion[:, 1:])
    truth = confusion.sum(axis=1).astype(np.float64)
    predicted = confusion[:, 1:].sum(axis=0).astype(np.float64)
    accuracy = float(hits.sum()) / n
    # agreement of independent guesses, same frequencies (counts: the products and their sum
    # are exact integers, so BLAS's CPU-dependent summation order cannot change them)
    chance = float(truth @ predicted) / (n * n)
    seen = truth + predicted > 0
    f1 = 2.0 * hits[seen] / (truth[seen] + predicted[seen])  # 2PR / (P + R), with counts
    return {"n": n, "accuracy": accuracy, "kappa": _kappa(accuracy, chance),
            "kappa_t": _kappa(accuracy, no_change_hits / n), "macro_f1": float(f1.mean())}


def _row_sums(errors: np.ndarray) -> np.ndarray:
    """``errors`` (kinds, rows, targets) summed over the rows: each target's rows made
    contiguous and summed by numpy's pairwise sum, whose order is the same on every CPU (a
    matrix product with a vector of ones is faster than a strided sum too, but BLAS picks its
    kernel, and so its rounding, by the CPU)."""
    return np.ascontiguousarray(errors.transpose(0, 2, 1)).sum(axis=2)


def _kappa(accuracy: float, baseline: float) -> float:
    """``(p0 - pe) / (1 - pe)``: the share of the baseline's errors the model avoids."""
    return (accuracy - baseline) / (1.0 - baseline) if baseline < 1.0 else NAN


class _TargetScores:
    """Error sums of a regression stream and the per-row errors of its recent rows.

    Per row and target: absolute error, squared error, and the absolute error of the
    running-mean predictor; rows without a prediction hold zeros and are not counted.
    The three kinds come first in the arrays (``(3, rows, targets)``) so that each is
    written contiguously.
    """

    def __init__(self, n_targets: int | None):
        self.n_targets = n_targets
        self.label_sum = None  # per target, over every labelled row
        self.label_count = 0
        self.sums = None  # (3, targets)
        self.n_scored = 0
        self.recent = None  # (scored (m,), errors (3, m, targets))

    def _start(self, n_targets: int) -> None:
        self.n_targets = n_targets
        self.label_sum = np.zeros(n_targets)
        self.sums = np.zeros((3, n_targets))
        self.recent = (np.empty(0, bool), np.empty((3, 0, n_targets)))

    def extend(self, y_true, y_pred) -> int:
        """Counts a batch; returns how many rows before it :attr:`recent` still holds."""
        y = _matrix(y_true, self.n_targets)
        if np.isnan(y).any():  # np.asarray reads None as NaN
            raise ValueError("a label is None or NaN: unlabelled rows are not scored")
        if self.recent is None:
            self._start(y.shape[1])
        n = len(y)
        scored, p = _predictions(y_pred, n, self.n_targets)
        errors = np.empty((3, n, self.n_targets))
        d = np.subtract(p, y, out=errors[1])
        np.abs(d, out=errors[0])
        np.square(d, out=errors[1])
        # the running mean before each row: earlier batches, then this batch's earlier rows
        cumulative = np.cumsum(y, axis=0)
        mean = (cumulative - y + self.label_sum) / np.maximum(self.label_count + np.arange(n), 1)[:, None]
        np.abs(np.subtract(y, mean, out=errors[2]), out=errors[2])
        if not scored.all():
            errors[:, ~scored] = 0.0
        self.sums += _row_sums(errors)
        self.n_scored += int(np.count_nonzero(scored))
        self.label_sum = self.label_sum + cumulative[-1]
        self.label_count += n
        kept = len(self.recent[0])
        self.recent = (np.concatenate((self.recent[0], scored)), np.concatenate((self.recent[1], errors), axis=1))
        return kept

    def trim(self, window: int) -> None:
        # copies, so the batch's arrays are freed
        self.recent = (self.recent[0][-window:].copy(), self.recent[1][:, -window:].copy())

    def window(self, lo: int, hi: int | None) -> dict:
        if self.recent is None:
            return regression_metrics(np.zeros((3, self.n_targets or 0)), 0)
        scored, errors = self.recent[0][lo:hi], self.recent[1][:, lo:hi]
        return regression_metrics(_row_sums(errors), int(np.count_nonzero(scored)))

    def cumulative(self) -> dict:
        if self.sums is None:
            return regression_metrics(np.zeros((3, self.n_targets or 0)), 0)
        return regression_metrics(self.sums, self.n_scored)


def regression_metrics(sums: np.ndarray, n: int) -> dict:
    """MAE, RMSE and aMRAE (per target and averaged) from error sums over ``n`` rows.

    Parameters
    ----------
    sums : ndarray, shape (3, targets)
        Sums of absolute errors, squared errors, and absolute errors of the running mean.
    n : int
        Rows scored.

    Examples
    --------
    >>> m = regression_metrics(np.array([[2.0, 6.0], [2.0, 20.0], [4.0, 3.0]]), n=2)
    >>> m["mae_per_target"], m["rmse_per_target"], m["rmae_per_target"], m["amrae"]
    ([1.0, 3.0], [1.0, 3.1622776601683795], [0.5, 2.0], 1.25)
    """
    if n == 0:
        none = [NAN] * sums.shape[1]
        return {"n": 0, "mae": NAN, "rmse": NAN, "amrae": NAN,
                "mae_per_target": none, "rmse_per_target": list(none), "rmae_per_target": list(none)}
    mae = sums[0] / n
    rmse = np.sqrt(sums[1] / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        rmae = np.where(sums[2] > 0, sums[0] / sums[2], NAN)
    return {"n": n, "mae": float(mae.mean()), "rmse": float(rmse.mean()), "amrae": float(rmae.mean()),
            "mae_per_target": mae.tolist(), "rmse_per_target": rmse.tolist(), "rmae_per_target": rmae.tolist()}


def _matrix(values, n_targets: int | None) -> np.ndarray:
    """Rows of targets as a float matrix (a single target may come as scalars)."""
    if n_targets and isinstance(values, list) and values and isinstance(values[0], list):
        # lists of floats, as pipelines give them: flattening is twice as fast as np.asarray
        try:
            same = set(map(len, values)) == {n_targets}
        except TypeError:  # a row is a scalar: np.asarray reports it
            same = False
        if same:
            flat = np.fromiter(itertools.chain.from_iterable(values), np.float64, len(values) * n_targets)
            return flat.reshape(len(values), n_targets)
    if n_targets == 1 and isinstance(values, list):  # numbers and lists of one, mixed
        values = [v[0] if type(v) is list and len(v) == 1 else v for v in values]
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or (n_targets is not None and a.shape[1] != n_targets):
        raise ValueError(f"expected rows of {n_targets or 'the same number of'} targets, got shape {a.shape}")
    return a


def _predictions(y_pred, n: int, n_targets: int) -> tuple[np.ndarray, np.ndarray]:
    """Which rows have a prediction, and the predictions (NaN rows where none)."""
    if not _has_none(y_pred):
        return np.ones(n, bool), _matrix(y_pred, n_targets)
    scored = np.fromiter((p is not None for p in y_pred), bool, n)
    p = np.full((n, n_targets), np.nan)
    if scored.any():
        p[scored] = _matrix([v for v in y_pred if v is not None], n_targets)
    return scored, p


def _has_none(values) -> bool:
    if isinstance(values, np.ndarray) and values.dtype != object:
        return False
    try:
        return None in values  # a scan in C
    except ValueError:  # elements are arrays, whose == is elementwise
        return any(v is None for v in values)


def spearman(a, b) -> float:
    """Spearman's rank correlation of two equally long sequences (ties take their mean rank).

    NaN when either is constant or has fewer than two values.

    Examples
    --------
    >>> spearman([1, 2, 3, 4], [10, 20, 30, 40])
    1.0
    >>> spearman([1, 2, 3, 4], [4, 3, 2, 1])
    -1.0
    >>> round(spearman([1, 2, 2, 3], [1, 3, 2, 4]), 4)
    0.9487
    >>> spearman([1, 1, 1], [1, 2, 3])
    nan
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman needs two sequences of the same length, got {x.shape} and {y.shape}")
    if len(x) < 2:
        return NAN
    rx, ry = _ranks(x), _ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    # numpy's pairwise sums, not BLAS dot products: their rounding is the same on every CPU
    denominator = math.sqrt(float(np.sum(rx * rx)) * float(np.sum(ry * ry)))
    return float(np.sum(rx * ry)) / denominator if denominator > 0 else NAN


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their ranks."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # rank of each distinct value's last copy
    return (last - (counts - 1) / 2.0)[inverse]
