"""The metrics/health HTTP server under hostile clients: bounded threads, per-connection
deadline, configurable bind address.

Every server here binds 127.0.0.1 on a free port, with a short connection timeout so the
tests wait fractions of a second rather than the production default.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import subprocess
import sys
import threading
import time

import pytest

from worker.metrics import MetricsServer, WorkerMetrics, serve_metrics
from worker.settings import ConfigError, load_settings

TIMEOUT_S = 0.5
CAP = 32
# a request line and one header, without the blank line that ends the headers: the server
# waits for the rest, as it would for a slow or hostile client
HALF_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: worker\r\n"
# bound on every wait of a test (a hang guard, not a speed assertion)
PATIENCE_S = 10.0


@pytest.fixture
def server():
    srv = MetricsServer(WorkerMetrics(), 0, host="127.0.0.1", timeout_s=TIMEOUT_S,
                        max_connections=CAP).start()
    try:
        yield srv
    finally:
        srv.stop()


def _half_open(port: int) -> socket.socket | None:
    """A connection that sent part of a request and waits (None if the server refused it)."""
    s = socket.socket()
    s.settimeout(PATIENCE_S)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(HALF_REQUEST)
    except OSError:
        s.close()
        return None
    return s


def _closed_by_server(s: socket.socket, wait_s: float) -> bool:
    """Whether the server closes ``s`` (end of file or reset) within ``wait_s``."""
    ready, _, _ = select.select([s], [], [], wait_s)
    if not ready:
        return False
    try:
        return s.recv(4096) == b""
    except OSError:  # reset: closed too
        return True


def _healthz(port: int) -> int | None:
    """The status of one GET /healthz, or None when the connection was refused or cut."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE_S)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


# Opens argv[2] half-open connections to port argv[1], prints how many it holds, and holds
# them until its stdin closes. A process of its own, as real clients are: in this one, its
# connect loop would compete with the server's accept loop for the GIL.
HALF_OPEN_CLIENT = f"""
import socket, sys
held = []
for _ in range(int(sys.argv[2])):
    s = socket.socket()
    s.settimeout({PATIENCE_S})
    try:
        s.connect(("127.0.0.1", int(sys.argv[1])))
        s.sendall({HALF_REQUEST!r})
    except OSError:
        s.close()
        continue
    held.append(s)
print(len(held), flush=True)
sys.stdin.read()
"""


