"""Waiting (stragglers, overlap, asynchronous SGD): what the chapter prints and its figures' titles say, from their records.

Timings are compared, never asserted: a busy machine or ranks sharing cores move them, and then the
sentence says what the data show and, where the record tells, why. What does not depend on timing is
asserted, with a message naming the numbers: the same gradient bits whichever way they travel, the
asynchronous server's bookkeeping, a lone worker's SGD equal to plain SGD.

* :func:`figure_claims` checks the figure records, for ``./run``.
* The straggler: :func:`straggler_waits`, :func:`straggler_phases`, :func:`straggler_titles`.
* Overlap: :func:`gradients_identical` (asserted), :func:`overlap_against_serial`, :func:`overlap_title`.
* Asynchronous SGD: :func:`one_worker_is_plain_sgd` (asserted), :func:`async_against_sync`,
  :func:`stale_arrows_title`, :func:`sync_vs_async_title`.
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.waiting.records_straggler import WAIT_TOLERANCE
from dpviz.topics.waiting import theory as waiting_theory

CONSISTENT = 0.75  # a mode is called shorter or longer than serial only if it was so in at least this share of the steps
HOOKED = ("per_parameter", "buckets", "ddp")  # the modes whose all-reduces can start during backward

_ABSOLUTE, _RELATIVE = WAIT_TOLERANCE
_TOLERANCE_WORDS = f"within {_ABSOLUTE * 1e3:g} ms + {_RELATIVE * 100:g} % of d"


def figure_claims(records: dict) -> str:
    """The chapter's claims on the figure records; one line for the terminal."""
    sweep, overlap = records["waiting_straggler"], records["waiting_overlap"]
    lines = [straggler_waits(sweep), overlap.check(),
             async_against_sync(records["waiting_async"], records["waiting_sync"])[0]]
    return "waiting: " + " ".join(lines)


# --- the straggler -----------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _d(seconds: float) -> str:
    return f"{seconds * 1e3:g} ms"


def _slept(sweep) -> np.ndarray:
    """(S,) the median seconds the slow rank really slept, over the kept steps."""
    slept = np.take_along_axis(sweep.slept, sweep.slow_rank[:, None, None], axis=2)[:, int(sweep.meta["warmup"]):, 0]
    return np.median(slept, axis=1)


def _wait_spread(sweep, s: int) -> float:
    """The interquartile range of the others' per-step waits in setting ``s`` (seconds): how much they varied."""
    slow = np.take_along_axis(sweep.t_comm, sweep.slow_rank[:, None, None], axis=2)
    waits = (sweep.t_comm - slow)[s, int(sweep.meta["warmup"]):]
    others = np.arange(sweep.k) != sweep.slow_rank[s]
    q1, q3 = np.percentile(waits[:, others], [25, 75])
    return float(q3 - q1)


def _why_off(sweep, s: int, wait: float) -> str:
    """Why the others' wait in setting ``s`` was not d, as far as the record tells."""
    d, tol = float(sweep.delay[s]), float(sweep.wait_tolerance()[s])
    reasons = []
    slept = float(_slept(sweep)[s])
    if slept - d > _ABSOLUTE:
        reasons.append(f"rank {sweep.slow_rank[s]} slept {_ms(slept)} when asked for {_d(d)}: the operating system "
                       "woke it late" + (", and the others waited for the sleep it really took"
                                         if abs(wait - slept) <= tol else ""))
    w, slow = int(sweep.meta["warmup"]), int(sweep.slow_rank[s])
    others = np.arange(sweep.k) != slow
    own = float(np.median(sweep.t_compute[s, w:][:, others]))
    theirs = float(np.median(sweep.t_compute[s, w:, slow] - sweep.slept[s, w:, slow]))
    if own - theirs > _ABSOLUTE:
        reasons.append(f"the others' own compute took {_ms(own)} against rank {slow}'s {_ms(theirs)} before its sleep: "
                       "a busy machine slowed them, and they arrived late themselves")
    spread = _wait_spread(sweep, s)
    if spread > tol:
        reasons.append(f"the waits varied by {_ms(spread)} from step to step (interquartile range): the machine was busy")
    if sweep.oversubscribed:
        reasons.append(f"{sweep.k} ranks on {sweep.meta['cores']} cores took turns on the CPU")
    return "; ".join(reasons) if reasons else "the record does not say why"


