"""A mini-batch: the chapter's claims on its two one-rank runs, a random grab and a biased one (numpy only).

    from dpviz.claims.mini_batch import mean_of_a_random_grab
    print(mean_of_a_random_grab(run, biased))   # raises AssertionError naming the claim that fails
"""

from __future__ import annotations

import numpy as np

from dpviz.records.run import Run
from dpviz.theory import landscape

BIASED_OFF, RANDOM_CLOSE = 30.0, 5.0  # degrees from the whole data set's gradient: "far off", "close"


def mean_of_a_random_grab(run: Run, biased: Run, *, sizes=(1, 4, 16, 64)) -> str:
    """The red arrow is the mean of the grey ones; the sum is b times the mean; a biased grab points away.

    ``run`` and ``biased`` are one-rank line-model runs with per-example gradients, from the same θ, the
    first with a random batch, the second with a biased one; ``sizes`` are the first-b prefixes of
    ``run``'s examples on which the sum is compared with b times the mean.
    """
    grads, g = run.example_grad[0], run.local_grad[0, 0]  # (b, P) one ∇_j per example; (P,) the batch gradient
    if max(sizes) > len(grads):
        raise ValueError(f"sizes must be at most the run's {len(grads)} examples; got {list(sizes)}.")
    mean = grads.mean(axis=0)
    assert np.allclose(mean, g, rtol=1e-5, atol=1e-6), \
        f"the red arrow {g} is not the mean {mean} of the {len(grads)} grey arrows"
    assert np.array_equal(run.reduced_grad[0, 0], g), \
        f"the update used {run.reduced_grad[0, 0]}, not the batch gradient {g}"
    for b in sizes:
        total, mean_b = grads[:b].sum(axis=0), grads[:b].mean(axis=0)
        assert np.allclose(total, b * mean_b, rtol=1e-5), f"the sum {total} of {b} arrows is not b times their mean {mean_b}"
    assert np.array_equal(run.params[0], biased.params[0]), \
        f"the two grabs started from different θ: {run.params[0, 0]} and {biased.params[0, 0]}"
    full = landscape.full_grad(run.x, run.y, run.params[0, 0])
    off, close = landscape.angle_deg(biased.local_grad[0, 0], full), landscape.angle_deg(g, full)
    assert off > BIASED_OFF, f"the biased grab is only {off:.1f}° from the whole data set's gradient (not > {BIASED_OFF:g}°)"
    assert close < RANDOM_CLOSE, f"the random grab is {close:.1f}° from the whole data set's gradient (not < {RANDOM_CLOSE:g}°)"
    return (f"The red arrow is the mean of the {len(grads)} grey arrows; the sum is b times the mean; "
            "the biased grab points far from the whole data set's gradient and the random grab does not.")
