"""README's "Using it", followed as a newcomer follows it, on a real broker.

The commands are read from README's first ``bash`` block under "## Using it" and run as
written (``python -m worker`` for ``.venv/bin/streamforest``), in order, in a directory of their
own, with the default settings but for the broker's address, topics and a group of the test's
own, and no metrics port. Three things differ from a newcomer's session, and only these:

* ``broker start`` is the session's broker (``kafka_bootstrap``), already running;
* ``run`` starts in the background, as a second terminal would, and is stopped with SIGTERM
  at the end (its exit status must be 0);
* what ``produce`` sends is cut to 5,000 rows per command (``-n 1000000`` and whole datasets:
  the suite runs in minutes on two cores), and ``produce file`` reads a ``rooms.csv`` written
  here.

Each step must exit 0; what the worker publishes from the rows sent is then read back by the
README's own ``tail`` and ``evaluate`` lines.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from worker_support import (
    REPO,
    count_committed,
    new_prefix,
    settings_from,
    wait_for,
    worker_env,
)

pytestmark = pytest.mark.kafka

MAX_ROWS = 5_000


def readme_commands() -> list[list[str]]:
    """The ``streamforest`` commands of README's "Using it" block, as argument lists."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Using it\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            program, *args = line.split()
            assert program == ".venv/bin/streamforest", line
            commands.append(args)
    return commands


def _scaled(args: list[str]) -> list[str]:
    """``args`` with a row count above :data:`MAX_ROWS` cut to it (a dataset sent whole: to
    its first :data:`MAX_ROWS` rows)."""
    out = list(args)
    for k, a in enumerate(out[:-1]):
        if a in ("-n", "--rows") and int(out[k + 1]) > MAX_ROWS:
            out[k + 1] = str(MAX_ROWS)
    if out[:2] == ["produce", "dataset"] and not {"-n", "--rows"} & set(out):
        out += ["-n", str(MAX_ROWS)]
    return out


def _wait_until_still(count, still_s: float = 4.0, timeout_s: float = 300.0) -> None:
    """Until ``count()`` is above 0 and has not moved for ``still_s`` seconds."""
    last, since = -1, time.monotonic()

    def still() -> bool:
        nonlocal last, since
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        return now > 0 and time.monotonic() - since >= still_s

    wait_for(still, timeout_s, "the worker to publish what was produced", interval=1.0)


def _rooms_csv(path: Path) -> None:
    lines = ["id,label,temp,humidity,light"]
    for i in range(300):
        occupied = i % 3 == 0
        lines.append(f"{i},{'yes' if occupied else 'no'},{20 + (i % 7) * 0.5},"
                     f"{30 + (i % 11)},{400 if occupied else 50 + i % 5}")
    path.write_text("\n".join(lines) + "\n")


def test_readme_using_it_works_end_to_end(kafka_bootstrap, tmp_path):
    commands = readme_commands()
    assert commands[0] == ["broker", "start"]  # the session's broker plays this step
    assert ["run"] in commands
    # the defaults, but for topics and a group of the test's own and no metrics port
    ours = worker_env(kafka_bootstrap, new_prefix("readme"), "m1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
    env.update({k: v for k, v in ours.items()
                if k.startswith(("STREAMFOREST_TOPICS__", "STREAMFOREST_KAFKA__GROUP_ID"))
                and k != "STREAMFOREST_TOPICS__PARTITIONS"})
    env["STREAMFOREST_WORKER__METRICS_PORT"] = "0"
    env["STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS"] = kafka_bootstrap
    settings = settings_from({k: v for k, v in env.items() if k.startswith("STREAMFOREST_")})
    _rooms_csv(tmp_path / "rooms.csv")

    def cli(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "worker", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)

    worker = None
    outputs = {}
    try:
        for args in commands[1:]:
            if args == ["run"]:
                worker = subprocess.Popen([sys.executable, "-m", "worker", "run"],
                                          cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                          stderr=open(tmp_path / "worker.log", "w"))
                continue
            if args[0] in ("tail", "evaluate"):
                # the worker through everything produced above, first
                _wait_until_still(lambda: count_committed(kafka_bootstrap,
                                                          settings.topics.predictions))
            proc = cli(_scaled(args))
            assert proc.returncode == 0, (args, proc.stderr[-2000:])
            outputs[args[0]] = proc
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            status = worker.wait(120)
    assert worker is not None and status == 0, (tmp_path / "worker.log").read_text()[-3000:]
    predictions = [json.loads(line) for line in outputs["tail"].stdout.splitlines()]
    assert predictions and {p["topic"] for p in predictions} == {settings.topics.predictions}
    assert {"electricity", "hyperplane", "rooms"} <= {p["key"] for p in predictions}
    # the evaluation replayed every stream sent above and scored them
    (cfg,) = json.loads((tmp_path / "evaluation" / "report.json").read_text())["configurations"]
    assert set(cfg["streams"]) == {"electricity", "hyperplane", "rooms"}
    assert cfg["streams"]["electricity"]["cumulative"]["accuracy"] > 0.8
    # no step of the README sends a record the worker refuses
    assert count_committed(kafka_bootstrap, settings.topics.deadletter) == 0
