"""The processes of the feature-set test, started early so that they overlap the suite.

Every set computes its digests in a process of its own (numpy, glibc and numba choose their
code paths when a process starts), the machine's own included; the sets other than the
machine's own first compile numba's kernels for their own targets (about a minute and a half
on two cores). Once all three are done, each set restores another's states and continues, and
the emulated CPU runs. :class:`FeatureSetRuns` starts the whole chain as soon as pytest has
collected the feature-set test (``tests/determinism/conftest.py``), and that test runs last:
the compilation and the runs then overlap the rest of the suite, whose integration tests
mostly wait on the broker, and :meth:`FeatureSetRuns.finish` only collects what they wrote.

Under pytest-xdist the test runs in one of the workers, which cannot know at collection
whether it will be the one: the controller starts the runs once (``tests/conftest.py``), in a
work directory it hands to every worker, and the worker that runs the test collects them from
there. Each started process writes its JSON, its standard error (``<name>.err``) and, once it
has exited, its exit status (``<name>.rc``) into that directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.determinism.feature_sets import emulator, environments

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 1200
OTHERS = ("no_avx512", "x86_64_v2")
FIRST = ("native", *OTHERS)  # the runs started at collection
ALL_BUT_RESTORES = "functions,pipelines,wire,learners,states"


class FeatureSetRuns:
    """The digests of every feature set (see ``test_cpu_feature_sets.py``)."""

    def __init__(self, cache_root: Path, work: Path | None = None, *, owner: bool = True):
        """``work``: the directory the runs write to (a new one when ``None``); ``owner=False``:
        another process started them there and closes them (see the module docstring)."""
        self.envs = environments(cache_root)
        self.emulated = emulator(cache_root)
        self.own = owner
        self.work = Path(tempfile.mkdtemp(prefix="streamforest-digests-")) if work is None \
            else Path(work)
        self.procs: dict[str, subprocess.Popen] = {}
        self._lock = threading.Lock()  # the procs started, against close()
        self._closed = False

    def _cmd(self, name: str, *args: str) -> list[str]:
        return [sys.executable, "-m", "tests.determinism.run", "--out",
                str(self.work / f"{name}.json"), *args]

    def start(self) -> FeatureSetRuns:
        """Start every set's digests (each writes its states at the cut), then, once they
        are all in, the restores across sets (:meth:`_start_restores`)."""
        for name in FIRST:
            self._spawn(name, self.envs[name], "--parts", ALL_BUT_RESTORES, "--states-out",
                        str(self.work / name))
        threading.Thread(target=self._start_restores, daemon=True).start()
        return self

    def _start_restores(self) -> None:
        """Each set continues another's states: the others the machine's own, the machine the
        states x86_64_v2 wrote; the emulated CPU runs the kernels x86_64_v2 compiled
        (compiling under emulation would take many minutes) on the pipelines, the messages and
        the machine's states, which cover every learner family."""
        for name in FIRST:
            if self.procs[name].wait() != 0:
                return  # :meth:`finish` reports it
        native = str(self.work / "native")
        for name in OTHERS:
            self._spawn(f"{name}-restored", self.envs[name], "--parts", "restored",
                        "--states-in", native)
        self._spawn("native-restored", self.envs["native"], "--parts", "restored",
                    "--states-in", str(self.work / "x86_64_v2"))
        if self.emulated is not None:
            self._spawn("nehalem", self.emulated[1], "--parts",
                        "functions,pipelines,wire,restored", "--states-in", native,
                        prefix=tuple(self.emulated[0]))

    def _spawn(self, name: str, env: dict, *args: str, prefix: tuple = ()) -> None:
        """Start run ``name``: it writes ``name.json``, its standard error and, once it has
        exited, its exit status."""
        with self._lock:
            if self._closed:
                return
            with open(self.work / f"{name}.err", "w") as err:
                proc = subprocess.Popen([*prefix, *self._cmd(name, *args)], cwd=ROOT, env=env,
                                        stdout=subprocess.DEVNULL, stderr=err)
            self.procs[name] = proc
        threading.Thread(target=self._record_exit, args=(name, proc), daemon=True).start()

    def _record_exit(self, name: str, proc: subprocess.Popen) -> None:
        rc = proc.wait()
        part = self.work / f"{name}.rc.part"
        try:
            part.write_text(str(rc))
            part.replace(self.work / f"{name}.rc")
        except OSError:  # the work directory was removed (the run is over)
            pass

    def _collect(self, name: str) -> dict:
        """The digests of a started run, once its process has exited."""
        status = self.work / f"{name}.rc"
        deadline = time.monotonic() + TIMEOUT_S
        while not status.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"the {name} digests did not finish within {TIMEOUT_S} s")
            time.sleep(0.2)
        if status.read_text().strip() != "0":
            err = (self.work / f"{name}.err").read_text()
            raise AssertionError(f"the {name} digests failed (exit status "
                                 f"{status.read_text().strip()}):\n{err[-3000:]}")
        return json.loads((self.work / f"{name}.json").read_text())

    def finish(self) -> dict[str, dict]:
        """Per set: its digests and ``restored``, the digests of another set's states
        continued under it."""
        out = {name: self._collect(name) for name in FIRST}
        for name in FIRST:
            out[name]["restored"] = self._collect(f"{name}-restored")["restored"]
        if self.emulated is not None:
            out["nehalem_emulated"] = self._collect("nehalem")
        return out

    def close(self) -> None:
        """Stop the runs this object started and remove their directory (runs started by
        another process are that process's to close)."""
        if not self.own:
            return
        with self._lock:
            self._closed = True
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


#: where ``conftest.py`` keeps the runs it started, for the test's fixture
RUNS = pytest.StashKey[FeatureSetRuns]()


def shared_work(run_dir: Path) -> Path:
    """Under pytest-xdist, where the controller's runs write (in the run's shared directory)."""
    work = Path(run_dir) / "feature-sets"
    work.mkdir(exist_ok=True)
    return work


def cache_root(config: pytest.Config) -> Path:
    """Where the feature sets other than the machine's own keep their numba caches."""
    cache = getattr(config, "cache", None)
    return Path(cache.mkdir("numba-feature-sets")) if cache is not None \
        else Path(config.rootpath) / ".numba-feature-sets"


def ours(nodeid: str) -> bool:
    """Whether a collected test is one of this directory's (its runs must be started)."""
    return nodeid.replace("\\", "/").startswith("tests/determinism/")
