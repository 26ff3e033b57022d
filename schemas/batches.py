"""Batched contracts: many rows of one stream in one message, columnar.

===========================  ======================  ==================================================
contract                     topic (default)         written by
===========================  ======================  ==================================================
:class:`InstanceBatch`       ``sf.instances``        producers of high-volume streams: rows of one stream
:class:`PredictionBatch`     ``sf.predictions``      the worker, when ``output.prediction_batches`` is on:
                                                     one per InstanceBatch, rows in input order
===========================  ======================  ==================================================

An InstanceBatch travels on the instances topic beside plain :class:`~schemas.messages.Instance`
records; the header ``sf-kind: instance-batch`` (:data:`KIND_HEADER`, :data:`INSTANCE_BATCH`)
tells them apart, so the worker never has to parse a value to know which contract it holds.
The feature matrix ``X`` is a float 64 array of shape ``(n, d)``: in msgpack the codec's array
extension type (dtype, shape, little-endian bytes), in JSON the codec's tagged array or plain
nested lists (one list per row), so a person can still type one::

    {"v":1,"stream":"s1","ts":0,"X":[[0.1,0.2],[0.3,0.4]],"y":["UP",null]}

Every row must be usable: one bad row (NaN, a row of another width, a label that is neither a
class label nor a list of targets) refuses the whole batch, and the error names the row
(``X[17]``, ``y[17]``; :attr:`BatchRowError.row`). Rows of a batch share the record's offset;
within it a row is known by its index, which is also its id when the batch gives no ``ids``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Annotated, Any, ClassVar, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import errors as E
from .checkpoint import state_equal
from .codec import DEFAULT_MAX_BYTES, constructed, load, validate
from .errors import DecodeError
from .instances import InstanceLimits
from .kinds import INSTANCE_BATCH, record_kind
from .messages import (
    INT64_MAX,
    INT64_MIN,
    MAX_NAME_LENGTH,
    Bounded,
    Contract,
    Count,
    Finite,
    InputTarget,
    Label,
    Name,
    Target,
    Timestamp,
    cross_field_error,
)
from .values import MAX_MAGNITUDE, is_text

_NONE = type(None)
_ROW_WHERE = re.compile(r"^(?:X|y|ids|ts)\[(\d+)\]")


class BatchRowError(DecodeError):
    """A :class:`~schemas.errors.DecodeError` of a batch, with the index of the row at fault
    (``None`` when the batch as a whole is: no stream, a malformed matrix, lengths that
    disagree).

    Examples
    --------
    >>> err = BatchRowError("non_finite", "row 3 has nan at column 1", "X[3]", 3)
    >>> err.row, str(err)
    (3, 'non_finite at X[3]: row 3 has nan at column 1')
    """

    def __init__(self, code: str, reason: str, where: str = "", row: int | None = None) -> None:
        super().__init__(code, reason, where)
        self.row = row

    def __reduce__(self):
        return (type(self), (self.code, self.reason, self.where, self.row))


def is_instance_batch(headers: Iterable[tuple[str, Any]] | None) -> bool:
    """Whether a record's headers say it holds an :class:`InstanceBatch`.

    Examples
    --------
    >>> is_instance_batch([("sf-kind", b"instance-batch")]), is_instance_batch(None)
    (True, False)
    """
    return record_kind(headers) == INSTANCE_BATCH


# =========================================================================== checks


def _matrix(X: Any) -> np.ndarray:
    """``X`` as a C-contiguous float 64 matrix, or a BatchRowError naming the bad row."""
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise BatchRowError(E.INVALID_FIELD, f"must be a matrix (2 dimensions: rows, "
                                f"features), got shape {X.shape}", "X")
        if X.dtype.kind not in "fiu":
            raise BatchRowError(E.INVALID_FIELD, f"must hold numbers (float 64), got dtype "
                                f"{X.dtype}", "X")
        X = np.ascontiguousarray(X, dtype=np.float64)
    elif type(X) is list:
        X = _matrix_of_rows(X)
    else:
        raise BatchRowError(E.INVALID_FIELD, "must be an array of shape (rows, features) or a "
                            "list of rows", "X")
    if X.shape[0] == 0:
        raise BatchRowError(E.INVALID_FIELD, "has no rows", "X")
    if X.shape[1] == 0:
        raise BatchRowError(E.FEATURE_COUNT, "rows have no features", "X[0]", 0)
    finite = np.isfinite(X)
    if not finite.all():
        r, c = map(int, np.argwhere(~finite)[0])
        raise BatchRowError(E.NON_FINITE, f"must be a finite number, got {float(X[r, c])!r} in "
                            f"column {c}", f"X[{r}]", r)
    beyond = np.abs(X) > MAX_MAGNITUDE  # the rule of Instance (schemas.values.MAX_MAGNITUDE)
    if beyond.any():
        r, c = map(int, np.argwhere(beyond)[0])
        raise BatchRowError(E.OUT_OF_RANGE, f"must lie within +-1e100 (its square would overflow)"
                            f", got {float(X[r, c])!r} in column {c}", f"X[{r}]", r)
    return X


def _matrix_of_rows(rows: list) -> np.ndarray:
    """Nested lists (JSON) as a matrix: every row a list of numbers of the first row's width."""
    width = None
    for r, row in enumerate(rows):
        if type(row) is not list:
            raise BatchRowError(E.INVALID_FIELD, "must be a list of numbers", f"X[{r}]", r)
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise BatchRowError(E.FEATURE_COUNT, f"has {len(row)} features, row 0 has "
                                f"{width}", f"X[{r}]", r)
        for v in row:
            if type(v) is not float and type(v) is not int:
                raise BatchRowError(E.INVALID_FIELD, f"must be a list of numbers, got "
                                    f"{type(v).__name__}", f"X[{r}]", r)
    try:
        return np.array(rows, dtype=np.float64).reshape(len(rows), width or 0)
    except OverflowError:  # an int beyond float range
        r = next(i for i, row in enumerate(rows) if not all(abs(v) < 1.8e308 for v in row))
        raise BatchRowError(E.NON_FINITE, "must be a finite number", f"X[{r}]", r) from None


