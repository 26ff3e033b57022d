"""Bulk wire work of the hot path: decoding instances and encoding predictions.

Per-message Python work bounds a worker's throughput, so the two steps every instance
goes through are done here in bulk:

* :func:`decode_bulk` parses a whole poll's records at once with a numba kernel, straight
  from the msgpack bytes into columns (ids, timestamps, labels, one flat array of features),
  for the plainest layout (ids and class labels that are integers or strings, ``x`` of
  float 64), and the LabelEvents of that layout sent with their kind's header alone; it
  accepts only what full validation accepts, with the same values, and marks the rest for
  the per-message way.
* :func:`encode_predictions` writes :class:`~schemas.Prediction` maps with a fixed layout:
  the fields that are constant for a block (stream, model, classes, source topic and
  partition, and the predicted and true label of a group) are packed once, the varying
  ones (id, probabilities, offset, timestamp) are written as fixed-width msgpack numbers
  (``int 64``, ``float 64``) into one numpy buffer, which is then cut into messages. Every
  msgpack reader decodes them to the same values as a plain ``packb`` of the map.
* :func:`encode_predictions_json` writes the same messages as JSON (``output.predictions=json``):
  the constant fields are encoded once into a text template, only the varying ones per row.
  Floats are written by ``repr``, so they read back bit for bit.
"""

from __future__ import annotations

import json

import msgpack
import numpy as np

from schemas.messages import MAX_NAME_LENGTH
from schemas.values import MAX_MAGNITUDE

_unpackb = msgpack.unpackb
_packb = msgpack.Packer(use_bin_type=True).pack


# --- bulk decoding (numba) -------------------------------------------------------------------
#
# The kernel parses the plain msgpack layout of an instance straight from the concatenated
# message bytes into columns. It accepts what :func:`schemas.instances.read_plain_instance` accepts, narrowed to
# ids and labels that are integers or strings (str 8 or 16 at most; decoded as UTF-8 after
# the kernel, :func:`_read_texts`), ``x`` of float 64 only, map keys as fixstr, no
# repeated key and the message key equal to the stream, and yields the same values. One difference: ``x`` is checked
# value by value for finiteness, where ``read_plain_instance`` checks the sum (a sum that overflows
# sends it to full validation, which accepts such a row). Values beyond +-1e100 (whose squares
# would overflow; full validation refuses them) are found after the kernel, in one vectorized
# pass. So every accepted message is one that full validation accepts, with the same values
# (tested against it); every other message is marked so the caller takes it the per-message
# way (:func:`schemas.records.read_record`).

_F_STREAM, _F_ID, _F_TS, _F_X, _F_Y, _F_V = 1, 2, 4, 8, 16, 32
_LABEL_FIELDS = _F_STREAM | _F_ID | _F_TS | _F_Y


def _be(buf, p, n):
    """Unsigned big-endian integer of ``n`` bytes at ``p`` (n <= 8; caller checks the top bit)."""
    v = np.uint64(0)
    for k in range(n):
        v = (v << np.uint64(8)) | np.uint64(buf[p + k])
    return v


def _read_size(buf, p, end, fix, fix_mask, size8, size16):
    """``(size, next)`` of the msgpack str or array header at ``p``: a fix form (``fix`` with
    the size in the bits of ``fix_mask``), or the 8-bit (``size8``; -1: the type has none)
    and 16-bit size forms; size -1 for any other byte (a longer form is not the plain
    layout)."""
    b = buf[p]
    if fix <= b <= fix | fix_mask:
        return np.int64(b & fix_mask), p + 1
    if b == size8 and p + 1 < end:
        return np.int64(buf[p + 1]), p + 2
    if b == size16 and p + 2 < end:
        return (np.int64(buf[p + 1]) << 8) | np.int64(buf[p + 2]), p + 3
    return np.int64(-1), p


def _read_int(buf, p, end):
    """``(ok, value, next)`` of a msgpack integer at ``p`` that fits int 64."""
    if p >= end:
        return False, 0, p
    b = buf[p]
    if b <= 0x7F:
        return True, np.int64(b), p + 1
    if b >= 0xE0:
        return True, np.int64(b) - 256, p + 1
    if 0xCC <= b <= 0xCF:  # uint 8/16/32/64
        n = 1 << (b - 0xCC)
        if p + 1 + n > end or (n == 8 and buf[p + 1] >= 0x80):
            return False, 0, p
        return True, np.int64(_be(buf, p + 1, n)), p + 1 + n
    if 0xD0 <= b <= 0xD3:  # int 8/16/32/64
        n = 1 << (b - 0xD0)
        if p + 1 + n > end:
            return False, 0, p
        u = _be(buf, p + 1, n)
        v = np.int64(u)
        if n < 8 and buf[p + 1] >= 0x80:
            v -= np.int64(1) << np.int64(8 * n)
        return True, v, p + 1 + n
    return False, 0, p


