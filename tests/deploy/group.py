"""A consumer group of worker containers, killed, scaled and stopped, checked for exactness.

The local broker runs on the host (loopback, free ports); every worker runs in a container of the
worker image (``deploy/image/build.sh``) started through ``deploy/image/podman`` (host network:
the containers reach the broker and serve their metrics on 127.0.0.1, each member on its own
port). A producer on the host writes several hyperplane streams in five chunks while the group
goes through:

1. one container started alone: the time from ``podman run`` to its first committed prediction
   (numba cache warmed at build time) is measured; so is that of a container on another CPU,
   an Intel Nehalem (SSE4.2, no AVX) emulated by QEMU's user-mode emulator when it is
   installed (``apt-get install qemu-user-static``), which must compile nothing: the image's
   kernels are compiled for x86-64-v2 and its cache keyed by that target, not by the build
   host's CPU; ``/healthz`` and ``/readyz`` are asked from outside (the host) and from inside
   (``podman exec``), and the image's health check is run;
2. two more containers: three members;
3. ``podman kill -s KILL`` of one member, then ``podman start`` of the same container;
4. scale 3 -> 1 (``podman stop``: SIGTERM) and 1 -> 3 (``podman start``);
5. ``podman stop`` of every member: each must exit 0.

Then every input must have exactly one committed prediction, equal to an uninterrupted in-process
run of the same pipeline (``tests/integration/worker_support.py``), and the drift alerts and
rankings must equal that run's too. Two containers that must fail fast are checked on the side: a
bad setting (exit 2 with the variable and the fix named) and unreachable brokers (``/readyz``
answers 503 while it waits; exit 1 with ``cannot reach the Kafka brokers``).

Run (outside the default test run; needs root, podman, runc and the broker jars)::

    make deploy-test                 # builds the image if needed, then runs this script
    .venv/bin/python tests/deploy/group.py --image localhost/streamforest:latest --out report.md

It exits 0 when every check holds and prints the figures (instances, kills, scale steps, times).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
sys.path[:0] = [str(REPO), str(HERE.parents[1] / "integration")]

from worker_support import (  # noqa: E402 (the path above makes the helpers importable)
    assert_exact,
    assert_same_alerts_and_rankings,
    make_streams,
    new_prefix,
    produce_streams,
    read_topic,
    reference_outputs,
    settings_from,
    worker_env,
)

PODMAN = str(REPO / "deploy" / "image" / "podman")
LOOPBACK = "127.0.0.1"
SESSION_MS = 6000


def podman(*args: str, check: bool = True, timeout: float = 180.0) -> subprocess.CompletedProcess:
    """``deploy/image/podman ARGS`` (the machine's flags added there); output captured."""
    return subprocess.run([PODMAN, *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body of ``GET http://127.0.0.1:port/path`` from the host (0 when refused)."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


_INSIDE = ("import sys, urllib.request as u, urllib.error as e\n"
           "try:\n"
           "    r = u.urlopen('http://127.0.0.1:{port}{path}', timeout=3); print(r.status)\n"
           "except e.HTTPError as x:\n"
           "    print(x.code)\n")


def http_inside(container: str, port: int, path: str) -> int:
    """Status of the same request made inside the container (``podman exec``)."""
    out = podman("exec", container, "python", "-c", _INSIDE.format(port=port, path=path))
    return int(out.stdout.strip())


class Tail(threading.Thread):
    """Counts committed predictions as they appear (``read_committed``, every partition)."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, TopicPartition

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"tail-{uuid.uuid4().hex[:8]}",
                           "enable.auto.commit": False, "isolation.level": "read_committed"})
        md = self.c.list_topics(topic, timeout=30).topics[topic]
        self.c.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        self.count = 0
        self.first_at: float | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            msgs = self.c.consume(2000, 0.2)
            n = sum(1 for m in msgs if m.error() is None)
            if n and self.first_at is None:
                self.first_at = time.monotonic()
            self.count += n
        self.c.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    def wait(self, count: int, timeout_s: float, what: str) -> float:
        """Wait until ``count`` predictions are committed; the seconds it took."""
        t0 = time.monotonic()
        while self.count < count:
            if time.monotonic() - t0 > timeout_s:
                raise AssertionError(f"{what}: {self.count} of {count} predictions committed "
                                     f"after {timeout_s:.0f} s")
            time.sleep(0.2)
        return time.monotonic() - t0


class Group:
    """The worker containers of one consumer group, by member name."""

    def __init__(self, image: str, bootstrap: str, prefix: str, partitions: int, tag: str):
        self.image, self.bootstrap, self.prefix = image, bootstrap, prefix
        self.partitions, self.tag = partitions, tag
        self.ports: dict[str, int] = {}
        self.created: list[str] = []

    def env(self, member: str, port: int = 0) -> dict[str, str]:
        return worker_env(self.bootstrap, self.prefix, member,
                          TOPICS__PARTITIONS=str(self.partitions),
                          WORKER__METRICS_PORT=str(port),
                          KAFKA__EXTRA={"session.timeout.ms": str(SESSION_MS),
                                        "heartbeat.interval.ms": "500"})

    def name(self, member: str) -> str:
        return f"{self.tag}-{member}"

    def run(self, member: str, port: int) -> None:
        """``podman run -d`` of a new member container."""
        self.ports[member] = port
        args = ["run", "-d", "--name", self.name(member)]
        for k, v in self.env(member, port).items():
            args += ["-e", f"{k}={v}"]
        podman(*args, self.image, "run")
        self.created.append(self.name(member))

    def start(self, member: str) -> None:
        podman("start", self.name(member))

    def kill(self, member: str) -> None:
        podman("kill", "-s", "KILL", self.name(member))
        podman("wait", self.name(member), timeout=60)

    def stop(self, *members: str) -> dict[str, int]:
        """``podman stop`` (SIGTERM, then SIGKILL after 60 s): {member: exit code}."""
        podman("stop", "-t", "60", *[self.name(m) for m in members], timeout=240)
        return {m: self.exit_code(m) for m in members}

    def exit_code(self, member: str) -> int:
        out = podman("inspect", "--format", "{{.State.ExitCode}}", self.name(member))
        return int(out.stdout.strip())

    def running(self, member: str) -> bool:
        out = podman("inspect", "--format", "{{.State.Running}}", self.name(member))
        return out.stdout.strip() == "true"

    def wait_ready(self, members, timeout_s: float = 120.0) -> float:
        t0 = time.monotonic()
        while True:
            codes = {m: http_get(self.ports[m], "/readyz")[0] for m in members}
            if all(c == 200 for c in codes.values()):
                return time.monotonic() - t0
            dead = [m for m in members if not self.running(m)]
            if dead:
                raise AssertionError(f"members exited before ready: {dead}")
            if time.monotonic() - t0 > timeout_s:
                raise AssertionError(f"/readyz after {timeout_s:.0f} s: {codes}")
            time.sleep(0.3)

    def save_logs(self, out_dir: Path) -> None:
        for name in self.created:
            logs = podman("logs", name, check=False)
            (out_dir / f"{name}.log").write_text(logs.stdout + logs.stderr)

    def remove(self) -> None:
        for name in self.created:
            podman("rm", "-f", "-t", "5", name, check=False)


def free_ports(n: int) -> list[int]:
    from worker.tools.dev.broker import free_port

    out: list[int] = []
    for _ in range(n):
        out.append(free_port(exclude=out))
    return out


def check_bad_setting(image: str, bootstrap: str) -> dict:
    """A container with a misspelt learner parameter: exit 2 at once, naming the variable and fix."""
    t0 = time.monotonic()
    out = podman("run", "--rm", "-e", f"STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS={bootstrap}",
                 "-e", 'STREAMFOREST_LEARNERS__PARAMS={"forgetful_forest": {"n_treez": 3}}',
                 "-e", "STREAMFOREST_WORKER__METRICS_PORT=0", image, "run", check=False)
    seconds = time.monotonic() - t0
    text = out.stdout + out.stderr
    assert out.returncode == 2, f"bad setting: exit {out.returncode}, want 2\n{text}"
    want = "STREAMFOREST_LEARNERS__PARAMS (field forgetful_forest.n_treez)"
    assert want in text and "did you mean n_trees?" in text, f"bad setting: message\n{text}"
    line = next(ln for ln in text.splitlines() if "n_treez" in ln)
    return {"exit": out.returncode, "seconds": round(seconds, 2), "message": line.strip()}


def check_unreachable(image: str, tag: str) -> dict:
    """Brokers that do not answer: /readyz 503 while the member waits, then exit 1 with the reason."""
    broker_port, metrics_port = free_ports(2)
    name = f"{tag}-unreachable"
    podman("run", "-d", "--name", name,
           "-e", f"STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS={LOOPBACK}:{broker_port}",
           "-e", f"STREAMFOREST_WORKER__METRICS_PORT={metrics_port}",
           "-e", "STREAMFOREST_WORKER__STARTUP_TIMEOUT_S=8", image, "run")
    try:
        code = 0
        deadline = time.monotonic() + 6
        while code == 0 and time.monotonic() < deadline:
            code = http_get(metrics_port, "/readyz")[0]
            time.sleep(0.2)
        assert code == 503, f"/readyz of a member waiting for its brokers: {code}, want 503"
        rc = int(podman("wait", name, timeout=90).stdout.strip())
        logs = podman("logs", name, check=False)
        text = logs.stdout + logs.stderr
        assert rc == 1, f"unreachable brokers: exit {rc}, want 1\n{text}"
        assert "cannot reach the Kafka brokers" in text, text
        return {"readyz_while_waiting": code, "exit": rc}
    finally:
        podman("rm", "-f", name, check=False)


class Feeder(threading.Thread):
    """Produces rows ``start:`` of every stream at an even pace over ``seconds``, streams
    interleaved in chunks of 50 rows, so that kills and scale steps fall on a flowing input."""

    def __init__(self, bootstrap: str, topic: str, streams: dict, start: int, seconds: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.streams = bootstrap, topic, streams
        self.start_row, self.seconds = start, seconds
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        from worker.tools.dev.produce import instance_values, make_producer, produce_values

        try:
            p = make_producer(self.bootstrap)
            rows = max(len(y) for _, y in self.streams.values())
            starts = list(range(self.start_row, rows, 50))
            t0 = time.monotonic()
            for k, a in enumerate(starts):
                for s, (X, y) in self.streams.items():
                    b = min(a + 50, len(y))
                    vals = instance_values(s, X[a:b], y[a:b], start_id=a, ts0=1_000_000 + a)
                    self.produced += produce_values(p, self.topic, s, vals)
                p.flush(60)
                time.sleep(max(0.0, t0 + self.seconds * (k + 1) / len(starts) - time.monotonic()))
        except BaseException as e:  # re-raised by the main thread after join()
            self.error = e


#: QEMU's user-mode emulator, bind-mounted into a container to run it on another CPU
QEMU = "/usr/bin/qemu-x86_64-static"
#: what the worker process inside a container sees of its CPU, and the kernels it compiled
_CPU_PROBE = ("import glob, os, llvmlite.binding as ll; "
              "print(ll.get_host_cpu_name(), len(glob.glob(os.environ['NUMBA_CACHE_DIR'] "
              "+ '/**/*.nbc', recursive=True)))")


def first_prediction(image: str, bootstrap: str, cold: bool, cpu: str | None = None) -> dict:
    """Seconds from ``podman run`` of a lone member of a new group to its first committed
    prediction, the input already waiting (one stream, 500 rows, own topics); with the CPU the
    worker process saw and the numba specialisations its cache held before and after.

    ``cold``: the container compiles into an empty numba cache instead of the image's.
    ``cpu``: the container's processes run on this CPU model emulated by QEMU (``Nehalem``:
    SSE4.2, no AVX; the image was built on the host's CPU).
    """
    from worker.tools.topics import create_topics

    prefix = new_prefix("start")
    env = worker_env(bootstrap, prefix, "solo", TOPICS__PARTITIONS="1")
    settings = settings_from(env)
    create_topics(settings)
    produce_streams(bootstrap, settings.topics.instances, make_streams(1, 500, seed=7))
    tail = Tail(bootstrap, settings.topics.predictions)
    tail.start()
    name = f"sf-{prefix}"
    args = ["run", "-d", "--name", name]
    for k, v in env.items():
        args += ["-e", f"{k}={v}"]
    if cold:
        args += ["-e", "NUMBA_CACHE_DIR=/tmp/numba-cold"]
    command, python = ["run"], ["python"]
    if cpu is not None:
        emulate = [QEMU, "-cpu", cpu, "/opt/streamforest/bin/python"]
        args += ["-v", f"{QEMU}:{QEMU}:ro", "--entrypoint", emulate[0]]
        command = emulate[1:] + ["/opt/streamforest/bin/streamforest", "run"]
        python = emulate
    try:
        t0 = time.monotonic()
        podman(*args, image, *command)
        tail.wait(1, 1800, "first prediction")
        out = {"seconds": round(tail.first_at - t0, 2)}
        probe = podman("exec", name, *python, "-c", _CPU_PROBE, timeout=600).stdout.split()
        out.update(cpu=probe[0], cached_specialisations_after=int(probe[1]))
        return out
    finally:
        tail.stop()
        podman("rm", "-f", "-t", "20", name, check=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", default="localhost/streamforest:latest")
    ap.add_argument("--streams", type=int, default=6)
    ap.add_argument("--rows", type=int, default=6000, help="rows per stream")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--feed-seconds", type=float, default=90.0,
                    help="the input after the first tenth is produced evenly over this time")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true",
                    help="skip the start-time measurement with an empty numba cache")
    ap.add_argument("--out", type=Path, default=None, help="write the report (markdown) here")
    args = ap.parse_args(argv)

    from worker.tools.dev.broker import DEFAULT_JVM_OPTS, LocalBroker
    from worker.tools.topics import create_topics

    assert podman("image", "exists", args.image, check=False).returncode == 0, \
        f"no image {args.image}: build it with deploy/image/build.sh (make deploy-test does)"
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="streamforest-deploy-"))
    port, controller = free_ports(2)
    broker = LocalBroker(port=port, controller_port=controller, data_dir=work / "kafka",
                         jvm_opts=DEFAULT_JVM_OPTS, detach=False)
    broker.start(timeout=240)
    bootstrap = broker.bootstrap
    assert bootstrap.startswith(LOOPBACK), bootstrap
    prefix = new_prefix("deploy")
    tag = f"sf-{prefix}"
    group = Group(args.image, bootstrap, prefix, args.partitions, tag)
    settings = settings_from(group.env("ref"))
    create_topics(settings)
    streams = make_streams(args.streams, args.rows, seed=args.seed)
    total = args.streams * args.rows
    ref = reference_outputs(settings, streams)
    first_rows = args.rows // 10
    report: dict = {"image": args.image, "streams": args.streams, "rows_per_stream": args.rows,
                    "inputs": total, "partitions": args.partitions,
                    "pipeline": f"predictor {settings.learners.predictor}, detectors {settings.learners.detectors}"}
    steps: list[tuple[float, str]] = []

    def step(what: str) -> None:
        steps.append((round(time.monotonic() - started, 1), what))
        print(f"{steps[-1][0]:7.1f} s  {what}", flush=True)

    step(f"broker on {bootstrap}")
    members = ["m0", "m1", "m2"]
    ports = dict(zip(members, free_ports(3), strict=True))
    tail = Tail(bootstrap, settings.topics.predictions)
    tail.start()
    feeder = Feeder(bootstrap, settings.topics.instances, streams, first_rows, args.feed_seconds)

    def fed(flowing: bool = False) -> str:
        # a kill or a stop must fall on a flowing input, or it would test nothing in flight
        assert not flowing or feeder.is_alive(), "the input ended before this step: raise --feed-seconds"
        return f"{feeder.produced + first_rows * args.streams} of {total} inputs produced, " \
               f"{tail.count} predictions committed"

    try:
        report["bad_setting"] = check_bad_setting(args.image, bootstrap)
        step(f"bad setting: exit 2 after {report['bad_setting']['seconds']} s")
        report["unreachable"] = check_unreachable(args.image, tag)
        step("unreachable brokers: /readyz 503 while waiting, exit 1")
        report["start_to_first_prediction_s"] = {
            "warm": first_prediction(args.image, bootstrap, cold=False)}
        if Path(QEMU).exists():
            # another CPU than the build host's: the image's cache must serve it as it is
            emulated = first_prediction(args.image, bootstrap, cold=False, cpu="Nehalem")
            built = report["start_to_first_prediction_s"]["warm"]
            assert emulated["cpu"] != built["cpu"], (emulated, built)
            assert emulated["cached_specialisations_after"] == built["cached_specialisations_after"], \
                f"the emulated {emulated['cpu']} compiled kernels: {emulated} vs {built}"
            report["start_to_first_prediction_s"]["warm_on_emulated_nehalem"] = emulated
        if not args.no_cold:
            report["start_to_first_prediction_s"]["cold"] = first_prediction(args.image, bootstrap,
                                                                             cold=True)
        step(f"lone member of a new group, start to first committed prediction: "
             f"{report['start_to_first_prediction_s']} s")

        # 1. one member alone, the first tenth of the input waiting: start time, probes
        produce_streams(bootstrap, settings.topics.instances, streams, stop=first_rows)
        t0 = time.monotonic()
        group.run("m0", ports["m0"])
        report["group_start_to_ready_s"] = round(group.wait_ready(["m0"]), 2)
        tail.wait(1, 300, "first prediction")
        report["group_start_to_first_prediction_s"] = round(tail.first_at - t0, 2)
        step(f"m0 started: /readyz 200 after {report['group_start_to_ready_s']} s, first "
             f"committed prediction after {report['group_start_to_first_prediction_s']} s")
        p = ports["m0"]
        probes = {"outside": {path: http_get(p, path)[0] for path in ("/healthz", "/readyz")},
                  "inside": {path: http_inside(group.name("m0"), p, path)
                             for path in ("/healthz", "/readyz")}}
        assert all(c == 200 for side in probes.values() for c in side.values()), probes
        metrics = urllib.request.urlopen(f"http://{LOOPBACK}:{p}/metrics", timeout=3).read().decode()
        assert "streamforest_" in metrics, "no streamforest metric in /metrics"
        hc = podman("healthcheck", "run", group.name("m0"), check=False)
        probes["healthcheck_exit"] = hc.returncode
        assert hc.returncode == 0, f"podman healthcheck run: {hc.stdout}{hc.stderr}"
        report["probes"] = probes
        step(f"probes from the host and from inside m0, podman healthcheck run: {probes}")

        # 2. the rest of the input flows; three members
        feeder.start()
        for m in ("m1", "m2"):
            group.run(m, ports[m])
        group.wait_ready(members)
        step(f"m1, m2 started, 3 members ready; {fed()}")
        time.sleep(args.feed_seconds / 8)

        # 3. kill -9 one member mid-stream, start the same container again
        group.kill("m1")
        step(f"podman kill -s KILL m1 (exit {group.exit_code('m1')}); {fed(True)}")
        group.start("m1")
        group.wait_ready(members)
        step(f"podman start m1, 3 members ready; {fed()}")
        time.sleep(args.feed_seconds / 8)

        # 4. scale 3 -> 1 -> 3
        codes = group.stop("m1", "m2")
        assert codes == {"m1": 0, "m2": 0}, f"SIGTERM exits: {codes}"
        step(f"scaled 3 -> 1 (podman stop m1 m2: exits {codes}); {fed(True)}")
        time.sleep(args.feed_seconds / 8)
        group.start("m1")
        group.start("m2")
        group.wait_ready(members)
        step(f"scaled 1 -> 3 (podman start m1 m2), 3 members ready; {fed()}")
        feeder.join()
        if feeder.error is not None:
            raise feeder.error
        drain = tail.wait(total, 300, "every input")
        step(f"input ended; all {total} predictions committed {drain:.1f} s later")

        # 5. stop all (SIGTERM)
        codes = group.stop(*members)
        assert all(c == 0 for c in codes.values()), f"SIGTERM exits: {codes}"
        report["final_exits"] = codes
        step(f"podman stop m0 m1 m2: exits {codes}")

        msgs = read_topic(bootstrap, settings.topics.predictions, expected=total, timeout_s=120)
        assert_exact(ref, msgs, streams)
        assert_same_alerts_and_rankings(ref, bootstrap, settings, streams)
        report.update(committed_predictions=len(msgs), lost=0, duplicated=0, differing=0,
                      kills=1, scale_steps=["3 -> 1", "1 -> 3"], sigterm_stops=5,
                      seconds=round(time.monotonic() - started, 1))
        step("every input has exactly one committed prediction, equal to the reference run; "
             "alerts and rankings equal too")
    finally:
        # each step on its own: a failing one must not leave containers or the broker behind
        for cleanup in (tail.stop, lambda: group.save_logs(work), group.remove, broker.stop):
            try:
                cleanup()
            except Exception as e:  # reported; the next cleanup still runs
                print(f"cleanup: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        print(f"container logs in {work}", flush=True)
    report["image_facts"] = image_facts(args.image)
    text = _markdown(report, steps)
    print(text)
    if args.out is not None:
        from tests.benchmarks.common import write_results

        write_results(args.out, text)  # stamped with the commit, the machine, the command
    return 0


def image_facts(image: str) -> dict:
    """Size and labels of ``image`` as podman reports them (the revision label names the
    commit it was built from)."""
    info = json.loads(podman("image", "inspect", image).stdout)[0]
    labels = info.get("Labels") or info.get("Config", {}).get("Labels") or {}
    return {"size_bytes": int(info["Size"]), "created": info.get("Created", "")[:19],
            "version": labels.get("org.opencontainers.image.version", ""),
            "revision": labels.get("org.opencontainers.image.revision", "")}


def _markdown(report: dict, steps: list) -> str:
    """The results file: the image, the start times, the group's checks, its steps and the
    whole report."""
    img, starts = report["image_facts"], report["start_to_first_prediction_s"]
    names = {"warm": "the image's cache, the build host's CPU",
             "warm_on_emulated_nehalem": "the image's cache, an emulated Intel Nehalem "
                                         "(SSE4.2, no AVX; QEMU user mode)",
             "cold": "an empty cache (`NUMBA_CACHE_DIR=/tmp/numba-cold`), the build host's CPU"}
    bad = report["bad_setting"]
    lines = [
        "# Worker image and a containerized consumer group", "",
        f"Image `{report['image']}` (version {img['version']}, built {img['created']} from "
        f"revision `{img['revision'][:12]}`): {img['size_bytes'] / 1e6:,.0f} MB "
        f"({img['size_bytes']:,} bytes). Its kernels are compiled at build time for x86-64-v2 "
        "and its numba cache is keyed by that target, so a node of another CPU compiles nothing. "
        f"The local broker runs on the host; {report['streams']} hyperplane streams x "
        f"{report['rows_per_stream']:,} rows = {report['inputs']:,} inputs on "
        f"{report['partitions']} partitions ({report['pipeline']}), the first tenth waiting "
        "before the first member starts, the rest produced evenly while the group of three "
        "worker containers is killed, restarted and scaled.", "",
        "## Start to first committed prediction", "",
        "From `podman run` of a lone member of a new group, its input (one stream, 500 rows) "
        "already waiting, to the first prediction a `read_committed` consumer sees.", "",
        "| container | CPU the worker saw | seconds | kernel specialisations in its cache after |",
        "|---|---|---|---|",
        *[f"| {names.get(k, k)} | {v['cpu']} | {v['seconds']} | {v['cached_specialisations_after']} |"
          for k, v in starts.items()], "",
        "## Consumer group", "",
        "| check | result |", "|---|---|",
        f"| inputs / committed predictions | {report['inputs']:,} / "
        f"{report['committed_predictions']:,}: none lost, none duplicated, none differing from "
        "the uninterrupted in-process run; drift alerts and rankings identical too |",
        f"| first member: `/readyz` 200, first committed prediction | "
        f"{report['group_start_to_ready_s']} s, {report['group_start_to_first_prediction_s']} s |",
        "| `podman kill -s KILL` of a member mid-stream, then `podman start` of the same "
        "container | exit 137, every input still exactly once |",
        "| scale 3 -> 1 (`podman stop`, SIGTERM) and 1 -> 3 (`podman start`) | exits 0 |",
        f"| SIGTERM stops in all | {report['sigterm_stops']}, every one exit 0 |",
        "| `/healthz`, `/readyz` from the host and from inside (`podman exec`); the image's "
        "`HEALTHCHECK` | 200 on both sides; `podman healthcheck run` exit "
        f"{report['probes']['healthcheck_exit']} |",
        f"| a bad setting | exit {bad['exit']} after {bad['seconds']} s: `{bad['message']}` |",
        "| unreachable brokers | `/readyz` 503 while it waits, then exit "
        f"{report['unreachable']['exit']} |", "",
        "## Steps", "",
        "| seconds since start | what |", "|---|---|",
        *[f"| {t} | {w} |" for t, w in steps], "",
        "## Report", "",
        "```json", json.dumps(report, indent=2), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
