"""A single-node Apache Kafka broker on this machine, without Docker.

The broker is the real Apache Kafka server (KRaft, one process acting as broker and controller) run from the
jars that Maven resolves from ``deploy/local-kafka/pom.xml``. It serves three purposes: the README's quick
start (``streamforest broker start``), the integration tests (tests/conftest.py starts one per test session on
free ports) and the demo. Only OpenJDK 17+ and Maven 3 are needed.

Life cycle (``LocalBroker``):

``fetch()``
    ``mvn dependency:copy-dependencies`` into ``$STREAMFOREST_HOME/kafka-<version>/libs`` (default home
    ``~/.cache/streamforest``), once: a marker file records the pom it was resolved from.
``start(timeout)``
    Formats the KRaft storage once with a fresh cluster id, writes ``server.properties`` with the single-node
    settings that make consumer groups and transactions work on one broker (every internal topic with
    replication factor 1), starts ``java ... kafka.Kafka server.properties`` detached with its own log file
    (``<data_dir>/broker.log``) and pid file, and returns only when an AdminClient can list the topics.
``stop(timeout)``
    SIGTERM (Kafka shuts down cleanly), wait, SIGKILL as the last resort.

JVM start-up dominates the broker's start time on small machines. The first run of a Kafka version records the
classes it loaded in a dynamic AppCDS archive (``-XX:ArchiveClassesAtExit``, written when the JVM exits); later
runs map that archive (``-XX:SharedArchiveFile``). The JVM validates the archive against the class path and
silently ignores it when it does not match, so a stale archive costs only the saving. Set
``STREAMFOREST_BROKER_CDS=0`` to switch this off.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

DEFAULT_PORT = 9092
DEFAULT_CONTROLLER_PORT = 9093
DEFAULT_HOST = "127.0.0.1"
#: heap for a 2-core development machine: the broker needs little memory for test and demo traffic
DEFAULT_HEAP_OPTS: tuple[str, ...] = ("-Xms256m", "-Xmx768m")
#: serial GC: no concurrent GC threads competing with the worker for the two cores
DEFAULT_JVM_OPTS: tuple[str, ...] = ("-XX:+UseSerialGC", "-Djava.awt.headless=true")
#: C1-only JIT: the broker answers sooner and compiles less; right for tests, not for throughput benchmarks
QUICK_JVM_OPTS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1",)

_POM_ENV = "STREAMFOREST_LOCAL_KAFKA_POM"
_HOME_ENV = "STREAMFOREST_HOME"
_CDS_ENV = "STREAMFOREST_BROKER_CDS"
_TAG_ENV = "STREAMFOREST_BROKER_TAG"
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
_MARKER = ".complete"
_CDS_ARCHIVE = "kafka-appcds.jsa"


class BrokerError(RuntimeError):
    """The local broker could not be fetched, started or stopped; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------------------
# locations


def streamforest_home() -> Path:
    """Cache directory of streamforest: ``$STREAMFOREST_HOME`` or ``~/.cache/streamforest``."""
    return Path(os.environ.get(_HOME_ENV) or Path.home() / ".cache" / "streamforest").expanduser()


def find_pom() -> Path:
    """Locate ``deploy/local-kafka/pom.xml``.

    ``$STREAMFOREST_LOCAL_KAFKA_POM`` wins; otherwise the pom of the source checkout this module belongs to
    (streamforest is installed editable from its repository).
    """
    env = os.environ.get(_POM_ENV)
    repository = Path(__file__).resolve().parents[3]
    pom = Path(env).expanduser() if env else repository / "deploy" / "local-kafka" / "pom.xml"
    if not pom.is_file():
        raise BrokerError(
            f"cannot find the local Kafka pom at {pom}: run streamforest from its source checkout "
            f"(pip install -e .) or set {_POM_ENV} to the path of deploy/local-kafka/pom.xml"
        )
    return pom


def kafka_version(pom: Path) -> str:
    """The ``kafka.version`` property of the pom (the only place the Kafka version is written)."""
    node = ET.parse(pom).getroot().find("m:properties/m:kafka.version", _POM_NS)
    if node is None or not (node.text or "").strip():
        raise BrokerError(f"{pom} has no <properties><kafka.version> element")
    return node.text.strip()