def _read_label(buf, p, end, values, lengths, i):
    """``(ok, next)`` of an id or a class label at ``p``, written at ``i`` when it reads: an
    integer that fits int 64 (``values[i]``; ``lengths[i]`` -1), or a string (fixstr, str 8
    or 16) of ``lengths[i]`` bytes from ``values[i]`` in ``buf``, decoded as UTF-8 after the
    kernel."""
    m, q = _read_size(buf, p, end, 0xA0, 0x1F, 0xD9, 0xDA)
    if m >= 0:
        if q + m > end:
            return False, p
        values[i] = q
        lengths[i] = m
        return True, q + m
    r, v, nxt = _read_int(buf, p, end)
    if r:
        values[i] = v
        lengths[i] = -1
    return r, nxt


def _parse_instances(buf, bounds, kbuf, kbounds, label, max_bytes, max_name, ok, ids, idtext,
                     ts, ys, has_y, ytext, xstart, nx, xbytes):
    """Parse every message ``buf[bounds[i]:bounds[i + 1]]`` (see the section comment).

    ``ok[i]`` is set for accepted messages; their ``x`` values are written as little-endian
    float 64 bytes into ``xbytes`` from value index ``xstart[i]`` (``nx[i]`` of them). A
    class label that is a string is left to the caller: ``ytext[i]`` is then its length in
    bytes and ``ys[i]`` where they start in ``buf`` (``ytext[i]`` is -1 for an integer label);
    an id that is a string likewise, in ``idtext[i]`` and ``ids[i]``.
    A message with ``label[i]`` set is read as a LabelEvent: the same fields but ``x``, and a
    label that is not nil.
    """
    n = bounds.shape[0] - 1
    w = 0  # next free value slot in xbytes
    for i in range(n):
        ok[i] = False
        p = bounds[i]
        end = bounds[i + 1]
        size = end - p
        if size <= 0 or size > max_bytes:
            continue
        b = buf[p]
        if b < 0x80 or b > 0x8F:
            continue
        n_pairs = b & 0x0F
        p += 1
        seen = 0
        good = True
        for _ in range(n_pairs):
            if p + 1 >= end:
                good = False
                break
            kb = buf[p]
            if kb == 0xA1:
                c = buf[p + 1]
                p += 2
                if c == 0x76:  # "v"
                    f = _F_V
                elif c == 0x78 and not label[i]:  # "x" (a LabelEvent has none)
                    f = _F_X
                elif c == 0x79:  # "y"
                    f = _F_Y
                else:
                    good = False
                    break
            elif kb == 0xA2 and p + 2 < end:
                c, d = buf[p + 1], buf[p + 2]
                p += 3
                if c == 0x69 and d == 0x64:  # "id"
                    f = _F_ID
                elif c == 0x74 and d == 0x73:  # "ts"
                    f = _F_TS
                else:
                    good = False
                    break
            elif (kb == 0xA6 and p + 6 < end and buf[p + 1] == 0x73 and buf[p + 2] == 0x74
                  and buf[p + 3] == 0x72 and buf[p + 4] == 0x65 and buf[p + 5] == 0x61
                  and buf[p + 6] == 0x6D):  # "stream"
                f = _F_STREAM
                p += 7
            else:
                good = False
                break
            if seen & f:  # duplicate key: the per-message way decides
                good = False
                break
            seen |= f
            if p >= end:
                good = False
                break
            if f == _F_V:
                r, v, p = _read_int(buf, p, end)
                if not r or v != 1:
                    good = False
                    break
            elif f == _F_ID:
                r, p = _read_label(buf, p, end, ids, idtext, i)
                if not r:
                    good = False
                    break
            elif f == _F_TS:
                r, v, p = _read_int(buf, p, end)
                if not r or v < 0:
                    good = False
                    break
                ts[i] = v
            elif f == _F_Y:
                if buf[p] == 0xC0:
                    has_y[i] = False
                    p += 1
                else:
                    r, p = _read_label(buf, p, end, ys, ytext, i)
                    if not r:
                        good = False
                        break
                    has_y[i] = True
            elif f == _F_STREAM:
                m, p = _read_size(buf, p, end, 0xA0, 0x1F, 0xD9, 0xDA)  # fixstr, str 8, 16
                if m < 0:
                    good = False
                    break
                k0 = kbounds[i]
                k1 = kbounds[i + 1]
                # the stream must equal the message key (a key that decodes as UTF-8)
                if m == 0 or m > max_name or k1 - k0 != m or p + m > end:
                    good = False
                    break
                for q in range(m):
                    if buf[p + q] != kbuf[k0 + q]:
                        good = False
                        break
                if not good:
                    break
                p += m
            else:  # x: a non-empty array of finite float 64
                m, p = _read_size(buf, p, end, 0x90, 0x0F, -1, 0xDC)  # fixarray, array 16
                if m < 0:
                    good = False
                    break
                if m == 0 or p + 9 * m > end:
                    good = False
                    break
                for q in range(m):
                    if buf[p] != 0xCB:
                        good = False
                        break
                    if (buf[p + 1] & 0x7F) == 0x7F and (buf[p + 2] & 0xF0) == 0xF0:
                        good = False  # infinity or NaN
                        break
                    o = 8 * (w + q)
                    for k in range(8):
                        xbytes[o + k] = buf[p + 8 - k]
                    p += 9
                if not good:
                    break
                xstart[i] = w
                nx[i] = m
        if not good or p != end:
            continue
        if label[i]:  # a LabelEvent: every field, a label (not nil), no features
            if (seen & _LABEL_FIELDS) == _LABEL_FIELDS and has_y[i]:
                xstart[i] = w
                nx[i] = 0
                ok[i] = True
            continue
        if (seen & (_F_STREAM | _F_ID | _F_TS | _F_X)) != (_F_STREAM | _F_ID | _F_TS | _F_X):
            continue
        if not seen & _F_Y:
            has_y[i] = False
        ok[i] = True
        w += nx[i]
    return w


