"""The merge of instances and features (worker/merge.py): a replay from any checkpoint, with
the cuts committed since, repeats the live run's order exactly, however the records were
fetched and whenever the idle bound forced a release."""


import numpy as np
import pytest

from worker.merge import A, B, CoMerge, decode_cuts, encode_cuts


def _records(rng, n, t_max):
    return [(f"{i}", int(t), i) for i, t in enumerate(sorted(rng.integers(0, t_max, n)))]


def _live(rng, recs, max_idle):
    """Fetch in random chunks, release at random times; returns the merged order and, at
    random commit points, (positions, cuts, checkpoint) snapshots."""
    m = CoMerge(0, 0, max_idle_s=max_idle)
    fetched = [0, 0]
    order, commits = [], []
    checkpoint = (0, 0)
    now = 0.0
    while fetched[A] < len(recs[A]) or fetched[B] < len(recs[B]) or m.queued(A) or m.queued(B):
        side = int(rng.integers(0, 2))
        k = int(rng.integers(0, 6))
        m.push(side, recs[side][fetched[side]:fetched[side] + k])
        fetched[side] = min(len(recs[side]), fetched[side] + k)
        now += float(rng.random())
        done = fetched[A] == len(recs[A]), fetched[B] == len(recs[B])
        limit = int(rng.integers(1, 8)) if rng.random() < 0.5 else None
        r = m.release(now, lambda s, done=done: done[s] or rng.random() < 0.3, limit)
        i = 0
        for msg, before in r.b:
            order += [(A, int(x)) for x in r.a[i:before]] + [(B, int(msg))]
            i = before
        order += [(A, int(x)) for x in r.a[i:]]
        if rng.random() < 0.15:
            m.checkpointed()
            checkpoint = m.position
        if rng.random() < 0.4:
            commits.append((m.position, list(m.cuts), checkpoint, len(order)))
    commits.append((m.position, list(m.cuts), checkpoint, len(order)))
    return order, commits


def _replay(rng, recs, start, end, cuts):
    m = CoMerge(start[A], start[B], end[A], end[B], cuts)
    fetched = list(start)
    order = []
    for _ in range(10_000):
        if m.position[A] >= end[A] and m.position[B] >= end[B]:
            break
        side = int(rng.integers(0, 2))
        k = int(rng.integers(0, 6))
        m.push(side, recs[side][fetched[side]:fetched[side] + k])
        fetched[side] = min(len(recs[side]), fetched[side] + k)
        limit = int(rng.integers(1, 8)) if rng.random() < 0.5 else None
        r = m.release(0.0, lambda s: False, limit)  # replay never waits on time
        i = 0
        for msg, before in r.b:
            order += [(A, int(x)) for x in r.a[i:before]] + [(B, int(msg))]
            i = before
        order += [(A, int(x)) for x in r.a[i:]]
    return [(s, o) for s, o in order if o < end[s]]


@pytest.mark.parametrize("seed", range(150))
def test_replay_from_any_checkpoint_repeats_the_live_order(seed):
    rng = np.random.default_rng(seed)
    recs = (_records(rng, int(rng.integers(5, 60)), 100),
            _records(rng, int(rng.integers(0, 12)), 100))
    order, commits = _live(rng, recs, max_idle=float(rng.choice([0.0, 1.5])))
    assert sorted(order) == sorted([(A, i) for i in range(len(recs[A]))]
                                   + [(B, i) for i in range(len(recs[B]))])
    for end, cuts, ck, n in commits:
        k = next(j for j in range(len(order) + 1)
                 if sum(1 for s, _ in order[:j] if s == A) == ck[A]
                 and sum(1 for s, _ in order[:j] if s == B) == ck[B])
        # the metadata round trip is part of the path a restore takes
        ck2, cuts2 = decode_cuts(encode_cuts(ck, cuts))
        assert ck2 == ck and cuts2 == [tuple(c) for c in cuts]
        assert _replay(rng, recs, ck, end, cuts2) == order[k:n]


def test_without_cuts_a_forced_release_would_replay_differently():
    """The reason cuts exist: an instance forced out before a late, earlier feature."""
    recs = ([("a0", 50, 0)], [("b0", 10, 0)])
    live = CoMerge(0, 0)
    live.push(A, recs[A])
    r1 = live.release(0.0, lambda s: True)  # features idle: a0 is forced out
    live.push(B, recs[B])
    r2 = live.release(0.0, lambda s: True)
    assert r1.a == ["a0"] and r2.b == [("b0", 0)]
    assert live.cuts == [(1, 0, "a"), (1, 1, "b")]
    plain = CoMerge(0, 0, 1, 1)  # replay without the cut: the feature would come first
    plain.push(A, recs[A])
    plain.push(B, recs[B])
    assert plain.release(0.0, lambda s: False).b == [("b0", 0)]
    cut = CoMerge(0, 0, 1, 1, live.cuts)
    cut.push(A, recs[A])
    cut.push(B, recs[B])
    r = cut.release(0.0, lambda s: False)
    assert r.a == ["a0"] and r.b == [("b0", 1)]


def test_an_idle_topic_holds_the_other_back_for_the_bound_only():
    m = CoMerge(0, 0, max_idle_s=2.0)
    m.push(A, [("a0", 5, 0)])
    assert not m.release(0.0, lambda s: True)  # caught up but within max_task_idle_ms
    assert m.release(2.0, lambda s: True).a == ["a0"]
    m.push(A, [("a1", 6, 1)])
    assert not m.release(3.0, lambda s: False)  # lagging: waits max_idle + grace
    assert m.release(2.0 + 2.0 + 5.0, lambda s: False).a == ["a1"]


def test_an_idle_features_topic_adds_one_cut_until_a_feature_arrives():
    m = CoMerge(0, 0)
    for i in range(5):
        m.push(A, [(f"a{i}", i, i)])
        m.release(float(i), lambda s: True)
    assert m.cuts == [(5, 0, "a")]
    m.push(B, [("b0", 10, 0)])
    m.release(6.0, lambda s: True)
    m.push(A, [("a5", 11, 5)])
    m.release(7.0, lambda s: True)
    assert m.cuts == [(5, 0, "a"), (5, 1, "b"), (6, 1, "a")]
    m.checkpointed()
    assert m.cuts == []


def test_foreign_offset_metadata_is_ignored():
    assert decode_cuts(None) == (None, [])
    assert decode_cuts("something else") == (None, [])
    assert decode_cuts("sf1;x") == (None, [])


def test_docstring_examples():
    import doctest

    import worker.merge

    result = doctest.testmod(worker.merge, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
