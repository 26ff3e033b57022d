"""What JSON predictions cost the worker: encoding per row, msgpack against JSON, and its share
of the worker's per-row CPU in process.

Run: ``python tests/benchmarks/service/bench_output_format.py [--repeats N] [--streams K ...]
[--pipeline NAME ...] [--labels KIND ...] [--rows N]``; writes ``results/output_format.md``.

Electricity (45,312 rows, 7 features, packaged) as msgpack Instance records, in polls of the
worker's consume batch (2,000 records; with ``--streams K`` the rows are cut into K streams of
consecutive rows, each poll holding an equal share of every stream). Its labels as they are
(``text``: ``UP``/``DOWN``) or as integers (``int``: 0/1); the worker decodes both in bulk
(about 1 µs per row; results files older than commit caa60c4 show text labels decoded record
by record, whose dearer decode made JSON's share smaller). Each poll goes through
the worker's own steps in process, no broker: decode (:class:`worker.intake.RecordDecoder`),
learn (:func:`worker.step.learn_streams`), then encode the same results twice, with the
msgpack and the JSON :class:`worker.output.OutputEncoder` (predictions, drift alerts and
rankings; in alternating order from poll to poll, so neither meets warmer caches). CPU time
(``time.process_time``) of each step over the timed polls (the first two are a warm-up:
compiled kernels loaded, pipelines created), per row:

* ``encode`` for each format, and the difference;
* the worker's in-process cost per row (decode + learn + encode) and rows per CPU-second with
  each format, and the difference's share of it. The worker's end-to-end cost per row is
  higher (Kafka clients, transactions: ``results/worker.md``), so this share is an upper bound
  of JSON's share end to end;
* bytes per prediction record in each format (what the broker stores and sends).

Pipelines: the default (adaptive random forest of 10 trees, ADWIN, block-forest ranking) and the
lightest (one forgetful tree, ADWIN, no ranking), the worst case for JSON's share.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from confluent_kafka import Message  # noqa: E402

from tests.benchmarks.common import write_results  # noqa: E402
from worker.intake import Caps, RecordDecoder  # noqa: E402
from worker.metrics import WorkerMetrics  # noqa: E402
from worker.output import Outbox, OutputEncoder  # noqa: E402
from worker.settings import OUTPUT_KINDS, OutputSettings, load_settings, stream_profiles  # noqa: E402
from worker.step import learn_streams  # noqa: E402
from worker.task import PartitionTask  # noqa: E402
from worker.tools.dev.datasets import load  # noqa: E402
from worker.tools.dev.produce import instance_values  # noqa: E402

PIPELINES = {
    "default": {},
    "lightest": {"STREAMFOREST_LEARNERS__PREDICTOR": "forgetful_tree",
                 "STREAMFOREST_LEARNERS__RANKERS": "none"},
}
FORMATS = ("msgpack", "json")
WARM_POLLS = 2
TOPIC = "sf.instances"


def polls(n_rows: int | None, n_streams: int, consume_batch: int, labels: str) -> list[list[Message]]:
    """Electricity as the worker's polls: msgpack Instance records of ``n_streams`` streams
    (consecutive rows each), every poll an equal share of each stream, offsets in order;
    ``labels`` ``text`` as in the data, ``int`` as 0/1."""
    data = load("electricity")
    X, y = data.X[:n_rows], data.y[:n_rows]
    if labels == "int":
        classes = sorted(set(y))
        y = [classes.index(v) for v in y]
    n = len(y) // n_streams
    values = {f"elec-{k}": instance_values(f"elec-{k}", X[k * n:(k + 1) * n], y[k * n:(k + 1) * n],
                                           start_id=k * n)
              for k in range(n_streams)}
    share = max(1, consume_batch // n_streams)
    out, offset = [], 0
    for a in range(0, n, share):
        msgs = []
        for stream, vals in values.items():
            for v in vals[a:a + share]:
                msgs.append(Message(topic=TOPIC, partition=0, offset=offset, key=stream.encode(),
                                    value=v))
                offset += 1
        out.append(msgs)
    return out


def encoders(settings) -> dict[str, OutputEncoder]:
    """One encoder per format, every output kind in it."""
    return {fmt: OutputEncoder(settings.topics, WorkerMetrics(), output=OutputSettings(
        **dict.fromkeys(OUTPUT_KINDS, fmt))) for fmt in FORMATS}


def one_pass(env: dict, batches: list[list[Message]]) -> dict:
    """CPU seconds of each step over the timed polls, rows, and prediction bytes per format."""
    settings = load_settings(env)
    decoder = RecordDecoder(stream_profiles(settings), Caps.from_settings(settings))
    encs = encoders(settings)
    task = PartitionTask("bench", TOPIC, 0, "sf.features")
    cpu = dict.fromkeys(("decode", "learn", *FORMATS), 0.0)
    size = dict.fromkeys(FORMATS, 0)
    rows = records = 0
    max_bytes = settings.worker.max_message_bytes
    for i, msgs in enumerate(batches):
        timed = i >= WARM_POLLS
        offsets = np.array([m.offset() for m in msgs], dtype=np.int64)
        c0 = time.process_time()
        streams = decoder.read_instances(task, msgs, offsets, Outbox("bench"), max_bytes)
        c1 = time.process_time()
        learned = learn_streams(task, streams)
        c2 = time.process_time()
        order = FORMATS if i % 2 == 0 else FORMATS[::-1]
        for fmt in order:
            outbox = Outbox("bench")
            t0 = time.process_time()
            for stream, pl, sr, lo, res in learned.results:
                encs[fmt].encode(task, stream, pl, res, sr, lo, outbox)
            t1 = time.process_time()
            if timed:
                cpu[fmt] += t1 - t0
                size[fmt] += sum(len(v) for topic, _k, vals, *_ in outbox.records
                                 if topic == settings.topics.predictions for v in vals)
        if timed:
            cpu["decode"] += c1 - c0
            cpu["learn"] += c2 - c1
            rows += learned.n_live
            records += len(msgs)
    assert rows == records, "every timed record is a live instance with one prediction"
    return {"cpu": cpu, "rows": rows, "bytes": size}


def measure(pipeline: str, n_streams: int, labels: str, repeats: int, n_rows: int | None) -> dict:
    env = dict(PIPELINES[pipeline])
    consume_batch = load_settings(env).worker.max_poll_records
    batches = polls(n_rows, n_streams, consume_batch, labels)
    runs = [one_pass(env, batches) for _ in range(repeats)]
    rows = runs[0]["rows"]

    def us(step: str) -> list[float]:
        return [1e6 * r["cpu"][step] / rows for r in runs]

    per = {step: us(step) for step in ("decode", "learn", *FORMATS)}
    base = [d + lrn for d, lrn in zip(per["decode"], per["learn"])]
    total = {fmt: [b + e for b, e in zip(base, per[fmt])] for fmt in FORMATS}
    extra = [j - m for j, m in zip(per["json"], per["msgpack"])]
    return {"pipeline": pipeline, "streams": n_streams, "labels": labels, "rows": rows,
            "repeats": repeats,
            "per_row_us": {k: statistics.median(v) for k, v in per.items()},
            "per_row_us_range": {k: (min(v), max(v)) for k, v in per.items()},
            "total_us": {fmt: statistics.median(v) for fmt, v in total.items()},
            "rows_per_cpu_s": {fmt: statistics.median(1e6 / t for t in v)
                               for fmt, v in total.items()},
            "json_extra_us": statistics.median(extra),
            "json_share": statistics.median(e / t for e, t in zip(extra, total["msgpack"])),
            "bytes_per_prediction": {fmt: runs[0]["bytes"][fmt] / rows for fmt in FORMATS}}


def table(results: list[dict]) -> str:
    head = ("| pipeline | streams | labels | rows timed | decode µs | learn µs | encode msgpack µs | "
            "encode JSON µs | JSON extra µs | rows/CPU-s msgpack | rows/CPU-s JSON | JSON's share "
            "of the worker's per-row CPU | bytes/prediction msgpack / JSON |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in results:
        p, rng = r["per_row_us"], r["per_row_us_range"]

        def cell(step, p=p, rng=rng):
            lo, hi = rng[step]
            return f"{p[step]:.2f} ({lo:.2f}-{hi:.2f})"

        lines.append(
            f"| {r['pipeline']} | {r['streams']} | {r['labels']} | {r['rows']:,} | {cell('decode')} | "
            f"{cell('learn')} | {cell('msgpack')} | {cell('json')} | {r['json_extra_us']:.2f} | "
            f"{r['rows_per_cpu_s']['msgpack']:,.0f} | {r['rows_per_cpu_s']['json']:,.0f} | "
            f"{100 * r['json_share']:.1f}% | {r['bytes_per_prediction']['msgpack']:.0f} / "
            f"{r['bytes_per_prediction']['json']:.0f} |")
    return head + "\n".join(lines) + "\n"


def summary(results: list[dict]) -> str:
    """JSON's share of the worker's per-row CPU, lowest to highest, per pipeline."""
    parts = []
    for pipeline in dict.fromkeys(r["pipeline"] for r in results):
        shares = [100 * r["json_share"] for r in results if r["pipeline"] == pipeline]
        extra = [r["json_extra_us"] for r in results if r["pipeline"] == pipeline]
        parts.append(f"{pipeline} pipeline {min(shares):.1f}-{max(shares):.1f}% "
                     f"(+{min(extra):.2f}-{max(extra):.2f} µs per row)")
    return ("JSON predictions cost the worker, of its CPU per row in process: " + "; ".join(parts)
            + ". End to end the worker also spends CPU on the Kafka clients and transactions "
            "(results/worker.md), so the share there is lower; JSON records are also larger "
            "(last column).\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="passes over the data per case")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 20],
                    help="streams the rows are cut into (one case each)")
    ap.add_argument("--pipeline", choices=list(PIPELINES), nargs="+", default=list(PIPELINES))
    ap.add_argument("--labels", choices=["text", "int"], nargs="+", default=["text", "int"],
                    help="Electricity's labels as text (UP/DOWN) or as integers (one case each)")
    ap.add_argument("--rows", type=int, default=None, help="first N rows only (a quick run)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "output_format.md"))
    args = ap.parse_args(argv)
    results = []
    for pipeline in args.pipeline:
        for k in args.streams:
            for labels in args.labels:
                r = measure(pipeline, k, labels, args.repeats, args.rows)
                results.append(r)
                print(f"{pipeline}, {k} stream(s), {labels} labels: encode msgpack "
                      f"{r['per_row_us']['msgpack']:.2f} µs, "
                      f"JSON {r['per_row_us']['json']:.2f} µs per row; worker in process "
                      f"{r['total_us']['msgpack']:.2f} / {r['total_us']['json']:.2f} µs per row; "
                      f"JSON's share {100 * r['json_share']:.1f}%", flush=True)
    text = ("# Output formats: what JSON predictions cost\n\n"
            "Per row, CPU µs, median over the passes (range in parentheses); the worker's steps in "
            "process on Electricity, no broker (see the script's docstring).\n\n" + table(results)
            + "\n" + summary(results))
    path = write_results(args.out, text)
    print(f"\n{table(results)}\n{summary(results)}\nwritten to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
