"""The first ``./run``'s install: its time, what it fetched, and the size of the environment it made.

Runs ``./run setup`` (what the first ``./run`` or ``./run test`` does before its job) into a fresh virtual environment
in a temporary folder, with a pip cache of its own (empty: as on a fresh machine) and pip's log, then reads the log:

* fetched over the network: the wheels pip downloaded, as its log sizes them;
* taken from this machine: wheels pip read from a local folder or a ``file://`` index (a mirror; on the development
  machines, torch's CPU build lies on disk);
* which torch build came, and whether any ``nvidia-*`` wheel came with it (the CUDA build brings about 3 GB);
* the environment's size on disk, and torch's share of it.

    .venv/bin/python benchmarks/bench_install.py            # --warm-cache: with your pip cache; --keep: into HISTORY.md

The machine's load matters here as everywhere (pip unpacks and compiles bytecode), and the network's speed more.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe, keep_if_asked

ROOT = Path(__file__).resolve().parents[1]
UNITS = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1.0, "bytes": 1.0}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def read_log(text: str) -> dict:
    """What pip's log says it fetched (name -> bytes) and read from local files (path -> bytes)."""
    fetched, local = {}, {}
    for name, size, unit in re.findall(r"Downloading (\S+) \(([\d.]+) (kB|MB|GB|B|bytes)\)", text):
        fetched[name] = float(size) * UNITS[unit]
    for path in re.findall(r"Processing (/\S+\.(?:whl|tar\.gz|zip))", text):
        if Path(path).is_file():
            local[path] = Path(path).stat().st_size
    return {"fetched": fetched, "local": local}


def main() -> None:
    argv = keep_if_asked(__file__)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warm-cache", action="store_true", help="use your pip cache instead of an empty one")
    parser.add_argument("--dir", type=Path, default=None, help="where to make the environment (default: a temporary "
                        "folder, removed after)")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="dpviz-install-", dir=args.dir))
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env.update(DPVIZ_VENV=str(base / "venv"), PIP_LOG=str(base / "pip.log"))
        if not args.warm_cache:
            env["PIP_CACHE_DIR"] = str(base / "pip-cache")
        start = time.perf_counter()
        done = subprocess.run([str(ROOT / "run"), "setup"], env=env, cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"./run setup failed after {seconds:.0f} s:\n{done.stderr[-3000:]}")
        log = (base / "pip.log").read_text(errors="replace")
        seen = read_log(log)
        python = base / "venv" / "bin" / "python"
        torch = subprocess.run([str(python), "-c", "import torch, pathlib; print(torch.__version__); "
                                "print(pathlib.Path(torch.__file__).parent)"], capture_output=True, text=True,
                               check=True).stdout.split()
        listing = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True,
                                 text=True, check=True).stdout.split()
        nvidia = [line for line in listing if line.lower().startswith("nvidia-")]
        torch_source = next((p for p in [*seen["local"], *seen["fetched"]] if Path(p).name.startswith("torch-")), "?")
        mb = 1e6
        print(f"first install (./run setup, pip cache {'yours' if args.warm_cache else 'empty'}): {seconds:.0f} s")
        for line in done.stderr.splitlines():  # ./run's own words: the torch build it chose, an index not reached
            if line.startswith("setting up") or "cannot be reached" in line:
                print(f"./run said: {line}")
        print(f"fetched over the network: {sum(seen['fetched'].values()) / mb:.0f} MB in {len(seen['fetched'])} files"
              + (f", the largest {max(seen['fetched'], key=seen['fetched'].get)}" if seen["fetched"] else ""))
        print(f"taken from files on this machine: {sum(seen['local'].values()) / mb:.0f} MB in {len(seen['local'])} "
              "files (a local mirror or find-links folder)")
        print(f"torch {torch[0]} from {torch_source}; nvidia-* packages: {len(nvidia)}"
              + (f" ({', '.join(nvidia[:4])}...)" if nvidia else ""))
        print(f"installed: {folder_bytes(base / 'venv') / mb:.0f} MB in the environment, torch "
              f"{folder_bytes(Path(torch[1])) / mb:.0f} MB of it; {len(listing)} packages")
        print(describe())
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
