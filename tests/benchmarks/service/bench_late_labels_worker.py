"""Late labels end to end: one worker on a real broker, the same stream fully labelled and with
half its labels coming 1,000 instances late as LabelEvents.

The stream is Electricity (45,312 instances) under the worker's defaults (the adaptive random
forest, the block-forest ranker, ADWIN, 1,000 held instances per stream), produced as the
``produce`` command writes it: every instance with its label, or every other instance
(the first, the third, ...) unlabelled and its LabelEvent right after the instance 1,000 later
(the last ones at the end), as ``bench_delayed_labels.py`` feeds its pipeline. A third
topic holds the same rows fully labelled in the order their labels come in the late one
(:func:`label_order`): what learning in that order costs by itself, with every record an
instance, apart from what the held store, the join and the label records add.
A worker per topic consumes it from the start with exactly-once on, the three in this process
side by side (a poll of the one behind at a time: all run at the machine's speed of the same
moments, which drifts by tens of percent between minutes on a shared machine); each on fresh
topics and a fresh group. Throughput is the instances committed per second of the worker's
steps after a warm-up of a tenth of the stream (numba compiled before), in wall time and in
CPU time of the thread that runs them; the ratio is the median of the runs'. The thread's
CPU time is split between the stream pipeline and the rest of the step (consuming, merging,
decoding, encoding, producing, checkpoints), which the 1.5 times as many records of the late
stream also cost.

Run::

    python tests/benchmarks/service/bench_late_labels_worker.py [--pairs 3] [--int-labels]
        [--bootstrap HOST:PORT]

``--int-labels`` sends the classes as integers instead of the dataset's strings; the bulk
decoder (:mod:`worker.wire`) reads both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import msgpack

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.benchmarks.common import clocked_calls, kafka, write_results  # noqa: E402
from tests.benchmarks.learners.bench_arf import get_stream  # noqa: E402
from tests.benchmarks.service.bench_worker import env_for  # noqa: E402
from worker.app import Worker  # noqa: E402
from worker.pipeline import Pipeline  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.tools.dev.produce import (  # noqa: E402
    delayed_label_values,
    instance_values,
    make_producer,
    produce_values,
)
from worker.tools.topics import create_topics  # noqa: E402

DELAY = 1000
STREAM = "electricity"


def start_worker(bootstrap: str, values: list, headers: dict) -> Worker:
    """A started worker on fresh topics that hold ``values``, and its group."""
    prefix = f"bl-{uuid.uuid4().hex[:6]}"
    settings = load_settings(env_for(bootstrap, prefix, TOPICS__PARTITIONS="1"))
    create_topics(settings)
    producer = make_producer(bootstrap)
    produce_values(producer, settings.topics.instances, STREAM, values, headers=headers)
    producer.flush(120)
    w = Worker(settings)
    w.start()
    return w


def label_order(values: list) -> list[int]:
    """The instance ids in the order their labels come among a topic's records ``values``
    (msgpack): a labelled instance's with it, a LabelEvent's where the event stands.

    Examples
    --------
    >>> import numpy as np
    >>> late, _headers = delayed_label_values("s", np.zeros((5, 1)), [0] * 5, 2, every=2)
    >>> label_order(late)
    [1, 0, 3, 2, 4]
    """
    return [r["id"] for r in map(msgpack.unpackb, values) if r.get("y") is not None]


def committed(w: Worker) -> float:
    """Instances the worker committed so far."""
    return w.metrics.registry.get_sample_value("streamforest_instances_total") or 0


def run_side_by_side(bootstrap: str, topics: list, n: int) -> list[tuple[float, ...]]:
    """Per topic of ``topics`` (``(values, headers)``, ``n`` instances each), ``(instances
    per second, instances per CPU-second, CPU seconds of the steps per ``n`` instances, of
    which in the pipelines)`` of one worker reading it, after a warm-up of a tenth of them. The workers
    run in this process side by side, a poll of the one that has committed fewest instances
    at a time, so that all run at the machine's speed of the same moments (it drifts by tens
    of percent between minutes on a shared machine). A step's time is its wall time and the
    CPU time of the thread that runs it (the worker's own work; the Kafka client's threads
    are shared)."""
    workers = [start_worker(bootstrap, *topic) for topic in topics]
    try:
        for w in workers:
            while committed(w) < n // 10:
                w.step()
        start = [committed(w) for w in workers]
        wall, cpu, inside = [0.0] * len(workers), [0.0] * len(workers), [0.0] * len(workers)
        with clocked_calls([(Pipeline, "process", "pipeline")], time.thread_time) as spent:
            while True:
                k = min(range(len(workers)), key=lambda i: committed(workers[i]))
                if committed(workers[k]) >= n:
                    break
                spent.clear()
                t0, c0 = time.perf_counter(), time.thread_time()
                workers[k].step()
                if committed(workers[k]) >= n:
                    workers[k].settle()  # its last commit
                wall[k] += time.perf_counter() - t0
                cpu[k] += time.thread_time() - c0
                inside[k] += spent["pipeline"]
        # workers commit a poll's instances at once: after the warm-up each has its own count
        return [((n - s0) / t, (n - s0) / c, c * n / (n - s0), p * n / (n - s0))
                for s0, t, c, p in zip(start, wall, cpu, inside)]
    finally:
        for w in workers:
            w.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--pairs", type=int, default=3, help="runs of the three side by side")
    ap.add_argument("--int-labels", action="store_true",
                    help="the classes as integers 0, 1 instead of the dataset's strings")
    args = ap.parse_args()
    X, y = get_stream(STREAM)
    if args.int_labels:
        classes = {c: k for k, c in enumerate(dict.fromkeys(y))}
        y = [classes[c] for c in y]
    n = len(y)
    plain = (instance_values(STREAM, X, y), {})
    late = delayed_label_values(STREAM, X, y, DELAY, every=2)  # as bench_delayed_labels
    order = label_order(late[0])
    assert sorted(order) == list(range(n))
    ordered = (instance_values(STREAM, X[order], [y[i] for i in order]), {})
    runs = {"plain": [], "late": [], "order": []}
    topics = [plain, late, ordered]
    with kafka(args.bootstrap) as bootstrap:
        run_side_by_side(bootstrap, topics, n)  # compile, and the broker's first topics
        for _ in range(args.pairs):
            for name, rates in zip(runs, run_side_by_side(bootstrap, topics, n)):
                runs[name].append(rates)
                print(name, [f"{v:,.0f}" for v in rates[:2]], flush=True)

    def ratios(over: str, under: str, k: int) -> list[float]:
        return [b[k] / a[k] for a, b in zip(runs[under], runs[over])]

    wall, cpu = ratios("late", "plain", 0), ratios("late", "plain", 1)

    def median(name: str, k: int) -> str:
        return f"{statistics.median(r[k] for r in runs[name]):,.0f}"

    def seconds(name: str, k: int) -> float:
        return statistics.median(r[k] for r in runs[name])

    kind = "integer labels" if args.int_labels else "string labels"
    text = "\n".join([
        f"# Late labels end to end: a worker per topic, {STREAM} ({n:,} instances, {kind}), the "
        "worker's defaults", "",
        f"Every label with its instance ({n:,} records) against every other label "
        f"{DELAY:,} instances late as a LabelEvent ({len(late[0]):,} records); instances "
        f"committed per second of the worker's steps after a warm-up of a tenth of the stream, "
        f"{args.pairs} runs of the three workers side by side, a poll of the one behind at a "
        "time (medians; the ratio is the median of the runs' ratios).", "",
        "| | every label with its instance | half the labels 1,000 instances late | ratio "
        "(median) | runs' ratios |", "|---|---|---|---|---|",
        f"| instances per second (wall) | {median('plain', 0)} | {median('late', 0)} | "
        f"{statistics.median(wall):.2f} | {min(wall):.2f}-{max(wall):.2f} |",
        f"| instances per CPU-second of the worker's thread | {median('plain', 1)} | "
        f"{median('late', 1)} | {statistics.median(cpu):.2f} | {min(cpu):.2f}-{max(cpu):.2f} |",
        "", "What the order of the labels costs by itself: the same rows fully labelled in "
        "the order their labels come in the late topic (every record an instance), per "
        "CPU-second of the worker's thread, against the topic of every label with its "
        "instance (the median of the runs' ratios, and their range).", "",
        "| | instances per CPU-second | against every label with its instance | the late "
        "topic against it |", "|---|---|---|---|",
        f"| every label with its instance, in the order of the late topic's labels | "
        f"{median('order', 1)} | {_spread(ratios('order', 'plain', 1))} | "
        f"{_spread(ratios('late', 'order', 1))} |",
        "", f"Where the worker's thread spends it: CPU seconds per {n:,} instances (of the "
        "steps after the warm-up; medians of the runs) in the stream pipeline (learners, held "
        "store, join, planning) and in the rest of the step (consuming, merging, decoding, "
        "encoding, producing, checkpoints).", "",
        "| | every label with its instance | half the labels 1,000 instances late | late - "
        "every label |", "|---|---|---|---|",
        *[f"| {what} | {a:.3f} | {b:.3f} | {b - a:+.3f} |" for what, a, b in (
            ("the whole step", seconds("plain", 2), seconds("late", 2)),
            ("the pipeline", seconds("plain", 3), seconds("late", 3)),
            ("the rest of the step", seconds("plain", 2) - seconds("plain", 3),
             seconds("late", 2) - seconds("late", 3)))],
        "", "The same for the rows in the order of the late topic's labels: whole step "
        f"{seconds('order', 2):.3f}, pipeline {seconds('order', 3):.3f}, rest of the step "
        f"{seconds('order', 2) - seconds('order', 3):.3f}.",
    ]) + "\n"
    print(text)
    name = "late_labels_worker_int.md" if args.int_labels else "late_labels_worker.md"
    write_results(Path(__file__).parent / "results" / name, text)


def _spread(values: list[float]) -> str:
    """``median (min-max)`` of ratios."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


if __name__ == "__main__":
    main()
