"""The per-partition step: released records decoded, learned and encoded.

:class:`StreamStep` is what :meth:`worker.task.PartitionTask.process` runs over the records
the merge released for one partition, for the worker and for ``streamforest evaluate``
alike:

1. decode the instance records into per-stream rows and the feature records into arrivals
   (:class:`worker.batch.BatchDecoder`); refused records become dead letters;
2. run each stream's pipeline over its rows, test-then-train (:func:`worker.learn.learn_streams`),
   and the streams of features over their rows and arrivals in merged order
   (:class:`worker.feature_streams.FeatureStreams`); rows below the partition's committed
   offsets only update state;
3. encode what the pipelines returned for live rows into output records
   (:class:`worker.batch.OutputEncoder`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .feature_streams import FeatureStreams
from .learn import Learned, learn_streams


@dataclass
class Stepped:
    """What one step did for one partition.

    Attributes
    ----------
    streams : dict
        stream -> :class:`worker.batch.StreamRows` decoded from the instance records.
    arrivals : list
        The valid :class:`worker.batch.Arrival` s, in merged order.
    learned : worker.learn.Learned
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
    decoder : worker.batch.BatchDecoder
        Records in.
    encoder : worker.batch.OutputEncoder or None
        Records out (``None``: results are not encoded, as in an evaluation).
    metrics : worker.metrics.WorkerMetrics
        Counters of instances, replays and arrivals.
    max_bytes : int
        Largest input record taken.
    """

    def __init__(self, decoder, encoder, metrics, max_bytes: int):
        self.decoder = decoder
        self.encoder = encoder if encoder is not None else _Unencoded()
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.features = FeatureStreams(decoder, self.encoder, metrics)

    def run(self, task, rel, outputs: list, dead: list) -> Stepped:
        """One partition's released records (``rel``) through its pipelines."""
        out = Stepped()
        if rel.a:
            out.streams = self.decoder.decode(task, rel.a, rel.a_offsets, dead, self.max_bytes)
            out.extra_rows = self.decoder.batches.extra_live_rows
        if rel.b:
            out.arrivals = self.decoder.decode_arrivals(task, rel.b, dead, self.max_bytes)
        out.learned = learn_streams(task, out.streams)
        for stream, pl, sr, lo, res in out.learned.results:
            self.encoder.encode(task, stream, pl, res, sr, lo, outputs, dead)
        self.features.process(task, out.streams, out.arrivals, rel.a_offsets, outputs, dead)
        return out


class _Unencoded:
    """The encoder of a step whose results are not published (an evaluation)."""

    def encode(self, *_args) -> None:
        pass

    def encode_features(self, *_args) -> None:
        pass
