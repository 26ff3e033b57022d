"""Multi-target regression streams of the iSOUP tests and benchmarks.

* :func:`bike_sharing`: UCI Bike Sharing, hourly (the shared data folder), 12 features after
  dropping ``instant`` and ``dteday``; targets casual, registered, cnt.
* :func:`scm20d`: Mulan SCM20d, 61 features, 16 targets (the last 16 ARFF attributes).
* :func:`relevant_stream`: synthetic, 10 features ``x ~ U(-1, 1)``, 3 targets that depend
  only on ``x2, x4, x7, x9`` (:data:`RELEVANT`); the other six are noise, so a ranking is
  right when it puts the four relevant features first. They are not the first columns, so
  a ranking that breaks ties by column index cannot look right by accident.
* :func:`switching_stream`: synthetic, 12 features ``x ~ U(-1, 1)``, 3 targets built from 3
  of them (:data:`SWITCH_BEFORE`) with noise, until an abrupt switch to 3 others
  (:data:`SWITCH_AFTER`): the relevant features change, the targets' formulas do not.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from tests.shared_data import data_dir

DATA = data_dir()
BIKE_FEATURES = ["season", "yr", "mnth", "hr", "holiday", "weekday", "workingday",
                 "weathersit", "temp", "atemp", "hum", "windspeed"]
BIKE_TARGETS = ["casual", "registered", "cnt"]
RELEVANT = (2, 4, 7, 9)
#: the features that make the targets of :func:`switching_stream` before and after its switch
SWITCH_BEFORE = (2, 6, 10)
SWITCH_AFTER = (1, 5, 8)


def available(name: str) -> bool:
    """Whether the shared data folder holds ``name``."""
    return (DATA / name).exists()


def bike_sharing() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(X, Y, feature names)`` of Bike Sharing hourly, in file order (17,379 rows)."""
    with open(DATA / "bike_sharing_hour.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    X = np.array([[float(r[c]) for c in BIKE_FEATURES] for r in rows])
    Y = np.array([[float(r[c]) for c in BIKE_TARGETS] for r in rows])
    return X, Y, list(BIKE_FEATURES)


def scm20d() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(X, Y, feature names)`` of SCM20d in file order (8,966 rows, 61 + 16 columns)."""
    names, data = [], []
    with open(DATA / "scm20d.arff") as fh:
        in_data = False
        for line in fh:
            line = line.strip()
            if not line or line.startswith("%"):
                continue
            if in_data:
                data.append([float(v) for v in line.split(",")])
            elif line.lower().startswith("@attribute"):
                names.append(line.split()[1].strip("'\""))
            elif line.lower().startswith("@data"):
                in_data = True
    A = np.array(data)
    return np.ascontiguousarray(A[:, :-16]), np.ascontiguousarray(A[:, -16:]), names[:-16]


def relevant_stream(n: int = 50_000, seed: int = 7, noise: float = 0.1):
    """``(X, Y, feature names)``: targets built from the :data:`RELEVANT` columns only, plus
    N(0, noise). With ``(a, b, c, d)`` those columns,

    ``y0 = 2 a + 3 [b > 0]``, ``y1 = 2 sin(pi c) + 2 a d``, ``y2 = 4 [d > 0.3] + b``

    (a mix of linear, step and smooth non-linear parts, so both leaf models and splits
    matter).
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 10))
    a, b, c, d = (X[:, i] for i in RELEVANT)
    Y = np.column_stack([2 * a + 3 * (b > 0), 2 * np.sin(np.pi * c) + 2 * a * d, 4 * (d > 0.3) + b])
    Y = Y + rng.normal(0.0, noise, Y.shape)
    return X, np.ascontiguousarray(Y), [f"x{i}" for i in range(10)]


def switching_stream(n: int = 20_000, seed: int = 1, switch: int | None = None,
                     noise: float = 0.5):
    """``(X, Y)``: 12 features ``U(-1, 1)``; with ``(a, b, c)`` the relevant features,

    ``y0 = 2 a + 3 [b > 0]``, ``y1 = 2 sin(pi c) + 2 a b``, ``y2 = 4 [c > 0.3] + b``

    plus ``N(0, noise)`` on each target. ``(a, b, c)`` are the columns :data:`SWITCH_BEFORE`
    for rows before ``switch`` (``n // 2`` by default) and :data:`SWITCH_AFTER` from it on:
    an abrupt change of the relevant features (3 of 12) under the same target formulas.
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 12))
    switch = n // 2 if switch is None else switch
    rows = np.arange(n)
    columns = np.where((rows < switch)[:, None], SWITCH_BEFORE, SWITCH_AFTER)
    a, b, c = (X[rows, columns[:, k]] for k in range(3))
    Y = np.column_stack([2 * a + 3 * (b > 0), 2 * np.sin(np.pi * c) + 2 * a * b, 4 * (c > 0.3) + b])
    return X, np.ascontiguousarray(Y + rng.normal(0.0, noise, Y.shape))


def rmae_terms(Y: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Per target relative MAE of prequential predictions ``P`` (Osojnik et al.): the
    model's absolute errors over those of the mean of the targets seen before each row."""
    n = Y.shape[0]
    prev_mean = np.zeros_like(Y)
    prev_mean[1:] = np.cumsum(Y, axis=0)[:-1] / np.arange(1, n)[:, None]
    return np.abs(Y - P).sum(axis=0) / np.abs(Y - prev_mean).sum(axis=0)


def write_arff(path: Path, X: np.ndarray, Y: np.ndarray, relation: str = "stream") -> None:
    """Features then targets, all numeric (MOA's ``MultiTargetArffFileStream`` input)."""
    with open(path, "w") as fh:
        fh.write(f"@relation {relation}\n")
        for i in range(X.shape[1]):
            fh.write(f"@attribute x{i} numeric\n")
        for j in range(Y.shape[1]):
            fh.write(f"@attribute y{j} numeric\n")
        fh.write("@data\n")
        np.savetxt(fh, np.hstack([X, Y]), delimiter=",", fmt="%.17g")
