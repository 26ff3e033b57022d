"""Checkpoint records are untrusted input: every size they claim is bounded before anything is
allocated for it (no broker: the records are built here; ``tests/integration`` reads crafted
ones from the topic through the worker)."""

from __future__ import annotations

import time
import tracemalloc
import zlib

import msgpack
import numpy as np
import pytest

from models import registry
from models.cart.block_forest import BlockForestRanker
from models.generators.hyperplane import RotatingHyperplane
from models.hoeffding.adaptive_forest import AdaptiveRandomForest
from schemas import StreamCheckpoint
from worker import checkpoint_store as ckpt
from worker.pipeline import Pipeline, PipelineConfig
from worker.recovery import stream_pipeline
from worker.settings import ConfigError, load_settings


def _rows(n: int, seed: int = 1):
    X, y, _ = RotatingHyperplane(n_features=6, n_drift_features=2, mag_change=0.005,
                                 seed=seed).take(n)
    return np.ascontiguousarray(X), [int(v) for v in y]


def _traced(fn):
    """``(seconds, peak bytes, exception or None)`` of ``fn()``."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn()
        raised = None
    except Exception as exc:  # the refusal is what is measured
        raised = exc
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak, raised


@pytest.fixture(scope="module")
def arf_state() -> dict:
    X, y = _rows(600)
    arf = AdaptiveRandomForest(seed=1)
    arf.learn_many(X, y)
    return arf.to_state()


def test_a_capacity_beyond_what_the_rows_could_grow_is_refused_before_allocating(arf_state):
    """An 81 kB state claiming a capacity of 524,288 nodes allocated 2.9 GB: each of the 20
    tree slots adds at most two nodes per row, so 600 rows justify at most 30,100 (a quarter
    above what the slots could hold and the per-row reserve)."""
    st = {**arf_state, "capacity": {**arf_state["capacity"], "nodes": 524_288}}
    seconds, peak, raised = _traced(lambda: AdaptiveRandomForest.from_state(st))
    assert isinstance(raised, ValueError) and "capacity 524288" in str(raised)
    assert peak < 5e6 and seconds < 1.0, (peak, seconds)
    # the capacity the learner had is kept, bit for bit
    back = AdaptiveRandomForest.from_state(arf_state)
    assert back.to_state().get("capacity") == arf_state.get("capacity")
    assert back._capacity_bound() == {"nodes": 5 * (20 * (1 + 2 * 600) + 6 * 10) // 4,
                                      "leaves": 5 * (20 * (1 + 600) + 4 * 10) // 4}
    leaves = {**arf_state, "capacity": {**arf_state["capacity"], "leaves": 24_121}}
    with pytest.raises(ValueError, match="capacity 24121"):
        AdaptiveRandomForest.from_state(leaves)


def test_the_capacity_bound_holds_for_every_capacity_the_kernels_reach():
    """Trees that split at every row they can (grace 1, ties always broken) and a depth limit:
    the node and leaf pools never outgrow the bound, which is what a restore checks."""
    X, y = _rows(1500, seed=2)
    for params in ({"grace_period": 1, "tau": 1.0, "delta": 0.5, "lambda_value": 30.0},
                   {"grace_period": 1, "tau": 1.0, "delta": 0.5, "max_depth": 3}, {}):
        arf = AdaptiveRandomForest(n_models=3, seed=3, **params)
        for a in range(0, 1500, 10):
            arf.learn_many(X[a:a + 10], y[a:a + 10])
            bound = arf._capacity_bound()
            assert arf._arrays["node_feature"].shape[0] <= bound["nodes"]
            assert arf._arrays["leaf_node"].shape[0] <= bound["leaves"]
        assert AdaptiveRandomForest.from_state(arf.to_state()).to_state().get("capacity") \
            == arf.to_state().get("capacity")


def test_a_pipeline_whose_learner_claims_a_bloated_capacity_is_refused():
    X, y = _rows(400)
    p = Pipeline("s", PipelineConfig(), X.shape[1])
    p.process(X, y)
    state = p.to_state()
    state["stages"]["predictor"]["state"]["capacity"]["nodes"] = 1 << 19
    with pytest.raises(ValueError, match="capacity 524288"):
        stream_pipeline("s", StreamCheckpoint(group="g", topics=["t"], partition=0, stream="s",
                                              config={}, offsets={"t": 1}, state=state, ts=0))


@pytest.mark.parametrize("kind,cls,change", [
    ("adaptive_random_forest", AdaptiveRandomForest, {"n_splits": 10**6}),
    ("adaptive_random_forest", AdaptiveRandomForest, {"n_splits": "1000000"}),
    ("adaptive_random_forest", AdaptiveRandomForest, {"n_models": 10**5}),
    ("adaptive_random_forest", AdaptiveRandomForest, {"max_depth": float("nan")}),
    ("block_forest", BlockForestRanker, {"n_trees": 10**5}),
    ("block_forest", BlockForestRanker, {"block_size": 10**9}),
])
def test_learner_parameters_outside_the_registry_ranges_are_refused(arf_state, kind, cls,
                                                                    change):
    """n_splits 10^6 or a block forest's n_trees 10^5 made 300 rows take minutes: a restored
    parameter that sizes work or memory must lie in the registry's range."""
    if cls is AdaptiveRandomForest:
        state = arf_state
    else:
        X, y = _rows(300)
        bf = BlockForestRanker(seed=1)
        bf.learn_many(X, y)
        state = bf.to_state()
    bad = {**state, "params": {**state["params"], **change}}
    seconds, _, raised = _traced(lambda: cls.from_state(bad))
    name = next(iter(change))
    assert isinstance(raised, ValueError) and f"parameter {name}=" in str(raised), raised
    assert seconds < 0.5


