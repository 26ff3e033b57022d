"""``streamforest demo``: a local broker, two workers, three streams and a live view.

1. starts the local broker (or uses ``--bootstrap``) and creates the demo's topics;
2. produces a drifting rotating-hyperplane stream, keeping its true feature weights, the
   Electricity dataset shipped in the package (features by name; classification) and the Bike
   Sharing hourly data shipped beside it (three targets: a multi-target regression stream);
3. runs two workers (``python -m worker run``) in one consumer group;
4. shows, per stream: instances processed, instances/s, the prequential score (accuracy, or
   for regression the mean absolute error over the targets), the current top features of the
   importance ranking (the block forest's, or iSOUP-SymRF's symbolic ranking) beside the true ones
   (hyperplane) and the drift alerts committed so far, with the most recent alerts below. On
   a terminal it is one table updated in place (``rich``); otherwise the new alerts and the
   table are printed as plain lines every second;
5. when every instance has its prediction, stops the workers, deletes the demo's 8 topics
   (unless ``--keep-topics``) and stops the broker it started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict, deque
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer
from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from schemas.codec import load

from ...kafka_io import CLIENT_LOG, quiet_client_logs
from .produce import hyperplane, make_producer, produce_stream

#: ranking methods the view shows, preferred first: the block forests' (both tasks, they follow
#: drift), else iSOUP-SymRF's symbolic ranking (regression)
SHOWN_RANKINGS = ("block_mdi", "symrf")
#: seconds over which instances/s is measured
RATE_WINDOW_S = 5.0


def demo_env(bootstrap: str, prefix: str, partitions: int) -> dict[str, str]:
    """Settings of the demo (environment of its workers)."""
    env = {
        "KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA__GROUP_ID": f"{prefix}-workers",
        "KAFKA__EXTRA": json.dumps({"session.timeout.ms": "10000",
                                    "heartbeat.interval.ms": "2000"}),
        "TOPICS__PARTITIONS": str(partitions),
        "LEARNERS__RANKING_EVERY": "2000",
        "WORKER__METRICS_PORT": "0",
        "WORKER__LOG_LEVEL": "WARNING",
    }
    for t in ("instances", "features", "predictions", "drift", "rankings", "deadletter",
              "checkpoints", "latest"):
        env[f"TOPICS__{t.upper()}"] = f"{prefix}.{t}"
    return {"STREAMFOREST_" + k: v for k, v in env.items()}


class Board:
    """The demo's figures per stream, from decoded output messages, and their two views.

    Parameters
    ----------
    totals : dict
        Stream id -> instances produced (the table's rows, in this order).
    truth : dict
        Stream id -> ``(feature names, W)``, the true ``|weight|`` of every feature per
        instance (the hyperplane), shown beside the ranking's top features.
    top_k : int
        Features shown per ranking.
    feed : int
        Recent alerts kept for the feed below the table.

    Examples
    --------
    >>> b = Board({"elec": 100})
    >>> b.prediction({"stream": "elec", "y_true": "UP", "y_pred": "UP"})
    >>> b.alert({"stream": "elec", "source": "adwin", "level": "drift", "position": 57,
    ...          "detail": "prequential error changed"})
    '  ! drift alert  elec         drift   at instance     57  (adwin: prequential error changed)'
    >>> row = b.rows()[0]
    >>> row["done"], row["score"], row["alerts"]
    ('1/100', 'acc 1.000', '1')
    """

    def __init__(self, totals: dict, truth: dict | None = None, top_k: int = 3, feed: int = 8):
        self.totals = totals
        self.truth = truth or {}  # stream -> (feature names, W per instance)
        self.top_k = top_k
        self.done = defaultdict(int)
        self.score = defaultdict(float)  # right answers, or summed absolute errors
        self.labelled = defaultdict(int)
        self.regression: set[str] = set()
        self.rank: dict = {}
        self.rank_of: dict = {}  # stream -> index in SHOWN_RANKINGS of the method shown
        self.recent: deque = deque(maxlen=feed)  # the newest alerts, as decoded
        self.n_alerts = defaultdict(int)
        self.rate = defaultdict(deque)  # stream -> (time, done) samples of the last seconds

    # -- messages ------------------------------------------------------------------------------

    def prediction(self, d: dict) -> None:
        s = d["stream"]
        self.done[s] += 1
        if d.get("y_true") is None:
            return
        self.labelled[s] += 1
        if isinstance(d["y_true"], list):  # multi-target regression
            self.regression.add(s)
            err = np.abs(np.subtract(d["y_pred"] or 0.0, d["y_true"]))
            self.score[s] += float(err.mean())
        else:
            self.score[s] += d["y_pred"] == d["y_true"]

    def alert(self, d: dict) -> str:
        """Count a drift alert and keep it for the feed; returns its plain line."""
        self.n_alerts[d["stream"]] += 1
        self.recent.append(d)
        return alert_line(d)

    def ranking(self, d: dict) -> None:
        if d["method"] not in SHOWN_RANKINGS:
            return
        rank = SHOWN_RANKINGS.index(d["method"])
        if rank <= self.rank_of.get(d["stream"], rank):  # a preferred method is never replaced
            self.rank_of[d["stream"]] = rank
            self.rank[d["stream"]] = (d["features"][: self.top_k], d["n_seen"])

    def tick(self, now: float) -> None:
        """Sample every stream's count (instances/s is measured over ``RATE_WINDOW_S``)."""
        for s in self.totals:
            r = self.rate[s]
            r.append((now, self.done[s]))
            while len(r) > 2 and now - r[0][0] > RATE_WINDOW_S:
                r.popleft()

    def finished(self) -> bool:
        return all(self.done[s] >= n for s, n in self.totals.items())

    # -- figures -------------------------------------------------------------------------------

    def rows(self) -> list[dict]:
        """One dict of display strings per stream, shared by both views."""
        out = []
        for s, total in self.totals.items():
            r = self.rate[s]
            ips = (r[-1][1] - r[0][1]) / (r[-1][0] - r[0][0]) if len(r) > 1 else 0.0
            n = self.labelled[s]
            kind = "mae" if s in self.regression else "acc"
            score = f"{kind} {self.score[s] / n:.3f}" if n else "-"
            top, n_seen = self.rank.get(s, ([], 0))
            out.append({"stream": s, "done": f"{self.done[s]}/{total}", "ips": f"{ips:.0f}",
                        "score": score, "top": ", ".join(top),
                        "true": self._true_top(s, n_seen) if top else "",
                        "alerts": str(self.n_alerts[s])})
        return out

    def _true_top(self, s: str, n_seen: int) -> str:
        """The truly heaviest features when the ranking was made (streams with a truth)."""
        if s not in self.truth:
            return ""
        names, W = self.truth[s]
        w = W[min(max(n_seen - 1, 0), len(W) - 1)]
        return ", ".join(names[j] for j in np.argsort(-w, kind="stable")[: self.top_k])

    # -- views ---------------------------------------------------------------------------------

    def text(self) -> str:
        """The table as plain lines (no terminal; the final view of a run)."""
        lines = [f"{'stream':<12} {'done':>13} {'inst/s':>8} {'preq score':>11}  "
                 f"{'top features (block, SymRF)':<29}  {'true top features':<17}  alerts"]
        for r in self.rows():
            lines.append(f"{r['stream']:<12} {r['done']:>13} {r['ips']:>8} {r['score']:>11}  "
                         f"{r['top']:<29}  {r['true']:<17}  {r['alerts']:>6}")
        return "\n".join(lines)

    def table(self) -> Table:
        """The streams as a ``rich`` table (narrow terminals wrap the feature lists)."""
        t = Table(title="streamforest demo", title_justify="left", box=box.SIMPLE_HEAD,
                  collapse_padding=True,
                  caption="score: prequential accuracy (acc) or mean absolute error (mae); top "
                          "features: ORF MDA, or iSOUP-SymRF for regression",
                  caption_justify="left")
        t.add_column("stream", style="bold", no_wrap=True)
        for name in ("done", "inst/s", "score"):
            t.add_column(name, justify="right", no_wrap=True)
        t.add_column("top features")
        if self.truth:
            t.add_column("true top", style="dim")
        t.add_column("alerts", justify="right", no_wrap=True)
        for r in self.rows():
            alerts = Text(r["alerts"], style="bold red" if r["alerts"] != "0" else "")
            cells = [r["stream"], r["done"], r["ips"], r["score"], r["top"]]
            t.add_row(*cells, *([r["true"]] if self.truth else []), alerts)
        return t

    def feed(self) -> Table:
        """The most recent drift alerts, newest last, one line each."""
        t = Table(title=f"recent drift alerts (the last {self.recent.maxlen})",
                  title_justify="left", box=None, show_header=False)
        for justify in ("left", "left", "right", "left"):
            t.add_column(justify=justify, no_wrap=True)
        t.add_column()  # the detail: the one column that gives way on a narrow terminal
        for d in self.recent:
            level = Text(d["level"], style="red" if d["level"] == "drift" else "yellow")
            detail = Text(d["detail"], no_wrap=True, overflow="ellipsis")
            t.add_row(d["stream"], level, f"at {d['position']}", d["source"], detail)
        if not self.recent:
            t.add_row("none yet", "", "", "", "")
        return t

    def renderable(self) -> Group:
        """What the live view shows: the table, then the feed."""
        return Group(self.table(), Text(""), self.feed())


def alert_line(d: dict) -> str:
    """One drift alert as a plain line."""
    return (f"  ! drift alert  {d['stream']:<12} {d['level']:<7} at instance "
            f"{d['position']:>6}  ({d['source']}: {d['detail']})")


class LiveView:
    """Reads the output topics (read_committed) into a :class:`Board`."""

    def __init__(self, bootstrap: str, topics, board: Board):
        self.group = f"demo-view-{uuid.uuid4()}"
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": self.group,
                           "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                           "enable.auto.commit": False, "logger": CLIENT_LOG})
        self.c.subscribe([topics.predictions, topics.drift, topics.rankings])
        self.topics = topics
        self.board = board

    def poll(self, seconds: float) -> list[str]:
        """Consume for ``seconds``; returns lines announcing new drift alerts."""
        new = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in self.c.consume(5000, 0.2):
                if m.error() is not None:
                    continue
                d = load(m.value(), m.headers())  # msgpack or JSON: each topic's format
                t = m.topic()
                if t == self.topics.predictions:
                    self.board.prediction(d)
                elif t == self.topics.drift:
                    new.append(self.board.alert(d))
                elif t == self.topics.rankings:
                    self.board.ranking(d)
        self.board.tick(time.monotonic())
        return new

    def close(self) -> None:
        self.c.close()


def is_terminal(out) -> bool:
    """Whether ``out`` is an interactive terminal (the live table), else plain lines."""
    return hasattr(out, "isatty") and out.isatty() and os.environ.get("TERM") != "dumb"


def watch(view: LiveView, workers: list, out, deadline: float) -> bool:
    """Show the board until every instance has its prediction (``False``: a worker exited or
    the deadline passed)."""
    board = view.board
    if not is_terminal(out):
        while not board.finished() and time.monotonic() < deadline:
            for line in view.poll(1.0):
                print(line, file=out)
            if any(w.poll() is not None for w in workers):
                return False
            print(board.text(), file=out, flush=True)
        return board.finished()
    console = Console(file=out)
    with Live(board.renderable(), console=console, refresh_per_second=4,
              redirect_stdout=False, redirect_stderr=False) as live:
        while not board.finished() and time.monotonic() < deadline:
            view.poll(0.5)
            live.update(board.renderable())
            if any(w.poll() is not None for w in workers):
                return False
    return board.finished()


def start_worker(env: dict, log: Path | None) -> subprocess.Popen:
    """``python -m worker run`` with ``env``; its output to ``log``, or inherited."""
    cmd = [sys.executable, "-m", "worker", "run"]
    if log is None:
        return subprocess.Popen(cmd, env=env)
    with open(log, "w") as sink:  # the child holds its own copy of the descriptor
        return subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT)


