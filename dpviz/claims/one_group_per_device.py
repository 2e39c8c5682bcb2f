"""One group per device: with the sync the replicas stay together, without it they part (numpy only).

    from dpviz.claims.one_group_per_device import replicas_part_without_the_sync
    print(replicas_part_without_the_sync(run, alone))   # raises AssertionError naming the claim that fails
"""

from __future__ import annotations

import numpy as np

from dpviz.records.run import Run


def replicas_part_without_the_sync(run: Run, alone: Run) -> str:
    """With the all-reduce every replica is bit-identical after every step; without it (``alone``) the replicas
    are identical only at the start, because each rank stepped θ − η g_i with its own g_i."""
    if alone.meta["all_reduce"] or not run.meta["all_reduce"]:
        raise ValueError("run must have the all-reduce on and alone must have it off; got all_reduce="
                         f"{run.meta['all_reduce']} and {alone.meta['all_reduce']}.")
    synced = run.replicas_identical()
    assert synced.all(), f"with the all-reduce the replicas differ at states {np.flatnonzero(~synced).tolist()}"
    same = alone.replicas_identical()
    assert same[0], "without the all-reduce the replicas did not start identical"
    assert not same[1:].any(), \
        f"without the all-reduce the replicas were identical again at states {(np.flatnonzero(same[1:]) + 1).tolist()}"
    assert np.array_equal(alone.reduced_grad, alone.local_grad), "without the all-reduce a rank stepped with another's g_i"
    stepped = alone.params[0] - alone.meta["lr"] * alone.local_grad[0]
    gap = float(np.abs(alone.params[1] - stepped).max())
    assert np.allclose(alone.params[1], stepped, atol=1e-6), f"a rank did not step as θ − η g_i: off by {gap:.1e}"
    return (f"With the all-reduce the {run.k} replicas stayed bit-identical for all {run.steps} steps; "
            "without it they parted at step 1 and never met again.")
