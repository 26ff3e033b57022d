"""Fixed inputs whose outputs and states must be the same bits on every x86-64 CPU.

Three families of cases, each reduced to a SHA-256 digest:

* ``PIPELINES``: a stream's pipeline (learners, detectors, rankings) over a drifting stream
  cut into uneven consume batches; the digest covers every prediction, probability, alert
  and ranking. ``WIRE``: two interleaved streams decoded, learned and encoded as the worker
  does; the digest covers the output message bytes.
* :func:`learner_digests`: every learner family of the registry with the parameters a user
  gets, test-then-train on a fixed stream; the digest covers what it answers (predictions,
  probabilities, importances, selections, detections) and its checkpointed state.
* :func:`state_cases`: pipelines and learners checkpointed halfway; the state bytes, and
  what a restored copy answers for the rest of the stream.

The digests are pinned below and checked in process by ``tests/unit/test_pipeline_golden.py``
and ``tests/models/test_learner_golden.py``, and in separate processes under several CPU
feature sets by ``tests/determinism/test_cpu_feature_sets.py``. They are never regenerated
to fit a machine: a change says why the old digests were wrong, or which deliberate change
of outputs it records.

History of the pipeline digests (``PIPELINES``, ``WIRE``). They were first taken from the
single-file pipeline of version 0.1.0; the restructured engine gave every prediction,
probability, alert and ranking bit for bit. Then:

* the alert rules of the registry (collapsing forgetful trees are published only when a
  quarter of the forest collapses at one mini-batch, once per episode; DDM warning zones are
  counted, not published) removed alerts from ``default``, ``tree_ddm``, ``forest_small_ddm``;
* the adaptive random forest became the default classification predictor: ``default``
  changed; the former default is pinned as ``forgetful_forest`` with the former digests;
* the block-forest ranker became the default ranker (issue 15): the cases that ran the
  former default rankers name them (``ORF_RANKS``) and keep their digests; its memory, its
  weights (``former_weights``), the pooled evidence (``unpooled``), the young stream's prior
  (``young_prior``) and the longest candidate memory (``powers_of_two``) each changed
  ``default`` and were pinned by the cases named for them (``former_weights`` and
  ``young_prior`` removed with their options in issue 37, below);
* (issue 34) every computation on these paths gives the same bits on every CPU: the
  C library's ``exp``, ``log``, ``log2``, ``pow`` and ``erf`` and numpy's ``exp``, ``log``
  and ``power`` (whose results depend on FMA and AVX-512) became the core's own
  (:mod:`models.core._fmath`), and a matrix product became an ordered sum. The former digests
  were those of CPUs without AVX-512 (an AVX-512 machine failed 8 of 15 cases) and of
  glibc's FMA variants; the cases with the adaptive random forest (naive Bayes leaves: exp
  and log; Gaussian splits: erf) or the block forest (exp, log, powers) changed:
  ``default``, ``powers_of_two``, ``young_prior``, ``unpooled``, ``former_weights``. The
  others (forgetful trees and forests, the online random forest, iSOUP) gave the same
  bits before and after;
* (issue 36) a predictor that learns row by row (the adaptive random forest, the online
  random forest, Hoeffding trees, naive Bayes, iSOUP) learns each labelled row right after
  predicting it, in its fused test-then-train kernel, instead of once per mini-batch: every
  instance is predicted by a model that learned every earlier label. The cases with such a
  predictor changed: ``default``, ``powers_of_two``, ``young_prior``, ``unpooled``,
  ``former_weights`` (one drift alert fewer: ADWIN watches the loss of fresher predictions)
  and ``orf_predictor``; the forgetful cases (mini-batch learners by definition) did not;
* (issue 36) the rankers learn as their blocks complete (a block forest every ``stride``
  rows, no longer once per mini-batch) and, by default, a ranking is published after every
  block (``publish_rankings="block"``), so the published ranking is the ranker's state: the
  cases with the block forest changed (``default``, ``powers_of_two``, ``young_prior``,
  ``unpooled``, ``former_weights``: 270 rankings where 25 to 29 were published). The cases
  whose rankers learn once per mini-batch (the online random forest, iSOUP) now name the
  former publishing rule (``publish_rankings="top_k"``) and kept their digests bit for bit;
  ``default_interval`` pins the third rule.
* (issue 36) the adaptive random forest follows MOA's ``AdaptiveRandomForest`` by default
  (``flavour="moa"``: detectors fed the error after learning and reacting to a rise only,
  background trees learning with weight 1, accuracy weights in percent, no 99% "no split"
  rule, point-mass naive Bayes estimators) with MOA's subset size ``sqrt+1``: every case
  with it changed (``default``, ``default_interval``, ``powers_of_two``, ``young_prior``,
  ``unpooled``, ``former_weights``; wire ``default``, ``powers_of_two``, ``young_prior``).
  ``arf_river`` runs the former defaults (``flavour="river"``, ``max_features="sqrt"``)
  and gives the former ``default`` digest bit for bit.
* (issue 37) the block-forest ranker kept only its default rule and its documented options:
  ``young_prior`` (pipeline and wire) and ``former_weights`` (``weights="relative"`` with
  ``corr_eta``) pinned options that no longer exist and were removed, with their digests
  (pipeline ``be010346...a97d9a`` and ``58fb8f0c...0ff0162``, wire ``ffcfd75e...6d6ea9``).
  Every other case, ``default``, ``powers_of_two`` and ``unpooled`` among them, kept its
  digest bit for bit.

History of the learner digests (``LEARNERS``), which cover the final checkpointed state beside
the answers:

* (issue 37) the block-forest rankers' state became version 2: the parameters and arrays of
  the removed alternatives (Lepski's rule, the relative weights and correlations, the young
  stream's prior) are no longer written and the state names its version, so
  ``block_forest`` and ``block_forest_regression`` changed (before: ``bcef9acf...e5f5d99``
  and ``0861bbcb...8fd1f18``). What they answer did not: the digests of their answers alone
  are ``a004e536...97093fa7`` and ``bb78bb6a...c7f4f8`` before and after.
* (issue 36, part 6) the adaptive random forest keeps its trees in a node pool and its leaves'
  statistics in a leaf pool (no longer one node capacity for every slot and estimators for
  every node; the pools grow by a quarter, and the state records each pool's capacity): its
  state's arrays changed, so ``adaptive_random_forest`` changed. What it answers did not:
  the digest of its answers alone (predictions, probabilities, importances, also restored
  halfway) is ``e8de6304...bba55c`` before and after.
* (issue 36, part 5) the iSOUP leaves' perceptron takes the delta rule with its rate capped at the
  row's exact fit instead of MOA's rescaling of each target's weights to unit L1 norm (the
  cause of the leaves' lag behind river's), and iSOUP-SymRF follows drift by default
  (per-tree ADWIN starting background trees that replace a tree only when better; none
  starts on this stationary case): ``isoup_tree`` and ``isoup_symrf`` changed. No pipeline
  digest did (no pipeline case runs a regression stream). The former defaults remain as
  ``perceptron="unit_l1", drift_delta=None``, pinned in ``tests/models/test_isoup.py``.
* (issue 36) the adaptive random forest's defaults became MOA's rules and subset size
  (``flavour="moa"``, ``max_features="sqrt+1"``): ``adaptive_random_forest`` changed.
"""

