"""Throughput of the numba drift detectors against river's, side by side in the same run.

Cases (every one also checks that both libraries detect at the same positions):

* ``ADWIN.update_many``: 1,000,000 values N(mu, 1), mu = 0, 1, 2, 3, 4 changing every 200,000
  values; river's ``drift.ADWIN`` in a Python loop of ``update``.
* ``ADWINBank.update``: 1,000 detectors x 1,000 steps, one kernel call per step; river: 1,000
  ``drift.ADWIN`` objects updated in a Python loop. Half of the detectors see their mean jump
  by 1.5 at step 500.
* ``ADWIN.update`` called once per value from Python (100,000 values): the per-call overhead of
  a numba kernel call, which is larger than river's; streams should go through update_many.
* ``DDM.update_many``: 1,000,000 Bernoulli errors, rate 0.1 then 0.3 from the middle.

Both sides run back to back ``--repeat`` times (the machine is shared): the table gives the
best throughput of each and the medians of the paired wall-time and CPU-time ratios. numba
compilation is done before timing. Run: ``python tests/benchmarks/learners/bench_adwin.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from river import drift

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from models import ADWIN, DDM, ADWINBank
from tests.benchmarks.common import write_results


def timed_pairs(repeat, ours, river):
    """Run ``ours`` then ``river`` ``repeat`` times, alternating so that both see the same
    machine load. Returns the best wall time of each, the medians of the per-pair ratios
    river/ours of wall time and of CPU time, and the last results."""
    wall, cpu = {"ours": [], "river": []}, {"ours": [], "river": []}
    results = {}
    for _ in range(repeat):
        for side, fn in (("ours", ours), ("river", river)):
            w0, c0 = time.perf_counter(), time.process_time()
            results[side] = fn()
            wall[side].append(time.perf_counter() - w0)
            cpu[side].append(time.process_time() - c0)
    wall_ratio = np.median(np.divide(wall["river"], wall["ours"]))
    cpu_ratio = np.median(np.divide(cpu["river"], cpu["ours"]))
    return (min(wall["ours"]), min(wall["river"]), float(wall_ratio), float(cpu_ratio),
            results["ours"], results["river"])


def river_adwin_positions(xs):
    det = drift.ADWIN()
    update = det.update
    found = []
    for i, x in enumerate(xs.tolist()):
        update(x)
        if det.drift_detected:
            found.append(i)
    return found


def case_adwin_stream(repeat):
    rng = np.random.default_rng(0)
    xs = rng.normal(np.repeat(np.arange(5.0), 200_000), 1.0)
    ours_t, river_t, ratio, cpu_ratio, got, ref = timed_pairs(
        repeat, lambda: ADWIN().update_many(xs).tolist(), lambda: river_adwin_positions(xs))
    return ("ADWIN.update_many, 1M values", len(xs), ours_t, river_t, ratio, cpu_ratio,
            got == ref, len(ref))


def case_adwin_bank(repeat, n_detectors=1000, n_steps=1000):
    rng = np.random.default_rng(1)
    jump = np.where(np.arange(n_detectors) % 2 == 0, 1.5, 0.0)
    data = rng.normal(0.0, 1.0, (n_steps, n_detectors)) + (
        np.arange(n_steps)[:, None] >= 500) * jump

    def ours():
        bank = ADWINBank(n_detectors)
        return np.array([bank.update(row) for row in data])

    def river():
        dets = [drift.ADWIN() for _ in range(n_detectors)]
        out = np.zeros((n_steps, n_detectors), dtype=bool)
        for t, row in enumerate(data.tolist()):
            for i, (det, x) in enumerate(zip(dets, row)):
                det.update(x)
                if det.drift_detected:
                    out[t, i] = True
        return out

    ours_t, river_t, ratio, cpu_ratio, mask, ref = timed_pairs(repeat, ours, river)
    return (f"ADWINBank.update, {n_detectors} det x {n_steps} steps", data.size, ours_t, river_t,
            ratio, cpu_ratio, bool(np.array_equal(mask, ref)), int(ref.sum()))


def case_adwin_single_calls(repeat, n=100_000):
    rng = np.random.default_rng(2)
    xs = rng.normal(np.repeat([0.0, 2.0], n // 2), 1.0).tolist()

    def ours():
        det = ADWIN()
        return [i for i, x in enumerate(xs) if det.update(x)]

    ours_t, river_t, ratio, cpu_ratio, found, ref = timed_pairs(
        repeat, ours, lambda: river_adwin_positions(np.asarray(xs)))
    return ("ADWIN.update, one Python call per value", n, ours_t, river_t, ratio, cpu_ratio,
            found == ref, len(ref))


def case_ddm_stream(repeat, n=1_000_000):
    rng = np.random.default_rng(3)
    xs = (rng.random(n) < np.where(np.arange(n) < n // 2, 0.1, 0.3)).astype(np.int64)

    def river():
        det = drift.binary.DDM()
        found, warnings = [], 0
        for i, x in enumerate(xs.tolist()):
            det.update(x)
            if det.drift_detected:
                found.append(i)
            warnings += det.warning_detected
        return found, warnings

    def ours():
        d, w = DDM().update_many(xs, return_warnings=True)
        return d.tolist(), int(w.size)

    ours_t, river_t, ratio, cpu_ratio, got, ref = timed_pairs(repeat, ours, river)
    return ("DDM.update_many, 1M errors", n, ours_t, river_t, ratio, cpu_ratio, got == ref,
            len(ref[0]))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per case (best kept)")
    args = parser.parse_args(argv)

    # compile every kernel before timing
    ADWIN().update_many(np.zeros(100))
    ADWIN().update(0.0)
    ADWINBank(2).update(np.zeros(2))
    DDM().update_many(np.zeros(100), return_warnings=True)

    rows = [case_adwin_stream(args.repeat), case_adwin_bank(args.repeat),
            case_adwin_single_calls(args.repeat), case_ddm_stream(args.repeat)]
    lines = [
        "# ADWIN and DDM against river", "",
        f"`ADWIN`, `ADWINBank` and `DDM` against river's `drift.ADWIN` and `drift.binary.DDM` "
        f"on the same values, back to back in one process, {args.repeat} runs of each pair "
        "(protocol in the script's docstring). Updates per second: the best run; ratios: the "
        "medians of the runs' river / ours wall and CPU times.", "",
        "| case | updates | ours updates/s | river updates/s | ratio (wall / CPU) | same "
        "detections | detections |", "|---|---|---|---|---|---|---|"]
    for name, n, ours_t, river_t, ratio, cpu_ratio, same, n_det in rows:
        lines.append(f"| {name} | {n:,} | {n / ours_t:,.0f} | {n / river_t:,.0f} | "
                     f"{ratio:.2f}x / {cpu_ratio:.2f}x | {'yes' if same else 'NO'} | {n_det} |")
    lines += ["", "A per-value Python call pays numba's dispatch on every value; the worker "
              "feeds its detectors whole batches through `update_many`."]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(Path(__file__).parent / "results" / "adwin.md", text)


if __name__ == "__main__":
    main()
