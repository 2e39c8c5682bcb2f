"""A mini-batch: the chapter's claims on its two one-rank runs, a random grab and a biased one (numpy only).

    from dpviz.topics.mini_batch.claims import biased_step_on_each_half, mean_of_a_random_grab
    print(mean_of_a_random_grab(run, biased))   # raises AssertionError naming the claim that fails
    print(biased_step_on_each_half(run, biased))   # what a step along each arrow does to each half of the data
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.data import line_kind
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.one_step import landscape

BIASED_OFF, RANDOM_CLOSE = 30.0, 5.0  # degrees from the whole data set's gradient: "far off", "close"
SAME = 0.05  # two drops in loss within 5 % of each other are "about as much"
HALVES = {0: "x < 0", 1: "x ≥ 0"}  # the line data's two kinds of example


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
    lengths = []
    for b in sizes:
        total, mean_b = grads[:b].sum(axis=0), grads[:b].mean(axis=0)
        assert np.allclose(total, b * mean_b, rtol=1e-5), f"the sum {total} of {b} arrows is not b times their mean {mean_b}"
        lengths.append((np.linalg.norm(mean_b), np.linalg.norm(total)))
    means, sums = np.array(lengths).T
    assert np.array_equal(run.params[0], biased.params[0]), \
        f"the two grabs started from different θ: {run.params[0, 0]} and {biased.params[0, 0]}"
    full = landscape.full_grad(run.x, run.y, run.params[0, 0])
    off, close = landscape.angle_deg(biased.local_grad[0, 0], full), landscape.angle_deg(g, full)
    assert off > BIASED_OFF, f"the biased grab is only {off:.1f}° from the whole data set's gradient (not > {BIASED_OFF:g}°)"
    assert close < RANDOM_CLOSE, f"the random grab is {close:.1f}° from the whole data set's gradient (not < {RANDOM_CLOSE:g}°)"
    return (f"The red arrow is the mean of the {len(grads)} grey arrows; the sum is b times the mean (from b = "
            f"{sizes[0]} to {sizes[-1]} the sum's length went from {sums[0]:.2f} to {sums[-1]:.2f}, the mean's stayed "
            f"between {means.min():.2f} and {means.max():.2f}); the biased grab is {off:.1f}° from the whole data set's "
            f"gradient (more than {BIASED_OFF:g}°), the random grab {close:.1f}° (less than {RANDOM_CLOSE:g}°).")


def biased_step_on_each_half(run: Run, biased: Run) -> str:
    """What one step of the runs' η along each grab's arrow does to the loss on each kind of example, and on all.

    ``run`` and ``biased`` are the chapter's two one-rank runs (as for :func:`mean_of_a_random_grab`); the
    biased one must have drawn one kind of example only. Nothing here is asserted: the sentence says whether
    the biased step hurt the half it never saw, or helped it less than the random step did.
    """
    rows = biased.batch_index[0]
    kinds = line_kind(run.x)
    seen = np.unique(kinds[rows])
    if len(seen) != 1 or not np.array_equal(run.params[0], biased.params[0]):
        raise ValueError(f"biased must draw one kind of example only, from run's θ; got kinds {seen.tolist()}.")
    seen, unseen = int(seen[0]), 1 - int(seen[0])
    eta = float(run.meta["lr"])
    x, y = run.x[:, 0].astype(np.float64), run.y[:, 0].astype(np.float64)
    theta = run.params[0, 0].astype(np.float64)
    full = landscape.full_grad(run.x, run.y, run.params[0, 0])
    arrows = {"biased": biased.local_grad[0, 0].astype(np.float64), "random": run.local_grad[0, 0].astype(np.float64)}

    def loss(t, kind=None):
        mask = slice(None) if kind is None else kinds == kind
        return float(np.mean((t[0] * x[mask] + t[1] - y[mask]) ** 2))

    before = {kind: loss(theta, kind) for kind in (seen, unseen, None)}
    after = {name: {kind: loss(theta - eta * g, kind) for kind in (seen, unseen, None)} for name, g in arrows.items()}
    drop = {name: {kind: before[kind] - a[kind] for kind in a} for name, a in after.items()}
    g_b = arrows["biased"]
    sign = "the opposite sign" if np.sign(g_b[1]) != np.sign(full[1]) else "the same sign"
    words = (f"The biased arrow is {landscape.angle_deg(g_b, full):.1f}° from the whole data set's gradient, and its "
             f"slope along c has {sign} ({g_b[1]:+.4f} against {full[1]:+.4f}). A step of η = {eta:g} along it takes "
             f"the loss on the {HALVES[seen]} half, the kind it was drawn from, from {before[seen]:.2f} to "
             f"{after['biased'][seen]:.2f}, and on the {HALVES[unseen]} half from {before[unseen]:.2f} to "
             f"{after['biased'][unseen]:.2f}; the same step along the random arrow takes them to "
             f"{after['random'][seen]:.2f} and {after['random'][unseen]:.2f}. ")
    hurt, helped = drop["biased"][unseen], drop["random"][unseen]
    if hurt < 0 and drop["biased"][seen] <= 0:
        words += "The biased step makes the loss worse on both halves."
    elif hurt < 0:
        words += "The biased step helps the half it saw at the expense of the other."
    elif hurt < helped * (1 - SAME):
        words += (f"Both halves improve, but on the half it never saw the biased step lowers the loss by {hurt:.2f}, "
                  f"the random one by {helped:.2f} (on its own half, by {drop['biased'][seen]:.2f} against "
                  f"{drop['random'][seen]:.2f}).")
    else:
        than = "more than" if hurt > helped * (1 + SAME) else "about as much as"
        words += (f"On the half it never saw the biased step lowers the loss by {hurt:.2f}, {than} the random "
                  f"one's {helped:.2f}.")
    return words + (f" On all {len(x)} points the loss goes from {before[None]:.2f} to {after['biased'][None]:.2f} "
                    f"along the biased arrow and to {after['random'][None]:.2f} along the random one.")


def biased_grab_angle(run: Run, biased: Run) -> dict:
    """The answer to the chapter's prediction: how many degrees the biased grab's mean gradient is from the whole data
    set's gradient, and why, from the two runs (keywords of :meth:`dpviz.engine.predict.Prediction.answer`; nothing
    is asserted here, :func:`mean_of_a_random_grab` asserts the angles)."""
    kinds = np.unique(line_kind(run.x)[biased.batch_index[0]])
    full = landscape.full_grad(run.x, run.y, run.params[0, 0])
    g_b, g = biased.local_grad[0, 0], run.local_grad[0, 0]
    off = landscape.angle_deg(g_b, full)
    drawn = (f"all {len(biased.batch_index[0])} of its examples are of the {HALVES[int(kinds[0])]} kind"
             if len(kinds) == 1 else f"its {len(biased.batch_index[0])} examples are of both kinds")
    knob = int(np.argmax(np.sign(g_b) != np.sign(full))) if (np.sign(g_b) != np.sign(full)).any() else None
    if knob is None:
        disagree = f"its slopes have the whole data set's signs, in other proportions ({g_b[0]:+.2f}, {g_b[1]:+.2f} " \
                   f"against {full[0]:+.2f}, {full[1]:+.2f})"
    else:
        name = landscape.KNOB_NAMES[knob]
        disagree = (f"they want {name} {'raised' if g_b[knob] < 0 else 'lowered'} (a slope along {name} of "
                    f"{g_b[knob]:+.2f}) where all {len(run.x)} points want it "
                    f"{'raised' if full[knob] < 0 else 'lowered'} ({full[knob]:+.2f})")
    return {"measured": off, "said": f"{off:.1f} degrees",
            "why": (f"The biased grab is not a fair sample: {drawn}, and {disagree}. A random grab of the same "
                    f"{len(run.batch_index[0])} is {landscape.angle_deg(g, full):.1f} degrees off")}
