"""Where tests and benchmarks find the real stream datasets (never needed by the product).

``STREAMFOREST_TEST_DATA`` when set; otherwise ``shared/data`` beside the checkout, or beside
the checkout a local clone was made from (a CI clone in a temporary directory).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _origin() -> Path | None:
    """The local repository this checkout was cloned from, if any."""
    try:
        url = subprocess.run(["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(url.removeprefix("file://"))
    return path if url and path.is_absolute() and path.is_dir() else None


def data_dir() -> Path:
    """The datasets folder (see module doc); the first candidate when none exists."""
    env = os.environ.get("STREAMFOREST_TEST_DATA")
    if env:
        return Path(env)
    candidates = [ROOT.parent / "shared" / "data"]
    origin = _origin()
    if origin is not None:
        candidates.append(origin.parent / "shared" / "data")
    return next((c for c in candidates if c.is_dir()), candidates[0])
