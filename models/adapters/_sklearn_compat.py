"""What scikit-learn asks of an estimator that only its own classes give, without importing it.

``sklearn.utils.get_tags`` calls ``estimator.__sklearn_tags__()`` and refuses an estimator
that has none (scikit-learn 1.6 on), so ``is_classifier``, ``cross_val_score``' stratified
folds and the search classes need tags; its checks expect its own ``NotFittedError`` and
``DataConversionWarning``. Only scikit-learn asks for tags, and it has then loaded
``sklearn.utils``; an unfitted adapter raises scikit-learn's error class too, and warns with
its warning class, when scikit-learn is loaded. Both are taken from the modules as found in
``sys.modules``, so that ``models/`` stays free of any import of scikit-learn and costs
nothing to those who do not use it.
"""

from __future__ import annotations

import sys


class NotFittedError(ValueError, AttributeError):
    """Asked before ``fit`` or ``partial_fit`` (the bases of scikit-learn's
    ``NotFittedError``: code catching either catches this).

    When scikit-learn is loaded the error raised is also an instance of its
    ``sklearn.exceptions.NotFittedError`` (:func:`not_fitted`).
    """


_WITH_SKLEARN: dict[type, type] = {}


def not_fitted(message: str) -> NotFittedError:
    """A :class:`NotFittedError`, one of scikit-learn's too when scikit-learn is loaded.

    Examples
    --------
    >>> from unittest import mock
    >>> with mock.patch.dict(sys.modules, {"sklearn.exceptions": None}):
    ...     type(not_fitted("call fit first")).__mro__[1].__name__
    'ValueError'
    """
    exceptions = sys.modules.get("sklearn.exceptions")
    theirs = getattr(exceptions, "NotFittedError", None)
    if theirs is None:
        return NotFittedError(message)
    if theirs not in _WITH_SKLEARN:
        _WITH_SKLEARN[theirs] = type("NotFittedError", (NotFittedError, theirs),
                                     {"__module__": __name__})
    return _WITH_SKLEARN[theirs](message)


def conversion_warning() -> type[Warning]:
    """scikit-learn's ``DataConversionWarning`` when it is loaded, else ``UserWarning``.

    Examples
    --------
    >>> from unittest import mock
    >>> with mock.patch.dict(sys.modules, {"sklearn.exceptions": None}):
    ...     conversion_warning().__name__
    'UserWarning'
    """
    theirs = getattr(sys.modules.get("sklearn.exceptions"), "DataConversionWarning", None)
    return theirs if theirs is not None else UserWarning


def sklearn_tags(estimator_type: str, multi_output: bool = False):
    """scikit-learn's ``Tags`` of a ``"classifier"`` or ``"regressor"`` that takes finite
    float matrices and needs ``y`` (``AttributeError`` when scikit-learn is not loaded, which
    is what ``getattr`` and ``hasattr`` callers expect of a missing method).

    Examples
    --------
    >>> from unittest import mock
    >>> with mock.patch.dict(sys.modules, {"sklearn.utils": None}):
    ...     sklearn_tags("classifier")
    Traceback (most recent call last):
    ...
    AttributeError: __sklearn_tags__ is asked by scikit-learn >= 1.6, not loaded here
    """
    utils = sys.modules.get("sklearn.utils")
    if utils is None or not hasattr(utils, "Tags"):
        raise AttributeError("__sklearn_tags__ is asked by scikit-learn >= 1.6, not loaded here")
    tags = utils.Tags(estimator_type=estimator_type,
                      target_tags=utils.TargetTags(required=True, multi_output=multi_output,
                                                   single_output=True))
    if estimator_type == "classifier":
        tags.classifier_tags = utils.ClassifierTags()
    else:
        tags.regressor_tags = utils.RegressorTags()
    return tags
