"""Which recorder makes which figure plan's records: the torch side of ``./run``, one line a chapter.

    from dpviz.runs.recipes import RECIPES
    records = RECIPES["accumulation"](quick=False, progress=True)   # {stem: record}

Each recipe takes ``quick`` and ``progress`` and returns the records of the plan of that name
(``dpviz.records.<kind>.FIGURE_PLAN``), by stem.
"""

from __future__ import annotations

from dpviz.runs import accumulation, figure_inputs, local_sgd, lr_sweep, sharding, splitting, waiting

RECIPES = {
    "derivation": figure_inputs.record_figure_records,   # dpviz.records.figure_set.FIGURE_PLAN
    "bigger_batch": lr_sweep.record_figure_records,      # dpviz.records.lr_grid.FIGURE_PLAN
    "accumulation": accumulation.record_figure_records,  # dpviz.records.accumulation.FIGURE_PLAN
    "waiting": waiting.record_figure_records,            # dpviz.records.waiting.FIGURE_PLAN
    "splitting": splitting.record_figure_records,        # dpviz.records.pipeline.FIGURE_PLAN
    "sharding": sharding.record_figure_records,          # dpviz.records.sharding.FIGURE_PLAN
    "cheaper_sync": local_sgd.record_figure_records,     # dpviz.records.compression.FIGURE_PLAN
}
