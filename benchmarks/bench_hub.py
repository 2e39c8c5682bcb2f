"""A class on a JupyterHub: N students, each a Unix user of their own, press Run All on one chapter at once.

    sudo .venv/bin/python benchmarks/bench_hub.py                          # N = 1 2 4 8 16; chapters 04 and 06
    sudo .venv/bin/python benchmarks/bench_hub.py --students 1 2 4 --chapters 04 --keep

A real hub, as tests/test_hub.py starts it (tests/_hub.py): Unix users made for the run (removed after), JupyterHub as
root from share/jupyterhub_config.py with configurable-http-proxy, and each student's Jupyter server started as that
student through the hub's API after logging in through its form. For each N, and each chapter: N students (the
first N; servers already up stay up, as a class that logged in once) open the chapter with a new kernel, then all
send its code cells one by one over their kernel's websocket at the same moment, as Run All does, and wait for each
reply. Each student's Run All is timed from the first cell sent to the last reply; a cell's error fails that
student's run. While the round runs, each student's memory is sampled (the proportional set size of all their
processes: server, kernel, fork server, ranks) and its peak kept.

Prints, per N and chapter: the students that passed, the Run All's p50 and p95 (nearest rank: for N < 20 the p95 is
the slowest), each kernel's start, the median student's peak memory and the load; then, per chapter, the largest N
whose p95 stayed under 30 s (DESIGN.md's classroom target) as students per core, in a sentence the README may point
to. Needs root, jupyterhub and configurable-http-proxy (``npm install --prefix . configurable-http-proxy@4``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import _hub  # noqa: E402
import machine  # noqa: E402
from machine import describe  # noqa: E402

TARGET = 30.0  # seconds: a chapter's Run All p95 for a class (DESIGN.md, "a classroom")


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile: the smallest value at or above 95 % of them."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def chapter_notebook(number: str) -> tuple[str, dict]:
    found = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    if len(found) != 1:
        names = ", ".join(p.name[:2] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
        raise SystemExit(f"--chapters must name chapters by number ({names}); got {number!r}.")
    return found[0].name, json.loads(found[0].read_text())


class Peaks(threading.Thread):
    """The largest memory each student held while a round ran, sampled every 0.5 s."""

    def __init__(self, students):
        super().__init__(daemon=True)
        self.students, self.peak = students, {s.name: 0 for s in students}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for s in self.students:
                self.peak[s.name] = max(self.peak[s.name], s.memory())
            self.stop.wait(0.5)


def one_round(students, name: str, nb: dict, timeout: float) -> dict:
    """N students open ``name`` with a new kernel each, then Run All at the same moment."""
    cells = _hub.code_cells(nb)
    opened, runs = {}, {}

    def open_one(s):
        start = time.perf_counter()
        try:
            s.upload(name, nb)
            s.open(name)
            r = s.execute("1", timeout)  # the kernel answers: it is up
            opened[s.name] = time.perf_counter() - start if r["error"] is None else r["error"]
        except Exception as e:  # noqa: BLE001 - reported in the table
            opened[s.name] = f"{type(e).__name__}: {e}"

    threads = [threading.Thread(target=open_one, args=(s,)) for s in students]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ready = [s for s in students if isinstance(opened[s.name], float)]
    peaks = Peaks(students)
    peaks.start()
    barrier = threading.Barrier(len(ready)) if ready else None

    def run_one(s):
        barrier.wait()
        try:
            runs[s.name] = s.run_all(cells, timeout)
        except Exception as e:  # noqa: BLE001 - a kernel that stopped answering
            runs[s.name] = {"error": f"{type(e).__name__}: {e}", "seconds": float("nan")}

    threads = [threading.Thread(target=run_one, args=(s,)) for s in ready]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peaks.stop.set()
    peaks.join()
    for s in students:
        try:
            s.close_kernel(shut_down=True)
        except Exception:  # noqa: BLE001 - the next round opens a new one
            pass
    failed = {n: o for n, o in opened.items() if not isinstance(o, float)}
    failed.update({n: r["error"] for n, r in runs.items() if r["error"]})
    return {"opened": [o for o in opened.values() if isinstance(o, float)],
            "seconds": [r["seconds"] for r in runs.values() if not r["error"]],
            "failed": failed, "memory": [peaks.peak[s.name] for s in ready]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[1, 2, 4, 8, 16],
                        help="class sizes, each a round of its own (default 1 2 4 8 16)")
    parser.add_argument("--chapters", nargs="+", default=["04", "06"], help="chapters by number (default 04 06)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one cell may take (default 600)")
    args = parser.parse_args(argv)
    if min(args.students) < 1:
        parser.error(f"--students must all be at least 1; got {args.students}.")
    reason = _hub.why_not()
    if reason:
        print(f"bench_hub.py: {reason}", file=sys.stderr)
        return 2
    notebooks = [chapter_notebook(c) for c in args.chapters]
    cores = len(os.sched_getaffinity(0))
    print(describe())
    print(f"{cores} usable cores; class sizes {' '.join(map(str, args.students))}; chapters "
          f"{', '.join(n for n, _ in notebooks)}; Run All through a JupyterHub, one Unix user per student", flush=True)

    course = _hub.Course(max(args.students))
    table, started = [], set()
    try:
        print(course.python_note, flush=True)
        for n in args.students:
            students = course.students[:n]
            new = [s for s in students if s.name not in started]
            starts = {}

            def log_in(s):
                s.log_in()
                starts[s.name] = s.start_server()

            threads = [threading.Thread(target=log_in, args=(s,)) for s in new]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            started.update(s.name for s in new if s.name in starts)
            if new:
                print(f"N = {n}: {len(starts)} more {'student' if len(starts) == 1 else 'students'} logged in and "
                      f"started {'a server' if len(starts) == 1 else 'their servers at once'}; "
                      f"server start p50 {statistics.median(starts.values()):.1f} s, slowest "
                      f"{max(starts.values()):.1f} s", flush=True)
            for name, nb in notebooks:
                load_before = os.getloadavg()[0]
                r = one_round(students, name, nb, args.timeout)
                row = {"n": n, "chapter": name[:2], **r, "load": load_before}
                table.append(row)
                secs = r["seconds"]
                print(f"  N = {n:2d}, chapter {name[:2]}: {len(secs)}/{n} passed; Run All p50 "
                      f"{statistics.median(secs) if secs else float('nan'):5.1f} s, p95 "
                      f"{p95(secs) if secs else float('nan'):5.1f} s; kernel start p50 "
                      f"{statistics.median(r['opened']) if r['opened'] else float('nan'):4.1f} s; memory per student "
                      f"(median of peaks) {statistics.median(r['memory']) / 2**20 if r['memory'] else 0:4.0f} MiB; "
                      f"load before {load_before:.1f}", flush=True)
                for who, why in r["failed"].items():
                    print(f"    {who}: {why[:300]}", flush=True)
        for s in course.students:
            if s.name in started:
                s.stop_server()
    finally:
        left = course.close()
    print(f"students' processes still running when the hub stopped: {len(left)}")

    print(f"\n| N | chapter | passed | Run All p50 (s) | p95 (s) | kernel start p50 (s) | memory per student (MiB) |"
          f"\n| --- | --- | --- | --- | --- | --- | --- |")
    for row in table:
        secs = row["seconds"]
        print(f"| {row['n']} | {row['chapter']} | {len(secs)}/{row['n']} | "
              f"{statistics.median(secs) if secs else float('nan'):.1f} | {p95(secs) if secs else float('nan'):.1f} | "
              f"{statistics.median(row['opened']) if row['opened'] else float('nan'):.1f} | "
              f"{statistics.median(row['memory']) / 2**20 if row['memory'] else 0:.0f} |")
    for name, _ in notebooks:
        rows = [r for r in table if r["chapter"] == name[:2]]
        good = [r["n"] for r in rows if not r["failed"] and r["seconds"] and p95(r["seconds"]) < TARGET]
        # the class sizes from the smallest up to the first one that missed
        held = 0
        for r in sorted(rows, key=lambda r: r["n"]):
            if r["n"] not in good:
                break
            held = r["n"]
        tried_more = any(r["n"] > held for r in rows)
        if held:
            print(f"chapter {name[:2]}: Run All p95 under {TARGET:g} s with up to {held} students at once on {cores} "
                  f"cores: {'about' if tried_more else 'at least'} {held / cores:g} "
                  f"{'student' if held == cores else 'students'} per core "
                  f"({'the next size tried missed' if tried_more else 'no larger class tried'})")
        else:
            print(f"chapter {name[:2]}: Run All p95 was not under {TARGET:g} s even for the smallest class tried")
    return 0


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    sys.exit(main())
