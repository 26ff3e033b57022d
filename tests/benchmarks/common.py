"""Helpers the benchmark scripts share: a results file stamped with the commit, the machine
and the command that wrote it; a stream as an ARFF file for MOA; the cost of a cold numba
compilation measured in a fresh process with an empty cache; the default learners of a
pipeline configuration and the hyperplane the ranker benchmarks feed them; and the scoring of
feature importances against a known truth (Cassidy & Deviney's tracking correlation, and the
sliding-window offline forest they compare with).

The scripts are sorted by kind in the folders beside this file (``learners``, ``rankings``,
``fidelity``, ``experiments``, ``service``); each writes its results into ``results/`` of its
own folder through :func:`write_results`.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def results_stamp(argv: list[str] | None = None) -> dict[str, str]:
    """What a results file must say about the run that wrote it: the commit (``+dirty`` when
    tracked files other than results files differ from it), the machine (CPU model, the cores this process may use and
    the machine's), the exact command and the UTC time."""
    from datetime import UTC, datetime

    argv = sys.argv if argv is None else argv
    script = Path(argv[0]).resolve() if argv else Path("?")
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    # results files written by earlier runs change no measurement: they do not make it dirty
    if _git("status", "--porcelain", "--untracked-files=no", "--", ".",
            ":(exclude)tests/benchmarks/*/results/*"):
        commit += "+dirty"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"commit": commit,
            "machine": f"{_cpu_model()}, {usable} of {os.cpu_count()} cores, {platform.system()}",
            "command": shlex.join(["python", str(script), *argv[1:]]),
            "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"}


def stamp_markdown(argv: list[str] | None = None) -> str:
    """:func:`results_stamp` as markdown lines (two trailing spaces: one line each)."""
    s = results_stamp(argv)
    return (f"Commit: `{s['commit']}`  \nMachine: {s['machine']}  \n"
            f"Command: `{s['command']}`  \nDate: {s['date']}\n")


