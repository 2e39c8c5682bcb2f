"""A class running the same chapter cell at the same moment: 8 Jupyter kernels, one live run each.

    .venv/bin/python benchmarks/bench_classroom.py              # 8 kernels, k = 2 each
    .venv/bin/python benchmarks/bench_classroom.py --kernels 4
    .venv/bin/python benchmarks/bench_classroom.py --chapter 06   # 8 kernels, each a whole Run All of chapter 06

No Jupyter server: each student is a python3 kernel of this environment started with
jupyter_client, on local sockets in a temporary folder. Every kernel first imports
dpviz (the chapter's set-up cell), then all of them are sent the chapter's live run
``record_run(k=2, b=8, steps=5)`` at once, so 2 x 8 ranks start, meet and train
together on this machine's cores.

With ``--chapter NN`` each kernel runs every code cell of that chapter instead, top to bottom, all kernels
at once (a class pressing Run All together): every cell must finish without an error, the chapter's own
claims and checks included.

Checks, each an assertion:

* every kernel's run completes and its record passes ``run.check()`` (a port taken
  by a neighbour's run, or any other failure, shows up here with its message);
* no kernel has a rank or any other child left afterwards (its two launch helpers,
  multiprocessing's resource tracker and the launcher's fork server, which live as
  long as their kernel, excepted), and once the kernels are shut down nothing they
  started is still running (psutil).

Prints the machine (cores, load average), the wall time from sending the cells to
the last reply, and each kernel's own time.
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

from dpviz.engine.forkserver import is_helper_process
import machine  # noqa: E402
from machine import describe

ROOT = Path(__file__).resolve().parents[1]
SETUP = "from dpviz.engine.forkserver import warm_up\nwarm_up()\nfrom dpviz.topics.ground_floor.run_training import record_run\n"  # as a chapter's set-up cell
LIVE_RUN = "run = record_run(k=2, b=8, steps=5)\nprint('CHECK', run.check())\n"


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def leftovers(pid: int) -> list[str]:
    """A kernel's live descendants, its launch helpers excepted."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    left = []
    for p in children:
        try:
            cmd, ppid = " ".join(p.cmdline()), p.ppid()
        except psutil.Error:
            continue
        if alive(p) and not is_helper_process(cmd, ppid, pid):
            left.append(f"{p.pid} {cmd[:100]}")
    return left


