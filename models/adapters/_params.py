"""A learner's constructor parameters, read as scikit-learn's ``BaseEstimator`` reads an
estimator's: the names of ``__init__``'s signature (no ``*args`` or ``**kwargs``)."""

from __future__ import annotations

import inspect

from ..core.base import Learner
from ..drift.drift_wrapper import fresh_copy


def init_parameters(cls) -> dict:
    """``{name: default}`` of ``cls.__init__`` (``inspect.Parameter.empty``: none).

    Examples
    --------
    >>> from models import DriftDetectionClassifier
    >>> list(init_parameters(DriftDetectionClassifier))[:2]
    ['learner', 'warm_start']
    """
    if not isinstance(cls, type):
        raise TypeError(f"a learner class is needed, got {cls!r}")
    sig = inspect.signature(cls.__init__)
    return {n: p.default for n, p in sig.parameters.items()
            if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def current_params(learner) -> dict:
    """The constructor arguments that build an untrained twin of ``learner``.

    Plain values come from ``learner.params``; a parameter that is a learner (the downstream
    learner of a wrapper) is read from the attribute of its name, as a fresh copy, so that
    the template never carries what the wrapped learner learned.

    Examples
    --------
    >>> from models import DriftDetectionClassifier, NaiveBayes
    >>> p = current_params(DriftDetectionClassifier(NaiveBayes(), warm_start=40))
    >>> p["warm_start"], type(p["learner"]).__name__
    (40, 'NaiveBayes')
    """
    out = {}
    for name in init_parameters(type(learner)):
        if name in learner.params:
            out[name] = learner.params[name]
        elif isinstance(getattr(learner, name, None), Learner):
            out[name] = fresh_copy(getattr(learner, name))
    return out


def build(cls, params: dict):
    """A new, untrained ``cls(**params)``; learner-valued parameters are copied fresh first,
    so that building never trains (or shares) the template a caller keeps."""
    args = {k: fresh_copy(v) if isinstance(v, Learner) else v for k, v in params.items()}
    return cls(**args)
