"""Splitting the model: what the chapter prints and its figures' titles say, from their records (numpy only).

* :func:`figure_claims` checks the figure records, for ``./run``.
* A measured pipeline: :func:`where_stages_wait` (before, between and after its passes, stage by stage),
  :func:`idle_against_model` (the idle share beside (p−1)/(m+p−1), and what the model left out),
  :func:`idle_over_m` (the idle share as m grows) and :func:`gantt_title` (the Gantt figure's title).
* :func:`pipeline_against_one_device`: p stages timed against the same model, data and micro-batches on
  one process.
* ZeRO-1: :func:`zero_one_claims` (the same parameters, 1/k of Adam's state per rank, a reduce-scatter that
  sends what the notes' formula prices) and :func:`zero_rounding` (how many values differ, and by how little).

Times are compared, never asserted: a busy machine or stages sharing cores move them, and then the sentence
says what the data show and, where the record tells, why. The model behind every comparison has equal
passes and free hand-offs; a replay of the measured passes with free hand-offs
(:func:`dpviz.topics.splitting.theory_pipeline.replay`) splits what the model left out into the passes themselves and what
was lost between them. Asserted, with a message naming the numbers: outputs and gradients equal to the
unsplit model's (each record's ``check()``) and every byte counted.
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.ground_floor import costmodel
from dpviz.topics.splitting import theory_pipeline as pipeline_theory
from dpviz.topics.ground_floor.costmodel import bandwidth_fraction

CLOSE = 0.02  # idle shares within this of each other are "close"
SAME = 0.05   # times within 5 % of each other are "about as long"
BUSY = 1.25   # stages whose passes took together this many times the one process's work: something slowed them
SPREAD = 1.5  # passes of the same work on one stage this many times apart: something else was using the cores
MIDDLE, EDGES = "in the middle of the step", "at the step's start and end"


def _signed(share: float) -> str:
    return f"{round(share, 2) + 0.0:+.2f}"  # + 0.0: no "-0.00"


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.1f} ms" if abs(ms) >= 1 else f"{ms:.2f} ms"


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _stages(ss) -> str:
    ss = [str(s) for s in ss]
    return ("stage " if len(ss) == 1 else "stages ") + _and(ss)


def _n_cores(cores: int) -> str:
    return f"{cores} core" + ("" if cores == 1 else "s")


def _cores(run) -> str:
    cores = int(run.meta["cores"])
    if run.p > cores:
        return f"{run.p} stages shared {_n_cores(cores)}, so stages also waited for a core."
    return f"{run.p} stages on {_n_cores(cores)}: a core per stage."


def _noisy(run) -> str:
    """With a core per stage, passes of one stage doing the same work should take about as long: a sentence
    when the slowest took :data:`SPREAD` times the fastest or more, else ""."""
    if run.oversubscribed or run.m < 2:
        return ""
    spread = [(d.min(), d.max()) for bars in (run.fwd, run.bwd) for d in bars[..., 1] - bars[..., 0]]
    low, high = min(spread, key=lambda lh: lh[0] / lh[1])
    if high < SPREAD * low:
        return ""
    return (f"Passes doing the same work on one stage took from {_ms(low)} to {_ms(high)}, {high / low:.1f}× apart: "
            f"something else was using the cores while they ran, and the numbers above carry that noise.")


# --- where and how long a measured pipeline waited -------------------------------------------------------


def _idle_places(parts: np.ndarray) -> list[str]:
    """Per stage, where most of its wait was: between its passes, or before the first and after the last."""
    return [MIDDLE if between > before + after else EDGES for before, between, after in parts]


def _modeled(run) -> pipeline_theory.Timeline:
    """The model of this run: equal passes (the measured medians) and free hand-offs."""
    t_f = float(np.median(run.fwd[..., 1] - run.fwd[..., 0]))
    t_b = float(np.median(run.bwd[..., 1] - run.bwd[..., 0]))
    return pipeline_theory.modeled_timeline(run.p, run.m, run.schedule, t_f=t_f, t_b=t_b)


def where_stages_wait(run) -> list[str]:
    """Where each stage of ``run`` (a PipelineRun) waited: before its first forward, between its first forward
    and its last backward, after its last backward; then where most of each stage's wait was, beside where the
    model (equal passes, free hand-offs) puts it. Returns the lines the chapter prints.
    """
    name = pipeline_theory.SCHEDULE_NAMES[run.schedule]
    if run.p == 1:
        return [f"{name.capitalize()} (p=1, m={run.m}): one stage, nothing to wait for; it idled "
                f"{_ms(run.idle_parts().sum())} in all."]
    parts = run.idle_parts()
    lines = [f"{name.capitalize()} (p={run.p}, m={run.m}), where each stage waited:"]
    for s, row in enumerate(parts):
        lines.append(f"  stage {s}: " + ", ".join(f"{_ms(t)} {words}" for t, words in zip(row, pipeline_theory.WAIT_PARTS))
                     + ";")
    measured, modeled = _idle_places(parts), _idle_places(_modeled(run).idle_parts())
    groups = [f"{_stages([s for s, w in enumerate(measured) if w == place])} mostly {place}"
              for place in (MIDDLE, EDGES) if place in measured]
    summary = _and(groups).replace(" mostly", " waited mostly", 1)
    summary = summary[0].upper() + summary[1:]
    wrong = [s for s in range(run.p) if measured[s] != modeled[s]]
    if not wrong:
        lines.append(f"{summary}, where the model (equal passes, free hand-offs) puts their waits: the first stage "
                     f"waits for the first gradient to come back, the last for the pipe to fill and to drain.")
    else:
        lines.append(f"{summary}; the model (equal passes, free hand-offs) has "
                     + _and([f"stage {s} wait mostly {modeled[s]}" for s in wrong]) + ".")
    return lines


def idle_against_model(run) -> list[str]:
    """The measured idle share of ``run`` beside (p−1)/(m+p−1), and what made the difference: the passes
    themselves (their replay with free hand-offs) and what was lost between them (hand-offs, waits for a core).
    """
    name = pipeline_theory.SCHEDULE_NAMES[run.schedule]
    idle, bubble = run.idle_fraction(), run.bubble()
    mean = float(idle.mean())
    off = mean - bubble
    verdict = "close to the model" if abs(off) <= CLOSE else f"{abs(off):.2f} {'more' if off > 0 else 'less'} than modeled"
    lines = [f"{name.capitalize()}: measured idle share {_and([f'{x:.2f}' for x in idle])} by stage, mean {mean:.2f}, "
             f"against (p−1)/(m+p−1) = {bubble:.2f} modeled: {verdict}."]
    if run.p == 1:
        return lines
    replay = run.replay()
    replayed = float(replay.idle_fraction().mean())
    lost = run.span() - replay.span()
    handoff = float(np.median(run.handoff_delays()))
    busy = run.busy()
    lines.append(
        f"The same passes replayed with free hand-offs idle {replayed:.2f}: {_signed(replayed - bubble)} from the passes "
        f"themselves, which the model takes as equal (the stages worked {_and([_ms(b) for b in busy])}), and "
        f"{_signed(mean - replayed)} from the {_ms(lost)} lost between passes, to hand-offs (a median {_ms(handoff)} "
        f"each){' and waits for a core' if run.oversubscribed else ''}.")
    lines.append(_cores(run))
    return lines + [line for line in [_noisy(run)] if line]


def idle_over_m(runs) -> list[str]:
    """For each p among ``runs`` (PipelineRuns of one schedule), the measured idle share as m grows, beside the
    modeled one: whether it fell at every step of m, overall, or not. One line per p.
    """
    lines = []
    for p in sorted({r.p for r in runs}):
        rows = sorted((r for r in runs if r.p == p), key=lambda r: r.m)
        ms = [r.m for r in rows]
        idle = np.array([r.idle_fraction().mean() for r in rows])
        modeled = [r.bubble() for r in rows]
        cores = int(rows[0].meta["cores"])
        where = f"{p} stages on {_n_cores(cores)}" + (", sharing them" if p > cores else ", a core each")
        head = (f"p = {p} ({where}), m = {', '.join(map(str, ms))}: measured idle share "
                f"{', '.join(f'{x:.2f}' for x in idle)}, modeled {', '.join(f'{x:.2f}' for x in modeled)}")
        steps = np.diff(idle)
        if len(rows) < 2:
            lines.append(head + ".")
        elif (steps < 0).all():
            lines.append(head + ": it fell with every step of m, as modeled.")
        elif idle[-1] < idle[0]:
            rose = [f"from m = {ms[i]} to {ms[i + 1]}" for i in np.flatnonzero(steps >= 0)]
            lines.append(head + f": it fell from m = {ms[0]} to {ms[-1]}, but not at every step (it rose {_and(rose)}).")
        else:
            lines.append(head + f": it did not fall from m = {ms[0]} to {ms[-1]}, as the model says it would.")
    return lines


def _phrase(runs, stage: int) -> str:
    """Where a stage waited mostly, in each of ``runs``: one place, or one per schedule."""
    places = [_idle_places(r.idle_parts())[stage] for r in runs]
    if len(set(places)) == 1:
        return f"mostly {places[0]}"
    return "mostly " + " but ".join(f"{place} ({pipeline_theory.SCHEDULE_NAMES[r.schedule]})"
                                    for place, r in zip(places, runs))


def gantt_title(gpipe, one_f_one_b) -> str:
    """The Gantt figure's title: where the first and the last stage waited in both runs, and the idle shares."""
    runs = (gpipe, one_f_one_b)
    idle = [float(r.idle_fraction().mean()) for r in runs]
    where = f"the first stage waits {_phrase(runs, 0)}, the last {_phrase(runs, gpipe.p - 1)}"
    return (f"A pipeline of p={gpipe.p} stages, m={gpipe.m} micro-batches: {where}; idle share {idle[0]:.2f} "
            f"(all F, then all B) and {idle[1]:.2f} (1F1B) measured, (p−1)/(m+p−1) = {gpipe.bubble():.2f} modeled")


