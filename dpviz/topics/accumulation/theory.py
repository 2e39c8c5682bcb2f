"""The chapter's time bars: one update, segment by segment, measured from a record or modeled.

A row is what one rank does during one update, in order: the forward and backward pass of each
micro-batch (compute), the all-reduces (sync) where the pattern calls them, and the rest (the
optimizer step and bookkeeping). Measured rows take the median of each segment over the steps
after the first and over the ranks, from an :class:`~dpviz.topics.accumulation.records.AccumulationRun`;
a modeled row says so and comes from :func:`dpviz.topics.ground_floor.costmodel.accumulation_update_time`'s terms.

    from dpviz.topics.accumulation import theory as acc
    rows = acc.three_ways(one_process, ranks, big_batch)     # one update of the same examples, three ways
    rows = acc.sync_patterns(every, accumulate)              # k ranks: m all-reduces against one

numpy only: :mod:`dpviz.topics.accumulation.plots` draws these rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.topics.ground_floor import costmodel

MEASURED = "measured"
MODELED = "modeled"
KINDS = ("compute", "comm", "rest")


@dataclass(frozen=True)
class Segment:
    """One stretch of a rank's update."""

    kind: str  # "compute" (one micro-batch's forward and backward), "comm" (an all-reduce) or "rest"
    start: float  # seconds from the start of the update
    width: float  # seconds


@dataclass(frozen=True)
class UpdateRow:
    """One bar: what a rank did during one update, segment by segment."""

    label: str  # who and how, e.g. "one process: m=4 micro-batches of 128"
    segments: tuple  # of Segment, in time order
    source: str  # "measured" or "modeled"
    note: str = ""  # a caveat drawn with the bar, e.g. "4 ranks on 2 cores took turns"
    calls: int = 0  # all-reduce calls per update
    sent_bytes: int = 0  # bytes each rank handed to all_reduce per update
    activation_bytes: int = 0  # bytes one micro-batch's forward pass keeps for backward

    @property
    def t_update(self) -> float:
        """Seconds from the start of the update to the end of its last segment."""
        return max((s.start + s.width for s in self.segments), default=0.0)

    def total(self, kind: str) -> float:
        """Seconds spent in segments of one kind."""
        return float(sum(s.width for s in self.segments if s.kind == kind))


def _chain(pieces) -> tuple:
    """Segments laid end to end from (kind, width) pairs, skipping empty ones."""
    out, t = [], 0.0
    for kind, width in pieces:
        if width > 0:
            out.append(Segment(kind, t, float(width)))
            t += float(width)
    return tuple(out)


def measured_row(run, *, label: str | None = None, warmup: int = 1) -> UpdateRow:
    """A typical update of ``run`` (an AccumulationRun): median micro-batch, all-reduce and rest times."""
    micro = run.micro_seconds(warmup=warmup)
    comm = run.comm_seconds(warmup=warmup)
    # What is neither compute nor sync (the optimizer step, copies), median over steps and ranks.
    t_step = np.asarray(run.t_step, dtype=float)[warmup:]
    spent = np.asarray(run.t_micro, dtype=float)[warmup:].sum(axis=2) + np.asarray(run.t_comm, dtype=float)[warmup:].sum(axis=2)
    rest = float(np.median(np.clip(t_step - spent, 0.0, None)))
    pieces = []
    for j in range(run.m):
        pieces += [("compute", micro[j]), ("comm", comm[j])]
    pieces.append(("rest", rest))
    note = f"{run.k} ranks on {run.meta['cores']} cores took turns" if run.oversubscribed else ""
    return UpdateRow(
        label=label or f"{run.who()}: {run.how()}",
        segments=_chain(pieces),
        source=MEASURED,
        note=note,
        calls=run.calls_per_update,
        sent_bytes=run.bytes_per_update,
        activation_bytes=int(run.meta["activation_bytes"]),
    )


def modeled_row(label: str, *, m: int, t_micro: float, t_comm: float, sync: str = "accumulate", note: str = "",
                calls: int = 0, sent_bytes: int = 0) -> UpdateRow:
    """An update modeled from one micro-batch's time and one all-reduce's time (costmodel's terms)."""
    total = costmodel.accumulation_update_time(m, t_micro, t_comm, sync=sync)
    pieces = []
    for j in range(m):
        pieces.append(("compute", t_micro))
        if sync == "every" or j == m - 1:
            pieces.append(("comm", t_comm))
    row = UpdateRow(label, _chain(pieces), MODELED, note, calls, sent_bytes)
    assert np.isclose(row.t_update, total), "the modeled segments must add up to the cost model's update time"
    return row


