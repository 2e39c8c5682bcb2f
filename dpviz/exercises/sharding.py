"""Checkers for chapter "shard everything"'s exercises, against :mod:`dpviz.topics.sharding.theory` (numpy only).

    print(check_owned_shard(owned_shard))   # the chunk of a layer rank r keeps under ZeRO-3
    print(check_step_bytes(step_bytes))     # the bytes one rank sends per step at each ZeRO stage

``check_step_bytes`` compares each call with the library's answer to float rounding. ``check_owned_shard`` asks every
rank of each k and accepts any layout that gives the k ranks k different whole chunks (dpviz's ring keeps chunk
(r + 1) mod k, torch's FSDP chunk r). All calls of one check together get :data:`dpviz.engine.sandbox.TIME_LIMIT`
seconds.
"""

from __future__ import annotations

import numpy as np

import dpviz.engine.sandbox as guard
import dpviz.engine.verdict as v
from dpviz.topics.sharding import theory

LAYOUT_CASES = ((12, 4), (10, 2), (7, 3), (13, 4), (9, 1))  # (layer size, k): every rank of each k is asked
STEP_CASES = ((4, 6080, 0), (4, 6080, 3), (2, 1e9, 1), (8, 1e9, 2), (8, 1e9, 3), (64, 1.5e10, 3), (1, 1e6, 3))  # (k, M, stage)


def _layer(n: int) -> np.ndarray:
    return np.arange(1, n + 1, dtype=np.float64)  # values that say where they came from: 1, 2, ... n


def check_owned_shard(owned_shard) -> v.Verdict:
    """``owned_shard(layer, rank, k)``: the chunk of a flat layer, padded with zeros to a multiple of k, that rank
    ``rank`` keeps under ZeRO-3.

    Any layout in which the k ranks keep k different chunks is correct: dpviz's ring keeps chunk (rank + 1) mod k,
    the one its reduce-scatter leaves complete on the rank (:func:`dpviz.topics.sharding.theory.owned_chunk`);
    torch's FSDP keeps chunk ``rank``. So every rank of each k is asked, and the answers must be whole chunks of the
    padded layer (no gap, no wrong length), one chunk per rank (no overlap). The verdict names the layout found.
    """
    name = v.require_function("check_owned_shard", owned_shard)
    if v.is_stub(owned_shard):
        return v.not_attempted(name)
    found = v.definition(name, owned_shard)
    if isinstance(found, v.Verdict):
        return found
    layouts = []
    left, printed = float(guard.TIME_LIMIT), 0
    with guard.FreshProcess(*found) as box:
        for n, k in LAYOUT_CASES:
            padded = theory.pad(_layer(n), (n,), k)
            size = len(padded) // k
            chunks = padded.reshape(k, size)
            kept = []
            for rank in range(k):
                label = f"for a layer of {n} values 1 to {n} on rank {rank} of k = {k}"
                call = f"{name}(<array of {n} values>, {rank}, {k})"
                if left <= 0:
                    return v.cut_short(name, guard.Outcome(timed_out=True), call)
                outcome = box.call(_layer(n), rank, k, seconds=left, print_room=max(guard.PRINT_LIMIT - printed, 0))
                left -= outcome.seconds
                printed += outcome.printed
                if outcome.kind == "NotImplementedError":
                    return v.not_attempted(name)
                verdict = v.cut_short(name, outcome, call)
                if verdict:
                    return verdict
                if outcome.error is not None:
                    return v.raised(name, outcome.error, call, outcome.kind)
                value = outcome.value if isinstance(outcome.value, dict) else {}
                got = value.get("array")
                if got is None or got.ndim != 1:
                    what = value.get("repr") or (f"an array of shape {v.shape_words(got.shape)}" if got is not None
                                                 else f"numbers of shape {v.shape_words(value.get('shape', ()))}")
                    return v.failed(name, f"{label}, it returned {what}",
                                    rule="It must return a vector, the rank's chunk.")
                chunk = _which_chunk(got, chunks)
                if chunk is None:
                    returned = v.vec(got) if got.size <= 6 else f"{got.size} values"
                    if v.graded():  # the chunk's length and the padding would give the answer away
                        return v.failed(name, f"{label}, it returned {returned}, which is none of the {k} chunks of "
                                        "the padded layer")
                    zeros = f", then {len(padded) - n} zeros" if len(padded) > n else ""
                    return v.failed(name, f"{label}, it returned {returned}, which is none of the {k} chunks of {size} "
                                    f"values of the padded layer (values 1 to {n}{zeros})",
                                    _layout_hint(got, padded, k, rank))
                kept.append(chunk)
            twice = [c for c in range(k) if kept.count(c) > 1]
            if twice:
                ranks = [r for r in range(k) if kept[r] == twice[0]]
                orphans = [c for c in range(k) if c not in kept]
                return v.failed(name, f"at k = {k}, ranks {_and(ranks)} {'both' if len(ranks) == 2 else 'all'} keep "
                                f"chunk {twice[0]}, and no rank keeps chunk{'s' if len(orphans) > 1 else ''} "
                                f"{_and(orphans)}",
                                "Each rank must keep a different chunk, so that the k of them together hold the whole "
                                "layer once: dpviz's ring keeps chunk (r + 1) mod k on rank r, torch's FSDP chunk r.")
            layouts.append(kept)
    return v.passed(name, f"every rank of k = {', '.join(str(k) for _, k in LAYOUT_CASES)} keeps a different chunk of "
                          f"the padded layer, {_layout_words(layouts)}")