# --- a pipeline against one device ------------------------------------------------------------------------


def pipeline_against_one_device(one, pipe) -> list[str]:
    """``pipe`` (a PipelineRun of p > 1 stages) against ``one`` (p = 1: the same model, data and micro-batches
    on one process): time per batch, faster or not and by how much, beside the model's p·m/(m+p−1); then why:
    the passes themselves and what was lost between them (each against a replay with free hand-offs), the
    bubble, and the cores.
    """
    if one.p != 1 or pipe.p < 2:
        raise ValueError(f"one must be a run of p=1 stage and pipe one of p>=2 stages; got p={one.p} and p={pipe.p}.")
    keys = ("m", "batch", "width", "depth", "seed", "threads_per_rank")
    differ = [key for key in keys if one.meta[key] != pipe.meta[key]]
    if differ:
        raise ValueError(f"one and pipe must run the same model, data and micro-batches; they differ in {_and(differ)}.")
    p, m = pipe.p, pipe.m
    t_one, t_pipe = one.span(), pipe.span()
    speedup = p * m / (m + p - 1)
    t_model = t_one / speedup
    if t_pipe < t_one * (1 - SAME):
        verdict = f"{t_one / t_pipe:.2f}× faster"
    elif t_pipe > t_one * (1 + SAME):
        verdict = f"{t_pipe / t_one:.2f}× slower"
    else:
        verdict = f"about as fast (within {SAME:.0%})"
    lines = [f"One process ran the {m} micro-batches in {_ms(t_one)} per batch, {p} stages on {p} ranks in "
             f"{_ms(t_pipe)}: the pipeline was {verdict}. The model (equal stages, free hand-offs) says "
             f"p·m/(m+p−1) = {speedup:.2f}× faster, {_ms(t_model)}."]
    replay = pipe.replay().span()
    busy, work = pipe.busy(), float(one.busy().sum())
    idle, bubble = float(pipe.idle_fraction().mean()), pipe.bubble()
    handoff = float(np.median(pipe.handoff_delays()))
    if t_pipe > t_model * (1 + SAME):
        lines.append(
            f"Of the {_ms(t_pipe - t_model)} beyond the model, {_ms(replay - t_model)} came from the passes "
            f"themselves (the stages worked {_and([_ms(b) for b in busy])}, {_ms(busy.sum())} together against the "
            f"one process's {_ms(work)} of passes), and {_ms(t_pipe - replay)} was lost between passes, to hand-offs (a median "
            f"{_ms(handoff)} each){' and waits for a core' if pipe.oversubscribed else ''}; the stages idled "
            f"{idle:.0%} of the step, against the bubble's {bubble:.0%}.")
    else:
        lines.append(f"It came within {SAME:.0%} of the model: the stages idled {idle:.0%} of the step, against the "
                     f"bubble's {bubble:.0%}, and a hand-off took a median {_ms(handoff)}.")
    lines.append(_cores(pipe))
    if not pipe.oversubscribed and busy.sum() > BUSY * work:
        lines.append(f"The stages' passes took {busy.sum() / work:.2f}× as long together as the same work in one "
                     f"process: something else was using the cores while they ran.")
    elif _noisy(pipe):
        lines.append(_noisy(pipe))
    return lines


