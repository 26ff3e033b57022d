"""The processes of the feature-set test, started early so their compilation overlaps the suite.

The sets other than the machine's own compile numba's kernels for their own targets (about a
minute and a half on two cores). :class:`FeatureSetRuns` starts them as soon as pytest has
collected the feature-set test (``tests/determinism/conftest.py``), and that test runs last:
the compilation then overlaps the rest of the suite, whose integration tests mostly wait on
the broker. :meth:`FeatureSetRuns.finish` computes the machine's own digests in this process,
collects the others, and runs the restores across sets.

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.determinism import run
from tests.determinism.feature_sets import emulator, environments

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 1200
OTHERS = ("no_avx512", "x86_64_v2")
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

    def _cmd(self, name: str, *args: str) -> list[str]:
        return [sys.executable, "-m", "tests.determinism.run", "--out",
                str(self.work / f"{name}.json"), *args]

    def start(self) -> FeatureSetRuns:
        """Start the other sets' digests (each writes its states at the cut)."""
        for name in OTHERS:
            cmd = self._cmd(name, "--parts", ALL_BUT_RESTORES, "--states-out", str(self.work / name))
            with open(self.work / f"{name}.err", "w") as err:
                proc = subprocess.Popen(cmd, cwd=ROOT, env=self.envs[name],
                                        stdout=subprocess.DEVNULL, stderr=err)
            self.procs[name] = proc
            threading.Thread(target=self._record_exit, args=(name, proc), daemon=True).start()
        return self

    def _record_exit(self, name: str, proc: subprocess.Popen) -> None:
        rc = proc.wait()
        part = self.work / f"{name}.rc.part"
        try:
            part.write_text(str(rc))
            part.replace(self.work / f"{name}.rc")
        except OSError:  # the work directory was removed (the run is over)
            pass

    def _collect(self, name: str) -> dict:
        """The digests of a started set, once its process has exited."""
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

    def _wait(self, name: str, proc: subprocess.Popen, cmd: list[str]) -> dict:
        _, err = proc.communicate(timeout=TIMEOUT_S)
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
        return json.loads((self.work / f"{name}.json").read_text())

    def _run(self, name: str, env: dict, *args: str, prefix: tuple = ()) -> dict:
        cmd = [*prefix, *self._cmd(name, *args)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        return self._wait(name, proc, cmd)

    def finish(self) -> dict[str, dict]:
        """Per set: its digests and ``restored``, the digests of another set's states
        continued under it."""
        native = self.work / "native"
        out = {"native": run.compute(ALL_BUT_RESTORES.split(","), states_out=native)}
        for name in OTHERS:
            out[name] = self._collect(name)
        with ThreadPoolExecutor(3) as pool:
            # the others continue the native states; the emulated CPU runs the kernels
            # x86_64_v2 compiled (compiling under emulation would take many minutes): the
            # pipelines, the messages and the restores, which cover every learner family
            restores = {name: pool.submit(self._run, f"{name}-restored", self.envs[name],
                                          "--parts", "restored", "--states-in", str(native))
                        for name in OTHERS}
            nehalem = pool.submit(self._run, "nehalem", self.emulated[1], "--parts",
                                  "functions,pipelines,wire,restored", "--states-in", str(native),
                                  prefix=tuple(self.emulated[0])) if self.emulated else None
            # and the native set continues the states x86_64_v2 wrote
            out["native"]["restored"] = run.compute(
                ("restored",), states_in=self.work / "x86_64_v2")["restored"]
            for name, future in restores.items():
                out[name]["restored"] = future.result()["restored"]
            if nehalem is not None:
                out["nehalem_emulated"] = nehalem.result()
        return out

    def close(self) -> None:
        """Stop the runs this object started and remove their directory (runs started by
        another process are that process's to close)."""
        if not self.own:
            return
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
