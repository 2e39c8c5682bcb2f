"""Which recorder makes which figure plan's records: the torch side of ``./run``, one line a chapter.

    from dpviz.recipes import RECIPES
    records = RECIPES["accumulation"](quick=False, progress=True)   # {stem: record}

Each recipe takes ``quick`` and ``progress`` and returns the records of the plan of that name
(a ``FIGURE_PLAN`` in the records of the chapter that draws it), by stem.
"""

from __future__ import annotations

import importlib.util
import pkgutil
import sys

from dpviz import course
from dpviz.engine import forkserver

RECIPES = course.recipes()  # {plan name: recorder}, from each chapter's line in dpviz.course

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
    workers = sorted(name for name in sys.modules  # the engine's launch side and the fronts the recipes use
                     if name.startswith("dpviz.engine.") or name.rsplit(".", 1)[-1].startswith("run_"))
    workers = [name for name in workers if not _draws(name)]
    rank_sides = [f"{c.package}.{m.name}" for c in course.COURSE
                  for m in pkgutil.iter_modules(importlib.util.find_spec(c.package).submodule_search_locations)
                  if m.name.startswith("rank_")]
    forkserver.warm_up(preload=(*workers, *rank_sides, *RANK_IMPORTS))


def _draws(name: str) -> bool:
    """Whether a module of the engine is one of its drawing or kernel-side ones, which ranks never need."""
    return name.rsplit(".", 1)[-1] in ("canvas", "slider", "layout", "style", "quiz", "cards", "figure_group", "sandbox",
                                       "verdict")
