"""The worker's gauges of its partition tasks: streams, state bytes, checkpoint age, lag; and
the prequential quality of its models per profile (:class:`PrequentialQuality`)."""

from __future__ import annotations

from collections import deque

from confluent_kafka import TopicPartition

CLASSIFICATION, REGRESSION = "classification", "regression"


def n_streams(tasks: dict) -> int:
    """Resident streams of all tasks."""
    return sum(t.pipelines.n_resident for t in tasks.values())


def streams(metrics, tasks: dict, budget) -> None:
    """Resident and passivated streams, the bytes their state holds and the unlabelled
    instances the resident ones hold for their labels."""
    metrics.streams.set(n_streams(tasks))
    metrics.streams_passivated.set(sum(len(t.pipelines.passivated) for t in tasks.values()))
    metrics.state_bytes.set(budget.held(tasks))
    metrics.held.set(sum(pl.n_held for t in tasks.values() for pl in t.pipelines.values()))


def checkpoint_age(metrics, tasks: dict, now: float) -> None:
    for p, t in tasks.items():
        metrics.ckpt_age.labels(partition=p).set(now - t.last_ckpt)


def lag(metrics, tasks: dict, consumer, reader) -> None:
    """Lag of every assigned partition; one still restoring counts from its committed offset."""
    for p, task in tasks.items():
        tp = TopicPartition(task.topic, p)
        try:
            if task.ready:
                high = consumer.get_watermark_offsets(tp, cached=True)[1]
                position = task.position
            else:  # paused, no fetch yet: ask the broker
                high = reader.get_watermark_offsets(tp, timeout=1.0)[1]
                position = max(0, consumer.committed([tp], timeout=1.0)[0].offset)
        except Exception:  # noqa: BLE001 (no answer yet: keep the last value)
            continue
        if high is not None and high >= 0:
            metrics.lag.labels(partition=p).set(max(0, high - position))


class PrequentialQuality:
    """Prequential quality per profile, from each poll's losses (bounded series).

    Every labelled instance a stream of instances learns is first scored against the
    prediction served for it (a late label against its instance's): its prequential loss,
    0/1 for classification, for regression the mean over targets of the absolute error over
    the target's running mean absolute deviation, clipped to ``[0, 1]``
    (:mod:`worker.pipeline.tasks`). :meth:`observe` takes, per stream call of a poll, the sum
    of those losses and their number, and keeps per profile and task the latest polls holding
    at least ``window`` labelled instances (the oldest poll is dropped once the others hold
    that many; the streams of a profile are pooled, so each instance weighs the same).

    * ``streamforest_prequential_accuracy{profile}``: 1 minus the mean 0/1 loss of the
      profile's classification streams over that window;
    * ``streamforest_prequential_error{profile}``: the mean normalised error of its regression
      streams (0 is exact, 1 an error as large as the target's usual spread or worse);
    * ``streamforest_scored_instances_total`` and ``streamforest_prequential_loss_total``
      ``{profile,task}``: the same sums as counters, which Prometheus turns into the quality
      of any time window and of a whole group of workers
      (``1 - rate(loss) / rate(scored)``).

    A gauge keeps its last value while its profile gets no labels. Only the profile label is
    per-configuration (:meth:`worker.metrics.WorkerMetrics.profile_label` caps it), so the
    series count does not grow with the streams. The cost is a few operations per stream and
    per poll: the losses were computed by the pipeline already.

    Examples
    --------
    >>> from worker.metrics import WorkerMetrics
    >>> m = WorkerMetrics(quality_window=4)
    >>> for poll in ([("p", "classification", 1.0, 2)], [("p", "classification", 0.0, 2)],
    ...              [("p", "classification", 2.0, 3)]):
    ...     m.quality.observe(poll)
    ...     print(m.accuracy.labels(profile="p")._value.get())
    0.5
    0.75
    0.6
    """

    def __init__(self, metrics, window: int):
        if window < 1:
            raise ValueError("the quality window holds at least one instance")
        self.metrics = metrics
        self.window = int(window)
        # (profile label, task) -> [deque of (loss, n) per poll, loss sum, n, gauge, counters]
        self._windows: dict[tuple[str, str], list] = {}

    def observe(self, scored) -> None:
        """One poll's ``(profile, task, loss sum, labelled instances)`` per stream call."""
        poll: dict[tuple[str, str], list] = {}
        for profile, task, loss, n in scored:
            if n:
                acc = poll.get((profile, task))
                if acc is None:
                    poll[profile, task] = [loss, n]
                else:
                    acc[0] += loss
                    acc[1] += n
        for (profile, task), (loss, n) in poll.items():
            self._add(profile, task, float(loss), int(n))

    def _add(self, profile: str, task: str, loss: float, n: int) -> None:
        label = self.metrics.profile_label(profile)
        w = self._windows.get((label, task))
        if w is None:
            w = self._windows[label, task] = self._window(label, task)
        polls = w[0]
        polls.append((loss, n))
        w[1] += loss
        w[2] += n
        while w[2] - polls[0][1] >= self.window:
            old_loss, old_n = polls.popleft()
            w[1] -= old_loss
            w[2] -= old_n
        if len(polls) == 1:  # no rounding left from the sums' subtractions
            w[1] = loss
        mean = min(1.0, max(0.0, w[1] / w[2]))
        w[3].set(1.0 - mean if task == CLASSIFICATION else mean)
        w[4].inc(n)
        w[5].inc(loss)

    def _window(self, label: str, task: str) -> list:
        m = self.metrics
        gauge = (m.accuracy if task == CLASSIFICATION else m.error).labels(profile=label)
        return [deque(), 0.0, 0, gauge, m.scored.labels(profile=label, task=task),
                m.loss.labels(profile=label, task=task)]
