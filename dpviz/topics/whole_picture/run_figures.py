"""Record, on this machine, the runs behind the derivation's figures (the torch side of ``./run`` for them).

    from dpviz.topics.whole_picture.run_figures import record_derivation_plan
    records = record_derivation_plan()   # {stem: record}: dpviz.topics.speedup_model.figure_records.FIGURE_PLAN

Seven launches of the line model and the MLP, the all-reduce sweep, and one launch for both hand-written
schedules.
"""

from __future__ import annotations

import warnings

from tqdm.auto import tqdm

from dpviz.topics.speedup_model.figure_records import FIGURE_PLAN
from dpviz.topics.measuring.run_bench import BenchConfig, log_sizes, run_sweep
from dpviz.topics.all_reduce.run_schedule import record_schedules
from dpviz.topics.ground_floor.run_training import record_run

SCHEDULES = ("schedule_ring", "schedule_parameter_server")  # recorded together, in this order


def _sweep(ks, size_range, impls, repeats):
    return run_sweep(BenchConfig(ks=ks, sizes=log_sizes(*size_range), impls=impls, repeats=repeats), progress=False)


def record_derivation_plan(*, quick: bool = False, progress: bool = True) -> dict:
    """Record every run the figures need, ``{stem: record}``; a progress bar follows the stages."""
    settings = FIGURE_PLAN.settings_for(quick=quick)
    runs = [stem for stem in settings if stem.startswith(("line_", "mlp_"))]
    stages = [*[(stem, lambda stem=stem: {stem: record_run(**settings[stem])}) for stem in runs],
              ("bench", lambda: {"bench": _sweep(**settings["bench"])}),
              ("schedules", lambda: dict(zip(SCHEDULES, record_schedules(**settings[SCHEDULES[0]]))))]
    records = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k > cores: every figure that shows such a time says so itself
        for _, make in tqdm(stages, desc="recording the derivation", unit="run", disable=not progress):
            records.update(make())
    return records
