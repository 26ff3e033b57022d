"""The worker's long-lived objects frozen out of full collections (worker/heap.py), and what
makes freezing safe: a stream's pipeline and its learners hold no reference cycle, so a
frozen pipeline that is dropped (passivated, revoked) is still freed, by reference counting
alone."""

from __future__ import annotations

import doctest
import gc
import weakref

import numpy as np
import pytest

from models import registry
from models.registry import CLASSIFICATION, DETECTOR, PREDICTOR, RANKER, REGRESSION, SELECTOR
from schemas.codec import decode_state, encode_state
from worker import heap as heap_module
from worker.heap import LongLivedHeap
from worker.pipeline import FeatureStreamPipeline, Pipeline, PipelineConfig, pipeline_from_state


@pytest.fixture
def collector():
    """The collector as the test found it, whatever the test froze or disabled."""
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_settle_freezes_when_the_resident_streams_grow_and_thaw_hands_back(collector):
    heap = LongLivedHeap()
    assert heap.settle(0) and gc.get_freeze_count() > 0  # at start: the imports
    assert not heap.settle(0)
    kept = [[k] for k in range(1000)]  # long-lived objects of a new stream
    assert _collected(kept)
    assert heap.settle(1) and not _collected(kept)  # frozen: no collection walks them
    assert not heap.settle(1) and not heap.settle(0)  # fewer streams: nothing new to freeze
    heap.thaw()
    assert gc.get_freeze_count() == 0 and _collected(kept)
    assert heap.settle(0)  # thawed: the next settle freezes again, whatever the count


def test_the_module_examples_run(collector):
    result = doctest.testmod(heap_module)
    assert result.attempted > 0 and result.failed == 0


def test_a_collection_before_the_freeze_leaves_no_garbage_frozen(collector):
    heap = LongLivedHeap()
    cycle = [None]
    cycle[0] = cycle  # garbage only the collector frees
    ref = weakref.ref(_Node(cycle))
    del cycle
    heap.settle(0)
    assert ref() is None


def _collected(obj) -> bool:
    """Whether the collector's generations hold ``obj`` (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


class _Node:
    """A weakly referable object in a reference cycle."""

    def __init__(self, cycle):
        self.cycle = cycle
        cycle.append(self)


def _cases():
    """Every learner of the registry in each of its roles, with a task it serves."""
    for role in (PREDICTOR, RANKER, SELECTOR, DETECTOR):
        for name in registry.names(role):
            task = CLASSIFICATION if CLASSIFICATION in registry.get(name).tasks else REGRESSION
            yield pytest.param(role, name, task, id=f"{role}-{name}")


def _config(role: str, name: str, task: str) -> PipelineConfig:
    base = dict(batch_size=20, ranking_every=50, top_k=2, detectors=())
    predictor = "adaptive_random_forest" if task == CLASSIFICATION else "isoup_symrf"
    if role == PREDICTOR:
        return PipelineConfig(predictor=(name,), rankers=(), **base)
    if role == RANKER:
        return PipelineConfig(predictor=(predictor,), rankers=(name,), **base)
    if role == SELECTOR:
        return PipelineConfig(predictor=(predictor,), selector=name, rankers=(), **base)
    return PipelineConfig(predictor=(predictor,), rankers=(), **{**base, "detectors": (name,)})


def _fed(cfg: PipelineConfig, task: str):
    """A pipeline of ``cfg`` that learned 240 rows, every third one held for a label that
    does not come (so its held store holds rows)."""
    rng = np.random.default_rng(5)
    n, d = 240, 4
    X = rng.random((n, d))
    y = [int(r[0] > 0.5) for r in X] if task == CLASSIFICATION else \
        [[float(r[0] + r[1])] for r in X]
    y = [None if k % 3 == 0 else v for k, v in enumerate(y)]
    names = [f"f{j}" for j in range(d)]
    if cfg.arrivals:
        p = FeatureStreamPipeline("s", cfg, names)
        p.add([list(r) for r in X], y, list(range(n)), np.arange(n), list(range(n)), True)
        return p
    p = Pipeline("s", cfg, d, feature_names=names)
    p.process(X, y, np.arange(n), emit=True, ids=list(range(n)), ts=[0] * n)
    return p


def _owned(root) -> list:
    """Weak references to the objects of the project reachable from ``root`` (through
    containers and the project's own objects), arrays included; the registry's specs, which
    every stream shares, left out."""
    seen, todo, refs = {id(root)}, [root], []
    while todo:
        obj = todo.pop()
        if type(obj).__weakrefoffset__:
            refs.append(weakref.ref(obj))
        for ref in gc.get_referents(obj):
            kind = type(ref)
            if id(ref) in seen or isinstance(ref, type) or callable(ref) and not hasattr(
                    ref, "__dict__") or kind.__module__ == "models.registry":
                continue
            if kind in (list, tuple, dict, set, np.ndarray) or \
                    kind.__module__.split(".")[0] in ("worker", "models"):
                seen.add(id(ref))
                todo.append(ref)
    return refs


@pytest.mark.parametrize(("role", "name", "task"), list(_cases()))
def test_a_dropped_pipeline_is_freed_by_reference_counting_alone(collector, role, name, task):
    made = _fed(_config(role, name, task), task)
    pipelines = [made, pipeline_from_state(decode_state(encode_state(made.to_state())))]
    del made
    gc.collect()
    gc.disable()  # from here only reference counting frees
    while pipelines:
        refs = _owned(pipelines.pop())
        assert len(refs) > 3  # the pipeline, its stages, their learners and arrays
        assert [r for r in refs if r() is not None] == []
