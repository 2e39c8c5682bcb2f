"""Every published figure, one ``figure_<name>`` function each, drawn from records and theory.

The chapters and ``python -m dpviz figures`` call the same functions, so no layout is
written twice::

    from dpviz.records.figure_set import load_inputs
    from dpviz.figures import figure_step5_replicas
    inputs = load_inputs()                                   # the records behind figures/
    fig = figure_step5_replicas(inputs.main, inputs.alone)

:mod:`dpviz.regenerate` (what ``./run`` does) records fresh runs and calls :func:`draw_all`.
No torch here: figures are drawn from records and theory only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from matplotlib.figure import Figure

from dpviz.data import line_data
from dpviz.plots.bench import plot_allreduce_times
from dpviz.plots.speedup import plot_speedup
from dpviz.plots.step1 import plot_loss_along
from dpviz.plots.step2 import plot_example_grads
from dpviz.plots.step3 import plot_big_average, plot_group_averages
from dpviz.plots.step4 import plot_devices
from dpviz.plots.step5 import plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule
from dpviz.plots.style import stack_notes as _stack_notes
from dpviz.plots.summary import plot_summary
from dpviz.plots.timeline import plot_timelines
from dpviz.records import BenchRecord, Run, Schedule
from dpviz.records.figure_set import Inputs
from dpviz.theory import landscape, timing

def _figure(figsize, ncols=1, **kwargs):
    fig = Figure(figsize=figsize)
    axes = fig.subplots(1, ncols, **kwargs)
    return fig, axes


def figure_step1_loss(eta: float = 0.1) -> Figure:
    """Step 1: the loss along one knob of the line model on all 512 points, the red dot, the arrow and a few steps."""
    x, y = line_data()
    fig, ax = _figure((7.5, 4.8))
    plot_loss_along(landscape.step1_data(x, y, eta=eta), ax=ax)
    return fig


def figure_step2_gradients(run: Run, biased: Run) -> Figure:
    """Step 2: per-example gradients and their mean, a random grab beside a biased one, each beside the whole data set's gradient."""
    x, y = line_data()
    fig, (a, b) = _figure((12, 5.2), 2)
    plot_example_grads(run, ax=a, reference=landscape.full_grad(x, y, run.params[0, 0]))
    plot_example_grads(biased, ax=b, reference=landscape.full_grad(x, y, biased.params[0, 0]))
    _stack_notes((a, b))
    return fig


def figure_step3_average_of_averages(run: Run) -> Figure:
    """Step 3: all b·k arrows averaged at once beside the mean of the k group means."""
    fig, (a, b) = _figure((12, 5.2), 2)
    plot_big_average(run, ax=a)
    plot_group_averages(run, ax=b)
    _stack_notes((a, b))
    return fig


def figure_step4_devices(run: Run) -> Figure:
    """Step 4: k device boxes, one θ, different slices, different arrows."""
    fig, ax = _figure((11, 5))
    plot_devices(run, ax=ax)
    return fig


def figure_step5_all_reduce(run: Run) -> Figure:
    """Step 5: the k arrows funnelling into the all-reduce and the one mean coming back."""
    fig, ax = _figure((11, 6))
    plot_all_reduce(run, ax=ax)
    return fig


def figure_step5_replicas(run: Run, alone: Run) -> Figure:
    """Step 5: every replica's parameters with the all-reduce, beside the same run without it."""
    fig, (a, b) = _figure((12, 4.8), 2)
    plot_replica_params(run, ax=a)
    plot_replica_params(alone, ax=b)
    _stack_notes((a, b))
    return fig


def figure_step5_ring_vs_parameter_server(ring: Schedule, server: Schedule) -> Figure:
    """Step 5: the ring's transfers chunk by chunk, beside the parameter server's star."""
    fig, (a, b) = _figure((16, 6), 2, width_ratios=(1.5, 1))
    plot_ring_schedule(ring, ax=a)
    plot_parameter_server(server, ax=b)
    return fig


