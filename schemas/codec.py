"""Wire codec of the contracts: msgpack or JSON, both read and written.

Format
------
* The ``content-type`` header says which format a value is in (``application/msgpack`` or
  ``application/json``). Without it the value is sniffed: a JSON object starts with ``{``
  (byte 0x7b), which no msgpack map does (msgpack maps start with 0x80-0x8f, 0xde or 0xdf),
  so a hand-typed JSON line from a console producer is read as JSON.
* Numpy arrays (in checkpoints and learner states) travel as (dtype, shape, bytes): a msgpack
  extension type, or in JSON a tagged object with base64 data. Bytes are little-endian on the
  wire and the dtype's kind and size are kept exactly, so a round trip is bit-exact. Pickle is
  never used: any producer can write to a topic, and unpickling runs code. In JSON states,
  maps whose keys are exactly those of a tag (``{"__ndarray__", "shape", "data"}``,
  ``{"__npscalar__", "data"}``, ``{"__bytes__"}``, ``{"__float__"}``) are reserved.
* Everything JSON produces can be typed by a person, e.g.
  ``{"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,0.2],"y":"UP"}``.

Decoding
--------
:func:`decode` checks size, format, the top-level map, the schema version, then validates the
contract; each refusal is a :class:`~schemas.errors.DecodeError` with a code, a reason and the
field path. :func:`load` (bytes to the top-level map) and :func:`validate` (a map to its
contract) are the two halves of :func:`decode`: the readers of the instances topic
(:mod:`schemas.instances`, :mod:`schemas.batches`, :mod:`schemas.labels`) put their own plain
checks of the common case between them, and build what those checks accept with
:func:`constructed` instead of validating it again.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import msgpack
import numpy as np
from pydantic import BaseModel, ValidationError

from . import errors as E
from .errors import DecodeError
from .kinds import KIND_HEADER
from .messages import UNION_TAG_POSITION
from .values import is_text

T = TypeVar("T", bound=BaseModel)
_object_setattr = object.__setattr__

CONTENT_TYPE = "content-type"
MSGPACK = "application/msgpack"
JSON = "application/json"
_CONTENT_TYPES = {
    MSGPACK: MSGPACK,
    "application/x-msgpack": MSGPACK,
    "application/vnd.msgpack": MSGPACK,
    JSON: JSON,
}
_RAW_CONTENT_TYPES = {MSGPACK.encode(): MSGPACK, JSON.encode(): JSON}
DEFAULT_MAX_BYTES = 1_048_576

# msgpack extension codes (application range 0..127; -1 is msgpack's timestamp)
EXT_NDARRAY = 1
EXT_NPSCALAR = 2
# dtype kinds that have a fixed-size byte layout: bool, ints, floats, complex, datetimes,
# fixed-width strings. Object and structured dtypes are refused.
ARRAY_KINDS = frozenset("biufcmMSU")

# JSON tags (a map with exactly these keys is decoded as the tagged value)
_TAG_ARRAY = "__ndarray__"
_TAG_SCALAR = "__npscalar__"
_TAG_BYTES = "__bytes__"
_TAG_FLOAT = "__float__"
_KEYS_ARRAY = frozenset({_TAG_ARRAY, "shape", "data"})
_KEYS_SCALAR = frozenset({_TAG_SCALAR, "data"})
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


# =========================================================================== arrays


def _array_parts(arr: np.ndarray) -> tuple[str, list[int], bytes]:
    """(dtype string, shape, little-endian C-order bytes) of an array."""
    dtype = arr.dtype
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None:
        raise TypeError(f"arrays of dtype {dtype} cannot be encoded (numeric, bool or fixed strings)")
    if dtype.byteorder == ">":
        dtype = dtype.newbyteorder("<")
        arr = arr.astype(dtype)
    return dtype.str, list(arr.shape), arr.tobytes(order="C")


def _array_from_parts(dtype_str: Any, shape: Any, data: Any, copy: bool = True) -> np.ndarray:
    """Inverse of :func:`_array_parts`, refusing anything inconsistent with a DecodeError.

    ``copy=False`` returns a read-only view of ``data`` (for a reader that copies anyway)."""
    if type(dtype_str) is not str or type(data) is not bytes or type(shape) is not list:
        raise DecodeError(E.NOT_DECODABLE, "malformed array: expected (dtype, shape, bytes)")
    try:
        dtype = np.dtype(dtype_str)
    except TypeError as exc:
        raise DecodeError(E.NOT_DECODABLE, f"malformed array: {exc}") from None
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None:
        raise DecodeError(E.NOT_DECODABLE, f"arrays of dtype {dtype_str!r} are not accepted")
    if not all(type(n) is int and n >= 0 for n in shape):
        raise DecodeError(E.NOT_DECODABLE, f"malformed array shape {shape!r}")
    size = math.prod(shape)
    if size * dtype.itemsize != len(data):
        raise DecodeError(
            E.NOT_DECODABLE,
            f"array of dtype {dtype_str} and shape {tuple(shape)} needs "
            f"{size * dtype.itemsize} bytes, got {len(data)}",
        )
    arr = np.frombuffer(data, dtype=dtype, count=size).reshape(shape)
    # copy: the result must own writable memory, not view the message buffer
    return arr.copy() if copy else arr


def _msgpack_default(obj: Any) -> Any:
    """msgpack ``default`` hook (with ``strict_types``): numpy values and container subclasses."""
    if isinstance(obj, np.ndarray):
        return msgpack.ExtType(EXT_NDARRAY, msgpack.packb(_array_parts(obj)))
    if isinstance(obj, np.generic):
        # before the Python subclasses below: np.float64 is a float, np.str_ a str
        return msgpack.ExtType(EXT_NPSCALAR, msgpack.packb(_array_parts(np.asarray(obj))))
    if isinstance(obj, tuple | list):
        return list(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    for base in (int, float, str, bytes):
        if isinstance(obj, base):
            return base(obj)
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    raise TypeError(f"cannot encode a value of type {type(obj).__name__}")


def _ext_hook(code: int, data: bytes, copy: bool = True) -> Any:
    """msgpack ``ext_hook``: arrays and numpy scalars back from their extension types."""
    if code not in (EXT_NDARRAY, EXT_NPSCALAR):
        raise DecodeError(E.NOT_DECODABLE, f"unknown msgpack extension type {code}")
    try:
        parts = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # noqa: BLE001 - any parser failure means malformed bytes
        raise DecodeError(E.NOT_DECODABLE, f"malformed array: {exc}") from None
    if type(parts) is not list or len(parts) != 3:
        raise DecodeError(E.NOT_DECODABLE, "malformed array: expected (dtype, shape, bytes)")
    arr = _array_from_parts(*parts, copy=copy)
    if code == EXT_NPSCALAR:
        if arr.ndim != 0:
            raise DecodeError(E.NOT_DECODABLE, "malformed numpy scalar: shape must be ()")
        return arr[()]
    return arr


def _ext_hook_view(code: int, data: bytes) -> Any:
    """:func:`_ext_hook` returning read-only views of the message bytes (see :func:`load`)."""
    return _ext_hook(code, data, copy=False)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if type(text) is not str:
        raise DecodeError(E.NOT_DECODABLE, "malformed tagged value: data must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise DecodeError(E.NOT_DECODABLE, f"malformed base64 data: {exc}") from None


def _to_json_tree(obj: Any) -> Any:
    """Replace what JSON cannot carry (arrays, numpy scalars, bytes, NaN/inf) by tagged maps."""
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else {_TAG_FLOAT: repr(obj)}
    if t is dict or isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if type(k) is not str:
                raise TypeError(f"JSON map keys must be strings, got {k!r}")
            out[k] = _to_json_tree(v)
        return out
    if t is list or t is tuple:
        return [_to_json_tree(v) for v in obj]
    if isinstance(obj, np.ndarray):
        dtype, shape, data = _array_parts(obj)
        return {_TAG_ARRAY: dtype, "shape": shape, "data": _b64(data)}
    if isinstance(obj, np.generic):
        dtype, _, data = _array_parts(np.asarray(obj))
        return {_TAG_SCALAR: dtype, "data": _b64(data)}
    if isinstance(obj, bytes | bytearray | memoryview):
        return {_TAG_BYTES: _b64(bytes(obj))}
    return _to_json_tree(_msgpack_default(obj))


def _json_object_hook(d: dict) -> Any:
    """``json.loads`` hook: tagged maps back to arrays, numpy scalars, bytes and floats."""
    n = len(d)
    if n == 1:
        if _TAG_BYTES in d:
            return _unb64(d[_TAG_BYTES])
        tag = d.get(_TAG_FLOAT)
        if type(tag) is str and tag in _NON_FINITE:
            return _NON_FINITE[d[_TAG_FLOAT]]
    elif n == 2 and d.keys() == _KEYS_SCALAR:
        arr = _array_from_parts(d[_TAG_SCALAR], [], _unb64(d["data"]))
        return arr[()]
    elif n == 3 and d.keys() == _KEYS_ARRAY:
        return _array_from_parts(d[_TAG_ARRAY], d["shape"], _unb64(d["data"]))
    return d


# =========================================================================== state


def encode_state(obj: Any) -> bytes:
    """msgpack bytes of a nested learner state.

    Parameters
    ----------
    obj : dict, list, str, int, float, bool, None, bytes, numpy array or numpy scalar
        Any nesting of these (tuples are written as lists). Arrays must have a numeric, bool,
        datetime or fixed-width string dtype.

    Returns
    -------
    bytes
        msgpack with arrays and numpy scalars as extension types (dtype kept exactly,
        little-endian data).

    Examples
    --------
    >>> state = {"kind": "adwin", "arrays": {"n_seen": np.array([3], dtype=np.int64)}}
    >>> decode_state(encode_state(state))["arrays"]["n_seen"]
    array([3])
    """
    return msgpack.packb(obj, default=_msgpack_default, strict_types=True, datetime=False)


def decode_state(data: bytes) -> Any:
    """Inverse of :func:`encode_state`; arrays come back writable and C-contiguous.

    Raises
    ------
    DecodeError
        ``not_decodable`` when the bytes are not a valid state.
    """
    try:
        return msgpack.unpackb(
            data, raw=False, ext_hook=_ext_hook, strict_map_key=False, use_list=True
        )
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser failure means malformed bytes
        raise DecodeError(E.NOT_DECODABLE, f"not a valid msgpack state: {_describe(exc)}") from None


# =========================================================================== encode


def encode(msg: BaseModel, fmt: str = "msgpack") -> tuple[bytes, list[tuple[str, bytes]]]:
    """Serialise a contract to a Kafka value and its headers.

    Parameters
    ----------
    msg : Contract
        A validated message (:class:`~schemas.messages.Instance`, ...,
        :class:`~schemas.checkpoint.Checkpoint`). Every field is written, defaults included.
    fmt : {"msgpack", "json"}
        Wire format.

    Returns
    -------
    value : bytes
    headers : list of (str, bytes)
        ``[("content-type", b"application/msgpack" or b"application/json")]``, and the
        ``sf-kind`` header of a record kind other than a plain Instance
        (:mod:`schemas.kinds`).

    Examples
    --------
    >>> from schemas.messages import Instance
    >>> value, headers = encode(Instance(stream="s1", id=1, ts=0, x=[0.1, 0.2], y="UP"), "json")
    >>> value
    b'{"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,0.2],"y":"UP","weight":null}'
    >>> headers
    [('content-type', b'application/json')]
    """
    values = dict(msg)
    arrays = getattr(msg, "wire_arrays", False)
    # a record that is not a plain Instance says its kind on the instances topic
    kind = getattr(msg, "record_kind", None)
    extra = [(KIND_HEADER, kind.encode())] if kind else []
    if fmt == "msgpack":
        value = encode_state(values) if arrays else msgpack.packb(values)
        return value, [(CONTENT_TYPE, MSGPACK.encode()), *extra]
    if fmt == "json":
        tree = _to_json_tree(values) if arrays else values
        text = json.dumps(tree, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8"), [(CONTENT_TYPE, JSON.encode()), *extra]
    raise ValueError(f"unknown format {fmt!r}: use 'msgpack' or 'json'")


# =========================================================================== decode


def content_type(headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None) -> str | None:
    """The wire format named by the ``content-type`` header, or None without the header.

    Raises
    ------
    DecodeError
        ``not_decodable`` for a content type other than msgpack or JSON.
    """
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    for key, raw in items:
        if key != CONTENT_TYPE and key.lower() != CONTENT_TYPE:
            continue
        fmt = _RAW_CONTENT_TYPES.get(raw) if type(raw) is bytes else None
        if fmt is not None:  # the exact values this codec writes: no parsing
            return fmt
        text = raw.decode("latin-1") if isinstance(raw, bytes | bytearray) else str(raw or "")
        media = text.split(";", 1)[0].strip().lower()
        fmt = _CONTENT_TYPES.get(media)
        if fmt is None:
            raise DecodeError(
                E.NOT_DECODABLE,
                f"unsupported content-type {text!r} (use {MSGPACK} or {JSON})",
            )
        return fmt
    return None


_BLANK = frozenset(b" \t\r\n")


def _sniff(value: bytes) -> str:
    """JSON if the first non-blank byte opens a JSON object or array, else msgpack.

    Any byte below 0x80 starts a msgpack positive integer, never a map, so reading such a
    value as JSON loses nothing.
    """
    first = value[0]
    if first >= 0x80:  # msgpack maps (0x80-0x8f, 0xde, 0xdf) and everything else >= 0x80
        return MSGPACK
    if first in _BLANK:
        stripped = bytes(value[:64]).lstrip()
        first = stripped[0] if stripped else 0
    return JSON if first in (0x7B, 0x5B) else MSGPACK  # "{" or "["


def wire_format(
    value: bytes, headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None
) -> str:
    """The format :func:`load` reads a non-empty value in: its ``content-type`` header, else
    sniffed from the first byte (see the module doc).

    Returns
    -------
    str
        :data:`MSGPACK` or :data:`JSON` (``application/msgpack``, ``application/json``).

    Raises
    ------
    DecodeError
        ``not_decodable`` for a content type other than msgpack or JSON.

    Examples
    --------
    >>> wire_format(b'{"v":1}'), wire_format(b"\\x81\\xa1v\\x01")
    ('application/json', 'application/msgpack')
    >>> wire_format(b"\\x81\\xa1v\\x01", [("content-type", b"application/json")])
    'application/json'
    """
    return (content_type(headers) if headers else None) or _sniff(value)


def load(
    value: bytes | None,
    headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    arrays: bool = False,
    views: bool = False,
) -> dict:
    """Parse a Kafka value into its top-level map (no contract validation).

    Parameters
    ----------
    value : bytes
        The message value.
    headers : list of (str, bytes) or dict, optional
        Message headers; only ``content-type`` is read.
    max_bytes : int
        Larger values are refused (``oversized``).
    arrays : bool
        Decode array extension types / tagged objects (checkpoints); off for messages
        from producers, whose maps are taken literally.
    views : bool
        With ``arrays``: msgpack arrays are read-only views of ``value`` instead of copies
        (for a caller that copies them anyway, such as the worker stacking batch rows).

    Raises
    ------
    DecodeError
        ``oversized``, ``not_decodable`` or ``not_an_object``.
    """
    if value is None:
        raise DecodeError(E.NOT_DECODABLE, "the message has no value (a tombstone)")
    if not isinstance(value, bytes | bytearray | memoryview):
        raise DecodeError(E.NOT_DECODABLE, f"a message value is bytes, got {type(value).__name__}")
    n = len(value)
    if n > max_bytes:
        raise DecodeError(E.OVERSIZED, f"the message is {n} bytes, the limit is {max_bytes} bytes")
    if n == 0:
        raise DecodeError(E.NOT_DECODABLE, "the message value is empty")
    fmt = wire_format(value, headers)
    try:
        if fmt == MSGPACK:
            if arrays:
                hook = _ext_hook_view if views else _ext_hook
                obj = msgpack.unpackb(value, raw=False, ext_hook=hook, strict_map_key=False)
            else:
                obj = msgpack.unpackb(value, raw=False)
        else:
            text = bytes(value).decode("utf-8")
            obj = json.loads(text, object_hook=_json_object_hook if arrays else None)
            if _SURROGATE_ESCAPE.search(text):
                _refuse_lone_surrogates(obj)
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - parser errors vary (ValueError, RecursionError...)
        name = "msgpack" if fmt == MSGPACK else "JSON"
        raise DecodeError(E.NOT_DECODABLE, f"not valid {name}: {_describe(exc)}") from None
    if type(obj) is not dict:
        raise DecodeError(
            E.NOT_AN_OBJECT,
            f"a message must be a map (JSON object) of fields, got {_type_name(obj)}",
        )
    return obj


# a JSON escape of a UTF-16 surrogate: a pair of them is a character, one alone is not text
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(obj: Any, where: str = "") -> None:
    """Raise ``invalid_text`` at the first string (or map key) of ``obj`` UTF-8 cannot encode.

    Only JSON can carry one (msgpack strings are UTF-8 by definition), and only through an
    escape such as ``"\\ud800"``; every output and checkpoint that repeats the string
    would fail to encode it, so the record is refused here, where it is one dead letter.
    """
    if type(obj) is str:
        if not is_text(obj):
            raise DecodeError(E.INVALID_TEXT, "must be text UTF-8 can encode (it holds a lone "
                              "surrogate such as the JSON escape \\ud800)", where)
    elif type(obj) is dict:
        for key, value in obj.items():
            if type(key) is str and not is_text(key):
                raise DecodeError(E.INVALID_TEXT, "a map key is not text UTF-8 can encode (it "
                                  "holds a lone surrogate)", where or "the message")
            _refuse_lone_surrogates(value, f"{where}[{key!r}]" if where else str(key))
    elif type(obj) is list:
        for i, value in enumerate(obj):
            _refuse_lone_surrogates(value, f"{where}[{i}]")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, msgpack.ExtraData):
        return "extra bytes after the message"
    if isinstance(exc, msgpack.FormatError):
        return "invalid msgpack type byte"
    if isinstance(exc, msgpack.StackError | RecursionError):
        return "nested too deeply"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _type_name(obj: Any) -> str:
    names = {dict: "a map", list: "an array", str: "a string", bytes: "binary data"}
    if obj is None:
        return "null"
    if type(obj) is bool:
        return "a boolean"
    if type(obj) in (int, float):
        return "a number"
    return names.get(type(obj), type(obj).__name__)


def _where(loc: Sequence[Any]) -> str:
    """Field path of a pydantic error location: ``x[3]``, ``x['temp']``, ``y``."""
    if not loc:
        return ""
    head = loc[0]
    rest = list(loc[1:])
    pos = UNION_TAG_POSITION.get(head) if isinstance(head, str) else None
    if pos is not None and len(loc) > pos and isinstance(loc[pos], str):
        del rest[pos - 1]  # the union tag inserted by the discriminated unions
    return str(head) + "".join(f"[{p}]" if isinstance(p, int) else f"[{p!r}]" for p in rest)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _decode_error(exc: ValidationError, model: type[BaseModel]) -> DecodeError:
    """The most useful error of a ValidationError as a DecodeError."""
    errs = exc.errors(include_url=False)
    # a wrong version explains every other error of the message: report it alone
    first = next((e for e in errs if e["type"] == "unknown_version"), errs[0])
    kind = first["type"]
    ctx = first.get("ctx") or {}
    where = _where(first["loc"])
    if kind == "missing":
        code, reason = E.MISSING_FIELD, "required field is missing"
    elif kind == "unknown_version":
        code, reason = E.UNKNOWN_VERSION, first["msg"]
    elif kind == "finite_number":
        code, reason = E.NON_FINITE, f"must be a finite number, got {_short(first['input'])}"
    elif kind == "out_of_range":
        code, reason = E.OUT_OF_RANGE, first["msg"]
    elif kind in ("invalid_text", "string_unicode"):
        code, reason = E.INVALID_TEXT, ("must be text UTF-8 can encode (it holds a lone surrogate "
                                        "such as the JSON escape \\ud800)")
        where = _where([p for p in first["loc"] if type(p) is not str or is_text(p)])
    elif kind == "extra_forbidden":
        known = ", ".join(model.model_fields)
        code, reason = E.INVALID_FIELD, f"unknown field ({model.__name__} fields: {known})"
    elif kind == "cross_field":
        code, where, reason = ctx.get("code", E.INVALID_FIELD), ctx["where"], first["msg"]
    else:
        msg = first["msg"]
        msg = msg[0].lower() + msg[1:] if msg else kind
        code, reason = E.INVALID_FIELD, f"{msg}, got {_short(first['input'])}"
    if len(errs) > 1 and kind != "unknown_version":
        reason += f" (and {len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})"
    return DecodeError(code, reason, where)


def validate(obj: dict, model: type[T]) -> T:
    """Validate a parsed map against a contract, raising :class:`DecodeError`."""
    v = obj.get("v", 1)
    versions = getattr(model, "versions", None)
    if type(v) is int and versions is not None and v not in versions:
        known = ", ".join(str(k) for k in sorted(versions))
        raise DecodeError(
            E.UNKNOWN_VERSION, f"schema version {v} is not supported (this worker reads {known})", "v"
        )
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise _decode_error(exc, model) from None


def constructed(model, values: dict, given) -> Any:
    """A ``model`` instance holding ``values`` (``given``: the fields the map named), as
    ``model_construct`` makes it, without its per-field Python loop: for maps a reader's plain
    checks accepted (they accept only what :func:`validate` accepts, with its values)."""
    obj = model.__new__(model)
    _object_setattr(obj, "__dict__", values)
    _object_setattr(obj, "__pydantic_fields_set__", set(given))
    _object_setattr(obj, "__pydantic_extra__", None)
    _object_setattr(obj, "__pydantic_private__", None)
    return obj


def decode(
    value: bytes,
    model: type[T],
    headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    plain: Callable[[dict], T | None] | None = None,
) -> T:
    """Decode and validate one Kafka value as ``model``.

    Parameters
    ----------
    value : bytes
        Message value (msgpack or JSON).
    model : type
        The contract class, e.g. :class:`~schemas.messages.Prediction`.
    headers : list of (str, bytes) or dict, optional
        Message headers (``content-type`` decides the format; otherwise it is sniffed).
    max_bytes : int
        Size limit; checkpoints pass their chunk size.
    plain : callable, optional
        The contract's plain path: ``plain(d)`` builds the model from the loaded map by
        plain type checks, without validation, or answers ``None`` for anything they do not
        take, which validation then decides (and says why it refuses). It must accept only
        what validation accepts, with the values validation gives
        (:func:`schemas.instances.plain_fields` and its users are tested so).

    Raises
    ------
    DecodeError
        With the codes of :mod:`schemas.errors`.

    Examples
    --------
    >>> from schemas.messages import Instance
    >>> decode(b'{"v":1,"stream":"s1","id":1,"ts":0,"x":[0.1,0.2],"y":"UP"}', Instance).y
    'UP'
    >>> decode(b'{"stream":"s1","id":1,"ts":0,"x":[0.1,NaN]}', Instance)
    Traceback (most recent call last):
    ...
    schemas.errors.DecodeError: non_finite at x[1]: must be a finite number, got nan
    """
    obj = load(value, headers, max_bytes=max_bytes, arrays=getattr(model, "wire_arrays", False))
    msg = plain(obj) if plain is not None else None
    return msg if msg is not None else validate(obj, model)
