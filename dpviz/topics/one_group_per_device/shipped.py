"""Real runs recorded once and shipped in ``dpviz/records/shipped_runs/``, so that sliders never wait for one.

This chapter and all-reduce let the reader move k and b, and a slider must answer at
once, while a run takes seconds. So every combination the sliders offer was run
for real, on the machine named in each record's metadata, and saved:

* the grid: the line model, k in {1, 2, 3, 4}, b in {4, 8, 16}, 5 steps of SGD;
* the drift pairs: k = 4, with the all-reduce on and off, for SGD, momentum and Adam.

    from dpviz.topics.one_group_per_device import shipped
    grid = shipped.grid_runs()        # {(k, b): Run}
    drift = shipped.drift_runs()      # {(optimizer, all_reduce): Run}

``python -m dpviz.topics.one_group_per_device.run_shipped`` records them again (a few minutes); see there.
"""

from __future__ import annotations

from pathlib import Path

from dpviz.engine.paths import SHIPPED_DIR
from dpviz.topics.ground_floor.records import Run


OPTIMIZERS = ("sgd", "momentum", "adam")
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
    """Every shipped record: its file name and the ``record_run`` settings that make it."""
    plan = [(grid_name(k, b), dict(GRID, k=k, b=b)) for k in GRID_K for b in GRID_B]
    plan += [
        (drift_name(opt, on), dict(DRIFT, optimizer=opt, all_reduce=on))
        for opt in OPTIMIZERS
        for on in (True, False)
    ]
    return plan


def _load(records_dir, name: str) -> Run:
    path = Path(records_dir) / name
    if not path.with_suffix(".json").is_file():
        raise FileNotFoundError(
            f"path {str(path)!r}.json does not exist; record the shipped runs with "
            f"`python -m dpviz.topics.one_group_per_device.run_shipped --out {records_dir}`."
        )
    return Run.load(path)


def grid_runs(records_dir=SHIPPED_DIR) -> dict[tuple[int, int], Run]:
    """The shipped grid, keyed by (k, b): line model, 5 steps of SGD with the all-reduce on."""
    return {(k, b): _load(records_dir, grid_name(k, b)) for k in GRID_K for b in GRID_B}


def drift_runs(records_dir=SHIPPED_DIR) -> dict[tuple[str, bool], Run]:
    """The shipped drift pairs, keyed by (optimizer, all_reduce): k = 4, b = 8, 20 steps."""
    return {(opt, on): _load(records_dir, drift_name(opt, on)) for opt in OPTIMIZERS for on in (True, False)}
