"""Slow, plain-Python twin of the forgetful decision tree, written for the tests.

It follows the structure of the authors' reference code (Yuan, Sun & Shasha 2023) rather than
our flat-array kernels: every node keeps, per candidate feature, its rows sorted by value
(``sparse``) or a value -> class-count table (``dense``); a batch forgets old rows at the root,
then each node merges its new rows, deletes its forgotten ones, recomputes its best split, and
either routes only the new and forgotten rows to its children (same split) or rebuilds them
(new split). Leaves and nodes at the maximum height are rebuilt. The adaptation rule of the
retain size is written out again here from the paper's Appendix B as encoded by that code.

Conventions shared with :mod:`models.forgetful._forgetful_kernels` (they define identical results):
candidate thresholds are the distinct values of the node except the largest, ``x <= c`` goes
left, the score is ``nl ln nl + nr ln nr - sum_k (l_k ln l_k + r_k ln r_k)``, the first feature
of the subset and then the lowest threshold win exact ties, and a pure node is a leaf.
"""

from __future__ import annotations

import bisect
import math


def xlogx(c: int) -> float:
    return c * math.log(c) if c > 1 else 0.0


def split_score(nl: int, nr: int, left: list[int], total: list[int]) -> float:
    acc = 0.0
    for k in range(len(total)):
        acc += xlogx(left[k]) + xlogx(total[k] - left[k])
    return (xlogx(nl) + xlogx(nr)) - acc


def best_of_groups(groups, total: list[int]):
    """Best ``(score, threshold)`` over ascending ``(value, class_counts)`` groups, or None."""
    n = sum(total)
    left = [0] * len(total)
    nl = 0
    best = None
    for value, counts in groups:
        for k, c in enumerate(counts):
            left[k] += c
        nl += sum(counts)
        if nl >= n:
            break
        score = split_score(nl, n - nl, left, total)
        if best is None or score < best[0]:
            best = (score, value)
    return best


def groups_of_rows(rows, feature: int, n_classes: int):
    """Distinct values of ``feature`` among ``rows`` with their class counts, ascending."""
    table: dict[float, list[int]] = {}
    for x, y in rows:
        table.setdefault(x[feature], [0] * n_classes)[y] += 1
    return [(v, table[v]) for v in sorted(table)]


def best_split(rows, features, n_classes: int):
    """Exhaustive best ``(feature, threshold)`` of a node's ``(x, y)`` rows, None if none."""
    total = [0] * n_classes
    for _, y in rows:
        total[y] += 1
    best = None
    for f in features:
        cand = best_of_groups(groups_of_rows(rows, f, n_classes), total)
        if cand is not None and (best is None or cand[0] < best[0]):
            best = (cand[0], f, cand[1])
    return None if best is None else (best[1], best[2])


def class_counts(rows, n_classes: int) -> list[int]:
    total = [0] * n_classes
    for _, y in rows:
        total[y] += 1
    return total


def build(rows, depth: int, max_height: int, features, n_classes: int):
    """From-scratch tree as nested tuples: ``(f, c, left, right)`` or a leaf's count tuple."""
    counts = class_counts(rows, n_classes)
    if depth >= max_height or max(counts) == len(rows):
        return tuple(counts)
    split = best_split(rows, features, n_classes)
    if split is None:
        return tuple(counts)
    f, c = split
    left = [r for r in rows if r[0][f] <= c]
    right = [r for r in rows if r[0][f] > c]
    return (f, c, build(left, depth + 1, max_height, features, n_classes),
            build(right, depth + 1, max_height, features, n_classes))


def predict(tree, x):
    """Majority class (lowest index on ties) of ``x``'s leaf."""
    while len(tree) == 4 and isinstance(tree[2], tuple):
        tree = tree[2] if x[tree[0]] <= tree[1] else tree[3]
    return max(range(len(tree)), key=lambda k: (tree[k], -k))


def pad(tree, n_classes: int):
    """The same tree with every leaf's counts padded with zeros to ``n_classes``."""
    if len(tree) == 4 and isinstance(tree[2], tuple):
        return (tree[0], tree[1], pad(tree[2], n_classes), pad(tree[3], n_classes))
    return tuple(tree) + (0,) * (n_classes - len(tree))


# ---------------------------------------------------------------------------- adaptation


def round_half_away(x: float) -> int:
    r = math.floor(x)
    return int(r + 1) if x - r >= 0.5 else int(r)