def _label_problem(v: Any, bounded: bool = True) -> str | tuple[str, str] | None:
    """Why ``v`` is no label (class label, list of targets or None): a reason or ``(code,
    reason)``; None when it is one. ``bounded``: targets within +-``MAX_MAGNITUDE`` (inputs)."""
    t = type(v)
    if v is None:
        return None
    if t is str:
        return None if is_text(v) else (E.INVALID_TEXT, _NOT_TEXT)
    if t is int:
        return None if INT64_MIN <= v <= INT64_MAX else "is out of the 64-bit integer range"
    if t is float:  # one regression target
        if not math.isfinite(v):
            return "must be a finite number (a regression target)"
        if bounded and abs(v) > MAX_MAGNITUDE:
            return E.OUT_OF_RANGE, f"must be a number within +-1e100 (a target), got {v!r}"
        return None
    if t is list:
        if not v:
            return "must not be an empty list of targets"
        for x in v:
            if (type(x) is not float and type(x) is not int) or not math.isfinite(x):
                return f"must be a list of finite numbers (targets), got {x!r}"
            if bounded and abs(x) > MAX_MAGNITUDE:
                return E.OUT_OF_RANGE, f"must be a list of numbers within +-1e100 (targets), got {x!r}"
        return None
    return ("must be a class label (integer or string), a number or a list of numbers "
            f"(regression targets) or null, got {t.__name__}")


_NOT_TEXT = "must be text UTF-8 can encode (it holds a lone surrogate such as the JSON escape \\ud800)"


def _id_problem(v: Any) -> str | None:
    t = type(v)
    if t is str:
        return None if is_text(v) else (E.INVALID_TEXT, _NOT_TEXT)
    if t is int:
        return None if INT64_MIN <= v <= INT64_MAX else "is out of the 64-bit integer range"
    return f"must be an integer or a string, got {t.__name__}"


def _ts_problem(v: Any) -> str | None:
    if type(v) is not int:
        return f"must be an integer (milliseconds since the epoch), got {type(v).__name__}"
    return None if 0 <= v <= INT64_MAX else "must be between 0 and 2**63 - 1"


def _column(name: str, values: Any, n: int, problem) -> None:
    """A per-row column: a list of ``n`` values, each passing ``problem``."""
    if type(values) is not list:
        raise BatchRowError(E.INVALID_FIELD, f"must be a list with one value per row, got "
                            f"{type(values).__name__}", name)
    if len(values) != n:
        raise BatchRowError(E.INVALID_FIELD, f"has {len(values)} values but X has {n} rows",
                            name)
    for r, v in enumerate(values):
        why = problem(v)
        if why is not None:  # a reason, or (code, reason)
            code, why = why if type(why) is tuple else (E.INVALID_FIELD, why)
            raise BatchRowError(code, why, f"{name}[{r}]", r)


