"""Bulk wire work of the hot path: decoding instances and encoding predictions.

Per-message Python work bounds a worker's throughput, so the two steps every instance
goes through are done here in bulk:

* :func:`decode_fast` unpacks a message and accepts it only in the plain, well-typed case
  (a msgpack map without headers, list ``x`` of finite floats, int/str ids and labels, no
  weight); anything else is left to :func:`schemas.codec.decode_instance`, which validates
  fully and raises the exact :class:`~schemas.errors.DecodeError`. The fast path never
  accepts a message the full validation would refuse, and yields the same values (tested
  against it).
* :func:`encode_predictions` writes :class:`~schemas.Prediction` maps with a fixed layout:
  the fields that are constant for a block (stream, model, classes, source topic and
  partition, and the predicted and true label of a group) are packed once, the varying
  ones (id, probabilities, offset, timestamp) are written as fixed-width msgpack numbers
  (``int 64``, ``float 64``) into one numpy buffer, which is then cut into messages. Every
  msgpack reader decodes them to the same values as a plain ``packb`` of the map.
"""

from __future__ import annotations

import math

import msgpack
import numpy as np

from schemas.messages import INT64_MAX, INT64_MIN, MAX_NAME_LENGTH

_unpackb = msgpack.unpackb
_packb = msgpack.Packer(use_bin_type=True).pack
_KEYS = frozenset({"v", "stream", "id", "ts", "x", "y"})
_FLOAT = float
_isfinite_sum = math.isfinite


def decode_fast(value: bytes, max_bytes: int):
    """``(stream, id, ts, x, y)`` of a plain instance, or ``None`` to use full validation.

    ``value`` must come without headers (a ``content-type`` header goes the full way).
    """
    if value is None or not 0 < len(value) <= max_bytes or not 0x80 <= value[0] <= 0x8F:
        return None  # only small msgpack maps (fixmap) are taken here
    try:
        d = _unpackb(value)
    except Exception:  # noqa: BLE001 (the full path reports the exact error)
        return None
    if not d.keys() <= _KEYS:
        return None
    if d.get("v", 1) != 1 or type(d.get("v", 1)) is not int:
        return None
    stream = d.get("stream")
    if type(stream) is not str or not 0 < len(stream) <= MAX_NAME_LENGTH:
        return None
    ident = d.get("id")
    t = type(ident)
    if t is int:
        if not INT64_MIN <= ident <= INT64_MAX:
            return None
    elif t is not str:
        return None
    ts = d.get("ts")
    if type(ts) is not int or not 0 <= ts <= INT64_MAX:
        return None
    x = d.get("x")
    if type(x) is not list or not x:
        return None
    for v in x:
        if type(v) is not _FLOAT:
            return None
    if not _isfinite_sum(sum(x)):  # NaN and infinities propagate through a sum
        return None
    y = d.get("y")
    if y is not None:
        t = type(y)
        if t is int:
            if not INT64_MIN <= y <= INT64_MAX:
                return None
        elif t is not str:
            return None
    return stream, ident, ts, x, y


# --- predictions ------------------------------------------------------------------------------


def _int64(v: int) -> bytes:
    return b"\xd3" + int(v).to_bytes(8, "big", signed=True)


_I64 = "i64"  # a varying int (written as msgpack int 64)
_F64S = "f64s"  # a varying fixed-length list of floats (msgpack float 64 each)


