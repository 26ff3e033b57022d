"""A single-target regression label may be a plain number: ``"y": 3.7`` is ``"y": [3.7]``.

Both decoding paths (the per-message fast path and full validation) take a finite float
label and refuse the same bad ones; a stream whose first label is a float is a one-target
regression stream, learns exactly as with lists of one, and takes both forms mixed; a stream
of two targets, or a classification stream, refuses a plain float.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from schemas.instances import plain_instance_fields
from schemas.messages import Instance, LabelEvent
from worker.pipeline import PipelineConfig, PipelineError
from worker.pipeline.engine import Pipeline
from worker.pipeline.tasks import make_task, task_of_label


def _instance(y) -> dict:
    return {"v": 1, "stream": "s", "id": 1, "ts": 0, "x": [0.5], "y": y}


@pytest.mark.parametrize("y, code", [(3.7, None), (-0.0, None), (1e100, None),
                                     (1e101, "out_of_range"), (float("nan"), "finite_number"),
                                     (float("inf"), "finite_number")])
def test_both_decoding_paths_give_a_float_label_the_same_verdict(y, code):
    fast = plain_instance_fields(_instance(y))
    try:
        full = Instance.model_validate(_instance(y))
    except ValidationError as exc:
        assert code is not None and exc.errors()[0]["type"] == code
        assert fast is None  # the fast path never takes what full validation refuses
        return
    assert code is None
    assert fast[5] == full.y == y and type(full.y) is float
    assert LabelEvent.model_validate({"v": 1, "stream": "s", "id": 1, "ts": 0, "y": y}).y == y


def test_a_float_first_label_makes_a_one_target_regression_stream():
    assert task_of_label(3.7) == "regression" and task_of_label(3) == "classification"
    task = make_task("regression", 3.7)
    assert task.n_targets == 1
    task.check_label(2.5)
    task.check_label([2.5])
    task.check_label(2)  # an integer is a number too once the stream is a regression stream
    assert task.learn_targets([1.5, [2.5], 3]).tolist() == [[1.5], [2.5], [3.0]]


def test_two_targets_and_classification_refuse_a_plain_number():
    with pytest.raises(PipelineError) as err:
        make_task("regression", [1.0, 2.0]).check_label(3.7)
    assert err.value.code == "target_count"
    with pytest.raises(PipelineError) as err:
        make_task("classification").check_label(3.7)
    assert err.value.code == "invalid_target"


def _run(ys: list) -> list:
    cfg = PipelineConfig(predictor=["isoup_tree"], rankers=[], detectors=["adwin"])
    X = np.random.default_rng(3).random((300, 3))
    res = Pipeline("s", cfg, 3).process(X, ys)
    return [v for b in res.blocks for v in b.y_pred]


def test_plain_numbers_learn_exactly_as_lists_of_one():
    y = (np.random.default_rng(4).random(300) * 10).tolist()
    as_lists = _run([[v] for v in y])
    assert as_lists[1] is not None
    assert _run(y) == as_lists
    assert _run([v if i % 2 else [v] for i, v in enumerate(y)]) == as_lists  # mixed


def test_a_regression_profile_takes_a_whole_number_as_its_first_target():
    # the profile fixes the task: 3 is then one target, not a class label
    cfg = PipelineConfig(task="regression", predictor=["isoup_tree"], rankers=[],
                         detectors=[])
    p = Pipeline("s", cfg, 3)
    X = np.random.default_rng(4).random((50, 3))
    p.process(X, [3] + [1.5] * 49)
    assert p.task.name == "regression" and p.task.n_targets == 1
    auto = Pipeline("s", PipelineConfig(), 3)  # without the profile: a class label
    auto.process(X[:1], [3])
    assert auto.task.name == "classification"
