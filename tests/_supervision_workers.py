"""Rank workers for tests/test_supervision.py; they live in a module so that every rank can import them."""

import time

import torch
import torch.distributed as dist

from dpviz.engine.rank import report_progress


def long_check_after_the_loop(rank, world_size, steps, check_seconds, report):
    """``steps`` quick steps, then rank 0 alone works ``check_seconds`` after the loop (reporting as it goes when
    ``report``) while the others wait for it in a collective, as a run's check computed again after the loop does."""
    t = torch.ones(1)
    for step in range(steps):
        dist.all_reduce(t)
        report_progress(step)
    if rank == 0:
        end = time.monotonic() + check_seconds
        while time.monotonic() < end:
            sum(i * i for i in range(20_000))  # work, on the CPU
            if report:
                report_progress()
    dist.all_reduce(t)  # the gathering after the check: every other rank waits here, quiet
    return rank


def hang_after_the_loop(rank, world_size, steps):
    """Every step done, then rank 1 sleeps where its work after the loop would be."""
    t = torch.ones(1)
    for step in range(steps):
        dist.all_reduce(t)
        report_progress(step)
    if rank == 1:
        time.sleep(3600)
    dist.all_reduce(t)


def big_result(rank, world_size, megabytes, chunk_seconds):
    """Returns ``megabytes`` MB of float32 from every rank, written in 1 MB chunks of ``chunk_seconds`` each (the
    rank's writes slowed down, as on a loaded machine), so that the write outlasts a short stall timeout."""
    from dpviz.engine import rank as rank_side

    class Slow:
        def __init__(self, file):
            self.file = file

        def write(self, data):
            time.sleep(chunk_seconds)
            return self.file.write(data)

    plain = rank_side._ReportingFile.__init__
    rank_side._ReportingFile.CHUNK = 1 << 20
    rank_side._ReportingFile.__init__ = lambda self, file: plain(self, Slow(file))
    report_progress(0)
    return torch.ones(megabytes << 18).numpy()
