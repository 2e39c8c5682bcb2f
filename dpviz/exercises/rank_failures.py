"""Chapter "when a replica fails"'s exercise on real ranks: the average over the survivors, inside 3 gloo ranks.

Rank ``dead`` (:data:`dpviz.exercises.failures.DEAD`) has died before the all-reduce. Every rank first makes the
survivors' group, ``dist.new_group(survivors)`` (torch asks every rank of the world to make a group, members or not);
then the dead rank stops, calling nothing more, and each survivor holds the gradients of its own shard of a real MLP.

- :func:`reference_worker` runs no reader's code: ``dist.all_reduce`` over the survivors' group divided by the
  group's size (``expected``), and the gradient of the survivors' examples in one batch (``big``);
- :func:`exercise_worker` compiles the reader's function from its source (``torch``, ``dist``, ``math``, ``np`` in
  scope, as :mod:`dpviz.exercises.rank_exercises` does) and calls ``survivor_average(model_grads, group)`` on
  each survivor, under that module's :class:`~dpviz.exercises.rank_exercises.RankGuard`; it sends back what the
  gradient tensors hold afterwards, and nothing it could compare against.

:mod:`dpviz.exercises.failures` (numpy) judges the two and words the answer.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.data import teacher_data
from dpviz.engine.rank import report_progress
from dpviz.exercises.rank_exercises import (GRAD_D_IN, GRAD_SHARD, GRAD_WIDTH, SEED, RankGuard, Recorder,
                                            compile_function)
from dpviz.engine import sandbox
from dpviz.topics.ground_floor.rank_models import build_model



def survivors(world_size: int, dead: int) -> list[int]:
    return [r for r in range(world_size) if r != dead]


def model_grads(rows) -> list:
    """The MLP's gradient tensors on ``rows`` of the data set (a rank's shard, or every survivor's)."""
    x, y = teacher_data(n=3 * GRAD_SHARD, d_in=GRAD_D_IN, seed=SEED)
    model = build_model("mlp", d_in=GRAD_D_IN, width=GRAD_WIDTH, depth=1, seed=SEED)
    loss = torch.mean((model(torch.from_numpy(x[rows])) - torch.from_numpy(y[rows])) ** 2)
    loss.backward()
    return [p.grad for p in model.parameters()]


def shard(rank: int) -> np.ndarray:
    return np.arange(rank * GRAD_SHARD, (rank + 1) * GRAD_SHARD)


def _numpy(tensors) -> list[np.ndarray]:
    return [t.detach().numpy().astype(np.float64) for t in tensors]


def reference_worker(rank: int, world_size: int, dead: int) -> dict:
    """Worker: the real answers on each survivor; rank ``dead`` makes the group and stops."""
    alive = survivors(world_size, dead)
    group = dist.new_group(alive)
    if rank == dead:
        report_progress(0)
        return {"dead": True}
    grads = model_grads(shard(rank))
    local = _numpy(grads)
    for g in grads:  # the real thing: the sum over the survivors' group, divided by its size
        dist.all_reduce(g, group=group)
        g /= dist.get_world_size(group)
    big = model_grads(np.concatenate([shard(r) for r in alive]))
    report_progress(0)
    return {"local": local, "expected": _numpy(grads), "big": _numpy(big), "examples": len(alive) * GRAD_SHARD}


def exercise_worker(rank: int, world_size: int, dead: int, name: str, source: str, call_limit: float) -> dict:
    """Worker: the reader's ``survivor_average(model_grads, group)`` on each survivor's real gradients."""
    group = dist.new_group(survivors(world_size, dead))
    if rank == dead:
        report_progress(0)
        return {"dead": True}
    guard = RankGuard(call_limit)
    grads = model_grads(shard(rank))
    tensors = list(grads)  # the tensors themselves: "in place" means these change
    try:
        fn = compile_function(name, source, Recorder())
    except Exception as e:  # a syntax error, or no such function
        return {"error": sandbox.error_words(e), "kind": type(e).__name__, "printed": 0}
    returned, outcome = guard.call(fn, grads, group)
    out = {"printed": guard.printed}
    if outcome:
        return {**out, **outcome}
    out["got"] = _numpy(tensors)
    if (isinstance(returned, (list, tuple)) and len(returned) == len(tensors)
            and all(torch.is_tensor(t) for t in returned)):
        out["returned"] = _numpy(returned)
    report_progress(0)
    return out
