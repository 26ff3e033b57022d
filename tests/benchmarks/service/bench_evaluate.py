"""Replay benchmark: ``streamforest evaluate`` throughput beside the same pipelines in process.

Run: ``python tests/benchmarks/service/bench_evaluate.py [--bootstrap HOST:PORT] [--rows N]``
(without ``--bootstrap`` it starts the local broker).

Four hyperplane streams (d = 10) are produced to a 2-partition topic. For each pipeline the
replay reads the whole topic with its own consumer, decodes, runs the pipelines and computes
the prequential metrics (``worker.tools.evaluate``, one configuration, no report plots); its
instances/s (rows over the whole run, reading included) is set beside the same pipelines'
prequential throughput in process on the same rows as arrays (no Kafka, no codec, no
metrics), in the same run. Target: a ratio of at least 0.9. Numba is warmed before timing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.benchmarks.common import kafka  # noqa: E402
from tests.benchmarks.service.bench_worker import env_for, in_process, make_streams, produce  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.tools.topics import create_topics  # noqa: E402

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
    from worker.tools.evaluate.cli import _evaluate

    out = Path(tempfile.mkdtemp(prefix="bench-evaluate-"))
    args = SimpleNamespace(topic=None, start="earliest", end="latest", streams=None,
                           configs=None, served=False, window=1000, every=500, out=str(out),
                           publish=None, no_progress=True)
    import worker.tools.evaluate.cli as cli

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
    print("\n| pipeline | instances | in-process inst/s | replay inst/s (reading included) | "
          "ratio | reading alone, records/s |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['pipeline']} | {r['instances']:,} | {r['in_process']:,.0f} | "
              f"{r['replay']:,.0f} | {r['ratio']:.2f} | {r['read_only']:,.0f} |")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