_PARSE = None


def _kernels():
    """The compiled parser (numba is imported on first use: the CLI does not need it)."""
    global _PARSE, _be, _read_int, _read_size, _read_label
    if _PARSE is None:
        from models.core._jit import njit

        # compiled in dependency order: the parser resolves the helpers by global name
        _be = njit(inline="always")(_be)
        _read_int = njit(inline="always")(_read_int)
        _read_size = njit(inline="always")(_read_size)
        _read_label = njit(inline="always")(_read_label)
        _PARSE = njit(_parse_instances)
    return _PARSE


class Decoded:
    """Columns of a decoded batch (see :func:`decode_bulk`); rows where ``ok`` is false are
    left to the per-message way."""

    __slots__ = ("ok", "label", "ids", "idtext", "ts", "y", "has_y", "ytext", "xstart", "nx",
                 "xs", "id_texts", "label_texts")

    def __init__(self, n: int, n_bytes: int, label: np.ndarray):
        self.ok = np.zeros(n, dtype=np.bool_)
        self.label = label  # the messages read as LabelEvents
        # an integer id and label; the kernel's bytes of one that is a string (see idents,
        # labels), decoded into the dicts (row -> string) after it
        self.ids = np.zeros(n, dtype=np.int64)
        self.idtext = np.full(n, -1, dtype=np.int64)
        self.ts = np.zeros(n, dtype=np.int64)
        self.y = np.zeros(n, dtype=np.int64)
        self.has_y = np.zeros(n, dtype=np.bool_)
        self.ytext = np.full(n, -1, dtype=np.int64)
        self.xstart = np.zeros(n, dtype=np.int64)
        self.nx = np.zeros(n, dtype=np.int64)
        self.xs = np.empty(n_bytes // 9 + 1, dtype=np.float64)
        self.id_texts: dict[int, str] = {}
        self.label_texts: dict[int, str] = {}

    def idents(self, idx: np.ndarray):
        """The ids of accepted messages ``idx``: an int64 array when all are integers, else a
        list of integers and strings, as full validation gives them."""
        if not self.id_texts:
            return self.ids[idx]
        return _with_texts(self.ids[idx].tolist(), idx, self.id_texts)

    def ident_of(self, i: int):
        """The id of accepted message ``i``."""
        t = self.id_texts.get(i)
        return int(self.ids[i]) if t is None else t

    def labels(self, idx: np.ndarray) -> list:
        """The labels of accepted messages ``idx`` as full validation gives them: an
        integer, a string or ``None`` (unlabelled)."""
        ys = self.y[idx].tolist()
        if self.label_texts:
            _with_texts(ys, idx, self.label_texts)
        for k in np.flatnonzero(~self.has_y[idx]).tolist():
            ys[k] = None
        return ys

    def label_of(self, i: int):
        """The label of accepted message ``i`` (``None``: unlabelled)."""
        if not self.has_y[i]:
            return None
        t = self.label_texts.get(i)
        return int(self.y[i]) if t is None else t

    def rows(self, idx: np.ndarray, d: int) -> np.ndarray:
        """Feature matrix ``(len(idx), d)`` of accepted messages ``idx`` (all of width d; a
        LabelEvent's row is zeros, as the per-message way leaves it)."""
        events = self.label[idx]
        if not events.any():
            return self.xs[self.xstart[idx][:, None] + np.arange(d)]
        X = np.zeros((idx.shape[0], d))
        inst = idx[~events]
        X[~events] = self.xs[self.xstart[inst][:, None] + np.arange(d)]
        return X


def decode_bulk(values: list, keys: list, max_bytes: int,
                label: np.ndarray | None = None, max_label_length: int | None = None) -> Decoded:
    """Decode a batch of plain instances (and LabelEvents) at once (keys as bytes).

    ``values[i]`` is accepted (``ok[i]``) only if it is a plain instance (see the section
    comment) whose stream equals ``keys[i]``, with an id and a class label (or none) that are
    integers or strings of at most ``max_label_length`` characters (``None``: no bound); its
    columns then hold exactly the values full validation yields (:meth:`Decoded.idents`
    and :meth:`Decoded.labels` the ids and labels). With ``label[i]`` set (its headers name a LabelEvent
    and nothing else) it is read as a plain LabelEvent instead: the same fields, a label that
    is not nil, no ``x`` (``nx`` is 0). The caller must still check that ``keys[i]`` is a
    known stream (one that passed full validation) that takes the record, and the row width
    (``nx``).
    """
    n = len(values)
    if None in values:  # a tombstone, or a message the caller keeps for the long way
        values = [v if v is not None else b"" for v in values]
    if None in keys:  # a missing key has width 0: it never equals a stream (never empty)
        keys = [k if k is not None else b"" for k in keys]
    blob = b"".join(values)
    kblob = b"".join(keys)
    bounds = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=n), out=bounds[1:])
    kb = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, keys), dtype=np.int64, count=n), out=kb[1:])
    d = Decoded(n, len(blob), np.zeros(n, dtype=np.bool_) if label is None else label)
    w = _kernels()(np.frombuffer(blob, dtype=np.uint8), bounds, np.frombuffer(kblob, dtype=np.uint8),
                   kb, d.label, max_bytes, MAX_NAME_LENGTH, d.ok, d.ids, d.idtext, d.ts, d.y,
                   d.has_y, d.ytext, d.xstart, d.nx, d.xs.view(np.uint8))
    _refuse_out_of_range(d, w)
    _read_texts(d, blob, max_label_length)
    return d


