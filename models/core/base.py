"""The contract every learner of the numba core follows.

A learner is a thin Python object around a set of named, fixed-dtype numpy arrays (its
state, random-number state included) and the numba kernels that update them. The Python side

* validates input (2-D, float64, C-contiguous, finite, the learner's feature count) and
  raises :class:`ValueError` with a readable reason,
* maps labels (ints or strings) to class indices (:class:`ClassIndex`),
* grows array capacity by doubling when a kernel reports that it is full,
* turns the state into plain values and arrays (:meth:`Learner.to_state`) and back.

The surface is the same for every learner::

    learn_many(X, y)          # y: labels, targets, or None for unsupervised parts
    predict_many(X)           # labels or target vectors
    predict_proba_many(X)     # classifiers: (n, n_classes) probabilities
    importances()             # dict method -> array aligned to feature columns
    to_state() / from_state(state)
    n_seen                    # instances learned so far
    nbytes                    # bytes of the state arrays

Classifiers take labels (ints or strings) and also have ``predict_proba_many`` and
``classes``; multi-target regressors take ``y`` as an ``(n, n_targets)`` float matrix and
their ``predict_many`` returns one (``(n, 0)`` before they learned anything). A learner that
reports what happened while it learned (a forgetful tree forgetting everything, a selected
feature losing its use) has ``events()``: the :class:`LearnerEvent` list of its last
``learn_many``. ``learn_one`` and ``predict_one`` are conveniences over the batch methods.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, ClassVar, NamedTuple

import numpy as np

from ._ranges import ranges_of_kind

_NBYTES = attrgetter("nbytes")


def as_float64(values, name: str) -> np.ndarray:
    """``values`` as a float64 array (no copy when it is one), or a ``ValueError`` naming it.

    Parameters
    ----------
    values : array-like
        What a caller passed.
    name : str
        Name used in the error message.

    Returns
    -------
    ndarray
        ``np.asarray(values, dtype=np.float64)``: any shape, not necessarily contiguous.

    Raises
    ------
    ValueError
        When numpy cannot read ``values`` as numbers (numpy's ``TypeError`` too, so that a
        caller sees one kind of error for any bad input).
    """
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None


def check_X(X, n_features: int | None = None, name: str = "X") -> np.ndarray:
    """Return ``X`` as a finite, C-contiguous float64 matrix or raise ``ValueError``.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Feature rows.
    n_features : int, optional
        The learner's feature count; ``None`` accepts any width.
    name : str
        Name used in error messages.
    """
    if (type(X) is np.ndarray and X.dtype == np.float64 and X.flags.c_contiguous
            and X.flags.writeable):
        arr = X  # already what the kernels take (the hot path: no conversion, no copy)
    else:
        arr = as_float64(X, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows, features), got shape {arr.shape}")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(
            f"{name} has {arr.shape[1]} features but the learner was built for {n_features}"
        )
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains NaN or infinity at row {int(bad[0])}, column {int(bad[1])}"
        )
    return _kernel_array(arr)


def _kernel_array(arr: np.ndarray) -> np.ndarray:
    """``arr`` as the kernels are compiled for: C-contiguous and writable. A read-only array
    (a memory map, ``np.frombuffer`` over a message, scikit-learn's read-only checks) is
    copied: numba compiles every kernel anew, for tens of seconds, for a read-only type."""
    if arr.flags.c_contiguous and arr.flags.writeable:
        return arr
    return np.array(arr, order="C")


def check_targets(X: np.ndarray, Y, n_targets: int | None = None) -> np.ndarray:
    """Return the targets of the rows ``X`` as a finite ``(n, n_targets)`` float matrix, or
    raise ``ValueError`` naming what is wrong.

    One row of targets (``learn_one``) or one target per row may come as a vector.

    Examples
    --------
    >>> check_targets(np.zeros((2, 3)), [[1, 2], [3, 4]]).shape
    (2, 2)
    >>> check_targets(np.zeros((2, 3)), [1.0, 2.0], n_targets=2)
    Traceback (most recent call last):
    ...
    ValueError: expected 2 targets per row, got 1
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y.reshape(1, -1) if X.shape[0] == 1 else Y.reshape(-1, 1)
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(f"y must be an (n, n_targets) matrix of {X.shape[0]} target rows, "
                         f"got shape {Y.shape}")
    if n_targets is not None and Y.shape[1] != n_targets:
        raise ValueError(f"expected {n_targets} targets per row, got {Y.shape[1]}")
    if Y.shape[1] < 1:
        raise ValueError("y needs at least one target")
    if not np.isfinite(Y).all():
        raise ValueError("y contains NaN or infinity")
    return _kernel_array(Y)


def _plain_label(label):
    """Labels are ints or strings (msgpack-friendly); numpy scalars become Python values."""
    if isinstance(label, (bool, np.bool_)):
        return int(label)
    if isinstance(label, (int, np.integer)):
        return int(label)
    if isinstance(label, (float, np.floating)):
        f = float(label)
        if not np.isfinite(f) or f != int(f):
            raise ValueError(f"class label {label!r} is not an integer or a string")
        return int(f)
    if isinstance(label, (str, np.str_)):
        return str(label)
    raise ValueError(f"class label {label!r} must be an int or a string")


#: the label types :meth:`ClassIndex.encode` looks up as they are
_PLAIN, _PLAIN_OR_MISSING = frozenset((int, str)), frozenset((int, str, type(None)))


class ClassIndex:
    """Maps class labels to indices ``0, 1, ...`` in order of first appearance.

    Examples
    --------
    >>> idx = ClassIndex()
    >>> idx.encode(["UP", "DOWN", "UP"]).tolist()
    [0, 1, 0]
    >>> idx.decode([1, 0])
    ['DOWN', 'UP']
    """

    def __init__(self, classes=()):
        self.classes: list = [_plain_label(c) for c in classes]
        self._index = {c: i for i, c in enumerate(self.classes)}

    def __len__(self) -> int:
        return len(self.classes)

    def encode(self, y, n_rows: int | None = None, grow: bool = True,
               missing: bool = False) -> np.ndarray:
        """Class indices of ``y``; unseen labels are appended when ``grow`` is true. With
        ``missing``, a ``None`` label (an unlabelled row) is encoded as -1.

        Examples
        --------
        >>> ClassIndex(["a"]).encode(["a", None, "b"], missing=True).tolist()
        [0, -1, 1]
        """
        labels = list(np.asarray(y, dtype=object).ravel()) if not isinstance(y, list) else y
        if n_rows is not None and len(labels) != n_rows:
            raise ValueError(f"y has {len(labels)} labels but X has {n_rows} rows")
        fast = self._known(labels, missing)
        if fast is not None:
            return fast
        out = np.empty(len(labels), dtype=np.int64)
        for i, raw in enumerate(labels):
            if type(raw) is int or type(raw) is str:  # already plain: a known one is looked up
                k = self._index.get(raw)
                if k is not None:
                    out[i] = k
                    continue
            if raw is None and missing:
                out[i] = -1
                continue
            label = _plain_label(raw)
            k = self._index.get(label)
            if k is None:
                if not grow:
                    raise ValueError(f"unknown class label {label!r}")
                k = len(self.classes)
                self.classes.append(label)
                self._index[label] = k
            out[i] = k
        return out

    def _known(self, labels: list, missing: bool) -> np.ndarray | None:
        """The indices of ``labels`` when every one is a plain ``int`` or ``str`` already
        known (or ``None`` with ``missing``), in C-level passes: a stream's labels are almost
        always ones it has seen. ``None`` otherwise (the row-by-row loop decides)."""
        types = set(map(type, labels))
        if not types <= (_PLAIN_OR_MISSING if missing else _PLAIN):
            return None
        index = {**self._index, None: -1} if missing else self._index  # a few classes
        ks = list(map(index.get, labels))
        return None if None in ks else np.array(ks, dtype=np.int64)

    def decode(self, indices) -> list:
        """Labels of class indices."""
        if isinstance(indices, np.ndarray):
            indices = indices.tolist()  # Python ints: list indexing needs no conversion
        else:
            indices = [int(k) for k in indices]
        return list(map(self.classes.__getitem__, indices))


class LearnerEvent(NamedTuple):
    """Something a learner reports about its last ``learn_many`` (see ``events()``).

    ``kind`` names what happened (declared in the learner's registry entry), ``level`` is
    ``"warning"`` or ``"drift"``, ``row`` the index of the batch row at which it happened
    (``-1``: the batch as a whole), ``feature`` the column concerned (``-1``: none) and
    ``detail`` a sentence for people.
    """

    kind: str
    level: str
    row: int = -1
    feature: int = -1
    detail: str = ""


class StateField:
    """Read-only attribute that shows one state array of a detector bank or of a single detector.

    ``StateField("drift", "doc")`` on a bank returns a copy of ``self._arrays["drift"]`` (as
    ``dtype`` when given); ``StateField("drift", "doc", cast=bool)`` on a single detector returns
    ``cast`` of its one element. Callers never get a view they could write the state through.
    """

    def __init__(self, key: str, doc: str, *, cast=None, dtype=None):
        self.key = key
        self.cast = cast
        self.dtype = dtype
        self.__doc__ = doc

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        arr = obj._arrays[self.key]
        if self.cast is not None:
            return self.cast(arr[0])
        return arr.astype(self.dtype) if self.dtype is not None else arr.copy()

    def __set__(self, obj, value) -> None:
        raise AttributeError(f"{self.name} is read-only (it shows the learner's state)")


_KINDS: dict[str, type] = {}
_MAX_CAPACITY = 1 << 26  # a restored capacity axis is never longer, whatever else it claims


def learner_class(kind: str) -> type:
    """The learner class whose states have ``kind`` (for learners nested in another's state).

    Examples
    --------
    >>> from models import OnlineRandomForest
    >>> learner_class("online_random_forest") is OnlineRandomForest
    True
    """
    try:
        return _KINDS[kind]
    except KeyError:
        raise ValueError(f"no learner has state kind {kind!r}") from None


class Learner:
    """Base class: state bookkeeping and the state round trip.

    Subclasses set :attr:`kind`, keep hyperparameters in ``self.params`` (constructor keyword
    arguments, plain values only) and their state in ``self._arrays`` (name -> ndarray).
    Extra plain values (class labels, ...) go through :meth:`_extra_state` /
    :meth:`_load_extra_state`.
    """

    kind: ClassVar[str] = "learner"
    #: the state arrays a learner of this kind holds once it has learned: name ->
    #: (dtype string, number of dimensions). A restored state must match it exactly.
    state_arrays: ClassVar[dict[str, tuple[str, int]]] = {}
    #: arrays whose capacity grows (by doubling, say) along one axis: name -> (axis, fill), or
    #: (axis, fill, group) for arrays of several capacities (each group its own length). Cells
    #: past :meth:`_used_capacity` along it hold ``fill``, so :meth:`to_state` leaves them out
    #: and :meth:`from_state` puts them back: a state costs what the learner uses, not what it
    #: reserved.
    capacity_axes: ClassVar[dict[str, tuple]] = {}
    #: rows between two changes of what the learner answers, for a learner that changes
    #: only at the end of a block (a block-forest ranker trains a forest every ``stride``
    #: rows); ``None``: any row may change it. Whoever feeds the learner in mini-batches
    #: feeds it this often, so its answers are never older than its last block.
    learn_every: int | None = None

    params: dict[str, Any]
    _arrays: dict[str, np.ndarray]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:  # a concrete learner: findable by the kind of its state
            _KINDS[cls.kind] = cls

    @property
    def n_seen(self) -> int:
        """Number of instances learned so far."""
        return int(self._arrays["n_seen"][0]) if "n_seen" in self._arrays else 0

    @property
    def nbytes(self) -> int:
        """Bytes the learner holds in memory: its state arrays (:meth:`memory_bytes`)."""
        return self.memory_bytes()

    def memory_bytes(self) -> int:
        """Bytes of the learner's state arrays (of a forest: divide by its trees for a
        per-tree figure)."""
        # asked for every stream of every poll (a worker's state budget): one C-level pass
        return sum(map(_NBYTES, self._arrays.values()))

    def __setstate__(self, state: dict) -> None:
        """Unpickled (``copy``, ``pickle``, ``joblib.load(..., mmap_mode="r")``): the state
        arrays and the settings arrays as the kernels are compiled for, never read-only
        (:func:`_kernel_array`)."""
        self.__dict__.update({k: _kernel_array(v) if isinstance(v, np.ndarray) else v
                              for k, v in state.items()})
        if "_arrays" in state:
            self._arrays = {k: _kernel_array(v) for k, v in state["_arrays"].items()}

    def learn_one(self, x, y=None) -> None:
        """Learn one instance (wraps :meth:`learn_many`)."""
        X = np.asarray(x, dtype=np.float64).reshape(1, -1)
        self.learn_many(X, None if y is None else [y])

    def predict_one(self, x):
        """Predict one instance (wraps :meth:`predict_many`)."""
        X = np.asarray(x, dtype=np.float64).reshape(1, -1)
        return self.predict_many(X)[0]

    def to_state(self) -> dict:
        """Plain-value snapshot: ``{"kind", "params", "extra", "arrays"}`` (arrays copied).

        Arrays of :attr:`capacity_axes` are cut to the part in use; ``"capacity"`` then
        records the length they had (``{group: length}`` for grouped axes), which
        :meth:`from_state` restores.
        """
        arrays = {k: np.array(v, copy=True) for k, v in self._arrays.items()}
        state = {"kind": self.kind, "params": dict(self.params), "extra": self._extra_state(),
                 "arrays": arrays}
        if self.capacity_axes and self._arrays:
            used = self._used_capacity()
            used = used if isinstance(used, dict) else {"": used}
            capacities = {}
            for group, axes in _capacity_groups(self.capacity_axes).items():
                capacity = _axis_length(self._arrays, axes)
                if used[group] < capacity:
                    for name, (axis, _) in axes.items():
                        cut = [slice(None)] * arrays[name].ndim
                        cut[axis] = slice(0, used[group])
                        arrays[name] = np.ascontiguousarray(arrays[name][tuple(cut)])
                    capacities[group] = capacity
            if capacities:
                state["capacity"] = capacities.get("") if list(capacities) == [""] else capacities
        return state

    @classmethod
    def from_state(cls, state: dict):
        """Rebuild a learner from :meth:`to_state` output (also after msgpack).

        A state is read from a checkpoint, untrusted: the parameters that size work or memory
        must lie in the registry's ranges (:func:`check_param_ranges`) and a capacity must not
        exceed what the learner could have grown to (:meth:`_capacity_bound`), both checked
        before anything is built or allocated for them; then the arrays' layout and the
        learner's invariants (:meth:`_check_state`).
        """
        cls._state_extra(state)
        check_param_ranges(cls.kind, state["params"])
        obj = cls(**state["params"])
        obj._arrays = {
            k: np.ascontiguousarray(np.array(v, copy=True)) for k, v in state["arrays"].items()
        }
        # a checkpoint is read from a topic: kernels index these arrays without bounds
        # checks, so nothing reaches them before their layout and ranges are verified
        if obj._arrays:
            check_layout(obj._arrays, cls.state_arrays, cls.kind)
            if "capacity" in state:
                _restore_capacities(obj._arrays, cls.capacity_axes, state["capacity"], cls.kind,
                                    obj._capacity_bound())
        obj._load_extra_state(state.get("extra") or {})
        if obj._arrays:
            obj._check_state()
        return obj

    @classmethod
    def _state_extra(cls, state: dict) -> dict:
        """The ``extra`` of a state written by this learner's kind.

        Parameters
        ----------
        state : dict
            A state from :meth:`to_state` (read from a checkpoint: untrusted).

        Returns
        -------
        dict
            ``state["extra"]``, or an empty dict where the state has none.

        Raises
        ------
        ValueError
            When the state is for another kind of learner.
        """
        if state.get("kind") != cls.kind:
            raise ValueError(f"state is for {state.get('kind')!r}, not {cls.kind!r}")
        return state.get("extra") or {}

    def _used_capacity(self) -> int | dict[str, int]:
        """Length of the :attr:`capacity_axes` in use (learners that declare some; per group
        for grouped axes)."""
        raise NotImplementedError(f"{self.kind} declares capacity_axes without _used_capacity")

    def _capacity_bound(self) -> int | dict[str, int]:
        """The longest the :attr:`capacity_axes` of a restored state may be (per group for
        grouped axes): what the learner's kernels could have grown them to for the rows and
        parameters of the state (its arrays' layout is checked when this is asked). Learners
        that declare capacity axes bound it by the rows they learned; ``_MAX_CAPACITY`` caps
        every one."""
        return _MAX_CAPACITY

    def _check_state(self) -> None:
        """Raise ``ValueError`` when restored arrays break the learner's invariants.

        Called by :meth:`from_state` after the layout check (names, dtypes, dimensions);
        subclasses check shapes against each other and index ranges.
        """
        return None

    def _extra_state(self) -> dict:
        return {}

    def _load_extra_state(self, extra: dict) -> None:
        return None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"


class Classifier(Learner):
    """A learner of class labels: :attr:`classes` reads the subclass's ``self._classes``
    (a :class:`ClassIndex`), in index order."""

    _classes: ClassIndex

    @property
    def classes(self) -> list:
        """Class labels in index order (the columns of :meth:`predict_proba_many`)."""
        return list(self._classes.classes)


class ProbabilityClassifier(Classifier):
    """A classifier whose labels are the most probable classes of its
    ``predict_proba_many`` (the subclass provides that method)."""

    def predict_many(self, X) -> list:
        """Most probable label of each row (lowest class index on ties), from
        :meth:`predict_proba_many`; ``None`` before anything was learned."""
        proba = self.predict_proba_many(X)
        if proba.shape[1] == 0:
            return [None] * proba.shape[0]
        return self._classes.decode(np.argmax(proba, axis=1))

    def predict_learn_many(self, X, y) -> list:
        """Test-then-train labels from the subclass's ``predict_proba_learn_many``: the most
        probable class of each row before it was learned, ``None`` where the model had no
        evidence yet (all probabilities zero)."""
        proba = self.predict_proba_learn_many(X, y)
        if proba.shape[1] == 0:
            return [None] * proba.shape[0]
        labels = self._classes.decode(np.argmax(proba, axis=1))
        # one reduction for all rows, not one per row (a call of about ten rows spent more on
        # these than on learning); only the sign is read, and a sum of probabilities is 0 in
        # any order exactly when each is
        empty = (proba.sum(axis=1) <= 0.0).tolist()
        return [None if e else lab for lab, e in zip(labels, empty)]


def _axis_length(arrays: dict, axes: dict) -> int:
    """The common length of the capacity axes (``ValueError`` if they disagree)."""
    lengths = {arrays[name].shape[axis] for name, (axis, _) in axes.items()}
    if len(lengths) != 1:
        raise ValueError(f"capacity axes have different lengths {sorted(lengths)}")
    return lengths.pop()


def _capacity_groups(axes: dict) -> dict[str, dict[str, tuple[int, Any]]]:
    """:attr:`Learner.capacity_axes` by group (``""`` for axes without one).

    Examples
    --------
    >>> _capacity_groups({"a": (0, 0), "b": (1, -1, "nodes")})
    {'': {'a': (0, 0)}, 'nodes': {'b': (1, -1)}}
    """
    groups: dict[str, dict[str, tuple[int, Any]]] = {}
    for name, spec in axes.items():
        groups.setdefault(spec[2] if len(spec) > 2 else "", {})[name] = tuple(spec[:2])
    return groups


def _restore_capacities(arrays: dict, axes: dict, capacity, kind: str,
                        bound: int | dict = _MAX_CAPACITY) -> None:
    """:func:`_restore_capacity` for each group a state's ``"capacity"`` names, each within
    its group's ``bound`` (one number: the same for every group).

    Examples
    --------
    >>> a = {"n": np.array([1]), "q": np.array([2.0])}
    >>> axes = {"n": (0, -1, "nodes"), "q": (0, 0.0, "leaves")}
    >>> _restore_capacities(a, axes, {"nodes": 4}, "demo", {"nodes": 8, "leaves": 8})
    >>> a["n"].tolist(), a["q"].tolist()
    ([1, -1, -1, -1], [2.0])
    >>> _restore_capacities(a, axes, {"leaves": 16}, "demo", {"nodes": 8, "leaves": 8})
    Traceback (most recent call last):
    ...
    ValueError: demo state capacity 16 is not an integer in [1, 8]
    """
    groups = _capacity_groups(axes)
    if not isinstance(capacity, dict) and "" not in groups:
        raise ValueError(f"{kind} state capacity {capacity!r} is not a map of the lengths of "
                         f"{sorted(groups)}")
    caps = capacity if isinstance(capacity, dict) else {"": capacity}
    unknown = sorted(str(g) for g in caps if g not in groups)
    if unknown:
        raise ValueError(f"{kind} state capacity names unknown axes {unknown}")
    for group, value in caps.items():
        most = bound.get(group, _MAX_CAPACITY) if isinstance(bound, dict) else bound
        _restore_capacity(arrays, groups[group], value, kind, most)


def _restore_capacity(arrays: dict, axes: dict, capacity, kind: str,
                      bound: int = _MAX_CAPACITY) -> None:
    """Pad the arrays :meth:`Learner.to_state` cut back to ``capacity`` with their fill.

    ``capacity`` must lie between the length in use and ``bound`` (at most
    ``_MAX_CAPACITY``): a ``ValueError`` is raised before anything is allocated otherwise.

    Examples
    --------
    >>> a = {"left": np.array([[1, 2]])}
    >>> _restore_capacity(a, {"left": (1, -1)}, 4, "demo")
    >>> a["left"].tolist()
    [[1, 2, -1, -1]]
    >>> _restore_capacity(a, {"left": (1, -1)}, 1 << 19, "demo", bound=64)
    Traceback (most recent call last):
    ...
    ValueError: demo state capacity 524288 is not an integer in [4, 64]
    """
    used = _axis_length(arrays, axes)
    most = min(int(bound), _MAX_CAPACITY)
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) \
            or not used <= capacity <= most:
        raise ValueError(f"{kind} state capacity {capacity!r} is not an integer in "
                         f"[{used}, {most}]")
    for name, (axis, fill) in axes.items():
        arr = arrays[name]
        shape = list(arr.shape)
        shape[axis] = int(capacity)
        out = np.full(shape, fill, dtype=arr.dtype)
        keep = [slice(None)] * arr.ndim
        keep[axis] = slice(0, used)
        out[tuple(keep)] = arr
        arrays[name] = out