class RetainState:
    """Adaptive retain size, iRate and maximum height (paper Appendix B, reference encoding)."""

    def __init__(self, irate=0.3, irate_min=1e-3, irate_max=1e3):
        self.retain = 0
        self.irate = irate
        self.irate_min, self.irate_max = irate_min, irate_max
        self.max_height = 1
        self.last_t, self.last_all = 1, 2
        self.forget_rate = -10
        self.round_no = 64
        self.collapsed = False

    def step(self, n_rows: int, b: int, correct: int, n_classes: int) -> None:
        self.collapsed = False
        if n_rows == 0:
            self.retain = b
        else:
            g = 1.0 / max(n_classes, 2)
            a_new = correct / b
            if self.forget_rate == 0:
                a_old = self.last_t / self.last_all
                if a_new <= g:
                    self.last_t, self.last_all, self.retain = correct, b, b
                    self.collapsed = True
                elif a_old <= g:
                    self.last_t, self.last_all = correct, b
                    self.retain += b
                elif a_old == a_new:
                    self.last_t += correct
                    self.last_all += b
                    self.retain += round_half_away(self.irate * b)
                else:
                    q = (a_new - g) / (a_old - g)
                    self.irate = min(max(self.irate / q, self.irate_min), self.irate_max)
                    qq = q * q if q >= 1.0 else q ** (3.0 - q)
                    self.retain = min(round_half_away(self.retain * qq + self.irate * b),
                                      self.retain + b)
                    self.last_t, self.last_all = correct, b
            else:
                self.retain = n_rows + b
                while self.retain >= self.round_no:
                    if a_new > g:
                        self.forget_rate += 5
                    self.round_no *= 2
                if a_new <= g:
                    self.forget_rate = -10
                if self.forget_rate >= 0:
                    self.forget_rate = 0
                self.last_t, self.last_all = correct, b
        self.retain = max(self.retain, b)
        self.max_height = max(1, int(self.retain).bit_length() - 1)


# ---------------------------------------------------------------------------- incremental twin


class _Node:
    __slots__ = ("ids", "sorted", "tables", "feature", "threshold", "left", "right")

    def __init__(self):
        self.ids: set[int] = set()
        self.sorted: dict[int, list[tuple[float, int]]] = {}   # sparse: (value, row id)
        self.tables: dict[int, dict[float, list[int]]] = {}    # dense: value -> class counts
        self.feature = -1
        self.threshold = 0.0
        self.left = None
        self.right = None


