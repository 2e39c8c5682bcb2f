"""Real runs recorded once and shipped in ``dpviz/records/``, so that sliders never have to launch one.

Chapters 04 and 05 let the reader move k and b, and a slider must answer at
once; a run takes seconds. So every combination the sliders offer was run for
real, on the machine named in each record's metadata, and saved here:

* the grid: the line model, k in {1, 2, 3, 4}, b in {4, 8, 16}, 5 steps of SGD;
* the drift pairs: k = 4, with the all-reduce on and off, for SGD, momentum and Adam.

    from dpviz import shipped
    grid = shipped.grid_runs()        # {(k, b): Run}
    drift = shipped.drift_runs()      # {(optimizer, all_reduce): Run}

To record them again on your own machine (a few minutes)::

    python -m dpviz.shipped                 # rewrites dpviz/records/
    python -m dpviz.shipped --out my_runs   # or somewhere else; load with grid_runs("my_runs")
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from dpviz.record import Run
from dpviz.training import OPTIMIZERS, record_run

RECORDS_DIR = Path(__file__).resolve().parent / "records"

GRID_K = (1, 2, 3, 4)
GRID_B = (4, 8, 16)
GRID = dict(model="line", steps=5, optimizer="sgd", lr=0.1, seed=0)
DRIFT_K = 4
DRIFT = dict(model="line", k=DRIFT_K, b=8, steps=20, lr=0.1, seed=0)  # enough steps for the drift to show


def grid_name(k: int, b: int) -> str:
    return f"grid_k{k}_b{b}"


def drift_name(optimizer: str, all_reduce: bool) -> str:
    return f"drift_{optimizer}_{'on' if all_reduce else 'off'}"


def planned() -> list[tuple[str, dict]]:
    """Every shipped record: its file name and the :func:`record_run` settings that make it."""
    plan = [(grid_name(k, b), dict(GRID, k=k, b=b)) for k in GRID_K for b in GRID_B]
    plan += [
        (drift_name(opt, on), dict(DRIFT, optimizer=opt, all_reduce=on))
        for opt in OPTIMIZERS
        for on in (True, False)
    ]
    return plan


def regenerate(out_dir=RECORDS_DIR, *, progress: bool = True) -> list[Path]:
    """Record every planned run afresh and save it under ``out_dir``; returns the record stems written."""
    out_dir = Path(out_dir)
    plan = planned()
    written = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(plan), desc="shipped runs")
    try:
        for name, settings in plan:
            if bar is not None:
                bar.set_postfix_str(name)
            with warnings.catch_warnings():
                # k above the core count only slows the run down here; these runs are not timed.
                warnings.filterwarnings("ignore", message=r"k=\d+ ranks share")
                run = record_run(timeout=180, **settings)
            if run.meta["all_reduce"]:
                run.check()
            written.append(run.save(out_dir / name))
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    return written


def _load(out_dir, name: str) -> Run:
    path = Path(out_dir) / name
    if not path.with_suffix(".json").is_file():
        raise FileNotFoundError(
            f"path {str(path)!r}.json does not exist; record the shipped runs with `python -m dpviz.shipped --out {out_dir}`."
        )
    return Run.load(path)


def grid_runs(records_dir=RECORDS_DIR) -> dict[tuple[int, int], Run]:
    """The shipped grid, keyed by (k, b): line model, 5 steps of SGD with the all-reduce on."""
    return {(k, b): _load(records_dir, grid_name(k, b)) for k in GRID_K for b in GRID_B}


def drift_runs(records_dir=RECORDS_DIR) -> dict[tuple[str, bool], Run]:
    """The shipped drift pairs, keyed by (optimizer, all_reduce): k = 4, b = 8, 20 steps."""
    return {(opt, on): _load(records_dir, drift_name(opt, on)) for opt in OPTIMIZERS for on in (True, False)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dpviz.shipped", description="Record the runs the sliders of chapters 04 and 05 use.")
    parser.add_argument("--out", default=str(RECORDS_DIR), help="folder to write the records into")
    args = parser.parse_args(argv)
    for stem in regenerate(args.out):
        print(f"wrote {stem}.npz and {stem}.json")


if __name__ == "__main__":
    main()