def _check_columns(X: np.ndarray, y: Any, ids: Any, ts: Any, features: Any) -> None:
    """Lengths and element types of the per-row columns (a BatchRowError otherwise)."""
    n, d = X.shape
    if y is not None:
        _column("y", y, n, _label_problem)
    if ids is not None:
        _column("ids", ids, n, _id_problem)
    if type(ts) is list:
        _column("ts", ts, n, _ts_problem)
    if features is not None:
        if len(features) != d:
            raise BatchRowError(E.FEATURE_COUNT, f"names {len(features)} features but X has "
                                f"{d} columns", "features")
        if len(set(features)) != d:
            raise BatchRowError(E.INVALID_FIELD, "contains duplicate names", "features")


# =========================================================================== contracts


class TaggedArray(BaseModel):
    """A numpy array in JSON as the codec writes it: dtype, shape and base64 bytes."""
    # for the JSON Schema of the batches' matrices only: the codec reads the tag itself

    model_config = ConfigDict(extra="forbid")

    dtype: str = Field(alias="__ndarray__", description="numpy dtype string, e.g. <f8")
    shape: list[Annotated[int, Field(ge=0)]] = Field(description="rows, columns")
    data: str = Field(description="the values' little-endian bytes in row order, base64")



class InstanceBatch(Contract):
    """Consecutive rows of one stream in one message (record header ``sf-kind:
    instance-batch``).

    Parameters
    ----------
    stream : str
        Stream id; also the Kafka message key.
    X : ndarray of shape (n, d), or list of n lists of d numbers
        The rows, in stream order, finite. In msgpack an array extension type (float 64), in
        JSON the codec's tagged array or nested lists.
    features : list of str, optional
        Names of X's columns. A stream whose first message named its features (an Instance
        with a map ``x``, or a batch with ``features``) takes them in any order; without
        names, columns are in the stream's order.
    y : list of n labels, optional
        A class label, a list of targets (multi-target regression) or None per row; omitted:
        no row is labelled.
    ids : list of n ints or strings, optional
        Instance ids, echoed in predictions; omitted: the row indexes ``0 .. n-1``.
    ts : int or list of n ints
        Event time in milliseconds: one for every row, or one per row.

    Examples
    --------
    >>> b = InstanceBatch(stream="s1", ts=5, X=[[0.1, 0.2], [0.3, 0.4]], y=["UP", None])
    >>> b.X.shape, b.row_ids(), b.row_ts()
    ((2, 2), [0, 1], [5, 5])
    >>> InstanceBatch(stream="s1", ts=5, X=[[0.1, float("nan")]])
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for InstanceBatch
    ...
    """

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False,
                              arbitrary_types_allowed=True)
    wire_arrays: ClassVar[bool] = True  # X travels as an array extension type
    record_kind: ClassVar[str] = INSTANCE_BATCH  # its sf-kind header (schemas.kinds)
    #: the JSON form of the fields the validator below checks (typed Any for it): what the
    #: contract's JSON Schema says of them
    json_forms: ClassVar[dict[str, Any]] = {
        "X": Annotated[list[Annotated[list[Bounded], Field(min_length=1)]], Field(min_length=1)]
        | TaggedArray,
        "y": list[InputTarget | None] | None,
        "ids": list[Label] | None,
        "ts": Timestamp | list[Timestamp],
    }

    stream: Name
    X: Any
    features: list[Name] | None = None
    y: list[Any] | None = None
    ids: list[Any] | None = None
    ts: Any = Field(..., description="milliseconds since the epoch: one int, or one per row")

    @model_validator(mode="after")
    def _rows(self) -> InstanceBatch:
        try:
            X = _matrix(self.X)
            if type(self.ts) is not list:
                why = _ts_problem(self.ts)
                if why is not None:
                    raise BatchRowError(E.INVALID_FIELD, why, "ts")
            _check_columns(X, self.y, self.ids, self.ts, self.features)
        except BatchRowError as exc:
            raise cross_field_error(exc.where, exc.reason, exc.code) from None
        object.__setattr__(self, "X", X)
        return self

    def __len__(self) -> int:
        return self.X.shape[0]

    def row_ids(self) -> list:
        """The id of every row (the row indexes when the batch gives none)."""
        return list(range(len(self))) if self.ids is None else self.ids

    def row_ts(self) -> list[int]:
        """The event time of every row."""
        return self.ts if type(self.ts) is list else [self.ts] * len(self)

    def row_labels(self) -> list:
        """The label of every row (``None``: unlabelled)."""
        return [None] * len(self) if self.y is None else self.y

    def __eq__(self, other: object) -> bool:
        """Exact equality, X compared by dtype, shape and bytes (numpy ``==`` is elementwise)."""
        if type(other) is not type(self):
            return NotImplemented
        return state_equal(dict(self), dict(other))

    __hash__ = None


