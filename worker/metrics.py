"""Prometheus metrics (``prometheus_client``), liveness and readiness over one small HTTP server.

``GET /metrics`` serves the Prometheus text exposition of the worker's own registry;
``GET /healthz`` answers 200 while the main loop has turned recently (a loop stuck longer
than ``stale_s`` is not alive); ``GET /readyz`` answers 200 once the worker has joined its
group and every assigned partition is restored.

Each :class:`WorkerMetrics` has its own :class:`prometheus_client.CollectorRegistry`, so
several workers (tests, benchmarks) in one process never share counters; ``*_created``
series are not exported (a worker's metrics start with the process). The registry also holds
prometheus_client's process, platform and garbage-collector collectors (``process_*``,
``python_info``, ``python_gc_*``) and ``streamforest_build_info`` (the versions running).

The models are observed per profile, never per stream (stream ids are unbounded): the
prequential accuracy (classification) or normalised error (regression) of the profile's
streams over their latest labelled instances, with counters of scored instances and of their
loss, and drift alerts by profile (:meth:`WorkerMetrics.profile_label` caps the profiles
named, :data:`MAX_PROFILES`).

The server gives each connection a thread, so it bounds what clients can hold: at most
:data:`MAX_CONNECTIONS` connections at once (one more is closed at once, without a thread),
each closed :data:`CONNECTION_TIMEOUT_S` after it was accepted (checked twice a second)
whatever it sent by then.
Slow or hostile clients thus cost at most ``MAX_CONNECTIONS`` threads, and release them
within the timeout. A probe cannot be told from them before its request is read, so while
more than ``MAX_CONNECTIONS`` clients keep connecting, probes are refused too: keep the port
to the kubelet and Prometheus (``worker.metrics_host``, a network policy).
"""

from __future__ import annotations

import logging
import math
import platform
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata

import numpy as np
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from . import __version__
from .gauges import PrequentialQuality

disable_created_metrics()

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: seconds a connection may live, from accept to the end of the response: a probe or a scrape
#: takes milliseconds, and the chart's probes and the image's health check give up within 5 s
CONNECTION_TIMEOUT_S = 5.0
#: profiles exported by name in the per-profile series (the profiles of the settings, in the
#: order streams of theirs are first seen); any further one is exported as :data:`OTHER_PROFILE`
MAX_PROFILES = 32
OTHER_PROFILE = "_other"
#: labelled instances (at least) behind each prequential quality gauge
#: (:class:`worker.gauges.PrequentialQuality`)
QUALITY_WINDOW = 10_000
#: connections served at once (one thread each): the legitimate clients are a few probes and
#: one or two scrapers at a time, and a thread per connection competes with the main loop
MAX_CONNECTIONS = 32