from __future__ import annotations

import hashlib

import msgpack
import numpy as np

from models import registry
from models.generators.hyperplane import RotatingHyperplane
from models.registry import DETECTOR, REGRESSION
from schemas.codec import decode_state, encode_state
from worker.pipeline import Pipeline, PipelineConfig

ORF_SMALL = {"n_trees": 3, "min_samples": 10, "n_tests": 5}
ORF_RANKS = ["online_random_forest", "isoup_symrf"]  # the default rankers before block_forest
TOP_K = "top_k"  # rankings published when their top-k changes (the default before issue 36)
# the adaptive random forest's defaults before it took MOA's rules (issue 36)
ARF_RIVER = {"flavour": "river", "max_features": "sqrt"}

#: name: (PipelineConfig arguments, digest, alerts, rankings)
PIPELINES = {
    "default": (dict(), "88f6d552032c2a18143bc817c2b9beb1685ad7bf26aa87a5214b3c10b77ae62d", 3, 270),
    "arf_river": (dict(params={"adaptive_random_forest": ARF_RIVER}),
                  "29d0b11cfff85f1d6edbfea0d8ed78db02380e9ae7f7acf12b91d1a0b869ef7d", 3, 270),
    "default_interval": (dict(publish_rankings="interval"),
                         "209bf9dd1a701f79ee831e7f7ca946bbbe6f64bdf528cea9b391c7cf87f00ac9", 3, 3),
    "powers_of_two": (dict(params={"block_forest": {"longest": 0}}),
                      "d7b29664bc491172bd37bac6cf7880054d46e6143f38ebe6cba3797ead856607", 3, 270),
    "unpooled": (dict(params={"block_forest": {"pool": 0.0, "longest": 0}}),
                 "59c28b64e9f54afc6c8e04d2e1d470186aac6ebbede5ee85e5a29cf6852bcb52", 3, 270),
    "forgetful_forest": (dict(predictor="forgetful_forest", rankers=ORF_RANKS, publish_rankings=TOP_K),
                         "5aa13b0ad53bf30af26652f8dda3e207303268b96bcad17a88e84a6b76c9aa16", 4, 27),
    "tree_ddm": (dict(predictor="forgetful_tree", detectors=["ddm"], batch_size=50,
                      ranking_every=400, top_k=3, rankers=ORF_RANKS, publish_rankings=TOP_K),
                 "bfcca0402d6c8615816916cf38d8412c3e69ce223939bb1d569b7de404cc1914", 1, 31),
    "orf_predictor": (dict(predictor="online_random_forest", rankers=["online_random_forest"],
                           params={"online_random_forest": {"n_trees": 4}}, ranking_every=500,
                           publish_rankings=TOP_K),
                      "83c5a52f164787b23d88dcdc19e493cd8420136faa0129d4a0037b078ee90b8a", 2, 40),
    "tree_plain": (dict(predictor="forgetful_tree", rankers=[], detectors=[], batch_size=30),
                   "dfc64ef99134eef687ec3e666095c3a1d6bdcbd2182d837f77a86f56eb0c18e9", 1, 0),
    "forest_small_ddm": (dict(predictor="forgetful_forest", detectors=["ddm"], batch_size=64,
                              ranking_every=300, rankers=ORF_RANKS, publish_rankings=TOP_K,
                              params={"forgetful_forest": {"n_trees": 5},
                                      "online_random_forest": ORF_SMALL}),
                         "7b72cf85cd5f661ca4473a0ef25fe141e7bb4bee6d71594cc5e02b8343ec5e93", 2, 61),
}
CUTS = [0, 1, 37, 400, 401, 1450, 1600, 2222, 3000]

