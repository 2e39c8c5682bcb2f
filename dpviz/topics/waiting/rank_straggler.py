"""The rank side of :mod:`dpviz.topics.waiting.run_straggler`: k ranks in lockstep, one of them sleeping d before the all-reduce."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.data import teacher_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad, set_flat_grad


def straggler_worker(rank: int, world_size: int, config: StragglerConfig) -> dict:
    """One rank: for each setting, train ``steps`` steps from θ0, sleeping the delay if this rank is the slow one."""
    settings = config.settings()
    x_all, y_all = (torch.from_numpy(a) for a in teacher_data(config.b * world_size * 8, config.d_in, seed=config.seed))
    shape = (len(settings), config.steps)
    t_begin, t_enter, t_exit, slept = (np.zeros(shape) for _ in range(4))

    # A shared zero: the earliest moment any rank left a barrier. On one machine every process reads the
    # same monotonic clock, so the ranks' moments compare directly; across machines, to within clock skew.
    dist.barrier()
    origin = torch.tensor([time.monotonic()], dtype=torch.float64)
    dist.all_reduce(origin, op=dist.ReduceOp.MIN)
    origin = float(origin)
    done = 0
    for s, (delay, slow_rank) in enumerate(settings):
        model = build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)
        sgd = optim.SGD(model.parameters(), lr=config.lr)
        dist.barrier()  # settings do not overlap
        for step in range(config.steps):
            start = ((step * world_size + rank) * config.b) % len(x_all)  # each rank its own slice of the data
            x, y = x_all[start:start + config.b], y_all[start:start + config.b]
            t0 = time.monotonic()
            model.zero_grad(set_to_none=False)
            loss = torch.mean((model(x) - y) ** 2)
            loss.backward()
            g = flat_grad(model)
            if rank == slow_rank and delay > 0:
                a = time.monotonic()
                time.sleep(delay)  # the straggler: this rank is late by d
                slept[s, step] = time.monotonic() - a
            t1 = time.monotonic()
            dist.all_reduce(g)
            t2 = time.monotonic()
            g /= world_size
            set_flat_grad(model, g)
            sgd.step()
            t_begin[s, step], t_enter[s, step], t_exit[s, step] = t0 - origin, t1 - origin, t2 - origin
            launcher.report_progress(done)
            done += 1
    return {"t_begin": t_begin, "t_enter": t_enter, "t_exit": t_exit, "slept": slept,
            "n_params": int(sum(p.numel() for p in model.parameters())), "threads": torch.get_num_threads()}
