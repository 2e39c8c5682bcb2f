"""The question bank: the edge-case cards' claims, asserted on the cost model and on a real run (numpy only).

    from dpviz.topics.question_bank.claims import cost_model_edge_cases, weighted_mean_for_unequal_batches
    print(cost_model_edge_cases(PRESETS, M=M, t_compute=t_compute, ks=ks))
    print(weighted_mean_for_unequal_batches(run))
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dpviz.topics.ground_floor.records import Run, rel_err
from dpviz.topics.ground_floor import costmodel
from dpviz.engine.tolerance import GRAD_TOLERANCE, tolerance_words

MISS = 0.05  # relative: what "the plain mean does not" means, far above rounding


def cost_model_edge_cases(links, *, M: float, t_compute: float, ks) -> str:
    """The first four edge-case cards, on every link and k = 1 to ``ks[-1]``: T_comm = 0 and S = 1 at k = 1 by both
    formulas; S = k/2 when T_comm = T_compute/k; (k−1)/k below 1 and rising; T_comm rising with k.

    ``links`` are Link presets (or a mapping of them, as :data:`dpviz.topics.ground_floor.links.PRESETS`), ``M`` the bytes
    all-reduced, ``t_compute`` one device's seconds per step, ``ks`` the device counts 1, 2, 3, ... in order.
    """
    links = list(links.values()) if isinstance(links, Mapping) else list(links)
    ks = np.asarray(ks)
    if len(ks) < 2 or ks[0] != 1 or ks[1] != 2:
        raise ValueError(f"ks must start 1, 2, ... to hold the edge k = 1; got {ks[:3].tolist()}.")
    for link in links:
        for t_comm_of in (costmodel.t_comm_notes, costmodel.t_comm_ring):
            alone = t_comm_of(1, M, link.alpha, link.beta)
            assert alone == 0.0, f"{link.name}, {t_comm_of.__name__}: T_comm = {alone:g} s at k = 1, not 0"
            rises = np.diff(t_comm_of(ks, M, link.alpha, link.beta))
            assert np.all(rises > 0), (f"{link.name}, {t_comm_of.__name__}: T_comm not rising with k, from k = "
                                       f"{ks[np.argmax(rises <= 0)]} to {ks[np.argmax(rises <= 0) + 1]}")
        one = costmodel.speedup(t_compute, 1, costmodel.t_comm_ring(1, M, link.alpha, link.beta))
        assert one == 1.0, f"{link.name}: S = {one:g} at k = 1, not 1"
    half = costmodel.speedup(t_compute, ks, t_compute / ks)
    assert np.allclose(half, ks / 2), f"S is not k/2 when T_comm = T_compute/k: S = {half[~np.isclose(half, ks / 2)][:3]}"
    share = costmodel.efficiency(t_compute, ks, t_compute / ks)
    assert np.allclose(share, 0.5), f"the efficiency is not one half when T_comm = T_compute/k: {share[~np.isclose(share, 0.5)][:3]}"
    fraction = costmodel.bandwidth_fraction(ks)
    assert fraction[0] == 0.0 and fraction[1] == 0.5, f"(k-1)/k is {fraction[0]:g} at k = 1 and {fraction[1]:g} at k = 2"
    assert np.all(fraction < 1) and np.all(np.diff(fraction) > 0), "(k-1)/k is not below 1 and rising"
    return (f"Checked on {len(links)} link presets and k = 1 to {ks[-1]}: T_comm = 0 and S = 1 at k = 1; "
            "S = k/2 when T_comm = T_compute/k; (k-1)/k < 1 and rising; T_comm rising with k.")


def weighted_mean_for_unequal_batches(run: Run) -> str:
    """With batches of different sizes, the weighted mean Σ b_i g_i / Σ b_i is the big-batch gradient and the plain
    mean (what the ranks of ``run``, an unequal run with the plain all-reduce, received) is not."""
    if run.meta["mean"] != "plain" or len(set(run.meta["shard_sizes"])) == 1:
        raise ValueError("run must have unequal shards and the plain all-reduce; got shard sizes "
                         f"{run.meta['shard_sizes']}, mean={run.meta['mean']!r}.")
    g_local, g_big = run.local_grad[0], run.big_grad[0]   # (k, P) and (P,): step 0
    plain = g_local.mean(axis=0)
    weighted = np.average(g_local, axis=0, weights=run.shard_sizes)
    err = rel_err(weighted, g_big)
    assert err <= GRAD_TOLERANCE, f"the weighted mean is not the big-batch gradient: relative error {err:.1e} > {tolerance_words()}"
    miss = rel_err(plain, g_big)
    assert miss > MISS, f"the plain mean is the big-batch gradient too: relative error {miss:.1e}, not above {MISS:g}"
    assert np.allclose(run.reduced_grad[0], plain, rtol=1e-6), \
        f"the ranks did not receive the plain mean {plain}: they received {run.reduced_grad[0].tolist()}"
    return f"The weighted mean equals the big-batch gradient (relative error ≤ {tolerance_words()}); the plain mean does not."
