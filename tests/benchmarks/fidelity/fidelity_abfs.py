"""Fidelity of ABFS (Barddal et al. 2019) with Assis' BOLE order and omega: Tables 1 and 2.

Reproduces the Outdoor, NOAA and Electricity rows of the seed paper's Table 1 (naive Bayes)
and Table 2 (Hoeffding tree): each classifier wrapped with DDM (MOA's
``DriftDetectionMethodClassifier``, DDM defaults), alone ("native") and behind ABFS with
Assis' setting (grace period 100, selection threshold 0.05, ADWIN), Oza order with
omega 1 and the paper's best omega, BOLE order with omega 1 and the best omega.

Protocol: prequential (test-then-train), instance by instance, accuracy over the whole
stream, as in MOA. Our learners use ``flavour="moa"``. Streams are the shared files:
Outdoor (4,000 x 21, 40 classes), NOAA weather (18,159 x 8), Electricity (elecNormNew,
45,312 x 8, the date kept as MOA does; MOA reads ``day`` as a nominal attribute, we read
it as a number).

Beside ours: the paper's numbers, and MOA's own native classifiers run through capymoa on
the same files (the ABFS code is not part of MOA, so only the native column can be run
there); ``MOA day-numeric`` runs MOA on an Electricity copy whose ``day`` is numeric, which
isolates the effect of the nominal attribute.

Run::

    python tests/benchmarks/fidelity/fidelity_abfs.py            # ~3 minutes, writes results/abfs.md
    python tests/benchmarks/fidelity/fidelity_abfs.py --no-moa --streams noaa
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from models.drift.drift_wrapper import DriftDetectionClassifier  # noqa: E402
from models.hoeffding.abfs import ABFS, ABFSClassifier  # noqa: E402
from models.hoeffding.hoeffding_tree import HoeffdingTree  # noqa: E402
from models.hoeffding.naive_bayes import NaiveBayes  # noqa: E402
from tests.benchmarks.common import write_arff, write_results  # noqa: E402
from tests.models.feature_drift_data import feature_drift_stream, relevant  # noqa: E402
from tests.shared_data import data_dir  # noqa: E402
from worker.tools.dev.datasets import read_arff, read_csv  # noqa: E402

DATA = data_dir()
STREAMS = ("outdoor", "noaa", "elec")
FILES = {"outdoor": "outdoorStream.csv", "noaa": "weather_noaa.arff", "elec": "elecNormNew.arff"}
ASSIS = {"grace_period": 100, "selection_threshold": 0.05}
#: (column, boosting, omega) per learner; the best omegas are the paper's column heads
CONFIGS = {
    "nb": [("native", None, None), ("Oza w=1", "oza", 1.0), ("Oza w=3", "oza", 3.0),
           ("BOLE w=1", "bole", 1.0), ("BOLE w=2", "bole", 2.0)],
    "ht": [("native", None, None), ("Oza w=1", "oza", 1.0), ("Oza w=3", "oza", 3.0),
           ("BOLE w=1", "bole", 1.0), ("BOLE w=3", "bole", 3.0)],
}
PAPER = {  # Assis, Tables 1 and 2
    "nb": {"outdoor": [59.55, 66.075, 63.45, 62.075, 63.05],
           "noaa": [70.67, 71.661, 72.388, 73.407, 73.11],
           "elec": [81.177, 85.94, 85.121, 87.972, 85.836]},
    "ht": {"outdoor": [59.325, 65.975, 63.375, 61.075, 65.025],
           "noaa": [73.638, 72.152, 71.953, 72.912, 72.923],
           "elec": [85.414, 86.187, 85.582, 87.983, 86.262]},
}
MOA_BASE = {"nb": "bayes.NaiveBayes", "ht": "trees.HoeffdingTree"}


def load(name: str):
    path = DATA / FILES[name]
    if path.suffix == ".arff":
        names, rows = read_arff(path)
    else:
        names, rows = read_csv(path, header=True)
    table = np.array(rows, dtype=object)
    X = np.ascontiguousarray(table[:, :-1].astype(np.float64))
    return X, [str(v) for v in table[:, -1]]


def header_classes(name: str, y) -> list[str]:
    """Class labels in the order of the ARFF header MOA reads (class indices matter to
    MOA's Hoeffding bound, see ``HoeffdingTree(flavour="moa")``)."""
    if not FILES[name].endswith(".arff"):
        return sorted(set(y))  # the header write_arff gives MOA
    for line in open(DATA / FILES[name]):
        if line.lower().startswith("@attribute class"):
            return [c.strip() for c in line.split("{", 1)[1].split("}", 1)[0].split(",")]
    raise ValueError(f"no class attribute in {FILES[name]}")


def base(learner: str, classes):
    if learner == "nb":
        return DriftDetectionClassifier(NaiveBayes(flavour="moa", classes=classes))
    return DriftDetectionClassifier(HoeffdingTree(flavour="moa", classes=classes))


#: other readings of BOLE-ABFS (see the ABFS docstring): (label, normaliser, deletion)
VARIANTS = [("ensemble N, accuracy-order deletion", "ensemble", "accuracy"),
            ("ensemble N, creation-order deletion", "ensemble", "creation"),
            ("layer sc+sw, accuracy-order deletion", "layer", "accuracy")]


def build(learner: str, boosting, omega, classes, normaliser="layer", deletion="creation"):
    if boosting is None:
        return base(learner, classes)
    # the paper's composition: no guard (ours, not the reference's; on by default)
    return ABFSClassifier(base(learner, classes),
                          ABFS(omega=omega, boosting=boosting, bole_normaliser=normaliser,
                               bole_deletion=deletion, classes=classes, **ASSIS), guard=None)


def prequential(model, X, y) -> tuple[float, float, int]:
    """Accuracy (%), seconds, features selected at the end."""
    hits = 0
    t0 = time.perf_counter()
    for i in range(X.shape[0]):
        row = X[i:i + 1]
        hits += model.predict_many(row)[0] == y[i]
        model.learn_many(row, y[i:i + 1])
    n_sel = len(model.selector.layers()) if hasattr(model, "selector") else X.shape[1]
    return 100.0 * hits / X.shape[0], time.perf_counter() - t0, n_sel


def moa_native(learner: str, path: Path) -> float:
    from capymoa.base import MOAClassifier
    from capymoa.evaluation import prequential_evaluation
    from capymoa.stream import ARFFStream
    from moa.classifiers.drift import DriftDetectionMethodClassifier

    stream = ARFFStream(path=str(path))
    model = MOAClassifier(DriftDetectionMethodClassifier, schema=stream.get_schema(),
                          CLI=f"-l {MOA_BASE[learner]} -d DDM")
    return prequential_evaluation(stream=stream, learner=model, optimise=True).cumulative.accuracy()


def moa_cells(name, X, y):
    """MOA's native accuracy on the shared file (and on a day-numeric Electricity copy)."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        if FILES[name].endswith(".arff"):
            original = DATA / FILES[name]
        else:
            original = Path(tmp) / "stream.arff"
            write_arff(original, X, y, sorted(set(y)), "fidelity")
        for learner in ("nb", "ht"):
            out[(learner, "moa")] = moa_native(learner, original)
        if name == "elec":
            numeric = Path(tmp) / "elec_numeric.arff"
            write_arff(numeric, X, y, sorted(set(y)), "fidelity")
            for learner in ("nb", "ht"):
                out[(learner, "moa-numeric")] = moa_native(learner, numeric)
    return out


NOTES = """
## Why some cells differ by more than 1.5 points

* **Native columns.** MOA itself (capymoa, last column) gives the paper's native numbers
  on all three streams, and ours match it to 0.02 points on Outdoor and NOAA. On
  Electricity MOA reads `day` as a nominal attribute (counts per value) and we read it as
  a number: MOA on a copy of the file whose `day` is numeric ("day numeric") gives 83.72
  (NB) and 84.81 (HT), ours 84.07 and 84.83. The +2.9 of the NB native cell is that
  attribute, not the learner.
* **Oza-ABFS.** All twelve cells are within 1.1 points of the paper. Two details of the
  reference matter a lot here and are reproduced: unselected features are *missing* for
  the downstream learner (MOA's `FilteredSparseInstance`; a tree row reaching a split on
  a missing feature is not learned), and a stump predicts the first of equally weighted
  classes in the ARFF header's order. On Outdoor (40 balanced classes, 4,000 rows) such
  ties are frequent: with classes numbered by first appearance instead, Oza w=1 drops from
  66.42 to 63.30 (NB) and from 65.50 to 63.10 (HT), so Outdoor cells carry a few points of
  tie-breaking noise.
* **BOLE-ABFS.** No code of Assis' BOLE-ABFS is public and Alg. 1 leaves two choices open
  (see the `ABFS` docstring): the weight normaliser (the layer's `sc + sw` as printed, or
  BOLE's ensemble-wide `N`) and which layers a drift deletes (those created after the
  drifting one, or those after it in accuracy order, Alg. 1 sorting `h` in place). The
  second table of each section runs the other three combinations. Mean absolute distance
  to the paper's twelve BOLE cells: 1.80 (layer, creation: the default), 1.71 (ensemble,
  creation), 1.73 (layer, accuracy), 3.32 (ensemble, accuracy-order deletion, which
  selects nearly every feature and loses 4 to 6 points on Electricity). No reading
  reaches the paper's 88% on Electricity (best: 86.0 HT / 85.4 NB with the default), and
  the default is 3.7 (NB) and 4.3 (HT) points *above* the paper on Outdoor BOLE w=1, where
  the tie-breaking noise above applies.