def straggler_waits(sweep) -> str:
    """Did the ranks that did not sleep wait d inside the all-reduce (by the time inside it, and by the clocks), and did a
    step with a delay last longer than d? The sentence the data support; never raises on timing.

    A wait counts as d within 5 ms + 30 % of d (:data:`dpviz.topics.waiting.records_straggler.WAIT_TOLERANCE`, a tolerance we chose).
    """
    wait, clock, steps, delay = sweep.measured_wait(), sweep.measured_wait(clock=True), sweep.median_step(), sweep.delay
    tol = sweep.wait_tolerance()
    close = np.abs(wait - delay) <= tol
    agree = np.abs(clock - wait) <= tol
    delayed = delay > 0
    short = delayed & (steps < delay)
    n = len(delay)
    settings = "both settings" if n == 2 else f"all {n} settings"
    who = "rank 0" if sweep.k == 2 and set(sweep.slow_rank.tolist()) == {1} else "the ranks that did not sleep"
    shared = (f"With k = {sweep.k} ranks on {sweep.meta['cores']} cores, taking turns on the CPU: "
              if sweep.oversubscribed else "")
    if close.all() and agree.all() and not short.any():
        delays = ", ".join(_d(d).removesuffix(" ms") for d in sorted(set(delay[delayed].tolist())))
        text = (f"In {settings} {who} waited d inside the all-reduce, {_TOLERANCE_WORDS}, "
                f"and with d = {delays} ms a step of {'either' if sweep.k == 2 else 'every'} rank lasted longer than d.")
        return shared + (text[0].lower() + text[1:] if shared else text)
    parts = [f"In {settings if close.all() else f'{int(close.sum())} of {n} settings'} {who} waited d inside the "
             f"all-reduce, {_TOLERANCE_WORDS}"]
    if not close.all():
        s = int(np.argmax(np.abs(wait - delay) - tol))  # the setting furthest out
        on = f" on rank {sweep.slow_rank[s]}" if delay[s] > 0 else ""
        parts.append(f"with d = {_d(delay[s])}{on}, {who} waited {_ms(wait[s])}: " + _why_off(sweep, s, float(wait[s])))
    if not agree.all():
        s = int(np.argmax(np.abs(clock - wait) - tol))
        parts.append(f"with d = {_d(delay[s])} the ranks' clocks give a wait of {_ms(clock[s])}, the time inside the "
                     f"all-reduce {_ms(wait[s])}: the ranks did not note leaving the all-reduce at the same moment, "
                     "as when a rank is held up on a busy machine")
    if short.any():
        s = int(np.flatnonzero(short)[0])
        parts.append(f"with d = {_d(delay[s])} the median step lasted {_ms(steps[s])}, less than the delay inside it")
    text = "; ".join(parts) + "."
    return shared + (text[0].lower() + text[1:] if shared else text)


def straggler_phases(sweep, *, delay: float, slow_rank: int | None = None) -> str:
    """What one setting's median step was made of: the others' compute and wait, the slow rank's sleep, the transfer."""
    if slow_rank is None:
        slow_rank = int(sweep.slow_rank[np.flatnonzero(np.isclose(sweep.delay, delay))[-1]])
    s = sweep.setting(delay, slow_rank)
    w = int(sweep.meta["warmup"])
    others = np.arange(sweep.k) != slow_rank
    compute = float(np.median(sweep.t_compute[s, w:][:, others]))
    transfer = float(np.median(sweep.t_comm[s, w:, slow_rank]))
    who = f"rank {int(np.flatnonzero(others)[0])}" if sweep.k == 2 else "the others"
    return (f"With d = {_d(sweep.delay[s])}: {who} computed for {_ms(compute)}, then waited {_ms(sweep.measured_wait()[s])} "
            f"inside the all-reduce; rank {slow_rank} slept {_ms(_slept(sweep)[s])} when asked for {_d(sweep.delay[s])}, "
            f"and the all-reduce itself, once every rank was in, took {_ms(transfer)} (medians).")