class Student:
    """One kernel, as one student's open notebook."""

    def __init__(self, i: int, folder: Path, cwd: Path = ROOT):
        from jupyter_client.manager import KernelManager

        self.i = i
        self.km = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / f"kernel{i}-ipc"))
        self.km.start_kernel(cwd=str(cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.pid = self.km.provisioner.process.pid
        self.seen: dict[int, tuple[psutil.Process, str, int]] = {}  # every descendant seen: command line, parent

    def remember(self) -> None:
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for p in children:
            if p.pid not in self.seen:
                try:
                    self.seen[p.pid] = (p, " ".join(p.cmdline()), p.ppid())
                except psutil.Error:
                    pass

    def send(self, code: str) -> str:
        return self.kc.execute(code, allow_stdin=False)

    def reply(self, msg_id: str, timeout: float) -> dict:
        """Wait for the reply to ``msg_id``; collect its printed text and error."""
        out, error = [], None
        end = time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(1.0, end - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content["execution_state"] == "idle":
                done = msg["header"]["date"]  # when the kernel finished, not when this loop read it
                break
        return {"text": "".join(out), "error": error, "done": done.timestamp() if hasattr(done, "timestamp") else time.time()}

    def run_all(self, cells: list[str], timeout: float) -> dict:
        """Run ``cells`` in order, as Run All does: stop at the first error. Returns the error (or None) and times."""
        start = time.time()
        for n, code in enumerate(cells, 1):
            r = self.reply(self.send(code), timeout=timeout)
            if r["error"]:
                return {"error": f"code cell {n}: {r['error']}", "seconds": time.time() - start}
        return {"error": None, "seconds": time.time() - start}

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=8, help="students, one kernel each (default 8)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed for the live runs")
    parser.add_argument("--chapter", help="run this chapter's every code cell in each kernel (e.g. 06) instead of one live run")
    args = parser.parse_args(argv)
    if args.kernels < 1:
        parser.error(f"--kernels must be at least 1; got {args.kernels}.")
    if args.chapter is not None:
        return run_all_chapter(args)

    cores = usable_cores()
    print(describe())
    print(f"{cores} usable cores; {args.kernels} kernels x 2 ranks", flush=True)  # the load: in describe() above
    with tempfile.TemporaryDirectory(prefix="dpviz-bench-classroom-") as tmp:
        begin = time.perf_counter()
        students = []
        try:
            for i in range(args.kernels):
                students.append(Student(i, Path(tmp)))
            for s in students:
                s.kc.wait_for_ready(timeout=300)
            setups = [(s, s.send(SETUP)) for s in students]
            for s, msg_id in setups:
                r = s.reply(msg_id, timeout=300)
                assert r["error"] is None, f"kernel {s.i}: set-up failed: {r['error']}"
            print(f"kernels started and dpviz imported in {time.perf_counter() - begin:.1f} s", flush=True)

            watching = threading.Event()
            watcher = threading.Thread(target=_watch, args=(students, watching), daemon=True)
            watcher.start()
            start = time.time()
            sent = [(s, s.send(LIVE_RUN)) for s in students]  # the whole class presses Shift+Enter
            results = []
            try:
                for s, msg_id in sent:
                    results.append((s, s.reply(msg_id, timeout=args.timeout)))
            finally:
                watching.set()
                watcher.join()
            wall = max(r["done"] for _, r in results) - start

            failed = [f"kernel {s.i}: {r['error']}" for s, r in results if r["error"] or "CHECK" not in r["text"]]
            collisions = [f"kernel {s.i}" for s, r in results if "address already in use" in (r["error"] or "").lower()]
            assert not collisions, f"port collision in {collisions}"
            assert not failed, "live runs failed:\n" + "\n".join(failed)
            for s, r in results:
                print(f"  kernel {s.i}: done {r['done'] - start:5.1f} s after the cells were sent", flush=True)
            left = {s.i: leftovers(s.pid) for s in students}
            left = {i: v for i, v in left.items() if v}
            assert not left, f"processes left running in kernels: {left}"
            ranks_seen = sum(1 for s in students for _, cmd, ppid in s.seen.values() if not is_helper_process(cmd, ppid, s.pid))
        finally:
            for s in students:
                s.close()
        survivors = [p for s in students for p, _, _ in s.seen.values() if alive(p)]
        for p in survivors:  # started by this benchmark's kernels: never leave them behind
            p.kill()
        assert not survivors, f"still running after the kernels were shut down: {[p.pid for p in survivors]}"

    print(f"{args.kernels} live runs (k=2, b=8, steps=5) started at once: all completed and checked, "
          f"no port collision, nothing left running")
    print(f"wall time from sending the cells to the last reply: {wall:.1f} s "
          f"({ranks_seen} rank processes seen; load average now {os.getloadavg()[0]:.2f})")
    return 0


def chapter_cells(chapter: str) -> tuple[Path, list[str]]:
    """The notebook whose name starts with ``chapter`` and its code cells' sources, in order."""
    import json

    found = sorted((ROOT / "notebooks").glob(f"{chapter}_*.ipynb"))
    if len(found) != 1:
        names = ", ".join(p.name[:2] for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
        raise SystemExit(f"--chapter must name one chapter by its number ({names}); got {chapter!r}.")
    cells = json.loads(found[0].read_text())["cells"]
    return found[0], ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def run_all_chapter(args) -> int:
    """Every kernel runs the whole chapter at once; each must finish every cell without an error."""
    path, cells = chapter_cells(args.chapter)
    cores = usable_cores()
    print(describe())
    print(f"{cores} usable cores; {args.kernels} kernels, each running all "
          f"{len(cells)} code cells of {path.name}", flush=True)
    with tempfile.TemporaryDirectory(prefix="dpviz-bench-classroom-") as tmp:
        students, results = [], {}
        try:
            for i in range(args.kernels):
                students.append(Student(i, Path(tmp), cwd=path.parent))
            for s in students:
                s.kc.wait_for_ready(timeout=300)
            watching = threading.Event()
            watcher = threading.Thread(target=_watch, args=(students, watching), daemon=True)
            watcher.start()
            start = time.perf_counter()

            def one(s):
                try:
                    results[s.i] = s.run_all(cells, args.timeout)
                except Exception as e:  # a timeout waiting for a reply: the kernel hung
                    results[s.i] = {"error": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - start}

            threads = [threading.Thread(target=one, args=(s,)) for s in students]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            watching.set()
            watcher.join()
            for i in sorted(results):
                r = results[i]
                print(f"  kernel {i}: {'passed' if r['error'] is None else 'FAILED'} in {r['seconds']:5.1f} s"
                      + (f" ({r['error'][:300]})" if r["error"] else ""), flush=True)
            left = {s.i: leftovers(s.pid) for s in students}
            left = {i: v for i, v in left.items() if v}
        finally:
            for s in students:
                s.close()
        survivors = [p for s in students for p, _, _ in s.seen.values() if alive(p)]
        for p in survivors:
            p.kill()
    failed = [i for i, r in results.items() if r["error"] is not None]
    print(f"{args.kernels} Run Alls of {path.name} at once: {args.kernels - len(failed)} passed, {len(failed)} failed; "
          f"wall time {wall:.1f} s (load average now {os.getloadavg()[0]:.2f}); target: all pass "
          f"-> {'met' if not failed else 'missed'}")
    assert not left, f"processes left running in kernels: {left}"
    assert not survivors, f"still running after the kernels were shut down: {[p.pid for p in survivors]}"
    return 1 if failed else 0


def _watch(students, stop: threading.Event) -> None:
    """Remember every process the kernels start while the runs go on (ranks live only seconds)."""
    while not stop.is_set():
        for s in students:
            s.remember()
        stop.wait(0.1)


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    sys.exit(main())
