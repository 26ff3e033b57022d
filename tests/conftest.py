"""Shared fixtures: a real Apache Kafka broker for the tests marked ``kafka``.

The broker is started lazily, once per session, by the first test that asks for ``kafka_bootstrap``, so unit
tests never need one. It comes from, in this order:

1. ``STREAMFOREST_TEST_BOOTSTRAP`` (``host:port``): a broker you run yourself; nothing is started or stopped.
2. A Docker daemon that answers within two seconds: a KRaft broker container through testcontainers.
3. The local jar broker of ``worker.tools.dev.broker`` (Java 17 + Maven, no Docker) on free loopback ports with a
   temporary data directory, stopped at the end of the session. This is what the project's machines and CI use.

If none can be started, the kafka tests are skipped with the reasons, except under ``CI=true``: there the
fixture fails, and any skipped kafka test is turned into a failure, so that integration tests cannot silently
stop running. The terminal summary reports which broker was used and how long it took to start.

Under pytest-xdist (``make test`` runs two workers) each worker starts its own broker the same way, on its own
free ports; topics and groups are unique per test, so tests never see each other's records. Tests that share a
module-scoped fixture (one worker run serving several tests, say) stay on one xdist worker (the scheduler of
``--dist loadgroup`` below), and the controller starts the CPU feature-set digests once (``tests/determinism``).
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BOOTSTRAP_ENV = "STREAMFOREST_TEST_BOOTSTRAP"
IMAGE_ENV = "STREAMFOREST_TEST_KAFKA_IMAGE"
# the testcontainers Kafka module drives Confluent's images (a KRaft-capable Apache Kafka distribution)
DEFAULT_IMAGE = "confluentinc/cp-kafka:7.9.0"
TOPIC_TIMEOUT_S = 30.0


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@dataclass
class _BrokerInfo:
    source: str
    bootstrap: str
    start_s: float


_broker_info: list[_BrokerInfo] = []


# ---------------------------------------------------------------------------------------------------------
# broker sources


def _docker_answers(timeout: float = 2.0) -> bool:
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _start_container() -> tuple[str, Callable[[], None]]:
    from testcontainers.community.kafka import KafkaContainer

    container = KafkaContainer(os.environ.get(IMAGE_ENV, DEFAULT_IMAGE)).with_kraft()
    # the same single-node settings as the local broker: transactions need RF 1 for their state topic
    for key, value in {
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "1",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
    }.items():
        container.with_env(key, value)
    container.start(timeout=180)
    return container.get_bootstrap_server(), container.stop


def _start_local(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Callable[[], None]]:
    from worker.tools.dev.broker import (
        DEFAULT_JVM_OPTS,
        QUICK_JVM_OPTS,
        BrokerError,
        LocalBroker,
        free_port,
    )

    for attempt in range(3):
        port = free_port()
        broker = LocalBroker(
            port=port,
            controller_port=free_port(exclude=[port]),
            data_dir=tmp_path_factory.mktemp("kafka"),
            jvm_opts=DEFAULT_JVM_OPTS + QUICK_JVM_OPTS,
            detach=False,  # Ctrl-C on the test run stops the broker as well
        )
        try:
            broker.start(timeout=240)
        except BrokerError as exc:
            # another process took one of the free ports while the JVM was starting: try other ports
            if "Address already in use" in str(exc) and attempt < 2:
                continue
            raise
        return broker.bootstrap, broker.stop
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``bootstrap.servers`` of a real Kafka broker for this test session (see the module docstring)."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        _broker_info.append(_BrokerInfo(f"external ({BOOTSTRAP_ENV})", external, 0.0))
        yield external
        return
    reasons: list[str] = []
    sources: list[tuple[str, Callable[[], tuple[str, Callable[[], None]]]]] = []
    if _docker_answers():
        sources.append(("testcontainers", _start_container))
    else:
        reasons.append("testcontainers: no Docker daemon answers")
    sources.append(("local jar broker", lambda: _start_local(tmp_path_factory)))
    for name, start in sources:
        began = time.monotonic()
        try:
            bootstrap, stop = start()
        except Exception as exc:
            reasons.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        _broker_info.append(_BrokerInfo(name, bootstrap, time.monotonic() - began))
        try:
            yield bootstrap
        finally:
            stop()
        return
    message = "no Kafka broker for the kafka tests:\n" + "\n".join(reasons)
    if _under_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


# ---------------------------------------------------------------------------------------------------------
# factories


def _slug(text: str, limit: int = 60) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:limit] or "t"


@pytest.fixture(scope="session")
def admin(kafka_bootstrap: str):  # -> confluent_kafka.admin.AdminClient
    """A session-wide AdminClient on the test broker."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka_bootstrap})


def _wait_visible(admin, topic: str, partitions: int, timeout: float = TOPIC_TIMEOUT_S) -> None:
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            meta = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        except KafkaException:
            meta = None
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} with {partitions} partitions not visible after {timeout:.0f} s")


