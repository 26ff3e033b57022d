"""Class labels to indices: the lookup of known plain labels gives what the row-by-row
rules give, for any mix of labels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.core.base import ClassIndex, _plain_label

LABELS = st.one_of(st.integers(-3, 3), st.sampled_from(["UP", "DOWN", "1", ""]), st.none(),
                   st.booleans(), st.sampled_from([1.0, 2.5, float("nan")]),
                   st.integers(-3, 3).map(np.int64), st.sampled_from([np.str_("UP")]),
                   st.lists(st.integers(0, 1), max_size=2))


def _by_row(classes: list, y: list, grow: bool, missing: bool):
    """The indices and classes the rules give label by label, or the error's type."""
    classes = list(classes)
    out = []
    for raw in y:
        if raw is None and missing:
            out.append(-1)
            continue
        try:
            label = _plain_label(raw)
        except ValueError:
            return ValueError
        if label not in classes:
            if not grow:
                return ValueError
            classes.append(label)
        out.append(classes.index(label))
    return out, classes


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([0, 1, "UP", "DOWN", 3]), unique=True, max_size=4),
       st.lists(LABELS, max_size=12), st.booleans(), st.booleans())
def test_encoding_equals_the_row_by_row_rules(known, y, grow, missing):
    idx = ClassIndex(known)
    want = _by_row(idx.classes, y, grow, missing)
    if want is ValueError:
        with pytest.raises(ValueError):
            idx.encode(y, grow=grow, missing=missing)
        return
    got = idx.encode(y, grow=grow, missing=missing)
    assert got.dtype == np.int64 and got.tolist() == want[0]
    assert idx.classes == want[1] and [type(c) for c in idx.classes] == [type(c) for c in
                                                                          want[1]]


def test_known_plain_labels_are_looked_up_and_an_unseen_one_is_appended():
    idx = ClassIndex(["UP", 1])
    assert idx.encode(["UP", 1, None, "UP"], missing=True).tolist() == [0, 1, -1, 0]
    assert idx.encode([1, "DOWN"]).tolist() == [1, 2] and idx.classes == ["UP", 1, "DOWN"]
    assert idx.encode([True, 1.0]).tolist() == [1, 1]  # not plain: the rules map them to 1