def straggler_titles(sweep, *, delay: float, slow_rank: int) -> dict:
    """The straggler figure's titles, {"figure", "timeline", "wait"}, each saying only what the sweep shows."""
    s = sweep.setting(delay, slow_rank)
    wait, steps, tol = sweep.measured_wait(), sweep.median_step(), sweep.wait_tolerance()
    step = float(np.median(steps[np.isclose(sweep.delay, delay)]))
    if (sweep.delay == 0).any():
        base = float(np.median(steps[sweep.delay == 0]))
        paced = abs((step - base) - delay) <= _ABSOLUTE + _RELATIVE * delay
        figure = (f"{'A straggler sets the pace: w' if paced else 'W'}ith d = {_d(delay)} a step took {_ms(step)} "
                  f"instead of {_ms(base)}"
                  + ("" if paced else f", {_ms(abs(step - base))} {'longer' if step >= base else 'shorter'}, "
                                      f"not d longer {_TOLERANCE_WORDS}"))
    else:
        figure = f"With d = {_d(delay)} a step took {_ms(step)}"
    close = np.abs(wait - sweep.delay) <= tol
    return {
        "figure": figure,
        "timeline": f"Rank {slow_rank} sleeps d = {_d(delay)} each step: the others wait {_ms(wait[s])} (median)\n"
                    "inside the all-reduce",
        "wait": ("The others wait d: the slowest rank sets the pace" if close.all() else
                 f"The others' wait against d: {int(close.sum())} of {len(close)} settings {_TOLERANCE_WORDS}"),
    }


# --- overlap -----------------------------------------------------------------------------------------


def gradients_identical(run) -> str:
    """Asserted: every mode's gradients equal the serial all-reduce's, bit for bit with k = 2 (a + b = b + a exactly,
    and DDP's halving first is exact), within 1e-6 relative with more ranks (the ring's order of addition)."""
    serial = run.grad_digest[run.index("serial")]
    steps = int(run.meta["steps"])
    if run.k <= 2:
        for r, mode in enumerate(run.mode):
            differs = np.argwhere(run.grad_digest[r] != serial)
            if len(differs):
                step, rank = differs[0]
                raise AssertionError(f"{mode} gave rank {rank} a gradient at step {step} that differs from the serial "
                                     f"all-reduce's (max relative difference {run.grad_rel_diff[r, step, rank]:.1e}); "
                                     f"with k = {run.k} they must be equal bit for bit")
        ranks = "both ranks" if run.k == 2 else "the rank"
        return f"All {len(run.mode)} ways ({', '.join(run.mode)}) gave bit-identical gradients on {ranks} at all {steps} steps."
    worst = run.grad_rel_diff.max(axis=(1, 2))
    r = int(np.argmax(worst))
    if worst[r] > 1e-6:
        raise AssertionError(f"{run.mode[r]} gave gradients {worst[r]:.1e} (relative) away from the serial all-reduce's, "
                             "more than the 1e-6 rounding allows")
    return (f"All {len(run.mode)} ways matched the serial all-reduce's gradients to {worst.max():.1e} (relative) on all "
            f"{run.k} ranks at all {steps} steps.")


def _per_step(run, mode: str, quantity: str) -> np.ndarray:
    """(kept steps,) seconds of ``quantity`` in each kept step of ``mode``, averaged over the ranks."""
    r, w = run.index(mode), int(run.meta["warmup"])
    arrays = {"step": run.t_step_end, "backward": run.t_grads_ready - run.t_forward_end,
              "exposed": run.t_synced - run.t_grads_ready}
    return arrays[quantity][r, w:].mean(axis=1)