def write_results(path, content, *, stamp: bool = True, argv: list[str] | None = None) -> Path:
    """Write a results file, stamped with the commit, the machine and the command
    (:func:`results_stamp`), and return its path.

    ``content``: markdown text (the stamp goes under its first ``# `` heading, or on top) or,
    for a ``.json`` path, a JSON-serializable mapping (the stamp goes under ``"stamp"``).
    ``stamp=False`` for a caller that stamps a section of the file itself (a file that several
    runs write a section each of: :func:`stamp_markdown` in the section).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        data = {"stamp": results_stamp(argv), **content} if stamp else content
        path.write_text(json.dumps(data, indent=1) + "\n")
        return path
    text = content
    if stamp:
        head, sep, rest = text.partition("\n")
        if head.startswith("# ") and sep:
            rest = rest.lstrip("\n")
            text = f"{head}\n\n{stamp_markdown(argv)}\n{rest}"
        else:
            text = f"{stamp_markdown(argv)}\n{text}"
    path.write_text(text if text.endswith("\n") else text + "\n")
    return path


def hyperplane(d: int, n: int):
    """``X`` and int labels of a ``d``-feature rotating hyperplane with two drifting weights
    (the stream of the ranker cost benchmarks)."""
    from models.generators.hyperplane import RotatingHyperplane

    X, y, _ = RotatingHyperplane(n_features=d, n_drift_features=2, mag_change=0.001,
                                 seed=1).take(n)
    return np.ascontiguousarray(X), [int(v) for v in y]


def default_learner(role: str, params: dict | None = None, seed: int = 1):
    """The learner a classification stream gets for ``role`` (the predictor or its first
    ranker) under a pipeline configuration with ``params`` (the worker's defaults without)."""
    from models import registry
    from worker.pipeline.config import PipelineConfig

    cfg = PipelineConfig(params=params) if params else PipelineConfig()
    name = (cfg.predictor_for(registry.CLASSIFICATION) if role == registry.PREDICTOR
            else cfg.rankers_for(registry.CLASSIFICATION)[0])
    return registry.get(name).build(cfg.params_of(name), (role,), seed=seed)


def write_arff(path: Path, X, y, labels=None, relation: str = "bench") -> None:
    """``X`` (numeric columns ``x0..``) and the class ``y`` as an ARFF file.

    ``labels``: the nominal values in header order (default: the labels as text, sorted),
    which is MOA's class-index order.
    """
    labels = sorted({str(v) for v in y}) if labels is None else labels
    with open(path, "w") as fh:
        fh.write(f"@relation {relation}\n")
        for j in range(X.shape[1]):
            fh.write(f"@attribute x{j} numeric\n")
        fh.write("@attribute class {" + ",".join(str(v) for v in labels) + "}\n@data\n")
        for row, label in zip(X.tolist(), y):
            fh.write(",".join(repr(v) for v in row) + f",{label}\n")


def cold_compile(script: str) -> tuple[float, ...]:
    """The seconds ``script`` prints (space-separated), run with an empty numba cache.

    ``script`` may use ``{root}`` for the repository root (to put it on ``sys.path``).
    """
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
        out = subprocess.run([sys.executable, "-c", script.format(root=str(ROOT))], env=env,
                             capture_output=True, text=True, check=True).stdout
    return tuple(float(v) for v in out.split())


@contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    """The brokers to benchmark against: ``bootstrap`` as given, or a local broker started
    from the jars (on free ports) and stopped at the end."""
    if bootstrap is not None:
        yield bootstrap
        return
    from worker.tools.dev.broker import LocalBroker, free_port

    port = free_port()
    broker = LocalBroker(port=port, controller_port=free_port(exclude=[port]))
    broker.fetch()
    try:
        bootstrap = broker.start()
        _LOCAL_BROKERS[bootstrap] = broker
        yield bootstrap
    finally:
        _LOCAL_BROKERS.pop(bootstrap, None)
        broker.stop()


#: the brokers :func:`kafka` started, by bootstrap address (their log directories are here)
_LOCAL_BROKERS: dict = {}


def stored_bytes(bootstrap: str, topic: str) -> int | None:
    """Bytes of ``topic``'s log segments on the disk of a broker :func:`kafka` started (as the
    broker stores the producer's compressed batches); ``None`` for another broker."""
    broker = _LOCAL_BROKERS.get(bootstrap)
    if broker is None:
        return None
    return sum(f.stat().st_size for d in (broker.data_dir / "kraft").glob(f"{topic}-*")
               if d.name.rpartition("-")[0] == topic for f in d.glob("*.log"))


def tracking_score(series, truth, features=None) -> float:
    """Cassidy & Deviney's fidelity: mean correlation of importance and truth over time.

    Parameters
    ----------
    series : array of shape (n_asks, d)
        A method's importances at each ask.
    truth : array of shape (n_asks, d)
        The true importances (``|a_i|``) in force at each ask.
    features : iterable of int, optional
        Features to average over; by default those whose truth varies over the asks (a
        constant truth has no series to follow).

    Returns
    -------
    float
        The mean, over ``features``, of the Pearson correlation between the importance
        series of the feature and its truth series; a flat importance series tracks nothing
        and scores 0. ``nan`` when no feature varies.

    Examples
    --------
    >>> t = np.linspace(0, 1, 50)
    >>> truth = np.column_stack([t, 1 - t, np.full(50, 0.3)])
    >>> round(tracking_score(np.column_stack([t ** 2, np.zeros(50), t]), truth), 3)  # (0.97+0)/2
    0.484
    """
    series, truth = np.asarray(series, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    if features is None:
        features = np.flatnonzero(np.ptp(truth, axis=0) > 0)
    corrs = []
    for j in features:
        a, b = series[:, j], truth[:, j]
        if a.std() == 0.0 or b.std() == 0.0:
            corrs.append(0.0)  # a flat series tracks nothing
        else:
            corrs.append(float(np.corrcoef(a, b)[0, 1]))
    return float(np.mean(corrs)) if corrs else float("nan")


def oob_permutation_importance(forest, Xw, yw, rng) -> np.ndarray:
    """OOB permutation MDA of a fitted sklearn forest (unscaled, averaged over trees).

    R's ``importance(type=1, scale=FALSE)``: for each tree, its accuracy on its out-of-bag
    rows minus its accuracy with feature ``j`` permuted among them; ``rng`` draws the
    permutations.
    """
    n, d = Xw.shape
    total = np.zeros(d)
    used = 0
    for tree, in_bag in zip(forest.estimators_, forest.estimators_samples_):
        mask = np.ones(n, dtype=bool)
        mask[in_bag] = False
        oob = np.flatnonzero(mask)
        if oob.size < 2:
            continue
        Xo = Xw[oob]
        # one stacked predict: the OOB rows, then the OOB rows with each feature permuted
        stacked = np.tile(Xo, (d + 1, 1))
        for j in range(d):
            block = stacked[(j + 1) * oob.size:(j + 2) * oob.size]
            block[:, j] = Xo[rng.permutation(oob.size), j]
        pred = forest.classes_[tree.predict(stacked).astype(int)]
        hits = (pred == np.tile(yw[oob], d + 1)).reshape(d + 1, oob.size).mean(axis=1)
        total += hits[0] - hits[1:]
        used += 1
    return total / max(used, 1)


def window_forest_importances(Xw, yw, n_trees: int, rng,
                              mda: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """``(MDI, MDA)`` of an offline random forest fitted on one window of rows.

    scikit-learn's ``RandomForestClassifier`` (``max_features="sqrt"``, bootstrap), seeded
    from ``rng``: its impurity importance and :func:`oob_permutation_importance` (``None``
    without ``mda``).
    """
    from sklearn.ensemble import RandomForestClassifier

    rf = RandomForestClassifier(n_estimators=n_trees, max_features="sqrt",
                                random_state=int(rng.integers(2**31)), n_jobs=1)
    rf.fit(Xw, yw)
    if not mda:
        return rf.feature_importances_, None
    return rf.feature_importances_, oob_permutation_importance(rf, Xw, yw, rng)


@contextmanager
def clocked_calls(targets, clock) -> Iterator[dict]:
    """While open, the ``clock()`` time (``time.process_time``, ``time.thread_time``) of
    every call of the methods ``targets`` names (``(class, method name, part)``) adds up in
    the Counter it yields, by part; the calls are otherwise unchanged."""
    from collections import Counter

    spent: Counter = Counter()
    saved = [(cls, name, getattr(cls, name)) for cls, name, _part in targets]

    def clocked(method, part):
        def call(*args, **kwargs):
            t0 = clock()
            try:
                return method(*args, **kwargs)
            finally:
                spent[part] += clock() - t0
        return call

    for (cls, name, method), (_c, _n, part) in zip(saved, targets):
        setattr(cls, name, clocked(method, part))
    try:
        yield spent
    finally:
        for cls, name, method in saved:
            setattr(cls, name, method)
