"""Record again the runs shipped in ``dpviz/records/shipped_runs/`` (the sliders of this chapter and of all-reduce).

    python -m dpviz.topics.one_group_per_device.run_shipped                 # rewrites dpviz/records/shipped_runs/ (a few minutes)
    python -m dpviz.topics.one_group_per_device.run_shipped --out my_runs   # or somewhere else; load with shipped.grid_runs("my_runs")

What is recorded, and the loaders, live in :mod:`dpviz.topics.one_group_per_device.shipped`.
"""

from __future__ import annotations

from pathlib import Path

from dpviz import course
from dpviz.engine.launch import sharing_cores_said_elsewhere
from dpviz.engine.fronts import record_shipped
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.topics.one_group_per_device.shipped import planned
from dpviz.topics.ground_floor.run_training import record_run


def regenerate(out_dir=SHIPPED_DIR, *, progress: bool = True) -> list[Path]:
    """Record every planned run afresh and save it under ``out_dir``; returns the record stems written."""
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    written = []
    with tqdm(planned(), desc="shipped runs", disable=not progress) as bar:
        for name, settings in bar:
            bar.set_postfix_str(name)
            # k above the core count only slows the run down here; these runs are not timed.
            with sharing_cores_said_elsewhere():
                run = record_run(**settings)
            if run.meta["all_reduce"]:
                run.check()
            written.append(run.save(out_dir / name))
    return written


def main(argv=None) -> None:
    record_shipped("python -m dpviz.topics.one_group_per_device.run_shipped",
                   f"Record the runs the sliders of {course.ref('one_group_per_device', 'all_reduce')} use.", regenerate,
                   argv)


if __name__ == "__main__":
    main()
