"""Many streams per worker: state per stream, passivation under a budget, restore, on a real broker.

Part 1 (in process): memory and checkpoint bytes of one stream's pipeline, for the default
pipeline and each registered predictor, on a 10-feature hyperplane stream of 2,000 rows.

Part 2 (a local broker started from the jars, or ``--bootstrap``): ``N`` streams of ``--rows``
rows each, interleaved row by row, through one worker process (``python -m worker run``,
default learners) with a state budget (``--budget-mb``), for each ``N`` of ``--streams``:

* peak RSS of the worker process (``VmHWM``), and the streams resident and passivated at the
  end (its metrics);
* instances/s from the first to the last processed instance, beside the same rows sent as
  one stream through the same worker (``--no-one-stream`` skips it);
* checkpoint bytes per committed instance: as the worker writes them (every record value of
  the checkpoints topic, as a consumer reads it) and as the broker stores them (the topic's log
  segments, the producer's lz4 batches; with a local broker only);
* restore time of each partition by a second worker after the first one stopped (its
  ``partition restored`` log events), with the streams each partition holds.

``--levels 1,0 --pairs 3`` runs each streams count under each ``checkpoint.compression_level``
in turn, three rounds, and compares the levels' medians (0, the default, leaves compression to
the producer's lz4 batches; 1 is zlib in the worker's thread).

Usage::

    python tests/benchmarks/service/bench_streams.py                      # 100, 1000, 10000 streams
    python tests/benchmarks/service/bench_streams.py --streams 100 --rows 200 --no-one-stream  # quick
    python tests/benchmarks/service/bench_streams.py --streams 1000,3000 --no-one-stream \
        --levels 1,0 --pairs 3 --out tests/benchmarks/service/results/streams_compression.md
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from schemas.codec import encode_state  # noqa: E402
from tests.benchmarks.common import kafka, stored_bytes, write_results  # noqa: E402
from worker.settings import load_settings  # noqa: E402
from worker.tools.dev.broker import free_port  # noqa: E402
from worker.tools.dev.produce import instance_values, make_producer  # noqa: E402
from worker.tools.topics import create_topics  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "streams.md"


# -- part 1: one stream's state ----------------------------------------------------------------

def state_sizes(rows: int = 2000) -> list[dict]:
    """Bytes in memory and in a checkpoint of one stream, per predictor (default rankers)."""
    from models import registry
    from models.generators.hyperplane import RotatingHyperplane
    from worker.pipeline import Pipeline, PipelineConfig

    X, y, _ = RotatingHyperplane(n_features=10, mag_change=0.001, seed=1).take(rows)
    labels = [int(v) for v in y]
    configs = {"default (adaptive_random_forest + block_forest + adwin)": PipelineConfig()}
    for name in registry.names("predictor", "classification"):
        spec = registry.get(name)
        if not spec.arrivals and name != registry.DEFAULT_PREDICTORS[0]:
            configs[f"{name} + block_forest + adwin"] = PipelineConfig(predictor=name)
    out = []
    for label, cfg in configs.items():
        p = Pipeline("s", cfg, 10)
        for a in range(0, rows, 100):
            p.process(X[a:a + 100], labels[a:a + 100])
        packed = encode_state(p.to_state())
        out.append({"pipeline": label, "memory_mb": p.nbytes / 1e6,
                    "msgpack_mb": len(packed) / 1e6,
                    "checkpoint_mb": len(zlib.compress(packed, 1)) / 1e6})
    return out


# -- part 2: a worker process on a real broker -------------------------------------------------

def env_for(bootstrap: str, prefix: str, metrics_port: int, budget_mb: float,
            partitions: int, level: int | None = None) -> dict:
    """A worker's environment: ``level`` sets ``checkpoint.compression_level`` (``None``: the
    default)."""
    env = dict(os.environ)
    over = {
        "KAFKA__BOOTSTRAP_SERVERS": bootstrap, "KAFKA__GROUP_ID": f"{prefix}-g",
        "TOPICS__PARTITIONS": str(partitions), "WORKER__METRICS_PORT": str(metrics_port),
        "WORKER__MAX_POLL_RECORDS": "2000", "WORKER__LOG_LEVEL": "INFO",
        "WORKER__STATE_BUDGET_MB": str(budget_mb), "WORKER__MEMBER_NAME": f"{prefix}-m",
    }
    for t in ("instances", "features", "predictions", "drift", "rankings", "deadletter",
              "checkpoints", "latest"):
        over[f"TOPICS__{t.upper()}"] = f"{prefix}.{t}"
    if level is not None:
        over["CHECKPOINT__COMPRESSION_LEVEL"] = str(level)
    env.update({"STREAMFOREST_" + k: v for k, v in over.items()})
    return env


def make_rows(n_streams: int, rows: int, d: int = 10):
    """One hyperplane stream of ``n_streams * rows`` rows, cut into streams: stream ``k`` takes
    rows ``k, k + n_streams, ...`` (interleaved as they are produced)."""
    from models.generators.hyperplane import RotatingHyperplane

    X, y, _ = RotatingHyperplane(n_features=d, mag_change=0.001, seed=7).take(n_streams * rows)
    return X, [int(v) for v in y]


def produce_interleaved(bootstrap: str, topic: str, X, y, n_streams: int) -> int:
    """Row ``i`` goes to stream ``i % n_streams`` (one stream when ``n_streams`` is 1)."""
    p = make_producer(bootstrap)
    names = [f"s{k}" for k in range(n_streams)]
    values: list = [None] * len(y)
    for k, s in enumerate(names):  # each stream's values, then sent in input order
        rows = slice(k, None, n_streams)
        values[rows] = instance_values(s, X[rows], y[rows], start_id=0, ts0=0)
    for i, v in enumerate(values):
        while True:
            try:
                p.produce(topic, v, key=names[i % n_streams].encode())
                break
            except BufferError:
                p.poll(0.1)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(300)
    return len(values)


def metrics(port: int) -> dict[str, float]:
    """The worker's Prometheus samples by name (labels dropped, values summed)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        name = name.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
    return out


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_worker(env: dict, port: int, n: int, log: Path, timeout_s: float) -> dict:
    """A worker process until it processed ``n`` instances; then SIGTERM (final checkpoint)."""
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], env=env, cwd=ROOT,
                                stdout=fh, stderr=subprocess.STDOUT)
    t_first = t_last = None
    deadline = time.monotonic() + timeout_s
    last = {}
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                last = metrics(port)
            except OSError:
                time.sleep(0.5)
                continue
            done = last.get("streamforest_instances_total", 0.0)
            now = time.monotonic()
            if done > 0 and t_first is None:
                t_first, n_first = now, done
            if done >= n:
                t_last = now
                break
            time.sleep(0.25)
        if t_last is None:
            raise TimeoutError(f"{n} instances not processed within {timeout_s} s")
        rss = peak_rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    return {"seconds": t_last - t_first, "per_second": (n - n_first) / (t_last - t_first),
            "peak_rss_mb": rss, "metrics": last}


