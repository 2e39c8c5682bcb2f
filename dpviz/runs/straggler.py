"""A straggler on purpose: one rank sleeps a delay d inside its compute, and everyone else waits for it.

    from dpviz.runs.straggler import record_straggler
    sweep = record_straggler(k=2, delays=(0.0, 0.05), slow_ranks=(1,), steps=8)
    print(sweep.check())        # the other ranks waited about d inside the all-reduce

The k ranks train a small MLP in lockstep, exactly as :mod:`dpviz.runs.training` does (forward,
backward, all-reduce of the flat gradient, SGD step). In each setting one rank calls
``time.sleep(d)`` between its backward pass and the all-reduce: a real delay of a real process,
standing in for a slower device, a noisy neighbour or a page fault. The sweep runs every
(delay, slow rank) pair in one process group, one after another, each from the same θ0, so the
processes start only once.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from dpviz.checks import check_int, check_real
from dpviz.data import teacher_data
from dpviz.records.straggler import StragglerRecord
from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.runs.models import build_model, flat_grad, set_flat_grad
from dpviz.runs.where import where_it_ran

MAX_DELAY = 10.0  # seconds; a longer sleep is a mistake, not an experiment


@dataclass
class StragglerConfig:
    k: int = 2                    # ranks
    delays: tuple = (0.0, 0.05)   # seconds of injected delay; each is run with each slow rank
    slow_ranks: tuple = (1,)      # ranks that take their turn as the straggler
    steps: int = 8                # steps per setting, warm-up included
    warmup: int = 2               # first steps of each setting left out of medians
    width: int = 512              # hidden units per layer of the MLP
    depth: int = 2                # hidden layers
    d_in: int = 16                # input features
    b: int = 64                   # examples per rank per step
    lr: float = 0.05              # learning rate η
    seed: int = 0                 # seeds the data and the model
    threads: int = 1              # intra-op threads per rank: the same in every run, so times compare

    def __post_init__(self):
        check_int("k", self.k, low=1, high=64)
        self.delays = tuple(self.delays) if np.ndim(self.delays) else (self.delays,)
        self.slow_ranks = tuple(self.slow_ranks) if np.ndim(self.slow_ranks) else (self.slow_ranks,)
        if not self.delays or not self.slow_ranks:
            raise ValueError("delays and slow_ranks must each hold at least one value.")
        for d in self.delays:
            check_real("delay", d, low=0.0, high=MAX_DELAY)
        for r in self.slow_ranks:
            check_int("slow_rank", r, low=0, high=self.k - 1)
        check_int("steps", self.steps, low=1, high=10_000)
        check_int("warmup", self.warmup, low=0, high=self.steps - 1)
        check_int("width", self.width, low=1, high=1 << 14)
        check_int("depth", self.depth, low=1, high=16)
        check_int("d_in", self.d_in, low=1, high=1 << 14)
        check_int("b", self.b, low=1, high=1 << 16)
        check_real("lr", self.lr, low=0.0, low_open=True)
        check_int("threads", self.threads, low=1, high=4096)

    def settings(self) -> list[tuple[float, int]]:
        """Every (delay, slow rank) pair, in order."""
        return [(float(d), int(r)) for d in self.delays for r in self.slow_ranks]


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


def record_straggler(config: StragglerConfig | None = None, *, progress: bool = False, **overrides) -> StragglerRecord:
    """Launch ``config.k`` ranks, run every (delay, slow rank) setting, return the :class:`StragglerRecord`.

    ``record_straggler(k=2, delays=(0.0, 0.05), slow_ranks=(1,))`` builds the config for you.
    """
    config = make_config(config, **overrides)
    results = launcher.launch(straggler_worker, config.k, args=(config,), backend="gloo", threads=config.threads,
                              total_steps=len(config.settings()) * config.steps, progress=progress)
    return assemble(config, results)


def make_config(config: StragglerConfig | None = None, **overrides) -> StragglerConfig:
    return StragglerConfig(**{**(asdict(config) if config else {}), **overrides})


def assemble(config: StragglerConfig, results: list[dict]) -> StragglerRecord:
    """The record from the ranks' results, in rank order."""
    settings = config.settings()
    arrays = {name: np.stack([r[name] for r in results], axis=-1) for name in ("t_begin", "t_enter", "t_exit", "slept")}
    arrays["delay"] = np.array([d for d, _ in settings], dtype=np.float64)
    arrays["slow_rank"] = np.array([r for _, r in settings], dtype=np.int64)
    meta = dict(
        k=config.k, steps=config.steps, warmup=config.warmup, model="mlp", width=config.width, depth=config.depth,
        n_params=results[0]["n_params"], b=config.b, lr=config.lr, seed=config.seed,
        **where_it_ran(StragglerRecord, backend="gloo", threads_per_rank=results[0]["threads"]),
    )
    return StragglerRecord(meta, arrays)
