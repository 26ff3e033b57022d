"""Experiment: would running the learners in a second process lift the lightest pipeline?

Run: ``python tests/benchmarks/experiments/experiment_child_process.py --bootstrap HOST:PORT [--runs 2]``

The worker's lightest pipeline (one forgetful tree + ADWIN) is bound by its main thread: the
Kafka client calls, the codec and the learners take turns on it. This script measures the
design that would overlap them without the GIL in the way: the worker keeps consuming,
decoding, encoding and committing, while a child process (``spawn``) runs the pipelines, one
batch in flight (batch N+1 is learned while batch N is encoded, produced and committed).

It is a measurement, not a worker: the child's pipelines are never checkpointed, so crashes and
rebalances are not handled. Runs alternate between the plain :class:`worker.app.Worker` and
the child-process variant on fresh topics with the same streams, and print end-to-end
instances/s, the CPU of both processes and the child's learning time per row after warm-up
(against the in-process throughput of the same pipelines in this process).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

import bench_worker as bw  # noqa: E402
from confluent_kafka import TopicPartition  # noqa: E402

from worker.app import Worker, _send_and_commit  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.topics import create_topics  # noqa: E402

LIGHTEST = bw.PIPELINES["forgetful_tree + ADWIN (lightest)"]
WARM_BATCHES = 10  # the child's first batches load the compiled kernels


def child_main(conn) -> None:
    """Learn what the parent sends, answer with the results in order; at ``None``, the timings."""
    from worker.pipeline import Pipeline

    inbox: queue.Queue = queue.Queue()

    def receive() -> None:  # a reader thread: the parent may send N+1 before reading N
        while True:
            try:
                inbox.put(conn.recv())
            except EOFError:  # the parent died
                inbox.put(None)
                return

    threading.Thread(target=receive, daemon=True).start()
    pipelines: dict = {}
    per_batch: list[tuple[float, int]] = []
    cpu0 = time.process_time()
    while (msg := inbox.get()) is not None:
        t = time.perf_counter()
        profiles, jobs = msg
        out = []
        for key, n_features, names, X, ys, offs, live in jobs:
            pl = pipelines.get(key)
            if pl is None:
                pl = pipelines[key] = Pipeline(key[1], profiles.for_stream(key[1]), n_features,
                                               names)
            if live > 0:
                pl.process(X[:live], ys[:live], offs[:live], emit=False)
            out.append(pl.process(X[live:], ys[live:], offs[live:]) if live < len(ys) else None)
        per_batch.append((time.perf_counter() - t, sum(len(j[4]) for j in jobs)))
        conn.send(out)
    late = per_batch[WARM_BATCHES:]
    rows = sum(n for _, n in late)
    conn.send({"cpu_s": time.process_time() - cpu0,
               "us_per_row": 1e6 * sum(s for s, _ in late) / rows if rows else float("nan")})


class ChildProcessWorker(Worker):
    """The worker with its pipelines in a child process, one batch in flight (see module doc)."""

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, theirs = ctx.Pipe()
        self._child = ctx.Process(target=child_main, args=(theirs,), daemon=True)
        self._child.start()
        self._inflight = None
        super().start()

    def _process_batch(self, msgs) -> None:
        t0 = time.perf_counter()
        per_part = self._by_partition(msgs)
        if not per_part:
            return
        dead, jobs, metas, n_live = [], [], [], 0
        for p, (pm, pos) in per_part.items():
            task = self.tasks[p]
            streams = self.decoder.decode(task, pm, pos, dead,
                                          self.settings.worker.max_message_bytes)
            for stream, sr in streams.items():
                pl = task.pipelines[stream]  # metadata only: the child holds the learners
                sr.finish(pl.n_features)
                jobs.append(((p, stream), pl.n_features, pl.feature_names, sr.X, sr.ys,
                             sr.offsets, sr.live))
                metas.append((task, stream, pl, sr))
                n_live += len(sr) - sr.live
            task.position = int(pos[-1]) + 1
        self._conn.send((self.profiles, jobs))
        self._finish_inflight()
        offsets = [TopicPartition(self.topics.instances, p, self.tasks[p].position)
                   for p in per_part]
        self._inflight = (metas, dead, offsets, t0, n_live)

    def _finish_inflight(self) -> None:
        if self._inflight is None:
            return
        metas, dead, offsets, t0, n_live = self._inflight
        self._inflight = None
        outputs: list = []
        for (task, stream, pl, sr), res in zip(metas, self._conn.recv()):
            if res is not None:
                self.encoder.encode(task, stream, pl, res, sr, sr.live, outputs, dead)
        self.metrics.instances_in.inc(n_live)
        self._settle()
        self.producer.begin()
        self.producer.produce_many(outputs)
        for key, value, headers, _reason in dead:
            self.producer.produce(self.topics.deadletter, value, key, headers=headers)
        metadata = self.consumer.consumer_group_metadata()
        future = self._committer().submit(_send_and_commit, self.producer, offsets, metadata)
        self._pending = (future, offsets, t0)

    def _idle_checkpoints(self) -> None:
        self._finish_inflight()
        self._settle()

    def settle(self) -> None:
        self._guarded(self._finish_inflight)
        super().settle()


def run_once(bootstrap: str, streams: dict, n_rows: int, child: bool) -> dict:
    prefix = f"xc-{uuid.uuid4().hex[:6]}"
    settings = load_settings(bw.env_for(bootstrap, prefix, **LIGHTEST))
    create_topics(settings)
    n = bw.produce(bootstrap, settings.topics.instances, streams)
    cls = ChildProcessWorker if child else Worker
    w = cls(settings)
    w.start()
    cpu0 = time.process_time()
    try:
        def done() -> int:
            return w.metrics.registry.get_sample_value("streamforest_instances_total") or 0

        while done() < 0.1 * n:
            w.step()
        c0, t0 = done(), time.perf_counter()
        while done() < n:
            w.step()
        w.settle()
        wall = time.perf_counter() - t0
        result = {"e2e": (n - c0) / wall, "parent_cores": (time.process_time() - cpu0) / wall}
    finally:
        w.shutdown()
    if child:
        w._conn.send(None)  # the end: the child answers with its timings
        result.update(w._conn.recv())
        w._conn.close()
        w._child.join(10)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--rows", type=int, default=100_000, help="rows per stream (4 streams)")
    ap.add_argument("--runs", type=int, default=2, help="alternating pairs of runs")
    args = ap.parse_args(argv)
    streams = bw.make_streams(4, args.rows)
    settings = load_settings(bw.env_for(args.bootstrap, "xc-ip", **LIGHTEST))
    ip = bw.in_process(settings, streams, chunk=1250, warm=args.rows // 10)
    print(f"in-process: {ip:,.0f} inst/s ({1e6 / ip:.1f} us per row)")
    for _ in range(args.runs):
        for child in (False, True):
            r = run_once(args.bootstrap, streams, args.rows, child)
            extra = (f", child learns {r['us_per_row']:.1f} us per row"
                     if "us_per_row" in r else "")
            print(f"{'child process' if child else 'plain worker '}: {r['e2e']:,.0f} inst/s "
                  f"(ratio {r['e2e'] / ip:.2f}), worker process {r['parent_cores']:.2f} cores"
                  f"{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
