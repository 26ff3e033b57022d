"""The streams of features of one released batch: their instances and arrivals, in order.

A batch of a partition is released by the merge of the instances and features topics
(:mod:`worker.merge`): instance records, and feature records each with the number of
instance records released before it. :class:`FeatureStreams` hands every stream of features
(:class:`worker.pipeline.FeatureStreamPipeline`) its rows and its ``FeatureArrival`` s in that
order, replayed ones without outputs, and turns what comes back into output messages and dead
letters (an arrival's unknown ids are reported in one dead letter per arrival).
"""

from __future__ import annotations

import numpy as np

from .pipeline import PipelineError


class FeatureStreams:
    """Runs the streams of features of a batch (see the module doc).

    Parameters
    ----------
    decoder : worker.batch.BatchDecoder
        Writes dead letters of refused arrivals.
    encoder : worker.batch.OutputEncoder
        Turns pipeline results into messages.
    metrics : worker.metrics.WorkerMetrics
        Counters of instances, replays and arrivals.
    """

    def __init__(self, decoder, encoder, metrics):
        self.decoder = decoder
        self.encoder = encoder
        self.metrics = metrics

    def process(self, task, streams: dict, arrivals: list, a_offsets, outputs, dead) -> None:
        """Streams of features: their instances and arrivals, in the merged order."""
        by_stream: dict[str, list] = {}
        for a in arrivals:
            by_stream.setdefault(a.stream, []).append(a)
        for stream in streams:
            if task.pipelines[stream].arrivals:
                by_stream.setdefault(stream, [])
        for stream, items in by_stream.items():
            pl = task.pipelines[stream]
            task.dirty.add(stream)
            sr = streams.get(stream)
            done = 0  # rows of sr taken so far
            for a in items:
                # the instances released before the arrival: offsets up to its predecessor's
                if sr is not None:
                    last = int(a_offsets[a.n_before - 1]) if a.n_before else -1
                    upto = int(np.searchsorted(sr.offsets, last, side="right"))
                    done = self._add_rows(task, stream, pl, sr, done, upto, outputs, dead)
                self._arrive(task, stream, pl, a, outputs, dead)
            if sr is not None:
                self._add_rows(task, stream, pl, sr, done, len(sr), outputs, dead)

    def _add_rows(self, task, stream, pl, sr, lo: int, hi: int, outputs, dead) -> int:
        """Rows ``lo:hi`` of a stream of features (replayed ones without outputs)."""
        offs = np.asarray(sr.offsets, dtype=np.int64)
        for a, z, emit in ((lo, min(hi, max(lo, sr.live)), False), (max(lo, sr.live), hi, True)):
            if a >= z:
                continue
            res = pl.add(sr.rows[a:z], sr.ys[a:z], sr.ids[a:z], offs[a:z], sr.ts[a:z], emit)
            if emit:
                self.encoder.encode_features(task, stream, pl, res, 0, -1, outputs, dead)
                self.metrics.instances_in.inc(z - a)
            else:
                self.metrics.replayed.inc(z - a)
        return hi

    def _arrive(self, task, stream, pl, a, outputs, dead) -> None:
        """One FeatureArrival: join, a generation, predictions of the held rows, a ranking."""
        try:
            res = pl.arrive(a.arrival.feature, a.values(), emit=a.live)
        except PipelineError as exc:
            if a.live:
                self.decoder.dead_letter(dead, task, a.msg, exc, exc.code, task.features)
            return
        self.metrics.arrivals.labels(outcome="replayed" if not a.live else "joined").inc()
        if not a.live:
            return
        if res.unknown_ids:
            shown = ", ".join(map(repr, res.unknown_ids[:20]))
            more = f" and {len(res.unknown_ids) - 20} more" if len(res.unknown_ids) > 20 else ""
            self.decoder.dead_letter(dead, task, a.msg, PipelineError(
                "unknown_ids", f"{len(res.unknown_ids)} ids of feature {a.arrival.feature!r} "
                f"are not held by stream {stream!r} (the rest were joined): {shown}{more}"),
                "unknown_ids", task.features)
        self.encoder.encode_features(task, stream, pl, res, a.arrival.ts, a.msg.offset(),
                                     outputs, dead)
