"""Prequential metrics of ``streamforest evaluate`` (worker/tools/evaluate/scores.py)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

from worker.tools.evaluate import scores
from worker.tools.evaluate.scores import StreamMetrics, spearman

CLASS_KEYS = {"n", "accuracy", "kappa", "kappa_t", "macro_f1"}
REGRESSION_KEYS = {"n", "mae", "rmse", "amrae", "mae_per_target", "rmse_per_target", "rmae_per_target"}


def _feed(m: StreamMetrics, y_true, y_pred, sizes, positions=None) -> StreamMetrics:
    """Feeds rows in consecutive chunks of the given sizes (cycled)."""
    i, k = 0, 0
    while i < len(y_true):
        j = min(len(y_true), i + sizes[k % len(sizes)])
        m.update(y_true[i:j], y_pred[i:j], None if positions is None else positions[i:j])
        i, k = j, k + 1
    return m


def _same(a, b) -> bool:
    """Equal metric dicts or lists, NaN equal to NaN, floats to 1e-12 relative."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-12)
    return a == b


# -- classification ---------------------------------------------------------------------------


def test_classification_hand_computed():
    # truth a b a a b b, predictions a a a b b (none): hits at rows 0, 2, 4
    m = StreamMetrics("classification")
    m.update(["a", "b", "a", "a", "b", "b"], ["a", "a", "a", "b", "b", None])
    c = m.cumulative()
    assert set(c) == CLASS_KEYS
    assert c["n"] == 6
    assert c["accuracy"] == 0.5
    # chance agreement: truth a:3 b:3, predictions a:3 b:2 -> (9 + 6) / 36
    assert c["kappa"] == pytest.approx((0.5 - 15 / 36) / (1 - 15 / 36)) == pytest.approx(1 / 7)
    # the previous label is right at rows 3 and 5 (never at row 0): 2/6
    assert c["kappa_t"] == pytest.approx((0.5 - 1 / 3) / (1 - 1 / 3)) == pytest.approx(0.25)
    # F1: a = 2*2/(3+3), b = 2*1/(3+2)
    assert c["macro_f1"] == pytest.approx((4 / 6 + 2 / 5) / 2)


def test_classification_agrees_with_sklearn_and_a_loop_for_kappa_t():
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score

    rng = np.random.default_rng(3)
    y = rng.choice(["x", "y", "z", "w"], size=600, p=[0.5, 0.3, 0.15, 0.05]).tolist()
    p = [v if rng.random() < 0.6 else str(rng.choice(["x", "y", "z", "v"])) for v in y]
    for i in rng.choice(600, 40, replace=False):
        p[i] = None
    c = _feed(StreamMetrics("classification"), y, p, [37, 101]).cumulative()
    filled = [v if v is not None else "<none>" for v in p]  # a column no truth has
    seen = sorted((set(y) | set(p)) - {None})  # "v" is only ever predicted
    assert c["accuracy"] == pytest.approx(accuracy_score(y, filled))
    assert c["kappa"] == pytest.approx(cohen_kappa_score(y, filled))
    assert c["macro_f1"] == pytest.approx(f1_score(y, filled, labels=seen, average="macro"))
    no_change = sum(y[i] == y[i - 1] for i in range(1, len(y))) / len(y)
    assert c["kappa_t"] == pytest.approx((c["accuracy"] - no_change) / (1 - no_change))


def test_predicting_the_previous_label_has_kappa_t_zero_but_a_high_kappa():
    # a sticky label stream: the no-change classifier is a strong baseline that kappa ignores
    rng = np.random.default_rng(0)
    y = np.repeat(rng.integers(0, 3, 50), rng.integers(5, 30, 50)).tolist()
    m = StreamMetrics("classification")
    m.update(y, [None, *y[:-1]])
    c = m.cumulative()
    assert c["kappa_t"] == pytest.approx(0.0, abs=1e-12)
    assert c["kappa"] > 0.8


def test_string_and_int_labels_score_alike():
    rng = np.random.default_rng(1)
    y, p = rng.integers(0, 4, 300), rng.integers(0, 4, 300)
    ints = _feed(StreamMetrics("classification", window=50, every=40), y.tolist(), p.tolist(), [64])
    names = _feed(StreamMetrics("classification", window=50, every=40),
                  [f"c{v}" for v in y], [f"c{v}" for v in p], [64])
    arrays = _feed(StreamMetrics("classification", window=50, every=40), y, p, [64])  # numpy input
    for other in (names, arrays):
        assert other.cumulative() == ints.cumulative()
        assert other.windowed() == ints.windowed()
        assert other.history() == ints.history()


