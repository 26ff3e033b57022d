"""The ``streamforest`` command line.

Each subcommand lives in the module that implements it; this file only wires them up, so
``streamforest --help`` stays fast (no numba import until a command needs it). A module
contributes a subcommand with ``add_parser(subparsers)``, which registers its arguments and
sets ``func`` to a callable taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from . import __version__

# subcommand modules, in the order they appear in --help
_COMMAND_MODULES = (
    "worker.settings", "worker.tools.catalog", "worker.tools.topics", "worker.tools.tail",
    "worker.app", "worker.tools.warmup", "worker.tools.evaluate.cli",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
