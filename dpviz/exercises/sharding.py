"""Checkers for chapter "shard everything"'s exercises, against :mod:`dpviz.topics.sharding.theory` (numpy only).

    print(check_owned_shard(owned_shard))   # the chunk of a layer rank r keeps under ZeRO-3
    print(check_step_bytes(step_bytes))     # the bytes one rank sends per step at each ZeRO stage

Each case is one call with plain Python numbers or a numpy vector, compared with the library's answer to
float rounding; all calls of one check together get :data:`dpviz.engine.sandbox.TIME_LIMIT` seconds.
"""

from __future__ import annotations

import numpy as np

import dpviz.engine.verdict as v
from dpviz.topics.sharding import theory

SHARD_CASES = ((12, 0, 4), (12, 3, 4), (10, 1, 2), (10, 0, 2), (7, 2, 3), (9, 0, 1))  # (layer size, rank, k)
STEP_CASES = ((4, 6080, 0), (4, 6080, 3), (2, 1e9, 1), (8, 1e9, 2), (8, 1e9, 3), (64, 1.5e10, 3), (1, 1e6, 3))  # (k, M, stage)


def _layer(n: int) -> np.ndarray:
    return np.arange(1, n + 1, dtype=np.float64)  # values that say where they came from: 1, 2, ... n


def check_owned_shard(owned_shard) -> v.Verdict:
    """``owned_shard(layer, rank, k)``: the chunk of a flat layer, padded with zeros to a multiple of k, that rank
    ``rank`` keeps under ZeRO-3: chunk (rank + 1) mod k, the one the ring's reduce-scatter leaves complete on it."""
    name = v.require_function("check_owned_shard", owned_shard)
    cases = [v.Case((_layer(n), r, k), theory.shard_of(_layer(n), (n,), k, r).astype(np.float64),
                    f"for a layer of {n} values 1 to {n} on rank {r} of k = {k}") for n, r, k in SHARD_CASES]

    def chunk(layer, r, k, which):
        padded = theory.pad(np.asarray(layer), (len(layer),), k)
        c = len(padded) // k
        return padded[which * c:(which + 1) * c]

    mistakes = [
        (lambda layer, r, k: chunk(layer, r, k, r),
         "That is chunk r; the ring's reduce-scatter leaves chunk (r + 1) mod k complete on rank r, so that is the "
         "one it keeps."),
        (lambda layer, r, k: np.asarray(layer)[((r + 1) % k) * (len(layer) // k):((r + 1) % k + 1) * (len(layer) // k)],
         "Pad the layer with zeros to a multiple of k first, so that every rank's chunk has the same length."),
    ]
    return v.run_cases(name, owned_shard, cases, mistakes=mistakes, returns="a vector, the rank's chunk",
                       success=f"it gives the chunk dpviz's ZeRO-3 ranks keep in all {len(cases)} cases, a layer "
                               "that needs padding and k = 1 included")


def check_step_bytes(step_bytes) -> v.Verdict:
    """``step_bytes(k, M, zero_stage)``: bytes one rank sends per step in a ring at ZeRO stage 0 to 3, with M the
    bytes of the whole gradient; against :func:`dpviz.topics.sharding.theory.ring_ratio` and the ring's (k−1)/k · M per pass."""
    name = v.require_function("check_step_bytes", step_bytes)
    cases = [v.Case((k, M, s), theory.RING_PASSES[s] * (k - 1) / k * M, f"at k = {k}, M = {M:g} bytes, ZeRO stage {s}")
             for k, M, s in STEP_CASES]
    mistakes = [
        (lambda k, M, s: 2 * (k - 1) / k * M,
         "ZeRO-3 gathers each layer's parameters twice, before the forward and again before the backward: three "
         "ring passes per step, 3(k−1)/k · M, half as much again as an all-reduce."),
        (lambda k, M, s: (3 if s >= 2 else 2) * (k - 1) / k * M,
         "ZeRO-2 keeps every parameter at rest, so it gathers them once, after the step: 2(k−1)/k · M, the "
         "bytes of one all-reduce. Only ZeRO-3 sends more."),
        (lambda k, M, s: (3 if s == 3 else 2) * M,
         "Each ring pass sends (k−1)/k · M per rank, not M: k − 1 steps of one chunk of M/k each."),
        (lambda k, M, s: (1 if s >= 1 else 2) * (k - 1) / k * M,
         "ZeRO-1 and ZeRO-2 reduce-scatter the gradient and then all-gather the updated parameters: two ring passes, "
         "the bytes of one all-reduce."),
    ]
    return v.run_cases(name, step_bytes, cases, mistakes=mistakes, returns="a number of bytes",
                       success=f"it gives 2(k−1)/k · M for stages 0 to 2 and 3(k−1)/k · M for ZeRO-3 in all "
                               f"{len(cases)} cases, k = 1 included")
