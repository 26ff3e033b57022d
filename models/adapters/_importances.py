"""One ranking out of the several a learner's ``importances()`` may report."""

from __future__ import annotations

import numpy as np


def pick(importances: dict, method: str | None = None) -> np.ndarray:
    """The importances of ``method`` (``None``: the first the learner reports), as a float
    array aligned to the feature columns; empty when the learner reports none yet.

    Examples
    --------
    >>> imps = {"mdg": np.array([0.1, 0.9]), "mda": np.array([0.0, 0.2])}
    >>> pick(imps).tolist(), pick(imps, "mda").tolist(), pick({}).shape
    ([0.1, 0.9], [0.0, 0.2], (0,))
    >>> pick(imps, "gain")
    Traceback (most recent call last):
    ...
    ValueError: no importances 'gain': the learner reports ['mdg', 'mda']
    """
    if method is None:
        if not importances:
            return np.zeros(0)
        method = next(iter(importances))
    elif method not in importances:
        if not importances:
            return np.zeros(0)  # a ranker reports nothing before its first measurement
        raise ValueError(f"no importances {method!r}: the learner reports {list(importances)}")
    return np.asarray(importances[method], dtype=np.float64)
