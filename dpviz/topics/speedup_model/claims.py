"""The speedup model's chapter: what its figures claim in their titles, checked on the numbers they draw (numpy only).

* s01 says compute shrinks as 1/k: :func:`compute_shrinks` asks it of measured rows, where there is a
  core per rank (with more ranks than cores the ranks take turns, and nothing need shrink).
* s01 also says the sync does not shrink: :func:`sync_does_not_shrink` asks it of the rows drawn, k = 2 on
  (measured and modeled alike: a modeled row that prices the exchange alone can come out below a measured one
  that also waited for a late wake-up, and then the title must not say it).
* s01 and s02 compare timings across k: :func:`threads_per_rank` refuses runs whose ranks had
  different numbers of intra-op threads, since then k = 1 is not the baseline of k = 2.
* s02 says a slower link peels away from S = k sooner: :func:`slower_peels_sooner` checks it on
  the drawn curves, fast to slow: at every k the slower link's S is no higher, and the k where it
  first falls below :data:`EFFICIENCY` of the ideal comes no later.

* :func:`figure_claims` checks the MLP runs and the all-reduce sweep behind s01, s02 and the all-reduce
  figure, for ``./run``.

The chapter's own checks:

* :func:`speedup_limits`: the cost model's limits and edge cases (S = 1 at k = 1, S = k/2 when the sync takes
  as long as the compute share, S -> k for a free sync, S -> T_compute/T_comm when it dominates).
* :func:`runs_are_right_and_fair`: the MLP runs pass their ``check()``, every k > 1 step spent time in the
  all-reduce, and every run gave each process one thread.
* :func:`ring_sends`: the hand-written ring's messages counted: (k−1)/k·M in the reduce-scatter, 2(k−1)/k·M
  in all, 2(k−1) messages per rank.

Each function returns one line saying what it checked, or raises ``AssertionError`` naming the
first number that contradicts the claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from dpviz import course
from dpviz.topics.speedup_model.figure_records import DerivationRecords
from dpviz.topics.ground_floor import costmodel, timing

EFFICIENCY = 0.9  # a curve has "peeled away" from S = k where S/k first drops below this
DOMINANT_K, DOMINANT_SYNC = 10_000, 0.5  # k and sync seconds at which "the sync dominates" is checked


def threads_per_rank(runs) -> int:
    """The one number of intra-op threads every rank of every run had; raises if the runs differ."""
    runs = list(runs.values()) if isinstance(runs, Mapping) else list(runs)
    threads = {int(run.k): run.meta.get("threads_per_rank") for run in runs}
    values = set(threads.values())
    if None in values:
        raise AssertionError(f"every run must record threads_per_rank to be compared across k; got {threads}.")
    if len(values) != 1:
        raise AssertionError(f"timings compared across k need the same threads per rank at every k; got {threads} "
                             "(k: threads): k = 1 with more threads is another machine, not the baseline.")
    return values.pop()


class Finding(NamedTuple):
    """What a claim about measured times found: whether the lesson held on these data, and what they show.

    ``says`` is the sentence a chapter prints; ``why`` a short phrase for a figure's title when the lesson
    did not hold (empty when it did).
    """

    holds: bool
    says: str
    why: str = ""


SHARE_SLACK = 1.25  # compute "shrinks as 1/k" where a rank's compute is at most 1.25 × T_compute(1)/k
SUPERLINEAR = 1.05  # S above 1.05 k is "more than k": beyond what the timing noise of a quiet machine explains
SAME_SPEED = 0.10   # two times per example within 10 % of each other are "the same speed"


def where_it_shrinks(cores: int) -> str:
    """The rows the 1/k claim is made on: those with a core per rank (the others take turns on the cores)."""
    return f"while each rank has a core (k ≤ {cores})"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def compute_shrinks(times, *, cores: int) -> Finding:
    """Whether measured compute per rank fell as 1/k over the k with a core per rank (k <= cores).

    ``times`` maps k to a StepTimes (or anything with ``t_compute``), as
    :func:`dpviz.topics.ground_floor.timing.measured_step_times` returns. With more ranks than cores the ranks take turns,
    and nothing need shrink: those rows are left out, and when fewer than two rows remain the finding says so.
    """
    ks = sorted(k for k in times if k <= cores)
    every = ", ".join(f"{ms(times[k].t_compute)} at k = {k}" for k in sorted(times))
    if len(ks) < 2:
        why = f"with {cores} core{'s' if cores > 1 else ''}, every k > 1 had more ranks than cores"
        return Finding(False, f"Compute per rank: {every}. The run could use {cores} core{'s' if cores > 1 else ''}, "
                              "so every k > 1 had more ranks than cores and the ranks took turns on them: "
                              "these rows cannot show compute shrinking as 1/k.", why)
    base_k, base = ks[0], float(times[ks[0]].t_compute)
    pairs = ", ".join(f"{ms(times[k].t_compute)} at k = {k} (1/k of k = {base_k}'s: {ms(base * base_k / k)})"
                      for k in ks[1:])
    grew = [(a, b) for a, b in zip(ks, ks[1:]) if not times[b].t_compute < times[a].t_compute]
    if grew:
        a, b = grew[0]
        return Finding(False, f"Compute per rank did not shrink from k = {a} ({ms(times[a].t_compute)}) to k = {b} "
                              f"({ms(times[b].t_compute)}) although each rank had a core: other work on the machine "
                              "took the cores while these runs were recorded.",
                       "compute per rank did not shrink (other work took the cores)")
    slow = [k for k in ks[1:] if times[k].t_compute > SHARE_SLACK * base * base_k / k]
    if slow:
        return Finding(False, f"Compute per rank shrank, but less than 1/k: {ms(base)} at k = {base_k}, then {pairs}. "
                              "Each rank had a core, so other work on the machine took part of them.",
                       "compute per rank shrank less than 1/k (other work took part of the cores)")
    faster = [k for k in ks[1:] if times[k].t_compute * SUPERLINEAR < base * base_k / k]
    tail = (" Faster than 1/k at k = " + ", ".join(map(str, faster)) + ": each rank also had fewer examples to "
            "hold, and the next cell looks at that.") if faster else ""
    return Finding(True, f"Compute per rank shrinks as 1/k {where_it_shrinks(cores)}: {ms(base)} at k = {base_k}, "
                         f"then {pairs}.{tail}")


def sync_does_not_shrink(rows) -> Finding:
    """Whether the sync (``t_comm``) of the rows drawn never falls as k grows past 1.

    ``rows`` are what :func:`dpviz.topics.ground_floor.timing.timeline_rows` returns (anything with ``k``, ``t_comm`` and
    ``source``); k = 1 has no sync and is left out. A modeled row prices the exchange alone and can come out
    below a measured one, which also waited: then the finding says so, and a title makes no claim of it.
    """
    drawn = sorted((row for row in rows if row.k > 1), key=lambda row: row.k)
    if len(drawn) < 2:
        raise ValueError(f"rows must hold at least two k > 1 to compare; got k = {[row.k for row in rows]}.")
    pairs = ", ".join(f"{ms(row.t_comm)} at k = {row.k} ({row.source})" for row in drawn)
    for before, after in zip(drawn, drawn[1:]):
        if after.t_comm < before.t_comm:
            mixed = before.source != after.source
            because = ("the modeled row prices the exchange alone, while a measured sync also includes waiting "
                       "(for the other ranks, and to be woken up)" if mixed else
                       "these sync times are mostly waiting, and waiting varies from run to run")
            return Finding(False, f"The sync: {pairs}. It is shorter at k = {after.k} than at k = {before.k}, because "
                                  f"{because}; so no claim about the sync is made on these rows.",
                           "measured sync includes waiting" if mixed else "the sync times vary")
    return Finding(True, f"The sync does not shrink as k grows: {pairs}.")


def s01_title(times, rows, *, cores: int) -> str:
    """The measured s01's title: only what :func:`compute_shrinks` and :func:`sync_does_not_shrink` found."""
    compute, sync = compute_shrinks(times, cores=cores), sync_does_not_shrink(rows)
    if not compute.holds:
        return (f"One step on k devices, measured; compute shrinking as 1/k does not show here:\n{compute.why} "
                "(the hatched rows are modeled)")
    if not sync.holds:
        return (f"One step on k devices: compute shrinks as 1/k {where_it_shrinks(cores)}. The measured sync "
                "includes waiting\n(for the other ranks, and to be woken up); the modeled one (hatched) is the "
                "exchange alone")
    return (f"One step on k devices: compute shrinks as 1/k {where_it_shrinks(cores)}, the sync does not, so no step "
            "can get shorter than its coral bar")