def _n_connections() -> int:
    """1,500, or fewer if the client is short of file descriptors."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError):
        return 400
    return max(100, min(1500, soft - 100))


def test_half_open_connections_never_raise_the_threads_past_the_cap(server):
    baseline = threading.active_count()  # the serve thread included
    bound = baseline + CAP + 4  # a few handler threads may be ending after their slot is free
    peak = baseline
    with subprocess.Popen([sys.executable, "-c", HALF_OPEN_CLIENT, str(server.port), str(_n_connections())],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as client:
        try:
            deadline = time.monotonic() + 6 * PATIENCE_S
            while not select.select([client.stdout], [], [], 0.01)[0]:
                peak = max(peak, threading.active_count())
                assert peak <= bound, f"{peak} threads while a client opens half-open connections"
                assert time.monotonic() < deadline, "the client did not finish connecting"
            held = int(client.stdout.readline())
            peak = max(peak, threading.active_count())
            assert peak <= bound, f"{peak} threads once a client opened {held} half-open connections"
            # the slow client still holds its connections; past their deadline, /healthz answers
            deadline = time.monotonic() + PATIENCE_S
            status = _healthz(server.port)
            while status != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
                status = _healthz(server.port)
            assert status == 200
            assert threading.active_count() <= bound
        finally:
            client.stdin.close()
            try:
                client.wait(PATIENCE_S)
            except subprocess.TimeoutExpired:  # still connecting: a failed run
                client.kill()


def test_a_connection_over_the_cap_is_closed_at_once(server):
    holders = [_half_open(server.port) for _ in range(CAP)]
    try:
        assert all(s is not None for s in holders)
        # every slot is held until the deadline: the next client gets no thread and no answer
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S)
        try:
            extra.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        except OSError:
            pass  # already closed by the server
        with extra:
            assert _closed_by_server(extra, TIMEOUT_S / 2)
    finally:
        for s in holders:
            if s is not None:
                s.close()


def test_an_idle_connection_is_closed_after_the_timeout(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S) as s:
        assert _closed_by_server(s, PATIENCE_S)


def test_a_client_dribbling_its_request_is_closed_after_the_timeout(server):
    """One byte every 50 ms resets a per-read timeout forever: the deadline is per connection."""
    request = b"GET /healthz HTTP/1.1\r\nHost: worker\r\n" + b"X-Slow: " + b"a" * 10_000
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S) as s:
        deadline = time.monotonic() + PATIENCE_S
        closed = False
        for byte in request:
            if time.monotonic() > deadline:
                break
            try:
                s.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            if _closed_by_server(s, 0.05):
                closed = True
                break
        assert closed


def test_stop_does_not_wait_for_a_slow_client():
    """The worker stops its server on its way out, within its shutdown bound."""
    srv = MetricsServer(WorkerMetrics(), 0, host="127.0.0.1", timeout_s=60.0).start()
    with _half_open(srv.port) as s:
        assert not _closed_by_server(s, 0.2)  # accepted and waiting for the rest
        stopper = threading.Thread(target=srv.stop, daemon=True)
        stopper.start()
        stopper.join(PATIENCE_S)
        assert not stopper.is_alive()
        assert _closed_by_server(s, PATIENCE_S)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_bind_host_setting_is_honoured():
    assert load_settings({}).worker.metrics_host == "0.0.0.0"  # pods: probed and scraped on the pod IP
    port = _free_port()
    settings = load_settings({"STREAMFOREST_WORKER__METRICS_HOST": "127.0.0.1",
                              "STREAMFOREST_WORKER__METRICS_PORT": str(port)})
    server = serve_metrics(WorkerMetrics(), settings.worker)
    try:
        assert server.address == ("127.0.0.1", port)
        assert _healthz(port) == 200
    finally:
        server.stop()
    # port 0 still disables the endpoint
    assert serve_metrics(WorkerMetrics(), load_settings({}, worker={"metrics_port": 0}).worker) is None


@pytest.mark.parametrize("host", ["localhost", "metrics.svc.cluster.local", "::1", "::", "10.0.0.7"])
def test_addresses_and_host_names_are_accepted(host):
    assert load_settings({"STREAMFOREST_WORKER__METRICS_HOST": host}).worker.metrics_host == host


@pytest.mark.parametrize("host", ["", "0.0.0.0:9464", "http://0.0.0.0", "bad host", "-lead.example",
                                  "999.1.1.1", "a" * 64 + ".example"])
def test_a_bad_bind_host_is_refused(host):
    with pytest.raises(ConfigError) as info:
        load_settings({"STREAMFOREST_WORKER__METRICS_HOST": host})
    [(where, what)] = info.value.problems
    assert where == "STREAMFOREST_WORKER__METRICS_HOST"
    assert "IP address" in what and "host name" in what


def test_a_bad_bind_host_stops_the_command_with_code_2():
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAMFOREST_")}
    env["STREAMFOREST_WORKER__METRICS_HOST"] = "0.0.0.0:9464"
    proc = subprocess.run([sys.executable, "-m", "worker", "config"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "STREAMFOREST_WORKER__METRICS_HOST: " in proc.stderr and "IP address" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_scrape_has_the_process_and_build_series(server):
    """/metrics carries prometheus_client's standard collectors and the build info, next to the
    worker's own series."""
    import platform

    import numpy as np

    import worker

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=PATIENCE_S)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        assert resp.status == 200
        body = resp.read().decode()
    finally:
        conn.close()
    names = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line and line[0] != "#"}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
            "python_info", "python_gc_collections_total", "streamforest_instances_total"} <= names
    [build] = [line for line in body.splitlines() if line.startswith("streamforest_build_info{")]
    for label, value in (("version", worker.__version__), ("python", platform.python_version()),
                         ("numpy", np.__version__)):
        assert f'{label}="{value}"' in build
    assert 'numba="' in build and 'numba="unknown"' not in build
    assert build.endswith(" 1.0")


def test_build_versions_fall_back_when_a_package_is_not_installed(monkeypatch):
    from importlib import metadata

    from worker import metrics

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metrics.metadata, "version", missing)
    assert metrics.build_versions()["numba"] == "unknown"