def _versus_serial(run, mode: str, quantity: str) -> tuple[str, str]:
    """("shorter" | "longer" | "same", the words): ``mode`` against serial step by step (the modes took turns)."""
    diff = _per_step(run, mode, quantity) - _per_step(run, "serial", quantity)
    n, fewer, more = len(diff), int((diff < 0).sum()), int((diff > 0).sum())
    ours, theirs = run.phases(mode)[quantity], run.phases("serial")[quantity]
    if fewer >= CONSISTENT * n and ours < theirs:
        return "shorter", f"{_ms(ours)}, shorter than serial's {_ms(theirs)} in {fewer} of {n} steps"
    if more >= CONSISTENT * n and ours > theirs:
        return "longer", f"{_ms(ours)}, longer than serial's {_ms(theirs)} in {more} of {n} steps"
    return "same", (f"{_ms(ours)}, the same as serial's {_ms(theirs)} within noise (shorter in {fewer} of {n} steps, "
                    f"longer in {more})")


def _bounds(run):
    serial = run.phases("serial")
    return waiting_theory.overlap_bounds(serial["forward"], serial["backward"], serial["comm"])


def _serial_spread(run) -> float:
    q1, q3 = np.percentile(_per_step(run, "serial", "step"), [25, 75])
    return float(q3 - q1)


def _started_during_backward(run, mode: str) -> float:
    """The share of kept (step, rank) in which ``mode``'s first all-reduce started before backward had ended."""
    r, w = run.index(mode), int(run.meta["warmup"])
    return float(np.mean(run.comm_start[r, w:, :, 0] < run.t_grads_ready[r, w:]))


def overlap_against_serial(run) -> list[str]:
    """Each way of syncing against serial, step by step: backward, the wait after it and the step, each shorter, longer
    or the same within noise; then, if no hooked mode's step was shorter, what in the record says why. The lines the
    chapter prints."""
    serial = run.phases("serial")
    n = len(_per_step(run, "serial", "step"))
    lines = [f"serial: forward {_ms(serial['forward'])}, backward {_ms(serial['backward'])}, then {_ms(serial['exposed'])} "
             f"waiting for the all-reduce; step {_ms(serial['step'])} (medians over {n} steps and {run.k} ranks)."]
    verdicts = {}
    for mode in run.mode:
        if mode == "serial":
            continue
        verdicts[mode] = {q: _versus_serial(run, mode, q) for q in ("backward", "exposed", "step")}
        v = verdicts[mode]
        lines.append(f"{mode}: backward {v['backward'][1]}; the wait after backward {v['exposed'][1]}; "
                     f"the step {v['step'][1]}.")
    hooked = [m for m in verdicts if m in HOOKED]
    won = [m for m in hooked if verdicts[m]["step"][0] == "shorter"]
    bounds, spread = _bounds(run), _serial_spread(run)
    if won:
        lines.append(f"Overlap paid off here: the step was shorter than serial's in {', '.join(won)}.")
    elif hooked:
        lines.append(f"Here no overlapped mode ({', '.join(hooked)}) made the step shorter than serial's.")
        slower = [m for m in hooked if verdicts[m]["backward"][0] == "longer" and _started_during_backward(run, m) > 0]
        if slower and run.k >= int(run.meta["cores"]):
            lines.append(f"Backward itself got longer in {', '.join(slower)}: with k = {run.k} ranks on "
                         f"{run.meta['cores']} cores every core already runs a rank's backward pass, and gloo's "
                         "communication thread, which runs the all-reduces started during it, competes for the same cores.")
        elif slower:
            lines.append(f"Backward itself got longer in {', '.join(slower)}: the all-reduces running beside it "
                         "competed with it for the CPU.")
        if "per_parameter" in verdicts and "longer" in (verdicts["per_parameter"]["exposed"][0],
                                                         verdicts["per_parameter"]["step"][0]):
            lines.append(f"per_parameter sent {run.n_buckets[run.index('per_parameter')]} all-reduces a step, one per "
                         "parameter tensor, where serial sends one: each call pays gloo's fixed cost.")
    if bounds.saving < spread:
        lines.append(f"At most {_ms(bounds.saving)} was there to win (modeled: min(T_b, T_comm) from serial's phases), "
                     f"less than the {_ms(spread)} spread of serial's own steps (interquartile range): the "
                     f"{run.meta['message_bytes'] / 2**20:.2f} MiB gradient leaves little to hide.")
    else:
        lines.append(f"At most {_ms(bounds.saving)} ({bounds.saving_fraction:.0%} of serial's step) was there to win "
                     "(modeled: min(T_b, T_comm) from serial's phases).")
    return lines


