"""Helpers of the iSOUP benchmarks: MOA's learners in a JVM loop, river's iSOUP tree, timing,
and the sections of ``tests/benchmarks/learners/results/isoup.md``."""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.benchmarks.common import stamp_markdown, write_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "learners" / "results" / "isoup.md"
MOA_TREE = "moa.classifiers.multilabel.trees.ISOUPTree"
MOA_FOREST = ("moa.classifiers.multilabel.meta.OzaBagML "
              "-l (moa.classifiers.multilabel.trees.ISOUPTreeRF) -s {n}")


def moa_jar() -> Path:
    import capymoa

    return Path(capymoa.__file__).parent / "jar" / "moa.jar"


def run_moa(X: np.ndarray, Y: np.ndarray, cli: str, repeats: int = 3, rank_every: int = 0) -> dict:
    """MOA's learner ``cli`` test-then-train on the rows, in the JVM (``IsoupMoaLoop.java``).

    Returns the seconds of the first pass (cold JIT, as a fresh MOA process runs) and the
    best of the later passes (warm JIT), and the MAE of each target (every pass is equal).
    """
    from tests.models.isoup_streams import write_arff

    jar = moa_jar()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-cp", str(jar), "-d", tmp,
                        str(ROOT / "tests" / "benchmarks" / "learners" / "IsoupMoaLoop.java")],
                       check=True)
        arff = Path(tmp) / "stream.arff"
        write_arff(arff, X, Y)
        out = subprocess.run(["java", "-cp", f"{jar}:{tmp}", "IsoupMoaLoop", str(arff),
                              str(Y.shape[1]), cli, str(repeats), str(rank_every)],
                             capture_output=True, text=True, check=True).stdout
    runs = [[float(v) for v in line.split()] for line in out.strip().splitlines()]
    secs = [r[0] for r in runs]
    mae = np.array(runs[0][1:1 + Y.shape[1]])
    return {"first": secs[0], "warm": min(secs[1:]) if len(secs) > 1 else secs[0], "mae": mae}


def run_river(X: np.ndarray, Y: np.ndarray) -> dict:
    """river's ``ISOUPTreeRegressor()`` (defaults) with ``predict_one`` then ``learn_one``."""
    from river import tree

    rows = [dict(enumerate(r)) for r in X.tolist()]
    targets = [dict(enumerate(r)) for r in Y.tolist()]
    model = tree.ISOUPTreeRegressor()
    P = np.zeros_like(Y)
    w0, c0 = time.perf_counter(), time.process_time()
    for i, (x, y) in enumerate(zip(rows, targets)):
        p = model.predict_one(x)
        if p:
            P[i] = [p.get(j, 0.0) for j in range(Y.shape[1])]
        model.learn_one(x, y)
    return {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
            "mae": np.abs(P - Y).mean(axis=0)}


def timed(fn):
    """``(result, wall seconds, CPU seconds)`` of ``fn()``."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def write_section(name: str, text: str) -> None:
    """Replace (or append) section ``name`` of ``tests/benchmarks/learners/results/isoup.md``."""
    head = "# iSOUP-Tree and iSOUP-SymRF: fidelity and speed\n\n"
    body = RESULTS.read_text() if RESULTS.exists() else head
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{start}\n{stamp_markdown()}\n{text.rstrip()}\n{end}"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    body = pattern.sub(lambda _: block, body) if pattern.search(body) else body.rstrip() + "\n\n" + block
    write_results(RESULTS, body.rstrip(), stamp=False)
