"""Unlabelled instances waiting for their labels: a stream's bounded store of served rows.

An instance that comes without a label is predicted at once; the pipeline then holds its row,
the prediction it served and its event time under its id until a :class:`LabelEvent`
(:mod:`schemas.messages`) names it. The label joins the held row: the predictor learns it and
the detectors see the loss of the prediction that was served, as river's
``progressive_val_score(delay=...)`` and MOA's ``EvaluatePrequentialDelayed`` score a delayed
label.

Bounds, per stream: ``max_rows`` held rows (the oldest falls out first) and ``max_age_ms``
(a row older than that, in event time, falls out when a later instance or label arrives;
0: no age bound). What falls out is counted; its id is remembered for a while (as many ids as
rows are held) so that its label is refused as *expired* rather than *unknown*. The ids
labelled so far are remembered alike, so that a second label is refused as a *duplicate*.
Everything here is part of the stream's checkpointed state.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from schemas.values import MAX_MAGNITUDE

from .errors import PipelineError

#: dead-letter codes of a label event the store refuses
UNKNOWN_ID, EXPIRED_ID, DUPLICATE_LABEL = "label_unknown_id", "label_expired", "label_duplicate"
#: all of them (a label event refused with another code joined its instance)
REFUSALS = frozenset((UNKNOWN_ID, EXPIRED_ID, DUPLICATE_LABEL))

#: the largest bound a checkpoint may name (a setting above it is refused at start)
MAX_HELD_ROWS = 10_000_000
#: rough bytes of one held entry beside its row (the id, the served prediction, the dicts)
ENTRY_BYTES = 200


class HeldInstances:
    """Rows served without a label, by id, in arrival order (see the module doc).

    The rows live in one matrix, a slot per held instance (slots are reused as instances
    leave), their served predictions and times beside it: a poll's holds and takes then copy
    its rows in one array operation each, not a row at a time.

    Parameters
    ----------
    n_features : int
        Width of the rows.
    max_rows : int
        Rows held at most (0: none is held; every label event is then unknown).
    max_age_ms : int
        Event-time age after which a held row falls out (0: no age bound).

    Examples
    --------
    >>> import numpy as np
    >>> held = HeldInstances(2, max_rows=2, max_age_ms=0)
    >>> for i in range(3):
    ...     held.put(i, np.array([i, i], float), "UP", ts=i)
    >>> held.dropped, 0 in held
    (1, False)
    >>> held.take(2, ts=5)[1]
    'UP'
    >>> held.take(2, ts=6)
    Traceback (most recent call last):
    ...
    worker.pipeline.errors.PipelineError: label_duplicate: instance 2 was labelled already
    """

    def __init__(self, n_features: int, max_rows: int, max_age_ms: int):
        self.n_features = int(n_features)
        self.max_rows = int(max_rows)
        self.max_age_ms = int(max_age_ms)
        # in insertion order: the oldest entry is the first. Ordered dicts, not dicts: they
        # drop their oldest entry in constant time, where a dict emptied from the front scans
        # the holes left there to find its first entry. Ids are integers or strings (the
        # contracts refuse anything else), so ``7`` and ``"7"`` are two keys
        self.rows: OrderedDict = OrderedDict()  # id -> its slot
        self.expired: OrderedDict = OrderedDict()  # ids that fell out, newest last
        self.labelled: OrderedDict = OrderedDict()  # ids labelled, newest last
        self.dropped = 0  # rows that fell out, ever
        # the slots: a held row, its served prediction and event time; grown on demand up to
        # one more than the bound (a put holds its row before the oldest falls out)
        self._X = np.zeros((0, self.n_features))
        self._served: list = []
        self._ts = np.zeros(0, dtype=np.int64)
        self._free: list[int] = []  # slots no row holds

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, ident) -> bool:
        return ident in self.rows

    @property
    def empty(self) -> bool:
        """Nothing held and nothing remembered: the state needs no entry for the store."""
        return not (self.rows or self.expired or self.labelled or self.dropped)

    @property
    def nbytes(self) -> int:
        """Bytes held: the slots (a row, a time and a prediction's reference each, whether a
        row holds them or not: the slots stay once grown) and a rough cost per entry and
        remembered id."""
        return self._X.shape[0] * (8 * self.n_features + 16) + len(self.rows) * ENTRY_BYTES \
            + ENTRY_BYTES // 4 * (len(self.expired) + len(self.labelled))

    def put(self, ident, row: np.ndarray, served, ts: int) -> None:
        """Hold the row of instance ``ident`` served ``served`` at event time ``ts``; a row
        already held under the same id is replaced (it counts as fallen out)."""
        if self.max_rows <= 0:
            return
        rows = self.rows
        slot = rows.pop(ident, None)
        if slot is not None:
            self._free.append(slot)
            self._fall_out(ident)
        self.labelled.pop(ident, None)  # a new instance under an id labelled before
        slot = self._slots(1)[0]
        self._X[slot] = row
        self._served[slot] = served
        self._ts[slot] = ts
        rows[ident] = slot
        if self.max_age_ms > 0:
            self._age_out(int(ts))
        if len(rows) > self.max_rows:
            self._drop_oldest()

    def settle(self, pending: list, predictions: list) -> None:
        """The predictions of rows held within the kernel call that predicts them, known after
        it: ``pending`` holds ``(id, placeholder row)`` pairs, ``predictions[row]`` the
        prediction of that call's row. A row no longer held, or held since under a new
        placeholder, keeps what it has."""
        rows, served = self.rows, self._served
        for ident, k in pending:
            slot = rows.get(ident)
            if slot is not None and getattr(served[slot], "row", None) == k:
                served[slot] = predictions[k]

    def take(self, ident, ts: int) -> tuple[np.ndarray, object]:
        """``(row, served prediction)`` of instance ``ident``, no longer held; a
        :class:`PipelineError` with :data:`UNKNOWN_ID`, :data:`EXPIRED_ID` or
        :data:`DUPLICATE_LABEL` when it is not held."""
        if self.max_age_ms > 0:
            self._age_out(int(ts))
        slot = self.rows.pop(ident, None)
        if slot is None:
            raise self._refusal(ident)
        _remember(self.labelled, ident, self.max_rows)
        self._free.append(slot)
        return self._X[slot].copy(), self._served[slot]

    def orderless(self, put_ids: list, put_at: list, take_ids: list, take_at: list) -> bool:
        """Whether a poll that holds ``put_ids`` and takes ``take_ids`` (at poll positions
        ``put_at`` and ``take_at``, each ascending) can be served by :meth:`take_many` and
        then :meth:`put_many` with the answers and the store of taking and holding row by
        row: no age bound, no id to hold that is held already, labelled before or listed
        twice, and no row falling out on the way."""
        if self.max_age_ms > 0:
            return False
        rows, labelled = self.rows, self.labelled
        # membership of the ids to hold only: the store may hold millions
        if put_ids and (len(set(put_ids)) != len(put_ids) or not rows.keys().isdisjoint(put_ids)
                        or not labelled.keys().isdisjoint(put_ids)):
            return False
        return len(rows) + len(put_ids) <= self.max_rows or self._fits(
            put_ids, put_at, take_ids, take_at)

    def _fits(self, put_ids: list, put_at: list, take_ids: list, take_at: list) -> bool:
        """Whether the store stays within ``max_rows`` row by row: a hold adds a row, the
        first take of an id held (before the poll or earlier in it) removes one. The size
        after the ``k``-th hold is the rows held before, ``k + 1`` holds, less the takes
        that removed a row before it."""
        rows, puts, gone = self.rows, dict(zip(put_ids, put_at)), set()
        removed = []  # positions of the takes that remove a row, ascending
        for ident, pos in zip(take_ids, take_at):
            if ident not in gone and (ident in rows or puts.get(ident, pos) < pos):
                gone.add(ident)
                removed.append(pos)
        sizes = len(rows) + np.arange(1, len(put_at) + 1) - np.searchsorted(removed, put_at)
        return bool(sizes.max(initial=0) <= self.max_rows)

    def take_many(self, ids: list, at: list, put_at: dict) -> tuple[Taken, list, list]:
        """:meth:`take` of each of ``ids`` (at poll positions ``at``, ascending) in order,
        in a poll :meth:`orderless` allowed, whose instances to hold are ``put_at`` (id ->
        position; held after the takes by :meth:`put_many`). Returns ``(taken, joined,
        refused)``: the ids held before the poll (:class:`Taken`: their positions, rows and
        served predictions); ``(position, position of its instance)`` of each held earlier
        in the same poll (it is then no longer to be held); ``(position, PipelineError)`` of
        each refused."""
        pop = self.rows.pop
        # an id named twice: its first take pops it, the second misses, as in order
        slots = [pop(ident, None) for ident in ids]
        joined, refused = [], []
        misses = [k for k, slot in enumerate(slots) if slot is None]
        accepted = None  # every id but the refused ones is labelled, in order
        for k in misses:
            ident, pos = ids[k], at[k]
            put = put_at.get(ident)
            if put is not None and put <= pos:  # its instance is held earlier in the poll
                del put_at[ident]
                joined.append((pos, put))
                continue
            if accepted is None:
                accepted, done = [True] * len(ids), 0
            # the reason as row by row: the ids labelled before this one are remembered first
            self._remember_many([ids[q] for q in range(done, k) if accepted[q]])
            accepted[k], done = False, k + 1
            refused.append((pos, self._refusal(ident)))
        if accepted is None:
            self._remember_many(ids)
        else:
            self._remember_many([ids[q] for q in range(done, len(ids)) if accepted[q]])
        if misses:
            held = [k for k, slot in enumerate(slots) if slot is not None]
            slots = [slots[k] for k in held]
            at = [at[k] for k in held]
        served = self._served
        taken = Taken(list(at), self._X[slots], [served[s] for s in slots])
        self._free.extend(slots)
        return taken, joined, refused

    def put_many(self, ids: list, X: np.ndarray, served: list, ts: list) -> None:
        """:meth:`put` of each of ``ids`` (rows of ``X``, predictions ``served``, integer
        times ``ts``) in order, once :meth:`take_many` served the poll: nothing falls out."""
        if not ids:
            return
        slots = self._slots(len(ids))
        self._X[slots] = X
        self._ts[slots] = ts
        mine = self._served
        for slot, pred in zip(slots, served):
            mine[slot] = pred
        self.rows.update(zip(ids, slots))

    def _slots(self, k: int) -> list[int]:
        """``k`` free slots, the store grown when fewer are free (up to the bound and one)."""
        free = self._free
        if len(free) < k:
            self._grow(len(self.rows) + k)
        taken = free[len(free) - k:]
        del free[len(free) - k:]
        return taken

    def _grow(self, need: int) -> None:
        """At least ``need`` slots (twice as many as before, up to the bound and one)."""
        have = self._X.shape[0]
        size = max(need, min(2 * have, self.max_rows + 1), 16)
        X = np.zeros((size, self.n_features))
        X[:have] = self._X
        ts = np.zeros(size, dtype=np.int64)
        ts[:have] = self._ts
        self._X, self._ts = X, ts
        self._served.extend([None] * (size - have))
        self._free.extend(range(size - 1, have - 1, -1))  # the lowest slots first

    def _remember_many(self, idents: list) -> None:
        """:func:`_remember` of each of ``idents`` in labelled, in order."""
        labelled = self.labelled
        if len(set(idents)) != len(idents) or not labelled.keys().isdisjoint(idents):
            for ident in idents:  # ids labelled before move to the end: one at a time
                _remember(labelled, ident, self.max_rows)
            return
        labelled.update(dict.fromkeys(idents))
        # as one at a time: each new id lets the oldest go when there are more than the bound
        for _ in range(min(len(idents), len(labelled) - self.max_rows)):
            labelled.popitem(last=False)

    def _refusal(self, ident) -> PipelineError:
        if ident in self.labelled:
            return PipelineError(DUPLICATE_LABEL, f"instance {ident!r} was labelled already")
        if ident in self.expired:
            return PipelineError(EXPIRED_ID, f"instance {ident!r} is no longer held: it fell "
                                 f"out of the {self.max_rows} rows held per stream"
                                 + (f" or passed their {self.max_age_ms} ms age bound"
                                    if self.max_age_ms else "")
                                 + " (STREAMFOREST_LEARNERS__HELD_ROWS, LEARNERS__HELD_AGE_MS)")
        return PipelineError(UNKNOWN_ID, f"no unlabelled instance {ident!r} of this stream is "
                             "held (an instance that carries its own label is not held)")

    def _age_out(self, now: int) -> None:
        """Drop the rows older than ``max_age_ms`` before event time ``now`` (in arrival
        order: event times that go back leave later rows to a later call)."""
        rows, ts = self.rows, self._ts
        while rows and now - int(ts[next(iter(rows.values()))]) > self.max_age_ms:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        ident, slot = self.rows.popitem(last=False)
        self._free.append(slot)
        self._fall_out(ident)

    def _fall_out(self, ident) -> None:
        self.dropped += 1
        _remember(self.expired, ident, self.max_rows)

    # -- state ---------------------------------------------------------------------------------

    def to_state(self) -> dict:
        """The store as plain values and one matrix (restores exactly)."""
        slots = list(self.rows.values())
        served = self._served
        return {"ids": list(self.rows), "X": self._X[slots],
                "served": [served[s] for s in slots], "ts": self._ts[slots],
                "expired": list(self.expired),
                "labelled": list(self.labelled), "dropped": self.dropped}

    @classmethod
    def from_state(cls, state: dict, n_features: int, max_rows: int, max_age_ms: int,
                   check_served=None) -> HeldInstances:
        """The store :meth:`to_state` wrote, under the bounds of now (a smaller bound drops
        the oldest rows at the next put). ``check_served`` (optional) raises ``ValueError``
        for a served prediction the stream's task does not serve (its label's join would
        fail)."""
        if not 0 <= max_rows <= MAX_HELD_ROWS or max_age_ms < 0:
            raise ValueError(f"held instances: bounds {max_rows} rows, {max_age_ms} ms are "
                             f"outside 0..{MAX_HELD_ROWS} rows and 0.. ms")
        held = cls(n_features, max_rows, max_age_ms)
        X = np.asarray(state["X"], dtype=np.float64).reshape(-1, held.n_features)
        ids, served, ts = state["ids"], state["served"], np.asarray(state["ts"], np.int64)
        if not len(ids) == X.shape[0] == len(served) == ts.shape[0]:
            raise ValueError("held instances: ids, rows, predictions and times differ in length")
        if len(ids) > max(max_rows, 0) or not np.all(np.abs(X) <= MAX_MAGNITUDE):
            raise ValueError("held instances: more rows than the bound, or a value that is not "
                             "finite within +-1e100")
        rows = OrderedDict((_checked_id(ident), k) for k, ident in enumerate(ids))
        if len(rows) != len(ids):
            raise ValueError("held instances: an id is held twice")
        for pred in map(_checked_served, served):
            if check_served is not None:
                check_served(pred)
        slots = held._slots(len(ids))
        held._X[slots], held._ts[slots] = X, ts
        for slot, pred in zip(slots, served):
            held._served[slot] = pred
        held.rows = OrderedDict(zip(rows, slots))
        for ident in state["expired"]:
            held.expired[_checked_id(ident)] = None
        for ident in state["labelled"]:
            held.labelled[_checked_id(ident)] = None
        held.dropped = int(state["dropped"])
        return held


def _checked_id(ident):
    if type(ident) not in (int, str):
        raise ValueError(f"held instances: an id must be an integer or a string, not {ident!r}")
    return ident


def _checked_served(pred):
    """A served prediction as the pipeline serves them: nothing yet, a class label, or a
    list of finite regression targets (a checkpoint is untrusted input)."""
    if pred is None or type(pred) in (int, str):
        return pred
    if type(pred) is list and all(type(v) is float and math.isfinite(v) for v in pred):
        return pred
    raise ValueError(f"held instances: {pred!r} is not a prediction the pipeline serves")


def _remember(ids: OrderedDict, ident, limit: int) -> None:
    """``ident`` as the newest of ``ids``, which keep the newest ``limit``."""
    ids.pop(ident, None)
    ids[ident] = None
    if len(ids) > limit:
        ids.popitem(last=False)


class Taken(NamedTuple):
    """The label events of a poll whose instances were held before it
    (:meth:`HeldInstances.take_many`): their poll positions, their instances' rows (a
    matrix) and the predictions served for them."""

    at: list
    X: np.ndarray
    served: list
