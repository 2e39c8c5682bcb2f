"""The numbers behind the cost figures: step timelines, speedup curves and fitted all-reduce lines.

Everything here comes either from something that happened (a recorded :class:`~dpviz.topics.ground_floor.records.Run`,
a :class:`~dpviz.topics.speedup_model.records.BenchRecord`) or from the cost model with stated alpha, beta, M and
T_compute, and every result says which. The figures in :mod:`dpviz.topics.speedup_model.plots_timeline`,
:mod:`dpviz.topics.speedup_model.plots_speedup` and :mod:`dpviz.topics.measuring.plots_bench` only draw these numbers.

    from dpviz.topics.ground_floor import timing
    runs = {k: record_run(model="mlp", width=256, k=k, b=128 // k, steps=12) for k in (1, 2, 4)}
    rows = timing.machine_timelines(runs, bench)          # s01 from this machine
    points = timing.measured_speedup(runs)                # s02's measured points
    workload = timing.measured_workload(runs)             # ... and the T_compute, M they were measured with
    curves = timing.speedup_curves(np.arange(1, 65), t_compute=1.0, M=100e6)   # s02's modeled curves

Measured times are medians over steps and ranks. ``t_comm`` is what a rank spent inside
``all_reduce``, which includes waiting for the slowest rank to arrive: in a synchronous step that
wait is part of the price of the sync. This module needs numpy only (no matplotlib, no torch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from dpviz.topics.ground_floor import costmodel
from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.topics.ground_floor.links import PRESETS, SPEED_ORDER, Link

MEASURED = "measured"
MODELED = "modeled"
BYTES_PER_PARAM = 4  # float32 gradients


# --- measured step times ------------------------------------------------------------------------


@dataclass(frozen=True)
class StepTimes:
    """One run's typical step, split into compute and sync (seconds)."""

    k: int  # ranks
    t_compute: float  # seconds, one rank's forward + backward on its shard (T_compute / k)
    t_comm: float  # seconds, one rank inside all_reduce, waiting for the others included
    global_batch: int  # examples per step over all ranks
    host: str
    cores: int  # cores the run could use
    describe: str  # the run's one-line provenance

    @property
    def t_step(self) -> float:
        """Seconds per step: compute, then sync."""
        return self.t_compute + self.t_comm

    @property
    def oversubscribed(self) -> bool:
        """True when there were more ranks than cores, so ranks took turns on the CPU."""
        return self.k > self.cores


def measured_step_times(runs, *, warmup: int = 1) -> dict[int, StepTimes]:
    """Median compute and sync time per step of each run, keyed by k.

    ``runs`` is a dict {k: Run} or a list of Runs, each with the all-reduce on. The first
    ``warmup`` steps of each run are left out: they pay for first-call set-up, not for the step.
    """
    runs = _runs_by_k(runs)
    out = {}
    for k, run in runs.items():
        warmup = check_int("warmup", warmup, low=0, high=run.steps - 1)
        if not run.meta.get("all_reduce", True):
            raise ValueError(f"runs must have the all-reduce on to time the sync; the run with k={k} had it off.")
        t_compute = np.asarray(run.t_compute, dtype=float)[warmup:]  # (steps - warmup, k)
        t_comm = np.asarray(run.t_comm, dtype=float)[warmup:]
        out[k] = StepTimes(
            k=k,
            t_compute=float(np.median(t_compute)),
            t_comm=float(np.median(t_comm)) if k > 1 else 0.0,  # one rank: the call returns at once
            global_batch=int(np.sum(run.shard_sizes)),
            host=str(run.meta.get("host", "?")),
            cores=int(run.meta.get("cores", 1)),
            describe=run.describe(),
        )
    return out


@dataclass(frozen=True)
class MeasuredSpeedup:
    """Speedup S = T_step(k = 1) / T_step(k) measured on one machine, one entry per run."""

    k: np.ndarray  # (n,) int, ascending
    speedup: np.ndarray  # (n,)
    t_step: np.ndarray  # (n,) seconds
    oversubscribed: np.ndarray  # (n,) bool: k > cores
    superlinear: np.ndarray  # (n,) bool: S > k, which no sync cost explains (see measured_speedup)
    host: str
    cores: int
    global_batch: int  # the same in every run, so the runs do the same work per step
    describe: str  # provenance of the k = 1 run


