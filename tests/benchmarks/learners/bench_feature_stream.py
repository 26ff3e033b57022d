"""Speed of one FeatureStreamForest generation against the authors' learner, same rows, same run.

One generation = 30 depth-6 CART trees, each on a stratified bootstrap of 10,000 training rows
and on its own feature subset (each column with probability 2/3, at least one). Contenders:

* ours: ``FeatureStreamForest(n_trees=30).learn_many(X, y)`` (numba; the columns are sorted
  once per generation and shared by the trees), after a warm-up that compiled the kernels;
* the authors' learner (Motl & Kordík 2019, ``janmotl/rf``): for each tree, the same kind of
  feature subset and stratified bootstrap drawn with numpy, then scikit-learn's
  ``DecisionTreeClassifier(max_depth=6).fit(X[rows][:, features], y[rows])``, one tree at a
  time.

Times are the median of ``--repeats`` generations (seeds differ), wall clock and CPU time of
the process (both learners use one thread; the machine is shared, so the CPU time is the
steadier figure and the ratio uses it). AUC: each forest's mean-probability AUC on held-out
rows of the same dataset, mean over the repeats. Cold start: a fresh process with the numba
cache disabled (``STREAMFOREST_NUMBA_CACHE=0``) times its first generation (compilation
included) and a second one; another fresh process with the cache on times the first
generation after loading the cached machine code.

Run::

    python tests/benchmarks/learners/bench_feature_stream.py            # writes nothing
    python tests/benchmarks/learners/bench_feature_stream.py --write    # also the results file
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models.cart.feature_stream_forest import FeatureStreamForest  # noqa: E402
from tests.benchmarks.fidelity.fidelity_feature_stream import DATASETS, RESULTS, write_section  # noqa: E402

N_TRAIN = 10_000
N_TEST = 5_000
N_TREES = 30
MTRY = 2 / 3


def split(name: str, seed: int = 0):
    """10,000 training rows and up to 5,000 test rows of a dataset, in random order."""
    X, y = DATASETS[name][0]()
    idx = np.random.default_rng(seed).permutation(X.shape[0])
    tr, te = idx[:N_TRAIN], idx[N_TRAIN:N_TRAIN + N_TEST]
    return np.ascontiguousarray(X[tr]), y[tr], np.ascontiguousarray(X[te]), y[te]


def _auc(y, score) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score))


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def ours(X, y, X_te, y_te, seed: int):
    model = FeatureStreamForest(n_trees=N_TREES, mtry=MTRY, seed=seed)
    _, wall, cpu = _timed(lambda: model.learn_many(X, y))
    return wall, cpu, _auc(y_te, model.predict_proba_many(X_te)[:, model.classes.index(1)])


def authors(X, y, X_te, y_te, seed: int):
    """The authors' generation: numpy draws, one scikit-learn tree at a time."""
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.RandomState(seed)
    classes = [np.flatnonzero(y == c) for c in np.unique(y)]

    def generation():
        trees = []
        while True:  # every tree needs a feature; the authors redraw the whole set
            masks = rng.random_sample((N_TREES, X.shape[1])) < MTRY
            if masks.any(axis=1).all():
                break
        for mask in masks:
            rows = np.concatenate([rng.choice(c, c.size, replace=True) for c in classes])
            cols = np.flatnonzero(mask)
            tree = DecisionTreeClassifier(max_depth=6, random_state=rng).fit(
                X[np.ix_(rows, cols)], y[rows])
            trees.append((tree, cols))
        return trees

    trees, wall, cpu = _timed(generation)
    score = np.mean([t.predict_proba(X_te[:, cols])[:, 1] for t, cols in trees], axis=0)
    return wall, cpu, _auc(y_te, score)


_COLD = """
import time, numpy as np
t0 = time.perf_counter()
from models.cart.feature_stream_forest import FeatureStreamForest
t1 = time.perf_counter()
rng = np.random.default_rng(0)
X = rng.random((10000, 7)); y = (X[:, 0] > 0.5).astype(int)
m = FeatureStreamForest(n_trees=30)
m.learn_many(X, y); m.predict_proba_many(X[:100]); m.importances()
t2 = time.perf_counter()
FeatureStreamForest(n_trees=30, seed=2).learn_many(X, y)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def cold_start(cache: bool) -> tuple[float, float, float]:
    """(import s, first generation + prediction s, second generation s) in a new process."""
    env = dict(os.environ, STREAMFOREST_NUMBA_CACHE="1" if cache else "0")
    out = subprocess.run([sys.executable, "-c", _COLD], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    return tuple(float(v) for v in out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["electricity", "weather", "phishing_sethi"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", action="store_true", help=f"write the table into {RESULTS}")
    args = parser.parse_args(argv)
    FeatureStreamForest(n_trees=2).learn_many(np.random.default_rng(0).random((50, 2)),
                                              [0, 1] * 25)  # compile (or load) before timing
    lines = ["| dataset | features | ours ms (CPU / wall) | authors' learner ms (CPU / wall) | "
             "speed-up (CPU) | AUC ours | AUC authors' | AUC difference |", "|---" * 8 + "|"]
    for name in args.datasets:
        X, y, X_te, y_te = split(name)
        a = [authors(X, y, X_te, y_te, 100 + s) for s in range(args.repeats)]
        o = [ours(X, y, X_te, y_te, 100 + s) for s in range(args.repeats)]
        med = {k: [statistics.median(r[i] for r in rs) for i in (0, 1)] for k, rs in (("o", o), ("a", a))}
        auc_o, auc_a = np.mean([r[2] for r in o]), np.mean([r[2] for r in a])
        lines.append(f"| {name} | {X.shape[1]} | {1000 * med['o'][1]:.0f} / {1000 * med['o'][0]:.0f} | "
                     f"{1000 * med['a'][1]:.0f} / {1000 * med['a'][0]:.0f} | "
                     f"{med['a'][1] / med['o'][1]:.1f}x | {auc_o:.4f} | {auc_a:.4f} | "
                     f"{100 * (auc_o - auc_a):+.2f} points |")
        print(lines[-1], flush=True)
    nocache, cached = cold_start(False), cold_start(True)
    cold = [
        "",
        "Cold start, fresh process, 30 trees on 10,000 x 7 synthetic rows (seconds):",
        "",
        "| numba cache | import | first generation + prediction + importances | second generation |",
        "|---|---|---|---|",
        f"| off (compiles) | {nocache[0]:.2f} | {nocache[1]:.2f} | {nocache[2]:.3f} |",
        f"| on (loads machine code) | {cached[0]:.2f} | {cached[1]:.2f} | {cached[2]:.3f} |",
    ]
    table = "\n".join(lines + cold)
    print("\n".join(cold))
    if args.write:
        body = ("One generation of 30 depth-6 trees on 10,000 training rows (module doc of "
                "`tests/benchmarks/learners/bench_feature_stream.py`); median of "
                f"{args.repeats} generations; AUC on up to 5,000 held-out rows, mean over the same "
                "generations. Both learners are single-threaded; the machine (2 vCPU) was shared.\n\n" + table)
        write_section(RESULTS, "Speed: one generation against the authors' learner", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
