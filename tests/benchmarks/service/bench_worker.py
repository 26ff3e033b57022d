"""Worker benchmark: end-to-end throughput beside in-process throughput, and restore times.

Run: ``python tests/benchmarks/service/bench_worker.py [--bootstrap HOST:PORT] [--quick]
[--only-throughput] [--only TEXT] [--consume-batch N] [--batch N]``
(without ``--bootstrap`` it starts the local broker). Prints three tables:

1. instances/s of one worker end to end (produced input -> committed predictions, exactly-once
   on, drift tracking on, rankings on where the pipeline has an importance tracker) beside
   the same pipelines' in-process prequential throughput on the same streams, and the ratio
   (target >= 0.7); target >= 100,000 instances/s for the lightest pipeline (one forgetful
   tree + ADWIN);
2. time to recover a partition after a crash (checkpoint read + replay up to the committed
   offset) as a function of the checkpoint interval;
3. time to restore a partition holding about 100 MB of state (target < 2 s).

With ``--batch N`` it prints one table instead: the lightest pipeline fed with InstanceBatch
records of N rows, with one Prediction per row and with one PredictionBatch per record
(``output.prediction_batches``), beside the same pipeline in process on chunks of N rows
(targets with N = 1,000: 1M instances/s end to end, ratio >= 0.7).

The full run (no ``--quick``, ``--only``, ``--only-throughput`` or ``--batch``) also measures
that table for records of 1,000 rows with 20 and 100 records per transaction, and writes all
four tables to ``--out`` (default ``tests/benchmarks/service/results/worker.md``) through
:func:`tests.benchmarks.common.write_results`; the other runs write theirs only with ``--out``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.benchmarks.common import kafka, write_results  # noqa: E402
from worker.app import Worker  # noqa: E402
from worker.pipeline import Pipeline, PipelineConfig  # noqa: E402
from worker.settings import load_settings, stream_profiles  # noqa: E402
from worker.tools.dev.produce import (  # noqa: E402
    BATCH_HEADERS,
    batch_values,
    instance_values,
    make_producer,
    produce_values,
)
from worker.tools.topics import create_topics  # noqa: E402

PIPELINES = {
    "forgetful_tree + ADWIN (lightest)": dict(LEARNERS__PREDICTOR="forgetful_tree",
                                               LEARNERS__RANKERS="none"),
    "forgetful_tree + ADWIN + ORF(10) ranking": dict(LEARNERS__PREDICTOR="forgetful_tree",
                                                     LEARNERS__RANKERS="online_random_forest"),
    "forgetful_forest(20) + ADWIN + ORF(10) ranking": dict(
        LEARNERS__PREDICTOR="forgetful_forest", LEARNERS__RANKERS="online_random_forest"),
    "default: adaptive_random_forest(10) + ADWIN + block_forest ranking": dict(),
    "hoeffding_tree + ADWIN": dict(LEARNERS__PREDICTOR="hoeffding_tree", LEARNERS__RANKERS="none"),
    "ABFS selector + hoeffding_tree + ADWIN": dict(
        LEARNERS__PREDICTOR="hoeffding_tree", LEARNERS__SELECTOR="abfs", LEARNERS__RANKERS="none"),
    # the default regression pipeline on 3-target streams
    "regression: iSOUP-SymRF(10) + block_forest_regression and symrf rankings + ADWIN": dict(),
}


RESULTS = REPO / "tests/benchmarks/service/results/worker.md"
BATCHED = (1000, (20, 100))  # the full run's batched table: rows per record, records per poll
CONSUME_BATCH = 5000  # messages per consume call and transaction (--consume-batch)
ONLY: list[str] = []  # --only: pipelines whose name contains one of these


def env_for(bootstrap: str, prefix: str, **over) -> dict:
    env = {
        "KAFKA__BOOTSTRAP_SERVERS": bootstrap, "KAFKA__GROUP_ID": f"{prefix}-g",
        "TOPICS__PARTITIONS": "2", "WORKER__METRICS_PORT": "0",
        "WORKER__MAX_POLL_RECORDS": str(CONSUME_BATCH),
        "WORKER__CONSUME_TIMEOUT_S": "0.05", "WORKER__MEMBER_NAME": f"{prefix}-m",
        "WORKER__LOG_LEVEL": "WARNING", "LEARNERS__RANKING_EVERY": "5000",
        "CHECKPOINT__EVERY_INSTANCES": "50000",
    }
    for t in ("instances", "features", "predictions", "drift", "rankings", "deadletter",
              "checkpoints", "latest"):
        env[f"TOPICS__{t.upper()}"] = f"{prefix}.{t}"
    env.update(over)
    return {"STREAMFOREST_" + k: v for k, v in env.items()}


def make_streams(n_streams: int, n_rows: int, d: int = 10, regression: bool = False):
    """Hyperplane classification streams, or 3-target regression streams on the same rows
    (targets: the hyperplane's score, a product of two features, a difference, with noise)."""
    from models.generators.hyperplane import RotatingHyperplane

    out = {}
    for k in range(n_streams):
        X, y, _ = RotatingHyperplane(n_features=d, n_drift_features=2, mag_change=0.001,
                                     seed=k).take(n_rows)
        if regression:
            noise = 0.05 * np.random.default_rng(k).standard_normal((n_rows, 3))
            Y = np.column_stack([X[:, :3].sum(1), X[:, 3] * X[:, 4], X[:, 5] - X[:, 6]]) + noise
            out[f"s{k}"] = (X, Y.tolist())
        else:
            out[f"s{k}"] = (X, [int(v) for v in y])
    return out


def produce(bootstrap: str, topic: str, streams: dict, chunk: int = 1000) -> int:
    p = make_producer(bootstrap)
    n = 0
    rows = max(len(y) for _, y in streams.values())
    for a in range(0, rows, chunk):
        for s, (X, y) in streams.items():
            n += produce_values(p, topic, s, instance_values(s, X[a:a + chunk], y[a:a + chunk],
                                                             start_id=a, ts0=a))
    p.flush(120)
    return n


def produce_batched(bootstrap: str, topic: str, streams: dict, size: int) -> int:
    """Every stream as InstanceBatch records of ``size`` rows, interleaved; returns rows."""
    p = make_producer(bootstrap)
    n = 0
    rows = max(len(y) for _, y in streams.values())
    for a in range(0, rows, size):
        for s, (X, y) in streams.items():
            vals = batch_values(s, X[a:a + size], y[a:a + size], size=size, start_id=a, ts0=a)
            produce_values(p, topic, s, vals, headers={0: BATCH_HEADERS})
            n += len(y[a:a + size])
    p.flush(120)
    return n


def table_batched(bootstrap: str, rows: int, size: int, records: int) -> list[dict]:
    """The lightest pipeline on InstanceBatch records of ``size`` rows (``records`` records per
    consume and transaction), per-row predictions and prediction batches."""
    over = PIPELINES["forgetful_tree + ADWIN (lightest)"]
    streams = make_streams(4, rows)
    out = []
    for label, batches_out in (("PredictionBatch per record", "true"),
                               ("Prediction per row", "false")):
        prefix = f"bb-{uuid.uuid4().hex[:6]}"
        settings = load_settings(env_for(bootstrap, prefix, WORKER__MAX_POLL_RECORDS=str(records),
                                         OUTPUT__PREDICTION_BATCHES=batches_out, **over))
        create_topics(settings)
        n = produce_batched(bootstrap, settings.topics.instances, streams, size)
        warm = max(rows // 10, 5 * settings.learners.batch_size)
        ips, e2es = {}, {}
        ip = in_process(settings, streams, chunk=size, warm=warm, stats=ips)
        e2e = end_to_end(settings, n, warm_fraction=warm / rows, stats=e2es)
        load = os.getloadavg()[0]
        out.append({"pipeline": f"lightest, batches of {size:,}, {label}", "records": records,
                    "output": label, "instances": n,
                    "in_process": ip, "end_to_end": e2e, "ratio": e2e / ip,
                    "in_process_cpu_us": ips.get("cpu_us", math.nan),
                    "end_to_end_cpu_us": e2es.get("cpu_us", math.nan),
                    "load": load})
        print(f"  {out[-1]['pipeline']}: {n} instances, in-process {ip:,.0f}/s "
              f"({out[-1]['in_process_cpu_us']:.2f} CPU us/instance), end-to-end {e2e:,.0f}/s "
              f"({out[-1]['end_to_end_cpu_us']:.2f} CPU us/instance in the worker process; ratio "
              f"{e2e / ip:.2f}, load average {load:.1f})", flush=True)
    return out


def in_process(settings, streams: dict, chunk: int, warm: int, stats: dict | None = None) -> float:
    """Prequential instances/s of the same pipelines, on arrays (no Kafka, no codec);
    ``stats["cpu_us"]``: CPU microseconds of this process per instance."""
    profiles = stream_profiles(settings)
    ps = {s: Pipeline(s, profiles.for_stream(s), X.shape[1]) for s, (X, _) in streams.items()}
    for s, (X, y) in streams.items():
        ps[s].process(X[:warm], y[:warm])
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    rows = max(len(y) for _, y in streams.values())
    for a in range(warm, rows, chunk):
        for s, (X, y) in streams.items():
            ps[s].process(np.ascontiguousarray(X[a:a + chunk]), y[a:a + chunk])
            n += len(y[a:a + chunk])
    if n == 0:
        return float("nan")  # the streams are no longer than the warm-up (--quick)
    if stats is not None:
        stats["cpu_us"] = 1e6 * (time.process_time() - c0) / n
    return n / (time.perf_counter() - t0)


def end_to_end(settings, n: int, warm_fraction: float = 0.1, stats: dict | None = None) -> float:
    """One in-process worker: instances/s from the end of warm-up to the last commit;
    ``stats["cpu_us"]``: CPU microseconds of the worker's process (librdkafka threads
    included, the broker not) per instance."""
    w = Worker(settings)
    w.start()
    try:
        def done():
            return w.metrics.registry.get_sample_value("streamforest_instances_total") or 0

        while done() < warm_fraction * n:
            w.step()
        c0, t0, p0 = done(), time.perf_counter(), time.process_time()
        while done() < n:
            w.step()
        w.settle()  # the last batch's commit may still be in flight
        if n - c0 < 0.5 * n:
            return float("nan")  # the timed part is too short to mean anything
        if stats is not None:
            stats["cpu_us"] = 1e6 * (time.process_time() - p0) / (n - c0)
        return (n - c0) / (time.perf_counter() - t0)
    finally:
        w.shutdown()


def table_throughput(bootstrap: str, rows: int) -> list[dict]:
    out = []
    for name, over in PIPELINES.items():
        if ONLY and not any(part in name for part in ONLY):
            continue
        n_rows = rows if "lightest" in name else rows // (2 if "tree" in name else 10)
        regression = name.startswith("regression")
        prefix = f"bw-{uuid.uuid4().hex[:6]}"
        settings = load_settings(env_for(bootstrap, prefix, **over))
        create_topics(settings)
        streams = make_streams(4, n_rows, regression=regression)
        n = produce(bootstrap, settings.topics.instances, streams)
        # warm-up: enough rows for several mini-batches (kernels compiled before timing)
        warm = max(n_rows // 10, 5 * settings.learners.batch_size)
        ip = in_process(settings, streams, chunk=1250, warm=warm)
        e2e = end_to_end(settings, n, warm_fraction=warm / n_rows)
        out.append({"pipeline": name, "instances": n, "in_process": ip, "end_to_end": e2e,
                    "ratio": e2e / ip, "load": os.getloadavg()[0]})
        print(f"  {name}: {n} instances, in-process {ip:,.0f}/s, end-to-end {e2e:,.0f}/s "
              f"(ratio {e2e / ip:.2f})", flush=True)
    return out


def table_recovery(bootstrap: str, rows: int, intervals=(2000, 10000, 50000)) -> list[dict]:
    """Crash after processing everything, recover with a new member: read + replay time."""
    out = []
    for every in intervals:
        prefix = f"br-{uuid.uuid4().hex[:6]}"
        env = env_for(bootstrap, prefix, LEARNERS__PREDICTOR="forgetful_tree",
                      CHECKPOINT__EVERY_INSTANCES=str(every), TOPICS__PARTITIONS="1",
                      CHECKPOINT__INTERVAL_S="3600", WORKER__MAX_POLL_RECORDS="1000")
        settings = load_settings(env)
        create_topics(settings)
        # a length that is no multiple of the intervals: the crash leaves input to replay
        streams = make_streams(2, rows // 2 - 250)
        n = produce(bootstrap, settings.topics.instances, streams)
        a = Worker(settings)
        a.start()
        while (a.metrics.registry.get_sample_value("streamforest_instances_total") or 0) < n:
            a.step()
        # crash: leave without the final checkpoint (state is dropped, nothing is written)
        a.tasks.clear()
        a.consumer.close()
        a.producer.raw.flush(30)
        a.reader.close()
        b = Worker(load_settings({**env, "STREAMFOREST_WORKER__MEMBER_NAME": prefix + "-b"}))
        b.start()
        t0 = time.perf_counter()
        while not (b.tasks and all(t.ready and t.restore_t0 is None for t in b.tasks.values())):
            b.step()
            if time.perf_counter() - t0 > 300:
                raise TimeoutError("recovery did not finish")
        task = next(iter(b.tasks.values()))
        read = b.metrics.registry.get_sample_value("streamforest_restore_seconds_sum")  # one restore
        total = b.metrics.registry.get_sample_value("streamforest_recovery_seconds_sum")
        replayed = int(b.metrics.registry.get_sample_value("streamforest_replayed_instances_total") or 0)
        b.shutdown()
        out.append({"checkpoint_every": every, "replayed": replayed,
                    "checkpoint_offset": task.manifest.offsets.get(settings.topics.instances), "read_s": read,
                    "recovery_s": total})
        print(f"  every {every}: replayed {replayed}, checkpoint read {read:.3f}s, "
              f"recovery {total:.3f}s", flush=True)
    return out


def table_big_state(bootstrap: str, target_mb: float = 100.0) -> dict:
    """Restore of a partition whose checkpoint holds ~target_mb of real pipeline states."""
    from schemas.checkpoint import StreamCheckpoint
    from worker import checkpoint_store as ckpt
    from worker.kafka_io import TransactionalProducer, make_consumer, make_reader
    from worker.recovery import restore_partition

    prefix = f"bb-{uuid.uuid4().hex[:6]}"
    settings = load_settings(env_for(bootstrap, prefix, TOPICS__PARTITIONS="1"))
    create_topics(settings)
    # the former default (20 forgetful trees, ORF-10 ranker): the state size this restore
    # benchmark has always measured
    cfg = PipelineConfig(predictor="forgetful_forest")
    X, y = make_streams(1, 20000)["s0"]
    p = Pipeline("big", cfg, X.shape[1])
    p.process(X, y)
    state = p.to_state()
    group, topic, feats = settings.kafka.group_id, settings.topics.instances, settings.topics.features

    def blob_of(stream: str) -> bytes:
        return ckpt.encode_blob(StreamCheckpoint(
            group=group, topics=[topic, feats], partition=0, stream=stream,
            config=cfg.as_dict(), offsets={topic: 0, feats: 0}, state={**state, "stream": stream},
            ts=0))

    blob = blob_of("big")
    k = max(1, math.ceil(target_mb * 1e6 / len(blob)))
    prod = TransactionalProducer(settings, f"{prefix}-writer")
    writer = ckpt.CheckpointWriter(prod, settings.topics.checkpoints,
                                   settings.checkpoint.max_message_bytes)
    prod.begin()
    blobs = {f"big-{i}": blob_of(f"big-{i}") for i in range(k)}
    writer.write(ckpt.empty_manifest(group, topic, 0, 0, feats, 0), blobs.items())
    prod.commit()
    total = sum(len(b) for b in blobs.values())
    consumer, reader = make_consumer(settings), make_reader(settings)
    times = []
    for _ in range(3):
        r = restore_partition(consumer, reader, group, topic, 0, settings.topics.checkpoints,
                              feats)
        assert len(r.pipelines) == k, r.refused
        times.append(r.seconds)
    consumer.close()
    reader.close()
    res = {"streams": k, "state_mb": total / 1e6, "blob_mb": len(blob) / 1e6,
           "restore_s": min(times), "restore_s_all": times}
    print(f"  {k} streams x {len(blob) / 1e6:.2f} MB = {total / 1e6:.1f} MB: restore "
          f"{min(times):.2f}s (runs: {', '.join(f'{t:.2f}' for t in times)})", flush=True)
    return res


def _print_throughput(thr: list[dict], batch: str | None = None) -> None:
    print(f"\n| pipeline | instances | in-process inst/s | end-to-end inst/s | ratio |"
          f"  ({batch or f'consume batch {CONSUME_BATCH:,}'})")
    print("|---|---|---|---|---|")
    for r in thr:
        print(f"| {r['pipeline']} | {r['instances']:,} | {r['in_process']:,.0f} | "
              f"{r['end_to_end']:,.0f} | {r['ratio']:.2f} |")


def _md_throughput(thr: list[dict], batch: str | None = None) -> list[str]:
    return [f"Consume batch: {batch or f'{CONSUME_BATCH:,} messages'} per consume call and "
            "transaction.", "",
            "| pipeline | instances | in-process inst/s | end-to-end inst/s | ratio | "
            "load average (1 min) |", "|---|---|---|---|---|---|",
            *[f"| {r['pipeline']} | {r['instances']:,} | {r['in_process']:,.0f} | "
              f"{r['end_to_end']:,.0f} | {r['ratio']:.2f} | {r.get('load', float('nan')):.1f} |"
              for r in thr]]


def _md_batched(thr: list[dict]) -> list[str]:
    return ["| records per transaction | output | instances | in-process inst/s | "
            "end-to-end inst/s | ratio | CPU us/instance: in process / worker | "
            "load average (1 min) |", "|---|---|---|---|---|---|---|---|",
            *[f"| {r['records']} | {r['output']} | {r['instances']:,} | {r['in_process']:,.0f} | "
              f"{r['end_to_end']:,.0f} | {r['ratio']:.2f} | {r['in_process_cpu_us']:.2f} / "
              f"{r['end_to_end_cpu_us']:.2f} | {r['load']:.1f} |" for r in thr]]


_INTRO = ("One worker (`worker.app.Worker` in this process), exactly-once on, drift tracking on, "
          "rankings on where the pipeline has an importance tracker, against a local broker "
          "on the same machine (started by the script unless `--bootstrap` is given), 2 "
          "partitions, 4 hyperplane streams (d = 10; the regression pipeline: 3 targets on the "
          "same rows). End to end = instances/s from produced input to committed predictions, "
          "after a warm-up of a tenth of the rows (at least 5 mini-batches); in process = the "
          "same pipelines' prequential throughput on the same rows as arrays (no Kafka, no "
          "codec). The broker, the worker and the benchmark share the machine's cores: the "
          "load average is the one-minute load when each row was measured.")


def report(rows: int, thr: list[dict], rec: list[dict], big: dict,
           batched: list[dict]) -> str:
    """The results file of a full run."""
    light = next((r for r in thr if "lightest" in r["pipeline"]), None)
    heavy = [r for r in thr if "lightest" not in r["pipeline"]]
    lines = ["# Worker end to end: throughput, recovery and restore", "", _INTRO, "",
             "## 1. Throughput per worker", "",
             f"{rows:,} rows per stream for the lightest pipeline, half for the other "
             "single-tree pipelines, a tenth for the forests and the regression pipeline. "
             "Targets: end to end at least 0.7 of in process; at least 100,000 instances/s for "
             "the lightest pipeline.", "", *_md_throughput(thr), ""]
    if light is not None:
        lines.append(f"Lightest pipeline: {light['end_to_end']:,.0f} instances/s end to end "
                     f"(target 100,000: {'met' if light['end_to_end'] >= 1e5 else 'not met'}), "
                     f"ratio {light['ratio']:.2f}.")
    if heavy:
        lines.append("")
        met = [r["pipeline"] for r in heavy if r["ratio"] >= 0.7]
        lines.append(f"Other pipelines at a ratio of 0.7 or more: {len(met)} of {len(heavy)}"
                     + (f" ({', '.join(met)})" if met else "") + ".")
    lines += ["", "## 2. Recovery after a crash against the checkpoint interval", "",
              "One partition, forgetful tree + ADWIN, 2 streams, consume batch 1,000: a "
              "member processes all the input and leaves without its final checkpoint; a "
              "new member restores the partition: it reads the last checkpoint and replays "
              "the input from its offset up to the committed one.",
              "", "| checkpoint every | instances replayed | checkpoint read s | recovery s |",
              "|---|---|---|---|",
              *[f"| {r['checkpoint_every']:,} | {r['replayed']:,} | {r['read_s']:.3f} | "
                f"{r['recovery_s']:.3f} |" for r in rec],
              "", "## 3. Restore of a partition holding about 100 MB of state", "",
              "Copies of one real pipeline state (`PipelineConfig(predictor=\"forgetful_forest\")` "
              "after 20,000 rows) written as the checkpoint of one partition, restored 3 times "
              "(target: under 2 s).", "",
              f"{big['streams']} streams x {big['blob_mb']:.2f} MB = {big['state_mb']:.1f} MB: "
              f"restore {big['restore_s']:.2f} s (best of 3; runs "
              + ", ".join(f"{t:.2f}" for t in big["restore_s_all"]) + " s; target "
              + ("met" if big["restore_s"] < 2 else "not met") + ")."]
    if batched:
        size = BATCHED[0]
        lines += ["", f"## 4. Batched instances: the lightest pipeline on InstanceBatch records "
                  f"of {size:,} rows", "",
                  f"The same 4 streams ({rows:,} rows each) as InstanceBatch records of "
                  f"{size:,} rows, K records per consume call and transaction, forgetful tree + "
                  "ADWIN (mini-batches of 100); output one PredictionBatch per record "
                  "(`output.prediction_batches`) or one Prediction per row; in process = the "
                  f"same pipelines fed chunks of {size:,} rows. CPU us/instance: CPU "
                  "microseconds of the process per instance (the worker's with its librdkafka "
                  "threads, not the broker's); they move less than the wall-clock rates on a "
                  "shared machine. Targets: 1M instances/s end to end, a ratio of at least "
                  "0.7.", "", *_md_batched(batched)]
        best = max(batched, key=lambda r: r["end_to_end"])
        lines += ["", f"Best end to end: {best['end_to_end']:,.0f} instances/s "
                  f"(K = {best['records']}, {best['output']}, ratio {best['ratio']:.2f}); "
                  f"1M/s {'met' if best['end_to_end'] >= 1e6 else 'not met'}."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--rows", type=int, default=100_000, help="rows per stream (4 streams)")
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--json", default=None, help="write the results to this file")
    ap.add_argument("--out", type=Path, default=None,
                    help="write the markdown results here (the full run's default: "
                         "tests/benchmarks/service/results/worker.md)")
    ap.add_argument("--consume-batch", type=int, default=CONSUME_BATCH,
                    help="worker.max_poll_records of the throughput table (one transaction each)")
    ap.add_argument("--only-throughput", action="store_true", help="table 1 only")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="table 1: only pipelines whose name contains TEXT (repeatable)")
    ap.add_argument("--batch", type=int, default=0, metavar="N",
                    help="only the lightest pipeline, fed InstanceBatch records of N rows")
    ap.add_argument("--batch-records", type=int, default=100, metavar="K",
                    help="with --batch: records per consume call and transaction")
    args = ap.parse_args(argv)
    globals()["CONSUME_BATCH"] = args.consume_batch
    globals()["ONLY"] = args.only
    rows = 5000 if args.quick else args.rows
    if args.batch > 0:
        with kafka(args.bootstrap) as bootstrap:
            print(f"throughput per worker, InstanceBatch records of {args.batch:,} rows "
                  f"({args.batch_records} records per transaction; 4 hyperplane streams, d=10, "
                  "2 partitions)")
            thr = table_batched(bootstrap, rows, args.batch, args.batch_records)
        _print_throughput(thr, f"{args.batch_records} records of {args.batch:,} rows per "
                          "consume and transaction")
        if args.out:
            write_results(args.out, "\n".join(
                [f"# Worker end to end: the lightest pipeline on InstanceBatch records of "
                 f"{args.batch:,} rows", "", _INTRO, "", *_md_batched(thr)]))
        if args.json:
            write_results(args.json, {"batched": thr})
        return 0
    with kafka(args.bootstrap) as bootstrap:
        print("1. throughput per worker (4 hyperplane streams, d=10, 2 partitions)")
        thr = table_throughput(bootstrap, rows)
        if args.only_throughput:
            _print_throughput(thr)
            if args.out:
                write_results(args.out, "\n".join(
                    ["# Worker end to end: throughput per worker", "", _INTRO, "",
                     *_md_throughput(thr)]))
            return 0
        print("2. recovery after a crash vs checkpoint interval (one partition, forgetful tree)")
        rec = table_recovery(bootstrap, 20_000 if args.quick else 200_000,
                             (1500, 7000) if args.quick else (1500, 7000, 35000, 150000))
        print("3. restore of a partition with ~100 MB of state")
        big = table_big_state(bootstrap, 10.0 if args.quick else 100.0)
        size, per_poll = BATCHED
        batched = []
        for records in per_poll:
            print(f"4. the lightest pipeline on InstanceBatch records of {size:,} rows, "
                  f"{records} per transaction")
            for r in table_batched(bootstrap, rows, size, records):
                batched.append({**r, "records": records})
    _print_throughput(thr)
    print("\n| checkpoint every | replayed | checkpoint read s | recovery s |")
    print("|---|---|---|---|")
    for r in rec:
        print(f"| {r['checkpoint_every']:,} | {r['replayed']:,} | {r['read_s']:.3f} | "
              f"{r['recovery_s']:.3f} |")
    print(f"\n100 MB restore: {big['streams']} streams, {big['state_mb']:.1f} MB, "
          f"{big['restore_s']:.2f} s")
    text = report(rows, thr, rec, big, batched)
    print("\n" + text)
    out = args.out or (None if args.quick or args.only else RESULTS)
    if out is not None:
        write_results(out, text)
    if args.json:
        write_results(args.json, {"throughput": thr, "recovery": rec, "big_state": big,
                                  "batched": batched})
    return 0


if __name__ == "__main__":
    sys.exit(main())
