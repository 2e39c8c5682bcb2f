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

import numpy as np

from dpviz.records.figure_set import Inputs
from dpviz.theory import costmodel, timing

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


def compute_shrinks(times, *, cores: int) -> str:
    """Measured compute per rank falls as k grows, for the measured k with a core per rank (k <= cores).

    ``times`` maps k to a StepTimes (or anything with ``t_compute``), as
    :func:`dpviz.theory.timing.measured_step_times` returns.
    """
    ks = sorted(k for k in times if k <= cores)
    if len(ks) < 2:
        raise ValueError(f"times must hold at least two k <= cores ({cores}) to compare; got {sorted(times)}.")
    compute = [float(times[k].t_compute) for k in ks]
    for (k0, c0), (k1, c1) in zip(zip(ks, compute), zip(ks[1:], compute[1:])):
        if not c1 < c0:
            raise AssertionError(f"compute per rank did not shrink from k = {k0} ({c0 * 1e3:.3g} ms) to k = {k1} "
                                 f"({c1 * 1e3:.3g} ms): the machine was busy, or the ranks shared cores.")
    pairs = ", ".join(f"{c * 1e3:.3g} ms at k = {k}" for k, c in zip(ks, compute))
    return f"compute per rank shrinks with k while k <= {cores} cores: {pairs}"


def sync_does_not_shrink(rows) -> str:
    """The sync (``t_comm``) of the rows drawn never falls as k grows past 1.

    ``rows`` are what :func:`dpviz.theory.timing.timeline_rows` returns (anything with ``k``, ``t_comm`` and
    ``source``); k = 1 has no sync and is left out.
    """
    drawn = sorted((row for row in rows if row.k > 1), key=lambda row: row.k)
    if len(drawn) < 2:
        raise ValueError(f"rows must hold at least two k > 1 to compare; got k = {[row.k for row in rows]}.")
    for before, after in zip(drawn, drawn[1:]):
        if after.t_comm < before.t_comm:
            raise AssertionError(f"the sync shrank from k = {before.k} ({before.t_comm * 1e3:.3g} ms, {before.source}) "
                                 f"to k = {after.k} ({after.t_comm * 1e3:.3g} ms, {after.source}).")
    pairs = ", ".join(f"{row.t_comm * 1e3:.3g} ms at k = {row.k} ({row.source})" for row in drawn)
    return f"the sync does not shrink as k grows: {pairs}"


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
    inputs = Inputs.from_records(records)
    lines = [f"MLP, k={k}: {run.check()}" for k, run in inputs.mlp.items()]
    fits = inputs.bench.fits()
    lines.append("all-reduce fits (median relative error): " + ", ".join(f"{f}: {fit.median_rel_err:.0%}" for f, fit in fits.items()))
    return "\n".join(lines)


def speedup_limits(t_compute: float, ks, t_comm, speedups) -> str:
    """The cost model's limits and edge cases, and the speedups ``speedups`` it gave for ``t_comm`` over ``ks``.

    ``t_comm`` holds the modeled sync (seconds) at each k, 0 at k = 1; ``speedups`` are
    :func:`dpviz.theory.costmodel.speedup` of them, as the chapter printed.
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


__all__ = ["EFFICIENCY", "threads_per_rank", "compute_shrinks", "sync_does_not_shrink", "peel_off",
           "slower_peels_sooner", "figure_claims", "speedup_limits", "runs_are_right_and_fair", "ring_sends"]