def test_every_range_holds_the_defaults_and_settings_outside_it_stop_the_start():
    for spec in registry.REGISTRY.values():
        for name, (lo, hi) in spec.ranges.items():
            assert name in spec.parameters and lo <= hi
    assert registry.check_params("block_forest", {"n_trees": 10**5}, registry.RANKER) == [
        ("n_trees", "must be in [1, 1000], got 100000")]
    assert registry.check_params("block_forest", {"n_trees": 1000}, registry.RANKER) == []
    with pytest.raises(ConfigError, match="n_splits"):
        load_settings({"STREAMFOREST_LEARNERS__PARAMS":
                       '{"adaptive_random_forest": {"n_splits": 5000}}'})


def _zlib_bomb(inflated: int) -> bytes:
    """A zlib stream of a msgpack map holding ``inflated`` zero bytes (about 1/1000 stored)."""
    head = msgpack.packb({"v": 1, "state": None})[:-1] + b"\xc6" + inflated.to_bytes(4, "big")
    z = zlib.compressobj(9)
    out = [z.compress(head)] + [z.compress(bytes(1 << 20)) for _ in range(inflated >> 20)]
    return b"".join(out + [z.flush()])


def test_a_zlib_bomb_is_refused_as_soon_as_it_passes_its_bound():
    """A 1.57 MB record inflating to 1.6 GB cost 28 s and 3.2 GB before it was refused. An
    envelope may inflate to 64 times its stored bytes or to the state budget, no further; its
    size is measured before its output is held."""
    bomb = _zlib_bomb(400 << 20)  # 400 MB of zeros in about 400 kB
    limits = ckpt.Limits(state_budget=16 << 20)
    limit = limits.inflated(len(bomb))
    assert limit == 64 * len(bomb) < 30e6
    seconds, peak, raised = _traced(lambda: ckpt.decode_blob(bomb, limits))
    assert isinstance(raised, ValueError) and f"inflates past {limit} bytes" in str(raised)
    assert peak < 8e6 < limit and seconds < 2.0, (peak, seconds)  # none of the 26 MB held
    # the bound: 64 x the stored bytes, at least the budget, never past 2 GiB
    assert ckpt.Limits(state_budget=1 << 30).inflated(1000) == 1 << 30
    assert ckpt.Limits(state_budget=1 << 20).inflated(1 << 20) == 64 << 20
    assert ckpt.Limits(state_budget=1 << 40).inflated(1) == ckpt._MAX_STATE_BYTES


