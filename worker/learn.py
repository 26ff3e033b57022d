"""A partition's decoded streams through their pipelines: the step the worker and the
evaluator share.

The worker (:mod:`worker.app`) and ``streamforest evaluate`` (:mod:`worker.evaluate`) both
decode a partition's instances into per-stream rows (:class:`worker.batch.BatchDecoder`) and
hand each stream's rows to its pipeline here, in partition order: rows before a stream's
replay mark only advance the state (their outputs were committed before), the rest give
results. Streams of features are left out: they advance with their arrivals
(:mod:`worker.feature_streams`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Learned:
    """What :func:`learn_streams` did: the results of live rows, and row counts."""

    results: list = field(default_factory=list)  # (stream, pipeline, StreamRows, lo, StreamResult)
    n_live: int = 0
    n_replay: int = 0


def learn_streams(task, streams: dict) -> Learned:
    """Run every stream of ``streams`` (stream -> StreamRows) through ``task``'s pipelines.

    Each result covers rows ``lo:`` of its StreamRows (``lo`` is the first live row).
    Every stream that advanced is marked dirty in ``task`` (to be checkpointed).
    """
    out = Learned()
    for stream, sr in streams.items():
        pl = task.pipelines[stream]
        # replayed rows change the state too: the stream must be checkpointed again
        task.dirty.add(stream)
        if pl.arrivals:
            continue
        sr.finish(pl.n_features)
        X, offs, n_rows, lo = sr.X, sr.offsets, len(sr), sr.live
        if lo > 0:
            pl.process(X[:lo], sr.ys[:lo], offs[:lo], emit=False)
            out.n_replay += lo
        if lo < n_rows:
            res = pl.process(X[lo:], sr.ys[lo:], offs[lo:], emit=True)
            out.results.append((stream, pl, sr, lo, res))
            out.n_live += n_rows - lo
    return out
