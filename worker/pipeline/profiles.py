"""Which pipeline configuration a stream gets: per-stream profiles matched by glob patterns.

Profiles are an ordered list of ``(pattern, PipelineConfig)``; a stream id gets the
configuration of the first profile whose pattern matches it (:func:`fnmatch.fnmatchcase`:
``*``, ``?``, ``[seq]``, case-sensitive), and the default configuration when none does.

Examples
--------
>>> fast = PipelineConfig(predictor="forgetful_tree", profile="sensors")
>>> profiles = Profiles(PipelineConfig(), [("sensor-*", fast)])
>>> profiles.for_stream("sensor-7").predictor, profiles.for_stream("web").predictor
(('forgetful_tree',), ('adaptive_random_forest', 'isoup_symrf'))
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from .config import PipelineConfig

#: stream ids whose profile is remembered (beyond it, the patterns are matched again)
MAX_CACHED = 100_000
_GLOB = frozenset("*?[")


class Profiles:
    """The default configuration and the ordered profiles (see the module doc)."""

    def __init__(self, default: PipelineConfig,
                 rules: Sequence[tuple[str, PipelineConfig]] = ()):
        self.default = default
        self.rules = [(str(p), c) for p, c in rules]
        self._cache: dict[str, PipelineConfig] = {}

    def for_stream(self, stream: str) -> PipelineConfig:
        cfg = self._cache.get(stream)
        if cfg is None:
            cfg = next((c for p, c in self.rules if fnmatchcase(stream, p)), self.default)
            if len(self._cache) < MAX_CACHED:
                self._cache[stream] = cfg
        return cfg

    def configs(self) -> list[PipelineConfig]:
        """Every configuration a stream can get (the default first)."""
        return [self.default] + [c for _, c in self.rules]


def pattern_problems(patterns: Sequence[str], max_length: int) -> list[tuple[int, str]]:
    """Patterns that can match no valid stream id, or none that an earlier one leaves.

    Returns ``[(index, what to fix)]``. A stream id is 1 to ``max_length`` characters.

    Examples
    --------
    >>> pattern_problems(["*", "sensor-*", ""], 1024)  # doctest: +NORMALIZE_WHITESPACE
    [(1, "never used: profile 0's pattern '*' matches every stream id first"),
     (2, 'an empty pattern matches no stream id')]
    """
    problems = []
    for i, p in enumerate(patterns):
        literal = not (_GLOB & set(p))
        if not p:
            problems.append((i, "an empty pattern matches no stream id"))
        elif literal and len(p) > max_length:
            problems.append((i, f"matches no stream id: stream ids have at most {max_length} "
                                "characters"))
        else:
            for k, q in enumerate(patterns[:i]):
                if q == "*" or q == p or (literal and fnmatchcase(p, q)):
                    problems.append((i, f"never used: profile {k}'s pattern {q!r} matches "
                                        "every stream id first" if q == "*" else
                                        f"never used: profile {k}'s pattern {q!r} matches it "
                                        "first"))
                    break
    return problems
