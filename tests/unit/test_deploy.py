"""Static checks of the worker image, quick enough for every run (the image itself is built and run
by ``make deploy-test``): what it copies exists, it starts the same console script the tests run as
a plain process, its pinned requirements are the project's runtime dependencies, and it leaves the
development tools out."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, lines continued with a backslash joined."""
    out, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        word, _, rest = (pending + line).partition(" ")
        pending = ""
        out.append((word.upper(), rest.strip()))
    return out


def test_every_copied_path_exists():
    # a source with a wildcard is optional (the wheelhouse exists only after deploy/image/build.sh)
    for word, rest in _instructions():
        if word == "COPY" and not rest.startswith("--from"):
            *sources, _dest = rest.split()
            fixed = [src for src in sources if not set(src) & set("*?[")]
            assert fixed, rest
            for src in fixed:
                assert (ROOT / src).exists(), src


def test_entrypoint_is_exec_form_of_the_console_script():
    entry = [rest for word, rest in _instructions() if word == "ENTRYPOINT"]
    cmd = [rest for word, rest in _instructions() if word == "CMD"]
    assert len(entry) == 1 and len(cmd) == 1
    command = json.loads(entry[0]) + json.loads(cmd[0])  # exec form, so SIGTERM reaches the worker
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert command[0] in scripts and command[1:] == ["run"]


def test_warmup_module_named_by_the_image_exists():
    runs = " ".join(rest for word, rest in _instructions() if word == "RUN")
    ours = [m for m in re.findall(r"python -m ([\w.]+)", runs) if m.split(".")[0] == "worker"]
    assert ours == ["worker.tools.warmup"]
    assert (ROOT / "worker" / "tools" / "warmup.py").exists()


def _pinned(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line} is not pinned"
            out[canonicalize_name(name)] = version
    return out


def test_pinned_requirements_are_the_runtime_dependencies():
    """Every runtime dependency of pyproject.toml is pinned, at a version its range accepts, and
    neither the test extra nor the build backend slips into the image's list."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = _pinned(ROOT / "deploy" / "docker" / "requirements.txt")
    for dep in map(Requirement, project["dependencies"]):
        name = canonicalize_name(dep.name)
        assert name in pinned, f"{dep.name} is not in deploy/docker/requirements.txt"
        assert dep.specifier.contains(pinned[name]), f"{dep.name}=={pinned[name]} outside {dep.specifier}"
    test_only = {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["test"]}
    assert not test_only & set(pinned), test_only & set(pinned)
    build = _pinned(ROOT / "deploy" / "docker" / "build-requirements.txt")
    assert not set(build) & set(pinned)
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for req in map(Requirement, backend):
        assert req.specifier.contains(build[canonicalize_name(req.name)]), req


def test_build_context_leaves_the_dev_subpackage_out():
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert "worker/tools/dev" in lines
    # a later "!" rule would bring it back
    assert lines.index("worker/tools/dev") > max(i for i, ln in enumerate(lines) if ln.startswith("!worker"))
