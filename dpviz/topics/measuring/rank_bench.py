"""The rank side of :mod:`dpviz.topics.measuring.run_bench`: each rank times ``dist.all_reduce``, the ring and the parameter server."""

from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.checks import check_choice
from dpviz.topics.all_reduce.rank_collectives import parameter_server_all_reduce, ring_all_reduce
from dpviz.engine.rank import report_progress

_IMPL_FUNCS = {"all_reduce": dist.all_reduce, "ring": ring_all_reduce, "parameter_server": parameter_server_all_reduce}


def bench_worker(rank: int, world_size: int, sizes, impls, repeats: int, warmup: int) -> np.ndarray:
    """Inside a rank: time each implementation at each size; returns seconds, shape (sizes, impls, repeats)."""
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    gen = torch.Generator().manual_seed(rank)
    times = np.zeros((len(sizes), len(impls), repeats))
    for i, nbytes in enumerate(sizes):
        source = torch.randn(nbytes // 4, generator=gen).to(device)
        tensor = torch.empty_like(source)
        for impl in impls:
            for _ in range(warmup):
                tensor.copy_(source)
                _IMPL_FUNCS[impl](tensor)
        # Implementations take turns within each repeat, so a slow spell on a
        # shared machine hits all of them rather than just one.
        for r in range(repeats):
            for j, impl in enumerate(impls):
                tensor.copy_(source)  # fresh input, so repeated sums never overflow
                _sync(device)
                dist.barrier()
                start = time.perf_counter()
                _IMPL_FUNCS[impl](tensor)
                _sync(device)
                times[i, j, r] = time.perf_counter() - start
        report_progress(i)
    return times


PLACEMENTS = ("as scheduled", "a core each", "one core")  # where wakeup_worker puts its ranks' threads


def wakeup_worker(rank: int, world_size: int, sizes, calls: int, placement: str) -> np.ndarray:
    """Inside a rank: :func:`bench_worker`'s ``calls`` timed ``dist.all_reduce`` per size, with the rank's threads
    placed first; seconds, (sizes, calls).

    ``placement`` says where every thread of the rank (gloo's included) may run: ``"as scheduled"`` leaves it
    to the OS, ``"a core each"`` pins rank r to core r mod cores, ``"one core"`` pins every rank to core 0.
    A diagnostic for ``benchmarks/bench_allreduce.py --wakeup``: with every rank on one core, no wake-up
    has to cross to another core.
    """
    placement = check_choice("placement", placement, PLACEMENTS)
    cores = sorted(os.sched_getaffinity(0))
    if placement != "as scheduled":
        core = cores[0] if placement == "one core" else cores[rank % len(cores)]
        for tid in os.listdir("/proc/self/task"):  # sched_setaffinity(0, ...) would pin the calling thread alone
            os.sched_setaffinity(int(tid), {core})
    return bench_worker(rank, world_size, sizes, ("all_reduce",), calls, warmup=3)[:, 0, :]




def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # GPU calls return before the work is done
