"""Broken pipeline stages for chapter 12's tests; in a module of their own so that spawned ranks can import them."""

import time

from dpviz.topics.splitting.run_pipeline import pipeline_worker


def failing_stage(rank, world_size, configs, bad_rank):
    """Stage ``bad_rank`` raises before its first pass; the others run the real pipeline and wait for it."""
    if rank == bad_rank:
        raise RuntimeError(f"deliberate failure in stage {rank}")
    return pipeline_worker(rank, world_size, configs)


def hanging_stage(rank, world_size, configs, bad_rank):
    """Stage ``bad_rank`` never starts; the others run the real pipeline until they wait for it."""
    if rank == bad_rank:
        time.sleep(3600)
    return pipeline_worker(rank, world_size, configs)