def _with_texts(values: list, idx: np.ndarray, texts: dict) -> list:
    """``values`` (of rows ``idx``) with the rows' strings from ``texts`` in place."""
    for k, i in enumerate(idx.tolist()):
        t = texts.get(i)
        if t is not None:
            values[k] = t
    return values


def _read_texts(d: Decoded, blob: bytes, max_label_length: int | None) -> None:
    """The string ids and labels of the accepted messages, decoded as msgpack decodes them
    (UTF-8, strict: never a lone surrogate); one that is not UTF-8, or longer than
    ``max_label_length`` (the bound of both, :class:`schemas.instances.InstanceLimits`),
    leaves its message to the per-message way (which refuses it)."""
    for lengths, starts, texts in ((d.ytext, d.y, d.label_texts), (d.idtext, d.ids, d.id_texts)):
        rows = np.flatnonzero(d.ok & (lengths >= 0))
        for i, a, m in zip(rows.tolist(), starts[rows].tolist(), lengths[rows].tolist()):
            try:
                t = blob[a:a + m].decode("utf-8")
            except UnicodeDecodeError:
                d.ok[i] = False
                continue
            if max_label_length is not None and len(t) > max_label_length:
                d.ok[i] = False
                continue
            texts[i] = t


def _refuse_out_of_range(d: Decoded, w: int) -> None:
    """Leave rows with a value beyond +-``MAX_MAGNITUDE`` to the per-message way (which
    dead-letters them with ``out_of_range``): one vectorized pass over the accepted values."""
    beyond = np.abs(d.xs[:w]) > MAX_MAGNITUDE
    if not beyond.any():
        return
    rows = np.flatnonzero(d.ok)  # accepted rows, their values in order in xs[:w]
    hit = np.searchsorted(d.xstart[rows], np.flatnonzero(beyond), side="right") - 1
    d.ok[rows[hit]] = False