@pytest.fixture
def make_topic(admin, request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """Factory ``make_topic(partitions=1, config=None) -> name``: a new topic unique to this test.

    The topic is created with the AdminClient, returned once every partition has a leader, and deleted when
    the test ends.
    """
    from confluent_kafka.admin import NewTopic

    created: list[str] = []

    def make(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = f"sf-{_slug(request.node.name)}-{uuid.uuid4().hex[:10]}"
        future = admin.create_topics([NewTopic(name, partitions, config=dict(config or {}))])[name]
        future.result(timeout=TOPIC_TIMEOUT_S)
        created.append(name)
        _wait_visible(admin, name, partitions)
        return name

    yield make
    if created:
        for future in admin.delete_topics(created, operation_timeout=10).values():
            try:
                future.result(timeout=TOPIC_TIMEOUT_S)
            except Exception:
                pass


@pytest.fixture
def unique_group(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Factory ``unique_group() -> group id``, a new consumer group id at each call."""

    def make() -> str:
        return f"sf-{_slug(request.node.name, 40)}-{uuid.uuid4().hex[:10]}"

    return make


# ---------------------------------------------------------------------------------------------------------
# hooks


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Under ``CI=true`` a skipped kafka test is a failure: integration tests must run in CI."""
    outcome = yield
    report = outcome.get_result()
    if not (_under_ci() and report.skipped and item.get_closest_marker("kafka") is not None):
        return
    if hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    report.outcome = "failed"
    report.longrepr = f"kafka test skipped under CI=true (integration tests must run in CI): {reason}"


def _module_fixture_group(item: pytest.Item) -> str | None:
    """The module of a test that uses a module-scoped fixture of its own module: pytest-xdist must keep those
    tests on one worker, so that the fixture runs once (a worker run serving several tests, the feature-set
    digests)."""
    info = getattr(item, "_fixtureinfo", None)
    module = getattr(item, "module", None)
    if info is None or module is None:
        return None
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if fixturedef.scope == "module" and getattr(fixturedef.func, "__module__", None) == module.__name__:
                return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use the broker carry the ``kafka`` marker even if they forgot it (``-m "not kafka"`` works).

    An xdist worker also writes the modules whose tests must stay together for the controller's scheduler.
    """
    for item in items:
        if "kafka_bootstrap" in getattr(item, "fixturenames", ()) and item.get_closest_marker("kafka") is None:
            item.add_marker(pytest.mark.kafka)
    run_dir = getattr(config, "workerinput", {}).get("streamforest_run_dir")  # see _run_dir
    if run_dir is not None:
        groups = sorted({g for g in map(_module_fixture_group, items) if g is not None})
        part = Path(run_dir) / f"groups.{os.getpid()}"
        part.write_text("\n".join(groups))
        part.replace(Path(run_dir) / "groups")  # every worker writes the same list


# ---------------------------------------------------------------------------------------------------------
# pytest-xdist: module groups, the CPU feature-set digests started once, the workers' brokers in the summary
#
# ``make test`` runs ``-n 2 --dist loadgroup``. xdist's own loadgroup scheduler groups tests by an ``@group``
# suffix it appends to node ids, which pytest 9 no longer lets a plugin change (node ids are structured), so
# the scheduler of ``--dist loadgroup`` is this one: each test is its own unit of work, except that the tests
# of a module with a module-scoped fixture are one unit (the workers list those modules at collection); units
# go to the workers in collection order.

_FEATURE_SET_RUNS: list = []


def _run_dir(config: pytest.Config) -> Path:
    """A directory of this run shared by the controller and its workers (removed at the end); a worker finds it
    in ``config.workerinput["streamforest_run_dir"]``."""
    if not hasattr(config, "_sf_run_dir"):
        import tempfile

        config._sf_run_dir = Path(tempfile.mkdtemp(prefix="streamforest-run-"))
    return config._sf_run_dir


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # units in collection order, not largest first: the integration tests (the longest) start first, and the
    # feature-set test (collected last) runs when the digests it waits for have had the whole run to compile
    config.option.loadscopereorder = False

    class ModuleFixtureGroups(LoadScopeScheduling):
        groups: frozenset[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected
                listed = _run_dir(config) / "groups"
                self.groups = frozenset(listed.read_text().split("\n")) if listed.exists() else frozenset()
            module = nodeid.split("::", 1)[0]
            return module if module in self.groups else nodeid

    return ModuleFixtureGroups(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Every worker learns the run's shared directory."""
    node.workerinput["streamforest_run_dir"] = str(_run_dir(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """The first worker to report its collection starts the digests if the feature-set test was collected
    (the worker that runs it collects them: ``tests/determinism/runs.py``)."""
    from tests.determinism.runs import FeatureSetRuns, cache_root, ours, shared_work

    config = node.config
    if _FEATURE_SET_RUNS or config.option.collectonly or not any(map(ours, ids)):
        return
    _FEATURE_SET_RUNS.append(FeatureSetRuns(cache_root(config), shared_work(_run_dir(config))).start())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    for info in getattr(node, "workeroutput", {}).get("kafka_brokers", ()):
        _broker_info.append(_BrokerInfo(**info))


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller writes the summary
        workeroutput["kafka_brokers"] = [vars(info) for info in _broker_info]
    while _FEATURE_SET_RUNS:
        _FEATURE_SET_RUNS.pop().close()  # stops what still runs
    run_dir = getattr(session.config, "_sf_run_dir", None)
    if run_dir is not None:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    for info in _broker_info:
        started = f", started in {info.start_s:.1f} s" if info.start_s else ""
        terminalreporter.write_line(f"kafka broker: {info.source} at {info.bootstrap}{started}")
