"""Compute the digests of :mod:`tests.determinism.cases` in this process and write them as JSON.

Run by ``tests/determinism/test_cpu_feature_sets.py`` once per CPU feature set, each in its
own process (numpy, glibc and numba choose their code paths at start)::

    python -m tests.determinism.run --out digests.json --states-out states/
    python -m tests.determinism.run --out restored.json --parts restored --states-in states/

``--states-out`` writes each restore case's state bytes at its cut; ``--states-in`` restores
every case from such a directory (written under another feature set) and continues.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

#: what a run can compute (``restored`` needs ``--states-in``)
PARTS = ("functions", "pipelines", "wire", "learners", "states", "restored")


def feature_set() -> dict:
    """What this process's numpy, numba and C library were told or found."""
    import numba.core.config as numba_config
    import numpy as np
    from numpy._core import _multiarray_umath as umath

    found = [name for name in umath.__cpu_dispatch__ if umath.__cpu_features__.get(name)]
    disabled = os.environ.get("NPY_DISABLE_CPU_FEATURES", "").split()
    return {"numpy": np.__version__,
            "numpy_dispatch": [name for name in found if name not in disabled],
            "numba_cpu": numba_config.CPU_NAME or "host",
            "glibc_tunables": os.environ.get("GLIBC_TUNABLES", "")}


def _state_file(directory: Path, case: str) -> Path:
    return directory / (case.replace(":", "__") + ".state")


def compute(parts=PARTS, states_out: Path | None = None, states_in: Path | None = None) -> dict:
    """The digests of ``parts`` (see :data:`PARTS`); ``states`` also gives ``after_cut``, the
    digests of what each restore case answers after its cut, and writes the states at the cut
    to ``states_out``; ``restored`` restores every case from ``states_in``."""
    from tests.determinism import cases

    started = time.perf_counter()
    out: dict = {"feature_set": feature_set()}
    if "functions" in parts:
        out["functions"] = {"fmath": cases.functions_digest()}
    if "pipelines" in parts:
        out["pipelines"] = {name: list(cases.pipeline_case(name)) for name in cases.PIPELINES}
    if "wire" in parts:
        out["wire"] = {name: cases.wire_case(name) for name in cases.WIRE}
    if "learners" in parts:
        out["learners"] = cases.learner_digests()
    if "states" in parts:
        out["states"], out["after_cut"] = {}, {}
        for case in cases.state_cases():
            digest, state = cases.restore_case(case)
            out["after_cut"][case] = digest
            out["states"][case] = hashlib.sha256(state).hexdigest()
            if states_out is not None:
                states_out.mkdir(parents=True, exist_ok=True)
                _state_file(states_out, case).write_bytes(state)
    if "restored" in parts and states_in is not None:
        out["restored"] = {case: cases.restore_case(case, _state_file(states_in, case).read_bytes())[0]
                           for case in cases.state_cases()}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="JSON file to write")
    ap.add_argument("--parts", default=",".join(PARTS),
                    help=f"comma-separated, of {', '.join(PARTS)} (default: all)")
    ap.add_argument("--states-out", type=Path, help="write each restore case's state here")
    ap.add_argument("--states-in", type=Path, help="restore every case from states written here")
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    if set(parts) - set(PARTS):
        ap.error(f"unknown parts {sorted(set(parts) - set(PARTS))}; choose from {', '.join(PARTS)}")
    args.out.write_text(json.dumps(compute(parts, args.states_out, args.states_in), indent=1,
                                   sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
