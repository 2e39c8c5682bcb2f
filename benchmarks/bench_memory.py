"""Memory per student: one open chapter's kernel, its fork server and its ranks, measured as PSS.

    .venv/bin/python benchmarks/bench_memory.py                       # a chapter's set-up, idle, then a run
    .venv/bin/python benchmarks/bench_memory.py --server-gib 64 --server-cores 16
    .venv/bin/python benchmarks/bench_memory.py --students 4         # then four chapters open at once

PSS (proportional set size) splits each shared page between the processes that map it, so the PSS of a
student's processes adds up across students: it is what a JupyterHub server pays per open chapter. A
kernel is started with jupyter_client (as in bench_classroom.py), sent the set-up cell of a chapter that starts
ranks (imports, ``dpviz.engine.forkserver.warm_up()``, chapter 06's figure records loaded), and measured idle; then sent one live run of
k = 2 ranks and measured again while the ranks exist, and once more after. Prints each process's PSS,
the totals, the target (350 MB idle) and met/missed, the load average and benchmarks/machine.py's
references, and how many students a server of the given size holds on
this measurement. The target is read on one chapter open alone, where every shared page (torch's and
numpy's libraries above all) counts in full. With ``--students N`` (default 3), N − 1 more kernels then run
the same set-up and the PSS of all N chapters is measured together: divided by N it is what each open
chapter costs a server where N students share those pages, which is how a JupyterHub runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_classroom import Student  # noqa: E402
import machine  # noqa: E402
from machine import describe  # noqa: E402

TARGET_MB = 350  # PSS of one open chapter, idle: kernel, fork server, helpers
SETUP = ("from dpviz.engine.forkserver import warm_up\nwarm_up()\n"
         "from dpviz.topics.speedup_model.figure_records import load_inputs\ninputs = load_inputs()\n"
         "from dpviz.topics.speedup_model.figures import figure_s01_sync_timelines\nfrom dpviz.topics.speedup_model.widget import costs_widget\n"
         "from dpviz.topics.ground_floor.run_training import record_run\nimport time; time.sleep(1.0)\n")
RUN = "run = record_run(k=2, b=8, steps=400, progress=False)\n"


def pss(pid: int) -> list[tuple[str, float]]:
    """(name, PSS in MB) of a process and each live descendant."""
    out = []
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            name = " ".join(p.cmdline())[:70] or p.name()
            out.append((name, p.memory_full_info().pss / 2**20))
        except psutil.Error:
            pass
    return out


def show(label: str, rows) -> float:
    total = sum(mb for _, mb in rows)
    print(f"{label}: {total:.0f} MB PSS in {len(rows)} processes")
    for name, mb in rows:
        print(f"    {mb:7.1f} MB  {name}")
    return total


def together(first: Student, n: int, folder: Path) -> float:
    """PSS per chapter, in MB, with ``first`` and n − 1 more kernels open after the same set-up cell, idle."""
    others = []
    try:
        for i in range(1, n):
            others.append(Student(i, folder))
        for other in others:
            other.kc.wait_for_ready(timeout=300)
        for other in others:  # one at a time, as students arrive; all at once would only measure the queue
            r = other.reply(other.send(SETUP), timeout=300)
            assert r["error"] is None, f"set-up failed in kernel {other.i}: {r['error']}"
        rows = [row for s in (first, *others) for row in pss(s.pid)]
        print(f"{n} chapters open at once, idle: {sum(mb for _, mb in rows):.0f} MB PSS in {len(rows)} processes")
        return sum(mb for _, mb in rows) / n
    finally:
        for other in others:
            other.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-gib", type=float, default=64, help="memory of the server to size (default 64)")
    parser.add_argument("--server-cores", type=int, default=16, help="cores of the server to size (default 16)")
    parser.add_argument("--students", type=int, default=3,
                        help="chapters open at once for the shared measurement, 1 to 16 (default 3; 1 skips it)")
    args = parser.parse_args(argv)
    if not 1 <= args.students <= 16:
        parser.error(f"--students must be between 1 and 16; got {args.students}.")
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} usable cores; {describe()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="dpviz-bench-memory-") as tmp:
        student = Student(0, Path(tmp))
        try:
            student.kc.wait_for_ready(timeout=300)
            r = student.reply(student.send(SETUP), timeout=300)
            assert r["error"] is None, f"set-up failed: {r['error']}"
            idle = show("idle, after the set-up cell", pss(student.pid))
            peak, rows = [0.0], []
            done = threading.Event()

            def sample():
                while not done.is_set():
                    now = pss(student.pid)
                    total = sum(mb for _, mb in now)
                    if total > peak[0]:
                        peak[0], rows[:] = total, now
                    time.sleep(0.1)

            watcher = threading.Thread(target=sample, daemon=True)
            watcher.start()
            r = student.reply(student.send(RUN), timeout=300)
            done.set()
            watcher.join()
            assert r["error"] is None, f"the run failed: {r['error']}"
            show("largest seen during a live run of k = 2 ranks", rows)
            after = show("idle again, after the run", pss(student.pid))
            shared = together(student, args.students, Path(tmp)) if args.students > 1 else None
        finally:
            student.close()
    met = "met" if idle <= TARGET_MB else "MISSED"
    print(f"\nidle chapter: {idle:.0f} MB PSS (target <= {TARGET_MB} MB: {met}); with two ranks running: "
          f"{peak[0]:.0f} MB; after: {after:.0f} MB")
    if shared is not None:
        print(f"{args.students} chapters open at once: {shared * args.students:.0f} MB PSS together, {shared:.0f} MB "
              f"each ({shared / idle:.0%} of one open alone)")
    by_memory = int(args.server_gib * 1024 * 0.8 // idle)  # leave a fifth for the system and the hub
    print(f"a {args.server_cores}-core, {args.server_gib:g} GiB server: {by_memory} idle open chapters fit in 80 % of "
          f"its memory; {args.server_cores // 2} students can run a k = 2 run at the same moment with a core per "
          f"rank ({int(args.server_gib * 1024 * 0.8 // peak[0])} by memory while running)")
    return 0


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    sys.exit(main())