# --- the tensor-parallel layer, ZeRO-1 ---------------------------------------------------------------------


def tensor_split_title(split) -> str:
    """The tensor-parallel figure's title, after ``split.check()`` asserted both splits equal the unsplit layer
    (to rounding) and the ring's bytes the formula's count."""
    split.check()
    m = split.meta
    return (f"Tensor parallelism: a {m['d_in']}→{m['d_out']} layer over k={m['k']} ranks, equal to the unsplit layer "
            f"to {max(split.rel_errs().values()):.0e}")


def zero_memory_title(zero) -> str:
    """The ZeRO-1 figure's title, after :func:`zero_one_claims` asserted what it says."""
    zero_one_claims(zero)
    return (f"Sharding Adam's state over k={zero.k} ranks (ZeRO-1): 1/{zero.k} of the state on each rank, the same "
            f"parameters, and a reduce-scatter that sends {int(zero.rs_bytes.max()):,} B per rank, (k−1)/k · M for a "
            f"gradient of M = {zero.message_bytes:,} B")


def figure_claims(records: dict) -> str:
    """The chapter's claims, asserted on the figure records; one line for the terminal."""
    pipes = [r for name, r in records.items() if name.startswith("pipeline")]
    for run in pipes:
        run.check()
    split, zero = records["tensor_split_k2"], records["zero_k4"]
    assert (zero.rs_bytes == bandwidth_fraction(zero.k) * zero.message_bytes).all(), \
        "the reduce-scatter did not send (k−1)/k · M per rank"
    return (f"splitting: {len(pipes)} pipelined steps equal the unsplit model's outputs and gradients to rounding; "
            f"{split.check()} {zero.check()}")


