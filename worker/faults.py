"""Test-only fault injection: ``streamforest run --test-fault NAME=N[,NAME=N]``.

The integration tests use these switches to put a real worker, on a real broker, into the
situations exactly-once must survive. Each fires once, at the N-th occurrence of its event in
the life of the process:

* ``crash_after_chunks``: SIGKILL once N checkpoint chunks were written (and flushed);
* ``crash_before_commit``: SIGKILL in the N-th transaction, outputs produced and flushed but
  not committed; ``crash_after_commit``: SIGKILL right after the N-th commit;
* ``raise_before_begin``: an unexpected exception in the N-th batch after its rows were
  learned, before its transaction begins; ``raise_after_begin``: the same after its outputs
  were produced inside the open transaction;
* ``drop_chunk``: from the N-th checkpoint chunk on, every chunk is left out (the manifests
  still name them); ``corrupt_chunk``: from the N-th on, every chunk's bytes are garbled.
  Every checkpoint the process writes from then on is unusable, whichever it is.
"""

from __future__ import annotations

import os
import signal


class InjectedFault(RuntimeError):
    """The unexpected exception a ``raise_*`` switch throws."""


class Faults:
    """The parsed switches (see the module doc); an empty spec injects nothing."""

    NAMES = ("crash_after_chunks", "crash_before_commit", "crash_after_commit",
             "raise_before_begin", "raise_after_begin", "drop_chunk", "corrupt_chunk")

    def __init__(self, spec: str | None = None):
        self.values: dict[str, int] = {}
        for part in filter(None, (spec or "").split(",")):
            name, _, n = part.partition("=")
            if name not in self.NAMES:
                raise ValueError(f"unknown fault {name!r}; choose from {self.NAMES}")
            self.values[name] = int(n)

    def get(self, name: str) -> int | None:
        return self.values.get(name)

    def at(self, name: str, n: int) -> bool:
        """Whether switch ``name`` fires at occurrence ``n``."""
        return self.values.get(name) == n

    def crash_if(self, name: str, n: int, flush=None) -> None:
        """SIGKILL this process if ``name`` fires at ``n`` (after ``flush()``, if given)."""
        if self.at(name, n):
            if flush is not None:
                flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def raise_if(self, name: str, n: int) -> None:
        if self.at(name, n):
            raise InjectedFault(f"test fault {name}={n}")

    def chunk(self, n: int, data: bytes) -> bytes | None:
        """The bytes to write as the ``n``-th chunk (``None``: leave it out)."""
        if self._from("drop_chunk", n):
            return None
        if self._from("corrupt_chunk", n):
            return bytes(reversed(data)) or b"\xc1"
        return data

    def _from(self, name: str, n: int) -> bool:
        first = self.values.get(name)
        return first is not None and n >= first