# --- predictions ------------------------------------------------------------------------------


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
    if m == len(out):  # every row, in order
        out[:] = [raw[a:a + width] for a in range(0, m * width, width)]
        return
    for j, r in enumerate(rows.tolist()):
        out[r] = raw[j * width:(j + 1) * width]


_NONE = type(None)
_INT = frozenset({int})
_INT_OR_NONE = frozenset({int, _NONE})


def _only(seq, types: frozenset) -> bool:
    """Every item of ``seq`` has one of exactly these types (``bool`` is not ``int``)."""
    return set(map(type, seq)) <= types


def _plain(seq):
    return seq.tolist() if isinstance(seq, np.ndarray) else seq


def encode_predictions(const: dict, ids: list, y_pred: list, y_true: list,
                       proba: np.ndarray | None, offsets: list, ts: list) -> list[bytes]:
    """msgpack values of Prediction messages, one per row, in row order.

    Parameters
    ----------
    const : dict
        Fields shared by every row (``v, stream, model, classes, topic, partition``).
    ids, y_pred, y_true, offsets, ts : lists of length n
        Per-row fields (``ids``, ``offsets`` and ``ts`` may be int64 arrays).
    proba : ndarray of shape (n, k), or None for an empty list
        Class probabilities aligned with ``const["classes"]``.
    """
    n = len(ids)
    if n == 0:
        return []
    k = 0 if proba is None else proba.shape[1]
    if isinstance(ids, np.ndarray):  # bulk-decoded ids: integers by construction
        int_ids = ids.dtype.kind in "iu"
    else:
        int_ids = _only(ids, _INT)
    # regression targets (lists of floats) take the plain way: one map per row
    targets = const.get("classes") is None and (list in set(map(type, y_pred))
                                                or list in set(map(type, y_true)))
    if k > 15 or not int_ids or targets:
        ids, offsets, ts = _plain(ids), _plain(offsets), _plain(ts)
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
    int_preds = _only(y_pred, _INT)
    truth_types = set(map(type, y_true))
    if int_preds and truth_types <= _INT_OR_NONE:
        # common case, integer labels: two layouts (labelled or not), labels as columns
        columns["y_pred"] = np.asarray(y_pred, dtype=">i8")
        if _NONE in truth_types:
            labelled = np.fromiter((v is not None for v in y_true), dtype=bool, count=n)
            columns["y_true"] = np.asarray([v if v is not None else 0 for v in y_true],
                                           dtype=">i8")
        else:
            labelled = np.ones(n, dtype=bool)
            columns["y_true"] = np.asarray(y_true, dtype=">i8")
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


def merge_blocks(blocks):
    """Runs of adjacent prediction blocks with the same classes, as one block each.

    Yields ``(start, stop, classes, y_pred, proba)`` (``proba`` is ``None`` when there are no
    classes yet). A stream's blocks are one mini-batch long; encoding a run of them with one
    :func:`encode_predictions` call saves that call's fixed cost per block.
    """
    i, n = 0, len(blocks)
    while i < n:
        b = blocks[i]
        j = i + 1
        while j < n and blocks[j].classes == b.classes and blocks[j].start == blocks[j - 1].stop:
            j += 1
        if j == i + 1:
            yield b.start, b.stop, b.classes, b.y_pred, b.proba if b.classes else None
        else:
            run = blocks[i:j]
            y_pred = [v for r in run for v in r.y_pred]
            proba = np.concatenate([r.proba for r in run]) if b.classes else None
            yield b.start, run[-1].stop, b.classes, y_pred, proba
        i = j


# --- JSON outputs -----------------------------------------------------------------------------
#
# NaN and infinities are written as Python's json writes them (``NaN``, ``Infinity``), where
# msgpack carries them as floats: the record is then refused by the contract in both formats
# alike (``non_finite``) instead of failing the worker's batch.