def new_cluster_id() -> str:
    """A fresh KRaft cluster id: 16 random bytes in URL-safe base64 without padding (Kafka's Uuid format).

    One id in 64 would start with ``-``, which the storage tool's argument parser takes for an option; like
    Kafka's own ``Uuid.randomUuid``, such ids are drawn again.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


def free_port(host: str = DEFAULT_HOST, exclude: Iterable[int] = ()) -> int:
    """A TCP port that is free on ``host`` right now, below the kernel's ephemeral range.

    Ports the OS hands out to outgoing connections (``ip_local_port_range``) are avoided: a JVM takes a few
    seconds to bind its listeners, and on a busy machine a client connection can take such a port meanwhile.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    low = max(low, 12000)
    rng = random.Random()
    excluded = set(exclude)
    for _ in range(200):
        port = rng.randrange(10000, low)
        if port not in excluded and not _port_in_use(host, port):
            return port
    raise BrokerError(f"no free port found on {host} between 10000 and {low}")


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _require(tool: str, what: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise BrokerError(f"`{tool}` was not found on PATH: the local Kafka broker needs {what}")
    return path


# ---------------------------------------------------------------------------------------------------------
# configuration


def server_properties(
    host: str, port: int, controller_port: int, log_dir: Path, overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Broker configuration of a single-node KRaft cluster (combined broker and controller).

    Every internal topic (consumer offsets, transaction state, share-group state) gets replication factor 1
    and min ISR 1, otherwise transactions and consumer groups wait for replicas that do not exist.
    """
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{host}:{controller_port}",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        # one replica of everything
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        # a new group starts at once instead of waiting 3 s for more members
        "group.initial.rebalance.delay.ms": "0",
        # lets tests use short session timeouts (rebalance tests); clients still default to 45 s
        "group.min.session.timeout.ms": "1000",
        # topics are created explicitly (streamforest topics create, test fixtures): a typo must not create one
        "auto.create.topics.enable": "false",
        # small machine: the compaction dedupe buffer is allocated up front (default 128 MiB); fewer threads
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "log.cleaner.threads": "1",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "background.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
    }
    props.update(overrides or {})
    return props


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    lines = ["# written by streamforest (worker/tools/dev/broker.py); rewritten at every start"]
    lines += [f"{key}={value}" for key, value in props.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------
# processes


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # the state follows the parenthesised command name, which may itself contain spaces or parentheses
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X", "")


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _silent() -> logging.Logger:
    """The logger of this module's Kafka clients: librdkafka's lines dropped (a broker that
    does not answer yet is the expected case while it starts, and a check says what failed)."""
    silent = logging.getLogger("streamforest.broker.librdkafka")
    if not silent.handlers:
        silent.addHandler(logging.NullHandler())
    silent.propagate = False
    return silent


def _admin_answers(bootstrap: str, timeout: float) -> bool:
    """One metadata request through an AdminClient (the readiness criterion of the broker)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    # the client would otherwise print a line per refused connection while the broker starts
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _silent()})
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


