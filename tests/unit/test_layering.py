"""Dependencies point one way: worker -> models/schemas; models import only numpy and numba."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _package_imports(package: str) -> dict[str, set[str]]:
    return {str(p.relative_to(ROOT)): _imports(p) for p in (ROOT / package).rglob("*.py")}


def test_models_import_only_numpy_numba_and_the_standard_library():
    allowed = {"numpy", "numba"} | set(sys.stdlib_module_names)
    offenders = {
        path: sorted(names - allowed)
        for path, names in _package_imports("models").items()
        if names - allowed
    }
    assert offenders == {}


def test_schemas_do_not_import_worker_or_models_internals():
    offenders = {p: n & {"worker", "river"} for p, n in _package_imports("schemas").items()}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_product_never_imports_test_only_libraries():
    test_only = {"river", "sklearn", "pytest", "hypothesis", "capymoa", "testcontainers"}
    for package in ("worker", "models", "schemas"):
        offenders = {p: n & test_only for p, n in _package_imports(package).items()}
        assert {p: n for p, n in offenders.items() if n} == {}, package