def upgrade_state(cls, state: dict, current: int) -> dict:
    """A state of version 1 or ``current`` as a state of version ``current``.

    The learners whose state changed once keep their version in ``extra["state_version"]``
    (a state without one was written before there was a version: version 1).

    Parameters
    ----------
    cls : type
        The learner class; it has ``kind`` and the classmethod ``_upgrade_v1(state)`` that
        turns a state of version 1 into one of version ``current``.
    state : dict
        A state from ``to_state`` (read from a checkpoint: untrusted).
    current : int
        The version this learner writes.

    Returns
    -------
    dict
        ``state`` itself at version ``current``, else what ``cls._upgrade_v1`` makes of it.

    Raises
    ------
    ValueError
        When the state's version is neither 1 nor ``current`` (a later version is refused
        rather than misread).
    """
    version = (state.get("extra") or {}).get("state_version", 1)
    if version not in (1, current):
        raise ValueError(f"{cls.kind} state version {version!r} is not supported "
                         f"(this version reads 1 and {current})")
    if version == 1:
        state = cls._upgrade_v1(state)
    return state


def check_param_ranges(kind: str, params) -> None:
    """``ValueError`` unless every parameter bounded for learners of ``kind`` lies in its range
    (:mod:`models.core._ranges`, the registry's :attr:`models.registry.LearnerSpec.ranges`; other
    kinds have none).

    The parameters that size a learner's work or memory (trees, split candidates, depth) come
    from a checkpoint on restore: a value out of range would make a few rows take minutes, so
    it is refused before the learner is built. ``None`` stands for "no limit" where a learner
    takes it.

    Examples
    --------
    >>> check_param_ranges("adaptive_random_forest", {"n_splits": 10, "max_depth": None})
    >>> check_param_ranges("adaptive_random_forest", {"n_splits": 10**6})
    Traceback (most recent call last):
    ...
    ValueError: adaptive_random_forest parameter n_splits=1000000 is outside [1, 1000]
    """
    if not isinstance(params, dict):
        raise ValueError(f"{kind} parameters must be a map, got {type(params).__name__}")
    for name, (lo, hi) in ranges_of_kind(kind).items():
        value = params.get(name)
        if value is None:
            continue
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise ValueError(f"{kind} parameter {name}={value!r} must be a number")
        if not lo <= value <= hi:
            raise ValueError(f"{kind} parameter {name}={value!r} is outside [{lo}, {hi}]")


