"""Each chapter's Run All, as a reader's kernel does it: the time to start the kernel, then to run every cell.

    .venv/bin/python benchmarks/bench_chapters.py                      # every chapter in notebooks/
    .venv/bin/python benchmarks/bench_chapters.py 05_all_reduce 07     # chapters whose names start so

Each chapter runs in a fresh python3 kernel of this environment (nbclient), in the notebooks folder,
as JupyterLab's "Restart Kernel and Run All Cells" does; nothing is saved. Printed per chapter: the
kernel start, Run All (every cell, the live runs included), their sum, and the slowest cell.
Target: Run All within 10 s on 2 cores, quiet. The load average is printed beside the verdict, because
the live runs' times depend on what else the machine is doing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

import machine  # noqa: E402
from machine import describe, load

ROOT = Path(__file__).resolve().parents[1]
TARGET = 10.0  # s for one chapter's Run All on 2 cores, quiet (issue 21)


def run_all(path: Path) -> tuple[float, float, float, int]:
    """Kernel start, Run All, and the slowest cell's seconds and index, for the chapter at ``path``."""
    nb = nbformat.read(path, as_version=4)
    sockets = tempfile.mkdtemp(prefix="dpviz-bench-kernel-")  # local sockets, as a Jupyter server's kernels use
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
    client = NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(path.parent)}})
    begin = time.perf_counter()
    try:
        with client.setup_kernel(cwd=str(path.parent)):
            started = time.perf_counter()
            slowest, where = 0.0, -1
            for index, cell in enumerate(nb.cells):
                t = time.perf_counter()
                client.execute_cell(cell, index)
                if time.perf_counter() - t > slowest:
                    slowest, where = time.perf_counter() - t, index
            done = time.perf_counter()
    finally:  # the client does not shut down a kernel it did not start itself
        if km.has_kernel:
            km.shutdown_kernel()
        shutil.rmtree(sockets, ignore_errors=True)
    return started - begin, done - started, slowest, where


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="name prefixes of the chapters to run (default: all)")
    args = parser.parse_args(argv)
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if args.chapters:
        paths = [p for p in paths if any(p.stem.startswith(c) for c in args.chapters)]
    print(describe())
    print(f"Run All target <= {TARGET:g} s a chapter")
    print(f"{'chapter':34s} {'kernel':>8s} {'Run All':>8s} {'both':>8s}   slowest cell")
    over = []
    for path in paths:
        start, run, slowest, where = run_all(path)
        flag = "" if run <= TARGET else "   OVER TARGET"
        print(f"{path.stem:34s} {start:6.1f} s {run:6.1f} s {start + run:6.1f} s   cell {where}: {slowest:.1f} s{flag}",
              flush=True)
        if run > TARGET:
            over.append(path.stem)
    verdict = "every chapter within" if not over else f"{len(over)} over: {', '.join(over)};"
    print(f"{verdict} the {TARGET:g} s target: {'met' if not over else 'missed'} (load average now {load()})")


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    main()