def measured_speedup(runs, *, warmup: int = 1) -> MeasuredSpeedup:
    """S measured from real runs that share one global batch; ``runs`` must include k = 1.

    The runs must split the same number of examples per step (``b * k`` constant), otherwise
    they do different work and their step times do not compare.

    The cost model never gives S > k. A measured S above k (by more than 5 %) is flagged
    ``superlinear``: each rank's compute got cheaper than 1/k of the baseline's, from something the
    model leaves out (intra-op threads fighting over busy cores in the k = 1 run, smaller working
    sets fitting in cache). A figure should show such a point and say so.
    """
    times = measured_step_times(runs, warmup=warmup)
    if 1 not in times:
        raise ValueError(f"runs must include a k=1 run, the baseline of the speedup; got k={sorted(times)}.")
    batches = {t.global_batch for t in times.values()}
    if len(batches) > 1:
        raise ValueError(
            "runs must share one global batch (b*k) so each step does the same work; "
            f"got {dict((k, t.global_batch) for k, t in sorted(times.items()))}."
        )
    hosts = {t.host for t in times.values()}
    if len(hosts) > 1:
        raise ValueError(f"runs must come from one machine to compare their times; got hosts {sorted(hosts)}.")
    ks = sorted(times)
    t_step = np.array([times[k].t_step for k in ks])
    base = times[1]
    speedup = base.t_step / t_step
    return MeasuredSpeedup(
        k=np.array(ks, dtype=int),
        speedup=speedup,
        t_step=t_step,
        oversubscribed=np.array([times[k].oversubscribed for k in ks]),
        superlinear=speedup > 1.05 * np.array(ks),
        host=base.host,
        cores=base.cores,
        global_batch=base.global_batch,
        describe=base.describe,
    )


def step_times(run, *, warmup: int = 1) -> StepTimes:
    """One run's median step, split into compute and sync (the time bar of the one-picture summary).

    As :func:`measured_step_times`, except that a run shorter than ``warmup + 1`` steps keeps its last step.
    """
    warmup = check_int("warmup", warmup, low=0)
    return measured_step_times({run.k: run}, warmup=min(warmup, run.steps - 1))[run.k]


def grad_bytes(run) -> int:
    """Bytes each rank all-reduces per step: the run's parameter count times 4 (float32)."""
    return int(np.shape(run.local_grad)[-1]) * BYTES_PER_PARAM


@dataclass(frozen=True)
class Workload:
    """What one training step asks for, in the cost model's terms (everything but the link and k)."""

    t_compute: float  # seconds, one step's forward and backward on one device
    M: float  # bytes each rank all-reduces per step
    source: str  # where the two numbers come from


def measured_workload(runs, *, warmup: int = 1) -> Workload:
    """T_compute and M of real runs: the k = 1 run's median compute per step and the gradient's bytes.

    The speedups :func:`measured_speedup` gives for the same runs sit on the curve the cost model
    draws for this workload (with this machine's fitted alpha and beta), not on one drawn for another.
    """
    times = measured_step_times(runs, warmup=warmup)
    if 1 not in times:
        raise ValueError(f"runs must include a k=1 run, whose step is T_compute; got k={sorted(times)}.")
    return Workload(times[1].t_compute, float(grad_bytes(_runs_by_k(runs)[1])), f"{MEASURED}: {times[1].describe}")


# --- timelines (Step 6, figure s01) -------------------------------------------------------------


@dataclass(frozen=True)
class TimelineRow:
    """One horizontal bar of figure s01: a lavender compute segment, then a coral sync segment."""

    k: int
    t_compute: float  # seconds per rank, T_compute / k
    t_comm: float  # seconds
    source: str  # "measured" or "modeled"
    oversubscribed: bool = False  # measured with more ranks than cores

    @property
    def t_step(self) -> float:
        return self.t_compute + self.t_comm


