"""Versioned contracts of the messages on streamforest's topics.

===================  ======================  =====================================================
contract             topic (default)         written by
===================  ======================  =====================================================
:class:`Instance`    ``sf.instances``        producers: one feature row of a stream, maybe labelled
:class:`LabelEvent`  ``sf.instances``        producers: the label of an instance sent earlier
:class:`FeatureArrival` ``sf.features``      producers: a new feature's values for known instances
:class:`Prediction`  ``sf.predictions``      the worker: one per instance, in input order
:class:`DriftAlert`  ``sf.drift``            the worker: a detector fired (warning or drift)
:class:`Ranking`     ``sf.rankings``         the worker: feature importances, best first
===================  ======================  =====================================================

Every contract carries ``v``, the schema version (1). A reader refuses versions it does not
know instead of guessing. Validation is strict: numbers are not parsed from strings, booleans
are not integers, unknown fields are refused (a typo such as ``weigth`` must not be dropped
silently), and every float must be finite. Integers are bounded to 64 bits, the range both
msgpack and the JVM clients carry. Every number a producer sends (features, targets, weights)
lies within +-1e100 (:data:`MAX_MAGNITUDE`): learners square and sum them, and a square of
1e155 overflows to infinity (a common "missing" sentinel, 1.797e308, is refused with a reason,
not turned into NaN predictions). Every string is text UTF-8 can encode: a JSON escape such as
``"\ud800"`` (a lone surrogate) is refused, since no output or checkpoint could carry it. The
message key on Kafka is the stream id.

A person can type an instance into a console producer as JSON::

    {"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,0.2],"y":"UP"}
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError

from .kinds import LABEL
from .values import MAX_MAGNITUDE, is_text

#: header of an Instance declaring its stream's true feature importances from that instance on:
#: a JSON map from feature name to weight (``streamforest evaluate`` compares rankings with it;
#: the worker ignores it)
TRUTH_HEADER = "sf-truth"

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_NAME_LENGTH = 1024  # stream, feature, model and topic names
SCHEMA_VERSIONS = frozenset({1})  # versions this code reads and writes


def _text(s: str) -> str:
    if not is_text(s):
        raise PydanticCustomError(
            "invalid_text", "must be text UTF-8 can encode (it holds a lone surrogate such as the "
            "JSON escape \\ud800)")
    return s


def _bounded(v: float) -> float:
    if not -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE:
        raise PydanticCustomError(
            "out_of_range", "must lie within +-1e100 (its square would overflow), got {v}: a "
            "missing-value sentinel? leave the feature out of a map x instead", {"v": v})
    return v

# --------------------------------------------------------------------------- field types

Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
Timestamp = Annotated[int, Field(ge=0, le=INT64_MAX, description="milliseconds since the epoch")]
Finite = Annotated[float, Field(allow_inf_nan=False)]
#: the bounds of a number a producer sends, for its JSON Schema (the validator checks them)
_BOUNDS = {"minimum": -MAX_MAGNITUDE, "maximum": MAX_MAGNITUDE}
#: a number a producer sends: finite and within +-MAX_MAGNITUDE
Bounded = Annotated[float, Field(allow_inf_nan=False, json_schema_extra=_BOUNDS),
                    AfterValidator(_bounded)]
Text = Annotated[str, AfterValidator(_text)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH), AfterValidator(_text)]


def _kind(value: Any) -> str | None:
    """Tag of a value for the tagged unions below (exact types: ``bool`` is not an int)."""
    t = type(value)
    if t is int:
        return "int"
    if t is str:
        return "str"
    if t is list:
        return "list"
    if t is dict:
        return "dict"
    return None


def _target_kind(value: Any) -> str | None:
    """Tag of a label: a float is a single regression target (an int stays a class label)."""
    return "float" if type(value) is float else _kind(value)


def _one_of(message: str, kind=_kind, **branches: Any) -> Any:
    """A union chosen by the value's type (``kind`` tells it), so that a bad value yields one
    clear error.

    A plain ``int | str`` union reports one error per branch; tagging by type keeps only the
    branch the value was meant for (``x[3]`` is not a float, rather than also "x is not a
    dict"). Values of no listed type get ``message``.
    """
    members = tuple(Annotated[tp, Tag(tag)] for tag, tp in branches.items())
    return Annotated[
        Union[members],  # noqa: UP007 (a runtime tuple of members needs Union[...])
        Discriminator(kind, custom_error_type="wrong_type", custom_error_message=message),
    ]


Label = _one_of("must be an integer or a string", int=Int64, str=Text)
"""A class label or an instance id: an int or a string."""

#: what a label that is none of the accepted kinds is told
TARGET_KINDS = ("must be a class label (integer or string), a number (one regression target) "
                "or a list of numbers (regression targets)")

Target = _one_of(
    TARGET_KINDS,
    kind=_target_kind,
    int=Int64,
    str=Text,
    float=Finite,
    list=Annotated[list[Finite], Field(min_length=1)],
)
"""A class label, or the targets of a regression: a list of floats, or one float (a
single-target stream's label as it came; the worker predicts lists)."""

InputTarget = _one_of(
    TARGET_KINDS,
    kind=_target_kind,
    int=Int64,
    str=Text,
    float=Bounded,
    list=Annotated[list[Bounded], Field(min_length=1)],
)
"""A class label, or the targets of a regression within +-MAX_MAGNITUDE: a list of floats,
or one float (the one target of a single-target stream: ``3.7`` is ``[3.7]``)."""

Row = _one_of(
    "must be a list of numbers or a map from feature name to number",
    list=list[Bounded],
    dict=dict[Text, Bounded],
)
"""Feature values, positional (a list) or by name (a map). Empty only for a stream of
features whose columns all arrive later (the worker refuses it for other streams)."""

ColumnValues = _one_of(
    "must be a map from instance id to number or a list of numbers aligned with 'ids'",
    list=list[Bounded],
    dict=dict[Text, Bounded],
)

# Position, inside an error location, of the tag the unions above insert (loc[0] is the field).
# Error paths drop it so that they read ``x[3]`` and not ``x.list[3]``.
UNION_TAG_POSITION = {
    "id": 1,
    "x": 1,
    "y": 1,
    "values": 1,
    "y_pred": 1,
    "y_true": 1,
    "ids": 2,
    "classes": 2,
}


def cross_field_error(
    where: str, message: str, code: str = "invalid_field", **ctx: Any
) -> PydanticCustomError:
    """An error on a field, raised from a model validator (which has no location itself).

    ``where`` and ``code`` travel in the error context for :mod:`schemas.codec`.
    """
    return PydanticCustomError("cross_field", message, {"where": where, "code": code, **ctx})


# --------------------------------------------------------------------------- base


class Contract(BaseModel):
    """Common configuration of every message: strict, closed, versioned."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

    versions: ClassVar[frozenset[int]] = SCHEMA_VERSIONS

    v: int = 1

    @field_validator("v")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v not in cls.versions:
            raise PydanticCustomError(
                "unknown_version",
                "schema version {v} is not supported (this worker reads {known})",
                {"v": v, "known": ", ".join(str(k) for k in sorted(cls.versions))},
            )
        return v


# --------------------------------------------------------------------------- inputs


class Instance(Contract):
    """One feature row of a stream, labelled or not.

    Parameters
    ----------
    v : int
        Schema version (1).
    stream : str
        Stream id; also the Kafka message key. Each stream gets its own learners.
    id : int or str
        Instance id, echoed in the prediction (and used to attach late feature values).
    ts : int
        Event time in milliseconds since the epoch.
    x : list of float or dict of str to float
        Feature values: a list in the stream's feature order, or a map from feature name to
        value. A stream's first instance fixes its width (and, for maps, its names). A stream
        of features (``FeatureArrival``) may start empty and grows with each arrival; its
        instances may then leave features out (missing values).
    y : int, str, list of float or None
        Class label, list of targets for multi-target regression, or None (predict only).
    weight : float or None
        Optional non-negative instance weight.

    Examples
    --------
    >>> Instance(stream="s1", id=1, ts=0, x=[0.1, 0.2], y="UP")
    Instance(v=1, stream='s1', id=1, ts=0, x=[0.1, 0.2], y='UP', weight=None)
    """

    stream: Name
    id: Label
    ts: Timestamp
    x: Row
    y: InputTarget | None = None
    # its JSON Schema said whole: pydantic writes a bound that follows a validator as "ge"
    weight: Annotated[Bounded, Field(ge=0.0), WithJsonSchema(
        {"type": "number", "minimum": 0.0, "maximum": MAX_MAGNITUDE})] | None = None


class LabelEvent(Contract):
    """The label of an instance sent earlier, unlabelled: its prediction was served when it
    arrived, and the stream learns it when its label does.

    It travels on the instances topic with the header ``sf-kind: label``
    (:mod:`schemas.kinds`) and the stream id as key: the same partition as its instance and
    after it, so a label never overtakes the instance it names and one consumer position
    covers both (exactly once needs no join across topics).

    Parameters
    ----------
    stream : str
        Stream id (Kafka key).
    id : int or str
        The id of the instance it labels (``7`` and ``"7"`` are different ids, as in
        :class:`Instance`).
    y : int, str or list of float
        Class label, or the targets of multi-target regression.
    ts : int
        Event time of the label in milliseconds.

    Examples
    --------
    >>> LabelEvent(stream="s1", id=7, y="UP", ts=90)
    LabelEvent(v=1, stream='s1', id=7, y='UP', ts=90)
    """

    record_kind: ClassVar[str] = LABEL

    stream: Name
    id: Label
    y: InputTarget
    ts: Timestamp


class FeatureArrival(Contract):
    """Values of one feature that arrives after the instances it describes.

    Parameters
    ----------
    stream : str
        Stream id (Kafka key).
    feature : str
        Name of the arriving feature.
    values : dict of str to float, or list of float
        Either a map from instance id (in its string form: id ``7`` is ``"7"``) to value, or
        a list aligned with ``ids``.
    ids : list of int or str, or None
        The instance ids of a list ``values``, in order; required with a list, refused with
        a map (the map already names its ids). Ids must be distinct as text: an instance is
        joined by the string form of its id, so ``1`` and ``"1"`` name the same instance.
    ts : int
        Event time in milliseconds.

    Examples
    --------
    >>> FeatureArrival(stream="s1", feature="f9", values=[0.5, 0.7], ids=[1, 2], ts=5).ids
    [1, 2]
    """

    stream: Name
    feature: Name
    values: ColumnValues
    ids: list[Label] | None = None
    ts: Timestamp

    @model_validator(mode="after")
    def _aligned(self) -> FeatureArrival:
        if type(self.values) is list:
            if self.ids is None:
                raise cross_field_error(
                    "ids",
                    "required when 'values' is a list (the ids of the values)",
                    "missing_field",
                )
            if len(self.ids) != len(self.values):
                raise cross_field_error(
                    "ids",
                    "has {n_ids} ids but 'values' has {n_values} values",
                    n_ids=len(self.ids),
                    n_values=len(self.values),
                )
        elif self.ids is not None:
            raise cross_field_error("ids", "must be omitted when 'values' is a map (its keys are the ids)")
        # ids are joined by their string form (a map's keys are strings): 1 and "1" collide
        if self.ids is not None and len(set(map(str, self.ids))) != len(self.ids):
            raise cross_field_error("ids", "contains duplicate ids (compared as text: 1 and \"1\" "
                                    "name the same instance)")
        return self


# --------------------------------------------------------------------------- outputs


class Prediction(Contract):
    """The worker's prediction for one instance (made before the instance is learned).

    Parameters
    ----------
    stream, id : str, int or str
        Stream and instance id of the input.
    model : str
        Name of the predictor (e.g. ``adaptive_random_forest``).
    y_pred : int, str, list of float or None
        Predicted label (or targets); None before the learner has seen a label.
    classes : list of int or str, or None
        Known class labels, in the order of ``proba``.
    proba : list of float or None
        Class probabilities aligned with ``classes``; empty (or None) for regression.
    y_true : int, str, list of float or None
        The instance's label when it had one (prequential evaluation downstream).
    topic, partition, offset : str, int, int
        Where the input instance was read (traceability, exactly-once checks).
    ts : int
        The input's event time in milliseconds.
    n_features : int or None
        Streams of features: how many feature columns the scoring model knew (it grows with
        each ``FeatureArrival``); None for other streams.
    """

    stream: Name
    id: Label
    model: Name
    y_pred: Target | None
    classes: list[Label] | None = None
    proba: list[Finite] | None = None
    y_true: Target | None = None
    topic: Name
    partition: Annotated[int, Field(ge=0, le=2**31 - 1)]
    offset: Count
    ts: Timestamp
    n_features: Count | None = None

    @model_validator(mode="after")
    def _aligned(self) -> Prediction:
        if self.proba is not None:
            if self.classes is None:
                if not self.proba:  # a regression prediction: an empty list, no classes
                    return self
                raise cross_field_error("classes", "required when 'proba' is given", "missing_field")
            if len(self.proba) != len(self.classes):
                raise cross_field_error(
                    "proba",
                    "has {n_proba} values but 'classes' has {n_classes}",
                    n_proba=len(self.proba),
                    n_classes=len(self.classes),
                )
        return self


class DriftAlert(Contract):
    """A drift detector fired on a stream.

    Parameters
    ----------
    stream : str
        Stream id.
    source : str
        What was monitored, e.g. ``adwin`` (the prequential loss) or
        ``adaptive_random_forest`` (its trees' drift detectors).
    level : {"warning", "drift"}
        Warning zone or confirmed drift.
    position : int
        Number of the stream's instances seen when the detector fired.
    feature : str or None
        The feature concerned, for per-feature detectors.
    detail : str
        Free text (detector statistics).
    ts : int
        Event time (ms) of the instance that triggered the alert.
    """

    stream: Name
    source: Name
    level: Literal["warning", "drift"]
    position: Count
    feature: Name | None = None
    detail: str = ""
    ts: Timestamp


class Ranking(Contract):
    """Feature importances of one stream by one method, best first.

    Parameters
    ----------
    stream : str
        Stream id.
    method : str
        ``orf_mda``, ``orf_mdg``, ``symrf``, ``abfs`` or ``feature_stream``.
    features : list of str
        Feature names in rank order (distinct).
    scores : list of float
        Importance of each feature, same length and order as ``features``.
    n_seen : int
        Instances the ranking is based on.
    ts : int
        Event time (ms) of the last instance seen.
    """

    stream: Name
    method: Name
    features: list[str]
    scores: list[Finite]
    n_seen: Count
    ts: Timestamp

    @model_validator(mode="after")
    def _aligned(self) -> Ranking:
        if len(self.scores) != len(self.features):
            raise cross_field_error(
                "scores",
                "has {n_scores} values but 'features' has {n_features}",
                n_scores=len(self.scores),
                n_features=len(self.features),
            )
        if len(set(self.features)) != len(self.features):
            raise cross_field_error("features", "contains duplicate names")
        return self


MESSAGE_TYPES: tuple[type[Contract], ...] = (
    Instance,
    LabelEvent,
    FeatureArrival,
    Prediction,
    DriftAlert,
    Ranking,
)
