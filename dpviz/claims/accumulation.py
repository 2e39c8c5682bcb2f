"""Gradient accumulation: what the chapter's figures rest on, asserted on their records (numpy only).

* :func:`figure_claims` checks the figure records, for ``./run``.
* :func:`one_update_six_ways` checks the chapter's six live runs: one update, however it is cut up and summed.
"""

from __future__ import annotations

from dpviz.records.accumulation import AccumulationRun, figure_selection, same_update
from dpviz.records.tolerance import GRAD_TOLERANCE, tolerance_words
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
    return (f"accumulation: {len(records)} runs matched their big-batch gradients within {tolerance_words()} (m = 1: bit for bit); "
            f"bytes held for backward fell {points.activation_bytes[0] // points.activation_bytes[-1]}× from "
            f"m = {points.m[0]} to m = {points.m[-1]}; all-reduces per update: m with 'every', 1 when accumulating.")


def one_update_six_ways(big: AccumulationRun, one2: AccumulationRun, one4: AccumulationRun, ranks2: AccumulationRun,
                        accumulate: AccumulationRun, every: AccumulationRun) -> list[str]:
    """One update, six ways: every run stepped with the big-batch gradient; m micro-batches summed by one process
    equal what k = m ranks all-reduced; m = 1 is the plain gradient bit for bit; accumulating first is the same
    update as all-reducing after every micro-batch, with m times fewer all-reduces and bytes.

    The runs take the same examples per update and keep their gradients (``keep_grads=True``): ``big`` is one
    process with m = 1, ``one2`` and ``one4`` one process summing micro-batches, ``ranks2`` k = ``one2.m`` ranks
    with one batch each, ``accumulate`` and ``every`` k ranks with m micro-batches each, in the two patterns.
    Returns the sentences the chapter prints.
    """
    runs = (big, one2, one4, ranks2, accumulate, every)
    batches = {run.meta["global_batch"] for run in runs}
    if len(batches) != 1:
        raise ValueError(f"the six runs must take the same examples per update; got {sorted(batches)}.")
    if big.m != 1 or one2.k != 1 or ranks2.m != 1 or ranks2.k != one2.m:
        raise ValueError(f"big must be one process with m = 1 and ranks2 k = one2.m ranks with m = 1; got big m={big.m}, "
                         f"one2 k={one2.k} m={one2.m}, ranks2 k={ranks2.k} m={ranks2.m}.")
    if (accumulate.sync, every.sync) != ("accumulate", "every") or accumulate.m != every.m or accumulate.k < 2:
        raise ValueError("accumulate and every must be k > 1 ranks with the same m in the two patterns; got "
                         f"{accumulate.sync!r} (m={accumulate.m}) and {every.sync!r} (m={every.m}).")
    if big.reduced_grad is None:
        raise ValueError("big must be recorded with keep_grads=True to compare its gradients; it holds none.")
    for run in runs:
        err = float(run.big_rel_err.max())
        assert err <= GRAD_TOLERANCE, f"{run.who()}, {run.how()}: the update is {err:.1e} from the big-batch gradient, above {tolerance_words()}"
    summed = same_update(one2, ranks2)
    assert summed <= GRAD_TOLERANCE, f"one process summing {one2.m} micro-batches is {summed:.1e} from what {ranks2.k} ranks all-reduced"
    plain = big.reduced_grad == big.big_grad[:, None, :]
    assert plain.all(), f"with m = 1 the update is not the plain one-pass gradient bit for bit ({(~plain).sum()} values differ)"
    patterns = same_update(accumulate, every)
    assert patterns <= GRAD_TOLERANCE, f"accumulating first is {patterns:.1e} from all-reducing after every micro-batch"
    for run in (accumulate, every):
        assert run.replicas_identical().all(), f"{run.how()}: the replicas are not bit-identical"
    calls = (accumulate.calls_per_update, every.calls_per_update)
    assert calls == (1, every.m), f"all-reduces per update: {calls}, not 1 when accumulating and m = {every.m} after every micro-batch"
    sent = (accumulate.bytes_per_update, every.bytes_per_update)
    assert sent == (accumulate.grad_bytes, every.m * accumulate.grad_bytes), \
        f"bytes all-reduced per update: {sent}, not one gradient ({accumulate.grad_bytes:,} bytes) and m of them"
    return [
        f"All {len(runs)} runs stepped with the big-batch gradient of {big.meta['global_batch']} examples, within {tolerance_words()}, "
        f"at all {big.steps} steps.",
        f"One process summing {one2.m} micro-batches got what {ranks2.k} ranks got from the all-reduce, within {tolerance_words()}.",
        "With m = 1 the update is the plain one-pass gradient, bit for bit.",
        f"Accumulating first: {accumulate.calls_per_update} all-reduce of {accumulate.bytes_per_update:,} bytes per "
        f"update; after every micro-batch: {every.calls_per_update} of them, {every.bytes_per_update:,} bytes.",
    ]
