"""The one place where numba compilation options are set.

Every kernel in :mod:`models` is compiled through :func:`njit`, so caching, ``nogil`` and
``fastmath`` are decided once for the whole core.

* ``cache=True``: compiled machine code is written next to the sources (or to
  ``NUMBA_CACHE_DIR``) and reused by later processes; a worker restart or a test run then
  pays the compilation only once. Set ``STREAMFOREST_NUMBA_CACHE=0`` to disable it.
* ``nogil=True``: kernels release the GIL, so a worker's Kafka client threads keep serving
  heartbeats and delivery reports while a learner trains.
* ``fastmath=False``: learners must be bit-for-bit reproducible from a seed and from a
  checkpoint, which re-association of floating-point sums would break.
* ``_nrt=False`` (asked by a few hot helpers that allocate nothing, to skip reference
  counting of their array arguments) is a private numba option: it is dropped when the
  installed numba no longer knows it, so a numba upgrade costs speed, never an import error.

One specialisation per kernel: when a kernel calls another with a constant (``next_u64(s, 0)``,
``grow(..., False, ...)``), numba types the argument as a literal (``Literal[int](0)``) and
would compile the callee once more for it, beside the ``int64`` version its other callers use.
The dispatcher of :func:`njit` types such calls with the plain type instead, so each kernel
compiles (and the warm-up caches) one version per argument layout; a literal is cast to its
plain type at the call, so the results do not change. A kernel that can only be typed with a
literal still gets one.

Cached kernels are as fresh as every source they were compiled from. numba stamps a cached
kernel with its own file only, so a kernel whose file did not change keeps machine code that
inlined an older version of a function of another file (``_fmath.exp`` edited, the naive
Bayes kernels of ``_hoeffding`` cached before). :class:`_ClosureLocator` stamps each kernel of
the project's packages with the contents of its file and of every project module it imports,
directly or not: an edit recompiles exactly the kernels that may have inlined it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import re
from pathlib import Path

import numba
from numba.core import caching, cpu, errors, types
from numba.core.registry import CPUDispatcher

CACHE = os.environ.get("STREAMFOREST_NUMBA_CACHE", "1") != "0"

_DEFAULTS = {"nogil": True, "cache": CACHE, "fastmath": False}
_PRIVATE_OK = hasattr(cpu.CPUTargetOptions, "_nrt")


class _PlainDispatcher(CPUDispatcher):
    """A CPU dispatcher that compiles calls from other kernels for plain argument types."""

    def get_call_template(self, args, kws):
        """The call template for ``args`` with literal types replaced by their plain types.

        Falls back to the literal types when the kernel cannot be typed without them.
        """
        plain = tuple(types.unliteral(a) for a in args)
        plain_kws = {k: types.unliteral(v) for k, v in kws.items()}
        if plain == tuple(args) and plain_kws == kws:
            return super().get_call_template(args, kws)
        try:
            return super().get_call_template(plain, plain_kws)
        except errors.TypingError:
            return super().get_call_template(args, kws)


def _plain(dispatcher):
    # numba.njit builds a CPUDispatcher (or returns the function itself when
    # NUMBA_DISABLE_JIT is set); only the call typing changes, so switching the class of the
    # built dispatcher keeps every other part of numba's construction (caching included)
    if type(dispatcher) is CPUDispatcher:
        dispatcher.__class__ = _PlainDispatcher
    return dispatcher


_ROOT = Path(__file__).resolve().parents[2]  # the repository: models/core/_jit.py
_PACKAGES = ("models", "worker", "schemas")


def _module_file(dotted: str) -> Path | None:
    """The source file of project module ``dotted`` (``None``: not one of ours)."""
    parts = dotted.split(".")
    if parts[0] not in _PACKAGES:
        return None
    base = _ROOT.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


# import statements at any depth (imports inside functions inline as much as module-level ones);
# a docstring line that reads like one only adds a module to the stamp (more recompiling,
# never a stale kernel), which is why a fast scan can stand in for a parse
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#]+)", re.M)


@functools.cache
def _imports(path: Path) -> tuple[Path, ...]:
    """Project modules imported by the source at ``path``, relative or absolute."""
    package = path.relative_to(_ROOT).with_suffix("").parts[:-1]
    text = path.read_text(encoding="utf-8")
    names = [n.split(" as ")[0].strip() for m in _IMPORT.finditer(text) for n in m.group(1).split(",")]
    for m in _FROM.finditer(text):
        module, dots = m.group(1).lstrip("."), len(m.group(1)) - len(m.group(1).lstrip("."))
        base = ".".join([*package[: len(package) - dots + 1], module] if dots else [module]).strip(".")
        for alias in m.group(2).strip("()").split(","):
            name = alias.split(" as ")[0].strip()
            # ``from . import a`` imports module a; ``from .a import f`` a name of module a
            if name:
                names.append(f"{base}.{name}" if _module_file(f"{base}.{name}") else base)
    return tuple(sorted({f for f in map(_module_file, names) if f is not None}))


@functools.cache
def closure_stamp(path: Path) -> str:
    """SHA-256 over the contents of ``path`` and of every project module it imports,
    directly or not (the cached kernels of ``path`` are valid while this is unchanged)."""
    seen, todo = set(), [path]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo += _imports(current)
    h = hashlib.sha256()
    for f in sorted(seen):
        h.update(str(f.relative_to(_ROOT)).encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


class _ClosureLocator(caching._CacheLocator):
    """numba's own locator for a kernel of the project, with :func:`closure_stamp` as the
    source stamp (numba compares stamps for equality and recompiles on a difference)."""

    def __init__(self, inner, py_file: str):
        self._inner = inner
        self._path = Path(py_file).resolve()

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_source_stamp(self):
        return ("closure", closure_stamp(self._path))

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    @classmethod
    def from_function(cls, py_func, py_file):
        path = Path(py_file).resolve()
        if path.suffix != ".py" or not path.is_relative_to(_ROOT) \
                or path.relative_to(_ROOT).parts[0] not in _PACKAGES:
            return None
        for other in _NUMBA_LOCATORS:
            inner = other.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner, py_file)
        return None


# numba's list of locators (``CacheImpl`` since 0.62, ``_CacheImpl`` before); a numba without
# it caches as numba does, per file
_IMPL = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
_NUMBA_LOCATORS = [c for c in getattr(_IMPL, "_locator_classes", []) if c is not _ClosureLocator]
if _NUMBA_LOCATORS and _ClosureLocator not in _IMPL._locator_classes:
    _IMPL._locator_classes.insert(0, _ClosureLocator)


def _a_miss_when_unreadable(load, miss):
    """``load`` of numba's cache file, with an entry that cannot be unpickled taken as a miss.

    numba pickles the objects a kernel refers to by their module's path; a cache written
    before a module moved (``models._jit`` became ``models.core._jit``) names a module that
    no longer exists, and numba would raise ``ModuleNotFoundError`` at the kernel's first
    call instead of compiling it again. A miss compiles the kernel and overwrites the entry.
    """
    @functools.wraps(load)
    def tolerant(self, *args):
        try:
            return load(self, *args)
        except (ImportError, AttributeError, EOFError, pickle.UnpicklingError):
            return miss()
    tolerant.tolerant = True
    return tolerant


_FILE = getattr(caching, "IndexDataCacheFile", None)
if _FILE is not None and not getattr(_FILE._load_index, "tolerant", False):
    _FILE._load_index = _a_miss_when_unreadable(_FILE._load_index, dict)
    _FILE.load = _a_miss_when_unreadable(_FILE.load, lambda: None)


def njit(*args, **kwargs):
    """Compile a kernel with the project's options.

    Usable bare (``@njit``) or with overrides (``@njit(inline="always")``).
    """
    options = dict(_DEFAULTS)
    options.update(kwargs)
    if not _PRIVATE_OK:
        options.pop("_nrt", None)
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return _plain(numba.njit(**options)(args[0]))
    decorator = numba.njit(*args, **options)
    if isinstance(decorator, CPUDispatcher):
        return _plain(decorator)
    return lambda fn: _plain(decorator(fn))