def speedup_at_two(runs, half) -> str:
    """The measured S(2), and where it passes 2, what the time per example says about why.

    ``runs`` maps k to the MLP runs (k = 1 and 2 at least, one global batch); ``half`` is one process on
    the examples one of two ranks holds (half the global batch). Compute per example of the three tells
    a gain from splitting the work apart from a gain from a smaller batch per process.
    """
    times = timing.measured_step_times(runs)
    if 1 not in times or 2 not in times:
        raise ValueError(f"runs must hold k = 1 and k = 2; got k = {sorted(times)}.")
    alone = timing.measured_step_times([half])[1]
    if alone.global_batch * 2 != times[1].global_batch:
        raise ValueError(f"half must hold half the runs' global batch ({times[1].global_batch // 2}); "
                         f"got {alone.global_batch}.")
    s2 = float(timing.measured_speedup(runs).speedup[list(timing.measured_speedup(runs).k).index(2)])
    one, two = times[1], times[2]
    cores = two.cores
    head = (f"Measured S(2) = {s2:.2f}: a step took {ms(one.t_step)} on one process and {ms(two.t_step)} on two "
            f"({ms(two.t_compute)} computing, {ms(two.t_comm)} in the all-reduce).")
    if cores < 2:
        return head + (f" The run could use {cores} core, so the two ranks took turns on it: this S(2) measures the "
                       "turn-taking, not the split.")
    per = {"one process, whole batch": one.t_compute / one.global_batch,
           "each of two ranks, half each": two.t_compute / (two.global_batch / 2),
           "one process, half the batch": alone.t_compute / alone.global_batch}
    words = "; ".join(f"{name}: {seconds * 1e6:.2f} µs" for name, seconds in per.items())
    whole, split, small = per.values()
    if s2 > 2 * SUPERLINEAR:
        if abs(small - split) <= SAME_SPEED * split and small < whole * (1 - SAME_SPEED / 2):
            cause = ("A lone process on half the batch is as fast per example as the two ranks, and faster than on "
                     "the whole batch. So the gain beyond 2 comes from the smaller batch per process (its "
                     "activations fit the caches better), not from the second process: a speedup above k, measured "
                     "and explained.")
        else:
            cause = ("A lone process on half the batch is not as fast per example as the two ranks, so the smaller "
                     "batch does not explain the gain beyond 2 here; timing noise between the runs may (record "
                     "them again: python -m dpviz figures).")
        return f"{head} That is more than k = 2. Compute per example: {words}. {cause}"
    if s2 >= 1.5:
        return (f"{head} Below the ideal 2 by the sync and the spread between ranks, and above 1.5, as a workload "
                f"whose compute dominates its all-reduce should be. Compute per example: {words}.")
    return (f"{head} Below 1.5 although each rank had a core: other work on the machine took the cores, or the "
            f"sync waited long ({course.ref('measuring')}'s aside). Compute per example: {words}.")


