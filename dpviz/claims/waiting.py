"""Waiting (stragglers, overlap, asynchronous SGD): what the chapter's figures rest on, asserted on their records.

* :func:`figure_claims` checks the figure records, for ``./run``.
* :func:`straggler_waits` checks a straggler sweep: the others wait d, and a step outlasts d.
* :func:`async_against_sync` checks an asynchronous run against its synchronous twin: stale but sooner,
  on its own path, the slow worker's gradients the stalest.
"""

from __future__ import annotations

import numpy as np

from dpviz.theory import waiting as waiting_theory


def figure_claims(records: dict) -> str:
    """The chapter's claims, asserted on the figure records; one line for the terminal."""
    lines = [records["waiting_straggler"].check(), records["waiting_overlap"].check(),
             records["waiting_async"].check(), records["waiting_sync"].check()]
    async_run, sync_run = records["waiting_async"], records["waiting_sync"]
    assert not np.array_equal(async_run.theta_after[sync_run.updates * async_run.k - 1], sync_run.theta_after[-1])
    return "waiting: " + " ".join(lines)


def straggler_waits(sweep) -> str:
    """In every setting the ranks that did not sleep waited d inside the all-reduce, within 5 ms + 30 % of d
    (by the time inside the all-reduce, and by the clocks alike), and with a delay a step lasted longer than d.

    ``sweep`` is a StragglerRecord whose ranks had a core each.
    """
    wait, steps, delay = sweep.measured_wait(), sweep.median_step(), sweep.delay
    off, tol = np.abs(wait - delay), sweep.wait_tolerance()
    bad = np.flatnonzero(off > tol)
    assert not bad.size, (f"with d = {delay[bad[0]] * 1e3:g} ms the others waited {wait[bad[0]] * 1e3:.1f} ms inside "
                          f"the all-reduce, not d within {tol[bad[0]] * 1e3:.1f} ms")
    delayed = delay > 0
    short = np.flatnonzero(delayed & (steps < delay))
    assert not short.size, f"with d = {delay[short[0]] * 1e3:g} ms a step lasted {steps[short[0]] * 1e3:.1f} ms, less than d"
    clock = sweep.measured_wait(clock=True)
    assert np.allclose(clock, wait, atol=0.005 + 0.3 * delay), \
        f"the clocks disagree with the time inside the all-reduce: waits {np.round(clock * 1e3, 1)} against {np.round(wait * 1e3, 1)} ms"
    settings = "both settings" if len(delay) == 2 else f"all {len(delay)} settings"
    who = "rank 0" if set(sweep.slow_rank[delayed].tolist()) == {1} and sweep.k == 2 else "the ranks that did not sleep"
    delays = ", ".join(f"{d * 1e3:g}" for d in sorted(set(delay[delayed].tolist())))
    return (f"In {settings} {who} waited d inside the all-reduce, within 5 ms + 30 % of d, "
            f"and with d = {delays} ms a step of {'either' if sweep.k == 2 else 'every'} rank lasted longer than d.")


def async_against_sync(fast, slow) -> list[str]:
    """Asynchronous SGD (``fast``) against its synchronous twin (``slow``), the same workers and gradients: the
    twin is never stale and async is; async applied them sooner and ended elsewhere; the slowest worker's
    gradients were the stalest, as measured and as modeled from the delays. Returns the lines the chapter prints.
    """
    if (fast.meta["mode"], slow.meta["mode"]) != ("async", "sync") or fast.k != slow.k \
            or fast.meta["delays"] != slow.meta["delays"] or fast.updates != slow.updates * slow.k:
        raise ValueError("fast and slow must be an async run and its sync twin (the same k, delays and gradients); got "
                         f"{fast.meta['mode']} k={fast.k} {fast.updates} updates, {slow.meta['mode']} k={slow.k} {slow.updates} updates.")
    fast.check()
    slow.check()  # the bookkeeping: θ_pulled is θ_(t−τ), every fresh gradient is its batch's
    assert (slow.staleness == 0).all(), f"a synchronous update used a stale gradient (τ up to {slow.staleness.max()})"
    assert (fast.staleness > 0).any(), "no asynchronous update used a stale gradient"
    assert fast.wall[-1] < slow.wall[-1], \
        f"the same gradients did not arrive sooner asynchronously: {fast.wall[-1]:.2f} s against {slow.wall[-1]:.2f} s"
    gap = float(np.abs(fast.theta_after[-1] - slow.theta_after[-1]).max())
    assert gap > 0 and not np.array_equal(fast.theta_after[slow.k - 1::slow.k], slow.theta_after), \
        "the asynchronous run followed the synchronous path"
    nominal = waiting_theory.async_staleness(fast.meta["delays"])          # from the delays alone
    modeled = waiting_theory.async_staleness(fast.seconds_per_gradient())  # from each worker's measured seconds per gradient
    measured = [float(taus.mean()) for taus in fast.staleness_by_worker().values()]
    slowest = int(np.argmax(fast.meta["delays"]))
    assert np.argmax(measured) == slowest and np.argmax(nominal) == slowest, \
        f"the slowest worker ({slowest + 1}) is not the stalest: mean τ measured {np.round(measured, 1)}, modeled {np.round(nominal, 1)}"
    return [
        f"Asynchronous: {fast.updates} updates in {fast.wall[-1]:.2f} s, τ from {fast.staleness.min()} to {fast.staleness.max()} "
        f"(mean {fast.staleness.mean():.2f}); synchronous: {slow.updates} updates of {slow.k} gradients in {slow.wall[-1]:.2f} s.",
        "Mean τ per worker: measured " + ", ".join(f"{m:.1f}" for m in measured)
        + "; modeled from the delays " + ", ".join(f"{m:.1f}" for m in nominal)
        + "; modeled from the measured seconds per gradient " + ", ".join(f"{m:.1f}" for m in modeled) + ".",
        f"After {fast.updates} gradients the two θ differ by up to {gap:.3f}: the asynchronous run did not follow the synchronous path.",
    ]