_json_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps_json(obj) -> bytes:
    """Compact UTF-8 JSON of a map of plain values (an output message).

    Examples
    --------
    >>> dumps_json({"v": 1, "stream": "s1", "scores": [0.1, 1e-300], "feature": None})
    b'{"v":1,"stream":"s1","scores":[0.1,1e-300],"feature":null}'
    """
    return _json_text(obj).encode()


#: field order of a JSON prediction (that of the README's example); other fields follow
PREDICTION_FIELDS = ("v", "stream", "id", "model", "y_pred", "classes", "proba", "y_true",
                     "topic", "partition", "offset", "ts", "n_features")


def _json_template(const: dict, varying: list[str]) -> tuple[str, list[str]]:
    """A ``%``-format of a JSON map whose ``varying`` fields are ``%s`` slots, and the order
    of the slots (constant fields are encoded into the text once).

    Examples
    --------
    >>> _json_template({"v": 1, "model": "m%"}, ["ts", "id"])
    ('{"v":1,"id":%s,"model":"m%%","ts":%s}', ['id', 'ts'])
    """
    names = [f for f in PREDICTION_FIELDS if f in const or f in varying]
    names += [f for f in (*const, *varying) if f not in names]
    parts, slots = [], []
    for name in names:
        head = _json_text(name).replace("%", "%%") + ":"
        if name in const:
            parts.append(head + _json_text(const[name]).replace("%", "%%"))
        else:
            parts.append(head + "%s")
            slots.append(name)
    return "{" + ",".join(parts) + "}", slots


def _int_texts(values) -> list[str]:
    """JSON of a column of integers (``str`` is JSON for Python and numpy ints alike)."""
    values = _plain(values)
    return list(map(str, values)) if _only(values, _INT) else list(map(_json_text, values))


def _label_texts(values: list) -> list[str]:
    """JSON of a column of labels; a block has few distinct labels, each encoded once."""
    cache: dict = {}
    out = []
    for v in values:
        t = type(v)
        if t is list:  # regression targets: unhashable, each its own
            out.append(_json_text(v))
            continue
        text = cache.get((t, v))  # the type too: True == 1 but they differ on the wire
        if text is None:
            text = cache[(t, v)] = _json_text(v)
        out.append(text)
    return out


def _proba_texts(proba: np.ndarray) -> list[str]:
    """JSON of each row of probabilities (``repr`` is what json writes for finite floats)."""
    rows = proba.tolist()
    if not np.isfinite(proba).all():
        return list(map(_json_text, rows))
    return ["[" + ",".join(map(repr, row)) + "]" for row in rows]


def encode_predictions_json(const: dict, ids: list, y_pred: list, y_true: list,
                            proba: np.ndarray | None, offsets: list, ts: list) -> list[bytes]:
    """JSON values of Prediction messages, one per row, in row order.

    The arguments are those of :func:`encode_predictions`; a value decodes (with
    :func:`schemas.codec.decode`) to the same :class:`~schemas.Prediction` as the msgpack one.
    Each column is turned into JSON texts at once, then the texts fill a template in which
    the constant fields are encoded already.

    Examples
    --------
    >>> const = {"v": 1, "stream": "s1", "model": "forgetful_tree", "classes": ["UP", "DOWN"],
    ...          "topic": "sf.instances", "partition": 0}
    >>> value = encode_predictions_json(const, [7], ["UP"], [None], np.array([[0.8, 0.2]]),
    ...                                 [41], [1700000000000])[0]
    >>> print(value.decode())  # doctest: +NORMALIZE_WHITESPACE
    {"v":1,"stream":"s1","id":7,"model":"forgetful_tree","y_pred":"UP","classes":["UP","DOWN"],"proba":[0.8,0.2],"y_true":null,"topic":"sf.instances","partition":0,"offset":41,"ts":1700000000000}
    """
    n = len(ids)
    if n == 0:
        return []
    columns = {"id": _int_texts(ids), "y_pred": _label_texts(y_pred),
               "y_true": _label_texts(y_true), "offset": _int_texts(offsets),
               "ts": _int_texts(ts)}
    if proba is None:  # no class seen yet: an empty list, as in msgpack
        const = {**const, "proba": []}
    else:
        columns["proba"] = _proba_texts(proba)
    fmt, slots = _json_template(const, list(columns))
    return [(fmt % row).encode() for row in zip(*(columns[name] for name in slots))]
