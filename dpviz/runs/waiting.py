"""Chapter 11's runs: the records behind its figures, and the longer runs shipped for its sliders.

    python -m dpviz.runs.waiting                 # rewrites dpviz/records/shipped_runs/waiting_* (about a minute)
    python -m dpviz.runs.waiting --out my_runs   # or somewhere else

What is recorded:

* straggler sweeps for k = 2, 3 and 4 ranks: every delay d in 0, 25, 50, 100 ms with every rank in
  turn as the slow one (the sliders of chapter 11 browse them);
* an overlap run, k = 2: every way of syncing, 12 steps each;
* asynchronous and synchronous SGD through a parameter server, k = 3 workers of which one is five
  times slower, the same number of gradients in each.

``record_figure_records`` makes the (shorter) records behind figures/waiting_*.png; ``./run`` calls it.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from dpviz.records.async_sgd import SHIPPED as ASYNC_SHIPPED
from dpviz.records.overlap import SHIPPED as OVERLAP_SHIPPED
from dpviz.records.straggler import RECORDS_DIR, SHIPPED_KS, shipped_name
from dpviz.runs.async_sgd import record_async
from dpviz.runs.overlap import record_overlap
from dpviz.runs.straggler import record_straggler

DELAYS = (0.0, 0.025, 0.05, 0.1)  # seconds
SLOW_DELAYS = (0.004, 0.004, 0.02)  # seconds per gradient: worker 3 is five times slower than the others
ASYNC = dict(k=3, delays=SLOW_DELAYS, lr=0.05, b=8, seed=0)
OVERLAP_STEPS = 12  # per mode, the first 2 left out of medians
SYNC_UPDATES = 30  # the async run makes k times as many updates: the same number of gradients in each


def record_figure_records(*, quick: bool = False, progress: bool = False) -> dict:
    """The records behind chapter 11's figures: {stem: record}. A few seconds each; ``quick`` shortens them."""
    sync_updates = 8 if quick else SYNC_UPDATES
    with warnings.catch_warnings():
        # 4 processes (a server and 3 workers) on fewer cores only slow the run down; the figures say so
        warnings.filterwarnings("ignore", message=r"k=\d+ ranks share")
        return {
            "waiting_straggler": record_straggler(k=2, delays=(0.0, 0.05) if quick else DELAYS, slow_ranks=(0, 1),
                                                  steps=4 if quick else 8, progress=progress),
            "waiting_overlap": record_overlap(k=2, steps=4 if quick else OVERLAP_STEPS, progress=progress),
            "waiting_async": record_async(mode="async", updates=ASYNC["k"] * sync_updates, progress=progress, **ASYNC),
            "waiting_sync": record_async(mode="sync", updates=sync_updates, progress=progress, **ASYNC),
        }


def regenerate(out_dir=RECORDS_DIR, *, progress: bool = True) -> list[Path]:
    """Record the shipped straggler sweeps and the async/sync pair afresh under ``out_dir``; returns the stems written."""
    out_dir = Path(out_dir)
    written = []
    with warnings.catch_warnings():
        # k = 3, 4 ranks on fewer cores take turns on the CPU; the records say how many cores there were
        warnings.filterwarnings("ignore", message=r"k=\d+ ranks share")
        for k in SHIPPED_KS:
            sweep = record_straggler(k=k, delays=DELAYS, slow_ranks=tuple(range(k)), steps=6, progress=progress)
            print(sweep.check())
            written.append(sweep.save(out_dir / shipped_name(k)))
        overlap = record_overlap(k=2, steps=OVERLAP_STEPS, progress=progress)
        print(overlap.check())
        written.append(overlap.save(out_dir / OVERLAP_SHIPPED))
        for mode, name in ASYNC_SHIPPED.items():
            updates = SYNC_UPDATES * (ASYNC["k"] if mode == "async" else 1)
            run = record_async(mode=mode, updates=updates, progress=progress, **ASYNC)
            print(run.check())
            written.append(run.save(out_dir / name))
    return written


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dpviz.runs.waiting",
                                     description="Record the runs chapter 11's sliders browse (straggler sweeps, async/sync pair).")
    parser.add_argument("--out", default=str(RECORDS_DIR), help="folder to write the records into")
    args = parser.parse_args(argv)
    for stem in regenerate(args.out):
        print(f"wrote {stem}.npz and {stem}.json")


if __name__ == "__main__":
    main()