def check_layout(arrays: dict, layout: dict, kind: str) -> None:
    """``ValueError`` unless ``arrays`` has exactly the names, dtypes and dimensions of ``layout``.

    Examples
    --------
    >>> check_layout({"n": np.zeros(1, np.int64)}, {"n": ("<i8", 1)}, "demo")
    >>> check_layout({"n": np.zeros(1)}, {"n": ("<i8", 1)}, "demo")
    Traceback (most recent call last):
    ...
    ValueError: demo state array 'n' is float64 with 1 dimension(s); expected <i8 with 1
    """
    if set(arrays) != set(layout):
        missing = sorted(set(layout) - set(arrays))
        extra = sorted(set(arrays) - set(layout))
        raise ValueError(f"{kind} state arrays differ from the learner's: missing {missing}, unexpected {extra}")
    for name, (dtype, ndim) in layout.items():
        arr = arrays[name]
        if arr.dtype != np.dtype(dtype) or arr.ndim != ndim:
            raise ValueError(f"{kind} state array {name!r} is {arr.dtype} with {arr.ndim} dimension(s); "
                             f"expected {dtype} with {ndim}")


def check_index(arr: np.ndarray, lo: int, hi: int, name: str) -> None:
    """``ValueError`` unless every value of the integer array ``arr`` lies in ``[lo, hi)``.

    Examples
    --------
    >>> check_index(np.array([0, 3, -1]), -1, 4, "left")
    >>> check_index(np.array([0, 4]), -1, 4, "left")
    Traceback (most recent call last):
    ...
    ValueError: state array 'left' holds 4, outside [-1, 4)
    """
    if arr.size == 0:
        return
    a, b = int(arr.min()), int(arr.max())
    if a < lo or b >= hi:
        bad = a if a < lo else b
        raise ValueError(f"state array {name!r} holds {bad}, outside [{lo}, {hi})")


def check_shapes(arrays: dict, shapes: dict) -> None:
    """``ValueError`` unless each ``arrays[name].shape`` equals ``shapes[name]``.

    Examples
    --------
    >>> check_shapes({"a": np.zeros((2, 3))}, {"a": (2, 3)})
    >>> check_shapes({"a": np.zeros((2, 3))}, {"a": (2, 4)})
    Traceback (most recent call last):
    ...
    ValueError: state array 'a' has shape (2, 3), expected (2, 4)
    """
    for name, shape in shapes.items():
        if arrays[name].shape != tuple(shape):
            raise ValueError(f"state array {name!r} has shape {arrays[name].shape}, expected {tuple(shape)}")