def overlap_title(run) -> str:
    """The overlap figure's title: what the run shows about the buckets' and DDP's steps against serial's."""
    shown = [m for m in ("buckets", "ddp") if m in run.mode] or [m for m in run.mode if m != "serial"][-1:]
    words = {"shorter": "shorter", "longer": "longer", "same": "no different within noise"}
    during = all(_started_during_backward(run, m) == 1 for m in shown)
    names = {"buckets": "buckets", "ddp": "DDP"}
    by_verdict = {}
    for m in shown:
        by_verdict.setdefault(_versus_serial(run, m, "step")[0], []).append(names.get(m, m))
    steps = ", ".join(f"{words[v]} in {' and '.join(ms)}" for v, ms in by_verdict.items())
    slower = [m for m in shown if _versus_serial(run, m, "backward")[0] == "longer"]
    return (f"Overlap on this machine: the all-reduces {'started' if during else 'did not always start'} during backward; "
            f"against serial, the step was {steps}" + (", and backward got longer" if slower else "")
            + f"\n(the model allows at most {_bounds(run).saving_fraction:.0%} of serial's step to be won)")


# --- asynchronous SGD --------------------------------------------------------------------------------


def one_worker_is_plain_sgd(run) -> str:
    """Asserted: with one worker every gradient is fresh and θ after each update is plain SGD's, bit for bit."""
    if run.meta["mode"] != "async" or run.k != 1:
        raise ValueError(f"run must be an asynchronous run with k = 1 worker; got {run.meta['mode']} with k = {run.k}.")
    run.check()  # the bookkeeping, and k = 1's τ = 0 and equality with plain SGD
    stale = np.flatnonzero(run.staleness != 0)
    if len(stale):
        raise AssertionError(f"a lone worker's gradient was stale: τ = {run.staleness[stale[0]]} at update {stale[0]}")
    differs = np.flatnonzero((run.theta_after != run.sequential_theta[1:]).any(axis=1))
    if len(differs):
        raise AssertionError(f"θ after update {differs[0]} is {run.theta_after[differs[0]]}, plain SGD's is "
                             f"{run.sequential_theta[1 + differs[0]]}")
    w, c = run.theta_after[-1]
    return (f"k = 1: τ = 0 at all {run.updates} updates, and θ after each equals plain SGD's bit for bit; "
            f"θ_{run.updates} = (w {w:+.6f}, c {c:+.6f}).")


def _check_twins(fast, slow) -> None:
    if (fast.meta["mode"], slow.meta["mode"]) != ("async", "sync") or fast.k != slow.k \
            or fast.meta["delays"] != slow.meta["delays"] or fast.updates != slow.updates * slow.k:
        raise ValueError("fast and slow must be an async run and its sync twin (the same k, delays and number of "
                         f"gradients); got {fast.meta['mode']} k={fast.k} {fast.updates} updates, {slow.meta['mode']} "
                         f"k={slow.k} {slow.updates} updates.")


def _idle(run) -> np.ndarray:
    """(k,) the share of each worker's time spent waiting for the server's reply."""
    return run.worker_idle / np.maximum(run.worker_idle + run.worker_busy, 1e-12)


