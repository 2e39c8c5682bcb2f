"""Every script under benchmarks/ starts: its imports resolve and ``--help`` prints its usage.

A benchmark is only run by hand, so a rename elsewhere in dpviz breaks it silently; this catches that.
"""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("bench_*.py"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_benchmark_starts_and_prints_its_usage(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script.name} --help failed:\n{done.stderr[-2000:]}"
    assert done.stdout.startswith("usage:"), done.stdout[:500]


def test_there_are_benchmarks():
    assert len(BENCHMARKS) >= 10, [p.name for p in BENCHMARKS]
