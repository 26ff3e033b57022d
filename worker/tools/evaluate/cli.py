"""``streamforest evaluate``: replay a bounded range of a topic and report how well each
candidate configuration would have done on it, or (``--served``) how well the predictions the
workers published did.

It reads with a consumer of its own (``read_committed``, no group, no commits: the running
consumer group never notices), feeds every configuration from the same pass over the topic
(:mod:`worker.tools.evaluate.replay`), and writes a report directory (:mod:`worker.tools.evaluate.report`):
``report.json``, a self-contained ``report.html`` and the plots as PNG. With ``--publish
PREFIX`` the replay's predictions, alerts and rankings go to ``PREFIX.predictions``,
``PREFIX.drift`` and ``PREFIX.rankings`` in one transaction: ``read_committed`` readers see the
whole backfill or nothing.

Exit codes: 0 done; 2 a bad option, configuration file or range (an unknown topic, an empty
range, an end before the start), said on stderr; 1 the brokers failed us.
"""

from __future__ import annotations

import sys
import time
from fnmatch import fnmatchcase
from pathlib import Path
from types import SimpleNamespace

from confluent_kafka import KafkaException

from ...cli import UsageError
from ...settings import add_kafka_arguments
from .configs import ConfigFileError, load_all, running
from .ranges import RangeError, resolve

REPORT_VERSION = 1

# --help's text: plain words (the module doc above is reStructuredText for the API docs)
DESCRIPTION = (
    "Replay a bounded range of a topic through candidate configurations and report how well "
    "each would have done on it, or (--served) how well the predictions the workers "
    "published did. Reads with a consumer of its own (read_committed, no group, no commits: "
    "the running consumer group never notices) and writes a report directory: report.json, "
    "a self-contained report.html and the plots as PNG. With --publish PREFIX the replay's "
    "predictions, alerts and rankings go to PREFIX.predictions, PREFIX.drift and "
    "PREFIX.rankings in one transaction. Exit code 2 for a bad option, configuration file or "
    "range, 1 when the brokers fail.")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "evaluate", help="replay a range of a topic through candidate configurations (or read "
        "what was served) and write a report",
        description=DESCRIPTION)
    p.add_argument("--topic", default=None,
                   help="topic to read (default: the instances topic; with --served the "
                   "predictions topic); logical names such as 'instances' work too")
    p.add_argument("--start", default="earliest",
                   help="earliest (default), latest, an offset, an ISO date-time, @ms or a "
                   "time before now (now-15m, now-2h, now-1d)")
    p.add_argument("--end", default="latest", help="as --start (default: latest at start)")
    p.add_argument("--streams", default=None, metavar="GLOB",
                   help="only streams whose id matches (*, ?, [seq])")
    p.add_argument("--configs", default=[], metavar="FILE", action="append",
                   help="candidate configurations, TOML or JSON: a list of [[configuration]], or "
                   "a worker's configuration file (as run --config reads it), one candidate "
                   "named after the file; repeatable (default: the running settings)")
    p.add_argument("--served", action="store_true",
                   help="evaluate the predictions topic (what the workers served) instead")
    p.add_argument("--window", type=int, default=1000,
                   help="labelled rows of the sliding-window metrics (default 1000)")
    p.add_argument("--every", type=int, default=500,
                   help="labelled rows between two points of the metric history (default 500)")
    p.add_argument("--out", default="evaluation", help="report directory (default ./evaluation)")
    p.add_argument("--publish", default=None, metavar="PREFIX",
                   help="also write the replay's outputs to PREFIX.predictions, PREFIX.drift "
                   "and PREFIX.rankings (one configuration only), exactly once")
    p.add_argument("--label-delay", default=None, metavar="DELAY[,DELAY...]",
                   help="replay each label that much later, as a LabelEvent: N instances of "
                   "its stream or a duration (500ms, 30s, 2m) after its instance, or after "
                   "where a LabelEvent of the topic came; several, comma-separated, replay "
                   "each configuration once per delay")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress on stderr (a bar on a terminal, otherwise a line every 10 s)")
    add_kafka_arguments(p)
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    from ...kafka_io import quiet_client_logs
    from ...logs import setup
    from ...settings import settings_or_exit

    settings = settings_or_exit(args)
    setup("WARNING", secrets=settings.secret_values())
    quiet_client_logs()  # a failure is one line, not librdkafka's retries
    try:
        return _evaluate(args, settings)
    except (ConfigFileError, RangeError) as exc:
        raise UsageError(str(exc)) from None
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        raise RuntimeError(f"Kafka failed: {err.str() if hasattr(err, 'str') else err}") from None


def _check_options(args) -> None:
    if args.window < 1 or args.every < 1:
        raise UsageError("--window and --every must be at least 1")
    if args.served and (args.configs or args.publish or args.label_delay):
        raise UsageError("--served reads what was served: it takes neither --configs, "
                         "--publish nor --label-delay")