def zero_one_claims(zero) -> list[str]:
    """ZeRO-1 keeps the parameters of plain data parallelism (``zero.check()``, to 1e-5); each rank holds Adam
    state for its shard only, 2·4·P/k bytes, the shards adding up to one copy; each rank's reduce-scatter sends
    (k−1)/k·M per step, the notes' formula, and with the all-gather 2(k−1)/k·M, one ring all-reduce.

    ``zero`` is a ZeroRun; returns the lines the chapter prints.
    """
    zero.check()  # the same parameters to rounding, on every rank
    k, n, M = zero.k, zero.n_params, zero.message_bytes
    state = 2 * int(zero.meta["element_bytes"]) * n  # Adam's m and v for every parameter
    held = zero.memory_zero[:, 2]
    assert (held == state // k).all(), f"Adam state per rank is {held.tolist()} bytes, not its shard's {state // k:,}"
    assert held.sum() == zero.memory_dp[0, 2] == state, \
        f"the shards of Adam state add up to {held.sum():,} bytes, not one full copy of {state:,}"
    notes_bytes = costmodel.t_comm_notes(k, M, alpha=0.0, beta=1.0)  # the notes' formula, bytes term only
    assert (zero.rs_bytes == notes_bytes).all(), \
        f"the reduce-scatter sent {np.unique(zero.rs_bytes).tolist()} bytes per rank per step, not (k−1)/k · M = {notes_bytes:g}"
    ring = costmodel.t_comm_ring(k, M, alpha=0.0, beta=1.0)
    both = zero.rs_bytes + zero.ag_bytes
    assert (both == ring).all(), \
        f"the reduce-scatter and the all-gather sent {np.unique(both).tolist()} bytes per rank per step, not one ring all-reduce's {ring:g}"
    return [
        f"k = {k}, P = {n:,} parameters, M = {M:,} bytes: ZeRO-1 parameters match plain data parallelism within 1e-5 at every step;",
        f"Adam state per rank: plain {zero.memory_dp[0, 2]:,} bytes, ZeRO-1 {zero.memory_zero[0, 2]:,} bytes (1/{k});",
        f"reduce-scatter: {int(zero.rs_bytes[0, 0]):,} bytes per rank per step = (k−1)/k · M, the notes' formula; with the "
        f"all-gather, {int(both[0, 0]):,} bytes, one ring all-reduce.",
    ]


def zero_rounding(zero) -> str:
    """How many of the final parameter values (every rank's) ZeRO-1 and plain data parallelism share bit for bit,
    and how far apart the others are, in units in the last place of float32. Asserts the match to rounding
    (``zero.check()``) first.
    """
    zero.check()
    dp, z = zero.params_dp[-1], zero.params_zero[-1]
    same = int((dp == z).sum())
    steps = int(zero.meta["steps"])
    head = f"After {steps} steps on k = {zero.k} ranks, {same:,} of the {dp.size:,} parameter values (P on every rank)"
    if same == dp.size:
        return head + " are the same under both trainings, bit for bit."
    diff = float(np.abs(z.astype(np.float64) - dp).max())
    scale = float(np.abs(dp).max())
    return (head + f" are the same under both trainings, bit for bit; the other {dp.size - same:,} differ by at most "
            f"{diff:.1e}, {diff / scale:.0e} of the largest parameter ({scale:.2f}).")


# --- the answer to the chapter's prediction (dpviz.engine.predict) ---------------------------------------------


def idle_share_answer(run) -> dict:
    """What a measured pipeline answers to "what share of its step will a stage spend idle?": ``{"measured",
    "said", "why"}`` for :meth:`dpviz.engine.predict.Prediction.answer`, the mean idle share over the stages in
    per cent, and why it is not the bubble (p−1)/(m+p−1): the passes replayed with free hand-offs, the time lost
    between passes, the cores; all from the record."""
    idle, bubble = float(run.idle_fraction().mean()), run.bubble()
    said = f"{idle:.0%} idle, the mean over the {run.p} stages"
    if run.p == 1:
        return {"measured": idle * 100, "said": said, "why": "one stage never waits for another"}
    replayed = float(run.replay().idle_fraction().mean())
    lost = run.span() - run.replay().span()
    why = (f"The bubble (p−1)/(m+p−1) = {bubble:.0%} assumes equal passes and free hand-offs; the measured passes "
           f"replayed with free hand-offs idle {replayed:.0%} (the stages worked "
           f"{_and([_ms(b) for b in run.busy()])}), and the {_ms(lost)} lost between passes, to hand-offs"
           f"{' and waits for a core' if run.oversubscribed else ''}, bring it to {idle:.0%}")
    return {"measured": idle * 100, "said": said, "why": why}