def test_none_prediction_is_a_wrong_classification():
    m = StreamMetrics("classification")
    m.update([1, 1, 2, 2], [None, None, 2, 2])
    c = m.cumulative()
    assert c["n"] == 4 and c["accuracy"] == 0.5
    # class 1 is never predicted: F1 0; class 2: precision 1, recall 1
    assert c["macro_f1"] == pytest.approx(0.5)


def test_classification_window_holds_the_last_rows_and_their_previous_labels():
    m = StreamMetrics("classification", window=3)
    m.update([0, 1, 1], [0, 1, 0])
    m.update([1, 0], [1, 0])
    w = m.windowed()
    # window: truth 1 1 0, predictions 0 1 0; the no-change classifier is right at the first
    # two (the first's previous label, outside the window, is 1) and as good as the model
    assert w["n"] == 3 and w["accuracy"] == pytest.approx(2 / 3)
    assert w["kappa_t"] == pytest.approx(0.0, abs=1e-12)
    assert w["macro_f1"] == pytest.approx((2 * 1 / (1 + 2) + 2 * 1 / (2 + 1)) / 2)
    assert m.cumulative()["n"] == 5 and m.cumulative()["accuracy"] == pytest.approx(4 / 5)


def test_kappa_undefined_when_the_baseline_is_never_wrong():
    m = StreamMetrics("classification", window=3)
    m.update(["a"] * 5, ["a"] * 5)
    c = m.cumulative()
    assert c["accuracy"] == 1.0 and c["macro_f1"] == 1.0
    assert math.isnan(c["kappa"])
    # the no-change classifier missed the stream's first row only: the model beat it there
    assert c["kappa_t"] == pytest.approx(1.0)
    # in the window it never misses: kappa_t is undefined too
    assert math.isnan(m.windowed()["kappa_t"])


# -- regression -------------------------------------------------------------------------------


def test_regression_hand_computed_with_a_skipped_row():
    m = StreamMetrics("regression")
    m.update([[1, 10], [2, 20], [3, 30], [4, 40]], [None, [1, 10], [2, 20], [5, 40]])
    c = m.cumulative()
    assert set(c) == REGRESSION_KEYS
    assert c["n"] == 3  # the row without a prediction is not scored
    assert c["mae_per_target"] == pytest.approx([1.0, 20 / 3])
    assert c["rmse_per_target"] == pytest.approx([1.0, math.sqrt(200 / 3)])
    assert c["mae"] == pytest.approx((1 + 20 / 3) / 2)
    assert c["rmse"] == pytest.approx((1 + math.sqrt(200 / 3)) / 2)
    # the running mean learned the skipped row's label: it predicts 1|10, 1.5|15, 2|20
    assert c["rmae_per_target"] == pytest.approx([3 / 4.5, 20 / 45])
    assert c["amrae"] == pytest.approx((3 / 4.5 + 20 / 45) / 2)


def test_single_target_as_scalars_or_one_element_lists():
    y, p = [1.0, 3.0, 2.0, 6.0], [0.0, 2.0, 2.0, 3.0]
    scalars, lists = StreamMetrics("regression"), StreamMetrics("regression", n_targets=1)
    scalars.update(y, p)
    lists.update([[v] for v in y], [[v] for v in p])
    c = scalars.cumulative()
    assert c == lists.cumulative()
    assert c["mae"] == pytest.approx(5 / 4)
    assert c["rmse"] == pytest.approx(math.sqrt(11 / 4))
    # the running mean predicts 0, 1, 2, 2: errors 1 2 0 4
    assert c["amrae"] == pytest.approx(5 / 7)


def test_regression_window():
    m = StreamMetrics("regression", window=2)
    m.update([0.0, 0.0, 0.0], [5.0, 1.0, None])
    m.update([0.0], [3.0])
    w = m.windowed()
    assert w["n"] == 1 and w["mae"] == 3.0  # the window's other row had no prediction
    m.update([0.0], [1.0])
    assert m.windowed()["n"] == 2 and m.windowed()["mae"] == 2.0
    assert m.cumulative()["n"] == 4 and m.cumulative()["mae"] == pytest.approx(10 / 4)


