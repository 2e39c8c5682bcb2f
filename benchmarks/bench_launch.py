"""How long a live run takes to start: ranks forked from the fork server against ranks spawned afresh.

    .venv/bin/python benchmarks/bench_launch.py            # k = 1, 2, 3, 4; 5 runs each
    .venv/bin/python benchmarks/bench_launch.py --repeats 10

Each run is ``launch`` of the tests' worker ``sum_ranks``, one all-reduce of one number, so the time is nearly
all start-up: processes, imports, joining the group, and reaping. For each start method the first
run is printed on its own (with the fork server, it starts the server, which imports torch), then
the median of the later runs for each k. Every rank has one thread. A start method is chosen for
the runs of this process with DPVIZ_START_METHOD, as a user would.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from machine import describe

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import statistics, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, "tests")
from dpviz.engine.launch import launch
from _workers import sum_ranks

if __name__ == "__main__":
    ks, repeats = {ks!r}, {repeats}
    start = time.perf_counter()
    launch(sum_ranks, 1, threads=1)
    print("first", time.perf_counter() - start)
    for k in ks:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            results = launch(sum_ranks, k, threads=1)
            times.append(time.perf_counter() - start)
            assert [r["sum"] for r in results] == [k * (k + 1) / 2] * k
        print(k, statistics.median(times), min(times), max(times))
"""


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(describe())
    print("a run = one all-reduce of one number")
    rows = {}
    for method in ("forkserver", "spawn"):
        env = dict(os.environ, DPVIZ_START_METHOD=method)
        out = subprocess.run([sys.executable, "-c", PROBE.format(ks=args.ks, repeats=args.repeats)], cwd=ROOT,
                             env=env, capture_output=True, text=True, check=True).stdout.split("\n")
        first = float(out[0].split()[1])
        rows[method] = {int(line.split()[0]): [float(x) for x in line.split()[1:]] for line in out[1:] if line}
        what = "starts the fork server, which imports torch" if method == "forkserver" else "spawns one rank"
        print(f"{method}: the process's first run (k = 1) {first:.2f} s ({what})")
    print(f"\nlater runs, median (min-max) of {args.repeats}:")
    print(f"{'k':>3}  {'fork server':>24}  {'spawn':>24}  spawn / fork server")
    for k in args.ks:
        f, s = rows["forkserver"][k], rows["spawn"][k]
        print(f"{k:>3}  {f[0]:7.3f} s ({f[1]:.3f}-{f[2]:.3f})  {s[0]:7.3f} s ({s[1]:.3f}-{s[2]:.3f})  {s[0] / f[0]:6.1f}x")
    print(f"load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