class PredictionBatch(Contract):
    """The worker's predictions for the rows of one :class:`InstanceBatch`, in row order.

    Written instead of one :class:`~schemas.messages.Prediction` per row when
    ``STREAMFOREST_OUTPUT__PREDICTION_BATCHES=true``.

    Parameters
    ----------
    stream, model : str
        Stream id and predictor name.
    ids : list of int or str
        The rows' ids (the input's ``ids``, or its row indexes).
    y_pred : list
        Predicted label (or targets) per row; None for rows predicted before any label.
    classes : list of int or str, or None
        Class labels in the order of ``proba``'s columns: those known after the batch's last
        prediction (a row predicted before a class appeared has probability 0 for it).
        None for regression.
    proba : ndarray of shape (n, len(classes)), list of rows, or None
        Class probabilities; in msgpack an array extension type, in JSON nested lists.
    y_true : list
        Each row's label, None when unlabelled.
    topic, partition, offset : str, int, int
        Where the input batch was read (every row shares the offset).
    ts : list of int
        Each row's event time (ms).
    """

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False,
                              arbitrary_types_allowed=True)
    wire_arrays: ClassVar[bool] = True
    #: the JSON form of the fields the validator below checks (as the worker writes them)
    json_forms: ClassVar[dict[str, Any]] = {
        "ids": list[Label],
        "y_pred": list[Target | None],
        "classes": list[Label] | None,
        "proba": list[list[Finite]] | None,
        "y_true": list[InputTarget | None],
        "ts": list[Timestamp],
    }

    stream: Name
    model: Name
    ids: list[Any]
    y_pred: list[Any]
    classes: list[Any] | None = None
    proba: Any = None
    y_true: list[Any]
    topic: Name
    partition: int = Field(ge=0, le=2**31 - 1)
    offset: Count
    ts: list[Any]

    @model_validator(mode="after")
    def _aligned(self) -> PredictionBatch:
        n = len(self.ids)
        for name in ("y_pred", "y_true", "ts"):
            if len(getattr(self, name)) != n:
                raise cross_field_error(name, f"has {len(getattr(self, name))} values but "
                                        f"'ids' has {n}")
        predicted = partial(_label_problem, bounded=False)  # an input's bound is not an output's
        for name, values, problem in (("ids", self.ids, _id_problem),
                                      ("y_pred", self.y_pred, predicted),
                                      ("y_true", self.y_true, _label_problem),
                                      ("ts", self.ts, _ts_problem)):
            for r, v in enumerate(values):
                why = problem(v)
                if why is not None:
                    code, why = why if type(why) is tuple else (E.INVALID_FIELD, why)
                    raise cross_field_error(f"{name}[{r}]", why, code)
        if self.proba is not None:
            k = len(self.classes or ())
            P = np.asarray(self.proba, dtype=np.float64) if n else np.zeros((0, k))
            if P.shape != (n, k):
                raise cross_field_error("proba", f"must have shape ({n}, {k}) (rows, classes), "
                                        f"got {P.shape}")
            if not np.isfinite(P).all():
                raise cross_field_error("proba", "must hold finite numbers", E.NON_FINITE)
            object.__setattr__(self, "proba", P)
        return self

    def __len__(self) -> int:
        return len(self.ids)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return state_equal(dict(self), dict(other))

    __hash__ = None


# =========================================================================== decoding

_BATCH_KEYS = frozenset(InstanceBatch.model_fields)


