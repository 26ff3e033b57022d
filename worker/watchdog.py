"""A deadline for the steps that must not hang: the revoke callback and the shutdown.

librdkafka calls block for as long as their own timeouts allow, and a rebalance or SIGTERM
that waits on an unreachable broker would keep the member (and, on revoke, the whole group)
waiting. :class:`Watchdog` ends the process instead when a step overruns
``worker.shutdown_timeout_s``: nothing is committed then, the transaction in flight is aborted
by the broker when it times out (or fenced by the member that takes over), and the partitions'
next owner restores them from the last committed checkpoint, exactly as after a crash.
"""

from __future__ import annotations

import logging
import os
import threading

from .logs import event

log = logging.getLogger("streamforest.worker")

#: exit status of a process ended by the watchdog
EXIT_OVERDUE = 3


class Watchdog:
    """``arm(what)`` starts the clock for a step, ``disarm()`` stops it (see module doc)."""

    def __init__(self, seconds: float, exit_fn=os._exit):
        self.seconds = seconds
        self._exit = exit_fn
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def arm(self, what: str) -> None:
        with self._lock:
            if self._timer is not None:
                return  # the outer step's deadline stands (a revoke inside the shutdown)
            self._timer = threading.Timer(self.seconds, self._overdue, args=(what,))
            self._timer.daemon = True
            self._timer.start()

    def disarm(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _overdue(self, what: str) -> None:
        event(log, logging.ERROR, f"{what} did not end within worker.shutdown_timeout_s: exiting "
              "without a final commit (the next owner restores from the last checkpoint)",
              seconds=self.seconds)
        for handler in logging.getLogger().handlers:
            handler.flush()
        self._exit(EXIT_OVERDUE)
