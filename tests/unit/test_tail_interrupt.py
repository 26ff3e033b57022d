"""Ctrl-C ends ``streamforest tail`` even when the Kafka client never gives control back."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# a main thread that never ends on Ctrl-C, as one stuck in a librdkafka call: every
# KeyboardInterrupt is swallowed and it sleeps again
STUCK = """
import sys, time
from worker.tail import end_on_interrupt
end_on_interrupt(grace_s=0.5)
sys.stdout.write("ready\\n")
while True:
    try:
        time.sleep(0.2)
    except KeyboardInterrupt:
        sys.stdout.write("interrupted\\n")
"""


def test_ctrl_c_ends_a_reader_whose_main_thread_never_returns():
    proc = subprocess.Popen([sys.executable, "-c", STUCK], cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        # the grace period passed first: the main thread saw the interrupt and went on
        assert time.monotonic() - start >= 0.5
        assert proc.stdout.read() == b"interrupted\n"  # flushed before the exit
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