def timeline_rows(
    ks=(1, 2, 4, 8),
    *,
    t_compute: float | None = None,
    t_comm: float | Callable | None = None,
    alpha: float | None = None,
    beta: float | None = None,
    M: float | None = None,
    formula: str = "ring",
    measured: Mapping | None = None,
) -> list[TimelineRow]:
    """One row per k: measured where ``measured`` has that k, modeled elsewhere.

    The model splits ``t_compute`` (seconds for one step on one device) evenly over k ranks and adds
    a sync time: either ``t_comm`` (a fixed number of seconds, as in the notes' figure, or a function
    of k), or the cost model ``formula`` with ``alpha`` (s), ``beta`` (bytes/s) and ``M`` (bytes).
    At k = 1 there is nobody to sync with, so the sync time is 0 either way.

    ``measured`` maps k to a :class:`StepTimes` or to a pair ``(t_compute_per_rank, t_comm)`` in
    seconds. If ``t_compute`` is None it is taken from ``measured[1]``.
    """
    ks = _ks(ks)
    measured = _measured(measured)
    if t_compute is None:
        if 1 not in measured:
            raise ValueError("t_compute must be given (seconds per step on one device) unless measured has k=1.")
        t_compute = measured[1][0]
    t_compute = check_real("t_compute", t_compute, low=0.0)
    comm = _comm_model(t_comm, alpha, beta, M, formula, need=any(k not in measured for k in ks))

    rows = []
    for k in ks:
        if k in measured:
            compute, sync, over = measured[k]
            rows.append(TimelineRow(k, compute, sync, MEASURED, over))
        else:
            rows.append(TimelineRow(k, t_compute / k, comm(k) if k > 1 else 0.0, MODELED))
    return rows


def machine_timelines(runs, bench=None, *, ks=(1, 2, 4, 8), formula: str = "ring", warmup: int = 1) -> list[TimelineRow]:
    """Figure s01 for this machine: measured rows from ``runs``, the rest modeled from them.

    The modeled rows take T_compute from the k = 1 run, M from the model's gradient size, and
    alpha, beta fitted to ``bench`` (a BenchRecord) with ``formula``. Without a bench record only
    the measured k are returned.
    """
    times = measured_step_times(runs, warmup=warmup)
    run = next(iter(_runs_by_k(runs).values()))
    if bench is None:
        ks = [k for k in _ks(ks) if k in times]
        if not ks:
            raise ValueError(f"ks must include a measured k ({sorted(times)}) when no bench record is given; got {ks}.")
        return timeline_rows(ks, measured=times, t_compute=0.0)  # every row is measured; nothing is modeled
    fit = bench.fit(formula)
    return timeline_rows(
        ks, measured=times, alpha=fit.alpha, beta=fit.beta, M=grad_bytes(run), formula=formula,
        t_compute=times[1].t_compute if 1 in times else None,
    )


# --- speedup curves (figure s02) ----------------------------------------------------------------


@dataclass(frozen=True)
class SpeedupCurve:
    """The modeled speedup over k for one link."""

    name: str
    alpha: float  # seconds
    beta: float  # bytes per second
    source: str  # where alpha and beta come from
    t_comm: np.ndarray  # (n,) seconds at each k
    speedup: np.ndarray  # (n,)


@dataclass(frozen=True)
class SpeedupCurves:
    """Modeled S(k) for several links, under one workload (t_compute, M) and one formula."""

    k: np.ndarray  # (n,) int
    ideal: np.ndarray  # (n,) S = k, sync for free
    curves: dict  # name -> SpeedupCurve, in the order given (fast to slow for the presets)
    t_compute: float  # seconds per step on one device
    M: float  # bytes all-reduced per step
    formula: str  # cost-model formula for T_comm