def against_the_model(runs, bench) -> list[str]:
    """Each measured S beside this machine's model (the ring with α and β fitted to the benchmark), and why
    a point sits below it where the ranks shared cores."""
    measured = timing.measured_speedup(runs)
    workload = timing.measured_workload(runs)
    here = timing.link_from_fit(bench.fit("ring"), name="this machine, fitted", measured_on="")
    curve = next(iter(timing.speedup_curves(measured.k, t_compute=workload.t_compute, M=workload.M,
                                            links=[here]).curves.values()))
    lines = []
    for k, s, model, crowded in zip(measured.k, measured.speedup, curve.speedup, measured.oversubscribed):
        if k == 1:
            continue
        side = "above" if s > model else "below"
        cores = f"{measured.cores} core{'s' if measured.cores > 1 else ''}"
        why = (f": the {k} ranks shared {cores}, which no link model knows about" if crowded and s < model
               else ": each rank computed its share in less than 1/k of one process's time (see S(2) above)" if s > model
               else ": the sync waited longer than the exchange the fit prices")
        lines.append(f"k = {k}: measured S = {s:.2f}, {side} this machine's model ({model:.2f}){why}.")
    return lines


def what_real_systems_show(fits, *, nvlink_alpha: float) -> list[str]:
    """The published GPU systems' ring fits in words: each system's α, β, median error and largest miss, then
    the range of β and how α compares with the NVLink preset's (``nvlink_alpha`` seconds).

    ``fits`` is :func:`dpviz.topics.measuring.alpha_beta.published_fits`; every number was measured by others, and the
    lines say so. Each fit must pass the trust rule before its numbers are read as a link's.
    """
    lines = []
    for item in fits.values():
        verdict = item.check
        if not (verdict.beta_trusted and verdict.alpha_trusted):
            raise AssertionError(f"{item.label}: the ring fit fails the trust rule, so its α and β are not a link's: "
                                 f"{verdict.words()}")
        worst = int(np.argmax(np.abs(item.residuals.rel)))
        lines.append(f"{item.label}: α = {item.fit.alpha * 1e6:5.2f} µs, β = {item.fit.beta / 1e9:5.0f} GB/s, "
                     f"median error {item.fit.median_rel_err:.0%}, largest miss ×{1 + item.residuals.rel[worst]:.2g} "
                     f"at M = {alpha_beta_bytes(item.residuals.M[worst])} (ring, k = {item.k[0]})")
    betas = [item.fit.beta / 1e9 for item in fits.values()]
    alphas = [item.fit.alpha for item in fits.values()]
    lines.append(f"Every fit passes the trust rule; β runs from {min(betas):.0f} to {max(betas):.0f} GB/s, and α from "
                 f"{min(alphas) * 1e6:.2g} to {max(alphas) * 1e6:.2g} µs, {min(alphas) / nvlink_alpha:.0f} to "
                 f"{max(alphas) / nvlink_alpha:.0f} times the NVLink preset's {nvlink_alpha * 1e6:g} µs.")
    return lines


