"""A broken worker and a stuck worker for chapter 11's tests; in a module of their own so that spawned ranks can import them."""

import time

from dpviz.topics.waiting.run_async_sgd import async_worker


def failing_worker(rank, world_size, config, bad_rank):
    """Worker ``bad_rank`` raises before its first gradient; the server and the other workers run as usual."""
    if rank == bad_rank:
        raise RuntimeError(f"deliberate failure in worker {rank}")
    return async_worker(rank, world_size, config)


def hanging_worker(rank, world_size, config, bad_rank):
    """Worker ``bad_rank`` joins the group and then never pulls; the others run until the server waits for it."""
    if rank == bad_rank:
        import torch.distributed as dist

        dist.barrier()
        time.sleep(3600)
    return async_worker(rank, world_size, config)
