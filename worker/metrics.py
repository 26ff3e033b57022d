"""Prometheus metrics (``prometheus_client``), liveness and readiness over one small HTTP server.

``GET /metrics`` serves the Prometheus text exposition of the worker's own registry;
``GET /healthz`` answers 200 while the main loop has turned recently (a loop stuck longer
than ``stale_s`` is not alive); ``GET /readyz`` answers 200 once the worker has joined its
group and every assigned partition is restored.

Each :class:`WorkerMetrics` has its own :class:`prometheus_client.CollectorRegistry`, so
several workers (tests, benchmarks) in one process never share counters; ``*_created``
series are not exported (a worker's metrics start with the process).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class WorkerMetrics:
    """Every metric the worker exports (names prefixed ``streamforest_``).

    Examples
    --------
    >>> m = WorkerMetrics()
    >>> m.outputs.labels(kind="prediction").inc(3)
    >>> 'streamforest_outputs_total{kind="prediction"} 3.0' in m.render()
    True
    >>> m.learner_events.labels(source="adaptive_random_forest", kind="tree_drift").inc()
    >>> ('streamforest_learner_events_total{kind="tree_drift",source="adaptive_random_forest"} '
    ...  '1.0' in m.render())
    True
    """

    def __init__(self):
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.instances_in = Counter("streamforest_instances",
                                    "Instances processed (predicted, learned if labelled)",
                                    registry=r)
        self.replayed = Counter("streamforest_replayed_instances",
                                "Instances replayed after a restore (state only, no outputs)",
                                registry=r)
        self.outputs = Counter("streamforest_outputs", "Messages produced", ["kind"], registry=r)
        self.arrivals = Counter("streamforest_feature_arrivals",
                                "FeatureArrivals taken by streams of features (joined live, or "
                                "replayed after a restore)", ["outcome"], registry=r)
        self.deadletters = Counter("streamforest_dead_letters",
                                   "Messages sent to the dead-letter topic", ["reason"],
                                   registry=r)
        self.drift_alerts = Counter("streamforest_drift_alerts", "Drift alerts",
                                    ["source", "level"], registry=r)
        # every learner event or detector signal is either a drift alert or counted here: the
        # registry's alert rules keep housekeeping (a tree of a forest forgetting its rows, a
        # DDM warning zone, a selector's new subset) off the drift topic
        self.learner_events = Counter(
            "streamforest_learner_events",
            "Learner events and detector signals not published as drift alerts",
            ["source", "kind"], registry=r)
        self.rebalances = Counter("streamforest_rebalances", "Rebalance callbacks", ["event"],
                                  registry=r)
        self.aborts = Counter("streamforest_transactions_aborted",
                              "Aborted transactions (partitions rewound)", registry=r)
        self.commits = Counter("streamforest_transactions_committed", "Committed transactions",
                               registry=r)
        self.lag = Gauge("streamforest_partition_lag", "High watermark minus position",
                         ["partition"], registry=r)
        self.streams = Gauge("streamforest_streams", "Streams held in memory by this worker",
                             registry=r)
        self.streams_passivated = Gauge(
            "streamforest_streams_passivated",
            "Streams of this worker's partitions held only in their checkpoint (state budget)",
            registry=r)
        self.state_bytes = Gauge("streamforest_state_bytes",
                                 "Bytes of the learners' state held in memory", registry=r)
        self.passivations = Counter("streamforest_passivations",
                                    "Streams dropped from memory for the state budget",
                                    registry=r)
        self.restored_on_demand = Counter(
            "streamforest_streams_restored",
            "Passivated streams restored from the checkpoints topic when their input came",
            registry=r)
        self.assigned = Gauge("streamforest_assigned_partitions", "Assigned partitions",
                              registry=r)
        self.batch_latency = Histogram("streamforest_batch_seconds",
                                       "Time to process and commit one consumed batch",
                                       buckets=_LATENCY_BUCKETS, registry=r)
        self.ckpt_age = Gauge("streamforest_checkpoint_age_seconds",
                              "Seconds since the partition's last checkpoint", ["partition"],
                              registry=r)
        self.ckpt_bytes = Gauge("streamforest_checkpoint_bytes",
                                "Bytes written by the partition's last checkpoint",
                                ["partition"], registry=r)
        self.ckpt_seconds = Histogram("streamforest_checkpoint_seconds",
                                      "Time to write one partition checkpoint",
                                      buckets=_LATENCY_BUCKETS, registry=r)
        self.restore_seconds = Histogram("streamforest_restore_seconds",
                                         "Time to restore a partition (checkpoint read)",
                                         buckets=_LATENCY_BUCKETS, registry=r)
        self.recovery_seconds = Histogram(
            "streamforest_recovery_seconds",
            "Time from the start of a restore until the partition caught up with its "
            "committed offset (checkpoint read plus replay)", buckets=_LATENCY_BUCKETS,
            registry=r)
        self.restore_failures = Counter(
            "streamforest_restore_failures",
            "Restores that failed (broker unreachable, timeouts) and were retried", registry=r)
        self.restore_fallbacks = Counter(
            "streamforest_restore_fallbacks",
            "Restores that could not use the newest checkpoint: an older one was used "
            "(kind=older) or the state was rebuilt from the input (kind=rebuild)", ["kind"],
            registry=r)
        self.checkpoints_refused = Counter(
            "streamforest_checkpoints_refused",
            "Checkpoints refused at restore (missing or corrupt chunks, failed state checks)",
            registry=r)
        self.consecutive_aborts = Gauge(
            "streamforest_consecutive_aborts",
            "Transactions aborted since the last commit (a growing value: stuck partition)",
            registry=r)
        self.producer_rebuilds = Counter(
            "streamforest_producer_rebuilds",
            "Producers replaced after a fatal error (fenced, unrecoverable)", registry=r)
        self.consume_errors = Counter("streamforest_consume_errors",
                                      "Errors reported by the consumer", ["code"], registry=r)
        self.heartbeat = time.monotonic()
        self.ready = False

    def beat(self) -> None:
        self.heartbeat = time.monotonic()

    def forget_partition(self, partition: int) -> None:
        """Drop the per-partition series of a partition this worker no longer holds."""
        for gauge in (self.lag, self.ckpt_age, self.ckpt_bytes):
            try:
                gauge.remove(str(partition))
            except KeyError:
                pass

    def render(self) -> str:
        """The text exposition of every metric."""
        return generate_latest(self.registry).decode()


class MetricsServer:
    """Serves ``/metrics``, ``/healthz`` and ``/readyz`` from a daemon thread."""

    def __init__(self, metrics: WorkerMetrics, port: int, host: str = "0.0.0.0",
                 stale_s: float = 60.0):
        self.metrics = metrics
        self.stale_s = stale_s
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # http.server names its handlers after the HTTP verb
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(outer.metrics.registry), CONTENT_TYPE_LATEST)
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
