"""Readers for the stream datasets used by the demo, the tests and the benchmarks.

The package ships two datasets, so the demo and ``streamforest produce`` run without anything
else: Electricity (``worker/tools/dev/data/elecNormNew.arff.gz``; Harries 1999, MOA's normalised
Elec2; classification) and Bike Sharing hourly (``worker/tools/dev/data/bike_sharing_hour.csv.gz``;
Fanaee-T & Gama 2013; three targets: a multi-target regression stream). The others are read from a
folder passed as ``data_dir`` (the tests and benchmarks use the repository's shared data
folder), plain or gzipped.

Each reader returns a :class:`Dataset` with float64 features in file order. Choices made for
every caller at once, so that all experiments see the same rows:

* Electricity drops the ``date`` column (7 features), as the forgetful-forest drivers and
  most stream-learning papers do; rows are used once each (45,312), without the reference
  reader's duplicated last row per day.
* Power supply tolerates its one row with a trailing comma.
* Bike sharing drops ``instant`` (a row index) and ``dteday`` (a date string); its targets
  are casual, registered and cnt.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PACKAGED_DIR = Path(__file__).resolve().parent / "data"


@dataclass
class Dataset:
    """Features, targets and names of one stream, in stream order."""

    name: str
    X: np.ndarray
    y: list | np.ndarray
    feature_names: list[str]
    task: str  # "classification" or "multitarget_regression"
    target_names: list[str] = field(default_factory=list)

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])


# name -> (file, format, task, columns to drop, number of target columns)
_CATALOGUE = {
    "electricity": ("elecNormNew.arff", "arff", "classification", ("date",), 1),
    "phishing": ("phishing_sethi.csv", "csv-noheader", "classification", (), 1),
    "powersupply": ("powersupply.arff", "arff", "classification", (), 1),
    "mixed_abrupt": ("mixed_0101_abrupto.csv", "csv", "classification", (), 1),
    "mixed_gradual": ("mixed_0101_gradual.csv", "csv", "classification", (), 1),
    "outdoor": ("outdoorStream.csv", "csv", "classification", (), 1),
    "weather": ("weather_noaa.arff", "arff", "classification", (), 1),
    "bike_sharing": (
        "bike_sharing_hour.csv", "csv", "multitarget_regression", ("instant", "dteday"), 3,
    ),
    "scm20d": ("scm20d.arff", "arff", "multitarget_regression", (), 16),
}

NAMES = tuple(_CATALOGUE)


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _find(file: str, data_dir: str | Path | None) -> Path:
    dirs = [Path(data_dir)] if data_dir is not None else []
    dirs.append(PACKAGED_DIR)
    for d in dirs:
        for candidate in (d / file, d / (file + ".gz")):
            if candidate.exists():
                return candidate
    where = ", ".join(str(d) for d in dirs)
    raise FileNotFoundError(f"dataset file {file} not found in {where}; give the folder that "
                            "holds it (--data-dir, data_dir=)")


def read_arff(path: Path) -> tuple[list[str], list[list[str]]]:
    """Attribute names and raw data rows of an ARFF file (trailing empty fields dropped)."""
    names: list[str] = []
    rows: list[list[str]] = []
    with _open_text(path) as fh:
        in_data = False
        for line in fh:
            line = line.strip()
            if not line or line.startswith("%"):
                continue
            if not in_data:
                low = line.lower()
                if low.startswith("@attribute"):
                    rest = line.split(None, 1)[1]
                    if rest.startswith("'"):
                        names.append(rest[1:].split("'", 1)[0])
                    else:
                        names.append(rest.split()[0])
                elif low.startswith("@data"):
                    in_data = True
                continue
            fields = [f.strip() for f in line.split(",")]
            while len(fields) > len(names) and fields[-1] == "":
                fields.pop()
            rows.append(fields)
    return names, rows


def read_csv(path: Path, header: bool) -> tuple[list[str], list[list[str]]]:
    """Column names (or positions) and raw rows of a CSV file."""
    with _open_text(path) as fh:
        reader = csv.reader(fh)
        rows = [[f.strip() for f in r] for r in reader if r]
    if header:
        return rows[0], rows[1:]
    return [str(i) for i in range(len(rows[0]))], rows


def _label(raw: str):
    """Class labels: integers when the text is an integer (``1.0`` -> 1), else the text."""
    try:
        f = float(raw)
    except ValueError:
        return raw
    return int(f) if f == int(f) else raw


def load(name: str, data_dir: str | Path | None = None) -> Dataset:
    """Load a dataset by name (see :data:`NAMES`).

    Parameters
    ----------
    name : str
        One of :data:`NAMES`.
    data_dir : path, optional
        Folder holding the data files; the packaged folder is searched after it.
    """
    if name not in _CATALOGUE:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(NAMES)}")
    file, fmt, task, drop, n_targets = _CATALOGUE[name]
    path = _find(file, data_dir)
    if fmt == "arff":
        names, rows = read_arff(path)
    else:
        names, rows = read_csv(path, header=(fmt == "csv"))
    width = len(names)
    bad = [i for i, r in enumerate(rows) if len(r) != width]
    if bad:
        raise ValueError(f"{path}: row {bad[0]} has {len(rows[bad[0]])} fields, expected {width}")
    keep = [j for j in range(width - n_targets) if names[j] not in drop]
    table = np.array(rows, dtype=object)
    X = np.ascontiguousarray(table[:, keep].astype(np.float64))
    if task == "classification":
        y: list | np.ndarray = [_label(v) for v in table[:, width - 1]]
        target_names = [names[width - 1]]
    else:
        y = np.ascontiguousarray(table[:, width - n_targets:].astype(np.float64))
        target_names = names[width - n_targets:]
    return Dataset(name, X, y, [names[j] for j in keep], task, target_names)