def _fill(rows: np.ndarray, header: bytes, parts: list, columns: dict, out: list) -> None:
    """Write messages of a fixed layout for ``rows`` into ``out``.

    ``parts`` is a list of ``(key, spec)``: ``spec`` is packed bytes (a constant value),
    ``_I64`` or ``(_F64S, k)``; ``columns`` maps keys of varying fields to arrays aligned
    with all rows (big-endian int64 / float64).
    """
    template = bytearray(header)
    writes = []
    for key, spec in parts:
        template += _packb(key)
        if isinstance(spec, bytes):
            template += spec
        elif spec == _I64:
            writes.append((len(template) + 1, key, 8))
            template += b"\xd3" + bytes(8)
        else:
            k = spec[1]
            template += bytes([0x90 | k])
            writes.append((len(template), key, -k))
            template += (b"\xcb" + bytes(8)) * k
    width = len(template)
    m = rows.shape[0]
    buf = np.empty((m, width), dtype=np.uint8)
    buf[:] = np.frombuffer(bytes(template), dtype=np.uint8)
    for pos, key, size in writes:
        col = columns[key][rows]
        if size > 0:
            buf[:, pos:pos + 8] = col.view(np.uint8).reshape(m, 8)
        else:
            k = -size
            cells = buf[:, pos:pos + 9 * k].reshape(m, k, 9)
            cells[:, :, 1:] = col.view(np.uint8).reshape(m, k, 8)
    raw = buf.tobytes()
    for j, r in enumerate(rows.tolist()):
        out[r] = raw[j * width:(j + 1) * width]


def encode_predictions(const: dict, ids: list, y_pred: list, y_true: list,
                       proba: np.ndarray | None, offsets: list, ts: list) -> list[bytes]:
    """msgpack values of Prediction messages, one per row, in row order.

    Parameters
    ----------
    const : dict
        Fields shared by every row (``v, stream, model, classes, topic, partition``).
    ids, y_pred, y_true, offsets, ts : lists of length n
        Per-row fields.
    proba : ndarray of shape (n, k), or None for an empty list
        Class probabilities aligned with ``const["classes"]``.
    """
    n = len(ids)
    if n == 0:
        return []
    k = 0 if proba is None else proba.shape[1]
    if k > 15 or any(type(i) is not int for i in ids):
        return [_packb({**const, "id": ids[r], "y_pred": y_pred[r], "y_true": y_true[r],
                        "proba": [] if proba is None else proba[r].tolist(),
                        "offset": offsets[r], "ts": ts[r]}) for r in range(n)]
    n_fields = len(const) + 6
    header = (bytes([0x80 | n_fields]) if n_fields <= 15
              else b"\xde" + n_fields.to_bytes(2, "big"))
    header += b"".join(_packb(k_) + _packb(v_) for k_, v_ in const.items())
    columns = {"id": np.asarray(ids, dtype=">i8"), "offset": np.asarray(offsets, dtype=">i8"),
               "ts": np.asarray(ts, dtype=">i8")}
    tail = [("proba", (_F64S, k) if k else _packb([])), ("offset", _I64), ("ts", _I64)]
    if k:
        columns["proba"] = np.ascontiguousarray(proba, dtype=">f8")
    out: list = [None] * n
    int_preds = all(type(v) is int for v in y_pred)
    int_truth = all(type(v) is int or v is None for v in y_true)
    if int_preds and int_truth:
        # common case, integer labels: two layouts (labelled or not), labels as columns
        columns["y_pred"] = np.asarray(y_pred, dtype=">i8")
        labelled = np.fromiter((v is not None for v in y_true), dtype=bool, count=n)
        columns["y_true"] = np.asarray([v if v is not None else 0 for v in y_true],
                                       dtype=">i8")
        for mask, spec in ((labelled, _I64), (~labelled, _packb(None))):
            rows = np.flatnonzero(mask)
            if rows.shape[0]:
                _fill(rows, header, [("y_pred", _I64), ("y_true", spec), ("id", _I64), *tail],
                      columns, out)
        return out
    # any labels: rows sharing (predicted, true) label have the same bytes for both
    groups: dict = {}
    for r, key in enumerate(zip(y_pred, y_true)):
        g = groups.get(key)
        if g is None:
            groups[key] = [r]
        else:
            g.append(r)
    for (yp, yt), rows in groups.items():
        _fill(np.asarray(rows, dtype=np.int64), header,
              [("y_pred", _packb(yp)), ("y_true", _packb(yt)), ("id", _I64), *tail],
              columns, out)
    return out
