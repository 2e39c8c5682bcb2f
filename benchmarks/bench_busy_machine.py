"""The README's two commands on a busy machine: `./run`, then `./run test -x`, on a clean clone beside CPU burners.

    .venv/bin/python benchmarks/bench_busy_machine.py                 # two burners: a load of about 4 on 2 cores
    .venv/bin/python benchmarks/bench_busy_machine.py --burners 0     # the same on this machine as it is
    .venv/bin/python benchmarks/bench_busy_machine.py --test-args tests/test_claims.py notebooks/06_speedup_model.ipynb

A clean clone of this checkout's HEAD (``git clone``, into a temporary folder removed after) runs ``./run``: the
first call creates the clone's ``.venv`` and installs dpviz into it (timed with it, as a new user meets it), then
records every figure's runs on this machine into ``my_figures/``. Then ``./run test -x`` runs every test, which must
pass whatever those runs showed: the tests and nbval read the shipped records (DESIGN.md, "Targets": load).
Beside both, ``--burners`` processes each spin on a core, as other students' kernels or another job would.

Printed: each command's time, its exit status and its last lines, and the load average sampled every 10 s while
it ran; for ``./run``, also the lines its claims printed that say a timing lesson did not show on its runs. The times are reported, not held to a target; the verdict is whether both commands passed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import machine  # noqa: E402
from machine import describe, load

ROOT = Path(__file__).resolve().parents[1]
BURN = "while True:\n    pass\n"


class LoadSampler:
    """The 1-minute load average every ``every`` seconds, on a thread, until stopped."""

    def __init__(self, every: float = 10.0):
        self.every, self.samples, self._stop = every, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def words(self) -> str:
        if not self.samples:
            return "no load sample"
        return (f"load (1 min) median {statistics.median(self.samples):.1f}, max {max(self.samples):.1f} "
                f"over {len(self.samples)} samples")


# Words with which a claim says that a timing lesson did not show on the data it was given (and why).
DID_NOT_SHOW = re.compile(r"does not show|did not shrink|less than 1/k|other work|were busy|short of the|too noisy|"
                          r"shared \d+ cores?|took turns|machine was busy")


def timed(command: list[str], cwd: Path, timeout: float) -> tuple[int, float, str]:
    """Run ``command`` in ``cwd``: its exit status (124 on a timeout), its seconds and its output."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        rc, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        out = (expired.stdout or b"") + (expired.stderr or b"")
        rc, out = 124, (out if isinstance(out, str) else out.decode(errors="replace")) + f"\n(stopped after {timeout:.0f} s)"
    return rc, time.perf_counter() - start, out


def last_lines(out: str, n: int = 6) -> str:
    """The output's last ``n`` lines, progress bars left out."""
    lines = [line for line in out.replace("\r", "\n").splitlines() if line.strip() and "it/s]" not in line]
    return "\n".join(lines[-n:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burners", type=int, default=2, help="processes spinning on a core each (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds each command may take (default %(default)s)")
    parser.add_argument("--test-args", nargs="*", default=[], help="what ./run test runs, after -x (default: everything)")
    args = parser.parse_args(argv)
    if args.burners < 0:
        parser.error(f"--burners must be 0 or more; got {args.burners}.")
    print(describe())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"a clean clone of {commit or 'HEAD'}, beside {args.burners} CPU burner{'s' if args.burners != 1 else ''}: "
          f"./run, then ./run test -x {' '.join(args.test_args)}".rstrip())
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="dpviz-busy-") as tmp:
            clone = Path(tmp) / "dpviz"
            subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
            time.sleep(5 if burners else 0)  # the burners' load shows in the load average before ./run starts
            for name, command in (("./run", ["./run"]), ("./run test -x", ["./run", "test", "-x", *args.test_args])):
                with LoadSampler() as sampler:
                    rc, seconds, out = timed(command, clone, args.timeout)
                results.append((name, rc))
                print(f"\n{name}: exit status {rc} in {seconds:.0f} s; {sampler.words()}")
                if name == "./run":  # what its claims printed: which timing lessons these runs did not show
                    said = [line.strip() for line in out.splitlines() if DID_NOT_SHOW.search(line)]
                    print(f"  its claims said of {len(said)} line{'s' if len(said) != 1 else ''} that a timing lesson did "
                          "not show on these runs" + (":" if said else ""))
                    for line in said[:5]:
                        print(f"    {line[:300]}")
                print("  " + last_lines(out).replace("\n", "\n  "), flush=True)
                if rc != 0:
                    break
    finally:
        for burner in burners:  # only the processes this script started, by their own handles
            burner.kill()
            burner.wait()
    passed = len(results) == 2 and all(rc == 0 for _, rc in results)
    print(f"\n{'both passed' if passed else 'FAILED: ' + ', '.join(f'{n} exit {rc}' for n, rc in results)} "
          f"beside {args.burners} burner{'s' if args.burners != 1 else ''} (load average now {load()})")
    return 0 if passed else 1


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    sys.exit(main())
