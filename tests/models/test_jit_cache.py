"""A cached kernel is recompiled when a module it imports changes, not only its own file.

numba stamps a cached kernel with its own source file; a kernel that inlined a function of
another file would keep the old machine code after that file changed. ``models.core._jit`` stamps
each kernel of the project with its file and every project module it imports, directly or not.
Checked on a copy of the core in a temporary folder, in fresh processes with their own cache.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from models.core._jit import _ROOT, _imports

pytestmark = pytest.mark.slow  # kernels compiled in child processes

# normalise_log (models/hoeffding/_hoeffding.py) calls models.core._fmath.exp: a kernel of one file that
# inlines a function of another
PROBE = """
import numpy as np
from models.hoeffding import _hoeffding as hs
out = np.empty(2)
hs.normalise_log(np.array([0.0, -1.0]), out)
stats = hs.normalise_log.stats
print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()), repr(out[1]))
"""


def _probe(root: Path) -> tuple[int, int, str]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(root / "cache"), PYTHONPATH=str(root))
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=root, env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1]), out[2]


def test_the_stamp_follows_imports_transitively():
    models = _ROOT / "models"
    closure = set(_imports(models / "hoeffding" / "_ht_kernels.py"))
    assert models / "hoeffding" / "_hoeffding.py" in closure
    # `from . import x` names module x, not the package
    assert models / "hoeffding" / "__init__.py" not in closure
    assert models / "core" / "_fmath.py" in _imports(models / "hoeffding" / "_hoeffding.py")


def test_the_kernels_of_every_family_folder_get_the_closure_stamp():
    from models.core._jit import _ClosureLocator
    from models.hoeffding import _hoeffding as hs
    py = hs.normalise_log.py_func
    assert _ClosureLocator.from_function(py, py.__code__.co_filename) is not None


def test_an_edit_of_an_imported_module_recompiles_the_kernels_that_import_it(tmp_path):
    shutil.copytree(_ROOT / "models", tmp_path / "models",
                    ignore=shutil.ignore_patterns("__pycache__"))
    hits, misses, first = _probe(tmp_path)
    assert (hits, misses) == (0, 1)
    assert _probe(tmp_path)[:2] == (1, 0)  # cached
    with open(tmp_path / "models" / "cart" / "block_forest.py", "a") as fh:
        fh.write("\n# an edit of a module normalise_log does not import\n")
    assert _probe(tmp_path)[:2] == (1, 0)
    fmath = tmp_path / "models" / "core" / "_fmath.py"
    # exp(x) becomes exp(x) + 1: a kernel compiled from the old exp would still answer `first`
    line = "    y = t + (_EXP_T[j, 1] + t * p)"
    assert line in fmath.read_text()
    fmath.write_text(fmath.read_text().replace(line, line + " + 1.0"))
    hits, misses, changed = _probe(tmp_path)
    assert (hits, misses) == (0, 1) and changed != first


def test_a_cache_written_before_a_module_moved_is_a_miss_not_an_error(tmp_path):
    shutil.copytree(_ROOT / "models", tmp_path / "models",
                    ignore=shutil.ignore_patterns("__pycache__"))
    first = _probe(tmp_path)[2]
    indexes = list((tmp_path / "cache").rglob("*normalise_log*.nbi"))
    assert indexes
    for index in indexes:  # numba's version first, then an entry naming a module gone
        with open(index, "rb") as fh:
            version = pickle.load(fh)
        with open(index, "wb") as fh:
            pickle.dump(version, fh, protocol=-1)
            fh.write(b"cmodels_moved_away\nthing\n.")
    hits, misses, again = _probe(tmp_path)
    assert (hits, misses, again) == (0, 1, first)
    assert _probe(tmp_path)[:2] == (1, 0)  # written again, then read