def speedup_curves(ks, *, t_compute: float, M: float, links=None, formula: str = "ring") -> SpeedupCurves:
    """S = t_compute / (t_compute / k + T_comm(k)) for each link, T_comm from the cost model.

    ``ks`` are integers (e.g. ``np.arange(1, 65)``). ``links`` is a dict {name: Link} or a list of
    Links; None means the three presets of :mod:`dpviz.topics.ground_floor.links`, fast to slow.
    """
    ks = np.asarray(_ks(ks), dtype=int)
    t_compute = check_real("t_compute", t_compute, low=0.0, low_open=True)
    M = check_real("M", M, low=0.0)
    check_choice("formula", formula, costmodel.FORMULAS)
    links = _links(links)
    # every link at once, one row each: the same arithmetic per element as one link at a time, in a fraction of the
    # time (a slider figure works these curves out again on every move)
    alphas = np.array([[link.alpha] for link in links], dtype=float)
    betas = np.array([[link.beta] for link in links], dtype=float)
    comm = np.asarray(costmodel.t_comm(ks, M, alphas, betas, formula=formula), dtype=float)
    s = np.asarray(costmodel.speedup(t_compute, ks, comm), dtype=float)
    curves = {link.name: SpeedupCurve(link.name, link.alpha, link.beta, link.source, comm[i], s[i])
              for i, link in enumerate(links)}
    return SpeedupCurves(ks, ks.astype(float), curves, t_compute, M, formula)


def link_from_fit(fit: costmodel.Fit, *, name: str = "this machine, measured", measured_on: str = "") -> Link:
    """A Link holding alpha, beta fitted to this machine's all-reduce times, to set beside the presets."""
    if not isinstance(fit, costmodel.Fit):
        raise TypeError(f"fit must be a costmodel.Fit (e.g. bench.fit('ring')); got {type(fit).__name__}.")
    source = f"fitted ({fit.formula}) to measured all-reduce times" + (f" on {measured_on}" if measured_on else "")
    return Link(name, alpha=fit.alpha, beta=fit.beta, source=source)


# --- fitted all-reduce lines (the benchmark figure) ---------------------------------------------


@dataclass(frozen=True)
class FitLines:
    """One formula's fit to a bench record, evaluated on a grid of message sizes for each k."""

    formula: str
    fit: costmodel.Fit
    M: np.ndarray  # (points,) bytes, log-spaced over the measured sizes
    seconds: dict  # k -> (points,) modeled seconds
    fitted_ks: tuple = ()  # the k whose times were fitted; lines for other k are extrapolated


def fit_lines(bench, formulas=("notes", "ring"), *, impl: str = "all_reduce", points: int = 60) -> dict[str, FitLines]:
    """Fit each formula to ``bench`` (a BenchRecord) and evaluate it for every measured k."""
    if isinstance(formulas, str):
        formulas = (formulas,)
    for formula in formulas:
        check_choice("formulas", formula, costmodel.FORMULAS)
    points = check_int("points", points, low=2)
    rows = np.asarray(bench.impl) == impl
    if not rows.any():
        raise ValueError(f"impl must be one measured in bench, {sorted(set(np.asarray(bench.impl).tolist()))}; got {impl!r}.")
    sizes = np.asarray(bench.M)[rows]
    grid = np.geomspace(max(sizes.min(), 1), sizes.max(), points)
    ks = sorted(set(np.asarray(bench.k)[rows].tolist()))
    out = {}
    fitted = tuple(k for k in bench.own_core_ks() if k in ks)
    for formula in formulas:
        fit = bench.fit(formula, impl=impl)  # on the k with a core per rank: see BenchRecord.fit
        seconds = {k: np.asarray(costmodel.t_comm(k, grid, fit.alpha, fit.beta, formula=formula)) for k in ks}
        out[formula] = FitLines(formula, fit, grid, seconds, fitted)
    return out


# --- argument checks ----------------------------------------------------------------------------


def _ks(ks) -> list[int]:
    values = np.atleast_1d(np.asarray(ks))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"ks must be a non-empty list of device counts; got {ks!r}.")
    if values.dtype.kind not in "iu":
        raise TypeError(f"ks must hold integers >= 1 (use np.arange, not linspace); got dtype {values.dtype}.")
    too_small = np.flatnonzero(values < 1)
    if too_small.size:  # the first one, as a check of each in turn would name it
        check_int("ks", int(values[too_small[0]]), low=1)
    out = values.tolist()  # whole numbers, each at least 1; a slider's move asks this for every k it draws
    if np.unique(values).size < values.size:
        raise ValueError(f"ks must not repeat a value; got {out}.")
    return out


