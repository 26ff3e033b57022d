"""Structured logs: one JSON object per line on stderr.

Every record carries ``ts`` (ISO 8601, UTC), ``level``, ``logger`` and ``msg``; keyword
fields passed through ``extra={"fields": {...}}`` (or :func:`event`) are merged in, so log
pipelines can filter on ``partition``, ``stream``, ``offset`` ... without parsing text.
"""

from __future__ import annotations

import json
import logging
import sys
import time


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = time.gmtime(record.created)
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


def setup(level: str = "INFO", stream=None) -> None:
    """Route every ``streamforest.*`` logger (and the root) to JSON lines on ``stream``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())


def event(logger: logging.Logger, level: int, msg: str, **fields) -> None:
    """Log ``msg`` with structured ``fields``."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"fields": fields})