class LocalBroker:
    """A single-node Kafka broker process on the loopback interface.

    Parameters
    ----------
    port : int
        Client listener port (``bootstrap`` is ``host:port``).
    controller_port : int
        KRaft controller listener port.
    data_dir : str or Path, optional
        Holds ``server.properties``, the KRaft log directory, ``broker.log`` and ``broker.pid``. Default
        ``$STREAMFOREST_HOME/broker-<port>``. Formatted on the first start and reused afterwards.
    heap_opts : sequence of str
        JVM heap options.
    jvm_opts : sequence of str
        Other JVM options (``QUICK_JVM_OPTS`` for a faster start in tests).
    host : str
        Interface to listen on and to advertise.
    config : mapping, optional
        Extra or overriding ``server.properties`` entries.
    pom : Path, optional
        The pom listing the broker's jars; default ``find_pom()``.
    home : Path, optional
        Jar cache root; default ``streamforest_home()``.
    detach : bool
        Run the JVM in its own session, so that it outlives the starting process and ignores the terminal's
        Ctrl-C (the CLI). The test fixture passes False: an interrupted test run takes its broker down too.
    """

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        controller_port: int = DEFAULT_CONTROLLER_PORT,
        data_dir: str | Path | None = None,
        heap_opts: Sequence[str] = DEFAULT_HEAP_OPTS,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        host: str = DEFAULT_HOST,
        config: Mapping[str, str] | None = None,
        pom: Path | None = None,
        home: Path | None = None,
        detach: bool = True,
    ) -> None:
        if port == controller_port:
            raise BrokerError(f"the client port and the controller port must differ (both {port})")
        self.port = int(port)
        self.controller_port = int(controller_port)
        self.host = host
        self.home = Path(home) if home is not None else streamforest_home()
        self.data_dir = Path(data_dir) if data_dir is not None else self.home / f"broker-{self.port}"
        self.heap_opts = tuple(heap_opts)
        self.jvm_opts = tuple(jvm_opts)
        self.config = dict(config or {})
        self._pom = pom
        self.detach = detach
        self._proc: subprocess.Popen[bytes] | None = None

    # -- paths ----------------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def pom(self) -> Path:
        if self._pom is None:
            self._pom = find_pom()
        return self._pom

    @property
    def version(self) -> str:
        """Kafka version from the pom."""
        return kafka_version(self.pom)

    @property
    def libs_dir(self) -> Path:
        return self.home / f"kafka-{self.version}" / "libs"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def _marker_text(self) -> str:
        return hashlib.sha256(self.pom.read_bytes()).hexdigest()

    # -- fetch ----------------------------------------------------------------------------------------
    def fetched(self) -> bool:
        """True when the jar cache was completely resolved from the current pom."""
        marker = self.libs_dir / _MARKER
        try:
            return marker.read_text().strip() == self._marker_text and any(self.libs_dir.glob("kafka_*.jar"))
        except OSError:
            return False

    def fetch(self, timeout: float = 900.0) -> Path:
        """Resolve the broker's runtime jars with Maven into the cache, unless already complete.

        Maven copies into a private temporary directory that is renamed into place at the end, so an
        interrupted or concurrent fetch never leaves a half-filled ``libs`` directory behind.

        Returns
        -------
        Path
            The ``libs`` directory.
        """
        if self.fetched():
            return self.libs_dir
        mvn = _require("mvn", "Apache Maven 3 to download the Kafka jars (e.g. apt-get install maven)")
        libs = self.libs_dir
        libs.parent.mkdir(parents=True, exist_ok=True)
        tmp = libs.parent / f"libs.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        cmd = [
            mvn, "-q", "-B", "-f", str(self.pom), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={tmp}",
        ]  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
            if done.returncode != 0:
                raise BrokerError(
                    f"Maven could not resolve the Kafka {self.version} jars (exit {done.returncode}):\n"
                    f"{(done.stdout + done.stderr)[-3000:]}"
                )
            (tmp / _MARKER).write_text(self._marker_text + "\n")
            if not self.fetched():  # another process may have finished first: keep its copy
                shutil.rmtree(libs, ignore_errors=True)
                try:
                    tmp.rename(libs)
                except OSError:
                    if not self.fetched():
                        raise
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(f"Maven did not finish resolving the Kafka jars within {timeout:.0f} s") from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return libs

    # -- process ----------------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """Pid of this broker's running process, or None (a stale pid file is removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if pid_alive(pid) and self._marker_arg in _cmdline(pid):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    @property
    def _marker_arg(self) -> str:
        # identifies this broker's JVM in /proc/<pid>/cmdline, so a recycled pid is never signalled
        return f"-Dstreamforest.broker.dir={self.data_dir.resolve()}"

    def answers(self, timeout: float = 2.0) -> bool:
        """True when an AdminClient can list the topics within ``timeout`` seconds."""
        return _admin_answers(self.bootstrap, timeout)

    def status(self) -> dict[str, object]:
        """Pid, bootstrap address, whether the broker answers, data directory and Kafka version."""
        pid = self.pid()
        return {
            "running": pid is not None,
            "pid": pid,
            "answers": pid is not None and self.answers(),
            "bootstrap": self.bootstrap,
            "data_dir": str(self.data_dir),
            "version": self.version,
        }

    def _java(self) -> str:
        java = _require("java", "a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)")
        out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
        first = out.splitlines()[0] if out else ""
        try:
            major = int(first.split('"')[1].split(".")[0])
        except (IndexError, ValueError):
            return java  # unknown format: let Kafka report an unsupported runtime itself
        if major < 17:
            raise BrokerError(f"Kafka {self.version} needs Java 17 or newer; `java -version` says: {first}")
        return java

    def _classpath(self, libs: Path) -> str:
        # an explicit sorted list instead of libs/*: the same class path every time keeps the CDS archive valid
        return os.pathsep.join(str(jar) for jar in sorted(libs.glob("*.jar")))

    def _format(self, java: str, classpath: str, properties: Path) -> None:
        if (self.data_dir / "kraft" / "meta.properties").exists():
            return
        cmd = [
            java, "-Xmx256m", *QUICK_JVM_OPTS, f"-Dlog4j2.configurationFile={self._log_config}",
            "-cp", classpath, "kafka.tools.StorageTool", "format", f"--cluster-id={new_cluster_id()}",
            "-c", str(properties),
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise BrokerError(
                f"formatting the KRaft storage in {self.data_dir} failed:\n{done.stdout}{done.stderr}"
            )

    @property
    def _log_config(self) -> Path:
        return self.pom.parent / "log4j2.properties"

    def _cds_opts(self, libs: Path) -> list[str]:
        if os.environ.get(_CDS_ENV, "1") == "0":
            return []
        archive = libs.parent / _CDS_ARCHIVE
        # cds*=error: the JVM reports each class it cannot archive as a warning; none of them matters here
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=error"]
        return [f"-XX:ArchiveClassesAtExit={self.data_dir / _CDS_ARCHIVE}", "-Xlog:cds*=error"]

    def _keep_cds_archive(self, complete: bool) -> None:
        # an archive is written while the JVM exits: after a SIGKILL it may be truncated, so it is dropped
        made = self.data_dir / _CDS_ARCHIVE
        if complete and made.is_file() and made.stat().st_size > 0:
            target = self.libs_dir.parent / _CDS_ARCHIVE
            if not target.exists():
                os.replace(made, target)  # atomic: concurrent brokers never see a partial archive
        made.unlink(missing_ok=True)

    def start(self, timeout: float = 120.0) -> str:
        """Start the broker (or find it already running) and wait until it answers.

        Returns
        -------
        str
            The bootstrap address.

        Raises
        ------
        BrokerError
            java/mvn missing, a port taken by another process, the broker exiting or not answering in time
            (the message includes the end of ``broker.log``).
        """
        deadline = time.monotonic() + timeout
        if self.pid() is not None:
            if self._wait_ready(deadline, None):
                return self.bootstrap
            raise BrokerError(f"a broker is running from {self.data_dir} but does not answer on {self.bootstrap}")
        for port in (self.port, self.controller_port):
            if _port_in_use(self.host, port):
                raise BrokerError(f"port {self.host}:{port} is already in use by another process")
        java = self._java()
        libs = self.fetch()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        properties = self.data_dir / "server.properties"
        props = server_properties(self.host, self.port, self.controller_port, self.data_dir / "kraft", self.config)
        _write_properties(properties, props)
        classpath = self._classpath(libs)
        self._format(java, classpath, properties)
        cmd = [java, *self.heap_opts, *self.jvm_opts, *self._cds_opts(libs)]
        cmd += [f"-Dlog4j2.configurationFile={self._log_config}", self._marker_arg]
        if os.environ.get(_TAG_ENV):
            cmd.append(f"-Dstreamforest.tag={os.environ[_TAG_ENV]}")
        cmd += ["-cp", classpath, "kafka.Kafka", str(properties)]
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.data_dir, start_new_session=self.detach,
            )  # fmt: skip
        self.pid_file.write_text(f"{self._proc.pid}\n")
        if not self._wait_ready(deadline, self._proc):
            self.stop()
            raise BrokerError(
                f"the broker did not answer on {self.bootstrap} within {timeout:.0f} s; end of {self.log_file}:\n"
                + _tail(self.log_file)
            )
        return self.bootstrap

    def _wait_ready(self, deadline: float, proc: subprocess.Popen[bytes] | None) -> bool:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": _silent()})
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerError(
                    f"the broker exited with status {proc.returncode} while starting; end of {self.log_file}:\n"
                    + _tail(self.log_file)
                )
            try:
                admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
                return True
            except KafkaException:
                time.sleep(0.1)
        return False

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the broker: SIGTERM, wait up to ``timeout`` seconds, then SIGKILL.

        Returns
        -------
        bool
            True if a running broker was stopped, False if none was running.
        """
        pid = self.pid()
        if pid is None:
            self._reap()
            return False
        os.kill(pid, signal.SIGTERM)
        clean = self._wait_exit(pid, timeout)
        if not clean:
            os.kill(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10.0):
                raise BrokerError(f"broker process {pid} survived SIGKILL")
        self._reap()
        self.pid_file.unlink(missing_ok=True)
        self._keep_cds_archive(clean)
        return True

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.pid == pid:
                try:
                    self._proc.wait(timeout=0.1)
                    return True
                except subprocess.TimeoutExpired:
                    continue
            if not pid_alive(pid):
                return True
            time.sleep(0.1)
        return False

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None

    def __enter__(self) -> LocalBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------------------
# round trip check (used by `streamforest broker check` and `make demo`)


#: seconds ``broker check`` waits for a first answer before it says no broker answers
ANSWER_TIMEOUT = 10.0


def round_trip(bootstrap: str, timeout: float = 30.0, properties: Mapping[str, str] | None = None,
               answer_timeout: float = ANSWER_TIMEOUT) -> float:
    """Create a topic, produce one record, consume it back, delete the topic.

    Parameters
    ----------
    bootstrap : str
        The brokers.
    timeout : float
        Seconds each step may take once the brokers answer.
    properties : mapping, optional
        Other librdkafka properties of the clients (security, SASL ...).
    answer_timeout : float
        Seconds to wait for the brokers' first answer.

    Returns
    -------
    float
        Seconds from the produce call to the record being consumed.

    Raises
    ------
    BrokerError
        No broker answered, or a step failed: the message says which.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    # the outcome is one line; librdkafka's retries while no broker answers are not shown
    conf = {**(properties or {}), "bootstrap.servers": bootstrap, "logger": _silent()}
    topic = f"sf-check-{uuid.uuid4().hex[:12]}"
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=answer_timeout)
    except KafkaException as exc:
        raise BrokerError(f"no broker answered at {bootstrap} within {answer_timeout:g} s "
                          f"({exc.args[0].str() if exc.args else exc})") from None
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout)
    try:
        took = _produce_and_consume(conf, bootstrap, topic, timeout)
    except BaseException:
        _delete_probe(admin, topic, timeout, quiet=True)  # the first failure is the one to say
        raise
    _delete_probe(admin, topic, timeout)
    return took