"""


def synthetic_check(lines):
    """Selection under a known feature drift (tests/models/feature_drift_data.py)."""
    X, y, _ = feature_drift_stream(15000, switch_every=5000)
    lines.append("\n## Synthetic feature drift (relevant pair switches every 5,000 rows)\n")
    lines.append("Stream: 10 uniform features; concept c makes features (2c, 2c+1) decide the "
                 "class (sum > 1), 5% label noise; switches at rows 5,000 and 10,000. "
                 "Assis' setting, Oza order, omega 1; subset after each batch of 250 rows.\n")
    lines.append("| concept | relevant | rows after the switch until both are selected | "
                 "first feature_drift event (row, feature) |")
    lines.append("|---|---|---|---|")
    model = ABFS(**ASSIS)
    trace, events = [], []
    for s in range(0, X.shape[0], 250):
        model.learn_many(X[s:s + 250], y[s:s + 250])
        events += [(e.row + s, e.feature) for e in model.events() if e.kind == "feature_drift"]
        trace.append((s + 250, set(model.layers())))
    for c in range(3):
        pair = set(relevant(c, 10))
        due = next((row for row, sel in trace if row > c * 5000 and pair <= sel), None)
        fired = next(((r, f) for r, f in events if c * 5000 <= r < (c + 1) * 5000), None)
        lines.append(f"| {c} | {sorted(pair)} | {due - c * 5000 if due else 'never'} | "
                     f"{fired if c else '-'} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--no-moa", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "tests/benchmarks/fidelity/results/abfs.md"))
    args = parser.parse_args(argv)
    streams = args.streams.split(",")
    results, moa, extra = {}, {}, {}
    for name in streams:
        X, y = load(name)
        classes = header_classes(name, y)
        for learner, configs in CONFIGS.items():
            for col, boosting, omega in configs:
                acc, secs, n_sel = prequential(build(learner, boosting, omega, classes), X, y)
                results[(learner, name, col)] = (acc, secs, n_sel)
                print(f"{learner} {name} {col}: {acc:.3f} ({secs:.1f} s, {n_sel} selected)",
                      flush=True)
            for label, norm, deletion in VARIANTS:
                for col, boosting, omega in configs[3:]:
                    acc, secs, n_sel = prequential(
                        build(learner, boosting, omega, classes, norm, deletion), X, y)
                    extra[(learner, name, col, label)] = (acc, secs, n_sel)
                    print(f"{learner} {name} {col} {label}: {acc:.3f}", flush=True)
        if not args.no_moa:
            moa.update({(k[0], name, k[1]): v for k, v in moa_cells(name, X, y).items()})
    lines = ["# ABFS fidelity: Assis, Tables 1 (naive Bayes) and 2 (Hoeffding tree)\n",
             "Generated by `python tests/benchmarks/fidelity/fidelity_abfs.py` (see its docstring for "
             "the protocol). Cells: ours / paper (difference in points); `n` = features "
             "selected at the end of the stream. Learners wrapped with DDM; ABFS with grace "
             "period 100, selection threshold 0.05, ADWIN delta 0.002; BOLE with the "
             "defaults (per-layer normaliser, creation-order deletion).\n"]
    for learner, title in (("nb", "Naive Bayes + DDM"), ("ht", "Hoeffding tree + DDM")):
        cols = [c for c, _, _ in CONFIGS[learner]]
        lines.append(f"\n## {title}\n")
        lines.append("| stream | " + " | ".join(cols) + " | MOA native (capymoa) |")
        lines.append("|---" * (len(cols) + 2) + "|")
        for name in streams:
            cells = []
            for j, col in enumerate(cols):
                acc, _, n_sel = results[(learner, name, col)]
                ref = PAPER[learner][name][j]
                cells.append(f"{acc:.2f} / {ref:.2f} ({acc - ref:+.2f}), n={n_sel}")
            m = moa.get((learner, name, "moa"))
            mc = "-" if m is None else f"{m:.2f}"
            if (learner, name, "moa-numeric") in moa:
                mc += f"; day numeric: {moa[(learner, name, 'moa-numeric')]:.2f}"
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {mc} |")
        lines.append("\nOther readings of BOLE-ABFS (the default is per-layer sc+sw with "
                     "creation-order deletion):\n")
        lines.append("| stream | reading | " + " | ".join(cols[3:]) + " |")
        lines.append("|---|---|---|---|")
        for name in streams:
            for label, _, _ in VARIANTS:
                cells = []
                for j, col in enumerate(cols[3:], start=3):
                    acc, _, n_sel = extra[(learner, name, col, label)]
                    ref = PAPER[learner][name][j]
                    cells.append(f"{acc:.2f} / {ref:.2f} ({acc - ref:+.2f}), n={n_sel}")
                lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    lines.append(NOTES)
    synthetic_check(lines)
    write_results(args.out, "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
