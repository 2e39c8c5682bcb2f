"""Rank workers used only by the tests; they live in a module so spawned ranks can import them."""

import time

import torch
import torch.distributed as dist

from dpviz.runs.launch import report_progress


def sum_ranks(rank, world_size):
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return {"rank": rank, "sum": float(t.item()), "threads": torch.get_num_threads(), "world_size": world_size}


def fail_on_rank(rank, world_size, bad_rank):
    if rank == bad_rank:
        raise ValueError(f"deliberate failure in rank {rank}")
    dist.barrier()


def hang_on_rank(rank, world_size, bad_rank):
    """Every rank but ``bad_rank`` finishes step 0 and waits at a barrier; ``bad_rank`` never arrives."""
    if rank == bad_rank:
        time.sleep(3600)
    report_progress(0)
    dist.barrier()