def three_ways(one_process, ranks, big_batch, *, warmup: int = 1) -> list[UpdateRow]:
    """The same update of k·b examples: one process accumulating m = k micro-batches, k ranks at once, one big batch.

    Where the k ranks had fewer cores than ranks (they took turns), a modeled row follows the
    measured one: each rank on a core of its own, computing one micro-batch in the time one process
    took for one, then the all-reduce as measured.
    """
    if not (one_process.k == 1 and big_batch.k == 1 and big_batch.m == 1):
        raise ValueError("one_process and big_batch must be one-process runs (k=1), big_batch with m=1.")
    if not (ranks.m == 1 and ranks.k == one_process.m):
        raise ValueError(f"ranks must hold k = m = {one_process.m} ranks with one micro-batch each; got k={ranks.k}, m={ranks.m}.")
    batches = {one_process.meta["global_batch"], ranks.meta["global_batch"], big_batch.meta["global_batch"]}
    if len(batches) != 1:
        raise ValueError(f"the three runs must update on the same number of examples; got {sorted(batches)}.")
    m = one_process.m
    rows = [
        measured_row(one_process, label=f"one process, m={m} micro-batches in a row", warmup=warmup),
        measured_row(ranks, label=f"k={ranks.k} ranks at once, one micro-batch each", warmup=warmup),
    ]
    if ranks.oversubscribed:
        rows.append(modeled_row(
            f"k={ranks.k} ranks, a core each", m=1, t_micro=float(np.median(one_process.micro_seconds(warmup=warmup))),
            t_comm=ranks.comm_per_update(warmup=warmup), note="one micro-batch as timed alone + the all-reduce as measured",
            calls=ranks.calls_per_update, sent_bytes=ranks.bytes_per_update,
        ))
    rows.append(measured_row(big_batch, label=f"one process, one batch of {big_batch.meta['global_batch']}", warmup=warmup))
    return rows


def sync_patterns(every, accumulate, *, warmup: int = 1) -> list[UpdateRow]:
    """k ranks, m micro-batches each: an all-reduce after every micro-batch, then accumulate-then-one."""
    for name, run, sync in (("every", every, "every"), ("accumulate", accumulate, "accumulate")):
        if run.sync != sync or run.k < 2:
            raise ValueError(f"{name} must be a run of k > 1 ranks with sync={sync!r}; got k={run.k}, sync={run.sync!r}.")
    if (every.k, every.m, every.meta["micro_batch"]) != (accumulate.k, accumulate.m, accumulate.meta["micro_batch"]):
        raise ValueError("every and accumulate must share k, m and the micro-batch size.")
    return [
        measured_row(every, label=f"all-reduce after every micro-batch ({every.m}×)", warmup=warmup),
        measured_row(accumulate, label="accumulate, then all-reduce once", warmup=warmup),
    ]


@dataclass(frozen=True)
class CommCurve:
    """Seconds in all-reduce per update against m, for one pattern, measured."""

    sync: str
    m: np.ndarray  # (n,) micro-batches per rank
    seconds: np.ndarray  # (n,) median seconds inside all_reduce per update
    calls: np.ndarray  # (n,) all-reduce calls per update
    sent_bytes: np.ndarray  # (n,) bytes handed to all_reduce per update, per rank


def comm_curves(runs, *, warmup: int = 1) -> dict[str, CommCurve]:
    """{sync: CommCurve} from runs of one k over several m (a list of AccumulationRuns, both patterns)."""
    runs = list(runs)
    if not runs or len({r.k for r in runs}) != 1 or runs[0].k < 2:
        raise ValueError("runs must be AccumulationRuns of one k > 1.")
    out = {}
    for sync in costmodel.ACCUMULATION_SYNCS:
        mine = sorted((r for r in runs if r.sync == sync), key=lambda r: r.m)
        if mine:
            out[sync] = CommCurve(
                sync,
                np.array([r.m for r in mine]),
                np.array([r.comm_per_update(warmup=warmup) for r in mine]),
                np.array([r.calls_per_update for r in mine]),
                np.array([r.bytes_per_update for r in mine]),
            )
    return out


@dataclass(frozen=True)
class MemoryPoints:
    """Bytes held for backward against micro-batch size, for runs of one update size, and their updates' errors."""

    micro_batch: np.ndarray  # (n,) examples per micro-batch, largest first
    m: np.ndarray  # (n,) micro-batches per update
    activation_bytes: np.ndarray  # (n,) bytes one micro-batch's forward pass keeps for backward
    rel_err: np.ndarray  # (n,) the update's max relative error to the big-batch gradient, worst step
    param_bytes: int  # bytes of the parameters (and again of the gradient): no micro-batch size changes them
    global_batch: int  # examples per update, the same for every point


def memory_points(runs) -> MemoryPoints:
    """The memory figure's numbers from one-process runs that split the same update into different m."""
    runs = sorted(runs, key=lambda r: r.m)
    if not runs or any(r.k != 1 for r in runs):
        raise ValueError("runs must be one-process AccumulationRuns (k=1).")
    batches = {r.meta["global_batch"] for r in runs}
    if len(batches) != 1:
        raise ValueError(f"runs must update on the same number of examples to compare; got {sorted(batches)}.")
    return MemoryPoints(
        micro_batch=np.array([r.meta["micro_batch"] for r in runs]),
        m=np.array([r.m for r in runs]),
        activation_bytes=np.array([r.meta["activation_bytes"] for r in runs]),
        rel_err=np.array([float(np.max(r.big_rel_err)) for r in runs]),
        param_bytes=runs[0].grad_bytes,
        global_batch=batches.pop(),
    )