def _fast_workers(run) -> np.ndarray:
    delays = np.asarray(run.meta["delays"], dtype=float)
    fast = delays < delays.max()
    return fast if fast.any() else np.ones_like(fast)


def _shared(run) -> str:
    return f"{run.processes} processes on {run.meta['cores']} cores took turns on the CPU" if run.oversubscribed else ""


def async_against_sync(fast, slow) -> list[str]:
    """Asynchronous SGD (``fast``) against its synchronous twin (``slow``): the same workers, delays and number of
    gradients. Asserted: the server's bookkeeping, the twin never stale, the two paths apart. Compared, as the data
    show: which run was sooner, how idle the workers were, their seconds per gradient, who was stalest against the
    model, when each reached the synchronous run's final loss. Returns the lines the chapter prints.
    """
    _check_twins(fast, slow)
    fast.check()
    slow.check()  # the bookkeeping: θ_pulled is θ_(t−τ), every fresh gradient is its batch's, sync never stale
    gap = float(np.abs(fast.theta_after[-1] - slow.theta_after[-1]).max())
    if gap == 0 or np.array_equal(fast.theta_after[slow.k - 1::slow.k], slow.theta_after):
        raise AssertionError(f"the asynchronous run followed the synchronous path (θ differ by {gap:.3g} at the end), "
                             "though it applies one gradient at a time and sync their mean")
    gradients, a, b = fast.updates, float(fast.wall[-1]), float(slow.wall[-1])
    if a < b:
        sooner = f": the same number of gradients arrived {b / a:.1f}× sooner asynchronously."
    else:
        why = _shared(fast) or "the round trips through the server cost more than the waits they saved"
        sooner = f": asynchronously the same number of gradients did not arrive sooner ({why})."
    taus = fast.staleness
    lines = [f"Asynchronous: {fast.updates} updates in {a:.2f} s, τ from {taus.min()} to {taus.max()} (mean {taus.mean():.2f}); "
             f"synchronous: {slow.updates} updates of {slow.k} gradients in {b:.2f} s" + sooner]

    quick = _fast_workers(fast)
    who = ", ".join(str(w + 1) for w in np.flatnonzero(quick))
    lines.append(f"The fast workers ({who}) sat idle {_idle(slow)[quick].mean():.0%} of their time synchronously, "
                 f"{_idle(fast)[quick].mean():.0%} asynchronously (waiting for the server's reply).")

    per_gradient = fast.seconds_per_gradient()
    lines.append("Seconds per gradient, measured (the sleep and the round trip to the server): "
                 + ", ".join(f"{t * 1e3:.1f}" for t in per_gradient) + " ms, against sleeps of "
                 + ", ".join(_d(t).removesuffix(" ms") for t in fast.meta["delays"]) + " ms.")

    nominal = waiting_theory.async_staleness(fast.meta["delays"])    # from the delays alone
    modeled = waiting_theory.async_staleness(per_gradient)            # from each worker's measured seconds per gradient
    measured = np.array([float(t.mean()) if len(t) else np.nan for t in fast.staleness_by_worker().values()])
    slowest = int(np.argmax(fast.meta["delays"]))
    stalest = int(np.nanargmax(measured)) if np.isfinite(measured).any() else slowest
    verdict = (f"worker {slowest + 1}, the slowest, was the stalest" if stalest == slowest else
               f"worker {stalest + 1} was the stalest, not worker {slowest + 1}, the slowest"
               + (f" ({_shared(fast)})" if fast.oversubscribed else ""))
    lines.append("Mean τ per worker: measured " + ", ".join(f"{m:.1f}" for m in measured)
                 + "; modeled from the sleeps alone " + ", ".join(f"{m:.1f}" for m in nominal)
                 + "; modeled from the measured seconds per gradient " + ", ".join(f"{m:.1f}" for m in modeled)
                 + f": {verdict}.")

    target = float(slow.loss[-1])
    reached = np.flatnonzero(fast.loss <= target)
    if len(reached):
        lines.append(f"The synchronous run's final loss, {target:.4f}, was reached asynchronously after "
                     f"{fast.wall[reached[0]]:.2f} s ({reached[0]} updates), synchronously after {b:.2f} s.")
    else:
        lines.append(f"The asynchronous run never reached the synchronous run's final loss, {target:.4f}, "
                     f"in its {fast.updates} updates (it ended at {fast.loss[-1]:.4f}).")
    lines.append(f"After {gradients} gradients the two θ differ by up to {gap:.3f}: the asynchronous run did not follow "
                 "the synchronous path.")
    return lines


