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


KEEPER = """
import sys
sys.path.insert(0, {bench!r})
import machine
machine.HISTORY = machine.Path({history!r})
if __name__ == "__main__":
    argv = machine.keep_if_asked(__file__)
    print("sys.argv after:", sys.argv[1:])
    print("S(2) = 1.7 measured")
    if "--fail" in argv:
        raise RuntimeError("the benchmark broke")
"""


@pytest.mark.parametrize("args, kept", [(["--keep", "--k", "2"], True), (["--k", "2"], False),
                                        (["--keep", "--fail"], False)], ids=["keep", "no-keep", "failed"])
def test_keep_appends_what_a_benchmark_printed_to_the_history(tmp_path, args, kept):
    history = tmp_path / "HISTORY.md"
    history.write_text("# Benchmark history\n")
    script = tmp_path / "bench_fake.py"
    script.write_text(KEEPER.format(bench=str(BENCHMARKS[0].parent), history=str(history)))
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60)
    assert "S(2) = 1.7 measured" in done.stdout  # printed as usual, kept or not
    assert "--keep" not in done.stdout  # the script's own parser never sees it
    text = history.read_text()
    if kept:
        assert text.startswith("# Benchmark history\n\n### ") and "`benchmarks/bench_fake.py --k 2` at " in text
        assert "```\nsys.argv after: ['--k', '2']\nS(2) = 1.7 measured\n```\n" in text
    else:
        assert text == "# Benchmark history\n", text