def _plain_batch(d: dict) -> tuple[InstanceBatch | None, bool]:
    """An InstanceBatch from plain checks of the common case (float 64 matrix, int or string
    ids and labels), or None for full validation (which then gives the exact error).

    Accepts only what :class:`InstanceBatch` accepts, with the same values. The second item
    says whether ``y`` or ``ids`` hold strings (whose lengths the limits then check).
    """
    no = None, True
    if not d.keys() <= _BATCH_KEYS or d.get("v", 1) not in InstanceBatch.versions:
        return no
    stream, X, ts = d.get("stream"), d.get("X"), d.get("ts")
    if type(stream) is not str or not 0 < len(stream) <= MAX_NAME_LENGTH:
        return no
    if (type(X) is not np.ndarray or X.dtype != np.float64 or X.ndim != 2 or 0 in X.shape
            or not np.isfinite(X).all()):
        return no
    n = X.shape[0]
    if type(ts) is int:
        if not 0 <= ts <= INT64_MAX:
            return no
    elif _plain_column(ts, n, (int,)) is None or min(ts) < 0:
        return no
    y, ids, features = d.get("y"), d.get("ids"), d.get("features")
    kinds: set = set()
    for values, types in ((y, (int, str, _NONE)), (ids, (int, str))):
        if values is not None:
            found = _plain_column(values, n, types)
            if found is None:
                return no
            kinds |= found
    if features is not None and (
            type(features) is not list or len(features) != X.shape[1]
            or len(set(features)) != len(features)
            or not all(type(f) is str and 0 < len(f) <= MAX_NAME_LENGTH for f in features)):
        return no
    batch = constructed(InstanceBatch, {"v": d.get("v", 1), "stream": stream, "X": X,
                                        "features": features, "y": y, "ids": ids, "ts": ts}, d)
    return batch, str in kinds


def _plain_column(values: Any, n: int, types: tuple) -> set | None:
    """The types of a list of ``n`` values of exactly these types, integers within 64 bits;
    None for anything else."""
    if type(values) is not list or len(values) != n:
        return None
    kinds = set(map(type, values))
    if not kinds <= set(types):
        return None
    if int in kinds:
        ints = values if len(kinds) == 1 else [v for v in values if type(v) is int]
        if not (INT64_MIN <= min(ints) and max(ints) <= INT64_MAX):
            return None
    return kinds


def check_batch_limits(batch: InstanceBatch, limits: InstanceLimits,
                       strings: bool = True) -> None:
    """Raise ``too_long`` or ``too_many_features`` (with the row) past ``limits``, as
    :func:`schemas.instances.check_limits` does for one instance (``strings=False``: the caller
    knows that ``y`` and ``ids`` hold no string)."""
    d = batch.X.shape[1]
    if d > limits.max_features:
        raise BatchRowError(E.TOO_MANY_FEATURES, f"the rows have {d} features; the limit is "
                            f"{limits.max_features}", "X[0]", 0)
    longest = limits.max_label_length
    for name, values, what in (("y", batch.y, "class label"), ("ids", batch.ids, "instance id")):
        if values is None or not strings:
            continue
        for r, v in enumerate(values):
            if type(v) is str and len(v) > longest:
                raise BatchRowError(E.TOO_LONG, f"the {what} has {len(v)} characters; the "
                                    f"limit is {longest}", f"{name}[{r}]", r)
    for f in batch.features or ():
        if len(f) > limits.max_feature_name_length:
            raise BatchRowError(E.TOO_LONG, f"a feature name has {len(f)} characters; the "
                                f"limit is {limits.max_feature_name_length}", "features")


def decode_instance_batch(
    value: bytes,
    headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: InstanceLimits | None = None,
) -> InstanceBatch:
    """Decode an :class:`InstanceBatch`; every refusal is a :class:`BatchRowError`.

    The worker's reader: a msgpack ``X`` comes back as a read-only view of ``value`` (the
    worker copies rows into its own matrix anyway); :func:`schemas.codec.decode` gives a copy.

    Parameters
    ----------
    value, headers, max_bytes
        As in :func:`schemas.codec.decode`.
    limits : InstanceLimits, optional
        Caps on label, id and feature-name lengths and on the feature count.

    Raises
    ------
    BatchRowError
        With the code of :mod:`schemas.errors` and, when one row is at fault, its index.

    Examples
    --------
    >>> from schemas.codec import encode
    >>> value, _ = encode(InstanceBatch(stream="s", ts=0, X=np.ones((3, 2)), y=[1, 0, 1]))
    >>> decode_instance_batch(value).X.shape
    (3, 2)
    >>> value, _ = encode(InstanceBatch(stream="s", ts=0, X=np.ones((3, 2)), y=[1, 0, 1]), "json")
    >>> try:
    ...     decode_instance_batch(value.replace(b'"y":[1,0,1]', b'"y":[1,0,true]'))
    ... except BatchRowError as err:
    ...     print(err.row, err.code, err.where)
    2 invalid_field y[2]
    """
    try:
        # X views the record's bytes: the worker stacks a stream's rows into a new matrix
        d = load(value, headers, max_bytes=max_bytes, arrays=True, views=True)
        batch, strings = _plain_batch(d)
        if batch is None:
            batch = validate(d, InstanceBatch)
        if limits is not None:
            check_batch_limits(batch, limits, strings)
    except BatchRowError:
        raise
    except DecodeError as exc:
        m = _ROW_WHERE.match(exc.where)
        raise BatchRowError(exc.code, exc.reason, exc.where,
                            int(m.group(1)) if m else None) from None
    return batch