def stale_arrows_title(run) -> str:
    """The stale-arrows figure's title: how many gradients were stale, and how far off the fresh direction."""
    stale = run.staleness > 0
    if not stale.any():
        return f"No stale arrows here: all {run.updates} gradients were applied at the θ they were computed at"
    return (f"Stale arrows: {int(stale.sum())} of {run.updates} gradients were applied to a θ that had moved on "
            f"(median {np.median(run.angles()[stale]):.0f}° off the fresh direction)")


def sync_vs_async_title(fast, slow) -> str:
    """The sync-against-async figure's title: which was sooner, how idle sync's fast workers were, how stale async was."""
    _check_twins(fast, slow)
    a, b = float(fast.wall[-1]), float(slow.wall[-1])
    idle = _idle(slow)[_fast_workers(slow)].mean()
    if a < b:
        head = (f"Async did not wait for the slow worker ({a:.2f} s for {fast.updates} gradients against {b:.2f} s; "
                f"sync's fast workers sat idle {idle:.0%} of the time)")
    else:
        head = f"Async was not sooner here ({a:.2f} s for {fast.updates} gradients against sync's {b:.2f} s)"
    apart = not np.array_equal(fast.theta_after[-1], slow.theta_after[-1])
    path = "its path is not sync's" if apart else "its path ended where sync's did"
    if (fast.staleness > 0).any():
        return f"{head}, but its gradients were stale (mean τ = {fast.staleness.mean():.1f}) and {path}"
    return f"{head}; none of its gradients was stale, and {path}"


# --- the answer to the chapter's prediction (dpviz.engine.predict) ---------------------------------------------


def straggler_step_answer(sweep, *, delay: float) -> dict:
    """What the straggler run answers to "how long will each step of the others take, with one rank ``delay`` late?":
    ``{"measured", "said", "why"}`` for :meth:`dpviz.engine.predict.Prediction.answer`, the step in ms (the median
    over the setting's steps and ranks) and why, from the same record: the step without delay, the wait, the growth."""
    at = np.isclose(sweep.delay, delay)
    if not at.any():
        raise ValueError(f"delay must be one of the sweep's delays {[_d(d) for d in sweep.delay]}; got {delay!r}.")
    steps, wait = sweep.median_step(), sweep.measured_wait()
    step = float(np.median(steps[at]))
    s = int(np.flatnonzero(at)[-1])
    who = "rank 0" if sweep.k == 2 and int(sweep.slow_rank[s]) == 1 else "the ranks that did not sleep"
    said = f"{_ms(step)} per step"
    if not (sweep.delay == 0).any():
        return {"measured": step * 1e3, "said": said,
                "why": f"{who} waited {_ms(wait[s])} inside the all-reduce for the slow rank, the rest being compute "
                       "and the all-reduce itself"}
    base = float(np.median(steps[sweep.delay == 0]))
    grew = step - base
    paced = abs(grew - delay) <= _ABSOLUTE + _RELATIVE * delay
    why = (f"Without a delay a step took {_ms(base)} (compute and all-reduce); with d = {_d(delay)} {who} waited "
           f"{_ms(wait[s])} inside the all-reduce, and the step grew by {_ms(grew)}")
    why += (": the slow rank's whole delay is added to every rank's step" if paced else
            f", not by d {_TOLERANCE_WORDS}: the slow rank slept {_ms(_slept(sweep)[s])} when asked for {_d(delay)}")
    return {"measured": step * 1e3, "said": said, "why": why}
