"""Splitting the model: what the chapter's figures rest on, asserted on their records (numpy only).

* :func:`figure_claims` checks the figure records, for ``./run``.
* :func:`zero_one_claims` checks a ZeRO-1 run against plain data parallelism: the same parameters, 1/k of
  Adam's state per rank, and a reduce-scatter that sends what the notes' formula prices.
"""

from __future__ import annotations

import numpy as np

from dpviz.theory import costmodel
from dpviz.theory.costmodel import bandwidth_fraction


def figure_claims(records: dict) -> str:
    """The chapter's claims, asserted on the figure records; one line for the terminal."""
    pipes = [r for name, r in records.items() if name.startswith("pipeline")]
    for run in pipes:
        run.check()
    split, zero = records["tensor_split_k2"], records["zero_k4"]
    assert (zero.rs_bytes == bandwidth_fraction(zero.k) * zero.message_bytes).all(), \
        "the reduce-scatter did not send (k−1)/k · M per rank"
    return (f"splitting: {len(pipes)} pipelined steps equal the unsplit model's outputs and gradients to rounding; "
            f"{split.check()} {zero.check()}")


def zero_one_claims(zero) -> list[str]:
    """ZeRO-1 keeps the parameters of plain data parallelism (``zero.check()``, to 1e-5); each rank holds Adam
    state for its shard only, 2·4·P/k bytes, the shards adding up to one copy; each rank's reduce-scatter sends
    (k−1)/k·M per step, the notes' formula, and with the all-gather 2(k−1)/k·M, one ring all-reduce.

    ``zero`` is a ZeroRun; returns the lines the chapter prints.
    """
    zero.check()  # the same parameters to rounding, on every rank
    k, n, M = zero.k, zero.n_params, zero.message_bytes
    state = 2 * int(zero.meta["element_bytes"]) * n  # Adam's m and v for every parameter
    held = zero.memory_zero[:, 2]
    assert (held == state // k).all(), f"Adam state per rank is {held.tolist()} bytes, not its shard's {state // k:,}"
    assert held.sum() == zero.memory_dp[0, 2] == state, \
        f"the shards of Adam state add up to {held.sum():,} bytes, not one full copy of {state:,}"
    notes_bytes = costmodel.t_comm_notes(k, M, alpha=0.0, beta=1.0)  # the notes' formula, bytes term only
    assert (zero.rs_bytes == notes_bytes).all(), \
        f"the reduce-scatter sent {np.unique(zero.rs_bytes).tolist()} bytes per rank per step, not (k−1)/k · M = {notes_bytes:g}"
    ring = costmodel.t_comm_ring(k, M, alpha=0.0, beta=1.0)
    both = zero.rs_bytes + zero.ag_bytes
    assert (both == ring).all(), \
        f"the reduce-scatter and the all-gather sent {np.unique(both).tolist()} bytes per rank per step, not one ring all-reduce's {ring:g}"
    return [
        f"k = {k}, P = {n:,} parameters, M = {M:,} bytes: ZeRO-1 parameters match plain data parallelism within 1e-5 at every step;",
        f"Adam state per rank: plain {zero.memory_dp[0, 2]:,} bytes, ZeRO-1 {zero.memory_zero[0, 2]:,} bytes (1/{k});",
        f"reduce-scatter: {int(zero.rs_bytes[0, 0]):,} bytes per rank per step = (k−1)/k · M, the notes' formula; with the "
        f"all-gather, {int(both[0, 0]):,} bytes, one ring all-reduce.",
    ]
