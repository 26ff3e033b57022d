"""Static checks of the worker image (no Docker engine runs here): what it copies exists and it
starts the same console script the tests run as a plain process."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    out = []
    for line in DOCKERFILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_every_copied_path_exists():
    for word, rest in _instructions():
        if word == "COPY" and not rest.startswith("--from"):
            *sources, _dest = rest.split()
            for src in sources:
                assert (ROOT / src).exists(), src


def test_entrypoint_is_exec_form_of_the_console_script():
    entry = [rest for word, rest in _instructions() if word == "ENTRYPOINT"]
    assert len(entry) == 1
    command = json.loads(entry[0])  # exec form, so SIGTERM reaches the worker
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert command[0] in scripts and command[1:] == ["run"]


def test_warmup_module_named_by_the_image_exists():
    runs = " ".join(rest for word, rest in _instructions() if word == "RUN")
    ours = [m for m in re.findall(r"python -m ([\w.]+)", runs) if m.split(".")[0] == "worker"]
    assert ours == ["worker.warmup"]
    assert (ROOT / "worker" / "warmup.py").exists()