def figure_s01_sync_timelines(mlp: dict, bench: BenchRecord) -> Figure:
    """s01: compute and sync per step for each k, measured, beside the model fitted to this machine."""
    fig, ax = _figure((9, 4.6))
    plot_timelines(timing.machine_timelines(mlp, bench), ax=ax)
    return fig


def figure_s02_speedup(mlp: dict) -> Figure:
    """s02: speedup against k, modeled for three links, with this machine's measured points."""
    fig, ax = _figure((8, 5.5))
    t_compute = timing.measured_step_times(mlp)[1].t_compute
    curves = timing.speedup_curves(np.arange(1, 65), t_compute=t_compute, m=timing.grad_bytes(mlp[1]))
    plot_speedup(curves, measured=timing.measured_speedup(mlp), ax=ax)
    return fig


def figure_allreduce_time_vs_size(bench: BenchRecord) -> Figure:
    """Measured all-reduce time against M, with the notes' formula and the ring fitted."""
    fig, ax = _figure((8.5, 5.5))
    plot_allreduce_times(bench, ax=ax)
    return fig


def figure_summary(run: Run) -> Figure:
    """The whole story in one picture."""
    fig, ax = _figure((10, 10))
    plot_summary(run, timing.step_times(run), ax=ax)
    return fig