log = logging.getLogger("streamforest.metrics")


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

    def __init__(self, quality_window: int = QUALITY_WINDOW):
        r = self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.build_info = Gauge(
            "streamforest_build_info", "Versions running: the worker (package version), "
            "Python, numpy, numba (always 1)", ["version", "python", "numpy", "numba"],
            registry=r)
        self.build_info.labels(**build_versions()).set(1)
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
                                    ["profile", "source", "level"], registry=r)
        # every learner event or detector signal is either a drift alert or counted here: the
        # registry's alert rules keep housekeeping (a tree of a forest forgetting its rows, a
        # DDM warning zone, a selector's new subset) off the drift topic
        self.held_dropped = Counter(
            "streamforest_held_dropped", "Unlabelled instances that fell out of their stream's "
            "held store (its row or age bound) before their label came", registry=r)
        self.labels_joined = Counter(
            "streamforest_labels_joined", "LabelEvents that joined the instance they name (its "
            "served prediction scored, its row learned); refused ones are dead letters",
            registry=r)
        self.held = Gauge("streamforest_held_instances", "Unlabelled instances the streams in "
                          "memory hold for their LabelEvents", registry=r)
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
        self.poll_latency = Histogram("streamforest_batch_seconds",
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
        self.accuracy = Gauge(
            "streamforest_prequential_accuracy",
            "Prequential accuracy of the profile's classification streams (served prediction "
            "equal to the label) over their latest labelled instances", ["profile"], registry=r)
        self.error = Gauge(
            "streamforest_prequential_error",
            "Prequential normalised error of the profile's regression streams over their "
            "latest labelled instances: per instance, the mean over targets of the absolute "
            "error over the target's running mean absolute deviation, clipped to [0, 1]",
            ["profile"], registry=r)
        self.scored = Counter(
            "streamforest_scored_instances",
            "Labelled instances scored against the prediction served for them", ["profile", "task"],
            registry=r)
        self.loss = Counter(
            "streamforest_prequential_loss",
            "Sum of the prequential losses of the scored instances (0/1 for classification, "
            "the normalised error for regression)", ["profile", "task"], registry=r)
        self.quality = PrequentialQuality(self, quality_window)
        self._profiles: dict[str, str] = {}  # the profiles named
        self.heartbeat = time.monotonic()
        self.ready = False

    def profile_label(self, profile: str) -> str:
        """The ``profile`` label of a profile's series: its name for the first
        :data:`MAX_PROFILES` profiles seen, :data:`OTHER_PROFILE` beyond (profiles come from
        the settings, so this only guards the series count)."""
        if profile in self._profiles:
            return profile
        if len(self._profiles) < MAX_PROFILES:
            self._profiles[profile] = profile
            return profile
        return OTHER_PROFILE

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


def build_versions() -> dict[str, str]:
    """The labels of ``streamforest_build_info``: the worker's package version (the source
    tree's fallback when not installed), Python's, numpy's and numba's."""
    return {"version": __version__, "python": platform.python_version(),
            "numpy": np.__version__, "numba": _version_of("numba")}


def _version_of(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, for at most ``max_connections`` connections of at most
    ``timeout_s`` seconds each (see the module doc)."""

    daemon_threads = True
    # stop() cuts the connections instead of waiting for their threads
    block_on_close = False
    # the kernel's queue of connections not yet accepted: a burst waits there for the accept
    # loop (which only hands out or refuses a slot) instead of having its SYNs dropped
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], handler, timeout_s: float, max_connections: int):
        self.address_family = _family(address[0])
        self.timeout_s = timeout_s
        self._slots = threading.BoundedSemaphore(max_connections)
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the cap: closed now, no thread
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + self.timeout_s
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread took the slot (the caller closes the connection)
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def shutdown_request(self, request) -> None:
        # forgotten under the lock before it is closed: the reaper never touches a closed
        # socket (whose descriptor a new connection may already reuse)
        with self._lock:
            self._deadlines.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """Cut the connections past their deadline (run by the serve loop every poll).

        A read timeout alone would let a client that sends a byte now and then hold its
        thread forever.
        """
        super().service_actions()
        self.cut(time.monotonic())

    def cut(self, now: float = math.inf) -> None:
        """Shut down the connections whose deadline is past ``now`` (all by default): their
        handlers' blocking reads and writes end at once."""
        with self._lock:
            for conn, deadline in self._deadlines.items():
                if deadline <= now:
                    try:
                        conn.shutdown(socket.SHUT_RDWR)
                    except OSError:  # already gone
                        pass

    def handle_error(self, request, client_address) -> None:
        # http.server prints tracebacks on stderr, whose lines are all JSON logs; a client cut
        # off (by itself or by its deadline) is not worth one
        gone = isinstance(sys.exc_info()[1], OSError)
        log.log(logging.DEBUG if gone else logging.WARNING, "metrics request from %s failed",
                client_address[0], exc_info=True)


def _family(host: str) -> int:
    """The address family ``host`` binds with (AF_INET6 for an IPv6 address or name)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"metrics host {host!r} does not resolve: {exc}") from None
    return infos[0][0]


class MetricsServer:
    """Serves ``/metrics``, ``/healthz`` and ``/readyz`` from a daemon thread.

    Parameters
    ----------
    metrics : WorkerMetrics
        What ``/metrics`` exports and the probes read.
    port : int
        Port to listen on (0: any free port, see ``port`` once built).
    host : str
        Address to bind (``worker.metrics_host``).
    stale_s : float
        ``/healthz`` answers 503 once the main loop has not turned for this long.
    timeout_s : float
        Seconds a connection may live, from accept to the end of the response.
    max_connections : int
        Connections served at once; more are closed as soon as they are accepted.
    """

    def __init__(self, metrics: WorkerMetrics, port: int, host: str = "0.0.0.0",
                 stale_s: float = 60.0, timeout_s: float = CONNECTION_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS):
        self.metrics = metrics
        self.stale_s = stale_s
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = timeout_s  # bounds each read and write (the server bounds the whole)

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

        self._server = _BoundedServer((host, port), Handler, timeout_s, max_connections)
        self.address = tuple(self._server.server_address[:2])
        self.port = self.address[1]
        # deadlines are checked once per poll of the serve loop
        poll_s = min(0.5, timeout_s / 4)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(poll_s,),
                                        name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; connections still open are cut (a slow client never delays a stop)."""
        self._server.shutdown()
        self._server.server_close()
        self._server.cut()


def serve_metrics(metrics: WorkerMetrics, worker) -> MetricsServer | None:
    """The server ``worker`` (the :class:`~worker.settings.WorkerSettings`) asks for, started;
    ``None`` when ``metrics_port`` is 0."""
    if not worker.metrics_port:
        return None
    return MetricsServer(metrics, worker.metrics_port, host=worker.metrics_host).start()
