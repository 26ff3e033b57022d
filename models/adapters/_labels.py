"""Class labels of any hashable type and the labels a learner holds for them.

The learners take ints and strings as labels (msgpack-friendly states); river's streams label
with bools, and scikit-learn's with whatever numpy array ``y`` holds. An adapter hands its
learner an int code per label, given in order of first appearance, and maps the learner's
answers back: the learner then orders its classes as it would for the labels themselves, so
its answers are the same bits.
"""

from __future__ import annotations


class LabelCodes:
    """A two-way map between class labels and the labels their learner holds.

    Parameters
    ----------
    known : sequence, optional
        Labels the learner holds already (a learner that learned before it was wrapped):
        each stands for itself. A new label gets the number of labels so far as its int
        code, or the next int above it that no label holds.

    Examples
    --------
    >>> codes = LabelCodes()
    >>> codes.encode([True, False, True])
    [0, 1, 0]
    >>> codes.decode([1, 0])
    [False, True]
    >>> LabelCodes(["UP", 0]).encode(["UP", ("a", 1)])
    ['UP', 2]
    """

    def __init__(self, known=()):
        self.to_learner: dict = {}
        self.from_learner: dict = {}
        for label in known:
            self._add(label, label)

    def __len__(self) -> int:
        return len(self.to_learner)

    @property
    def labels(self) -> list:
        """The labels in the order they were first given."""
        return list(self.to_learner)

    def encode_one(self, label):
        """The learner's label for ``label`` (a new label gets a code)."""
        code = self.to_learner.get(label)
        if code is None:
            if label is None:
                raise ValueError("a label is needed: y must not be None")
            code = len(self.from_learner)
            while code in self.from_learner:  # a wrapped learner's own int label
                code += 1
            self._add(label, code)
        return code

    def encode(self, labels) -> list:
        """The learner's labels for ``labels``."""
        get = self.to_learner.get
        out = [get(label) for label in labels]
        if None in out:  # new labels: coded one by one, in order of appearance
            out = [self.encode_one(label) for label in labels]
        return out

    def decode(self, learner_labels) -> list:
        """The labels of the learner's labels (``None``, no prediction, stays ``None``)."""
        get = self.from_learner.get
        return [get(c) for c in learner_labels]

    def items(self) -> list:
        """``[[label, learner label], ...]`` in order of first appearance (for a state)."""
        return [[label, code] for label, code in self.to_learner.items()]

    @classmethod
    def from_items(cls, items) -> LabelCodes:
        """The map :meth:`items` listed."""
        out = cls()
        for label, code in items:
            out._add(_hashable(label), code)
        return out

    def _add(self, label, code) -> None:
        self.to_learner[label] = code
        self.from_learner[code] = label


def _hashable(label):
    """A label read back from a state: lists (tuples after msgpack or JSON) become tuples."""
    return tuple(_hashable(v) for v in label) if isinstance(label, list) else label
