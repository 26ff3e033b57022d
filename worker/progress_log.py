"""The worker's periodic throughput line (``worker.progress_log_s``): every interval, one INFO
log line with the instances processed over it, their rate, the streams held and the dead
letters, so a log alone shows a worker is making progress.

:class:`ThroughputLog` only keeps the previous totals and a clock reading: the loop asks
:meth:`ThroughputLog.due` each turn (one comparison) and reads the counters only when a line
is due.
"""

from __future__ import annotations


class ThroughputLog:
    """The fields of the throughput line, from cumulative counters and a clock.

    Parameters
    ----------
    interval_s : float
        Seconds between lines; 0 turns the line off.
    now : float
        The clock's reading at start (the first interval runs from it).
    """

    def __init__(self, interval_s: float, now: float):
        self.interval_s = interval_s
        self.last = now
        self.instances = 0.0
        self.dead_letters = 0.0

    def reset(self, now: float) -> None:
        """Start the next interval at ``now`` (the totals so far stay counted)."""
        self.last = now

    def due(self, now: float) -> bool:
        return self.interval_s > 0 and now - self.last >= self.interval_s

    def fields(self, now: float, instances: float, streams: int, dead_letters: float) -> dict:
        """The line's fields for the interval ending at ``now``, given the totals so far;
        starts the next interval."""
        seconds = max(now - self.last, 1e-9)
        done = instances - self.instances
        out = {
            "instances": int(done),
            "instances_per_s": round(done / seconds, 1),
            "interval_s": round(seconds, 1),
            "instances_total": int(instances),
            "streams": int(streams),
            "dead_letters": int(dead_letters - self.dead_letters),
            "dead_letters_total": int(dead_letters),
        }
        self.last, self.instances, self.dead_letters = now, instances, dead_letters
        return out


def counter_total(counter) -> float:
    """The sum of a Prometheus counter over all its labels."""
    return sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total"))