def _produce_and_consume(conf: dict, bootstrap: str, topic: str, timeout: float) -> float:
    """Seconds from producing one record to ``topic`` to consuming it back."""
    from confluent_kafka import Consumer, Producer

    payload = uuid.uuid4().bytes
    producer = Producer({**conf, "enable.idempotence": True})
    start = time.monotonic()
    producer.produce(topic, key=b"check", value=payload)
    if producer.flush(timeout) != 0:
        raise BrokerError(f"could not deliver a record to {topic} on {bootstrap}")
    consumer = Consumer(
        {**conf, "group.id": topic, "auto.offset.reset": "earliest",
         "enable.auto.commit": False}  # fmt: skip
    )
    try:
        consumer.subscribe([topic])
        deadline = start + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            if msg.value() != payload:
                raise BrokerError(f"read back {msg.value()!r}, expected {payload!r}")
            return time.monotonic() - start
    finally:
        consumer.close()
    raise BrokerError(f"the record produced to {topic} was not consumed within {timeout:.0f} s")


def _delete_probe(admin, topic: str, timeout: float, quiet: bool = False) -> None:
    """Delete the check's topic and wait until the brokers did (without the wait, the
    command would exit before its request left and the topic would stay behind)."""
    from confluent_kafka import KafkaError, KafkaException

    future = admin.delete_topics([topic], operation_timeout=timeout,
                                 request_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except Exception as exc:  # noqa: BLE001 (a KafkaException, or no answer in time)
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if quiet or (err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return
        raise BrokerError(f"could not delete the check's topic {topic}: "
                          f"{err.str() if err is not None else exc or 'no answer'}") from None


# ---------------------------------------------------------------------------------------------------------
# command line: streamforest broker fetch | start | stop | status | check


def _broker_from_args(args: argparse.Namespace) -> LocalBroker:
    return LocalBroker(
        port=args.port,
        controller_port=args.controller_port,
        data_dir=args.data_dir,
        heap_opts=tuple(args.heap_opts.split()),
    )


def _run(args: argparse.Namespace) -> int:
    broker = _broker_from_args(args)
    try:
        if args.action == "fetch":
            print(broker.fetch())
        elif args.action == "start":
            started = time.monotonic()
            print(broker.start(args.timeout))
            print(f"Kafka {broker.version} ready in {time.monotonic() - started:.1f} s; log: {broker.log_file}",
                  file=sys.stderr)  # fmt: skip
        elif args.action == "stop":
            print("stopped" if broker.stop(args.timeout) else "not running")
        elif args.action == "status":
            status = broker.status()
            for key, value in status.items():
                print(f"{key}: {value}")
            return 0 if status["answers"] else 3
        elif args.action == "check":
            bootstrap = args.bootstrap_servers or broker.bootstrap
            seconds = round_trip(bootstrap, args.timeout, dict(args.kafka_properties),
                                 answer_timeout=min(args.timeout, ANSWER_TIMEOUT))
            print(f"round trip through {bootstrap}: ok ({seconds * 1000:.0f} ms)")
    except BrokerError as exc:
        print(f"streamforest broker {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``streamforest broker fetch | start | stop | status | check``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--port", type=int, default=DEFAULT_PORT, help="client port (default %(default)s)")
    common.add_argument(
        "--controller-port",
        type=int,
        default=DEFAULT_CONTROLLER_PORT,
        help="KRaft controller port (default %(default)s)",
    )
    common.add_argument("--data-dir", type=Path, default=None, help="default $STREAMFOREST_HOME/broker-<port>")
    common.add_argument("--heap-opts", default=" ".join(DEFAULT_HEAP_OPTS), help="JVM heap options")
    common.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default %(default)s)")
    parser = subparsers.add_parser(
        "broker",
        help="run a local single-node Kafka broker (Java 17 + Maven, no Docker)",
        description="A local single-node Apache Kafka broker (KRaft) from Maven Central jars.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    helps = {
        "fetch": "download the broker jars into the cache (once)",
        "start": "start the broker in the background and wait until it answers",
        "stop": "stop the broker (SIGTERM, then SIGKILL)",
        "status": "print whether the broker runs and answers (exit 3 if not)",
        "check": "produce and consume one record through the broker",
    }
    for action, text in helps.items():
        p = actions.add_parser(action, parents=[common], help=text, description=text)
        p.set_defaults(func=_run)
        if action == "check":
            _connection_arguments(p)


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``broker check``: kcat's -b and -X, to check any cluster (the local broker by default;
    the STREAMFOREST_KAFKA__* settings are not read: this is a tool of the local broker)."""
    from ...settings import librdkafka_property

    group = parser.add_argument_group("Kafka connection")
    group.add_argument("-b", "--bootstrap-servers", metavar="HOST:PORT[,...]", default=None,
                       help="check these brokers instead of the local one (at --port)")
    group.add_argument("-X", dest="kafka_properties", metavar="KEY=VALUE", action="append",
                       type=librdkafka_property, default=[],
                       help="a librdkafka property of the check's clients, repeatable")


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m worker.tools.dev.broker ACTION``: the broker subcommands without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="python -m worker.tools.dev.broker")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["broker", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
