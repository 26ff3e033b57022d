"""The commit thread: ends a poll's transaction while the next poll is consumed and computed.

A single daemon thread fed through a queue; :meth:`Committer.submit` returns a
:class:`concurrent.futures.Future`. It is a daemon (unlike a ``ThreadPoolExecutor``'s
threads, which the interpreter joins at exit) because a transaction call can block far past
its timeout while a broker is away: the worker then gives that producer up (see
``Worker._wait_commit``), and a thread stuck in it must not keep the process from exiting.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future


class Committer:
    """One daemon thread running submitted calls in order."""

    def __init__(self, name: str = "streamforest-commit"):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self._queue.put((future, fn, args))
        return future

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 (handed to whoever waits on the future)
                future.set_exception(exc)

    def shutdown(self, wait: bool = True) -> None:
        """Stop after the calls already submitted (``wait``: until they ended)."""
        self._queue.put(None)
        if wait:
            self._thread.join()
