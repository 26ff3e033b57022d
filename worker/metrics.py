"""Prometheus metrics, liveness and readiness over the standard library's ``http.server``.

``GET /metrics`` serves the text exposition format (version 0.0.4); ``GET /healthz`` answers
200 while the main loop has turned recently (a loop stuck longer than ``stale_s`` is not
alive); ``GET /readyz`` answers 200 once the worker has joined its group and every assigned
partition is restored. No third-party client library: counters, gauges and a fixed-bucket
histogram are a few lines each.
"""

from __future__ import annotations

import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _fmt_labels(names: tuple, values: tuple) -> str:
    if not names:
        return ""
    parts = []
    for n, v in zip(names, values):
        v = str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        parts.append(f'{n}="{v}"')
    return "{" + ",".join(parts) + "}"


def _fmt_value(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if float(v).is_integer():
        return str(int(v))
    return repr(float(v))


class _Metric:
    kind = "untyped"

    def __init__(self, registry: Registry, name: str, help: str, labels: tuple = ()):
        self.name, self.help, self.labelnames = name, help, tuple(labels)
        self._values: dict[tuple, float] = {}
        self._lock = registry.lock
        registry.metrics.append(self)

    def _key(self, labels: dict) -> tuple:
        return tuple(str(labels[n]) for n in self.labelnames)

    def samples(self):
        with self._lock:
            items = list(self._values.items())
        for key, v in items:
            yield self.name, self.labelnames, key, v


class Counter(_Metric):
    kind = "counter"

    def inc(self, amount: float = 1.0, **labels) -> None:
        k = self._key(labels)
        with self._lock:
            self._values[k] = self._values.get(k, 0.0) + amount


class Gauge(_Metric):
    kind = "gauge"

    def set(self, value: float, **labels) -> None:
        k = self._key(labels)
        with self._lock:
            self._values[k] = float(value)

    def remove(self, **labels) -> None:
        with self._lock:
            self._values.pop(self._key(labels), None)


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, registry, name, help, labels=(), buckets=_LATENCY_BUCKETS):
        super().__init__(registry, name, help, labels)
        self.buckets = tuple(buckets)

    def observe(self, value: float, **labels) -> None:
        k = self._key(labels)
        with self._lock:
            state = self._values.get(k)
            if state is None:
                state = self._values[k] = [0] * len(self.buckets) + [0, 0.0]
            for i, b in enumerate(self.buckets):
                if value <= b:
                    state[i] += 1
            state[-2] += 1
            state[-1] += value

    def samples(self):
        with self._lock:
            items = [(k, list(v)) for k, v in self._values.items()]
        for key, st in items:
            for i, b in enumerate(self.buckets):
                yield (self.name + "_bucket", self.labelnames + ("le",), key + (repr(b),), st[i])
            yield self.name + "_bucket", self.labelnames + ("le",), key + ("+Inf",), st[-2]
            yield self.name + "_count", self.labelnames, key, st[-2]
            yield self.name + "_sum", self.labelnames, key, st[-1]


class Registry:
    def __init__(self):
        self.lock = threading.Lock()
        self.metrics: list[_Metric] = []

    def counter(self, name, help, labels=()):
        return Counter(self, name, help, labels)

    def gauge(self, name, help, labels=()):
        return Gauge(self, name, help, labels)

    def histogram(self, name, help, labels=(), buckets=_LATENCY_BUCKETS):
        return Histogram(self, name, help, labels, buckets)

    def render(self) -> str:
        lines = []
        for m in self.metrics:
            lines.append(f"# HELP {m.name} {m.help}")
            lines.append(f"# TYPE {m.name} {m.kind}")
            for name, lnames, lvalues, v in m.samples():
                lines.append(f"{name}{_fmt_labels(lnames, lvalues)} {_fmt_value(v)}")
        return "\n".join(lines) + "\n"


class WorkerMetrics:
    """Every metric the worker exports (names prefixed ``streamforest_``)."""

    def __init__(self):
        r = self.registry = Registry()
        self.instances_in = r.counter("streamforest_instances_total",
                                      "Instances processed (predicted, learned if labelled)")
        self.replayed = r.counter("streamforest_replayed_instances_total",
                                  "Instances replayed after a restore (state only, no outputs)")
        self.outputs = r.counter("streamforest_outputs_total", "Messages produced",
                                 ("kind",))
        self.deadletters = r.counter("streamforest_dead_letters_total",
                                     "Messages sent to the dead-letter topic", ("reason",))
        self.drift_alerts = r.counter("streamforest_drift_alerts_total", "Drift alerts",
                                      ("source", "level"))
        self.rebalances = r.counter("streamforest_rebalances_total", "Rebalance callbacks",
                                    ("event",))
        self.aborts = r.counter("streamforest_transactions_aborted_total",
                                "Aborted transactions (partitions rewound)")
        self.commits = r.counter("streamforest_transactions_committed_total",
                                 "Committed transactions")
        self.lag = r.gauge("streamforest_partition_lag", "High watermark minus position",
                           ("partition",))
        self.streams = r.gauge("streamforest_streams", "Streams held by this worker")
        self.assigned = r.gauge("streamforest_assigned_partitions", "Assigned partitions")
        self.batch_latency = r.histogram("streamforest_batch_seconds",
                                         "Time to process and commit one consumed batch")
        self.ckpt_age = r.gauge("streamforest_checkpoint_age_seconds",
                                "Seconds since the partition's last checkpoint", ("partition",))
        self.ckpt_bytes = r.gauge("streamforest_checkpoint_bytes",
                                  "Bytes written by the partition's last checkpoint",
                                  ("partition",))
        self.ckpt_seconds = r.histogram("streamforest_checkpoint_seconds",
                                        "Time to write one partition checkpoint")
        self.restore_seconds = r.histogram("streamforest_restore_seconds",
                                           "Time to restore a partition (checkpoint read)")
        self.recovery_seconds = r.histogram(
            "streamforest_recovery_seconds",
            "Time from the start of a restore until the partition caught up with its "
            "committed offset (checkpoint read plus replay)")
        self.heartbeat = time.monotonic()
        self.ready = False

    def beat(self) -> None:
        self.heartbeat = time.monotonic()


class MetricsServer:
    """Serves ``/metrics``, ``/healthz`` and ``/readyz`` from a daemon thread."""

    def __init__(self, metrics: WorkerMetrics, port: int, host: str = "0.0.0.0",
                 stale_s: float = 60.0):
        self.metrics = metrics
        self.stale_s = stale_s
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server naming)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body = outer.metrics.registry.render().encode()
                    self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
                elif path == "/healthz":
                    age = time.monotonic() - outer.metrics.heartbeat
                    ok = age < outer.stale_s
                    self._send(200 if ok else 503,
                               f"{'ok' if ok else 'stale'} {age:.1f}s\n".encode())
                elif path == "/readyz":
                    ok = outer.metrics.ready
                    self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
                else:
                    self._send(404, b"not found\n")

            def _send(self, code, body, ctype="text/plain; charset=utf-8"):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # keep the worker's logs JSON only
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
