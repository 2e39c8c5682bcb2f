"""``./run``: record every plan on this machine and draw every figure, timed whole, into a folder thrown away after.

    .venv/bin/python benchmarks/bench_figures.py            # one ./run, about a minute on 2 cores
    .venv/bin/python benchmarks/bench_figures.py --repeats 2

Runs ``python -m dpviz figures --out <temporary folder>`` (what ``./run`` runs, with the committed figures left
alone) and prints its own account (each plan's recording time, then saving and drawing), the wall time from the
command's start to its end, interpreter start included, against the target, the load average before and after,
and the machine's speed reference. Target (issue 21): 60 s on 2 cores, quiet.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time

import machine  # noqa: E402
from machine import describe, load

TARGET = 60.0  # s for ./run on 2 cores, quiet


def one_run() -> tuple[float, str]:
    """Wall seconds of one ``python -m dpviz figures`` into a temporary folder, and its last line."""
    with tempfile.TemporaryDirectory(prefix="dpviz-bench-figures-") as out:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "dpviz", "figures", "--out", out], capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"python -m dpviz figures failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    plans = [line for line in done.stdout.splitlines() if line.startswith("recorded ")]
    summary = next((line for line in reversed(done.stdout.splitlines()) if line.startswith("wrote ")), "")
    for line in plans:
        print("    " + line)
    return seconds, summary


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs of ./run, one after another (default 1)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1; got {args.repeats}")
    print(describe())
    times = []
    for i in range(args.repeats):
        seconds, summary = one_run()
        times.append(seconds)
        own = re.search(r"in ([\d.]+) s \(recording ([\d.]+) s", summary)
        account = f" (its own account: {own.group(1)} s, recording {own.group(2)} s)" if own else ""
        print(f"./run {i + 1}: {seconds:.1f} s from start to end{account}", flush=True)
    best = min(times)
    verdict = "met" if best <= TARGET else f"missed by {best - TARGET:.1f} s"
    print(f"./run: {best:.1f} s (fastest of {len(times)}); target <= {TARGET:g} s: {verdict}; load average now {load()}")


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    main()
