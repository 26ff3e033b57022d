"""The per-partition step: released records decoded, learned and encoded.

:class:`StreamStep` is what :meth:`worker.task.PartitionTask.process` runs over the records
the merge released for one partition, for the worker and for ``streamforest evaluate``
alike:

1. decode the instance records into per-stream rows and the feature records into arrivals
   (:class:`worker.intake.RecordDecoder`); refused records become dead letters;
2. run each stream's pipeline over its rows, test-then-train (:func:`learn_streams`; the
   losses of the live labelled rows feed the per-profile quality of
   :class:`worker.gauges.PrequentialQuality`), and
   the streams of features over their rows and their ``FeatureArrival`` s in merged order
   (:class:`FeatureStreams`: an arrival's unknown ids are reported in one dead letter per
   arrival); rows below the partition's committed offsets only update state;
3. encode what the pipelines returned for live rows into output records
   (:class:`worker.output.OutputEncoder`).

Records and dead letters go to the poll's :class:`worker.output.Outbox`. The two kinds of
stream pipeline (:class:`worker.pipeline.StreamPipeline`) are fed differently: a stream of
instances its rows at once, a stream of features its rows and arrivals in merged order
(:attr:`~worker.pipeline.StreamPipeline.arrivals`, read here only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .pipeline import PipelineError

if TYPE_CHECKING:  # the annotations only
    from .intake import RecordDecoder


@dataclass
class Learned:
    """What :func:`learn_streams` did: the results of live rows, and counts of the instances
    among them (label events left out)."""

    results: list = field(default_factory=list)  # (stream, pipeline, StreamRows, lo, StreamResult)
    n_live: int = 0
    n_replay: int = 0
    #: per live call that scored labelled rows: (profile, task, sum of their prequential
    #: losses, their number), read from the pipeline's running sums
    scored: list = field(default_factory=list)


def learn_streams(task, streams: dict) -> Learned:
    """Run every stream of instances of ``streams`` (stream -> StreamRows) through
    ``task``'s pipelines.

    Each result covers rows ``lo:`` of its StreamRows (``lo`` is the first live row).
    Every stream that advanced is marked dirty in ``task`` (to be checkpointed).
    """
    out = Learned()
    for stream, sr in streams.items():
        pl = task.pipelines[stream]
        # replayed rows change the state too: the stream must be checkpointed again
        task.dirty.add(stream)
        sr.finish(pl.n_features)
        X, offs, n_rows, lo = sr.X, sr.offsets, len(sr), sr.live
        ids, ts, labels = sr.ids, sr.ts, sr.labels
        if lo > 0:
            pl.process(X[:lo], sr.ys[:lo], offs[:lo], emit=False, ids=ids[:lo], ts=ts[:lo],
                       labels=None if labels is None else labels[:lo])
            out.n_replay += _instances(labels, 0, lo)
        if lo < n_rows:
            loss0, n0 = pl.loss_sum, pl.n_labelled
            res = pl.process(X[lo:], sr.ys[lo:], offs[lo:], emit=True, ids=ids[lo:],
                             ts=ts[lo:], labels=None if labels is None else labels[lo:])
            out.results.append((stream, pl, sr, lo, res))
            out.n_live += _instances(labels, lo, n_rows)
            if pl.n_labelled > n0:
                out.scored.append((pl.cfg.profile, pl.task.name, pl.loss_sum - loss0,
                                   pl.n_labelled - n0))
    return out


class FeatureStreams:
    """Runs the streams of features of one release (see the module doc).

    Parameters
    ----------
    encoder : worker.output.OutputEncoder
        Turns pipeline results into records.
    metrics : worker.metrics.WorkerMetrics
        Counters of instances, replays and arrivals.
    """

    def __init__(self, encoder, metrics):
        self.encoder = encoder
        self.metrics = metrics

    def process(self, task, streams: dict, arrivals: list, a_offsets, outbox) -> None:
        """Streams of features: their instances (``streams``) and arrivals, in the merged
        order."""
        by_stream: dict[str, list] = {}
        for a in arrivals:
            by_stream.setdefault(a.stream, []).append(a)
        for stream in streams:
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
                    done = self._add_rows(task, stream, pl, sr, done, upto, outbox)
                self._arrive(task, stream, pl, a, outbox)
            if sr is not None:
                self._add_rows(task, stream, pl, sr, done, len(sr), outbox)

    def _add_rows(self, task, stream, pl, sr, lo: int, hi: int, outbox) -> int:
        """Rows ``lo:hi`` of a stream of features (replayed ones without outputs)."""
        offs = np.asarray(sr.offsets, dtype=np.int64)
        for a, z, emit in ((lo, min(hi, max(lo, sr.live)), False), (max(lo, sr.live), hi, True)):
            if a >= z:
                continue
            res = pl.add(sr.rows[a:z], sr.ys[a:z], sr.ids[a:z], offs[a:z], sr.ts[a:z], emit)
            if emit:
                self.encoder.encode_features(task, stream, pl, res, 0, -1, outbox)
                self.metrics.instances_in.inc(z - a)
            else:
                self.metrics.replayed.inc(z - a)
        return hi

    def _arrive(self, task, stream, pl, a, outbox) -> None:
        """One FeatureArrival: join, a generation, predictions of the held rows, a ranking."""
        try:
            res = pl.arrive(a.arrival.feature, a.values(), emit=a.live)
        except PipelineError as exc:
            if a.live:
                outbox.refuse(task, a.msg, exc, exc.code, task.features)
            return
        self.metrics.arrivals.labels(outcome="replayed" if not a.live else "joined").inc()
        if not a.live:
            return
        if res.unknown_ids:
            shown = ", ".join(map(repr, res.unknown_ids[:20]))
            more = f" and {len(res.unknown_ids) - 20} more" if len(res.unknown_ids) > 20 else ""
            outbox.refuse(task, a.msg, PipelineError(
                "unknown_ids", f"{len(res.unknown_ids)} ids of feature {a.arrival.feature!r} "
                f"are not held by stream {stream!r} (the rest were joined): {shown}{more}"),
                "unknown_ids", task.features)
        self.encoder.encode_features(task, stream, pl, res, a.arrival.ts, a.msg.offset(),
                                     outbox)


@dataclass
class Stepped:
    """What one step did for one partition.

    Attributes
    ----------
    streams : dict
        stream -> :class:`worker.intake.StreamRows` decoded from the instance records.
    arrivals : list
        The valid :class:`worker.intake.Arrival` s, in merged order.
    learned : Learned
        The results of the streams of instances' live rows, and row counts.
    extra_rows : int
        Live rows of InstanceBatch records beyond one per record.
    """

    streams: dict = field(default_factory=dict)
    arrivals: list = field(default_factory=list)
    learned: Learned = field(default_factory=Learned)
    extra_rows: int = 0

    def touched(self) -> list[str]:
        """The streams the step used (the state budget's recency)."""
        return list(self.streams) + [a.stream for a in self.arrivals]

    def live_instances(self, committed: int, rel) -> int:
        """Live instances and arrivals: checkpoints are due by their number (an
        InstanceBatch counts its rows)."""
        n_a = rel.a_offsets.shape[0]
        live_a = n_a if not n_a or rel.a_offsets[0] >= committed else int(
            np.count_nonzero(rel.a_offsets >= committed))
        return live_a + self.extra_rows + sum(1 for a in self.arrivals if a.live)


class StreamStep:
    """Decode, learn, encode (see the module doc).

    Parameters
    ----------
    decoder : worker.intake.RecordDecoder
        Records in.
    encoder : worker.output.OutputEncoder or None
        Records out (``None``: results are not encoded, as in an evaluation).
    metrics : worker.metrics.WorkerMetrics
        Counters of instances, replays and arrivals; the models' prequential quality.
    max_bytes : int
        Largest input record taken.
    """

    def __init__(self, decoder: RecordDecoder, encoder, metrics, max_bytes: int):
        self.decoder: RecordDecoder = decoder
        self.encoder = encoder if encoder is not None else _Unencoded()
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.features = FeatureStreams(self.encoder, metrics)

    def run(self, task, rel, outbox) -> Stepped:
        """One partition's released records (``rel``) through its pipelines; records and
        dead letters go to ``outbox`` (:class:`worker.output.Outbox`)."""
        out = Stepped()
        if rel.a:
            out.streams = self.decoder.read_instances(task, rel.a, rel.a_offsets, outbox,
                                                      self.max_bytes)
            out.extra_rows = self.decoder.extra_live_rows
        if rel.b:
            out.arrivals = self.decoder.read_arrivals(task, rel.b, outbox, self.max_bytes)
        instances, held = _by_kind(task.pipelines, out.streams)
        out.learned = learn_streams(task, instances)
        if out.learned.scored:
            self.metrics.quality.observe(out.learned.scored)
        for stream, pl, sr, lo, res in out.learned.results:
            self.encoder.encode(task, stream, pl, res, sr, lo, outbox)
        self.features.process(task, held, out.arrivals, rel.a_offsets, outbox)
        return out


def _instances(labels, a: int, b: int) -> int:
    """Instances among rows ``a:b`` of a stream's rows (``labels``: its label events' mask,
    ``None``: none): label events are rows, not instances."""
    return b - a - (0 if labels is None else int(np.count_nonzero(labels[a:b])))


def _by_kind(pipelines, streams: dict) -> tuple[dict, dict]:
    """``streams`` split into the streams of instances and the streams of features (rows
    held until their features arrive), each in order."""
    instances, held = {}, {}
    for stream, sr in streams.items():
        (held if pipelines[stream].arrivals else instances)[stream] = sr
    return instances, held


class _Unencoded:
    """The encoder of a step whose results are not published (an evaluation)."""

    def encode(self, *_args) -> None:
        pass

    def encode_features(self, *_args) -> None:
        pass
