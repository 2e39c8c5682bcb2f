"""A straggler on purpose: one rank sleeps a delay d inside its compute, and everyone else waits for it.

    from dpviz.topics.waiting.run_straggler import record_straggler
    sweep = record_straggler(k=2, delays=(0.0, 0.05), slow_ranks=(1,), steps=8)
    print(sweep.check())        # the other ranks waited about d inside the all-reduce

The k ranks train a small MLP in lockstep, exactly as :mod:`dpviz.topics.ground_floor.run_training` does (forward,
backward, all-reduce of the flat gradient, SGD step). In each setting one rank calls
``time.sleep(d)`` between its backward pass and the all-reduce: a real delay of a real process,
standing in for a slower device, a noisy neighbour or a page fault. The sweep runs every
(delay, slow rank) pair in one process group, one after another, each from the same θ0, so the
processes start only once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.checks import check_int, check_lr, check_real, check_seed
from dpviz.topics.waiting.records_straggler import StragglerRecord
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran

MAX_DELAY = 10.0  # seconds; a longer sleep is a mistake, not an experiment


def straggler_worker(rank: int, world_size: int, config: StragglerConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.waiting.rank_straggler.straggler_worker`, imported there (with torch), not here."""
    from dpviz.topics.waiting.rank_straggler import straggler_worker

    return straggler_worker(rank, world_size, config)


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
        check_lr("lr", self.lr)
        check_seed("seed", self.seed)
        check_int("threads", self.threads, low=1, high=4096)

    def settings(self) -> list[tuple[float, int]]:
        """Every (delay, slow rank) pair, in order."""
        return [(float(d), int(r)) for d in self.delays for r in self.slow_ranks]


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
