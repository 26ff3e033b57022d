"""Helpers the benchmark scripts share: a stream as an ARFF file for MOA, and the cost of a
cold numba compilation measured in a fresh process with an empty cache."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_arff(path: Path, X, y, labels=None, relation: str = "bench") -> None:
    """``X`` (numeric columns ``x0..``) and the class ``y`` as an ARFF file.

    ``labels``: the nominal values in header order (default: the labels as text, sorted),
    which is MOA's class-index order.
    """
    labels = sorted({str(v) for v in y}) if labels is None else labels
    with open(path, "w") as fh:
        fh.write(f"@relation {relation}\n")
        for j in range(X.shape[1]):
            fh.write(f"@attribute x{j} numeric\n")
        fh.write("@attribute class {" + ",".join(str(v) for v in labels) + "}\n@data\n")
        for row, label in zip(X.tolist(), y):
            fh.write(",".join(repr(v) for v in row) + f",{label}\n")


def cold_compile(script: str) -> tuple[float, ...]:
    """The seconds ``script`` prints (space-separated), run with an empty numba cache.

    ``script`` may use ``{root}`` for the repository root (to put it on ``sys.path``).
    """
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
        out = subprocess.run([sys.executable, "-c", script.format(root=str(ROOT))], env=env,
                             capture_output=True, text=True, check=True).stdout
    return tuple(float(v) for v in out.split())


@contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    """The brokers to benchmark against: ``bootstrap`` as given, or a local broker started
    from the jars (on free ports) and stopped at the end."""
    if bootstrap is not None:
        yield bootstrap
        return
    from worker.dev.broker import LocalBroker, free_port

    port = free_port()
    broker = LocalBroker(port=port, controller_port=free_port(exclude=[port]))
    broker.fetch()
    try:
        yield broker.start()
    finally:
        broker.stop()
