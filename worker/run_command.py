"""``streamforest run``: one member of the worker group, as a process.

:func:`run` runs a :class:`worker.app.Worker` until SIGTERM or SIGINT and turns how it ended
into the process's exit status; :func:`add_parser` registers the command.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal

from .app import Worker
from .faults import Faults
from .logs import event
from .preflight import BrokersUnreachable, TopicProblem

log = logging.getLogger("streamforest.worker")


def run(settings, faults: Faults | None = None) -> int:
    """Run a worker until SIGTERM/SIGINT; the process exit status.

    0 after a requested stop; 2 when a topic is missing or unfit (the message says what to
    fix); 1 when the brokers cannot be reached at start or the worker failed (the open
    transaction was aborted and no checkpoint written: a restart resumes exactly).
    """
    worker = _stoppable_worker(settings, faults)
    try:
        worker.run()
    except TopicProblem as exc:
        event(log, logging.ERROR, f"cannot start: {exc}")
        return 2
    except BrokersUnreachable as exc:
        event(log, logging.ERROR, f"cannot start: {exc}")
        return 1
    except Exception as exc:  # noqa: BLE001 (the orchestrator restarts the member)
        event(log, logging.ERROR, "worker failed: open transaction aborted, no checkpoint "
              "written; restart it to resume from the last committed checkpoint",
              error=f"{type(exc).__name__}: {exc}", exc_info=True)
        return 1
    return 0


def _stoppable_worker(settings, faults: Faults | None) -> Worker:
    """A new worker that SIGTERM and SIGINT stop; one that arrived while it was being made
    (its clients, its metrics server) stops it before it consumes anything."""
    early: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, _frame: early.append(s))
    worker = Worker(settings, faults)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, worker.request_stop)
    if early:
        worker.request_stop()
    return worker


def add_parser(subparsers) -> None:
    """Register ``streamforest run``."""
    from .settings import add_kafka_arguments

    p = subparsers.add_parser(
        "run", help="run a worker (configured by STREAMFOREST_* env)",
        description="Run one member of the worker group: consume the instances and features "
        "topics, learn every stream test-then-train and publish predictions, drift alerts, "
        "rankings and dead letters (exactly once unless worker.exactly_once is off) until "
        "SIGTERM or Ctrl-C. Configured by STREAMFOREST_* variables (streamforest config "
        "shows them) and -b/-X; logs are JSON lines on "
        "stderr, librdkafka's own included. Exit code 0 after a requested stop, 1 when the "
        "brokers cannot be reached or the worker failed (restart it: it resumes from its last "
        "checkpoint), 2 for invalid settings or missing topics, 143 for a SIGTERM before "
        "the worker was made (during the imports: nothing had started).")
    # test-only fault injection (tests/integration): not part of the command's interface
    p.add_argument("--test-fault", default=None, help=argparse.SUPPRESS)
    add_kafka_arguments(p)
    p.set_defaults(func=_cmd_run)


def _cmd_run(args) -> int:
    from .logs import setup
    from .settings import settings_or_exit

    settings = settings_or_exit(args)
    setup(settings.worker.log_level, secrets=settings.secret_values())
    # `kill -USR1 <pid>` prints every thread's stack to stderr: what a stuck member is waiting on
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return run(settings, Faults(args.test_fault))
