"""One candidate configuration replayed over a topic's records, with the worker's own code.

A :class:`Candidate` holds what a worker would hold for the partitions it reads (one
:class:`worker.task.PartitionTask` per partition) and runs each partition's records through
:meth:`worker.task.PartitionTask.process`, the step the worker itself runs (decode, learn,
encode: :class:`worker.step.StreamStep`), streams of features included (the features topic
is not read: their rows are held, as a worker's are until their features arrive). Nothing
is replayed silently (every record is live), so with the same configuration and seed the
predictions, alerts and rankings are the ones a worker would publish for the same records. The candidate
records, per stream, the prequential metrics (:class:`worker.tools.evaluate.scores.StreamMetrics`),
the alerts and the rankings with their stream positions, and the declared true importances.

A stream declares the true importance of its features with an ``sf-truth`` header on any of
its instances: a JSON map from feature name to weight, in force from that instance on (the
demo's hyperplane sends its weights this way). Each ranking is then compared with the truth
in force at its position by Spearman's rank correlation.

Records that the worker would dead-letter are counted by reason, never skipped silently.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np

from schemas.codec import encode_state
from schemas.messages import TRUTH_HEADER

from ... import __version__
from ...intake import Caps, RecordDecoder
from ...merge import Released
from ...metrics import WorkerMetrics
from ...output import Outbox
from ...step import StreamStep
from ...task import PartitionTask
from .delays import DelayedLabels
from .scores import StreamMetrics, spearman

#: instances between two samples of a candidate's state size (its peak memory)
STATE_SAMPLE_EVERY = 5000


class Candidate:
    """One configuration's replay (see the module doc).

    Parameters
    ----------
    name : str
        The configuration's name in the report.
    profiles : worker.pipeline.Profiles
        Which pipeline each stream gets.
    settings : worker.settings.Settings
        Caps and limits (as a worker of these settings would apply them).
    topic : str
        The topic read (written into the tasks, as a worker would).
    window, every : int
        Sliding window of the windowed metrics, labelled rows between history points.
    delay : worker.tools.evaluate.delays.LabelDelay, optional
        Replay every label that late (:mod:`worker.tools.evaluate.delays`).
    """

    def __init__(self, name: str, profiles, settings, topic: str, window: int, every: int,
                 delay=None):
        self.name = name
        self.delay = delay
        self.delayed: dict[int, DelayedLabels] = {}  # per partition
        self.profiles = profiles
        self.topic = topic
        self.window, self.every = window, every
        self.decoder = RecordDecoder(profiles, Caps.from_settings(settings))
        self.features_topic = settings.topics.features
        self.max_bytes = settings.worker.max_message_bytes
        self.counters = WorkerMetrics()  # the step's counters (not reported)
        self.n_feeds = 0
        self.group = f"{settings.kafka.group_id}.evaluate"
        self.tasks: dict[int, PartitionTask] = {}
        self.metrics: dict[str, StreamMetrics] = {}
        self.alerts: dict[str, list] = {}
        self.rankings: dict[str, dict[str, list]] = {}
        self.truth: dict[str, list] = {}
        self.refused: Counter = Counter()
        self.seconds = 0.0
        self.instances = 0
        self.peak_bytes = 0
        self._next_sample = STATE_SAMPLE_EVERY

    # -- feeding ----------------------------------------------------------------------------

    def task(self, p: int) -> PartitionTask:
        task = self.tasks.get(p)
        if task is None:
            task = self.tasks[p] = PartitionTask(self.group, self.topic, p, self.features_topic)
            task.ready = True
        return task

    def feed(self, p: int, msgs: list, offsets: np.ndarray, encoder=None) -> Outbox:
        """One partition's records, in offset order; with ``encoder``, the returned outbox
        holds the records a worker would produce (a backfill)."""
        t0 = time.perf_counter()
        if self.delay is not None:
            delayed = self.delayed.get(p)
            if delayed is None:
                delayed = self.delayed[p] = DelayedLabels(self.delay)
            msgs, offsets = delayed.rewrite(msgs, offsets)
        task = self.task(p)
        outbox = Outbox(__version__)
        truths = _truth_headers(msgs)
        # the backfill's encoder writes what a worker would publish; without it, no encoding
        step = StreamStep(self.decoder, encoder, self.counters, self.max_bytes)
        done = task.process(Released(a=msgs, a_offsets=offsets), step, outbox, self.n_feeds)
        self.n_feeds += 1
        stepped = done.stepped
        for stream, pl, sr, lo, res in stepped.learned.results:
            self._record(stream, pl, sr, lo, res)
        for offset, stream, scores in truths:
            self._truth(stepped.streams, task, offset, stream, scores)
        self.refused.update(outbox.refused_codes())
        self.instances += stepped.learned.n_live
        if self.instances >= self._next_sample:
            self._next_sample = self.instances + STATE_SAMPLE_EVERY
            self.peak_bytes = max(self.peak_bytes, self.state_nbytes())
        self.seconds += time.perf_counter() - t0
        return outbox

    def _record(self, stream, pl, sr, lo: int, res) -> None:
        n = len(sr) - lo
        start = pl.n_instances - n  # stream position of row lo
        if pl.task is not None and res.scored:
            # every label learned, scored against the prediction served for its instance (a
            # LabelEvent's, when its instance came earlier)
            m = self.metrics.get(stream)
            if m is None:
                m = self.metrics[stream] = StreamMetrics(pl.task.name, self.window,
                                                         self.every, pl.task.n_targets)
            m.update([v for _p, _yp, yt in res.scored for v in yt],
                     [v for _p, yp, _yt in res.scored for v in yp],
                     np.concatenate([p for p, _yp, _yt in res.scored]).tolist())
        for a in res.alerts:
            self.alerts.setdefault(stream, []).append(
                {"position": int(a.position), "source": a.source, "level": a.level,
                 "feature": a.feature})
        for rk in res.rankings:
            self.rankings.setdefault(stream, {}).setdefault(rk.method, []).append(
                {"position": start + int(rk.row), "features": list(rk.features),
                 "scores": [float(s) for s in rk.scores]})

    def _truth(self, streams: dict, task, offset: int, stream: str, scores: dict) -> None:
        """An ``sf-truth`` header: the position of its instance in the stream."""
        sr, pl = streams.get(stream), task.pipelines.get(stream)
        if sr is None or pl is None or sr.X is None:
            return  # its instance was refused: the header goes with it
        idx = int(np.searchsorted(sr.offsets, offset))
        if idx >= len(sr) or int(sr.offsets[idx]) != offset:
            return
        position = pl.n_instances - len(sr) + idx
        self.truth.setdefault(stream, []).append({"position": position, "scores": scores})

    # -- results ----------------------------------------------------------------------------

    def state_nbytes(self) -> int:
        """Bytes of the learners' state arrays held now (the memory the models take)."""
        return sum(_nbytes(pl.to_state()) for t in self.tasks.values()
                   for pl in t.pipelines.values())

    def state_bytes(self) -> int:
        """Bytes of the streams' checkpoints as a worker would write them."""
        return sum(len(encode_state(pl.to_state())) for t in self.tasks.values()
                   for pl in t.pipelines.values())

    def report(self) -> dict:
        """This configuration's part of ``report.json``."""
        self.peak_bytes = max(self.peak_bytes, self.state_nbytes())
        streams = {}
        for t in self.tasks.values():
            for s, pl in t.pipelines.items():
                streams[s] = self._stream_report(s, pl)
        cfg = self.profiles.default
        return {
            "name": self.name, "config": cfg.as_dict(),
            "label_delay": None if self.delay is None else str(self.delay),
            "profiles": [{"match": m, "config": c.as_dict()} for m, c in self.profiles.rules],
            "throughput": {"instances": self.instances, "seconds": self.seconds,
                           "per_second": self.instances / self.seconds if self.seconds else 0.0},
            "memory": {"peak_bytes": self.peak_bytes, "state_bytes": self.state_bytes()},
            "refused": dict(sorted(self.refused.items())),
            "streams": dict(sorted(streams.items())),
        }

    def _stream_report(self, stream: str, pl) -> dict:
        m = self.metrics.get(stream)
        task = pl.task.name if pl.task is not None else None
        out = {
            "task": task, "model": pl.model_name, "instances": int(pl.n_instances),
            "labelled": int(pl.n_labelled),
            "cumulative": m.cumulative() if m else {}, "window": m.windowed() if m else {},
            "history": m.history() if m else [],
            "alerts": self.alerts.get(stream, []),
            "rankings": self.rankings.get(stream, {}),
        }
        if pl.arrivals:
            out["note"] = ("a stream of features: its columns come from the features topic, "
                           "which an evaluation does not read; not scored")
        truth = self.truth.get(stream)
        if truth:
            out["truth"] = truth
            out["truth_correlation"] = {
                method: _correlations(ranks, truth) for method, ranks in out["rankings"].items()}
        return out


