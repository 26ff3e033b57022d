"""Passivated streams read back from their partition's checkpoint (:mod:`worker.residency`).

A stream passivated to keep the worker within its state budget is restored when a record of
it comes again: :class:`OnDemand` reads its envelope from the checkpoint the partition's
manifest names and makes its pipeline again.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException

from . import checkpoint_store as ckpt
from .kafka_io import AbortableError
from .logs import event
from .recovery import stream_pipeline

log = logging.getLogger("streamforest.worker")


class RestoreOnDemandFailed(AbortableError):
    """Passivated streams could not be read back from their partition's checkpoint.

    :meth:`worker.task.PartitionTask.process` restores the partition again (with the
    fallback of a restore at start); met anywhere else, it aborts the transaction and
    rewinds every partition.
    """


class OnDemand:
    """Reads passivated streams of a partition back (see the module doc).

    Parameters
    ----------
    reader : confluent_kafka.Consumer
        An unsubscribed read_committed consumer.
    topic : str
        The checkpoints topic.
    limits : worker.checkpoint_store.Limits
        What checkpoint records may claim.
    transactions : worker.transactions.Transactions
        The commit in flight ends before a read (it may hold the envelopes).
    metrics : worker.metrics.WorkerMetrics
        Counts the streams restored.
    timeout_s : float
        Bound of one read.
    """

    def __init__(self, reader, topic: str, limits, transactions, metrics,
                 timeout_s: float = 60.0):
        self.reader = reader
        self.topic = topic
        self.limits = limits
        self.transactions = transactions
        self.metrics = metrics
        self.timeout_s = timeout_s

    def load(self, task, streams: list[str]) -> dict:
        """Passivated streams' pipelines, from the checkpoint the partition's manifest names.

        Their envelopes may have been written in the transaction of the previous poll: its
        commit ends first, and the read waits until the partition's last stable offset
        reaches them (a read_committed reader sees a committed transaction only once its
        markers are written, which happens after the commit returns). A checkpoint that
        cannot be read or restored raises :class:`RestoreOnDemandFailed`.
        """
        self.transactions.settle()
        try:
            envelopes = ckpt.read_streams(self.reader, self.topic, task.partition,
                                          task.manifest, streams, self.timeout_s,
                                          task.manifest_end, self.limits)
            pipelines = {s: stream_pipeline(s, env) for s, env in envelopes.items()}
        except (RuntimeError, ValueError, TimeoutError, MemoryError, KafkaException) as exc:
            # CheckpointError is a RuntimeError; so are the timeouts and read errors
            raise RestoreOnDemandFailed(f"{type(exc).__name__}: {exc}") from exc
        self.metrics.restored_on_demand.inc(len(envelopes))
        event(log, logging.DEBUG, "streams restored", partition=task.partition,
              streams=len(envelopes))
        return pipelines
