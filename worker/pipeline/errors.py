"""The one error of a stream pipeline: a message it cannot take."""

from __future__ import annotations


class PipelineError(ValueError):
    """A message a stream's pipeline cannot take (dead-lettered with ``code`` and reason).

    Examples
    --------
    >>> str(PipelineError("invalid_target", "y must be a class label"))
    'invalid_target: y must be a class label'
    """

    def __init__(self, code: str, reason: str):
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