def _runs_by_k(runs) -> dict:
    if isinstance(runs, Mapping):
        items = list(runs.items())
        for key, run in items:
            if not hasattr(run, "t_comm"):
                raise TypeError(f"runs must map k to a recorded Run; got {type(run).__name__} at k={key!r}.")
            if key != run.k:
                raise ValueError(f"runs must be keyed by each run's k; the run under key {key!r} has k={run.k}.")
        by_k = dict(items)
    else:
        runs = list(runs) if runs is not None else []
        for run in runs:
            if not hasattr(run, "t_comm"):
                raise TypeError(f"runs must be a dict or list of recorded Runs; got a {type(run).__name__}.")
        by_k = {run.k: run for run in runs}
        if len(by_k) < len(runs):
            raise ValueError(f"runs must hold at most one run per k; got k={[r.k for r in runs]}.")
    if not by_k:
        raise ValueError("runs must hold at least one recorded Run.")
    return dict(sorted(by_k.items()))


def _measured(measured) -> dict:
    """{k: (t_compute_per_rank, t_comm, oversubscribed)} from StepTimes or plain pairs."""
    if measured is None:
        return {}
    if not isinstance(measured, Mapping):
        raise TypeError(f"measured must be a dict {{k: StepTimes or (t_compute, t_comm)}}; got {type(measured).__name__}.")
    out = {}
    for k, value in measured.items():
        k = check_int("measured keys (k)", k, low=1)
        if isinstance(value, StepTimes):
            out[k] = (value.t_compute, value.t_comm, value.oversubscribed)
            continue
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            raise TypeError(f"measured[{k}] must be StepTimes or a pair (t_compute, t_comm) in seconds; got {value!r}.")
        compute = check_real(f"measured[{k}] t_compute", value[0], low=0.0)
        comm = check_real(f"measured[{k}] t_comm", value[1], low=0.0)
        out[k] = (compute, comm, False)
    return out


def _comm_model(t_comm, alpha, beta, M, formula, *, need: bool):
    """A function k -> modeled sync seconds, from a fixed t_comm, a function, or alpha/beta/M."""
    if t_comm is not None:
        if alpha is not None or beta is not None or M is not None:
            raise ValueError("t_comm must not be given together with alpha, beta, M: pick one way to model the sync.")
        if callable(t_comm):
            return lambda k: check_real("t_comm(k)", t_comm(k), low=0.0)
        fixed = check_real("t_comm", t_comm, low=0.0)
        return lambda k: fixed
    check_choice("formula", formula, costmodel.FORMULAS)
    if alpha is None or beta is None or M is None:
        if need:
            raise ValueError("t_comm, or all of alpha, beta and M, must be given to model the rows nobody measured.")
        return lambda k: 0.0
    check_real("alpha", alpha, low=0.0)
    check_real("beta", beta, low=0.0, low_open=True)
    check_real("M", M, low=0.0)
    return lambda k: float(costmodel.t_comm(k, M, alpha, beta, formula=formula))


def _links(links) -> list[Link]:
    if links is None:
        return [PRESETS[name] for name in SPEED_ORDER]
    items = list(links.values()) if isinstance(links, Mapping) else list(links)
    if not items or not all(isinstance(link, Link) for link in items):
        raise TypeError("links must be a non-empty dict or list of dpviz.topics.ground_floor.links.Link.")
    return items


__all__ = [
    "MEASURED", "MODELED", "StepTimes", "measured_step_times", "step_times", "MeasuredSpeedup", "measured_speedup",
    "grad_bytes", "Workload", "measured_workload",
    "TimelineRow", "timeline_rows", "machine_timelines", "SpeedupCurve", "SpeedupCurves", "speedup_curves",
    "link_from_fit", "FitLines", "fit_lines",
]