class ForgetfulTreeReference:
    """The forgetful tree, node by node, as in the reference code (see module docstring).

    ``dense`` lists the features kept as value x class count tables; the others keep sorted
    (value, row) lists. ``features`` is the scan order (all features by default).
    """

    def __init__(self, n_features: int, dense=(), features=None, irate=0.3):
        self.n_features = n_features
        self.dense = set(dense)
        self.features = list(range(n_features)) if features is None else list(features)
        self.state = RetainState(irate)
        self.rows: dict[int, tuple[tuple[float, ...], int]] = {}  # id -> (x, y), arrival order
        self.next_id = 0
        self.n_classes = 0
        self.root = None
        self.rows_gone: dict[int, tuple[tuple[float, ...], int]] = {}  # forgotten this batch

    # -- helpers
    def _row_list(self, ids):
        return [self.rows[i] for i in sorted(ids)]

    def _counts(self, ids):
        total = [0] * self.n_classes
        for i in ids:
            total[self.rows[i][1]] += 1
        return total

    def _fill_node(self, node: _Node, ids):
        node.ids = set(ids)
        node.sorted, node.tables = {}, {}
        for f in self.features:
            if f in self.dense:
                table: dict[float, list[int]] = {}
                for i in ids:
                    x, y = self.rows[i]
                    table.setdefault(x[f], [0] * self.n_classes)[y] += 1
                node.tables[f] = table
            else:
                node.sorted[f] = sorted((self.rows[i][0][f], i) for i in ids)

    def _node_best(self, node: _Node):
        total = self._counts(node.ids)
        best = None
        for f in self.features:
            if f in self.dense:
                table = node.tables[f]
                groups = []
                for v in sorted(table):
                    counts = table[v] + [0] * (self.n_classes - len(table[v]))
                    if sum(counts) > 0:
                        groups.append((v, counts))
            else:
                groups = []
                for v, i in node.sorted[f]:
                    y = self.rows[i][1]
                    if groups and groups[-1][0] == v:
                        groups[-1][1][y] += 1
                    else:
                        counts = [0] * self.n_classes
                        counts[y] += 1
                        groups.append((v, counts))
            cand = best_of_groups(groups, total)
            if cand is not None and (best is None or cand[0] < best[0]):
                best = (cand[0], f, cand[1])
        return None if best is None else (best[1], best[2])

    def _rebuild(self, node: _Node, ids, depth: int):
        """From scratch on ``ids`` (node lists rebuilt, children grown recursively)."""
        self._fill_node(node, ids)
        counts = self._counts(ids)
        node.left = node.right = None
        node.feature = -1
        if depth >= self.state.max_height or max(counts) == len(ids):
            return
        split = self._node_best(node)
        if split is None:
            return
        node.feature, node.threshold = split
        self._grow_children(node, depth)

    def _grow_children(self, node: _Node, depth: int):
        f, c = node.feature, node.threshold
        node.left, node.right = _Node(), _Node()
        self._rebuild(node.left, [i for i in node.ids if self.rows[i][0][f] <= c], depth + 1)
        self._rebuild(node.right, [i for i in node.ids if self.rows[i][0][f] > c], depth + 1)

    def _update(self, node: _Node, new_ids, gone_ids, depth: int):
        ids = (node.ids - set(gone_ids)) | set(new_ids)
        if node.feature < 0 or depth >= self.state.max_height or len(ids) <= 1:
            self._rebuild(node, ids, depth)
            return
        # merge new rows into the sorted lists / tables, delete the forgotten ones
        gone = [i for i in gone_ids if i in node.ids]
        for f in self.features:
            if f in self.dense:
                table = node.tables[f]
                for i in gone:
                    x, y = self.rows_gone.get(i) or self.rows[i]
                    table[x[f]][y] -= 1
                for i in new_ids:
                    x, y = self.rows[i]
                    counts = table.setdefault(x[f], [0] * self.n_classes)
                    counts.extend([0] * (self.n_classes - len(counts)))
                    counts[y] += 1
            else:
                lst = node.sorted[f]
                for i in gone:
                    x = (self.rows_gone.get(i) or self.rows[i])[0]
                    del lst[bisect.bisect_left(lst, (x[f], i))]
                for i in new_ids:
                    bisect.insort(lst, (self.rows[i][0][f], i))
        node.ids = ids
        counts = self._counts(ids)
        if max(counts) == len(ids):
            node.feature, node.left, node.right = -1, None, None
            return
        split = self._node_best(node)
        if split is None:
            node.feature, node.left, node.right = -1, None, None
            return
        if split == (node.feature, node.threshold):
            f, c = split

            def side(i, left):
                x = (self.rows_gone.get(i) or self.rows[i])[0]
                return (x[f] <= c) == left

            self._update(node.left, [i for i in new_ids if side(i, True)],
                         [i for i in gone if side(i, True)], depth + 1)
            self._update(node.right, [i for i in new_ids if side(i, False)],
                         [i for i in gone if side(i, False)], depth + 1)
        else:
            node.feature, node.threshold = split
            self._grow_children(node, depth)

    # -- public surface
    def learn(self, X, y):
        """One batch: test, adapt, forget the oldest rows, update incrementally."""
        b = len(y)
        self.n_classes = max(self.n_classes, max(y) + 1)
        correct = 0
        if self.rows:
            correct = sum(self.predict_one(x) == t for x, t in zip(X, y))
        n_old = len(self.rows)
        self.state.step(n_old, b, correct, self.n_classes)
        forget = min(n_old + b - self.state.retain, n_old) if n_old + b > self.state.retain else 0
        old_ids = sorted(self.rows)
        gone = old_ids[:forget]
        self.rows_gone = {i: self.rows.pop(i) for i in gone}
        new_ids = []
        for x, t in zip(X, y):
            self.rows[self.next_id] = (tuple(float(v) for v in x), int(t))
            new_ids.append(self.next_id)
            self.next_id += 1
        if self.root is None or forget == n_old:
            self.root = _Node()
            self._rebuild(self.root, list(self.rows), 0)
        else:
            self._update(self.root, new_ids, gone, 0)
        self.rows_gone = {}

    def predict_one(self, x):
        node = self.root
        while node.feature >= 0:
            node = node.left if x[node.feature] <= node.threshold else node.right
        counts = self._counts(node.ids)
        return max(range(len(counts)), key=lambda k: (counts[k], -k))

    def nested(self):
        """The tree in the format of ``ForgetfulLearner._nested``."""

        def walk(node):
            if node.feature < 0:
                return tuple(self._counts(node.ids))
            return (node.feature, node.threshold, walk(node.left), walk(node.right))

        return walk(self.root)

    def retained(self):
        """Retained ``(x, y)`` rows in arrival order."""
        return [self.rows[i] for i in sorted(self.rows)]

    def rebuilt(self):
        """A from-scratch build on the retained rows (what the incremental tree must equal)."""
        return build(self.retained(), 0, self.state.max_height, self.features, self.n_classes)
