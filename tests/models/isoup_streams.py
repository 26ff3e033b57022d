"""Multi-target regression streams of the iSOUP tests and benchmarks.

* :func:`bike_sharing`: UCI Bike Sharing, hourly (the shared data folder), 12 features after
  dropping ``instant`` and ``dteday``; targets casual, registered, cnt.
* :func:`scm20d`: Mulan SCM20d, 61 features, 16 targets (the last 16 ARFF attributes).
* :func:`relevant_stream`: synthetic, 10 features ``x ~ U(-1, 1)``, 3 targets that depend
  only on ``x0..x3`` (:data:`RELEVANT`); ``x4..x9`` are noise, so a ranking is right when it
  puts the four relevant features first.
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
RELEVANT = (0, 1, 2, 3)


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
    """``(X, Y, feature names)``: targets built from ``x0..x3`` only, plus N(0, noise).

    ``y0 = 2 x0 + 3 [x1 > 0]``, ``y1 = 2 sin(pi x2) + 2 x0 x3``,
    ``y2 = 4 [x3 > 0.3] + x1`` (a mix of linear, step and smooth non-linear parts, so both
    leaf models and splits matter).
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 10))
    x0, x1, x2, x3 = X[:, 0], X[:, 1], X[:, 2], X[:, 3]
    Y = np.column_stack([2 * x0 + 3 * (x1 > 0), 2 * np.sin(np.pi * x2) + 2 * x0 * x3,
                         4 * (x3 > 0.3) + x1])
    Y = Y + rng.normal(0.0, noise, Y.shape)
    return X, np.ascontiguousarray(Y), [f"x{i}" for i in range(10)]


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
