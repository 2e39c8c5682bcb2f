"""Sync in two levels: a hierarchical all-reduce over subgroups, on real ranks, bytes per link counted.

    from dpviz.topics.cheaper_sync.run_hierarchical import record_hierarchical
    rec = record_hierarchical(k=4, group_size=2)

k ranks form k/g groups of g consecutive ranks (``dist.new_group``), as GPUs in one machine share fast
links while machines share a slow one. The two-level all-reduce
(:func:`dpviz.topics.cheaper_sync.rank_hierarchical.two_level_all_reduce`):

1. reduce-scatter inside each group (the first half of the hand ring, over the group's members);
2. all-reduce across groups: each rank with its counterparts, the ranks at the same position in the
   other groups, which own the same chunk;
3. all-gather inside each group (the ring's second half).

Each input is also summed by ``dist.all_reduce`` (the reference) and by the flat hand ring of
:mod:`dpviz.topics.all_reduce.rank_collectives` over all k ranks; both hand-written ones count the bytes every rank sends to
every other, so the record tells how much crossed between groups. Integer-valued inputs make every order
of summation give the same bits; normal ones agree within float rounding.

This module is the torch-free front; the ranks run :mod:`dpviz.topics.cheaper_sync.rank_hierarchical`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.checks import check_int, check_seed, check_timeout
from dpviz.topics.cheaper_sync.records_hierarchical import KINDS_OF_INPUT, HierarchicalRecord
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran

MAX_ELEMENTS = 1 << 24  # the largest input a config accepts (64 MiB of float32)


def hierarchical_worker(rank: int, world_size: int, config: HierarchicalConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.cheaper_sync.rank_hierarchical.hierarchical_worker`, imported there (with torch)."""
    from dpviz.topics.cheaper_sync.rank_hierarchical import hierarchical_worker

    return hierarchical_worker(rank, world_size, config)


@dataclass
class HierarchicalConfig:
    k: int = 4                      # ranks
    group_size: int = 2             # g, ranks per group (fast links inside); must divide k
    sizes: tuple = (1001, 65_536)   # elements per input (float32); the largest is also timed
    repeats: int = 5                # timed tries of each all-reduce on the largest input (the median is kept)
    seed: int = 0                   # seeds every rank's inputs
    stall_timeout: float = 60.0     # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        check_int("group_size", self.group_size, low=1, high=self.k)
        if self.k % self.group_size:
            divisors = [g for g in range(1, self.k + 1) if self.k % g == 0]
            raise ValueError(f"group_size must divide k={self.k} into equal groups, one of "
                             f"{', '.join(map(str, divisors))}; got {self.group_size}.")
        self.sizes = (self.sizes,) if isinstance(self.sizes, int) and not isinstance(self.sizes, bool) else tuple(self.sizes)
        if not self.sizes:
            raise ValueError(f"sizes must list at least one element count from 1 to {MAX_ELEMENTS:,}; got ().")
        for n in self.sizes:
            check_int("sizes entries", n, low=1, high=MAX_ELEMENTS)
        check_int("repeats", self.repeats, low=1, high=1000)
        check_seed("seed", self.seed)
        check_timeout("stall_timeout", self.stall_timeout)


def assemble(config: HierarchicalConfig, results: list[dict]) -> HierarchicalRecord:
    """The record from the ranks' results, in rank order."""
    arrays = {name: np.stack([r[name] for r in results]) for name in ("input", "all_reduce", "two_level", "flat_ring")}
    for name in ("inner", "outer", "flat"):  # (S, src, dst)
        arrays[f"link_bytes_{name}"] = np.stack([r[f"sent_{name}"] for r in results], axis=1)
    arrays["size"] = np.repeat(np.array(config.sizes, dtype=np.int64), len(KINDS_OF_INPUT))
    arrays["input_kind"] = np.array(list(KINDS_OF_INPUT) * len(config.sizes), dtype=str)
    arrays["seconds"] = np.stack([r["seconds"] for r in results])
    meta = dict(k=config.k, group_size=config.group_size, element_bytes=4, repeats=config.repeats, seed=config.seed,
                timed_size=max(config.sizes),
                **where_it_ran(HierarchicalRecord, backend="gloo", threads_per_rank=results[0]["threads"]))
    return HierarchicalRecord(meta, arrays)


def record_hierarchical(config: HierarchicalConfig | None = None, *, progress: bool = False,
                        **overrides) -> HierarchicalRecord:
    """Launch ``config.k`` ranks, all-reduce every input three ways, return the :class:`HierarchicalRecord`.

    ``record_hierarchical(k=4, group_size=2, sizes=(1001,))`` builds the config for you.
    """
    config = HierarchicalConfig(**{**(asdict(config) if config else {}), **overrides})
    # more ranks than cores: the record keeps the core count, and its claims and figure say the ranks shared them
    with launcher.sharing_cores_said_elsewhere():
        results = launcher.launch(hierarchical_worker, config.k, args=(config,), backend="gloo", threads=1,
                                  stall_timeout=config.stall_timeout, total_steps=2 * len(config.sizes),
                                  progress=progress)
    return assemble(config, results)