#: name: (PipelineConfig arguments, digest of the output messages)
WIRE = {
    "default": (dict(ranking_every=400),
                "1d41e240914da6afefebca6a5a2def51e3facd968ecdbc1b36512cde883dbfbc"),
    "powers_of_two": (dict(ranking_every=400, params={"block_forest": {"longest": 0}}),
                      "68776bef7c90e8d3d546b4175583e9643b6b7f10cd3343a51563f194c33d911c"),
    "forgetful_forest": (dict(predictor="forgetful_forest", ranking_every=400, rankers=ORF_RANKS,
                              publish_rankings=TOP_K),
                         "97ddc69ca75041858f9a4e8c3cfa936f43a5c1428df27ddbddc5b6a416aaba32"),
    "tree_ddm": (dict(predictor="forgetful_tree", detectors=["ddm"], batch_size=50,
                      ranking_every=300, params={"online_random_forest": {"n_trees": 3}},
                      rankers=ORF_RANKS, publish_rankings=TOP_K),
                 "c8b120321b2b5b49c04ea30bd4eca6fe4c82d80368cc1c625beeaa6b5f74c365"),
}

#: learner family: digest of its answers and final state (:func:`learner_digests`)
LEARNERS = {
    "abfs": "bd235a55ca33f87ac52afd8843835a23597c3150b5311965ab45f754a06c4e46",
    "adaptive_random_forest": "4c844e4e786b39e1b4af79d121102c415b61ec680a7b132c049407c4407fb57d",
    "adwin": "0f319726d70d1f32eef377bbc229aa6b4a354de61a64738076a703be9b6c8e51",
    "block_forest": "1462e74c8663c5307008f5138cabb4da5696fc9f15156f4089196f63b05d1f89",
    "block_forest_regression": "391878d1def565b3e236e9fd323acff1066fd9876e92d7a0a80a01bde05185f6",
    "ddm": "99a410e82a7e516ea7df026b71db6dfc463694164b3a7b6cb0f9504534c5f953",
    "feature_stream": "cbba035c6d8f3c25b7db16eed40ee9490138256486492d5a4143fddd8308965e",
    "forgetful_forest": "8341575f791f77385a334703cb9088fe1354a911732ad278b6fc08531de931ce",
    "forgetful_tree": "16a0147300d491735f2a0f86467d9ca4aa36a5503401dc35c5c1d9cfa044bc0a",
    "hoeffding_tree": "4d439d6cd641da1486b547f226c2ebc363a837d0cf8a5524083637ee5144a35d",
    "isoup_symrf": "0557d4b0c6ffbd11e590f97f31c28803a6359837bd92dfbe5b9b1ba0b5a2b7ee",
    "isoup_tree": "1276a10548d47bcb4dd9ece7ab7891860b328e3c9e7d418568d2edc59781648b",
    "naive_bayes": "de33f4e48579ba4f2ef229eb43ccd1789dfc18e04c8dd4c74533e8f6d340af70",
    "online_random_forest": "0f7f89d2aa3d9dfa7c85049e17e6d33edcc96fe496ee68e82c7e0092a0eb822d",
}