def _delays(args) -> list:
    """The ``--label-delay`` values (``[None]``: labels as they came)."""
    from .delays import LabelDelay

    if not args.label_delay:
        return [None]
    try:
        return [LabelDelay.parse(t) for t in args.label_delay.split(",")]
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _topic(args, settings) -> str:
    return settings.topics.named(args.topic or ("predictions" if args.served else "instances"))


def _evaluate(args, settings) -> int:
    from ...kafka_io import make_reader
    from ...preflight import metadata

    _check_options(args)
    configs = [] if args.served else (load_all(args.configs, settings) if args.configs
                                      else running(settings))
    delays = _delays(args)
    if args.publish and len(configs) * len(delays) != 1:
        raise UsageError(f"--publish writes one configuration's outputs; "
                         f"{', '.join(args.configs) or 'the running settings'} with "
                         f"{args.label_delay or 'no delay'} make {len(configs) * len(delays)}")
    configs = [(name if d is None else f"{name}, labels {d} late", profiles, d)
               for name, profiles in configs for d in delays]
    topic = _topic(args, settings)
    reader = make_reader(settings)
    try:
        metadata(reader, settings)  # no broker: one line and exit 1 once startup_timeout_s passed
        ranges = resolve(reader, topic, args.start, args.end)
        started = time.perf_counter()
        run = _run(args, settings, reader, topic, ranges, configs)
    finally:
        reader.close()
    report = _report(args, topic, ranges, run, time.perf_counter() - started)
    _write(args, report)
    return 0


def _run(args, settings, reader, topic, ranges, configs) -> SimpleNamespace:
    """One pass over the range, every candidate fed from it (see the module doc)."""
    from .reader import read_range
    from .replay import Candidate
    from .served import Served

    if args.served:
        late = _late_labels(args, settings, reader, topic, ranges)
        sinks = [Served(args.window, args.every, settings.worker.max_message_bytes, late)]
    else:
        sinks = [Candidate(name, profiles, settings, topic, args.window, args.every, delay)
                 for name, profiles, delay in configs]
    backfill = _Backfill(settings, args.publish, topic, len(ranges)) if args.publish else None
    n_read = n_kept = 0
    with _Progress(sum(len(r) for r in ranges), args.no_progress) as advance:
        try:
            for p, msgs, offs in read_range(reader, topic, ranges, on_progress=advance):
                n_read += len(msgs)
                if args.streams:
                    msgs, offs = _only_streams(msgs, offs, args.streams)
                    if not msgs:
                        continue
                n_kept += len(msgs)
                for sink in sinks:
                    if backfill:  # one configuration: its outbox holds what a worker publishes
                        backfill.send(sink.feed(p, msgs, offs, backfill.encoder).records)
                    else:
                        sink.feed(p, msgs, offs)
            _nothing_read(args, topic, n_read, n_kept)
        except BaseException:
            if backfill:
                backfill.abort()
            raise
    if args.served:
        sinks[0].finish()
    if backfill:
        backfill.commit()
    return SimpleNamespace(sinks=sinks, n_read=n_read)


def _nothing_read(args, topic: str, n_read: int, n_kept: int) -> None:
    """Raise :class:`RangeError` when the range held no record to evaluate: only the
    markers of transactions (offsets, never records), or no record of ``--streams``."""
    if not n_read:
        raise RangeError(f"no record of {topic} lies between {args.start} and {args.end} "
                         "(the offsets there are transaction markers or aborted records)")
    if not n_kept:
        raise RangeError(f"no record of {topic} between {args.start} and {args.end} is of a "
                         f"stream matching --streams {args.streams!r}")


def _late_labels(args, settings, reader, topic, ranges):
    """The factory of the served evaluation's late labels (see
    :mod:`worker.tools.evaluate.late`), or None when every prediction carries its label."""
    from functools import partial

    from ...intake import Caps
    from ...kafka_io import make_reader
    from .late import LateLabels, survey
    from .reader import read_range

    batches = read_range(reader, topic, ranges)
    if args.streams:
        batches = ((p, *_only_streams(msgs, offs, args.streams)) for p, msgs, offs in batches)
    spans, unlabelled = survey(batches, settings.worker.max_message_bytes)
    if not unlabelled:
        return None
    caps = Caps.from_settings(settings)
    return partial(LateLabels, make_reader(settings), spans, held_rows=caps.held_rows,
                   held_age_ms=caps.held_age_ms, max_bytes=settings.worker.max_message_bytes,
                   limits=caps.instance, timeout_s=settings.worker.startup_timeout_s)


def _only_streams(msgs, offs, pattern: str):
    keep = [i for i, m in enumerate(msgs)
            if m.key() is not None and fnmatchcase(m.key().decode("utf-8", "replace"), pattern)]
    return [msgs[i] for i in keep], offs[keep]


