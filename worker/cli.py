"""The ``streamforest`` command line.

Each subcommand lives in the module that implements it; this file only wires them up, so
``streamforest --help`` stays fast (no numba import until a command needs it). A module
contributes a subcommand with ``add_parser(subparsers)``, which registers its arguments and
sets ``func`` to a callable taking the parsed arguments and returning an exit code.

Exit codes, for every command (:func:`main` is the one place that turns an error into them,
so no command ends with a traceback):

* 0: done; also when the reader of stdout went away early (``streamforest learners --json |
  head``): what it wanted was written, and ``set -o pipefail`` pipelines do not fail for it;
* 1: a runtime failure (no broker answered, Kafka refused a request, a bug), said in one line
  on stderr, secrets masked;
* 2: a usage error (a bad argument, an unknown name, a missing file, invalid settings), said
  on stderr;
* 130: interrupted (Ctrl-C);
* 143: stopped by SIGTERM before the command installed its own handler (``run`` does, and
  then ends with 0 after the stop); a command that ends quietly on Ctrl-C (``tail -f``) ends
  quietly on SIGTERM too;
* other codes are a command's own (``broker status``: 3 when the broker does not answer).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import sys
import threading

from . import __version__

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command ends as on Ctrl-C (its ``finally`` blocks close what it
    opened, ``tail -f`` ends quietly), with exit code 143 where nothing handles it."""


def _terminate(signum, frame) -> None:
    raise Terminated


class UsageError(Exception):
    """A command was given something it cannot use (exit code 2): the message says what."""

# subcommand modules, in the order they appear in --help
_COMMAND_MODULES = (
    "worker.settings", "worker.tools.catalog", "worker.tools.contract_schemas",
    "worker.tools.topics", "worker.tools.tail",
    "worker.run_command", "worker.tools.warmup", "worker.tools.evaluate.cli",
)
# development tools (the local broker, producers, the demo): registered when the package
# ships them; the worker image leaves worker.tools.dev out
_DEV_COMMAND_MODULES = ("worker.tools.dev.broker", "worker.tools.dev.produce",
                        "worker.tools.dev.demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamforest",
        description="Online tree-ensemble learners over Kafka streams: predictions, "
        "feature rankings and drift alerts.",
    )
    parser.add_argument("--version", action="version", version=f"streamforest {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = list(_COMMAND_MODULES)
    if importlib.util.find_spec("worker.tools.dev") is not None:
        modules += _DEV_COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).add_parser(sub)
    _name_commands(parser)
    return parser


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Every command knows its full name (``streamforest broker check``), for its messages."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(command_name=sub.prog)
                _name_commands(sub)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; the exit code of the module doc."""
    previous = _handle_sigterm()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        return run_command(args)
    except Terminated:
        return EXIT_TERMINATED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _handle_sigterm():
    """Turn SIGTERM into :class:`Terminated` from here on; the handler it replaced.

    Installed before the commands' imports (a second or two with numpy and numba): the
    default action would end the process as well, except where it is PID 1, in a container,
    where the kernel drops a signal that has no handler: a ``podman stop`` or a pod's
    deletion in a worker's first second was lost, and the member went on to join the group
    until the SIGKILL came. ``None`` outside the main thread, where Python cannot install
    handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminate)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command; every error becomes one message on stderr and its exit code."""
    prog = getattr(args, "command_name", None) or f"streamforest {args.command}"
    secrets = _secrets(args)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except Terminated:
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except UsageError as exc:
        _say(prog, str(exc), secrets)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 (every failure ends in one line, not a traceback)
        _say(prog, describe(exc), secrets + _secrets(None))
        return EXIT_USAGE if _bad_client_config(exc) else EXIT_FAILED


def describe(exc: BaseException) -> str:
    """One line about a failure: a Kafka error's own text, the message of errors meant to be
    read (RuntimeError, OSError), else the type and the message (an unexpected error)."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException):
        err = exc.args[0] if exc.args else None
        text = err.str() if isinstance(err, KafkaError) else str(exc)
        if _bad_client_config(exc):
            return f"invalid Kafka client configuration (-X or STREAMFOREST_KAFKA__*): {text}"
        return f"Kafka: {text}"
    if isinstance(exc, RuntimeError | OSError) and str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _bad_client_config(exc: BaseException) -> bool:
    """A client refused its configuration (an unknown property, a bad value): a usage error."""
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError._INVALID_ARG


def _secrets(args: argparse.Namespace | None) -> list[str]:
    """Values never to print: those of secret ``-X`` properties of ``args``, or (``None``)
    the secrets of the settings the command loaded."""
    from .settings import is_secret_key, loaded_secrets

    if args is None:
        return loaded_secrets()
    return [v for k, v in getattr(args, "kafka_properties", None) or () if is_secret_key(k) and v]


def _say(prog: str, message: str, secrets: list[str]) -> None:
    """``prog: message`` on stderr, ``secrets`` masked (a client library's error can quote a
    property's value)."""
    from .settings import MASK

    for secret in sorted(set(secrets), key=len, reverse=True):
        message = message.replace(secret, MASK)
    print(f"{prog}: {message}", file=sys.stderr)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush does not report the closed
    pipe again (the Python documentation's advice for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