#: digest of the core's elementary functions over a fixed grid (:func:`functions_digest`)
FUNCTIONS = "c3b333b3bd3b5f905a0bf7661ab58899704b443576297d4a1b0c3a42a39d9eab"


# ------------------------------------------------------------------------------ functions


def functions_digest() -> str:
    """SHA-256 of ``exp``, ``log``, ``log2``, ``erf``, ``lgamma``, ``pow_positive`` and
    ``ipow`` of :mod:`models.core._fmath` over a fixed grid of 20,000 arguments each."""
    from models.core import _fmath as fm

    rng = np.random.default_rng(34)
    # positive arguments over the whole range by exact scaling (np.exp would itself differ)
    positive = np.ldexp(rng.uniform(0.5, 1.0, 20000), rng.integers(-1070, 1020, 20000))
    grids = {"exp": rng.uniform(-745.0, 709.0, 20000), "log": positive,
             "erf": rng.uniform(-7.0, 7.0, 20000), "lgamma": rng.uniform(1e-3, 100.0, 20000)}
    grids["log2"] = grids["log"]
    h = hashlib.sha256()
    for name, x in grids.items():
        f = getattr(fm, name)
        h.update(name.encode() + np.array([f(v) for v in x]).tobytes())
    u = rng.uniform(0.0, 2.0, 2000)
    h.update(np.array([fm.pow_positive(a, b) for a, b in zip(u, u[::-1])]).tobytes())
    h.update(np.array([fm.ipow(a, int(k)) for a, k in zip(u, rng.integers(0, 400, 2000))]).tobytes())
    return h.hexdigest()


# ------------------------------------------------------------------------------ pipelines