def _which_chunk(got: np.ndarray, chunks: np.ndarray) -> int | None:
    """The index of the chunk ``got`` equals (to float rounding), or None."""
    if got.shape != chunks[0].shape:
        return None
    return next((c for c in range(len(chunks)) if v.close(got, chunks[c])), None)


def _layout_hint(got: np.ndarray, padded: np.ndarray, k: int, rank: int) -> str:
    """Why an answer is no chunk: unpadded, strided, or else what a chunk is."""
    n = int(np.count_nonzero(padded))
    size = len(padded) // k
    unpadded = [part for part in np.array_split(padded[:n], k)] + [padded[:n][c * (n // k):(c + 1) * (n // k)]
                                                                   for c in range(k)]
    if got.size != size and any(got.shape == part.shape and v.close(got, part) for part in unpadded):
        return "Pad the layer with zeros to a multiple of k first, so that every rank's chunk has the same length."
    if any(got.shape == padded[c::k].shape and v.close(got, padded[c::k]) for c in range(k)):
        return (f"That takes every {k}th value; a chunk is {size} values in a row: the padded layer cut into k equal "
                "pieces, end to end.")
    if got.size != size:
        return (f"A chunk has {size} values, the {len(padded)} of the padded layer over k = {k}; this has {got.size}, "
                "so chunks would overlap or leave gaps.")
    return (f"Pad the layer with zeros to a multiple of k ({len(padded)} values here), cut it into k pieces of "
            f"{size} in a row, and return one of them.")


def _and(items) -> str:
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _layout_words(layouts: list) -> str:
    """How the accepted answers lay the chunks out over the ranks, in words."""
    ks = [len(kept) for kept in layouts]
    if all(kept == [(r + 1) % k for r in range(k)] for kept, k in zip(layouts, ks)):
        return ("chunk (r + 1) mod k on rank r, the one dpviz's ring reduce-scatter leaves complete there (torch's "
                "FSDP keeps chunk r, which works as well)")
    if all(kept == list(range(k)) for kept, k in zip(layouts, ks)):
        return ("chunk r on rank r, as torch's FSDP lays them out (dpviz's ring keeps chunk (r + 1) mod k, the one "
                "its reduce-scatter leaves complete there, which works as well)")
    return ("one chunk per rank in an order of your own; any order works as long as the reduce-scatter leaves each "
            "rank the chunk it keeps (dpviz's ring: (r + 1) mod k; torch's FSDP: r)")


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
        (lambda k, M, s: (4 if s == 3 else 2) * (k - 1) / k * M,  # at k = 4 also 3·M: it must come before that one
         "That counts four ring passes at ZeRO-3, one pass of (k−1)/k · M too many: the parameters are gathered "
         "before the forward and again before the backward, and the gradient is reduce-scattered; nothing is "
         "gathered after the step, as each rank keeps only the chunk it updated."),
        (lambda k, M, s: (3 if s == 3 else 2) * M,
         "Each ring pass sends (k−1)/k · M per rank, not M: k − 1 steps of one chunk of M/k each."),
        (lambda k, M, s: (1 if s >= 1 else 2) * (k - 1) / k * M,
         "ZeRO-1 and ZeRO-2 reduce-scatter the gradient and then all-gather the updated parameters: two ring passes, "
         "the bytes of one all-reduce."),
    ]
    return v.run_cases(name, step_bytes, cases, mistakes=mistakes, returns="a number of bytes",
                       success=f"it gives 2(k−1)/k · M for stages 0 to 2 and 3(k−1)/k · M for ZeRO-3 in all "
                               f"{len(cases)} cases, k = 1 included")
