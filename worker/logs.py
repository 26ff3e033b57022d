"""Structured logs: one JSON object per line on stderr.

Every record carries ``ts`` (ISO 8601, UTC), ``level``, ``logger`` and ``msg``; keyword
fields passed through ``extra={"fields": {...}}`` (or :func:`event`) are merged in, so log
pipelines can filter on ``partition``, ``stream``, ``offset`` ... without parsing text.

Secrets of the configuration never reach a log line: :func:`setup` takes them and every
line is redacted (an error text from a client library could quote a property's value).
"""

from __future__ import annotations

import json
import logging
import sys
import time

MASK = "**********"


class JsonFormatter(logging.Formatter):
    """One JSON object per record; ``secrets`` are replaced by ``**********`` wherever they
    appear."""

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()):
        super().__init__()
        # longest first, so a secret that contains another is masked whole
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        line = self._json(record)
        for secret in self.secrets:
            line = line.replace(secret, MASK).replace(json.dumps(secret)[1:-1], MASK)
        return line

    def _json(self, record: logging.LogRecord) -> str:
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


def setup(level: str = "INFO", stream=None, secrets=()) -> None:
    """Route every ``streamforest.*`` logger (and the root) to JSON lines on ``stream``,
    with ``secrets`` redacted."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(secrets))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())


def event(logger: logging.Logger, level: int, msg: str, **fields) -> None:
    """Log ``msg`` with structured ``fields``."""
    if logger.isEnabledFor(level):
        exc_info = fields.pop("exc_info", None)  # a traceback goes to the record, not the fields
        logger.log(level, msg, exc_info=exc_info, extra={"fields": fields})