class _Progress:
    """Progress on stderr (rows, rows/s): a rich progress bar (with time left) on a terminal,
    otherwise a plain line every ``every_s`` seconds (:class:`_PlainProgress`); nothing with
    --no-progress. Used as a context manager yielding ``advance(n)``."""

    def __init__(self, total: int, disabled: bool, stream=None, every_s: float = 10.0,
                 clock=time.perf_counter):
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.disabled = total, disabled
        self.plain = not disabled and not _isatty(self.stream)
        self.every_s, self.clock = every_s, clock

    def __enter__(self):
        if self.disabled:
            return lambda n: None
        if self.plain:
            self.lines = _PlainProgress(self.total, self.stream, self.every_s, self.clock)
            return self.lines.advance
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(),
                            TaskProgressColumn(), TextColumn("{task.fields[rate]}"),
                            TimeRemainingColumn(), console=Console(file=self.stream))
        self.bar.start()
        self.task = self.bar.add_task("rows", total=self.total, rate="")
        self.t0 = time.perf_counter()
        self.done = 0

        def advance(n: int) -> None:
            self.done += n
            rate = self.done / max(time.perf_counter() - self.t0, 1e-9)
            self.bar.update(self.task, advance=n, rate=f"{rate:,.0f} rows/s")

        return advance

    def __exit__(self, *exc) -> None:
        if self.disabled:
            return
        if self.plain:
            if exc[0] is None:
                self.lines.finish()
        else:
            self.bar.stop()


class _PlainProgress:
    """``evaluate: 120,000/1,000,000 rows (12.0%), 9,870 rows/s`` on ``stream`` every
    ``every_s`` seconds of ``clock`` (rows/s over the whole run so far), and once at the end."""

    def __init__(self, total: int, stream, every_s: float, clock):
        self.total, self.stream, self.every_s, self.clock = total, stream, every_s, clock
        self.t0 = self.last = clock()
        self.done = 0

    def advance(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            self._line(now)

    def finish(self) -> None:
        self._line(self.clock())

    def _line(self, now: float) -> None:
        rate = self.done / max(now - self.t0, 1e-9)
        share = f" ({100.0 * self.done / self.total:.1f}%)" if self.total else ""
        print(f"evaluate: {self.done:,}/{self.total:,} rows{share}, {rate:,.0f} rows/s",
              file=self.stream, flush=True)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Backfill:
    """The replay's outputs under a prefix, in one transaction (see the module doc)."""

    def __init__(self, settings, prefix: str, topic: str, partitions: int):
        from ...kafka_io import TransactionalProducer
        from ...metrics import WorkerMetrics
        from ...output import OutputEncoder

        names = SimpleNamespace(predictions=f"{prefix}.predictions", drift=f"{prefix}.drift",
                                rankings=f"{prefix}.rankings")
        _create(settings, [names.predictions, names.drift, names.rankings], partitions)
        # a backfill is one transaction: allow it the broker's longest (15 min by default)
        extra = {"transaction.timeout.ms": "900000", **settings.kafka.extra}
        long = settings.model_copy(update={"kafka": settings.kafka.model_copy(
            update={"extra": extra})})
        self.producer = TransactionalProducer(long, f"streamforest-evaluate-{prefix}",
                                              timeout_s=60.0)
        # the formats of the workers' outputs (settings.output), so their readers read both
        self.encoder = OutputEncoder(names, WorkerMetrics(), output=settings.output)
        self.producer.begin()

    def send(self, outputs: list) -> None:
        if outputs:
            self.producer.produce_many(outputs, self.encoder.headers)

    def commit(self) -> None:
        self.producer.commit()
        self.producer.close()

    def abort(self) -> None:
        try:
            self.producer.abort()
        finally:
            self.producer.close()


def _create(settings, names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from ...kafka_io import admin_config

    admin = AdminClient(admin_config(settings))
    have = admin.list_topics(timeout=30).topics
    todo = [NewTopic(n, partitions, settings.topics.replication_factor)
            for n in names if n not in have]
    for fut in (admin.create_topics(todo).values() if todo else ()):
        fut.result(timeout=30)


def _report(args, topic, ranges, run, seconds: float) -> dict:
    sinks = run.sinks
    labels = None
    if args.served:
        configurations = sinks[0].configurations()
        malformed = dict(sinks[0].malformed)
        labels = sinks[0].labels()
    else:
        configurations = [s.report() for s in sinks]
        malformed = dict(sinks[0].refused) if sinks else {}
    return {
        "version": REPORT_VERSION, "mode": "served" if args.served else "replay",
        "source": {"topic": topic, "start": args.start, "end": args.end,
                   "streams": args.streams,
                   "partitions": {str(r.partition): [r.start, r.end] for r in ranges}},
        "records": {"read": run.n_read, "decoded": run.n_read - sum(malformed.values()),
                    "malformed": dict(sorted(malformed.items()))},
        "configurations": configurations,
        "late_labels": labels,
        "published": args.publish,
        "timings": {"seconds": seconds},
    }


def _write(args, report: dict) -> None:
    from .report import plots_available, write_report
    from .summary import print_summary

    paths = write_report(Path(args.out), report)
    print_summary(report)
    print(f"\nreport: {paths.get('html', Path(args.out) / 'report.html')}")
    if not plots_available():
        print("plots need matplotlib: pip install 'streamforest[report]'")