def test_regression_rejects_rows_of_another_width():
    m = StreamMetrics("regression", n_targets=2)
    with pytest.raises(ValueError, match="targets"):
        m.update([[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]])
    m = StreamMetrics("regression")
    m.update([[1.0, 2.0]], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="targets"):
        m.update([[1.0]], [[1.0]])


# -- both -------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_results_do_not_depend_on_how_rows_are_chunked(task):
    rng = np.random.default_rng(7)
    n = 2_345
    if task == "classification":
        y = rng.choice(["a", "b", "c"], n).tolist()
        p = [None if i < 20 else str(v) for i, v in enumerate(rng.choice(["a", "b", "c", "d"], n))]
    else:
        y = rng.normal(size=(n, 3)).tolist()
        p = [None if i % 97 == 0 else row for i, row in enumerate((rng.normal(size=(n, 3))).tolist())]
    positions = np.cumsum(rng.integers(1, 4, n)).tolist()
    whole = _feed(StreamMetrics(task, window=300, every=200), y, p, [n], positions)
    for sizes in ([1], [7, 1, 500], [299, 301]):
        chunked = _feed(StreamMetrics(task, window=300, every=200), y, p, sizes, positions)
        assert _same(chunked.cumulative(), whole.cumulative()), sizes
        assert _same(chunked.windowed(), whole.windowed()), sizes
        assert _same(chunked.history(), whole.history()), sizes
    assert len(whole.history()) == n // 200


def test_history_every_so_many_labelled_rows_at_their_stream_positions():
    m = StreamMetrics("classification", window=100, every=250)
    y = [i % 3 for i in range(1000)]
    positions = [2 * i + 1 for i in range(1000)]  # every other stream row was unlabelled
    _feed(m, y, y, [300], positions)
    h = m.history()
    assert [e["n"] for e in h] == [250, 500, 750, 1000]
    assert [e["position"] for e in h] == [499, 999, 1499, 1999]  # of the 250th, 500th ... row
    assert all(e["window_n"] == 100 and e["accuracy"] == 1.0 for e in h)
    assert set(h[0]) == {"position", "n", "window_n"} | CLASS_KEYS - {"n"}


def test_history_positions_default_to_the_labelled_row_count():
    m = StreamMetrics("regression", window=10, every=4)
    m.update([1.0] * 6, [1.5] * 6)
    m.update([1.0] * 6, [0.0] * 6)
    h = m.history()
    assert [(e["position"], e["n"], e["window_n"]) for e in h] == [(3, 4, 4), (7, 8, 8), (11, 12, 10)]
    assert [e["mae"] for e in h] == pytest.approx([0.5, 0.5 * 6 / 8 + 1 * 2 / 8, 0.5 * 4 / 10 + 6 / 10])


@pytest.mark.parametrize("task, keys", [("classification", CLASS_KEYS), ("regression", REGRESSION_KEYS)])
def test_no_rows_yet_gives_nan_metrics(task, keys):
    m = StreamMetrics(task, n_targets=2 if task == "regression" else None)
    m.update([], [])
    for result in (m.cumulative(), m.windowed()):
        assert set(result) == keys and result["n"] == 0
        assert math.isnan(result["mae" if task == "regression" else "accuracy"])
    assert m.history() == []


def test_invalid_input_is_refused():
    with pytest.raises(ValueError, match="task"):
        StreamMetrics("ranking")
    with pytest.raises(ValueError, match="positive"):
        StreamMetrics("classification", window=0)
    m = StreamMetrics("classification")
    with pytest.raises(ValueError, match="2 labels but 1 predictions"):
        m.update([1, 2], [1])
    with pytest.raises(ValueError, match="unlabelled"):
        m.update([1, None], [1, 1])
    r = StreamMetrics("regression")
    with pytest.raises(ValueError, match="unlabelled"):
        r.update([1.0, None], [1.0, 1.0])


def test_spearman_matches_scipy_with_ties():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(5)
    for _ in range(20):
        a = rng.integers(0, 6, 30).astype(float)  # many ties
        b = a + rng.normal(0, 2, 30)
        assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)
    assert spearman([3, 1, 2], [30, 10, 20]) == 1.0
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert math.isnan(spearman([1], [2]))
    with pytest.raises(ValueError):
        spearman([1, 2], [1, 2, 3])


def test_docstring_examples():
    # worker/tools/evaluate is outside pytest's doctest paths: run them here
    result = doctest.testmod(scores, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
