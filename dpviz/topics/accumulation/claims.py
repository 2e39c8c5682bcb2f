"""Gradient accumulation: what the chapter's figures rest on, asserted on their records (numpy only).

* :func:`figure_claims` checks the figure records, for ``./run``.
* :func:`one_update_six_ways` checks the chapter's six live runs: one update, however it is cut up and summed.
* :func:`accumulating_against_ranks`, :func:`one_pass_per_example` and :func:`same_update_not_same_time` say
  what the timed runs measured: one process accumulating m micro-batches against k = m ranks, and one pass
  over the whole batch against m micro-batches, per example. The timeline figure's titles come from
  :func:`timeline_title` and :func:`timelines_title`.

Times are never asserted: a timing lesson the data do not show is a sentence, on a busy machine as on a quiet one.
The lesson is that at m = k = 2, with a core per rank (k ≤ the record's ``cores``), one process accumulating takes
at least :data:`SLOWER` times as long as two ranks; the workload of the timeline runs was chosen to show it. Where
the ranks shared cores, computed more slowly than one process alone (other work on the cores), fell short by less
than their times spread over, or fell short for good (the all-reduce cost what the second rank saved), the
sentence says so and why. The updates themselves (equal to the big batch's, replicas identical) are asserted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz import course
from dpviz.topics.accumulation.records import AccumulationRun, figure_selection, same_update
from dpviz.engine.tolerance import GRAD_TOLERANCE, tolerance_words
from dpviz.topics.accumulation import theory as accumulation_theory

SLOWER = 1.5  # at m = k = 2 with a core per rank: one process accumulating takes at least this × two ranks' time
BUSY = 1.2  # a rank's micro-batch this many times one process's own: something else was using the cores
SAME = 0.05  # times within 5 % of each other are "about as long"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _cores(n: int) -> str:
    return f"{n} core" + ("s" if n != 1 else "")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs"


@dataclass(frozen=True)
class AgainstRanks:
    """One update of the same examples timed twice: one process accumulating m micro-batches, k = m ranks."""

    k: int  # ranks, = m micro-batches of the one process
    cores: int  # cores the ranks' run could use
    t_one: float  # seconds per update, one process accumulating: the median of its whole updates
    t_ranks: float  # seconds per update, k ranks: the median of their whole updates (over steps and ranks)
    micro_alone: float  # seconds of one micro-batch's compute in the one process (median)
    micro_ranks: float  # seconds of the same-sized micro-batch's compute in a rank (median over steps and ranks)
    comm: float  # seconds inside all_reduce per update, in the ranks (median)
    spread: float  # seconds: the larger interquartile range of the two runs' update times (after the first)

    @property
    def ratio(self) -> float:
        """How many times as long one process took as the k ranks: median whole update against median whole update
        (not the bars, whose segments are each a median and need not add up to a median update)."""
        return self.t_one / self.t_ranks

    @property
    def shared(self) -> bool:
        """More ranks than cores: the ranks took turns."""
        return self.k > self.cores

    @property
    def slowed(self) -> float:
        """A rank's micro-batch against the one process's: above BUSY, the ranks did not have a free core each."""
        return self.micro_ranks / self.micro_alone

    @property
    def busy(self) -> bool:
        return self.slowed >= BUSY

    @property
    def modeled_ranks(self) -> float:
        """k ranks with a free core each, modeled: one micro-batch as the one process timed it, plus the ranks'
        all-reduce and the rest of their update as measured."""
        return self.t_ranks - self.micro_ranks + self.micro_alone

    def as_long(self) -> str:
        """The ratio in words: "1.7× as long as", "about as long as" or "0.8× as long as"."""
        if abs(self.ratio - 1) <= SAME:
            return "about as long as"
        return f"{self.ratio:.2g}× as long as"


def against_ranks(one: AccumulationRun, ranks: AccumulationRun) -> AgainstRanks:
    """The numbers that compare one process accumulating m micro-batches with k = m ranks, one micro-batch each."""
    if one.k != 1 or ranks.k < 2 or ranks.m != 1 or one.m != ranks.k:
        raise ValueError(f"one must be one process with m micro-batches and ranks k = m ranks with one each; got one "
                         f"k={one.k} m={one.m}, ranks k={ranks.k} m={ranks.m}.")
    if one.meta["global_batch"] != ranks.meta["global_batch"] or one.meta["micro_batch"] != ranks.meta["micro_batch"]:
        raise ValueError(f"one and ranks must take the same examples per update in micro-batches of one size; got "
                         f"{one.meta['global_batch']} in {one.meta['micro_batch']}s and "
                         f"{ranks.meta['global_batch']} in {ranks.meta['micro_batch']}s.")
    return AgainstRanks(
        k=ranks.k, cores=int(ranks.meta["cores"]),
        t_one=one.update_seconds(), t_ranks=ranks.update_seconds(),
        micro_alone=float(np.median(one.micro_seconds())), micro_ranks=float(ranks.micro_seconds()[0]),
        comm=ranks.comm_per_update(), spread=max(_iqr(run.t_step[1:]) for run in (one, ranks)),
    )


def _iqr(values) -> float:
    return float(np.subtract(*np.percentile(np.asarray(values, dtype=float), [75, 25])))


def accumulating_against_ranks(one: AccumulationRun, ranks: AccumulationRun, *, at_least: float | None = None) -> str:
    """One process accumulating m micro-batches against k = m ranks, in a sentence of what was measured.

    With ``at_least``, say whether one process took at least that many times as long, where the run could
    show it: a core per rank, ranks that computed a micro-batch no slower than one process alone did (BUSY),
    and update times steady enough that their spread (interquartile range) is smaller than the shortfall.
    Otherwise, and whenever the ranks shared cores or were slowed, say what the data show and why. Nothing is
    asserted: a run that falls short where it could have shown the lesson gets the sentence that says by how much
    and why.
    """
    c = against_ranks(one, ranks)
    k, mb = c.k, one.meta["micro_batch"]
    words = (f"One process accumulating m = {k} micro-batches of {mb} took {c.as_long()} k = {k} ranks with one each "
             f"(median whole update: {_ms(c.t_one)} against {_ms(c.t_ranks)})")
    if c.shared:
        return (words + f"; but the {k} ranks shared {_cores(c.cores)} and took turns, so that is not the time of {k} "
                f"ranks with a core each. {_modeled(c, 'a core each')}")
    caveat = ""
    if c.slowed <= 1 / BUSY:  # the one process computed more slowly than the ranks: the ratio is inflated
        caveat = (f" The one process's micro-batch took {1 / c.slowed:.2g}× as long as a rank's ({_ms(c.micro_alone)} "
                  f"against {_ms(c.micro_ranks)}): the machine ran it slower than the ranks, so the ratio overstates the lesson.")
    if at_least is not None and c.ratio >= at_least:
        return words + f", at least the {at_least:g}× the lesson asks for: the same update, not the same time." + caveat
    if c.busy:
        return (words + f"; each rank's micro-batch took {c.slowed:.2g}× as long as the one process's "
                f"({_ms(c.micro_ranks)} against {_ms(c.micro_alone)}): the two ranks slowed each other (they share the caches and the memory bus) or other work used the cores. "
                f"{_modeled(c, 'a free core each')}")
    saved = (k - 1) * c.micro_alone
    short = (at_least or 0) * c.t_ranks - c.t_one  # how far one process fell short of the lesson
    if at_least is not None and short <= c.spread:
        return (words + f", short of the {at_least:g}× the lesson asks for by {_ms(short)}, less than the "
                f"{_ms(c.spread)} that update times spread over (their interquartile range): the times are too noisy "
                f"to tell, as on a busy machine.")
    if at_least is not None:
        return (words + f", short of the {at_least:g}× the lesson asks for: the all-reduce ({_ms(c.comm)}) and the "
                f"rest of the ranks' update cost too much of the {_ms(saved)} of compute that the ranks took off the "
                f"one process.")
    if c.ratio > 1 + SAME:
        return words + ": the same update, not the same time." + caveat
    return (words + f": the all-reduce ({_ms(c.comm)}) and the rest of the ranks' update used up the {_ms(saved)} of "
            f"compute that the ranks took off the one process.")


def _modeled(c: AgainstRanks, cores: str) -> str:
    return (f"With {cores}, modeled (one micro-batch as one process timed it, the all-reduce and the rest as "
            f"measured), the {c.k} ranks would take {_ms(c.modeled_ranks)}: accumulating took {c.t_one / c.modeled_ranks:.2g}× "
            f"as long as that.")


def one_pass_per_example(one: AccumulationRun, big: AccumulationRun) -> str:
    """Compute per example: one process in one pass over the whole batch against the same in m micro-batches.

    "About the same" where the difference is within the spread between updates (the interquartile range of
    either run's compute per update, after the first).
    """
    if one.k != 1 or big.k != 1 or big.m != 1 or one.m < 2:
        raise ValueError(f"one must be one process with m > 1 micro-batches and big one process in one pass; got one "
                         f"k={one.k} m={one.m}, big k={big.k} m={big.m}.")
    n = one.meta["global_batch"]
    if big.meta["global_batch"] != n:
        raise ValueError(f"one and big must take the same examples per update; got {n} and {big.meta['global_batch']}.")

    def per_update(run):
        return np.asarray(run.t_micro, dtype=float)[1:].sum(axis=2).ravel()

    a, b = one.compute_per_update() / n, big.compute_per_update() / n
    spread = max(float(np.subtract(*np.percentile(per_update(r), [75, 25]))) for r in (one, big)) / n
    words = (f"Per example, one pass over all {n} took {_us(b)} of compute and m = {one.m} micro-batches of "
             f"{one.meta['micro_batch']} took {_us(a)}")
    if abs(a - b) <= spread:
        return words + f": about the same, the difference within the spread between updates ({_us(spread)})."
    if b < a:
        return words + f": the single larger pass took {(a - b) / a:.0%} less time."
    return words + f": the single larger pass took {(b - a) / a:.0%} more time, not less."


def same_update_not_same_time(one: AccumulationRun, ranks: AccumulationRun, big: AccumulationRun) -> list[str]:
    """What the chapter prints under its live timed runs: accumulating against k ranks, measured against the
    lesson's SLOWER but not asserted (a live run may share its cores with a class), then one pass against
    micro-batches. The updates themselves are asserted (each record's ``check()``)."""
    for run in (one, ranks, big):
        run.check()
    return [accumulating_against_ranks(one, ranks, at_least=SLOWER), one_pass_per_example(one, big)]


def timeline_title(one: AccumulationRun, ranks: AccumulationRun, big: AccumulationRun) -> str:
    """A timeline panel's title: what its runs measured, with the reason where the ranks shared or lacked cores."""
    c = against_ranks(one, ranks)
    words = (f"{big.meta['global_batch']} examples per update, m = k = {c.k}, median update: one process accumulating "
             f"took {c.as_long()} {c.k} ranks")
    if c.shared:
        return words + f", which shared {_cores(c.cores)}"
    if c.busy and c.ratio < SLOWER:
        return words + ", whose cores were busy"
    return words


def timelines_title(panels) -> str:
    """The timeline figure's title, from its panels ((one, ranks, big) each): the update is the big batch's
    (each record's ``check()``, run here); the time claim only where the runs show it."""
    for run in {id(run): run for runs in panels for run in runs}.values():
        run.check()
    head = "Accumulating m micro-batches gives the big-batch update"
    free = [c for c in (against_ranks(one, ranks) for one, ranks, _ in panels) if not c.shared and not c.busy]
    if not free:
        return head + "; no run here timed m ranks on free cores of their own"
    if all(c.ratio >= SLOWER for c in free):
        ks = " and ".join(str(c.k) for c in free)
        return head + f", not the speed of m ranks (m = {ks}, a core per rank)"
    if all(c.ratio > 1 + SAME for c in free):
        return head + ", more slowly than m ranks with a core each"
    return head + "; here not more slowly than m ranks with a core each"


def timeline_sentences(records: dict) -> list[str]:
    """The timeline figure's comparisons in sentences, for the chapter: each panel, then one pass per example."""
    panels = figure_selection(records)["timelines"]
    lines = [accumulating_against_ranks(one, ranks, at_least=SLOWER if ranks.k == 2 else None)
             for one, ranks, _ in panels]
    one, _, big = panels[0]
    return lines + [one_pass_per_example(one, big)]


def figure_claims(records: dict) -> str:
    """The notes' claims on accumulation, asserted on the figure records; one line for the terminal."""
    for record in records.values():
        record.check()
    inputs = figure_selection(records)
    points = accumulation_theory.memory_points(inputs["memory"])
    # every micro-batch keeps the same bytes per example: memory is proportional to the micro-batch
    per_example = points.activation_bytes / points.micro_batch
    assert (per_example == per_example[0]).all(), "bytes held for backward are not proportional to the micro-batch"
    assert (points.rel_err[points.m == 1] == 0).all(), "with m = 1 the update is not the plain one-batch gradient"
    for every, accumulate in zip(inputs["every"], inputs["accumulate"]):
        assert every.calls_per_update == every.m and accumulate.calls_per_update == 1, (
            f"m = {every.m}: {every.calls_per_update} all-reduces per update after every micro-batch and "
            f"{accumulate.calls_per_update} when accumulating, not m and 1")
    timelines = timeline_sentences(records)[0]  # m = k = 2: what the timed runs show, never asserted
    return (f"accumulation: {len(records)} runs matched their big-batch gradients within {tolerance_words()} (m = 1: bit for bit); "
            f"bytes held for backward fell {points.activation_bytes[0] // points.activation_bytes[-1]}× from "
            f"m = {points.m[0]} to m = {points.m[-1]}; all-reduces per update: m with 'every', 1 when accumulating. "
            + timelines)


def one_update_six_ways(big: AccumulationRun, one2: AccumulationRun, one4: AccumulationRun, ranks2: AccumulationRun,
                        accumulate: AccumulationRun, every: AccumulationRun) -> list[str]:
    """One update, six ways: every run stepped with the big-batch gradient; m micro-batches summed by one process
    equal what k = m ranks all-reduced; m = 1 is the plain gradient bit for bit; accumulating first is the same
    update as all-reducing after every micro-batch, with m times fewer all-reduces and bytes.

    The runs take the same examples per update and keep their gradients (``keep_grads=True``): ``big`` is one
    process with m = 1, ``one2`` and ``one4`` one process summing micro-batches, ``ranks2`` k = ``one2.m`` ranks
    with one batch each, ``accumulate`` and ``every`` k ranks with m micro-batches each, in the two patterns.
    Returns the sentences the chapter prints.
    """
    runs = (big, one2, one4, ranks2, accumulate, every)
    batches = {run.meta["global_batch"] for run in runs}
    if len(batches) != 1:
        raise ValueError(f"the six runs must take the same examples per update; got {sorted(batches)}.")
    if big.m != 1 or one2.k != 1 or ranks2.m != 1 or ranks2.k != one2.m:
        raise ValueError(f"big must be one process with m = 1 and ranks2 k = one2.m ranks with m = 1; got big m={big.m}, "
                         f"one2 k={one2.k} m={one2.m}, ranks2 k={ranks2.k} m={ranks2.m}.")
    if (accumulate.sync, every.sync) != ("accumulate", "every") or accumulate.m != every.m or accumulate.k < 2:
        raise ValueError("accumulate and every must be k > 1 ranks with the same m in the two patterns; got "
                         f"{accumulate.sync!r} (m={accumulate.m}) and {every.sync!r} (m={every.m}).")
    if big.reduced_grad is None:
        raise ValueError("big must be recorded with keep_grads=True to compare its gradients; it holds none.")
    for run in runs:
        err = float(run.big_rel_err.max())
        assert err <= GRAD_TOLERANCE, f"{run.who()}, {run.how()}: the update is {err:.1e} from the big-batch gradient, above {tolerance_words()}"
    summed = same_update(one2, ranks2)
    assert summed <= GRAD_TOLERANCE, f"one process summing {one2.m} micro-batches is {summed:.1e} from what {ranks2.k} ranks all-reduced"
    plain = big.reduced_grad == big.big_grad[:, None, :]
    assert plain.all(), f"with m = 1 the update is not the plain one-pass gradient bit for bit ({(~plain).sum()} values differ)"
    patterns = same_update(accumulate, every)
    assert patterns <= GRAD_TOLERANCE, f"accumulating first is {patterns:.1e} from all-reducing after every micro-batch"
    for run in (accumulate, every):
        assert run.replicas_identical().all(), f"{run.how()}: the replicas are not bit-identical"
    calls = (accumulate.calls_per_update, every.calls_per_update)
    assert calls == (1, every.m), f"all-reduces per update: {calls}, not 1 when accumulating and m = {every.m} after every micro-batch"
    sent = (accumulate.bytes_per_update, every.bytes_per_update)
    assert sent == (accumulate.grad_bytes, every.m * accumulate.grad_bytes), \
        f"bytes all-reduced per update: {sent}, not one gradient ({accumulate.grad_bytes:,} bytes) and m of them"
    return [
        f"All {len(runs)} runs stepped with the big-batch gradient of {big.meta['global_batch']} examples, within {tolerance_words()}, "
        f"at all {big.steps} steps.",
        f"One process summing {one2.m} micro-batches got what {ranks2.k} ranks got from the all-reduce, within {tolerance_words()}.",
        "With m = 1 the update is the plain one-pass gradient, bit for bit.",
        f"Accumulating first: {accumulate.calls_per_update} all-reduce of {accumulate.bytes_per_update:,} bytes per "
        f"update; after every micro-batch: {every.calls_per_update} of them, {every.bytes_per_update:,} bytes.",
    ]


# The answers to "will m micro-batches give the same gradient as the big batch?", the chapter's prediction.
SAME_GRADIENT = ("bit for bit", "to within float rounding, not bit for bit", "no: further apart than float rounding")


def same_gradient_answer(run: AccumulationRun) -> tuple[str, str, str]:
    """For the prediction on one process accumulating ``run.m`` micro-batches: which of :data:`SAME_GRADIENT` its
    updates were, how the chapter writes it (with the largest difference), and why."""
    if run.k != 1 or run.m < 2:
        raise ValueError(f"run must be one process accumulating m > 1 micro-batches; got k={run.k} m={run.m}.")
    err = float(np.max(run.big_rel_err))
    choice = SAME_GRADIENT[0] if err == 0 else SAME_GRADIENT[1] if err <= GRAD_TOLERANCE else SAME_GRADIENT[2]
    said = (f"{choice}: m = {run.m} micro-batches of {run.meta['micro_batch']} were at most {err:.1e} from the big "
            f"batch's gradient (relative), over all {len(run.big_rel_err)} updates")
    if err == 0:
        why = "The m partial sums happened to round exactly as one pass's sum did"
    elif err <= GRAD_TOLERANCE:
        why = (f"The m partial sums add the same example gradients as one pass, in another order, and float addition "
               f"is not associative ({course.ref('all_reduce')}): the last bits differ, well within float32's "
               f"{tolerance_words()}")
    else:
        why = f"A difference over {tolerance_words()} is more than rounding: the micro-batches were not summed right"
    return choice, said, why
