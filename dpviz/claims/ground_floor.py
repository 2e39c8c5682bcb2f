"""The ground floor: what the symbols chapter says of its first real run, asserted on the record (numpy only).

    from dpviz.claims.ground_floor import average_is_the_batch_gradient
    print(average_is_the_batch_gradient(run, g_B))   # raises AssertionError naming what fails
"""

from __future__ import annotations

import numpy as np

from dpviz.records.run import Run, rel_err
from dpviz.records.tolerance import GRAD_TOLERANCE, tolerance_words



def average_is_the_batch_gradient(run: Run, g_batch) -> str:
    """The average of the ranks' gradients is the combined batch's gradient at every step; the replicas stay identical.

    ``g_batch`` is the gradient of the first step's whole batch computed apart from the run (by
    autograd in the notebook's own process, or by hand); it must be the run's big-batch gradient at step 0.
    """
    err = rel_err(run.local_grad.mean(axis=1), run.big_grad, axis=1)  # per step: max |g_avg − g_big| / max |g_big|
    assert (err <= GRAD_TOLERANCE).all(), \
        f"the average of the {run.k} ranks' gradients is not the combined batch's: relative errors {err} > {tolerance_words()}"
    assert np.allclose(run.big_grad[0], g_batch, rtol=GRAD_TOLERANCE, atol=0), \
        f"the big-batch gradient at step 0, {run.big_grad[0]}, is not the batch gradient g_B = {np.asarray(g_batch)}"
    same = run.replicas_identical()
    assert same.all(), f"the replicas are not identical: they differ at states {np.flatnonzero(~same).tolist()}"
    return (f"At all {run.steps} steps the average of the {run.k} ranks' gradients equals the gradient "
            f"of the combined batch (relative error ≤ {tolerance_words()}), and the replicas stayed identical.")
