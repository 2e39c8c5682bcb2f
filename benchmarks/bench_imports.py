"""How long each chapter's first code cell (its imports) and ``python -m dpviz --help`` take in a fresh interpreter.

    .venv/bin/python benchmarks/bench_imports.py                  # this tree
    .venv/bin/python benchmarks/bench_imports.py --tree OLD_TREE  # another checkout (e.g. a git worktree of an older commit)
    .venv/bin/python benchmarks/bench_imports.py --cli            # the command line's help only

Drawing no longer imports torch, so a chapter whose first cell only draws starts faster. Each
cell runs ``--repeats`` times in a new ``python`` process (the IPython magic line dropped, the
matplotlib inline backend chosen as Jupyter would); the median wall time is printed, with
whether torch ended up loaded. The help of ``python -m dpviz`` and of each of its commands is
timed the same way; it needs no torch and should take well under a second (target: no help loads torch, each
under 1 s). The first line is the machine's cores, load average and speed reference (benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import machine  # noqa: E402
from machine import describe, load

ROOT = Path(__file__).resolve().parents[1]
HELP_TARGET = 1.0  # s for each help, in a fresh interpreter, without torch


def first_code_cell(path: Path) -> str:
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            return "\n".join(line for line in lines if not line.lstrip().startswith("%"))
    return ""


HELP = (["--help"], ["record", "--help"], ["bench", "--help"], ["figures", "--help"])


def fresh_env(tree: Path) -> dict:
    return {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "MPLBACKEND": "agg"}


def time_cell(code: str, tree: Path, repeats: int) -> tuple[float, bool]:
    probe = ("import matplotlib; matplotlib.use('module://matplotlib_inline.backend_inline')\n" + code +
             "\nimport sys; print('TORCH' if 'torch' in sys.modules else 'NOTORCH')")
    times, torch_loaded = [], False
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True, env=fresh_env(tree))
        times.append(time.perf_counter() - start)
        if out.returncode != 0:
            raise RuntimeError(f"first cell failed in {tree}:\n{out.stderr[-2000:]}")
        torch_loaded = out.stdout.split()[-1] == "TORCH"
    return statistics.median(times), torch_loaded


def time_command(args: list, tree: Path, repeats: int) -> tuple[float, bool]:
    """Median wall time of ``python -m dpviz ARGS``; whether torch was loaded, from one more run under -X importtime."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "dpviz", *args], cwd=tree, capture_output=True, text=True,
                             env=fresh_env(tree))
        times.append(time.perf_counter() - start)
        if out.returncode != 0:
            raise RuntimeError(f"python -m dpviz {' '.join(args)} failed in {tree}:\n{out.stderr[-2000:]}")
    traced = subprocess.run([sys.executable, "-X", "importtime", "-m", "dpviz", *args], cwd=tree, capture_output=True,
                            text=True, env=fresh_env(tree))
    imported = {line.rsplit("|", 1)[1].strip() for line in traced.stderr.splitlines() if line.startswith("import time:")}
    return statistics.median(times), "torch" in imported


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose chapters and dpviz to time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cli", action="store_true", help="time only the help of python -m dpviz and its commands")
    args = parser.parse_args(argv)
    tree = Path(args.tree).resolve()
    print(describe())
    if not args.cli:
        print(f"first code cell of each chapter in {tree}, median of {args.repeats} fresh interpreters")
        total = 0.0
        for path in sorted((tree / "notebooks").glob("*.ipynb")):
            seconds, torch_loaded = time_cell(first_code_cell(path), tree, args.repeats)
            total += seconds
            print(f"  {path.stem:32s} {seconds:6.2f} s   {'torch loaded' if torch_loaded else 'no torch'}")
        print(f"  {'all chapters':32s} {total:6.2f} s")
    print(f"the command line's help in {tree}, median of {args.repeats} fresh interpreters")
    missed = []
    for command in HELP:
        seconds, torch_loaded = time_command(command, tree, args.repeats)
        name = " ".join(["python -m dpviz", *command])
        print(f"  {name:32s} {seconds:6.2f} s   {'torch loaded' if torch_loaded else 'no torch'}")
        if torch_loaded or seconds > HELP_TARGET:
            missed.append(name)
    verdict = f"missed by {', '.join(missed)}" if missed else "met"
    print(f"every help without torch and under {HELP_TARGET:g} s: {verdict}; load average now {load()}")


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    main()
