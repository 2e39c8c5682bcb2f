"""Measure all-reduce time over k and message size M, and fit the cost model to it.

    from dpviz.topics.measuring.run_bench import BenchConfig, run_sweep
    record = run_sweep(BenchConfig(ks=(2, 4), sizes=(4096, 4 << 20), repeats=10))
    print(record.table())
    record.fit("ring")                      # alpha [s] and beta [B/s] for this machine
    record.save("runs/bench")               # runs/bench.npz + runs/bench.json

Each k gets its own process group (one :func:`dpviz.engine.launch.launch`). Inside it,
every rank times the built-in ``dist.all_reduce`` and the hand-written ring and
parameter server of :mod:`dpviz.topics.all_reduce.rank_collectives` on float32 tensors of M bytes: a
few untimed warm-up calls, then ``repeats`` timed calls, each after a
``dist.barrier()`` so that all ranks start together.

A collective is over only when its last rank is done, so the time kept for each
repeat is the largest of the ranks' times. The cost model is fitted to the fastest
repeat at each point (why: :mod:`dpviz.topics.speedup_model.records`); the median and quartiles
over repeats are kept beside it.

The record it returns, and its arrays, are declared in :mod:`dpviz.topics.speedup_model.records`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.fronts import rank_side_names
from dpviz.engine.checks import check_choice, check_int, check_timeout
from dpviz.engine.launch import BACKENDS, launch, resolve_backend, threads_per_rank
from dpviz.engine.where import where_it_ran
from dpviz.topics.speedup_model.records import IMPLS, BenchRecord


def bench_worker(rank: int, world_size: int, sizes, impls, repeats: int, warmup: int) -> np.ndarray:
    """Runs in each rank: :func:`dpviz.topics.measuring.rank_bench.bench_worker`, imported there (with torch), not here."""
    from dpviz.topics.measuring.rank_bench import bench_worker

    return bench_worker(rank, world_size, sizes, impls, repeats, warmup)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.measuring.rank_bench", (
    "wakeup_worker", "PLACEMENTS",
))


@dataclass
class BenchConfig:
    """What to sweep; checked on creation and again by :func:`run_sweep`."""

    ks: tuple = (2, 4)  # process-group sizes, one group each
    sizes: tuple = (1 << 10, 1 << 14, 1 << 18, 1 << 22)  # message sizes M, bytes (multiples of 4: float32)
    impls: tuple = IMPLS  # which all-reduce implementations to time
    repeats: int = 10  # timed calls per (k, M, impl)
    warmup: int = 2  # untimed calls per (k, M, impl), before the timed ones
    backend: str = "gloo"  # "gloo", "nccl" or "auto", as in launch()
    stall_timeout: float = 120.0  # seconds a rank may go without finishing a message size

    def __post_init__(self):
        self.ks = tuple(check_int("ks", k, low=1, high=1024) for k in _as_tuple("ks", self.ks))
        self.sizes = tuple(_check_size(M) for M in _as_tuple("sizes", self.sizes))
        self.impls = tuple(check_choice("impls", i, IMPLS) for i in _as_tuple("impls", self.impls))
        self.repeats = check_int("repeats", self.repeats, low=1, high=10_000)
        self.warmup = check_int("warmup", self.warmup, low=0, high=1000)
        self.backend = check_choice("backend", self.backend, BACKENDS)
        self.stall_timeout = check_timeout("stall_timeout", self.stall_timeout)


def log_sizes(low: int, high: int, n: int) -> tuple:
    """``n`` message sizes from ``low`` to ``high`` bytes, evenly spaced on a log scale, rounded to whole float32s."""
    low, high = check_int("low", low, low=4), check_int("high", high, low=low)
    n = check_int("n", n, low=1)
    sizes = np.unique(np.round(np.geomspace(low, high, n) / 4).astype(np.int64) * 4)
    return tuple(int(M) for M in sizes)


def run_sweep(config: BenchConfig | None = None, *, progress: bool = True) -> BenchRecord:
    """Time every (k, M, impl) of ``config`` on real process groups; one group per k."""
    from tqdm.auto import tqdm

    config = BenchConfig() if config is None else BenchConfig(**asdict(config))  # re-checks edited fields
    rows = {"k": [], "M": [], "impl": [], "times": []}
    backends, threads = [], []
    for k in tqdm(config.ks, desc="all-reduce sweep (process groups)", disable=not progress):
        backends.append(resolve_backend(config.backend, k))
        threads.append(threads_per_rank(k))
        per_rank = launch(
            bench_worker, k,
            args=(config.sizes, config.impls, config.repeats, config.warmup),
            backend=config.backend, stall_timeout=config.stall_timeout,
            total_steps=len(config.sizes), progress=progress,
        )
        slowest = np.max(np.stack(per_rank), axis=0)  # (sizes, impls, repeats): the last rank to finish
        for i, M in enumerate(config.sizes):
            for j, impl in enumerate(config.impls):
                rows["k"].append(k)
                rows["M"].append(M)
                rows["impl"].append(impl)
                rows["times"].append(slowest[i, j])
    meta = {
        **where_it_ran(BenchRecord, backend=backends[0] if len(set(backends)) == 1 else backends,
                       threads_per_rank=dict(zip(map(str, config.ks), threads))),
        "dtype": "float32",
        "config": asdict(config),
    }
    return BenchRecord.from_times(rows["k"], rows["M"], rows["impl"], rows["times"], meta)


def _as_tuple(name: str, values) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list or tuple of values; got {values!r}.")
    values = tuple(values)
    if not values or len(set(values)) < len(values):
        raise ValueError(f"{name} must hold at least one value and no value twice; got {values!r}.")
    return values


def _check_size(M) -> int:
    M = check_int("sizes", M, low=4)
    if M % 4:
        raise ValueError(f"sizes must be whole float32 tensors, multiples of 4 bytes >= 4; got {M}.")
    return M