def test_a_state_of_more_values_than_the_settings_allow_is_refused_before_decoding():
    """A msgpack value may take one byte and decode to a 64-byte Python object (an empty
    list): the number of values, not the bytes, bounds what decoding allocates."""
    limits = ckpt.Limits()
    empties = zlib.compress(b"\xdd" + (50_000_000).to_bytes(4, "big") + b"\x90" * 50_000_000)
    nested = zlib.compress(msgpack.packb({"state": [[0] * 1000] * 2000}))
    for blob in (empties, nested):
        seconds, peak, raised = _traced(lambda b=blob: ckpt.decode_blob(b, limits))
        assert isinstance(raised, ValueError) and "values" in str(raised) \
            or "max_array_len" in str(raised), raised
        assert peak < 150e6 and seconds < 2.0, (peak, seconds)
    # the settings decide the count: rows held by streams of features, features, classes
    s = load_settings({"STREAMFOREST_LEARNERS__FEATURE_STREAM_ROWS": "1000000"})
    assert ckpt.Limits.from_settings(s).max_objects == ckpt.Limits().max_objects + 2 * 900_000


@pytest.mark.parametrize("predictor", ["adaptive_random_forest", "forgetful_forest"])
def test_a_real_state_is_restored_within_its_bounds_and_four_times_its_size(predictor):
    """A pipeline after 2,000 rows: a few hundred values, inflating 3-16 times; restoring it
    (the blob decoded, the pipeline rebuilt) peaks at most at 4 times the inflated msgpack,
    the multiple :func:`worker.checkpoint_store.decode_blob` states."""
    X, y = _rows(2000)
    p = Pipeline("s", PipelineConfig(predictor=predictor), X.shape[1])
    p.process(X, y)
    env = StreamCheckpoint(group="g", topics=["t"], partition=0, stream="s", config={},
                           offsets={"t": 1}, state=p.to_state(), ts=0)
    blob = ckpt.encode_blob(env, level=1)  # compressed: the inflation bounds apply
    packed = ckpt.inflate(blob)
    assert ckpt.count_values(packed, 10**6) < 1000
    assert len(packed) < 16 * len(blob) and len(packed) < ckpt.Limits().inflated(len(blob))
    limits = ckpt.Limits(state_budget=0, max_objects=1000)
    assert ckpt.decode_blob(blob, limits) == env
    seconds, peak, raised = _traced(lambda: stream_pipeline("s", ckpt.decode_blob(blob, limits)))
    assert raised is None and peak <= 4 * len(packed), (peak / len(packed), seconds)


def test_a_manifest_claiming_more_chunks_than_records_or_bytes_is_refused():
    """A manifest claiming 10^9 chunks built a 3 GB key map and ended in MemoryError: a
    stream's chunks are distinct records below the manifest, each but the last at least
    1 kB, so its claim is checked against both before anything is read."""
    m = ckpt.empty_manifest("g", "t", 0, 5)
    ok = {"a": [10, 3, 2100], "b": [13, 1, 0], "c": [0, 1, 10]}
    ckpt.check_spans(m.model_copy(update={"streams": ok}), 14)
    for span, end in (([10, 10**9, 2100], 100), ([10, 3, 2100], 12), ([10, 4, 3000], 100),
                      ([10, 0, 0], 100), ([20, 1, 5], 20)):
        bad = m.model_copy(update={"streams": {"s": span}})
        seconds, peak, raised = _traced(lambda bad=bad, end=end: ckpt.check_spans(bad, end))
        assert isinstance(raised, ckpt.CheckpointError), span
        assert seconds < 0.01 and peak < 1e5


def test_the_parameters_a_pipeline_would_build_learners_with_are_bounded_too():
    """A pipeline's configuration names the parameters of learners it builds later (a
    predictor retrained after a feature drift): they are bounded as the restored ones."""
    X, y = _rows(200)
    cfg = PipelineConfig(params={"adaptive_random_forest": {"n_models": 5}})
    p = Pipeline("s", cfg, X.shape[1])
    p.process(X, y)
    state = p.to_state()
    state["config"]["params"]["adaptive_random_forest"]["n_splits"] = 10**6
    with pytest.raises(ValueError, match="n_splits=1000000 is outside"):
        stream_pipeline("s", StreamCheckpoint(group="g", topics=["t"], partition=0, stream="s",
                                              config={}, offsets={"t": 1}, state=state, ts=0))
