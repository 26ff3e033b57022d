"""The one error that ends a worker on purpose (see :mod:`worker.app`)."""

from __future__ import annotations


class WorkerFailed(RuntimeError):
    """The worker cannot go on; the message says why (and what to fix)."""
