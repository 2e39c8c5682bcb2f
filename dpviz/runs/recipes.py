"""Which recorder makes which figure plan's records: the torch side of ``./run``, one line a chapter.

    from dpviz.runs.recipes import RECIPES
    records = RECIPES["accumulation"](quick=False, progress=True)   # {stem: record}

Each recipe takes ``quick`` and ``progress`` and returns the records of the plan of that name
(``dpviz.records.<kind>.FIGURE_PLAN``), by stem.
"""

from __future__ import annotations

import pkgutil
import sys

from dpviz.runs import accumulation, figure_inputs, forkserver, local_sgd, lr_sweep, ranks, sharding, splitting, waiting

RECIPES = {
    "derivation": figure_inputs.record_figure_records,   # dpviz.records.figure_set.FIGURE_PLAN
    "bigger_batch": lr_sweep.record_figure_records,      # dpviz.records.lr_grid.FIGURE_PLAN
    "accumulation": accumulation.record_figure_records,  # dpviz.records.accumulation.FIGURE_PLAN
    "waiting": waiting.record_figure_records,            # dpviz.records.waiting.FIGURE_PLAN
    "splitting": splitting.record_figure_records,        # dpviz.records.pipeline.FIGURE_PLAN
    "sharding": sharding.record_figure_records,          # dpviz.records.sharding.FIGURE_PLAN
    "cheaper_sync": local_sgd.record_figure_records,     # dpviz.records.compression.FIGURE_PLAN
}

# What the recipes' ranks import of torch inside their work, each in every rank that uses it, unless the fork
# server has: FSDP2's fully_shard (sharding; 1-2 s a rank on 2 cores), DDP and its communication hooks
# (waiting, cheaper_sync), the model averager (local SGD), and torch._dynamo, which DDP's constructor and FSDP2's
# first shard import (0.8 s of CPU a rank; py-spy found about 4 core-seconds of it in one ./run).
RANK_IMPORTS = ("torch.distributed.fsdp", "torch.nn.parallel", "torch.distributed.algorithms.ddp_comm_hooks.default_hooks",
                "torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook",
                "torch.distributed.algorithms.model_averaging.averagers", "torch._dynamo")


def warm_up() -> None:
    """Start the fork server ahead of the first recipe, importing what every recipe's ranks would import each.

    Those are torch, the workers' modules (each rank unpickles its worker from the module the recipe
    imported, then imports the worker's rank side) and :data:`RANK_IMPORTS`. Imported once, in the
    server, they cost no rank anything. Returns at once.
    """
    workers = sorted(name for name in sys.modules if name.startswith("dpviz.runs."))  # the fronts the recipes use
    rank_sides = [f"{ranks.__name__}.{m.name}" for m in pkgutil.iter_modules(ranks.__path__)]
    forkserver.warm_up(preload=(*workers, *rank_sides, *RANK_IMPORTS))