def batch_rows(batch: InstanceBatch, feature_names: Sequence[str] | None) -> np.ndarray:
    """The batch's matrix with its columns in the stream's order.

    A batch with ``features`` on a stream with names must name exactly the stream's
    features; a batch without ``features`` is taken in the stream's column order. A batch with
    ``features`` on a stream without names (its first record sent a list ``x``) is refused:
    its names mean nothing to the stream.

    Raises
    ------
    BatchRowError
        ``missing_feature`` or ``unknown_feature`` (row 0: every row has the same columns).
    """
    X = batch.X
    if batch.features is not None and feature_names is None:
        raise BatchRowError(E.UNKNOWN_FEATURE, "the batch names its features, but this stream's "
                            "features have no names (its first record sent x as a list): leave "
                            "'features' out and send the columns in the stream's order",
                            "features", 0)
    if batch.features is None or list(batch.features) == list(feature_names):
        return X
    pos = {f: j for j, f in enumerate(batch.features)}
    missing = [f for f in feature_names if f not in pos]
    if missing:
        raise BatchRowError(E.MISSING_FEATURE, f"feature {missing[0]!r} of the stream is "
                            "missing", "features", 0)
    unknown = [f for f in batch.features if f not in set(feature_names)]
    if unknown:
        raise BatchRowError(E.UNKNOWN_FEATURE, f"feature {unknown[0]!r} is not one of the "
                            f"stream's {len(feature_names)} features", "features", 0)
    return np.ascontiguousarray(X[:, [pos[f] for f in feature_names]])


class BatchRows(NamedTuple):
    """What a worker takes of a valid InstanceBatch record (:func:`read_instance_batch`)."""

    stream: str
    X: np.ndarray  # (rows, features), columns in the stream's order
    features: list[str] | None  # the columns' names (the batch's own for a new stream)
    y: list  # each row's label (None: unlabelled)
    ids: list
    ts: list[int]


#: ``feature_names`` of :func:`read_instance_batch` for a stream not seen yet
NEW_STREAM = object()


def read_instance_batch(
    value: bytes,
    headers: Iterable[tuple[str, Any]] | None,
    *,
    feature_names: Sequence[str] | None | object = NEW_STREAM,
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: InstanceLimits | None = None,
) -> BatchRows:
    """The rows of an InstanceBatch record (its headers say so: :func:`schemas.kinds.record_kind`),
    checked and in the stream's column order. The worker's one entry for the kind.

    Parameters
    ----------
    value, headers, max_bytes, limits
        As in :func:`decode_instance_batch`.
    feature_names : list of str or None, optional
        The stream's column names (``None``: its columns have none, :func:`batch_rows`);
        :data:`NEW_STREAM` (the default): the stream is new, the batch's columns become its.

    Raises
    ------
    BatchRowError
        As :func:`decode_instance_batch` and :func:`batch_rows` raise it.

    Examples
    --------
    >>> from schemas.codec import encode
    >>> value, headers = encode(InstanceBatch(stream="s", ts=5, X=[[1.0, 2.0]], y=["UP"],
    ...                                       features=["a", "b"]))
    >>> read_instance_batch(value, headers, feature_names=["b", "a"]).X.tolist()
    [[2.0, 1.0]]
    """
    batch = decode_instance_batch(value, headers, max_bytes=max_bytes, limits=limits)
    if feature_names is NEW_STREAM:
        names = list(batch.features) if batch.features is not None else None
        X = batch.X
    else:
        names, X = feature_names, batch_rows(batch, feature_names)
    return BatchRows(batch.stream, X, names, batch.row_labels(), batch.row_ids(), batch.row_ts())
