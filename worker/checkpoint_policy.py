"""When partitions are checkpointed, how many in one transaction, and when streams are passivated.

A checkpoint rewrites every changed stream's whole state, so :class:`CheckpointPolicy` waits
until it is worth it: a partition is *due* after ``every_instances`` instances or
``interval_s`` seconds, once its changed streams learned ``rows_per_stream`` rows each on
average. Past the state budget (:mod:`worker.residency`) every partition with changed streams
is due, and the least recently used clean streams are then passivated. A partition whose
merge cuts would no longer fit the offset metadata is always due (a checkpoint drops them).

One transaction writes at most ``checkpoint.transaction_bytes`` of checkpoints (a partition
is never split): thousands of streams per partition make a checkpoint of hundreds of MB, which
would outlast the transaction timeout. Due partitions left over go first in the next
transactions; those whose cuts no longer fit are never left over.
"""

from __future__ import annotations

import logging
import time

from .logs import event

log = logging.getLogger("streamforest.worker")


class CheckpointPolicy:
    """Due, idle and budget-driven checkpoints (see the module doc).

    Parameters
    ----------
    settings : worker.settings.CheckpointSettings
        ``every_instances``, ``interval_s``, ``rows_per_stream``, ``transaction_bytes``,
        ``compression_level``.
    budget : worker.residency.Budget
        The state budget.
    metrics : worker.metrics.WorkerMetrics
        Checkpoint sizes and times, passivations.
    """

    def __init__(self, settings, budget, metrics):
        self.settings = settings
        self.budget = budget
        self.metrics = metrics

    def _due(self, tasks: dict, parts, over: bool) -> list:
        """``(optional, task)`` of the due partitions, in the order they are written."""
        c = self.settings
        now = time.monotonic()
        due = []  # (cuts too long: never left over, last checkpoint, partition)
        for p in (sorted(tasks) if over else parts):
            task = tasks[p]
            if not (task.ready and task.dirty):
                continue
            must = task.cuts_too_long()
            # a checkpoint rewrites every changed stream's whole state: with thousands of
            # streams it waits until they learned rows_per_stream rows each on average
            enough = task.since_ckpt >= c.rows_per_stream * len(task.dirty)
            if over or must or enough and (task.since_ckpt >= c.every_instances
                                           or now - task.last_ckpt >= c.interval_s):
                due.append((not must, task.last_ckpt, p))
        return [(optional, tasks[p]) for optional, _, p in sorted(due)]

    def write_due(self, tasks: dict, parts, writer) -> bool:
        """Checkpoint the due partitions among ``parts`` (transaction open), at most
        ``transaction_bytes`` unless they must; past the budget, every changed partition,
        then passivate. Returns whether streams were passivated (the gauges changed)."""
        over = self.budget.exceeded(tasks)
        written = 0
        for optional, task in self._due(tasks, parts, over):
            if written >= self.settings.transaction_bytes and optional:
                break
            written += self.write(task, writer)
        if over:
            self._passivate(tasks)
        return over

    def write(self, task, writer) -> int:
        """One partition's checkpoint (transaction open); the bytes written."""
        return task.checkpoint(writer, self.settings.compression_level, self.metrics)

    def idle(self, tasks: dict) -> list[int]:
        """Partitions with changed streams whose last checkpoint is ``interval_s`` old."""
        now = time.monotonic()
        return [p for p, t in tasks.items()
                if t.ready and t.dirty and now - t.last_ckpt >= self.settings.interval_s]

    def write_alone(self, tasks: dict, parts, transactions) -> None:
        """Transactions holding only checkpoints (idle interval, revoke, shutdown).

        Each sends its partitions' offsets with the group metadata like every poll's does,
        so a member that is no longer in the group (a zombie) cannot commit it (KIP-447);
        each holds at most ``transaction_bytes`` of checkpoints (and at least one partition).
        """
        transactions.settle()
        todo = [tasks[p] for p in parts if p in tasks and tasks[p].ready and tasks[p].dirty]
        cap = self.settings.transaction_bytes
        while todo:
            transactions.begin()
            done, written = {}, 0
            while todo and (written < cap or not done):
                task = todo.pop(0)
                written += self.write(task, transactions.writer)
                done[task.partition] = task
            offsets = [tp for t in done.values() for tp in t.offsets()]
            transactions.commit(offsets, done, time.perf_counter(), in_background=False)

    def _passivate(self, tasks: dict) -> None:
        """Within the budget's low-water mark again (after the checkpoints of a poll)."""
        dropped = self.budget.passivate(tasks)
        if dropped:
            self.metrics.passivations.inc(len(dropped))
            event(log, logging.INFO, "streams passivated", streams=len(dropped),
                  resident=sum(t.pipelines.n_resident for t in tasks.values()),
                  bytes=self.budget.held(tasks))
