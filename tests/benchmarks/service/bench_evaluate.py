"""Replay benchmark: ``streamforest evaluate`` throughput beside the same pipelines in process.

Run: ``python tests/benchmarks/service/bench_evaluate.py [--bootstrap HOST:PORT] [--rows N]``
(without ``--bootstrap`` it starts the local broker).

Four hyperplane streams (d = 10) are produced to a 2-partition topic. For each pipeline the
replay reads the whole topic with its own consumer, decodes, runs the pipelines and computes
the prequential metrics (``worker.tools.evaluate``, one configuration, no report plots); its
instances/s (rows over the whole run, reading included) is set beside the same pipelines'
prequential throughput in process on the same rows as arrays (no Kafka, no codec, no
metrics), in the same run. Target: a ratio of at least 0.9. Numba is warmed before timing.
Prints the table and writes it to ``--out`` (default
``tests/benchmarks/service/results/evaluate.md``) through
:func:`tests.benchmarks.common.write_results`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.benchmarks.common import kafka, write_results  # noqa: E402
from tests.benchmarks.service.bench_worker import env_for, in_process, make_streams, produce  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.tools.topics import create_topics  # noqa: E402

RESULTS = REPO / "tests/benchmarks/service/results/evaluate.md"
TARGET = 0.9

PIPELINES = {
    "forgetful_tree + ADWIN (lightest)": dict(LEARNERS__PREDICTOR="forgetful_tree",
                                               LEARNERS__RANKERS="none"),
    "forgetful_tree + ADWIN + ORF(10) ranking": dict(LEARNERS__PREDICTOR="forgetful_tree",
                                                     LEARNERS__RANKERS="online_random_forest"),
    "forgetful_forest(20) + ADWIN + ORF(10) ranking": dict(
        LEARNERS__PREDICTOR="forgetful_forest", LEARNERS__RANKERS="online_random_forest"),
    "default: adaptive_random_forest(10) + ADWIN + block_forest ranking": dict(),
}


def replay(settings) -> tuple[float, dict]:
    """Instances/s of one evaluate run over the whole topic (wall clock), and its report."""
    import worker.tools.evaluate.cli as cli
    from worker.tools.evaluate.cli import _evaluate

    out = Path(tempfile.mkdtemp(prefix="bench-evaluate-"))
    # the command's own parser: every option at its default (one configuration, the running
    # settings), but the report directory and no progress bar
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["evaluate", "--out", str(out), "--no-progress"])

    written = {}
    cli._write = lambda a, report: written.update(report=report)  # time the replay, not plots
    t0 = time.perf_counter()
    assert _evaluate(args, settings) == 0
    seconds = time.perf_counter() - t0
    report = written["report"]
    n = report["configurations"][0]["throughput"]["instances"]
    return n / seconds, report


def read_only(settings) -> float:
    """Records/s of the replay's reader alone (consume and split, nothing decoded)."""
    from worker.kafka_io import make_reader
    from worker.tools.evaluate.ranges import resolve
    from worker.tools.evaluate.reader import read_range

    reader = make_reader(settings)
    topic = settings.topics.instances
    try:
        ranges = resolve(reader, topic, "earliest", "latest")
        t0 = time.perf_counter()
        n = sum(len(msgs) for _, msgs, _ in read_range(reader, topic, ranges))
        return n / (time.perf_counter() - t0)
    finally:
        reader.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--rows", type=int, default=50_000, help="rows per stream (4 streams)")
    ap.add_argument("--only", default=None, help="only pipelines whose name contains this")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    results = []
    with kafka(args.bootstrap) as bootstrap:
        streams = make_streams(4, args.rows)
        for name, over in PIPELINES.items():
            if args.only and args.only not in name:
                continue
            prefix = f"bench-ev-{uuid.uuid4().hex[:6]}"
            env = env_for(bootstrap, prefix, **{k: v for k, v in over.items()})
            settings = load_settings(env)
            create_topics(settings)
            n = produce(bootstrap, settings.topics.instances, streams)
            local = in_process(settings, streams, chunk=5000, warm=2000)  # warms numba too
            rate, report = replay(settings)
            reading = read_only(settings)
            results.append({"pipeline": name, "instances": n, "in_process": local,
                            "replay": rate, "ratio": rate / local, "read_only": reading,
                            "sink_rate": report["configurations"][0]["throughput"]["per_second"]})
            print(f"  {name}: in process {local:,.0f}/s, replay {rate:,.0f}/s "
                  f"(ratio {rate / local:.2f})", flush=True)
    text = results_text(results, args.rows)
    print(text)
    print(json.dumps(results))
    write_results(args.out, text)
    return 0


def results_text(results: list[dict], rows: int) -> str:
    """The results file: the method, the table and what it shows."""
    lines = [
        "# streamforest evaluate: replay throughput beside the same pipelines in process", "",
        f"Four hyperplane streams (d = 10), {rows:,} rows each, on a 2-partition topic of a "
        "local broker running on the same machine; numba warmed by the in-process run first. "
        "\"Replay\" is rows over the whole `streamforest evaluate` run with one configuration: "
        "reading with its own `read_committed` consumer, decoding, the pipelines, the "
        "prequential metrics (the report's plots are not timed). \"In process\" is the same "
        "pipelines' prequential throughput on arrays (no Kafka, no codec, no metrics). "
        "\"Reading alone\" is the replay's reader with nothing behind it. "
        f"Target: a ratio of at least {TARGET}.", "",
        "| pipeline | instances | in-process inst/s | replay inst/s (reading included) | "
        "ratio | reading alone, records/s |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['pipeline']} | {r['instances']:,} | {r['in_process']:,.0f} | "
                     f"{r['replay']:,.0f} | {r['ratio']:.2f} | {r['read_only']:,.0f} |")
    if results:
        met = [r["pipeline"] for r in results if r["ratio"] >= TARGET]
        read_us = [1e6 / r["read_only"] for r in results]
        lines += ["", f"Pipelines at or above the {TARGET} target: "
                  + (", ".join(met) if met else "none") + ". Per record, reading alone costs "
                  f"{min(read_us):.2f}-{max(read_us):.2f} us; the pipelines in process take "
                  + ", ".join(f"{1e6 / r['in_process']:.1f}" for r in results)
                  + " us per row (in the order of the table). The replay adds a cost per record "
                  "(reading, decoding, metrics) to the pipelines': the lighter the pipeline, the "
                  "larger its share."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
