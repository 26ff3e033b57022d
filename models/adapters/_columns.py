"""Dict rows as matrix rows: the keys of a dict in a fixed column order.

A learner of the core takes rows of a fixed width with the features in the same columns every
time; river's convention is a dict per row, keyed by feature name in any order. The order is
fixed once (the first dict's keys, or names given up front) and every later dict is read in it.
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np

#: what a dict row may do with a key the columns do not name
UNKNOWN = ("raise", "ignore")


class Columns:
    """The keys of dict rows in a fixed column order.

    Parameters
    ----------
    names : sequence of hashable, optional
        The keys in column order; ``None``: the keys of the first dict read, in its order.
    unknown : {"raise", "ignore"}, default "raise"
        What a key the columns do not name does: raise ``ValueError``, as the worker refuses
        an instance with an unknown feature, or be left out.
    what : str, default "feature"
        What a key is, for error messages.

    Notes
    -----
    A key the columns name but a dict lacks is always an error: no learner of the core takes
    missing values (``check_X`` refuses NaN), so there is nothing it could stand for.

    Examples
    --------
    >>> cols = Columns()
    >>> cols.row({"b": 2.0, "a": 1.0}).tolist()
    [[2.0, 1.0]]
    >>> cols.row({"a": 3.0, "b": 4.0}).tolist()
    [[4.0, 3.0]]
    >>> cols.row({"a": 3.0})
    Traceback (most recent call last):
    ...
    ValueError: the row lacks feature 'b' (the learners take no missing values)
    >>> cols.row({"a": 3.0, "b": 4.0, "c": 5.0})
    Traceback (most recent call last):
    ...
    ValueError: the row has feature 'c' that the columns ['b', 'a'] do not name (unknown="ignore" leaves such keys out)
    """

    def __init__(self, names=None, unknown: str = "raise", what: str = "feature"):
        if unknown not in UNKNOWN:
            raise ValueError(f"unknown must be one of {UNKNOWN}, got {unknown!r}")
        self.unknown = unknown
        self.what = what
        self.names: tuple | None = None
        self._get = None
        if names is not None:
            self.fix(names)

    def __len__(self) -> int:
        return 0 if self.names is None else len(self.names)

    @property
    def fixed(self) -> bool:
        """Whether the column order is known yet."""
        return self.names is not None

    def fix(self, names) -> None:
        """Fix the column order to ``names`` (the keys of a dict: its own order)."""
        names = tuple(names)
        if not names:
            raise ValueError(f"a row needs at least one {self.what}")
        if len(set(names)) != len(names):
            raise ValueError(f"{self.what} names repeat: {list(names)}")
        self.names = names
        self._index = {k: j for j, k in enumerate(names)}
        # one C call reads a row's values in column order; with a single name itemgetter
        # gives the value itself, which the reshape in :meth:`row` makes a row again
        self._get = itemgetter(*names)

    def row(self, x) -> np.ndarray:
        """The dict ``x`` as a ``(1, d)`` float64 row (the first dict fixes the order)."""
        if self._get is None:
            return self._first_row(x)
        try:
            values = self._get(x)
        except KeyError as exc:
            raise ValueError(f"the row lacks {self.what} {exc.args[0]!r} "
                             "(the learners take no missing values)") from None
        except TypeError:
            raise ValueError(f"a row must be a dict of {self.what}s, got {type(x).__name__}") \
                from None
        if len(x) != len(self.names) and self.unknown == "raise":
            self._refuse_unknown(x)
        try:
            return np.array(values, dtype=np.float64).reshape(1, len(self.names))
        except (TypeError, ValueError):
            raise ValueError(self._not_numbers(x)) from None

    def rows(self, xs) -> np.ndarray:
        """The dicts ``xs`` as an ``(n, d)`` float64 matrix (one row per dict)."""
        xs = list(xs)
        if not xs:
            return np.zeros((0, len(self)))
        return np.concatenate([self.row(x) for x in xs])

    def named(self, values) -> dict:
        """``{name: value}`` for values aligned to the columns."""
        values = np.asarray(values).ravel()
        if values.shape[0] != len(self):
            raise ValueError(f"{values.shape[0]} values for {len(self)} {self.what}s")
        return dict(zip(self.names, values.tolist()))

    def _first_row(self, x) -> np.ndarray:
        """The first dict's row, its keys fixing the order (unfixed again if it fails)."""
        if not hasattr(x, "keys"):
            raise ValueError(f"a row must be a dict of {self.what}s, got {type(x).__name__}")
        try:
            self.fix(x.keys())
            return self.row(x)
        except (TypeError, ValueError):
            self.names = self._get = None
            raise

    def _refuse_unknown(self, x) -> None:
        extra = [k for k in x if k not in self._index]
        raise ValueError(f"the row has {self.what} {extra[0]!r} that the columns "
                         f"{list(self.names)} do not name (unknown=\"ignore\" leaves such "
                         "keys out)")

    def _not_numbers(self, x) -> str:
        for name in self.names:
            try:
                float(x[name])
            except (TypeError, ValueError):
                return f"{self.what} {name!r} is {x[name]!r}, not a number"
        return f"the {self.what} values of the row are not numbers"
