"""The streamforest worker: Kafka consumer-group member that runs per-stream learners."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("streamforest")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"