def alpha_beta_bytes(M: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if M >= scale:
            return f"{M / scale:.3g} {unit}"
    return f"{M:.0f} B"


def peel_off(k, s, *, efficiency: float = EFFICIENCY) -> float:
    """The first k at which S/k drops below ``efficiency`` (inf if it never does on the k given)."""
    k, s = np.asarray(k, float), np.asarray(s, float)
    below = np.flatnonzero(s / k < efficiency)
    return float(k[below[0]]) if below.size else np.inf


def slower_peels_sooner(k, curves, *, efficiency: float = EFFICIENCY) -> str:
    """Check s02's title on the curves drawn: ``curves`` maps link names to S over ``k``, fast to slow."""
    k = np.asarray(k, float)
    names = list(curves)
    if len(names) < 2:
        raise ValueError(f"curves must hold at least two links to compare; got {names}.")
    peels = {name: peel_off(k, curves[name], efficiency=efficiency) for name in names}
    for fast, slow in zip(names, names[1:]):
        s_fast, s_slow = np.asarray(curves[fast], float), np.asarray(curves[slow], float)
        above = np.flatnonzero(s_slow > s_fast * (1 + 1e-9))
        if above.size:
            i = int(above[0])
            raise AssertionError(f"the slower link {slow!r} has S = {s_slow[i]:.3g} above {fast!r}'s {s_fast[i]:.3g} "
                                 f"at k = {k[i]:g}: the title's claim does not hold on this figure.")
        if peels[slow] > peels[fast]:
            raise AssertionError(f"{slow!r} leaves S = k at k = {peels[slow]:g}, later than {fast!r} "
                                 f"(k = {peels[fast]:g}): the title's claim does not hold on this figure.")
    words = ", ".join(f"{name} at k = {peels[name]:g}" if np.isfinite(peels[name]) else f"{name} not by k = {k.max():g}"
                      for name in names)
    return (f"fast to slow, each link's S is at or below the faster one's at every k, and falls below "
            f"{efficiency:.0%} of S = k no later: {words}")


def figure_claims(records: dict) -> str:
    """The MLP runs and the all-reduce sweep behind the chapter's figures, checked; lines for the terminal."""
    inputs = DerivationRecords.from_records(records)
    lines = [f"MLP, k={k}: {run.check()}" for k, run in inputs.mlp.items()]
    fits = inputs.bench.fits()
    lines.append("all-reduce fits (median relative error): " + ", ".join(f"{f}: {fit.median_rel_err:.0%}" for f, fit in fits.items()))
    return "\n".join(lines)


def speedup_limits(t_compute: float, ks, t_comm, speedups) -> str:
    """The cost model's limits and edge cases, and the speedups ``speedups`` it gave for ``t_comm`` over ``ks``.

    ``t_comm`` holds the modeled sync (seconds) at each k, 0 at k = 1; ``speedups`` are
    :func:`dpviz.topics.ground_floor.costmodel.speedup` of them, as the chapter printed.
    """
    ks, t_comm, speedups = np.asarray(ks), np.asarray(t_comm, float), np.asarray(speedups, float)
    for formula in costmodel.FORMULAS:
        alone = costmodel.t_comm(1, 100e6, 5e-6, 10e9, formula=formula)
        assert alone == 0.0, f"at k = 1 the {formula} formula gives T_comm = {alone:g} s, not 0"
    one = costmodel.speedup(t_compute, 1, 0.0)
    assert one == 1.0, f"at k = 1 with T_comm = 0, S = {one:g}, not 1"
    for k in ks:
        half, share = costmodel.speedup(t_compute, k, t_compute / k), costmodel.efficiency(t_compute, k, t_compute / k)
        assert np.isclose(half, k / 2) and np.isclose(share, 0.5), \
            f"with T_comm = T_compute/k at k = {k}: S = {half:g} (not k/2), S/k = {share:g} (not 1/2)"
    free = costmodel.speedup(t_compute, ks, 0.0)
    assert np.allclose(free, ks), f"a free sync does not give S = k: {free} at k = {ks}"
    dominated = costmodel.speedup(t_compute, DOMINANT_K, DOMINANT_SYNC)
    assert np.isclose(dominated, t_compute / DOMINANT_SYNC, rtol=1e-3), \
        f"a sync of {DOMINANT_SYNC:g} s at k = {DOMINANT_K:,} gives S = {dominated:.4g}, not T_compute/T_comm"
    above = np.flatnonzero((ks > 1) & (speedups >= ks))
    assert not above.size, f"with a sync cost, S is not below k: S = {speedups[above[0]]:.3g} at k = {ks[above[0]]}"
    ceiling = np.where(t_comm > 0, t_compute / np.where(t_comm > 0, t_comm, 1.0), np.inf)
    over = np.flatnonzero(speedups >= ceiling)
    assert not over.size, \
        f"S is not below the ceiling T_compute/T_comm: S = {speedups[over[0]]:.3g} at k = {ks[over[0]]}, ceiling {ceiling[over[0]]:.3g}"
    return ("Checked on the cost model: S = 1 at k = 1 with T_comm = 0; S = k/2 when T_comm = T_compute/k; "
            "S -> k for free sync and S -> T_compute/T_comm when the sync dominates.")


def runs_are_right_and_fair(runs) -> str:
    """Each MLP run passes its ``check()`` and spent time in the all-reduce at every step with k > 1, and all
    runs gave each process one thread, so their timings compare across k. ``runs`` maps k to a Run."""
    for k, run in runs.items():
        run.check()  # the big-batch gradient, the bits received, the replicas
        if k > 1:
            assert (run.t_comm > 0).all(), f"k={k}: a step with no time in the all-reduce"
    threads = threads_per_rank(runs)
    assert threads == 1, f"each process ran {threads} threads, not one: a process is not one core"
    times = timing.measured_step_times(runs)
    synced = {k: times[k].t_comm for k in times}
    assert times[1].t_comm == 0.0 and all(synced[k] > 0 for k in times if k > 1), \
        f"measured T_comm (seconds) is not 0 at k = 1 and > 0 beyond: {synced}"
    return (f"The MLP runs for k = {sorted(runs)} passed check(): big-batch gradient matched, bits received "
            f"identical, replicas identical after every step; every run gave each process {threads} thread.")


def ring_sends(ring) -> str:
    """The hand-written ring's messages counted: (k−1)/k·M per rank in the reduce-scatter (the notes' term),
    2(k−1)/k·M in all, in 2(k−1) messages per rank; and its result is ``dist.all_reduce``'s, bit for bit."""
    if ring.impl != "ring":
        raise ValueError(f"ring must be the hand-written ring's schedule; got impl={ring.impl!r}.")
    k, M = ring.k, ring.message_bytes
    reduce_scatter = ring.phase == ring.meta["phases"].index("reduce-scatter")
    sent_in_reduce_scatter = np.bincount(ring.src[reduce_scatter], weights=ring.bytes[reduce_scatter], minlength=k)
    messages = np.bincount(ring.src, minlength=k)
    assert ring.equal, "the hand-written ring differs from dist.all_reduce"
    assert (sent_in_reduce_scatter == (k - 1) / k * M).all(), \
        f"in the reduce-scatter the ranks sent {sent_in_reduce_scatter.tolist()} bytes, not (k-1)/k·M = {(k - 1) * M / k:g}"
    assert (ring.bytes_sent == 2 * (k - 1) / k * M).all(), \
        f"the ranks sent {ring.bytes_sent.tolist()} bytes in all, not 2(k-1)/k·M = {2 * (k - 1) * M / k:g}"
    assert (messages == 2 * (k - 1)).all(), f"the ranks sent {messages.tolist()} messages, not 2(k-1) = {2 * (k - 1)}"
    return (f"Ring all-reduce of M = {M} bytes on k = {k}: each rank sent {int(sent_in_reduce_scatter[0])} bytes "
            f"in the reduce-scatter ((k-1)/k·M, the notes' term) and {int(ring.bytes_sent[0])} bytes in all "
            f"(2(k-1)/k·M), in {messages[0]} messages (2(k-1)).")


__all__ = ["EFFICIENCY", "Finding", "threads_per_rank", "where_it_shrinks", "compute_shrinks", "sync_does_not_shrink",
           "s01_title", "speedup_at_two", "against_the_model", "what_real_systems_show", "peel_off",
           "slower_peels_sooner", "figure_claims", "speedup_limits", "runs_are_right_and_fair", "ring_sends"]


def s2_answer(runs, half) -> tuple[float, str, str]:
    """For the prediction "how many times faster will k = 2 ranks be than one here?": the measured S(2), how the
    chapter writes it, and why this machine gave it (the sentence an answer adds when the guess was off)."""
    times = timing.measured_step_times(runs)
    if 1 not in times or 2 not in times:
        raise ValueError(f"runs must hold k = 1 and k = 2; got k = {sorted(times)}.")
    measured = timing.measured_speedup(runs)
    s2 = float(measured.speedup[list(measured.k).index(2)])
    one, two = times[1], times[2]
    said = f"S(2) = {s2:.2f}× ({ms(one.t_step)} per step on one process, {ms(two.t_step)} on two)"
    if two.cores < 2:
        return s2, said, f"The two ranks shared {two.cores} core and took turns on it, so they could not run at once."
    alone = timing.measured_step_times([half])[1]
    whole, split, small = (one.t_compute / one.global_batch, two.t_compute / (two.global_batch / 2),
                           alone.t_compute / alone.global_batch)
    if s2 > 2:
        return s2, said, (f"Each rank computed at {split * 1e6:.3g} µs per example against one process's "
                          f"{whole * 1e6:.3g} µs on the whole batch (a lone process on half the batch: "
                          f"{small * 1e6:.3g} µs): a smaller batch per process ran faster per example, which the "
                          f"model's fixed T_compute leaves out")
    return s2, said, (f"The two ranks computed for {ms(two.t_compute)} each (half of one process's would be "
                      f"{ms(one.t_compute / 2)}) and then spent {ms(two.t_comm)} in the all-reduce, which one process "
                      f"never pays")
