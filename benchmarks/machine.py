"""What every benchmark prints beside its figures: the machine's cores, its load, and a speed reference.

Machines of this kind differ by about 2x in speed, so a time means little without a measure of the machine
it was taken on. The speed reference is the same everywhere: seconds for 30 products of two 256 x 256
float64 matrices in numpy, on one BLAS thread, each try in a fresh process (lower is faster).

    from machine import describe, speed_reference
    print(describe())          # cores, load average, speed reference: one line
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

REFERENCE_CODE = """
import time
import numpy as np
a = np.random.default_rng(0).standard_normal((256, 256))
start = time.perf_counter()
for _ in range(30):
    a = (a @ a) / 256.0
print(time.perf_counter() - start)
"""
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def speed_reference(tries: int = 3) -> tuple[float, float]:
    """Median and best seconds of ``tries`` runs of the reference, each in a fresh one-thread process."""
    env = {**os.environ, **ONE_THREAD}
    times = [float(subprocess.run([sys.executable, "-c", REFERENCE_CODE], env=env, capture_output=True, text=True,
                                  check=True).stdout) for _ in range(tries)]
    return statistics.median(times), min(times)


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


def describe(tries: int = 3) -> str:
    """One line: cores, load average, and the speed reference measured now."""
    median, best = speed_reference(tries)
    return (f"machine: {os.cpu_count()} cores, load average {load()}; speed reference {median:.3f} s (median of "
            f"{tries}, best {best:.3f} s: 30 products of 256 x 256 float64 matrices on one thread, lower is faster)")
