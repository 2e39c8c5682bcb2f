"""The ground floor: what the symbols chapter says of its first real runs, asserted on the records (numpy only).

    from dpviz.topics.ground_floor.claims import average_is_the_batch_gradient, measured_slowdown
    print(average_is_the_batch_gradient(run, g_B))   # raises AssertionError naming what fails
    print(measured_slowdown(one, run))               # S measured: one device against k ranks, in words

Also: what probing every knob costs against one backward pass (:func:`probing_costs`), and a yes-or-no
loss whose gradient is zero (:func:`zero_one_loss_is_flat`).
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.ground_floor.records import Run, rel_err
from dpviz.engine.tolerance import GRAD_TOLERANCE, tolerance_words
from dpviz.topics.ground_floor import costmodel, timing


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


# --- time: one device against k ranks, measured ----------------------------------------------------------

SAME = 0.05  # times within 5 % of each other are "about as long"


def measured_slowdown(one: Run, split: Run, *, warmup: int = 1) -> str:
    """S measured: one device's step time over k ranks' step time, for the same examples per step.

    ``one`` is a k = 1 run of all the examples, ``split`` k ranks sharing them, both with the same threads
    per rank on one machine. With a core per rank (k <= cores) the chapter's tiny job should come out slower
    split (S < 1). Where it does not, nothing is asserted (a timing lesson the data do not show is a sentence): the
    sentence says what was measured and why: a busy machine, whose step times varied more than the two differ;
    ranks that shared cores; or a split faster by more than that spread, and what made it so.
    The formula's S, fed the split run's times with T_compute = k × a rank's compute time, is printed beside it.
    """
    k = split.k
    if one.k != 1 or k < 2:
        raise ValueError(f"one must be a k=1 run and split a run with k >= 2; got k={one.k} and k={k}.")
    examples = int(np.sum(one.shard_sizes))
    if examples != int(np.sum(split.shard_sizes)):
        raise ValueError(f"one and split must take the same examples per step; got {examples} and {int(np.sum(split.shard_sizes))}.")
    if one.meta["threads_per_rank"] != split.meta["threads_per_rank"] or one.meta["host"] != split.meta["host"]:
        raise ValueError("one and split must run on one machine with the same threads per rank; got "
                         f"{one.meta['threads_per_rank']} thread(s) on {one.meta['host']} and "
                         f"{split.meta['threads_per_rank']} on {split.meta['host']}.")
    times = timing.measured_step_times({1: one, k: split}, warmup=warmup)   # medians over steps (and ranks)
    t1, tk = times[1], times[k]
    s = t1.t_step / tk.t_step
    cores = int(split.meta["cores"])
    steps = split.steps - warmup
    words = (f"One device took {_ms(t1.t_step)} per step for all {examples} examples; {k} ranks took "
             f"{_ms(tk.t_step)} ({_ms(tk.t_compute)} computing {examples // k} examples each, {_ms(tk.t_comm)} in the "
             f"all-reduce; medians of {steps} steps). Measured S = {s:.2f}")
    if k > cores:
        verdict = (f": {'slower' if s < 1 - SAME else 'not slower'}, but the {k} ranks shared {cores} "
                   f"core{'s' if cores > 1 else ''} and took turns, so the split time includes waiting for the CPU.")
    elif s < 1:
        verdict = ", with a core per rank: splitting this job made it slower."
    else:
        spread = max(_iqr(one.t_compute[warmup:]), _iqr((split.t_compute + split.t_comm)[warmup:]))
        gap = t1.t_step - tk.t_step
        if spread > gap:
            verdict = (f": not slower here, but the step times varied by {_ms(spread)} from step to step (interquartile "
                       f"range), more than the {_ms(gap)} between the two: the machine was busy.")
        else:
            why = (f"one device's compute took more than {k}× a rank's, so other work on the machine slowed it while it "
                   f"ran" if t1.t_compute > k * (1 + SAME) * tk.t_compute else
                   f"the all-reduce ({_ms(tk.t_comm)}) cost less than the {_ms(t1.t_compute - tk.t_compute)} of compute "
                   f"the split took off one device")
            verdict = (f": faster split, with a core per rank, by {_ms(gap)}, more than the {_ms(spread)} the step times "
                       f"varied by: {why}. The lesson that a job this small is slower split does not show on this run.")
    formula = float(costmodel.speedup(k * tk.t_compute, k, tk.t_comm))
    ratio = t1.t_compute / tk.t_compute
    assumed = f", not the {k}× the formula assumes" if ratio < k * (1 - SAME) else ""
    return (words + verdict + f" The formula fed T_compute = {k} × a rank's compute time and this T_comm gives "
            f"S = {formula:.2f}; one device's compute took {ratio:.2g}× a rank's for {k}× the examples{assumed}.")


def _iqr(values) -> float:
    q1, q3 = np.percentile(np.asarray(values, dtype=float), [25, 75])
    return float(q3 - q1)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _sci(value: float) -> str:
    """One significant digit, as the notes write it: ``2e-6``, ``1e-4``; zero stays ``0``."""
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


# --- why the gradient: probing every knob, and a yes-or-no loss ------------------------------------------

PROBE_TOLERANCE = 1e-4  # relative: forward differences in float64 with h = 1e-6 land far inside it


def probing_costs(probe, *, tol: float = PROBE_TOLERANCE) -> str:
    """One backward pass against P + 1 forward passes, from ``probe`` (a :class:`dpviz.topics.ground_floor.run_probing.Probe`).

    Asserts that probing each knob gives autograd's slopes to within ``tol`` (relative); the times are
    compared, never asserted.
    """
    err = rel_err(probe.probed, probe.autograd)
    assert err <= tol, (f"probing each knob did not give autograd's slopes: relative error {err:.1e} > {tol:g} "
                        f"(h = {probe.h:g})")
    t_backward = float(np.median(probe.t_backward))
    ratio = probe.t_probe / t_backward
    passes = probe.n_params + 1
    if ratio > 1 + SAME:
        how = f"{ratio:,.0f} times as long" if ratio >= 10 else f"{ratio:.2g} times as long"
    elif ratio < 1 - SAME:
        how = f"less time ({ratio:.2g}×)"
    else:
        how = "about as long"
    return (f"On the {probe.model} ({probe.n_params:,} knobs, {probe.examples} examples), one forward and backward "
            f"pass took {_ms(t_backward)} (median of {len(probe.t_backward)}) and gave every slope; probing each knob "
            f"took {passes:,} forward passes, {_ms(probe.t_probe)}: {how}. The probed slopes match autograd's to "
            f"{_sci(err)} (relative), inside the {_sci(tol)} this check allows.")


NUDGE = 1e-3  # how far each knob is moved to see whether the 0/1 loss changes


def zero_one_loss_is_flat(x, y, theta, grad, verdict: float, *, tol: float, mse_grad=None, h: float = NUDGE) -> str:
    """A yes-or-no loss, the share of examples the line misses by more than ``tol``, gives no direction.

    ``verdict`` is that share and ``grad`` its gradient as autograd computed them at ``theta``; the claim
    asserts the gradient is exactly zero and the share is the one recomputed here, then nudges each knob
    by ±``h`` and says whether the share moved. ``mse_grad``, if given, is the squared error's gradient there.
    """
    x, y = np.asarray(x, dtype=np.float64)[:, 0], np.asarray(y, dtype=np.float64)[:, 0]
    theta, grad = np.asarray(theta, dtype=np.float64), np.asarray(grad, dtype=np.float64)

    def share(t):
        return float(np.mean(np.abs(t[0] * x + t[1] - y) > tol))

    at = share(theta)
    assert abs(at - verdict) < 0.5 / len(x), f"the 0/1 loss autograd saw, {verdict:.4f}, is not the share missed, {at:.4f}"
    assert np.all(grad == 0), f"autograd's gradient of the 0/1 loss is {grad.tolist()}, not zero"
    nudged = [share(theta + sign * h * np.eye(2)[i]) for i in range(2) for sign in (1, -1)]
    words = (f"The 0/1 loss, the share of the {len(x)} examples the line misses by more than {tol:g}, is {at:.3f} at "
             f"θ = ({theta[0]:+g}, {theta[1]:+g}); autograd's gradient of it is (0, 0)")
    moved = sorted({v for v in nudged if v != at})
    if not moved:
        words += f", and nudging either knob by ±{h:g} leaves it at {at:.3f}: it gives no direction."
    else:
        words += (f"; nudging a knob by ±{h:g} moved it only in jumps of 1/{len(x)} (to "
                  f"{', '.join(f'{v:.3f}' for v in moved)}), a step, not a slope to follow.")
    if mse_grad is not None:
        words += f" The squared error's gradient at the same θ is ({mse_grad[0]:+.4f}, {mse_grad[1]:+.4f})."
    return words
