"""The rank side of :mod:`dpviz.topics.cheaper_sync.run_hierarchical`: a two-level all-reduce over subgroups, in torch.

:mod:`dpviz.topics.all_reduce.rank_collectives`' ring runs over the whole world (its ranks are ``dist.get_rank()`` and
``dist.get_world_size()``, with no ``group`` argument), so the ring here is a small group-aware one: the
same two phases, the same chunks (``tensor_split``) and the same neighbours ``left`` and ``right``, but over
the member ranks of one subgroup made with ``dist.new_group``, its messages sent in that subgroup. It counts
the bytes it sends to each rank, so every link's traffic is known.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.all_reduce.rank_collectives import ring_all_reduce


class Subgroup:
    """Some ranks of the world, in ring order, and the process group ``dist.new_group`` made for them."""

    def __init__(self, members, group):
        self.members, self.group = list(members), group

    def position(self, rank: int) -> int:
        return self.members.index(rank)


def group_ring_phase(tensor: torch.Tensor, sub: Subgroup, phase: str, sent: np.ndarray) -> None:
    """One phase of the ring over ``sub``'s members: ``"reduce-scatter"`` (add what arrives) or ``"all-gather"``
    (keep it). Adds the bytes sent to each rank into ``sent`` (k,).

    The member at position i sends chunk (i − s) mod g at step s of the reduce-scatter, chunk (i + 1 − s) mod g
    at step s of the all-gather, to its ``right`` neighbour, and takes the next chunk from its ``left``; after
    the reduce-scatter it holds the group's sum of chunk (i + 1) mod g, as the world ring does.
    """
    rank, g = dist.get_rank(), len(sub.members)
    if g == 1:
        return
    i = sub.position(rank)
    left, right = sub.members[(i - 1) % g], sub.members[(i + 1) % g]
    chunks = torch.tensor_split(tensor.view(-1), g)
    first = i if phase == "reduce-scatter" else (i + 1) % g
    for step in range(g - 1):
        out, into = chunks[(first - step) % g], chunks[(first - step - 1) % g]
        buf = torch.empty_like(into) if phase == "reduce-scatter" else into
        requests = []
        if out.numel():
            requests.append(dist.isend(out, dst=right, group=sub.group, tag=step))
            sent[right] += out.numel() * out.element_size()
        if into.numel():
            requests.append(dist.irecv(buf, src=left, group=sub.group, tag=step))
        for request in requests:
            request.wait()
        if phase == "reduce-scatter" and into.numel():
            into.add_(buf)


def group_ring_all_reduce(tensor: torch.Tensor, sub: Subgroup, sent: np.ndarray) -> None:
    """Sum ``tensor`` over ``sub``'s members in place: reduce-scatter, then all-gather."""
    group_ring_phase(tensor, sub, "reduce-scatter", sent)
    group_ring_phase(tensor, sub, "all-gather", sent)


def make_groups(world_size: int, group_size: int) -> tuple[list[Subgroup], list[Subgroup]]:
    """The inner groups (blocks of ``group_size`` consecutive ranks) and the outer ones (the ranks at the same
    position in every block). Every rank must create every group, in the same order, so all call this."""
    G = world_size // group_size
    inner = [list(range(j * group_size, (j + 1) * group_size)) for j in range(G)]
    outer = [[i + j * group_size for j in range(G)] for i in range(group_size)]
    return ([Subgroup(m, dist.new_group(m)) for m in inner], [Subgroup(m, dist.new_group(m)) for m in outer])


def two_level_all_reduce(tensor: torch.Tensor, inner: Subgroup, outer: Subgroup, sent_inner: np.ndarray,
                         sent_outer: np.ndarray) -> None:
    """Sum ``tensor`` over the world in place, in two levels.

    1. reduce-scatter inside this rank's group: it now holds its group's sum of chunk c = (i + 1) mod g;
    2. all-reduce chunk c with the ranks at the same position i in the other groups, who hold the same chunk
       of their own groups' sums: now chunk c is the sum over the world;
    3. all-gather inside the group: every rank gets every chunk.
    """
    g = len(inner.members)
    flat = tensor.view(-1)
    group_ring_phase(flat, inner, "reduce-scatter", sent_inner)
    chunk = torch.tensor_split(flat, g)[(inner.position(dist.get_rank()) + 1) % g]
    group_ring_all_reduce(chunk, outer, sent_outer)
    group_ring_phase(flat, inner, "all-gather", sent_inner)


def _timed(fn, x: torch.Tensor, repeats: int) -> float:
    """Median seconds of ``fn`` on a fresh copy of ``x``, the ranks lined up by a barrier before each try."""
    times = []
    for _ in range(repeats):
        work = x.clone()
        dist.barrier()
        t0 = time.perf_counter()
        fn(work)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def hierarchical_worker(rank: int, world_size: int, config) -> dict:
    """One rank: for each size and input kind, dist.all_reduce, the two-level all-reduce and the flat ring on
    the same input; the bytes it sent to each rank; then each timed on the largest size."""
    inner_groups, outer_groups = make_groups(world_size, config.group_size)
    inner = next(s for s in inner_groups if rank in s.members)
    outer = next(s for s in outer_groups if rank in s.members)
    gen = torch.Generator().manual_seed(config.seed * 1000 + rank)
    S, k = len(config.sizes) * 2, world_size
    out = {"input": [], "all_reduce": [], "two_level": [], "flat_ring": []}
    sent = {name: np.zeros((S, k), np.int64) for name in ("inner", "outer", "flat")}
    s = 0
    for n in config.sizes:
        for kind in ("int", "rand"):
            x = torch.randint(-50, 50, (n,), generator=gen).float() if kind == "int" else torch.randn(n, generator=gen)
            ref, two, flat = x.clone(), x.clone(), x.clone()
            dist.all_reduce(ref)
            two_level_all_reduce(two, inner, outer, sent["inner"][s], sent["outer"][s])
            schedule = []
            ring_all_reduce(flat, schedule=schedule)
            for move in schedule:
                sent["flat"][s, move["dst"]] += move["bytes"]
            for name, value in (("input", x), ("all_reduce", ref), ("two_level", two), ("flat_ring", flat)):
                out[name].append(value.numpy())
            launcher.report_progress(s)
            s += 1
    big = torch.randn(max(config.sizes), generator=gen)
    junk = np.zeros(k, np.int64)
    seconds = [_timed(dist.all_reduce, big, config.repeats),
               _timed(lambda t: two_level_all_reduce(t, inner, outer, junk, junk), big, config.repeats),
               _timed(ring_all_reduce, big, config.repeats)]
    return dict({name: np.concatenate(v) for name, v in out.items()}, sent_inner=sent["inner"],
                sent_outer=sent["outer"], sent_flat=sent["flat"], seconds=np.array(seconds),
                threads=torch.get_num_threads())
