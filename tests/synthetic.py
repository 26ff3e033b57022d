"""Seeded synthetic classification streams for tests and benchmarks beside the rotating
hyperplane (:class:`models.generators.hyperplane.RotatingHyperplane`): SEA concepts and an Agrawal-like
loan stream, each with an abrupt concept change, in the usual definitions (Street & Kim 2001;
Agrawal, Imielinski & Swami 1993), and a sparse binary stream of word occurrences whose
relevant words change (feature drift, as in spam and newsgroup streams; Katakis et al. 2010).
"""

from __future__ import annotations

import numpy as np


def _flip(y: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """``y`` with a share ``noise`` of its binary labels flipped."""
    return np.where(rng.random(y.shape[0]) < noise, 1 - y, y)


def sea(n: int, seed: int = 1, noise: float = 0.1) -> tuple[np.ndarray, list[int]]:
    """SEA concepts: three features uniform on ``[0, 10]`` (the third irrelevant), class 1
    when ``x0 + x1 <= theta``; ``theta`` goes through 8, 9, 7 and 9.5 in four equal parts
    of the stream; labels flipped with probability ``noise``.

    Examples
    --------
    >>> X, y = sea(8, seed=2)
    >>> X.shape, len(y), set(y) <= {0, 1}
    ((8, 3), 8, True)
    """
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3)) * 10.0
    theta = np.array([8.0, 9.0, 7.0, 9.5])[np.minimum(np.arange(n) * 4 // max(n, 1), 3)]
    y = (X[:, 0] + X[:, 1] <= theta).astype(np.int64)
    return np.ascontiguousarray(X), [int(v) for v in _flip(y, noise, rng)]


def agrawal(n: int, seed: int = 1, noise: float = 0.05) -> tuple[np.ndarray, list[int]]:
    """An Agrawal-like loan stream: salary, commission, age, education level, car, zip code,
    house value, years owned and loan (nine columns, integer codes for the nominal ones);
    class 1 ("group A") by Agrawal's function 1 (age below 40 or from 60) in the first half,
    by function 2 (a salary band per age band) in the second; labels flipped with
    probability ``noise``.

    Examples
    --------
    >>> X, y = agrawal(6, seed=3)
    >>> X.shape, len(y)
    ((6, 9), 6)
    """
    rng = np.random.default_rng(seed)
    salary = rng.uniform(20e3, 150e3, n)
    commission = np.where(salary >= 75e3, 0.0, rng.uniform(10e3, 75e3, n))
    age = rng.integers(20, 81, n).astype(np.float64)
    elevel = rng.integers(0, 5, n).astype(np.float64)
    car = rng.integers(1, 21, n).astype(np.float64)
    zipcode = rng.integers(0, 9, n).astype(np.float64)
    hvalue = (9.0 - zipcode) * 100e3 * rng.uniform(0.5, 1.5, n)
    hyears = rng.integers(1, 31, n).astype(np.float64)
    loan = rng.uniform(0.0, 500e3, n)
    f1 = (age < 40) | (age >= 60)
    f2 = np.where(age < 40, (salary >= 50e3) & (salary <= 100e3),
                  np.where(age < 60, (salary >= 75e3) & (salary <= 125e3),
                           (salary >= 25e3) & (salary <= 75e3)))
    y = np.where(np.arange(n) < n // 2, f1, f2).astype(np.int64)
    X = np.column_stack([salary, commission, age, elevel, car, zipcode, hvalue, hyears, loan])
    return np.ascontiguousarray(X), [int(v) for v in _flip(y, noise, rng)]


def sparse_words(n: int, n_words: int = 500, seed: int = 1, keywords: int = 5,
                 background: float = 0.02, rate: float = 0.3, switches: int = 3,
                 noise: float = 0.05) -> tuple[np.ndarray, list[int]]:
    """A high-dimensional sparse binary stream: ``n_words`` 0/1 word occurrences per row.

    Every word occurs in a row with probability ``background`` (about 10 of 500 per row).
    The class (1 or 0, equally likely) adds its own ``keywords`` words, each with
    probability ``rate``; the two keyword sets are drawn anew, disjoint, at ``switches``
    evenly spaced rows (feature drift: the words that tell the classes apart change).
    Labels are flipped with probability ``noise``.

    Examples
    --------
    >>> X, y = sparse_words(1000, seed=2)
    >>> X.shape, set(np.unique(X)) == {0.0, 1.0}, bool(5 < X.sum(axis=1).mean() < 15)
    ((1000, 500), True, True)
    """
    rng = np.random.default_rng(seed)
    X = (rng.random((n, n_words)) < background).astype(np.float64)
    y = (rng.random(n) < 0.5).astype(np.int64)
    edges = [n * (k + 1) // (switches + 1) for k in range(switches)] + [n]
    start = 0
    for stop in edges:
        words = rng.choice(n_words, 2 * keywords, replace=False)
        for cls, chosen in ((1, words[:keywords]), (0, words[keywords:])):
            rows = np.flatnonzero(y[start:stop] == cls) + start
            hits = rng.random((rows.size, keywords)) < rate
            X[rows[:, None], chosen[None, :]] = np.maximum(X[rows[:, None], chosen[None, :]],
                                                           hits)
        start = stop
    return np.ascontiguousarray(X), [int(v) for v in _flip(y, noise, rng)]
