"""Splitting the model: what the chapter's figures rest on, asserted on their records (numpy only)."""

from __future__ import annotations

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