def run_demo(bootstrap: str | None = None, rows: int = 30000, electricity_rows: int | None = None,
             partitions: int = 2, timeout_s: float = 900.0, out=sys.stdout,
             bike_rows: int | None = None, keep_topics: bool = False) -> int:
    """Run the demo (see module doc); returns 0 when every instance got its prediction."""
    from ...settings import load_settings
    from ..topics import create_topics, delete_groups, delete_topics
    from .datasets import load

    quiet_client_logs()  # librdkafka's own lines would tear the view
    broker = None
    if bootstrap is None:
        from .broker import LocalBroker, free_port

        port = free_port()
        # a throw-away data directory: each demo starts from an empty broker and leaves nothing
        data_dir = Path(tempfile.mkdtemp(prefix="streamforest-demo-"))
        broker = LocalBroker(port=port, controller_port=free_port(exclude=[port]),
                             data_dir=data_dir)
        print("starting the local Kafka broker (first run: resolving its jars with Maven) ...",
              file=out, flush=True)
        broker.fetch()
        bootstrap = broker.start()
    workers: list[subprocess.Popen] = []
    view = None
    logs = None
    ok = False
    settings = None
    try:
        prefix = f"demo-{uuid.uuid4().hex[:6]}"
        env = demo_env(bootstrap, prefix, partitions)
        settings = load_settings(env)
        create_topics(settings)
        print(f"broker {bootstrap}; topics {prefix}.*", file=out, flush=True)

        X, y, W = hyperplane(rows, n_features=10, n_drift_features=2, seed=7, mag_change=0.002,
                             sigma=0.02)
        names = [f"x{j}" for j in range(X.shape[1])]
        elec = load("electricity")
        n_elec = electricity_rows or elec.n_rows
        bikes = load("bike_sharing")
        n_bikes = bike_rows or bikes.n_rows
        p = make_producer({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
        produce_stream(p, settings.topics.instances, "hyperplane", X, y, names=names, truth=W)
        produce_stream(p, settings.topics.instances, "electricity", elec.X[:n_elec],
                       elec.y[:n_elec], names=elec.feature_names)
        produce_stream(p, settings.topics.instances, "bikes", bikes.X[:n_bikes],
                       bikes.y[:n_bikes], names=bikes.feature_names)
        p.flush(60)
        del p  # closes the producer now, before the broker it talks to is stopped
        totals = {"hyperplane": rows, "electricity": n_elec, "bikes": n_bikes}
        print(f"produced {rows} hyperplane instances (2 drifting weights of 10), "
              f"{n_elec} Electricity instances and {n_bikes} Bike Sharing hours "
              f"(targets {', '.join(bikes.target_names)})", file=out, flush=True)

        child_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFOREST_")}
        child_env.update(env)
        # on a terminal the workers' own output would tear the live table: it goes to files
        tty = is_terminal(out)
        logs = Path(tempfile.mkdtemp(prefix="streamforest-demo-logs-")) if tty else None
        for i in range(2):
            member = f"{prefix}-w{i + 1}"
            child_env["STREAMFOREST_WORKER__MEMBER_NAME"] = member
            workers.append(start_worker(dict(child_env), logs / f"{member}.log" if logs else None))
        print("started 2 workers in one consumer group"
              + (f" (their logs: {logs})" if logs else ""), file=out, flush=True)

        board = Board(totals, {"hyperplane": (names, W)})
        view = LiveView(bootstrap, settings.topics, board)
        ok = watch(view, workers, out, time.monotonic() + timeout_s)
        if any(w.poll() is not None for w in workers):
            print("a worker exited unexpectedly" + (f"; see {logs}" if logs else ""),
                  file=out, flush=True)
            ok = False
            return 1
        if tty:  # the live table stays on the screen as the final view
            print("all streams consumed" if ok else "timed out", file=out)
        else:
            print(("all streams consumed" if ok else "timed out") + "; final view:", file=out)
            print(board.text(), file=out)
        print("drift alerts: " + ", ".join(f"{s} {board.n_alerts[s]}" for s in totals),
              file=out, flush=True)
        return 0 if ok else 1
    finally:
        if view is not None:
            view.close()
        for w in workers:
            if w.poll() is None:
                w.terminate()
        for w in workers:
            try:
                w.wait(60)
            except subprocess.TimeoutExpired:
                w.kill()
        if logs is not None and ok:  # kept when something went wrong, for a look
            shutil.rmtree(logs, ignore_errors=True)
        if settings is not None and not keep_topics:
            groups = [settings.kafka.group_id] + ([view.group] if view is not None else [])
            try:
                delete_topics(settings)
                delete_groups(settings, groups)
                print(f"deleted the topics {prefix}.* and the consumer groups "
                      f"{', '.join(groups)}", file=out, flush=True)
            except Exception as exc:  # noqa: BLE001 (the demo's own outcome matters more)
                print(f"could not delete the topics {prefix}.* or the consumer groups: {exc}",
                      file=out, flush=True)
        if broker is not None:
            broker.stop()
            shutil.rmtree(broker.data_dir, ignore_errors=True)
            print("stopped the broker", file=out, flush=True)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("demo", help="local broker + two workers + live view")
    p.add_argument("-b", "--bootstrap", "--bootstrap-servers", default=None,
                   metavar="HOST:PORT[,...]",
                   help="use these brokers instead of starting the local one")
    p.add_argument("--rows", type=int, default=30000, help="hyperplane instances")
    p.add_argument("--electricity-rows", type=int, default=None,
                   help="Electricity instances (default: all 45,312)")
    p.add_argument("--bike-rows", type=int, default=None,
                   help="Bike Sharing hours (default: all 17,379)")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--keep-topics", action="store_true",
                   help="leave the demo's topics on the brokers (default: deleted at the end)")
    p.set_defaults(func=lambda a: run_demo(a.bootstrap, a.rows, a.electricity_rows,
                                           a.partitions, a.timeout, bike_rows=a.bike_rows,
                                           keep_topics=a.keep_topics))
