"""Gradients grouped into buckets the way DDP does: last parameter first, a bucket closed once it is full.

Torch-free, so that :mod:`dpviz.topics.waiting.run_overlap`'s config can check its bucket limits in the caller's process;
the ranks (:mod:`dpviz.topics.waiting.rank_overlap`) all-reduce each bucket as it fills.
"""

from __future__ import annotations

MAX_BUCKETS = 64  # the padding of the bucket arrays; per_parameter needs one per parameter tensor


def make_buckets(sizes: list[int], cap_bytes: int) -> list[list[int]]:
    """Group parameter indices into buckets of about ``cap_bytes``, last parameter first (the order backward goes).

    A bucket closes once it holds at least ``cap_bytes``; ``cap_bytes`` larger than the whole
    gradient gives one buffer, 1 gives one bucket per parameter.
    """
    buckets, current, filled = [], [], 0
    for i in reversed(range(len(sizes))):
        current.append(i)
        filled += sizes[i] * 4
        if filled >= cap_bytes:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets
