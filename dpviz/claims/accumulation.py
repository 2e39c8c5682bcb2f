"""Gradient accumulation: what the chapter's figures rest on, asserted on their records (numpy only)."""

from __future__ import annotations

from dpviz.records.accumulation import figure_selection
from dpviz.theory import accumulation as accumulation_theory


def figure_claims(records: dict) -> str:
    """The notes' claims on accumulation, asserted on the figure records; one line for the terminal."""
    for record in records.values():
        record.check()
    inputs = figure_selection(records)
    points = accumulation_theory.memory_points(inputs["memory"])
    # every micro-batch keeps the same bytes per example: memory is proportional to the micro-batch
    per_example = points.activation_bytes / points.micro_batch
    assert (per_example == per_example[0]).all(), "bytes held for backward are not proportional to the micro-batch"
    assert (points.rel_err[points.m == 1] == 0).all(), "with m = 1 the update is not the plain one-batch gradient"
    for every, accumulate in zip(inputs["every"], inputs["accumulate"]):
        assert every.calls_per_update == every.m and accumulate.calls_per_update == 1
    return (f"accumulation: {len(records)} runs matched their big-batch gradients within 1e-5 (m = 1: bit for bit); "
            f"bytes held for backward fell {points.activation_bytes[0] // points.activation_bytes[-1]}× from "
            f"m = {points.m[0]} to m = {points.m[-1]}; all-reduces per update: m with 'every', 1 when accumulating.")