def golden_stream(seed: int = 7, n: int = 3000, d: int = 6):
    """A rotating hyperplane with an abrupt label flip halfway and every 13th label missing."""
    X, y, _ = RotatingHyperplane(n_features=d, n_drift_features=3, mag_change=0.02,
                                 seed=seed).take(n)
    labels = ["up" if v else "down" for v in y]
    # an abrupt flip halfway: forgetful trees collapse and detectors fire
    labels = labels[: n // 2] + [("down" if v == "up" else "up") for v in labels[n // 2:]]
    for i in range(5, n, 13):
        labels[i] = None
    return np.ascontiguousarray(X), labels


def results_digest(results) -> str:
    """SHA-256 of the predictions, probabilities, alerts and rankings of pipeline results."""
    h = hashlib.sha256()
    for res in results:
        for b in res.blocks:
            h.update(msgpack.packb([b.start, b.stop, b.classes, b.y_pred]))
            if b.proba is not None:
                h.update(np.ascontiguousarray(b.proba, dtype=np.float64).tobytes())
        for a in res.alerts:
            h.update(msgpack.packb([a.row, a.source, a.level, a.position, a.detail, a.feature]))
        for r in res.rankings:
            h.update(msgpack.packb([r.row, r.method, r.features, r.scores, r.n_seen]))
    return h.hexdigest()


def pipeline_case(name: str) -> tuple[str, int, int]:
    """``(digest, alerts, rankings)`` of pipeline case ``name`` over :data:`CUTS`."""
    kw = PIPELINES[name][0]
    X, y = golden_stream()
    p = Pipeline("golden-stream", PipelineConfig(**kw), X.shape[1])
    results = [p.process(X[a:b], y[a:b]) for a, b in zip(CUTS, CUTS[1:])]
    return (results_digest(results), sum(len(r.alerts) for r in results),
            sum(len(r.rankings) for r in results))


def wire_case(name: str) -> str:
    """Digest of the output messages of wire case ``name``: two interleaved streams, decoded,
    learned and encoded in consume batches of 700."""
    from confluent_kafka import Message

    from worker.intake import Caps, RecordDecoder
    from worker.metrics import WorkerMetrics
    from worker.output import Outbox, OutputEncoder
    from worker.pipeline import Profiles
    from worker.settings import load_settings
    from worker.task import PartitionTask
    from worker.tools.dev.produce import instance_values

    kw = WIRE[name][0]
    enc = OutputEncoder(load_settings({}).topics, WorkerMetrics())
    task = PartitionTask("g", "in", 0, "in.features")
    dec = RecordDecoder(Profiles(PipelineConfig(**kw)), Caps())
    values = []
    for k, s in enumerate(("a", "b")):
        X, y, _ = RotatingHyperplane(n_features=5, n_drift_features=2, mag_change=0.01,
                                     seed=k).take(1500)
        ys = [None if i % 11 == 3 else int(v) for i, v in enumerate(y)]
        values.append([(v, s.encode()) for v in instance_values(s, X, ys, ts0=1000)])
    msgs = [Message(topic="in", partition=0, offset=i, key=key, value=v)
            for i, (v, key) in enumerate(m for pair in zip(*values) for m in pair)]
    h = hashlib.sha256()
    for a in range(0, len(msgs), 700):
        batch = msgs[a:a + 700]
        outbox = Outbox("test")
        offsets = np.array([m.offset() for m in batch], dtype=np.int64)
        for s, sr in dec.read_instances(task, batch, offsets, outbox, 1 << 20).items():
            pl = task.pipelines[s]
            sr.finish(pl.n_features)
            enc.encode(task, s, pl, pl.process(sr.X, sr.ys, sr.offsets), sr, 0, outbox)
        if outbox.dead:
            raise AssertionError(f"wire case {name}: dead letters {outbox.dead[:1]}")
        for topic, key, vals in outbox.records:
            for v in vals:
                h.update(topic.encode() + key + v)
    return h.hexdigest()


# ------------------------------------------------------------------------------ learners


def classification_stream(n: int = 1500, d: int = 6):
    """Three classes from a drifting hyperplane and a second score (string labels)."""
    X, y, _ = RotatingHyperplane(n_features=d, n_drift_features=2, mag_change=0.01,
                                 seed=11).take(n)
    third = X[:, 0] + X[:, 1] > 1.4
    labels = np.where(third, "c", np.where(y == 1, "a", "b"))
    return X, [str(v) for v in labels]


def regression_stream(n: int = 1200, d: int = 5):
    """Three targets: linear, a step and a product of features, with Gaussian noise."""
    rng = np.random.default_rng(12)
    X = rng.random((n, d))
    Y = np.column_stack([2.0 * X[:, 0] + X[:, 1], np.where(X[:, 2] > 0.5, 3.0, -1.0),
                         X[:, 3] * X[:, 4]]) + rng.normal(0, 0.05, (n, 3))
    return X, Y


def loss_stream(n: int = 3000):
    """A 0/1 loss whose error rate jumps from 0.1 to 0.4 halfway."""
    u = np.random.default_rng(13).random(n)
    return (u < np.where(np.arange(n) < n // 2, 0.1, 0.4)).astype(np.float64)


def build(name: str, seed: int = 3):
    """Learner family ``name`` with the parameters a user gets (its registry defaults)."""
    spec = registry.get(name)
    return spec.build({}, tuple(spec.roles - {DETECTOR}), seed=seed)


def _answers(model, X, h) -> None:
    """Add what ``model`` answers for ``X`` to the hash ``h``."""
    if hasattr(model, "predict_proba_many"):
        h.update(np.ascontiguousarray(model.predict_proba_many(X), dtype=np.float64).tobytes())
    if hasattr(model, "predict_many"):
        pred = model.predict_many(X)
        if isinstance(pred, np.ndarray) and pred.dtype.kind == "f":
            h.update(np.ascontiguousarray(pred).tobytes())
        else:
            h.update(msgpack.packb([None if v is None else str(v) for v in pred]))
    if hasattr(model, "selected"):
        h.update(msgpack.packb([int(v) for v in model.selected()]))
    if hasattr(model, "importances"):
        imp = model.importances()
        for key in sorted(imp):
            h.update(key.encode() + np.ascontiguousarray(imp[key], dtype=np.float64).tobytes())


def _steps(name: str):
    """The calls a learner of family ``name`` gets: ``(kind, X, y)`` per step."""
    spec = registry.get(name)
    if DETECTOR in spec.roles:
        loss = loss_stream()
        return [("update", loss[i:i + 250], None) for i in range(0, len(loss), 250)]
    if spec.arrivals:
        X, y = classification_stream(n=400)
        return [("grow", X[:, :d], y) for d in range(1, X.shape[1] + 1)]
    X, y = regression_stream() if REGRESSION in spec.tasks else classification_stream()
    return [("learn", X[i:i + 100], y[i:i + 100]) for i in range(0, X.shape[0], 100)]


def _step(model, step, h) -> None:
    """One call: detections for a detector; a generation on one more column, then answers
    (a learner of arrivals); else answers on the rows, then learning them (test-then-train)."""
    kind, X, y = step
    if kind == "update":
        h.update(np.asarray(model.update_many(X), dtype=np.int64).tobytes())
        return
    if kind == "grow":
        model.learn_many(X, y)
        _answers(model, X, h)
        return
    if getattr(model, "n_seen", 0):
        _answers(model, X, h)
    model.learn_many(X, y)


def state_bytes(model) -> bytes:
    """The learner's or pipeline's state as the worker checkpoints it (msgpack)."""
    return encode_state(model.to_state())


def learner_run(name: str, restore_at: int | None = None, state: bytes | None = None):
    """Run family ``name`` over its steps; return ``(answers digest, state at the middle
    step, final state digest)``. With ``state``, the learner is restored from it at the
    middle step instead of continuing (``restore_at``: that step)."""
    steps = _steps(name)
    middle = len(steps) // 2 if restore_at is None else restore_at
    model = build(name)
    h = hashlib.sha256()
    mid_state = b""
    for i, step in enumerate(steps):
        if i == middle:
            mid_state = state_bytes(model)
            if state is not None:
                model = type(model).from_state(decode_state(state))
        _step(model, step, h)
    final = state_bytes(model)
    h.update(final)
    return h.hexdigest(), mid_state, hashlib.sha256(final).hexdigest()


def learner_digests() -> dict[str, str]:
    """Per registered family: the digest of its answers and final state."""
    return {name: learner_run(name)[0] for name in registry.names()}


# ------------------------------------------------------------------------------ restores

#: pipelines checkpointed halfway (after the stream's first 1,450 rows)
RESTORED_PIPELINES = {
    "default": dict(),
    "forgetful_forest": PIPELINES["forgetful_forest"][0],
    "orf_predictor": PIPELINES["orf_predictor"][0],
    "abfs_selector": dict(selector="abfs", predictor="hoeffding_tree", rankers=["abfs"]),
    "regression": dict(),
}


def _pipeline_data(case: str):
    if case == "regression":
        X, Y = regression_stream(n=1500)
        return X, [list(map(float, row)) for row in Y]
    return golden_stream()


def pipeline_restore(case: str, state: bytes | None = None):
    """``(digest of the outputs after the cut, state bytes at the cut)`` of restore case
    ``case``; with ``state``, the pipeline is restored from those bytes at the cut."""
    X, y = _pipeline_data(case)
    cut = 1450 if case != "regression" else 700
    p = Pipeline(f"restore-{case}", PipelineConfig(**RESTORED_PIPELINES[case]), X.shape[1])
    p.process(X[:cut], y[:cut])
    mid = state_bytes(p)
    if state is not None:
        p = Pipeline.from_state(decode_state(state))
    rest = [p.process(X[a:b], y[a:b]) for a, b in ((cut, cut + 333), (cut + 333, len(y)))]
    return results_digest(rest) + ":" + hashlib.sha256(state_bytes(p)).hexdigest(), mid


def state_cases() -> list[str]:
    """Names of every restore case: ``pipeline:<case>`` and ``learner:<family>``."""
    return ([f"pipeline:{c}" for c in RESTORED_PIPELINES]
            + [f"learner:{n}" for n in registry.names()])


def restore_case(case: str, state: bytes | None = None) -> tuple[str, bytes]:
    """``(digest after the cut, state bytes at the cut)`` of a restore case (see
    :func:`state_cases`); with ``state``, restored from it at the cut."""
    kind, name = case.split(":", 1)
    if kind == "pipeline":
        return pipeline_restore(name, state)
    digest, mid, final = learner_run(name, state=state)
    return digest + ":" + final, mid