def topic_bytes(bootstrap: str, topic: str) -> int:
    """Bytes of every record value on ``topic`` (all partitions, committed or not)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bs-{uuid.uuid4().hex[:6]}",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    total, eof = 0, set()
    while len(eof) < len(parts):
        for m in c.consume(5000, 1.0):
            if m.error():
                eof.add(m.partition())
            elif m.value() is not None:
                total += len(m.value())
    c.close()
    return total


def restore_times(log: Path) -> list[tuple[int, int, float]]:
    """``(streams, passivated, seconds)`` of each ``partition restored`` event of a log."""
    out = []
    for line in log.read_text().splitlines():
        if '"partition restored"' in line:
            e = json.loads(line)
            out.append((int(e["streams"]), int(e.get("passivated", 0)), float(e["seconds"])))
    return out


def one_run(bootstrap: str, n_streams: int, rows: int, budget_mb: float, partitions: int,
            one_stream: bool, logs: Path, level: int | None = None) -> dict:
    X, y = make_rows(n_streams, rows)
    n = len(y)
    prefix = f"bs{n_streams}-{uuid.uuid4().hex[:6]}"
    port = free_port()
    env = env_for(bootstrap, prefix, port, budget_mb, partitions, level)
    settings = load_settings({k: v for k, v in env.items() if k.startswith("STREAMFOREST_")})
    create_topics(settings)
    t0 = time.perf_counter()
    produce_interleaved(bootstrap, settings.topics.instances, X, y, n_streams)
    print(f"  produced {n:,} instances of {n_streams} streams in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    first = run_worker(env, port, n, logs / f"{prefix}-a.log", timeout_s=7200)
    m = first["metrics"]
    ckpt = topic_bytes(bootstrap, settings.topics.checkpoints)
    stored = stored_bytes(bootstrap, settings.topics.checkpoints)
    # a second member restores every partition from the checkpoints the first one wrote
    env_b = dict(env, STREAMFOREST_WORKER__MEMBER_NAME=f"{prefix}-b")
    port_b = free_port()
    env_b["STREAMFOREST_WORKER__METRICS_PORT"] = str(port_b)
    log_b = logs / f"{prefix}-b.log"
    with open(log_b, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], env=env_b, cwd=ROOT,
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 1800
        while len(restore_times(log_b)) < partitions and time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(log_b.read_text()[-2000:])
            time.sleep(0.5)
        restores = restore_times(log_b)
        rss_b = peak_rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    row = {"streams": n_streams, "rows": rows, "instances": n, "budget_mb": budget_mb,
           "level": settings.checkpoint.compression_level,
           "per_second": first["per_second"], "seconds": first["seconds"],
           "peak_rss_mb": first["peak_rss_mb"],
           "resident": m.get("streamforest_streams", 0.0),
           "passivated": m.get("streamforest_streams_passivated", 0.0),
           "passivations": m.get("streamforest_passivations_total", 0.0),
           "restored_on_demand": m.get("streamforest_streams_restored_total", 0.0),
           "state_mb": m.get("streamforest_state_bytes", 0.0) / 1e6,
           "checkpoint_bytes_per_instance": ckpt / n,
           "checkpoint_stored_per_instance": None if stored is None else stored / n,
           "restores": restores, "restore_peak_rss_mb": rss_b}
    if one_stream:
        prefix1 = f"bs1-{uuid.uuid4().hex[:6]}"
        port1 = free_port()
        env1 = env_for(bootstrap, prefix1, port1, budget_mb, partitions, level)
        settings1 = load_settings({k: v for k, v in env1.items()
                                   if k.startswith("STREAMFOREST_")})
        create_topics(settings1)
        produce_interleaved(bootstrap, settings1.topics.instances, X, y, 1)
        single = run_worker(env1, port1, n, logs / f"{prefix1}.log", timeout_s=7200)
        row["one_stream_per_second"] = single["per_second"]
        row["one_stream_peak_rss_mb"] = single["peak_rss_mb"]
    print("  " + json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                             for k, v in row.items()}), flush=True)
    return row


def report(sizes: list[dict], runs: list[dict], args, wall: float) -> str:
    lines = ["# Many streams per worker", "",
             f"Wall time: {wall / 60:.1f} min. Machine: 2 vCPUs shared with the broker.", "",
             "## One stream's state (10 features, 2,000 rows, in process)", "",
             "| pipeline | memory (MB) | msgpack (MB) | checkpoint, zlib 1 (MB) |",
             "|---|---|---|---|"]
    for r in sizes:
        lines.append(f"| {r['pipeline']} | {r['memory_mb']:.3f} | {r['msgpack_mb']:.3f} | "
                     f"{r['checkpoint_mb']:.3f} |")
    lines += ["", "Targets (default pipeline): at most 1 MB of memory and 0.5 MB of checkpoint.", ""]
    if runs:
        lines += [f"## Streams through one worker (default learners, {args.partitions} partitions, "
                  f"rows interleaved stream by stream)", "",
                  "| streams x rows | checkpoint zlib level | budget (MB) | instances/s | "
                  "same rows as one stream (/s) | "
                  "peak RSS (MB) | resident / passivated at the end | passivations | "
                  "restored on demand | checkpoint bytes / instance: written, stored | "
                  "restore per partition "
                  "(streams, s) | restoring worker's peak RSS (MB) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in runs:
            one = r.get("one_stream_per_second")
            kept = r.get("checkpoint_stored_per_instance")
            restores = ", ".join(f"{s + p} ({p} passivated): {sec:.1f}"
                                 for s, p, sec in r["restores"])
            lines.append(
                f"| {r['streams']:,} x {r['rows']} | {r['level']} | {r['budget_mb']:g} | "
                f"{r['per_second']:,.0f} | {'-' if one is None else f'{one:,.0f}'} | "
                f"{r['peak_rss_mb']:,.0f} | {r['resident']:,.0f} / {r['passivated']:,.0f} | "
                f"{r['passivations']:,.0f} | {r['restored_on_demand']:,.0f} | "
                f"{r['checkpoint_bytes_per_instance']:,.0f}, "
                f"{'-' if kept is None else f'{kept:,.0f}'} | {restores} | "
                f"{r['restore_peak_rss_mb']:,.0f} |")
    lines += compared(runs)
    return "\n".join(lines) + "\n"


def compared(runs: list[dict]) -> list[str]:
    """Medians per streams count and checkpoint level when the runs have several levels, and
    each level's instances/s against the first level's (medians of the runs)."""
    levels = list(dict.fromkeys(r["level"] for r in runs))
    if len(levels) < 2:
        return []
    lines = ["", "## Checkpoint compression compared (medians of the runs)", "",
             "| streams | checkpoint zlib level | runs | instances/s | against level "
             f"{levels[0]} | checkpoint bytes / instance: written, stored | restore per "
             "partition (s) | peak RSS (MB) |", "|---|---|---|---|---|---|---|---|"]
    for n in dict.fromkeys(r["streams"] for r in runs):
        base = None
        for level in levels:
            mine = [r for r in runs if r["streams"] == n and r["level"] == level]
            rate = statistics.median(r["per_second"] for r in mine)
            base = base or rate
            kept = [r["checkpoint_stored_per_instance"] for r in mine
                    if r["checkpoint_stored_per_instance"] is not None]
            lines.append(
                f"| {n:,} | {level} | {len(mine)} | {rate:,.0f} | {rate / base:.2f} | "
                f"{statistics.median(r['checkpoint_bytes_per_instance'] for r in mine):,.0f}, "
                f"{f'{statistics.median(kept):,.0f}' if kept else '-'} | "
                f"{statistics.median(s for r in mine for _n, _p, s in r['restores']):.2f} | "
                f"{statistics.median(r['peak_rss_mb'] for r in mine):,.0f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--streams", default="100,1000,10000")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--budget-mb", type=float, default=2048.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--no-one-stream", action="store_true")
    ap.add_argument("--no-broker", action="store_true", help="part 1 only")
    ap.add_argument("--levels", default=None, metavar="L,L",
                    help="checkpoint.compression_level of the workers, each in turn for every "
                    "streams count (default: the settings' default alone)")
    ap.add_argument("--pairs", type=int, default=1, help="rounds of the levels, alternated")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    levels = [int(v) for v in args.levels.split(",")] if args.levels else [None]
    t0 = time.perf_counter()
    sizes = state_sizes()
    for r in sizes:
        print(f"  {r['pipeline']}: {r['memory_mb']:.3f} MB in memory, "
              f"{r['checkpoint_mb']:.3f} MB checkpoint", flush=True)
    runs = []
    if not args.no_broker:
        logs = Path(os.environ.get("TMPDIR", "/tmp")) / "bench_streams_logs"
        logs.mkdir(exist_ok=True)
        with kafka(args.bootstrap) as bootstrap:
            for n_streams in (int(v) for v in args.streams.split(",")):
                for _ in range(args.pairs):
                    for level in levels:
                        runs.append(one_run(bootstrap, n_streams, args.rows, args.budget_mb,
                                            args.partitions, not args.no_one_stream, logs,
                                            level))
    text = report(sizes, runs, args, time.perf_counter() - t0)
    write_results(args.out, text)
    write_results(args.out.with_suffix(".json"), {"sizes": sizes, "runs": runs})
    print(text)


if __name__ == "__main__":
    main()