def _truth_headers(msgs: list) -> list[tuple[int, str, dict]]:
    """``(offset, stream, scores)`` of the records carrying an ``sf-truth`` header."""
    out = []
    for m in msgs:
        headers = m.headers()
        if not headers:
            continue
        for k, v in headers:
            if k == TRUTH_HEADER:
                try:
                    scores = {str(f): float(w) for f, w in json.loads(v).items()}
                    key = m.key().decode()
                except (ValueError, AttributeError, TypeError):
                    break  # a bad header is not the stream's truth; the instance is unaffected
                out.append((m.offset(), key, scores))
    return out


def _correlations(ranks: list, truth: list) -> list[dict]:
    """Spearman's correlation of each ranking with the truth in force at its position."""
    out = []
    positions = [t["position"] for t in truth]
    for rk in ranks:
        i = int(np.searchsorted(positions, rk["position"], side="right")) - 1
        if i < 0:
            continue
        true = truth[i]["scores"]
        common = [f for f in rk["features"] if f in true]
        if len(common) < 2:
            continue
        mine = dict(zip(rk["features"], rk["scores"]))
        rho = spearman([mine[f] for f in common], [true[f] for f in common])
        out.append({"position": rk["position"], "spearman": None if np.isnan(rho) else rho})
    return out


def _nbytes(obj) -> int:
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_nbytes(v) for v in obj)
    return 0
