"""How long a live run takes to start: ranks forked from the fork server against ranks spawned afresh.

    .venv/bin/python benchmarks/bench_launch.py            # k = 1, 2, 3, 4; 5 runs each
    .venv/bin/python benchmarks/bench_launch.py --repeats 10
    .venv/bin/python benchmarks/bench_launch.py --keep     # and append what it printed to benchmarks/HISTORY.md

Each run is ``launch`` of the tests' worker ``sum_ranks``, one all-reduce of one number, so the time is nearly
all start-up: processes, imports, joining the group, and reaping. For each start method the first
run is printed on its own (with the fork server, it starts the server, which imports torch), then
the median of the later runs for each k. Every rank has one thread. A start method is chosen for
the runs of this process with DPVIZ_START_METHOD, as a user would.

The target (DESIGN.md): a run of k <= 4 ranks from a warm fork server starts within 1 s. The script judges it on
the later fork-server runs at every k <= 4 (the whole run, start to results, an upper bound of its start): met
when every such run took at most 1 s, and prints it with the load average before and after those runs and the
machine's references (machine.py), since 2 cores shared with anything else make any start slower.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import machine
from machine import describe

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 1.0  # DESIGN.md: a warm run of k <= 4 ranks starts within 1 s
TARGET_KS = (1, 2, 3, 4)

PROBE = """
import os, statistics, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, "tests")
from dpviz.engine.launch import launch
from _workers import sum_ranks

if __name__ == "__main__":
    ks, repeats = {ks!r}, {repeats}
    start = time.perf_counter()
    launch(sum_ranks, 1, threads=1)
    print("first", time.perf_counter() - start)
    print("load", os.getloadavg()[0])
    for k in ks:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            results = launch(sum_ranks, k, threads=1)
            times.append(time.perf_counter() - start)
            assert [r["sum"] for r in results] == [k * (k + 1) / 2] * k
        print(k, statistics.median(times), min(times), max(times))
    print("load", os.getloadavg()[0])
"""


def measure(method: str, ks, repeats: int) -> tuple[float, dict, tuple[float, float]]:
    """The first run's seconds, {k: [median, min, max]} of the later runs, and the 1-minute load before and after."""
    env = dict(os.environ, DPVIZ_START_METHOD=method)
    out = subprocess.run([sys.executable, "-c", PROBE.format(ks=list(ks), repeats=repeats)], cwd=ROOT,
                         env=env, capture_output=True, text=True, check=True).stdout.split("\n")
    first = float(out[0].split()[1])
    loads = tuple(float(line.split()[1]) for line in out if line.startswith("load"))
    rows = {int(line.split()[0]): [float(x) for x in line.split()[1:]]
            for line in out[1:] if line and not line.startswith("load")}
    return first, rows, loads


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=list(TARGET_KS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="append what this run prints to benchmarks/HISTORY.md")
    args = parser.parse_args(argv)
    print(describe())
    print("a run = one all-reduce of one number, one thread per rank")
    rows, loads = {}, {}
    for method in ("forkserver", "spawn"):
        first, rows[method], loads[method] = measure(method, args.ks, args.repeats)
        what = "starts the fork server, which imports torch" if method == "forkserver" else "spawns one rank"
        print(f"{method}: the process's first run (k = 1) {first:.2f} s ({what})")
    print(f"\nlater runs, median (min-max) of {args.repeats}:")
    print(f"{'k':>3}  {'fork server':>24}  {'spawn':>24}  spawn / fork server")
    for k in args.ks:
        f, s = rows["forkserver"][k], rows["spawn"][k]
        print(f"{k:>3}  {f[0]:7.3f} s ({f[1]:.3f}-{f[2]:.3f})  {s[0]:7.3f} s ({s[1]:.3f}-{s[2]:.3f})  {s[0] / f[0]:6.1f}x")

    judged = [k for k in args.ks if k in TARGET_KS]
    if judged:
        warm = {k: rows["forkserver"][k] for k in judged}
        slowest = max(judged, key=lambda k: warm[k][2])
        median = max(judged, key=lambda k: warm[k][0])
        before, after = loads["forkserver"]
        met = warm[slowest][2] <= TARGET_SECONDS
        verdict = "met" if met else ("MISSED (met by the median)" if warm[median][0] <= TARGET_SECONDS else "MISSED")
        print(f"\nwarm start, k <= 4 from the warm fork server: median {warm[median][0]:.3f} s at worst "
              f"(k = {median}), slowest run {warm[slowest][2]:.3f} s (k = {slowest}), {args.repeats} runs per k; "
              f"target <= {TARGET_SECONDS:g} s: {verdict}; load average {before:.2f} before those runs, "
              f"{after:.2f} after, on {os.cpu_count()} cores")
    print(f"load average now {machine.load()}")


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    main()
