"""One group per device: with the sync the replicas stay together, without it they part (numpy only).

    from dpviz.topics.one_group_per_device.claims import replicas_part_without_the_sync, spread_without_the_sync
    print(replicas_part_without_the_sync(run, alone))   # raises AssertionError naming the claim that fails
    print(spread_without_the_sync(alone))               # how far apart the replicas were after each step
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.ground_floor.records import Run


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


KNOB_NAMES = ("w", "c")  # the line model's knobs, in the order of its parameter vector


def spread_without_the_sync(alone: Run) -> str:
    """How far apart the replicas of a run without the all-reduce were after each step, knob by knob.

    The spread of a knob is its largest value over the replicas minus its smallest. The sentence says how
    it moved over the steps (grew, shrank, where it peaked), as the record shows; nothing is asserted.
    """
    if alone.meta["all_reduce"] or alone.meta["model"] != "line":
        raise ValueError("alone must be a line-model run with the all-reduce off; got model="
                         f"{alone.meta['model']!r}, all_reduce={alone.meta['all_reduce']}.")
    spread = np.ptp(alone.params[1:].astype(np.float64), axis=1)   # (steps, P): after each step
    first, *others = KNOB_NAMES
    lines = [f"Without the sync, the spread of {first} across the {alone.k} replicas (largest minus smallest) after "
             f"steps 1 to {alone.steps} was {_listed(spread[:, 0])}: {_trend(spread[:, 0])}."]
    lines += [f"The spread of {name} was {_listed(spread[:, i])}: {_trend(spread[:, i])}."
              for i, name in enumerate(others, start=1)]
    last = spread[-1]
    lines.append(f"After the last step they still differed by {last[0]:.2f} in w and {last[1]:.2f} in c: "
                 f"{alone.k} models, not one.")
    return " ".join(lines)


def _listed(values) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _trend(values) -> str:
    """How a series moved, in words: grew or shrank at every step, or where it peaked and what came after."""
    steps = np.diff(values)
    peak = int(np.argmax(values))
    if len(values) == 1:
        return "one step only"
    if (steps > 0).all():
        return "it grew at every step"
    if (steps < 0).all():
        return "it shrank at every step"
    if peak == len(values) - 1:
        return f"largest after step {peak + 1}, the last"
    after = "then it shrank at every step" if (steps[peak:] < 0).all() else f"and {values[-1]:.2f} after step {len(values)}"
    return f"largest after step {peak + 1}, {after}"


# The answers the chapter's prediction offers: how the k ranks' gradients g_i compare at the first step
ARROWS = ("exactly: one θ, so one arrow", "roughly: one general direction, different lengths and angles",
          "not at all: they point every which way")
ROUGHLY = 90.0  # degrees: arrows at most this far apart agree "roughly"


def do_the_arrows_agree(run: Run, step: int = 0) -> dict:
    """The answer to the chapter's prediction: how the k ranks' g_i at ``step`` agree, as one of :data:`ARROWS`, and
    why (keywords of :meth:`dpviz.engine.predict.Prediction.answer`; nothing asserted)."""
    g = run.local_grad[step].astype(np.float64)   # (k, P)
    k = len(g)
    if run.meta["model"] != "line" or k < 2:
        raise ValueError(f"run must be a line-model run on at least 2 ranks; got model={run.meta['model']!r}, k={k}.")
    if all(np.array_equal(g[i], g[0]) for i in range(k)):
        return {"measured": ARROWS[0], "said": f"{k} arrows that agree exactly, to the last bit",
                "why": "Every rank holds the same θ, and here every rank's slice gave the same slope"}
    unit = g / np.linalg.norm(g, axis=1, keepdims=True)
    apart = float(np.degrees(np.arccos(np.clip(unit @ unit.T, -1, 1))).max())
    lengths = np.linalg.norm(g, axis=1)
    measured = ARROWS[1] if apart <= ROUGHLY else ARROWS[2]
    agree = [f"{name} should {'grow' if g[0, i] < 0 else 'shrink'}" for i, name in enumerate(KNOB_NAMES)
             if (np.sign(g[:, i]) == np.sign(g[0, i])).all()]
    signs = (f"{'both' if k == 2 else f'all {k}'} agree that {' and '.join(agree)}, but not by how much" if agree
             else "they do not even agree on which way one knob should turn")
    return {"measured": measured,
            "said": (f"{k} arrows that {'agree roughly' if measured == ARROWS[1] else 'do not agree at all'}: up to "
                     f"{apart:.0f} degrees apart, lengths from {lengths.min():.2f} to {lengths.max():.2f}"),
            "why": (f"Every rank holds the same θ but takes the slope over its own {int(run.shard_sizes[0])} rows, "
                    f"a different sample of the line; {signs}")}
