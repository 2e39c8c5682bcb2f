"""What every benchmark prints beside its figures: the machine's cores, its load, and a speed reference.

Machines of this kind differ by about 2x in speed, so a time means little without a measure of the machine
it was taken on. Two references, the same everywhere, each try in a fresh process (lower is faster):

* the speed reference: seconds for 30 products of two 256 x 256 float64 matrices in numpy, on one BLAS thread;
* the Python reference: seconds for the interpreter alone to write 50,000 short keys and count them in a dict.

They need not move together: a slider move is mostly the interpreter (matplotlib working out what to draw, a
text's layout), and on 2026-12-02 two 2-core machines that read the same speed reference (0.019-0.023 s and
0.019-0.030 s) moved the costs panel's slowest slider in 9 ms and in 18-25 ms. Read an interpreter-bound time
(slider moves, Run All, Voila) against the Python reference, a rank's arithmetic against the speed reference.

    from machine import describe, speed_reference, python_reference
    print(describe())          # cores, load average, both references: one line

Every benchmark also takes ``--keep``: what it prints is then appended, as it printed it, to
``benchmarks/HISTORY.md`` under a heading with the date, the script, its arguments and the commit measured
(:func:`keep_if_asked`), so no measured number is ever typed in by hand.
"""

from __future__ import annotations

import atexit
import datetime
import io
import os
import statistics
import subprocess
import sys
from pathlib import Path

HISTORY = Path(__file__).resolve().parent / "HISTORY.md"

REFERENCE_CODE = """
import time
import numpy as np
a = np.random.default_rng(0).standard_normal((256, 256))
start = time.perf_counter()
for _ in range(30):
    a = (a @ a) / 256.0
print(time.perf_counter() - start)
"""
PYTHON_CODE = """
import time
start = time.perf_counter()
counts = {}
for i in range(50_000):
    key = f"{i % 997:04d}:{i * 0.5:.2f}"[:6]
    counts[key] = counts.get(key, 0) + 1
print(time.perf_counter() - start)
"""
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def speed_reference(tries: int = 3) -> tuple[float, float]:
    """Median and best seconds of ``tries`` runs of the speed reference, each in a fresh one-thread process."""
    return _timed(REFERENCE_CODE, tries)


def python_reference(tries: int = 3) -> tuple[float, float]:
    """Median and best seconds of ``tries`` runs of the Python reference (the interpreter alone), each in a fresh process."""
    return _timed(PYTHON_CODE, tries)


def references(tries: int = 3) -> str:
    """Both references measured now, in words: what a benchmark prints beside its figures."""
    median, best = speed_reference(tries)
    py_median, py_best = python_reference(tries)
    return (f"speed reference {median:.3f} s (median of {tries}, best {best:.3f} s: 30 products of 256 x 256 float64 "
            f"matrices on one thread); Python reference {py_median:.3f} s (median of {tries}, best {py_best:.3f} s: "
            "50,000 keys written and counted by the interpreter); lower is faster")


def _timed(code: str, tries: int) -> tuple[float, float]:
    env = {**os.environ, **ONE_THREAD}
    times = [float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True).stdout) for _ in range(tries)]
    return statistics.median(times), min(times)


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


def describe(tries: int = 3) -> str:
    """One line: cores, load average, and both references measured now."""
    return f"machine: {os.cpu_count()} cores, load average {load()}; {references(tries)}"


class _Tee(io.TextIOBase):
    """Writes to the real stdout and keeps a copy."""

    def __init__(self, out):
        self.out, self.copy = out, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def keep_if_asked(script: str, argv: list | None = None) -> list:
    """Call first in a benchmark's ``main``: with ``--keep`` among the arguments, what the run prints is appended to
    HISTORY.md when it ends (with the date, the script, its other arguments and the commit), unless it failed.

    Returns the arguments without ``--keep``, for the script's own parser.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--keep" not in argv:
        return argv
    argv = [a for a in argv if a != "--keep"]
    sys.argv[1:] = argv  # the script's own parser never sees --keep
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    name = Path(script).name

    def append() -> None:
        sys.stdout = tee.out
        failed = getattr(sys, "last_value", None) is not None
        if failed or not tee.copy.getvalue().strip():
            print(f"{name}: not kept in {HISTORY.name} (the run failed or printed nothing)", file=sys.stderr)
            return
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HISTORY.parent).stdout.strip() or "unknown commit"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=HISTORY.parent).stdout.strip()
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        head = (f"\n### {when}: `{' '.join(['benchmarks/' + name, *argv])}` at {commit}"
                f"{' (with uncommitted changes)' if dirty else ''}\n\n")
        with HISTORY.open("a", encoding="utf-8") as f:
            f.write(head + "```\n" + tee.copy.getvalue().rstrip("\n") + "\n```\n")
        print(f"{name}: kept in {HISTORY}", file=sys.stderr)

    atexit.register(append)
    return argv
