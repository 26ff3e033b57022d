"""The rows of a CSV or JSON-lines file as :class:`schemas.Instance` records
(``streamforest produce file PATH``).

Every column is a feature, sent by name (``x`` is a map), except the ones the options name:
the stream (``--stream-column``; else ``--stream`` for every row), the label (``--label``;
without it the instances are unlabelled), the instance id (``--id``; default: the row's number,
counting from 0) and the event time (``--ts``, whole milliseconds; default: the row's number).

* CSV: the first line names the columns. A feature is a number (``1``, ``-0.5``, ``2e3``); an
  empty cell or text is refused. A label column whose values are all whole numbers holds class
  labels (ints), one whose values are all numbers holds regression targets (floats), any other
  holds text labels; an empty label cell leaves that row unlabelled. An id column of whole
  numbers gives int ids, any other text ids.
* JSON lines: one object per line, its values as typed (a feature must be a JSON number; a
  ``null`` label leaves the row unlabelled; a label may be a list of regression targets).

Each record is checked as the worker checks it (:func:`schemas.instances.decode_instance` with the
worker's limits, against the feature names of its stream's first row): a file the worker
would dead-letter any part of is refused before anything is sent, naming the line.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgpack

from schemas.errors import DecodeError
from schemas.instances import InstanceLimits, decode_instance

from ...cli import UsageError
from ...pipeline.errors import PipelineError
from ...pipeline.tasks import make_task, task_of_label

_pack = msgpack.Packer(use_bin_type=True).pack
_WHOLE = re.compile(r"[+-]?\d+")

FORMATS = ("csv", "jsonl")
_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@dataclass
class Columns:
    """Which columns are not features (``None``: not in the file)."""

    stream: str | None = None  # the stream id of every row (without stream_column)
    stream_column: str | None = None
    label: str | None = None
    id: str | None = None
    ts: str | None = None

    def special(self) -> set[str]:
        return {c for c in (self.stream_column, self.label, self.id, self.ts) if c is not None}


@dataclass
class Records:
    """Checked records of a file: ``(stream, msgpack value)`` in file order."""

    values: list[tuple[str, bytes]] = field(default_factory=list)
    streams: dict[str, int] = field(default_factory=dict)  # stream -> instances
    labelled: int = 0


def file_format(path: str, given: str | None) -> str:
    """``--format``, else the one of the file's extension (stdin needs ``--format``).

    Examples
    --------
    >>> file_format("rows.CSV", None), file_format("-", "jsonl")
    ('csv', 'jsonl')
    """
    if given:
        return given
    if path == "-":
        raise UsageError("reading stdin (-) needs --format csv or --format jsonl")
    fmt = _EXTENSIONS.get(Path(path).suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of {path!r} from its extension: name it with "
                         "--format csv or --format jsonl (or use .csv / .jsonl)")
    return fmt


def read_records(path: str, fmt: str, cols: Columns, *, max_bytes: int,
                 limits: InstanceLimits) -> Records:
    """Read, convert and check every row of ``path`` (``-``: stdin); raise :class:`UsageError`
    naming the line of the first row that cannot be sent as the worker would take it."""
    where = "stdin" if path == "-" else path
    text = None
    try:
        text = _open(path)
        rows = _csv_rows(text, cols, where) if fmt == "csv" else _jsonl_rows(text, cols, where)
        return _checked(rows, cols, where, max_bytes, limits)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {where}: {exc.strerror or exc}") from None
    finally:
        if text is not None and path != "-":
            text.close()


def _open(path: str) -> io.TextIOBase:
    if path == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _csv_rows(text, cols: Columns, where: str) -> Iterator[tuple[int, dict]]:
    """``(line, instance fields)`` of every CSV row (values converted, not yet checked)."""
    reader = csv.reader(text)
    header = next(reader, None)
    if header is None:
        raise UsageError(f"{where} is empty: its first line must name the columns")
    _check_header(header, cols, where, 1)
    raw = []
    for row in reader:
        if not row or row == [""]:
            continue  # a blank line
        if len(row) != len(header):
            raise UsageError(f"{where}, line {reader.line_num}: {len(row)} fields, but the header "
                             f"names {len(header)} columns")
        raw.append((reader.line_num, dict(zip(header, row))))
    # a column's values are read alike in every row, so a stream's labels are of one kind
    label_kind = _column_kind([r[cols.label] for _, r in raw if r[cols.label] != ""]) \
        if cols.label else None
    id_kind = _column_kind([r[cols.id] for _, r in raw]) if cols.id else None
    features = [c for c in header if c not in cols.special()]
    for number, (line, r) in enumerate(raw):
        x = {}
        for name in features:
            x[name] = _csv_number(r[name], name, where, line)
        d = {"v": 1, "stream": r[cols.stream_column] if cols.stream_column else cols.stream,
             "id": _as(id_kind, r[cols.id]) if cols.id else number,
             "ts": _csv_ts(r[cols.ts], where, line) if cols.ts else number, "x": x}
        if cols.label and r[cols.label] != "":
            d["y"] = _as(label_kind, r[cols.label])
        yield line, d


def _jsonl_rows(text, cols: Columns, where: str) -> Iterator[tuple[int, dict]]:
    """``(line, instance fields)`` of every JSON line (blank lines skipped)."""
    number = 0
    seen_header = False
    for line, raw in enumerate(text, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}, line {line}: not JSON ({exc.msg}, column {exc.colno})") \
                from None
        if not isinstance(obj, dict):
            raise UsageError(f"{where}, line {line}: a JSON object (a map from column to value) "
                             f"is expected, got {type(obj).__name__}")
        if not seen_header:  # the columns the options name must be in the first row
            _check_header(list(obj), cols, where, line, every_row=False)
            seen_header = True
        for col in (cols.stream_column, cols.id, cols.ts):
            if col is not None and col not in obj:
                raise UsageError(f"{where}, line {line}: no column {col!r}")
        x = {}
        for name, value in obj.items():
            if name in cols.special():
                continue
            if type(value) not in (int, float):  # bool is not a number
                raise UsageError(f"{where}, line {line}: feature {name!r} is not a number: "
                                 f"{json.dumps(value)[:60]}")
            x[name] = float(value)
        d = {"v": 1, "stream": obj[cols.stream_column] if cols.stream_column else cols.stream,
             "id": obj[cols.id] if cols.id else number,
             "ts": obj[cols.ts] if cols.ts else number, "x": x}
        if cols.label is not None and obj.get(cols.label) is not None:
            d["y"] = obj[cols.label]
        number += 1
        yield line, d


def _check_header(names: list[str], cols: Columns, where: str, line: int,
                  every_row: bool = True) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"{where}, line {line}: column {dupes[0]!r} is named twice")
    for option, col in (("--stream-column", cols.stream_column), ("--label", cols.label),
                        ("--id", cols.id), ("--ts", cols.ts)):
        if col is not None and col not in names and (every_row or option != "--label"):
            raise UsageError(f"{option} {col}: {where} has no such column (its columns: "
                             f"{', '.join(names)[:200]})")
    if not [n for n in names if n not in cols.special()]:
        raise UsageError(f"{where}: no feature column (every column is the stream, label, id "
                         "or ts)")


def _column_kind(values: list[str]) -> type:
    """``int`` when every value is a whole number, ``float`` when every one is a number,
    else ``str``.

    Examples
    --------
    >>> _column_kind(["1", "2"]), _column_kind(["1", "2.5"]), _column_kind(["1", "UP"])
    (<class 'int'>, <class 'float'>, <class 'str'>)
    """
    if all(_WHOLE.fullmatch(v.strip()) for v in values):
        return int
    try:
        for v in values:
            float(v)
    except ValueError:
        return str
    return float


def _as(kind: type, text: str):
    return kind(text.strip()) if kind is not str else text


def _csv_number(text: str, name: str, where: str, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{where}, line {line}: feature {name!r} is not a number: "
                         f"{text[:60]!r}") from None


def _csv_ts(text: str, where: str, line: int) -> int:
    if not _WHOLE.fullmatch(text.strip()):
        raise UsageError(f"{where}, line {line}: ts {text[:60]!r} is not whole milliseconds")
    return int(text)


def _checked(rows, cols: Columns, where: str, max_bytes: int,
             limits: InstanceLimits) -> Records:
    """Pack every row and decode it as the worker does; the first refusal is a usage error."""
    out = Records()
    names: dict[str, list[str]] = {}  # stream -> the feature names its first row fixed
    tasks: dict[str, tuple] = {}  # stream -> (its task as its first label fixed it, that line)
    for line, d in rows:
        try:
            value = _pack(d)
            inst = decode_instance(value, max_bytes=max_bytes, limits=limits,
                                   feature_names=names.get(d["stream"])
                                   if isinstance(d["stream"], str) else None)
        except (DecodeError, ValueError, TypeError, OverflowError) as exc:
            raise UsageError(f"{where}, line {line}: the worker would refuse this row: "
                             f"{exc}") from None
        if inst.stream not in names:
            if not inst.x:
                raise UsageError(f"{where}, line {line}: the row has no feature")
            names[inst.stream] = list(inst.x)
        if inst.y is not None:
            _check_label(tasks, inst.stream, inst.y, where, line)
        out.values.append((inst.stream, value))
        out.streams[inst.stream] = out.streams.get(inst.stream, 0) + 1
        out.labelled += inst.y is not None
    if not out.values:
        raise UsageError(f"{where} has no rows")
    return out


def _check_label(tasks: dict, stream: str, y, where: str, line: int) -> None:
    """A label of the kind the stream's first label fixed (a class, or as many regression
    targets), as the worker holds a stream to it; else a usage error naming both lines."""
    if stream not in tasks:
        tasks[stream] = (make_task(task_of_label(y), y), line)
        return
    task, first = tasks[stream]
    try:
        task.check_label(y)
    except PipelineError as exc:
        raise UsageError(f"{where}, line {line}: the worker would refuse this row: {exc} "
                         f"(the stream's first label is on line {first})") from None
