"""The worker's gauges of its partition tasks: streams, state bytes, checkpoint age, lag."""

from __future__ import annotations

from confluent_kafka import TopicPartition


def n_streams(tasks: dict) -> int:
    """Resident streams of all tasks."""
    return sum(t.pipelines.n_resident for t in tasks.values())


def streams(metrics, tasks: dict, budget) -> None:
    """Resident and passivated streams, and the bytes their state holds."""
    metrics.streams.set(n_streams(tasks))
    metrics.streams_passivated.set(sum(len(t.pipelines.passivated) for t in tasks.values()))
    metrics.state_bytes.set(budget.held(tasks))


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
