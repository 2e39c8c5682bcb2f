"""The record of a two-level all-reduce: the same inputs summed by dist.all_reduce, in two levels, and by a flat ring.

Written by :func:`dpviz.topics.cheaper_sync.run_hierarchical.record_hierarchical`. k ranks in k/g groups of g consecutive
ranks; for each input size, once with integer-valued float32 inputs (every order of summation gives the
same bits) and once with normal ones (equal within rounding). Inputs of all sizes are laid end to end
along the last axis, in the order of ``size``; ``link_bytes_*`` count what each rank sent to each other.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register
from dpviz.topics.cheaper_sync.theory import same_group

KINDS_OF_INPUT = ("int", "rand")
METHODS = ("all_reduce", "two_level", "flat_ring")  # the order of ``seconds``

KIND = Kind(
    name="hierarchical",
    version=1,
    doc="k ranks in groups of g summed the same inputs with dist.all_reduce, with a two-level all-reduce over "
        "subgroups (reduce-scatter inside a group, all-reduce across groups, all-gather inside) and with the flat "
        "hand ring; every result, the bytes each rank sent to each other rank, and each way timed.",
    arrays=(
        Array("size", ("S",), "int64", "elements of each input, in the order they lie along the last axis"),
        Array("input_kind", ("S",), "str", "int (integer-valued floats) or rand (normal floats)"),
        Array("input", ("k", "E"), "float32", "each rank's inputs, end to end"),
        Array("all_reduce", ("k", "E"), "float32", "what dist.all_reduce gave each rank"),
        Array("two_level", ("k", "E"), "float32", "what the two-level all-reduce gave each rank"),
        Array("flat_ring", ("k", "E"), "float32", "what the flat hand ring over all k ranks gave each rank"),
        Array("link_bytes_inner", ("S", "k", "k"), "int64",
              "bytes rank src sent rank dst in the two-level all-reduce's steps inside a group, per input"),
        Array("link_bytes_outer", ("S", "k", "k"), "int64",
              "bytes rank src sent rank dst in the two-level all-reduce's step across groups, per input"),
        Array("link_bytes_flat", ("S", "k", "k"), "int64", "bytes rank src sent rank dst in the flat ring, per input"),
        Array("seconds", ("k", 3), "float64",
              "median seconds on each rank of dist.all_reduce, the two-level all-reduce and the flat ring, on the "
              "largest size"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("group_size", "int", "g, ranks per group: blocks of consecutive ranks"),
        Meta("element_bytes", "int", "bytes per value (float32: 4)"),
        Meta("repeats", "int", "timed tries of each way (the median kept)"),
        Meta("seed", "int", "seeds every rank's inputs"),
        Meta("timed_size", "int", "elements of the input that was timed"),
        *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date"),
    ),
)


@register
class HierarchicalRecord(RankRecord):
    """A two-level all-reduce run; every array of :data:`KIND` is an attribute."""

    KIND = KIND

    def describe(self) -> str:
        m = self.meta
        return (f"two-level all-reduce, k={m['k']} in groups of {m['group_size']}, inputs of "
                f"{', '.join(f'{n:,}' for n in sorted(set(self.size.tolist())))} float32 values, {m['backend']}, "
                f"{m['threads_per_rank']} thread(s) per rank, {m['host']}, {m['cores']} cores, {m['date'][:10]}")

    def spans(self) -> list[slice]:
        """Where each input lies along the last axis, in the order of ``size``."""
        ends = np.cumsum(self.size)
        return [slice(int(e - n), int(e)) for e, n in zip(ends, self.size)]

    def same_group(self) -> np.ndarray:
        """(k, k) True where two ranks share a group."""
        return same_group(self.k, int(self.meta["group_size"]))

    def between_groups(self, link_bytes: np.ndarray) -> np.ndarray:
        """(S,) bytes sent from one group to another, all ranks together, of a (S, k, k) count."""
        return (link_bytes * ~self.same_group()).sum(axis=(1, 2))

    def max_between(self, link_bytes: np.ndarray) -> np.ndarray:
        """(S,) the most bytes any one rank sent across groups: what the slowest link had to carry per rank."""
        return (link_bytes * ~self.same_group()).sum(axis=2).max(axis=1)
