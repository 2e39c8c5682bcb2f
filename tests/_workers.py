"""Rank workers used only by the tests; they live in a module so spawned ranks can import them."""

import os
import time

import torch
import torch.distributed as dist

from dpviz.engine.rank import report_progress


def sum_ranks(rank, world_size):
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return {"rank": rank, "sum": float(t.item()), "threads": torch.get_num_threads(), "world_size": world_size}


def collectives_before_work(rank, world_size):
    """How many collectives the group ran on this rank before its work began (the launcher's barrier: 1)."""
    return dist.distributed_c10d._get_default_group()._get_sequence_number_for_group()


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


def steady(rank, world_size, steps, pause):
    """Reports a step every ``pause`` seconds, with an all-reduce each step: a healthy run of steps * pause seconds."""
    t = torch.zeros(1)
    for step in range(steps):
        time.sleep(pause)
        dist.all_reduce(t)
        report_progress(step)
    return {"rank": rank, "steps": steps}


def stop_reporting(rank, world_size, bad_rank, stop_after, steps, pause):
    """No collectives: every rank reports ``steps`` steps, except ``bad_rank``, which goes silent after ``stop_after``."""
    for step in range(steps):
        if rank == bad_rank and step > stop_after:
            time.sleep(3600)
        report_progress(step)
        time.sleep(pause)
    return rank


def forever(rank, world_size, marker=None):
    """Reports a step every 10 ms until killed: stands for a long live run. Touches ``marker.<rank>`` once running."""
    if marker is not None:
        open(f"{marker}.{rank}", "w").close()
    step = 0
    while True:
        report_progress(step)
        step += 1
        time.sleep(0.01)


def where_am_i(rank, world_size, variable):
    """Where the rank runs: its parent, its name, one environment variable and its folder."""
    with open(f"/proc/{os.getpid()}/comm") as f:
        name = f.read().strip()
    return {"ppid": os.getppid(), "name": name, "variable": os.environ.get(variable), "cwd": os.getcwd()}


def all_reduce_loop(rank, world_size, pid_dir, steps, pause):
    """All-reduce every step and report it; each rank writes its pid to ``pid_dir/rank-N`` first (for a test to kill)."""
    with open(os.path.join(pid_dir, f"rank-{rank}"), "w") as f:
        f.write(str(os.getpid()))
    t = torch.ones(4)
    for step in range(steps):
        dist.all_reduce(t)
        report_progress(step)
        time.sleep(pause)


def imported(rank, world_size, names):
    """Which of the modules ``names`` this rank found imported when it started (inherited from the fork server)."""
    import sys

    return [name in sys.modules for name in names]
