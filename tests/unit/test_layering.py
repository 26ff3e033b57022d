"""Dependencies point one way, and each room holds one kind of thing.

* ``models`` imports only numpy, numba and the standard library;
* stream pipelines (``worker/pipeline``) import no Kafka client and no wire format;
* nothing in the runtime (``worker`` outside ``worker/tools``) imports the operator tools, and
  nothing outside ``worker/tools/dev`` the development tools, which the worker image leaves out;
* ``schemas`` never imports the worker; nothing shipped imports test-only libraries;
* learners are named in the registry only: no runtime module spells a learner family.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    """Dotted names imported by a module (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    if path.name == "__init__.py":
        package = ".".join(path.relative_to(ROOT).parts[:-1])
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _modules(folder: str, exclude: str | None = None) -> dict[str, set[str]]:
    out = {}
    for p in (ROOT / folder).rglob("*.py"):
        rel = str(p.relative_to(ROOT))
        if exclude is None or not rel.startswith(exclude):
            out[rel] = _imports(p)
    return out


def _top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def test_models_import_only_numpy_numba_and_the_standard_library():
    allowed = {"numpy", "numba", "models"} | set(sys.stdlib_module_names)
    offenders = {p: sorted(_top(n) - allowed) for p, n in _modules("models").items()
                 if _top(n) - allowed}
    assert offenders == {}


def test_stream_pipelines_import_no_kafka_client_and_no_wire_format():
    forbidden = {"confluent_kafka", "msgpack", "worker.app", "worker.intake", "worker.output", "worker.wire",
                 "worker.kafka_io", "worker.checkpoint_store", "worker.recovery", "worker.tools.dev"}
    modules = _modules("worker/pipeline")
    assert modules
    offenders = {p: sorted(x for x in n if x in forbidden or _top({x}) & forbidden)
                 for p, n in modules.items()}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_the_runtime_never_imports_the_operator_tools():
    """``worker/tools`` (tail, topics, catalog, warmup, evaluate, dev) imports the runtime, never
    the reverse; the CLI registers the tools' subcommands by name."""
    offenders = {p: sorted(x for x in n if x.startswith("worker.tools"))
                 for p, n in _modules("worker", exclude="worker/tools").items()}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_the_runtime_never_imports_the_development_tools():
    offenders = {p: sorted(x for x in n if x.startswith("worker.tools.dev"))
                 for p, n in _modules("worker", exclude="worker/tools/dev").items()}
    assert {p: n for p, n in offenders.items() if n} == {}
    # the worker image leaves them out of its build context
    assert "worker/tools/dev" in (ROOT / ".dockerignore").read_text().split()


def test_schemas_do_not_import_worker_or_models_internals():
    offenders = {p: _top(n) & {"worker", "models", "river"} for p, n in _modules("schemas").items()}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_product_never_imports_test_only_libraries():
    test_only = {"river", "sklearn", "pytest", "hypothesis", "capymoa", "testcontainers", "tests"}
    for package in ("worker", "models", "schemas"):
        offenders = {p: _top(n) & test_only for p, n in _modules(package).items()}
        assert {p: n for p, n in offenders.items() if n} == {}, package


def test_learner_families_are_named_in_the_registry_only():
    """Runtime modules choose learners through the registry (its entries and its default
    profile), never by spelling their names."""
    from models import registry

    names = set(registry.names())
    offenders = {}
    for p in (ROOT / "worker").rglob("*.py"):
        rel = str(p.relative_to(ROOT))
        if rel.startswith("worker/tools/dev"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                offenders.setdefault(rel, []).append(node.value)
    assert offenders == {}