def draw_all(inputs: Inputs) -> dict:
    """Each published figure as (Figure, the records it came from)."""
    mlp = [*inputs.mlp.values()]
    return {
        "step1_loss": (figure_step1_loss(), ["line model in one process, all 512 points (numpy)"]),
        "step2_gradients": (figure_step2_gradients(inputs.main, inputs.biased), [inputs.main, inputs.biased]),
        "step3_average_of_averages": (figure_step3_average_of_averages(inputs.main), [inputs.main]),
        "step4_devices": (figure_step4_devices(inputs.main), [inputs.main]),
        "step5_all_reduce": (figure_step5_all_reduce(inputs.main), [inputs.main]),
        "step5_replicas": (figure_step5_replicas(inputs.main, inputs.alone), [inputs.main, inputs.alone]),
        "step5_ring_vs_parameter_server": (figure_step5_ring_vs_parameter_server(inputs.ring, inputs.server),
                                           [inputs.ring, inputs.server]),
        "s01_sync_timelines": (figure_s01_sync_timelines(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "s02_speedup": (figure_s02_speedup(inputs.mlp), mlp),
        "allreduce_time_vs_size": (figure_allreduce_time_vs_size(inputs.bench), [inputs.bench]),
        "summary": (figure_summary(inputs.main), [inputs.main]),
    }


@dataclass(frozen=True)
class FigureGroup:
    """The figures of one chapter past Step 6, and the records behind them.

    ``python -m dpviz figures`` calls ``record`` (a "module:function" of dpviz.runs, imported only
    when recording; it takes ``quick`` and ``progress`` and returns ``{stem: record}``), saves each
    record as ``figures/records/<stem>``, and draws with ``draw({stem: record})``, which returns
    ``{figure name: (Figure, [records it came from])}``. ``verify`` (optional) returns a line of the
    claims it asserted on the records, printed after drawing.
    """

    name: str
    stems: tuple
    record: str
    draw: Callable[[dict], dict]
    verify: Callable[[dict], str] | None = None


GROUPS: list[FigureGroup] = []  # one entry per chapter group past Step 6, appended below its figure functions


# --- chapter 10: gradient accumulation -----------------------------------------------------------

from dpviz.plots.accumulation import (  # noqa: E402  (kept with the chapter's figures it serves)
    plot_activation_memory, plot_comm_per_update, plot_update_error, plot_update_rows,
)
from dpviz.theory import accumulation as accumulation_theory  # noqa: E402

from dpviz.records.accumulation import (  # noqa: E402
    FIGURE_MEMORY_BATCH, FIGURE_MEMORY_M, FIGURE_MICRO, FIGURE_STEMS as ACCUMULATION_STEMS, FIGURE_SYNC_M, figure_stem,
)


def _accumulation_footer(fig, runs, *, timed: bool = True) -> None:
    """The runs' shared setting, under the figure: threads per rank and what the cores allow, from the records."""
    first = runs[0]
    words = f"Measured: {first.setting()}."
    if timed:
        threads = {r.meta["threads_per_rank"] for r in runs}
        cores = first.meta["cores"]
        words += (f" Every rank of every run had {', '.join(map(str, sorted(threads)))} intra-op thread(s), so the "
                  f"times compare; with {cores} cores at most {cores} ranks really run at once. "
                  f"Times: medians of {first.steps - 1} updates after the first.")
    fig.text(0.01, 0.005, words, fontsize=9, color="#556476", ha="left", va="bottom", wrap=True)


def _times_as_long(a, b) -> str:
    ratio = a.t_update / b.t_update
    return f"{ratio:.1f}× as long as" if ratio >= 1.05 else ("about as long as" if ratio > 0.95 else f"{1 / ratio:.1f}× faster than")


def figure_accumulation_timelines(records: dict) -> Figure:
    """Chapter 10: the same update three ways (one process accumulating m, k = m ranks, one big batch), m = 2 and 4.

    ``records`` are the chapter's figure records by stem (``dpviz.records.accumulation.figure_records()``).
    """
    fig = Figure(figsize=(13, 10.5))
    axes = fig.subplots(2, 1)
    fig.subplots_adjust(left=0.03, right=0.98, top=0.9, bottom=0.14, hspace=0.55)
    timelines = _accumulation_inputs(records)["timelines"]
    panels = (timelines[:3], timelines[3:])
    rows_by_panel = [accumulation_theory.three_ways(*runs) for runs in panels]
    xmax = max(row.t_update for rows in rows_by_panel for row in rows) * 1.5
    for ax, (one, ranks, big), rows in zip(axes, panels, rows_by_panel):
        title = (f"{big.meta['global_batch']} examples per update, m = k = {ranks.k}: one process accumulating took "
                 f"{_times_as_long(rows[0], rows[1])} {ranks.k} ranks")
        plot_update_rows(rows, ax=ax, title=title, xmax=xmax, legend=ax is axes[-1], fontsize=13)
    fig.suptitle("Accumulating m micro-batches gives the big-batch update, not the speed of m ranks",
                 fontsize=16, x=0.03, ha="left")
    _accumulation_footer(fig, [r for runs in panels for r in runs])
    return fig


def figure_accumulation_sync(records: dict) -> Figure:
    """Chapter 10: k ranks all-reducing after every micro-batch against once per update: timelines and time against m."""
    inputs = _accumulation_inputs(records)
    every = {r.m: r for r in inputs["every"]}
    accumulate = {r.m: r for r in inputs["accumulate"]}
    m = max(every)
    fig = Figure(figsize=(15, 6.4))
    left, right = fig.subplots(1, 2, width_ratios=(1.35, 1))
    fig.subplots_adjust(left=0.03, right=0.98, top=0.83, bottom=0.3, wspace=0.16)
    rows = accumulation_theory.sync_patterns(every[m], accumulate[m])
    saved = rows[0].calls - rows[1].calls
    plot_update_rows(rows, ax=left, fontsize=13,
                     title=f"k = {every[m].k} ranks, m = {m} micro-batches of {every[m].meta['micro_batch']}: "
                           f"{rows[0].calls} all-reduces or {rows[1].calls}")
    plot_comm_per_update(accumulation_theory.comm_curves([*every.values(), *accumulate.values()]), ax=right, fontsize=13)
    right.set_title(f"Accumulating first saves {saved} of {rows[0].calls} all-reduces at m = {m}", fontsize=14, loc="left")
    fig.suptitle(f"The same update either way; accumulating first sends {rows[1].sent_bytes / 2**20:.2f} MiB "
                 f"per rank instead of {rows[0].sent_bytes / 2**20:.2f} MiB", fontsize=16, x=0.03, ha="left")
    _accumulation_footer(fig, [*every.values(), *accumulate.values()])
    return fig


def figure_accumulation_memory(records: dict) -> Figure:
    """Chapter 10: bytes held for backward against micro-batch size, and the update's error to the big batch."""
    one_process_runs = _accumulation_inputs(records)["memory"]
    points = accumulation_theory.memory_points(one_process_runs)
    fig = Figure(figsize=(15, 6.2))
    left, right = fig.subplots(1, 2, width_ratios=(1.2, 1))
    fig.subplots_adjust(left=0.07, right=0.98, top=0.84, bottom=0.25, wspace=0.25)
    plot_activation_memory(points, ax=left, fontsize=13)
    shrink = points.activation_bytes[0] / points.activation_bytes[-1]
    left.set_title(f"Memory for backward falls {shrink:.0f}× from m = {points.m[0]} to m = {points.m[-1]}",
                   fontsize=14, loc="left")
    plot_update_error(points, ax=right, fontsize=13)
    right.set_title("while the update stays the big-batch gradient, to rounding", fontsize=14, loc="left")
    fig.suptitle(f"One process, {points.global_batch} examples per update, cut into m micro-batches",
                 fontsize=16, x=0.02, ha="left")
    _accumulation_footer(fig, list(one_process_runs), timed=False)
    return fig


def _accumulation_inputs(records: dict) -> dict:
    def run(k, m, b=None, sync="accumulate"):
        return records[figure_stem(k, m, b=b, sync=sync)]

    big = 4 * FIGURE_MICRO
    return dict(
        timelines=(run(1, 2, FIGURE_MEMORY_BATCH), run(2, 1), run(1, 1, FIGURE_MEMORY_BATCH),
                   run(1, 4, big), run(4, 1), run(1, 1, big)),
        every=[run(2, m, sync="every") for m in FIGURE_SYNC_M],
        accumulate=[run(2, m) for m in FIGURE_SYNC_M],
        memory=[run(1, m, FIGURE_MEMORY_BATCH) for m in FIGURE_MEMORY_M],
    )


def draw_accumulation(records: dict) -> dict:
    """Chapter 10's figures from the records of :data:`ACCUMULATION_STEMS`, each with the runs it came from."""
    inputs = _accumulation_inputs(records)
    return {
        "accumulation_timelines": (figure_accumulation_timelines(records), list(inputs["timelines"])),
        "accumulation_sync": (figure_accumulation_sync(records), inputs["every"] + inputs["accumulate"]),
        "accumulation_memory": (figure_accumulation_memory(records), inputs["memory"]),
    }


def verify_accumulation(records: dict) -> str:
    """The notes' claims on accumulation, asserted on the figure records; one line for the terminal."""
    for record in records.values():
        record.check()
    inputs = _accumulation_inputs(records)
    points = accumulation_theory.memory_points(inputs["memory"])
    # every micro-batch keeps the same bytes per example: memory is proportional to the micro-batch
    per_example = points.activation_bytes / points.micro_batch
    assert (per_example == per_example[0]).all(), "bytes held for backward are not proportional to the micro-batch"
    assert (points.rel_err[points.m == 1] == 0).all(), "with m = 1 the update is not the plain one-batch gradient"
    for every, accumulate in zip(inputs["every"], inputs["accumulate"]):
        assert every.calls_per_update == every.m and accumulate.calls_per_update == 1
    return (f"accumulation: {len(records)} runs matched their big-batch gradients within 1e-5 (m = 1: bit for bit); "
            f"bytes held for backward fell {points.activation_bytes[0] // points.activation_bytes[-1]}× from "
            f"m = {points.m[0]} to m = {points.m[-1]}; all-reduces per update: m with 'every', 1 when accumulating.")


GROUPS.append(FigureGroup(
    name="accumulation",
    stems=ACCUMULATION_STEMS,
    record="dpviz.runs.accumulation:record_figure_records",
    draw=draw_accumulation,
    verify=verify_accumulation,
))
