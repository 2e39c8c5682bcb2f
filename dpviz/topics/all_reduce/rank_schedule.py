"""The rank side of :mod:`dpviz.topics.all_reduce.run_schedule`: a hand-written all-reduce that notes its transfers, beside ``dist.all_reduce``."""

from __future__ import annotations

import torch
import torch.distributed as dist

from dpviz.topics.all_reduce import rank_collectives as collectives

PHASES = {"ring": collectives.RING_PHASES, "parameter_server": collectives.SERVER_PHASES}


def schedule_worker(rank: int, world_size: int, n_elements: int, impl: str, seed: int = 0) -> dict:
    """One rank: all-reduce a seeded tensor by hand and with ``dist.all_reduce``; return both and the transfers made."""
    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    x = torch.randint(-9, 10, (n_elements,), generator=gen).float()  # whole numbers: every summation order agrees
    mine, reference = x.clone(), x.clone()
    entries = []
    if impl == "ring":
        sent = collectives.ring_all_reduce(mine, schedule=entries)
    else:
        sent = collectives.parameter_server_all_reduce(mine, schedule=entries)
    dist.all_reduce(reference)
    return {
        "input": x.numpy(),
        "result": mine.numpy(),
        "all_reduce": reference.numpy(),
        "bytes_sent": int(sent),
        "entries": entries,
        "backend": dist.get_backend(),
        "phases": PHASES[impl],
    }



def schedules_worker(rank: int, world_size: int, n_elements: int, impls: tuple, seed: int = 0) -> list[dict]:
    """One rank, several hand-written all-reduces in turn (one launch for all of them); a result per impl."""
    return [schedule_worker(rank, world_size, n_elements, impl, seed) for impl in impls]
