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
from dpviz.plots.alpha_beta import plot_fitted_times, plot_residuals
from dpviz.plots.bench import plot_allreduce_times
from dpviz.plots.speedup import GIDS as speedup_gids
from dpviz.plots.speedup import plot_speedup
from dpviz.plots.step1 import plot_loss_along
from dpviz.plots.step2 import plot_example_grads
from dpviz.plots.step3 import plot_big_average, plot_group_averages
from dpviz.plots.step4 import plot_devices
from dpviz.plots.step5 import plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule
from dpviz.plots.style import SOURCE_NOTE_OFFSET
from dpviz.plots.style import stack_notes as _stack_notes
from dpviz.plots.summary import plot_summary
from dpviz.plots.timeline import plot_timelines
from dpviz.records import BenchRecord, Run, Schedule
from dpviz.records.figure_set import Inputs
from dpviz.records.published import published_allreduce
from dpviz.theory import alpha_beta, cost_claims, landscape, timing
from dpviz.theory.links import SPEED_ORDER

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
    """s01: compute and sync per step for each k, measured with the same threads per rank, beside the model fitted here.

    The title says compute shrinks as 1/k; that is checked on the measured rows with a core per rank, and
    where a busy machine kept it from happening the title says so instead. It also says the sync does not
    shrink; that is checked on every row drawn, and where a modeled row's sync (the exchange alone, priced
    with α and β of the fastest all-reduce calls) comes out below a measured one (which also waited), the
    title says that instead.
    """
    threads = cost_claims.threads_per_rank(mlp)  # k = 1 with other threads than k = 2 is not its baseline
    times = timing.measured_step_times(mlp)
    run = mlp[min(mlp)]
    meta, cores = run.meta, int(run.meta["cores"])
    title = None  # the plot's own: compute shrinks as 1/k, the sync does not
    try:
        cost_claims.compute_shrinks(times, cores=cores)
    except AssertionError:
        title = ("One step on k devices, measured while other work took the cores: compute per rank did not\n"
                 "shrink as 1/k in these runs (record them again on a quiet machine: python -m dpviz figures)")
    rows = timing.machine_timelines(mlp, bench)
    if title is None:
        try:
            cost_claims.sync_does_not_shrink(rows)
        except AssertionError:
            title = ("One step on k devices: compute shrinks as 1/k. The measured sync includes waiting\n"
                     "(for the other ranks, and to be woken up); the modeled one (hatched) is the exchange alone")
    fit = bench.fit("ring")
    modeled = [row.k for row in rows if row.source == timing.MODELED]
    ks = ", ".join(map(str, sorted(mlp)))
    note = (f"{timing.MEASURED}: MLP {meta['depth']}×{meta['width']} ({meta['n_params']:,} parameters), global batch "
            f"{times[min(times)].global_batch} split over k = {ks} ranks, {threads} intra-op thread per rank at every k, "
            f"median of steps 2-{run.steps} over ranks; {meta['backend']} on {meta['host']}, {cores} cores, "
            f"{str(meta['date'])[:10]}")
    if modeled:
        note += (f"\n{timing.MODELED} (hatched): k = {', '.join(map(str, modeled))}, T_compute from k = 1, "
                 f"M = {timing.grad_bytes(run):,} bytes, ring with α = {fit.alpha * 1e6:.3g} µs, "
                 f"β = {fit.beta / 1e9:.3g} GB/s fitted to this machine's all-reduce times (the fastest call at each size)")
    fig, ax = _figure((9.5, 4.8))
    plot_timelines(rows, ax=ax, title=title, note=note)
    return fig


def figure_s02_speedup(mlp: dict, bench: BenchRecord) -> Figure:
    """s02: speedup against k for three links and for this machine's fitted link, all for the measured runs' workload.

    Every curve uses the runs' own T_compute (their k = 1 step) and M (their gradient), so the measured
    points sit on the dash-dotted curve of this machine's fitted α, β, not on another workload's curve.
    The title's claim (a slower link peels away from S = k sooner) is asserted on the curves drawn.
    """
    cost_claims.threads_per_rank(mlp)
    ks = np.arange(1, 65)
    workload = timing.measured_workload(mlp)
    curves = timing.speedup_curves(ks, t_compute=workload.t_compute, m=workload.m)
    here = timing.link_from_fit(bench.fit("ring"), name="this machine, fitted",
                                where=f"{bench.meta.get('host')}, {bench.meta.get('cores')} cores")
    own = timing.speedup_curves(ks, t_compute=workload.t_compute, m=workload.m, links=[here])
    fig, ax = _figure((8.5, 6))
    plot_speedup(curves, measured=timing.measured_speedup(mlp), measured_model=own, ax=ax)
    drawn = {line.get_gid().split(":", 1)[1]: line for line in ax.lines
             if (line.get_gid() or "").startswith(speedup_gids["link"] + ":")}
    cost_claims.slower_peels_sooner(drawn[SPEED_ORDER[0]].get_xdata(),
                                    {name: drawn[name].get_ydata() for name in SPEED_ORDER})
    return fig


def figure_allreduce_time_vs_size(bench: BenchRecord, published=None) -> Figure:
    """Measured all-reduce time against M with the notes' formula and the ring fitted, and the ring's residuals.

    With ``published`` (a PublishedAllReduce) a second column shows real GPU systems measured by others,
    fitted the same way, each labelled with who measured it. Under each fit, the residual panel and the
    trust verdict of :mod:`dpviz.theory.alpha_beta` (times rise with M; β only where the largest message
    is bandwidth-bound).
    """
    ncols = 1 if published is None else 2
    fig = Figure(figsize=(7.5 * ncols + 1.5 * (ncols - 1), 8.4))
    axes = fig.subplots(2, ncols, squeeze=False, sharex="col", height_ratios=(3, 1.4),
                        gridspec_kw=dict(hspace=0.06, wspace=0.3))
    top, bottom = axes[0, 0], axes[1, 0]
    plot_allreduce_times(bench, timing.fit_lines(bench), ax=top)
    note = [t for t in top.texts if getattr(t, "xyann", None) == SOURCE_NOTE_OFFSET]
    words = note[0].get_text() if note else ""
    for t in note:
        t.remove()
    top.set_xlabel("")
    top.set_title("This machine: all-reduce time against M, with fitted α-β models", fontsize=12, loc="left")
    mine = alpha_beta.bench_fit(bench, "ring")
    plot_residuals([mine], ax=bottom, by_k=True,
                   note=f"residuals of the ring fit (k = {', '.join(map(str, bench.own_core_ks()))} fitted)\n{words}")
    if published is not None:
        fits = alpha_beta.published_fits(published, "ring")
        plot_fitted_times(fits.values(), ax=axes[0, 1])
        axes[0, 1].set_xlabel("")
        axes[0, 1].set_title("Real GPU systems, measured by others (not here), the same ring fit", fontsize=12,
                             loc="left")
        sources = [f"{item.name}: {item.source}" for item in fits.values()]
        plot_residuals(fits.values(), ax=axes[1, 1],
                       note="residuals of each system's ring fit; nccl-tests all_reduce_perf tables, out-of-place, "
                            f"read {published.meta['date_read']}:\n" + "\n".join(sources))
    return fig


def figure_summary(run: Run) -> Figure:
    """The whole story in one picture."""
    fig, ax = _figure((10, 10))
    plot_summary(run, timing.step_times(run), ax=ax)
    return fig


def draw_all(inputs: Inputs) -> dict:
    """Each published figure as (Figure, the records it came from)."""
    mlp = [*inputs.mlp.values()]
    published = published_allreduce()  # shipped: real GPU systems measured by others, beside this machine
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
        "s02_speedup": (figure_s02_speedup(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "allreduce_time_vs_size": (figure_allreduce_time_vs_size(inputs.bench, published),
                                   [inputs.bench, published.describe()]),
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


# --- chapter 12: splitting the model (pipeline, tensor parallelism, sharded optimizer state) ------

from dpviz.plots.pipeline import GanttBars, plot_bubble, plot_gantt  # noqa: E402
from dpviz.plots.tensor_parallel import plot_exchange_bytes, plot_tensor_split  # noqa: E402
from dpviz.plots.zero import plot_memory, plot_zero_params  # noqa: E402
from dpviz.plots.style import SLATE  # noqa: E402
from dpviz.records.pipeline import idle_points  # noqa: E402
from dpviz.theory.costmodel import bandwidth_fraction  # noqa: E402
from dpviz.theory import memory as memory_theory  # noqa: E402
from dpviz.theory import pipeline as pipeline_theory  # noqa: E402
from dpviz.theory import tensor_parallel as tensor_theory  # noqa: E402

SPLITTING_PIPELINES = tuple((p, m, "gpipe") for p in (2, 4) for m in (1, 2, 4, 8)) + ((2, 4, "1f1b"),)
SPLITTING_STEMS = tuple(f"pipeline_p{p}_m{m}_{s}" for p, m, s in SPLITTING_PIPELINES) + ("tensor_split_k2", "zero_k4")


def _footer(fig, records, y: float = 0.005) -> None:
    """Which runs a figure was drawn from, one line each, from the records themselves."""
    lines = [f"Measured: {r.describe()}" for r in records]
    fig.text(0.01, y, "\n".join(lines), fontsize=9, color=SLATE, ha="left", va="bottom")


def figure_pipeline_gantt(gpipe, one_f_one_b, bubble_runs) -> Figure:
    """Chapter 12: one pipelined step as measured Gantt charts (both schedules), and the idle share against m."""
    fig = Figure(figsize=(17, 10.5))
    axes = fig.subplot_mosaic([["gpipe", "bubble"], ["1f1b", "bubble"]], width_ratios=(1.55, 1))
    fig.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.2, hspace=0.55, wspace=0.2)
    xmax = max(r.span() for r in (gpipe, one_f_one_b)) * 1.03
    for name, run in (("gpipe", gpipe), ("1f1b", one_f_one_b)):
        plot_gantt(run, ax=axes[name], xmax=xmax, note="", legend=False, fontsize=13)
    GanttBars.legend(axes["1f1b"], 13, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
    runs = list(bubble_runs)
    ps = sorted({r.p for r in runs})
    over = [r for r in runs if r.oversubscribed]
    plot_bubble(pipeline_theory.bubble_curves(ps, 16), idle_points(runs), ax=axes["bubble"], fontsize=13,
                title="Idle share of a step against m" + (
                    f":\nhollow points had {over[0].p} stages on {over[0].meta['cores']} cores,\n"
                    "so their stages also waited for a core" if over else ""))
    idle = {r.schedule: float(r.idle_fraction().mean()) for r in (gpipe, one_f_one_b)}
    fig.suptitle(
        f"A pipeline of p={gpipe.p} stages, m={gpipe.m} micro-batches: measured idle share {idle['gpipe']:.2f} "
        f"(all F, then all B) and {idle['1f1b']:.2f} (1F1B), modeled (p−1)/(m+p−1) = {gpipe.bubble():.2f}",
        fontsize=16, x=0.01, ha="left")
    _footer(fig, [gpipe, one_f_one_b])
    shown = {(r.p, r.m, r.schedule) for r in (gpipe, one_f_one_b)}
    others = sorted({(r.p, r.m, r.schedule) for r in runs} - shown)
    if others:
        fig.text(0.01, 0.045, "Idle-share points also from: " + ", ".join(f"p={p}, m={m} ({s})" for p, m, s in others)
                 + "; the same model and machine.", fontsize=9, color=SLATE, ha="left", va="bottom")
    return fig


def figure_tensor_parallel(split) -> Figure:
    """Chapter 12: one linear layer split by columns and by rows over k ranks, and the bytes against data parallelism."""
    fig = Figure(figsize=(17, 10.5))
    axes = fig.subplot_mosaic([["column", "bytes"], ["row", "bytes"]], width_ratios=(1.3, 1))
    fig.subplots_adjust(left=0.02, right=0.98, top=0.88, bottom=0.1, hspace=0.3, wspace=0.15)
    plot_tensor_split(split, "column", ax=axes["column"], fontsize=13)
    plot_tensor_split(split, "row", ax=axes["row"], fontsize=13)
    m = split.meta
    batch = 2 ** np.arange(0, 13)
    per_step = {s: np.array([sum(tensor_theory.exchange_bytes(int(b), m["d_in"], m["d_out"], m["k"], s).values())
                             for b in batch]) for s in tensor_theory.SPLITS}
    dp = tensor_theory.data_parallel_bytes(m["n_params"], m["k"])
    curves = {f"tensor parallel, {s} split": (batch, per_step[s]) for s in tensor_theory.SPLITS}
    curves["data parallelism, the same layer"] = (batch, np.full(len(batch), dp))
    measured = {f"tensor parallel, {s} split": (m["batch"], int(split.bytes_sent[i].sum(axis=0).max()))
                for i, s in enumerate(tensor_theory.SPLITS)}
    plot_exchange_bytes(curves, measured, ax=axes["bytes"], fontsize=13)
    fig.suptitle(f"Tensor parallelism: a {m['d_in']}→{m['d_out']} layer over k={m['k']} ranks, "
                 f"equal to the unsplit layer to {max(split.rel_errs().values()):.0e}", fontsize=16, x=0.01, ha="left")
    _footer(fig, [split])
    return fig


def figure_zero_memory(zero) -> Figure:
    """Chapter 12: bytes per rank with and without sharded Adam state, and the parameters of both trainings."""
    fig = Figure(figsize=(17, 7.5))
    left, right = fig.subplots(1, 2, width_ratios=(1.5, 1))
    fig.subplots_adjust(left=0.06, right=0.97, top=0.8, bottom=0.27, wspace=0.22)
    modeled = {f"ZeRO-{s}": memory_theory.bytes_per_rank(zero.n_params, zero.k, zero_stage=s) for s in (2, 3)}
    plot_memory(zero, modeled=modeled, ax=left, fontsize=13)
    plot_zero_params(zero, ax=right, fontsize=13)
    rs = int(zero.rs_bytes.max())
    fig.suptitle(f"Sharding Adam's state over k={zero.k} ranks (ZeRO-1): 1/{zero.k} of the state on each rank, "
                 f"the same parameters,\nand a reduce-scatter that sends {rs:,} B per rank, (k−1)/k · M for a "
                 f"gradient of M = {zero.message_bytes:,} B", fontsize=16, x=0.01, ha="left")
    _footer(fig, [zero])
    return fig


def draw_splitting(records: dict) -> dict:
    """Chapter 12's figures from the records of :data:`SPLITTING_STEMS`, each with the runs it came from."""
    pipes = {key: records[f"pipeline_p{key[0]}_m{key[1]}_{key[2]}"] for key in SPLITTING_PIPELINES}
    gpipe, f1b = pipes[(2, 4, "gpipe")], pipes[(2, 4, "1f1b")]
    curve_runs = [r for key, r in pipes.items() if key[2] == "gpipe"]
    split, zero = records["tensor_split_k2"], records["zero_k4"]
    return {
        "pipeline_gantt": (figure_pipeline_gantt(gpipe, f1b, curve_runs), list(pipes.values())),
        "tensor_parallel_split": (figure_tensor_parallel(split), [split]),
        "zero_memory": (figure_zero_memory(zero), [zero]),
    }


def verify_splitting(records: dict) -> str:
    """Chapter 12's claims, asserted on the figure records; one line for the terminal."""
    pipes = [r for name, r in records.items() if name.startswith("pipeline")]
    for run in pipes:
        run.check()
    split, zero = records["tensor_split_k2"], records["zero_k4"]
    assert (zero.rs_bytes == bandwidth_fraction(zero.k) * zero.message_bytes).all(), \
        "the reduce-scatter did not send (k−1)/k · M per rank"
    return (f"splitting: {len(pipes)} pipelined steps equal the unsplit model's outputs and gradients to rounding; "
            f"{split.check()} {zero.check()}")


GROUPS.append(FigureGroup(
    name="splitting",
    stems=SPLITTING_STEMS,
    record="dpviz.runs.splitting:record_figure_records",
    draw=draw_splitting,
    verify=verify_splitting,
))


# --- chapter 09: a bigger batch wants a bigger step ------------------------------------------------

from dpviz.plots.lr import (  # noqa: E402  (kept with the chapter's figures it serves)
    K1_COLOUR, WARMUP_COLOURS, plot_loss_curves, plot_paths, plot_rule_curves, plot_step_gaps, plot_twin_distance,
)
from dpviz.records.lr_grid import LrGrid  # noqa: E402
from dpviz.theory import lr_rules  # noqa: E402

LR_STEMS = ("lr_line", "lr_mlp")  # the figure records: one grid per model (dpviz.runs.lr_sweep.FIGURE_STEMS)


def _lr_footer(fig, *grids) -> None:
    """Which runs made the figure, one line per grid, from the records."""
    fig.text(0.01, 0.005, "\n".join(f"Runs: {grid.describe()}" for grid in grids), fontsize=9, color="#556476",
             ha="left", va="bottom")


def figure_lr_loss_curves(line: LrGrid, mlp: LrGrid, *, k: int = 4) -> Figure:
    """Chapter 09: k = 1 at η beside k ranks at ×1, ×√k and ×k, against examples seen and against steps, both models."""
    fig = Figure(figsize=(14, 10.4))
    axes = fig.subplots(2, 2)
    fig.subplots_adjust(left=0.07, right=0.985, top=0.88, bottom=0.12, hspace=0.38, wspace=0.2)
    for row, grid in enumerate((line, mlp)):
        for col, against in enumerate(("examples", "steps")):
            plot_rule_curves(grid, k=k, against=against, ax=axes[row, col], fontsize=13, note=False)
    words = [f"{grid.model_short}: ×√k {grid.examples_ratio(k=k, rule='sqrt'):.2g}×, ×1 {grid.examples_ratio(k=k, rule='x1'):.2g}×"
             for grid in (line, mlp)]
    fig.suptitle(f"The same examples on k = {k} ranks: with ×k the big batch keeps pace with one rank, example for example.\n"
                 f"The gentler rules need more examples to reach the same loss ({'; '.join(words)}).",
                 fontsize=15, x=0.01, ha="left")
    _lr_footer(fig, line, mlp)
    return fig


def _path_surface(grid: LrGrid, rows) -> tuple:
    """Contours under the line model's paths: the loss on the grid's own data set, over the paths' extent."""
    x, y = line_data(grid.meta["dataset_size"], seed=grid.meta["seed"])
    theta = np.concatenate([grid.params[r, : grid.steps[r] + 1] for r in rows])
    theta = theta[np.isfinite(theta).all(axis=1)]
    lo, hi = theta.min(axis=0), theta.max(axis=0)
    pad = 0.25 * (hi - lo) + 0.1
    ws = np.linspace(lo[0] - pad[0], hi[0] + pad[0], 160)
    cs = np.linspace(lo[1] - pad[1], hi[1] + pad[1], 160)
    return ws, cs, lr_rules.line_loss_surface(x, y, ws, cs)


def figure_lr_linear_rule(line: LrGrid, mlp: LrGrid, *, k: int = 4, small: float = 4.0, large: float = 64.0,
                          big_steps: int = 6) -> Figure:
    """Chapter 09: one step of k·η against k steps of η, from the same θ: in the (w, c) plane, and measured on every run."""
    fig = Figure(figsize=(17.5, 6.8))
    axes = fig.subplots(1, 3, width_ratios=(1, 1, 1.15))
    fig.subplots_adjust(left=0.05, right=0.985, top=0.79, bottom=0.2, wspace=0.25)
    gaps = {}
    for ax, multiplier in zip(axes[:2], (small, large)):
        row = line.index(k=k, multiplier=multiplier)
        twin = int(line.twin[row])
        eta = line.small_step_rate(row)
        shown = None if multiplier == small else big_steps * k * line.meta["b"]
        plot_paths(line, [twin, row], surface=_path_surface(line, [twin, row]), max_examples=shown,
                   colours=[K1_COLOUR, WARMUP_COLOURS[0]], ax=ax, fontsize=13, note=False,
                   labels=[f"k=1: {k} steps of η={eta:.3g}", f"k={k}: 1 step of {k}η={k * eta:.3g}"])
        gaps[multiplier] = line.median_relative_gap(row)
        what = "whole run" if shown is None else f"first {big_steps} big steps"
        ax.set_title(f"line model, ×{multiplier:g} ({what})", fontsize=14, loc="left")
    x, _ = line_data(line.meta["dataset_size"], seed=line.meta["seed"])
    lam = lr_rules.line_curvatures(x)
    rates = np.geomspace(0.002, 2.0 / lam[0] / k * 1.2, 80)
    bowl = (rates, {f"line's bowl, k={k}, λ = {lam[0]:.2f}": lr_rules.bowl_step_gap(rates, k, lam[0]),
                    f"line's bowl, k={k}, λ = {lam[1]:.2f}": lr_rules.bowl_step_gap(rates, k, lam[1])})
    plot_step_gaps([line, mlp], bowl=bowl, ax=axes[2], fontsize=13, note=False)
    fig.suptitle(f"The linear rule: one step of {k}η on the mean of {k} batches lands where {k} steps of η land, while η is small.\n"
                 f"From the same θ they land {gaps[small]:.0%} of a step apart at η = {line.small_step_rate(line.index(k=k, multiplier=small)):.3g}"
                 f" (median), {gaps[large]:.0%} at η = {line.small_step_rate(line.index(k=k, multiplier=large)):.3g}: "
                 f"there the big steps overshoot the valley.", fontsize=15, x=0.01, ha="left")
    _lr_footer(fig, line, mlp)
    return fig


def _warmup_words(warmup: int) -> str:
    return f"warm-up {warmup} steps" if warmup else "no warm-up"


def figure_lr_warmup(line: LrGrid, mlp: LrGrid, *, k: int = 4, rescued: float = 64.0, limit: float = 128.0,
                     mlp_limit: float = 64.0, x_max: int = 384) -> Figure:
    """Chapter 09: where the linear rule lags, a short warm-up rescues it; past the curvature limit it only postpones the blow-up."""
    fig = Figure(figsize=(15, 11.4))
    axes = fig.subplots(2, 2)
    fig.subplots_adjust(left=0.07, right=0.985, top=0.88, bottom=0.12, hspace=0.4, wspace=0.2)
    warmups = list(line.meta["warmups"])
    rows = [line.index(k=k, multiplier=rescued, warmup=w) for w in warmups]
    twin = int(line.twin[rows[0]])
    colours = [WARMUP_COLOURS[i % len(WARMUP_COLOURS)] for i in range(len(rows))]
    styles = [dict(lw=4.5, alpha=0.45, zorder=2)] + [{} for _ in rows]
    floor = 1.5 * line.final_loss(twin)
    reach = {w: line.examples_to_reach(r, floor) for w, r in zip(warmups, rows)}
    best = min((w for w in warmups if w), key=lambda w: reach[w])
    words = [_warmup_words(w) for w in warmups]
    plot_loss_curves(line, [twin, *rows], colours=[K1_COLOUR, *colours], styles=styles, x_max=x_max, ax=axes[0, 0],
                     labels=[f"twin: {line.label(twin)}", *words], fontsize=13, note=False,
                     title=f"line model, k={k}, ×{rescued:g} (η={line.meta['base_lr'] * rescued:.3g}): the loss")
    plot_twin_distance(line, rows, colours=colours, x_max=x_max, ax=axes[0, 1], fontsize=13, note=False, labels=words,
                       title=f"… and its distance to the twin, k=1 at η={line.small_step_rate(rows[0]):.3g}")
    at = {}
    for ax, grid, multiplier in ((axes[1, 0], line, limit), (axes[1, 1], mlp, mlp_limit)):
        runs = [grid.index(k=k, multiplier=multiplier, warmup=w) for w in grid.meta["warmups"]]
        at[grid.meta["model"]] = steps = [int(grid.diverged_at[r]) for r in runs]
        plot_loss_curves(grid, runs, against="steps", ax=ax, fontsize=13, note=False, legend_loc="upper right",
                         labels=[_warmup_words(w) for w in grid.meta["warmups"]],
                         title=f"{grid.model_short}, k={k}, ×{multiplier:g} (η={grid.meta['base_lr'] * multiplier:.3g}): past the limit")
        finite = grid.loss[runs][np.isfinite(grid.loss[runs])]
        ax.set_ylim(finite.min() / 2, finite.max() * 1e4)  # room above the curves for the legend
        ax.set_xlim(0, max(steps) * 1.15 + 2)
    limit_rate = lr_rules.stability_limit(line_data(line.meta["dataset_size"], seed=line.meta["seed"])[0])
    fig.suptitle(f"Warm-up shortens the first, overshooting steps: at ×{rescued:g} the loss is within 1.5× its floor after "
                 f"{reach[best]:.0f} examples with {best} warm-up steps, {reach[0]:.0f} without.\n"
                 f"It cannot make a rate past the curvature limit safe (line model: η = {line.meta['base_lr'] * limit:.3g} > "
                 f"2/λ_max = {limit_rate:.2f}): every warm-up only postpones the blow-up.", fontsize=15, x=0.01, ha="left")
    _lr_footer(fig, line, mlp)
    return fig


def draw_lr(records: dict) -> dict:
    """Chapter 09's figures from the grids {"lr_line": LrGrid, "lr_mlp": LrGrid}."""
    line, mlp = records["lr_line"], records["lr_mlp"]
    return {
        "lr_loss_curves": (figure_lr_loss_curves(line, mlp), [line, mlp]),
        "lr_linear_rule": (figure_lr_linear_rule(line, mlp), [line, mlp]),
        "lr_warmup": (figure_lr_warmup(line, mlp), [line, mlp]),
    }


def verify_lr(records: dict) -> str:
    """Chapter 09's claims, asserted on the figure records; one line for the terminal."""
    line, mlp = records["lr_line"], records["lr_mlp"]
    return "learning-rate rules: " + " ".join(lr_claims(line, mlp))


def lr_claims(line: LrGrid, mlp: LrGrid, *, k: int = 4) -> list[str]:
    """Assert what chapter 09 claims on two grids that hold its runs; returns one sentence per claim."""
    said = []
    for grid in (line, mlp):
        grid.check()
        ratios = {rule: grid.examples_ratio(k=k, rule=rule) for rule in ("x1", "sqrt", "linear")}
        for rule, ratio in ratios.items():
            expected = k / lr_rules.multiplier(rule, k)
            assert abs(ratio / expected - 1) <= 0.15, f"{grid.model_words}, {rule}: {ratio:.2f}× the examples, not {expected:g}×"
        one, same = grid.curve(grid.index(k=1, multiplier=1.0)), grid.curve(grid.rule_index(k=k, rule="x1"))
        by_step = float(np.max(np.abs(same / one[: len(same)] - 1)))
        assert by_step < 0.15, f"{grid.model_words}: ×1 on {k} ranks is {by_step:.0%} off one rank, step for step"
        said.append(f"{_capital(grid.model_words)}: to reach k=1's loss, k={k} needed {ratios['linear']:.2f}× its examples with ×k, "
                    f"{ratios['sqrt']:.2f}× with ×√k, {ratios['x1']:.2f}× with ×1 (which stays within {by_step:.0%} of "
                    f"k=1 step for step).")
        rows = [grid.index(k=k, multiplier=m) for m in grid.meta["multipliers"]]
        rows = [r for r in rows if not grid.diverged(r)]
        gaps = {float(grid.multiplier[r]): grid.median_relative_gap(r) for r in rows}
        doublings = [gaps[2 * m] / gaps[m] for m in gaps if 2 * m in gaps]
        assert all(1.5 <= d <= 2.5 for d in doublings), f"{grid.model_words}: gap ratios per doubling of the rate {doublings}"
        said.append(f"{_capital(grid.model_words)}: the one-step gap grew {min(doublings):.2f}× to {max(doublings):.2f}× with each "
                    f"doubling of the rate.")
    x, _ = line_data(line.meta["dataset_size"], seed=line.meta["seed"])
    lam = lr_rules.line_curvatures(x)
    for r in (line.index(k=k, multiplier=m) for m in line.meta["multipliers"]):
        if line.diverged(r):
            continue
        eta, gap = line.small_step_rate(r), line.median_relative_gap(r)
        assert lr_rules.bowl_step_gap(eta, k, lam[1]) <= gap <= lr_rules.bowl_step_gap(eta, k, lam[0]), \
            f"line model at small rate {eta:g}: gap {gap:.3f} outside the bowl's two curvatures"
        early, late = np.nanmedian(line.relative_gap(r)[:10]), np.nanmedian(line.relative_gap(r)[10:])
        assert 0.75 <= early / late <= 1.33, f"line model at small rate {eta:g}: gap {early:.3f} early, {late:.3f} later"
    for r in (mlp.index(k=k, multiplier=m) for m in mlp.meta["multipliers"]):
        if not mlp.diverged(r):
            early, late = np.nanmedian(mlp.relative_gap(r)[:10]), np.nanmedian(mlp.relative_gap(r)[10:])
            assert early <= 1.05 * late, f"MLP at small rate {mlp.small_step_rate(r):g}: gap {early:.3f} early, {late:.3f} later"
    small, large = (line.median_relative_gap(line.index(k=k, multiplier=m)) for m in (4.0, 64.0))
    assert small < 0.1 < 0.3 < large, f"one-step gaps {small:.2f} at ×4 and {large:.2f} at ×64"
    said.append(f"Line model: one big step against {k} small ones from the same θ, {small:.0%} of a step apart at ×4, "
                f"{large:.0%} at ×64; every run's gap between the bowl's two modeled curves, and about as large in its "
                f"first 10 steps as later (the MLP's: no larger early than later).")
    plain = line.index(k=k, multiplier=64.0, warmup=0)
    twin = int(line.twin[plain])
    distance = line.twin_distance[plain, : line.steps[plain] + 1]
    early, late = float(np.max(distance[1:6])), float(np.median(distance[line.steps[plain] // 2:]))
    assert early > 5 * late, f"line model, ×64: distance to the twin {early:.2f} early, {late:.2f} later"
    said.append(f"Line model, ×64: up to {early:.2f} from its twin in the first 5 steps, {late:.2f} (median) in its second half.")
    floor = 1.5 * line.final_loss(twin)
    reach = {w: line.examples_to_reach(line.index(k=k, multiplier=64.0, warmup=w), floor) for w in line.meta["warmups"]}
    twin_reach, big_step = line.examples_to_reach(twin, floor), k * line.meta["b"]
    assert reach[3] < reach[0] and reach[3] <= twin_reach + big_step, f"warm-up 3 did not rescue ×64: {reach}, twin {twin_reach}"
    longest = max(line.meta["warmups"])
    if longest > 3:
        assert reach[longest] > reach[3], f"a {longest}-step warm-up was not slower than a 3-step one: {reach}"
    said.append(f"Line model, ×64: within 1.5× the floor after {reach[3]:.0f} examples with a 3-step warm-up (its twin: "
                f"{twin_reach:.0f}, so within one big step of {big_step}), {reach[0]:.0f} without"
                + (f", {reach[longest]:.0f} with {longest} steps." if longest > 3 else "."))
    for grid, multiplier in ((line, 128.0), (mlp, 64.0)):
        runs = [grid.index(k=k, multiplier=multiplier, warmup=w) for w in grid.meta["warmups"]]
        at = [int(grid.diverged_at[r]) for r in runs]
        assert min(at) >= 0, f"{grid.model_words}, ×{multiplier:g}: a warm-up prevented the divergence"
        assert all(a < b for a, b in zip(at, at[1:])), f"{grid.model_words}, ×{multiplier:g}: a longer warm-up blew up sooner: {at}"
        said.append(f"{_capital(grid.model_words)}, ×{multiplier:g}: diverged with every warm-up ({', '.join(map(str, grid.meta['warmups']))} "
                    f"steps), at steps {', '.join(map(str, at))}.")
    return said


def _capital(words: str) -> str:
    return words[:1].upper() + words[1:]


GROUPS.append(FigureGroup(
    name="lr",
    stems=LR_STEMS,
    record="dpviz.runs.lr_sweep:record_figure_records",
    draw=draw_lr,
    verify=verify_lr,
))


# --- chapter 11: waiting (stragglers, overlap, asynchronous SGD) ----------------------------------

from dpviz.plots.async_sgd import plot_loss_against, plot_stale_arrows, plot_staleness  # noqa: E402
from dpviz.plots.overlap import plot_overlap_steps, plot_overlap_timelines  # noqa: E402
from dpviz.plots.straggler import plot_straggler_timeline, plot_wait_against_delay  # noqa: E402
from dpviz.theory import waiting as waiting_theory  # noqa: E402

WAITING_STEMS = ("waiting_straggler", "waiting_overlap", "waiting_async", "waiting_sync")
WAITING_DELAY = 0.05  # seconds: the setting the straggler's timeline shows


def _waiting_footer(fig, words: str) -> None:
    fig.text(0.01, 0.005, words, fontsize=9, color="#556476", ha="left", va="bottom", wrap=True)


def figure_waiting_straggler(sweep, *, delay: float = WAITING_DELAY) -> Figure:
    """Chapter 11: one rank sleeps d; the timeline of a few steps, and the others' wait against d."""
    slow = int(sweep.slow_rank[np.flatnonzero(np.isclose(sweep.delay, delay))[-1]])
    fig = Figure(figsize=(16, 6.4))
    left, right = fig.subplots(1, 2, width_ratios=(1.55, 1))
    fig.subplots_adjust(left=0.08, right=0.98, top=0.8, bottom=0.3, wspace=0.22)
    plot_straggler_timeline(sweep, delay=delay, slow_rank=slow, ax=left, fontsize=13)
    plot_wait_against_delay([sweep], ax=right, fontsize=13)
    steps = sweep.median_step()
    base = float(np.median(steps[sweep.delay == 0])) if (sweep.delay == 0).any() else float("nan")
    fig.suptitle(f"A straggler sets the pace: with d = {delay * 1e3:g} ms every rank's step takes "
                 f"{float(np.median(steps[np.isclose(sweep.delay, delay)])) * 1e3:.1f} ms instead of {base * 1e3:.1f} ms",
                 fontsize=16, x=0.01, ha="left")
    _waiting_footer(fig, f"Measured: {sweep.describe()}.")
    return fig


def figure_waiting_overlap(run) -> Figure:
    """Chapter 11: when each bucket's all-reduce ran against the backward pass, and the step time it gave."""
    serial = run.phases("serial")
    bounds = waiting_theory.overlap_bounds(serial["forward"], serial["backward"], serial["comm"])
    fig = Figure(figsize=(17, 7.4))
    left, right = fig.subplots(1, 2, width_ratios=(1.7, 1))
    fig.subplots_adjust(left=0.1, right=0.98, top=0.8, bottom=0.2, wspace=0.2)
    plot_overlap_timelines(run, ax=left, fontsize=13)
    plot_overlap_steps(run, bounds, ax=right, fontsize=13)
    fig.suptitle(_overlap_headline(run, bounds), fontsize=16, x=0.01, ha="left")
    _waiting_footer(fig, f"Measured: {run.describe()}. Gradients of every mode compared with serial's at every step. "
                         "Modeled lines from the serial mode's own forward, backward and all-reduce times.")
    return fig


def _overlap_headline(run, bounds) -> str:
    """What the run says about overlap, in words chosen by its numbers: the buckets' step against serial's."""
    serial, mode = run.phases("serial"), "buckets" if "buckets" in run.mode else run.mode[-1]
    ours = run.phases(mode)
    change = ours["step"] / serial["step"] - 1
    step_words = (f"{-change:.0%} shorter" if change < -0.05 else f"{change:.0%} longer" if change > 0.05
                  else "about as long")
    hid = ours["exposed"] < serial["exposed"]
    slower = ours["backward"] > 1.2 * serial["backward"]
    how = ("the all-reduces ran during backward" + (", but backward got slower" if slower else "")) if hid else \
        "the all-reduces did not shorten the wait after backward"
    return (f"Overlap on this machine: {how};\na step in {mode} was {step_words} than serial "
            f"(at most {bounds.saving_fraction:.0%} was there to win)")


def _line_grid(runs, points: int = 90):
    """The line model's loss on a mesh of (w, c) around the paths of ``runs`` (theory, numpy)."""
    x, y = line_data(int(runs[0].meta["dataset_size"]), seed=int(runs[0].meta["seed"]))
    path = np.concatenate([np.concatenate([r.theta_before, r.theta_after]) for r in runs])
    lo, hi = path.min(axis=0), path.max(axis=0)
    pad = 0.15 * (hi - lo) + 0.1
    w, c = np.meshgrid(np.linspace(lo[0] - pad[0], hi[0] + pad[0], points), np.linspace(lo[1] - pad[1], hi[1] + pad[1], points))
    return w, c, waiting_theory.line_loss(x, y, np.stack([w, c], axis=-1))


def figure_waiting_stale_arrows(async_run, sync_run) -> Figure:
    """Chapter 11: the asynchronous path in the (w, c) plane with stale gradients drawn where they were applied."""
    fig = Figure(figsize=(11, 8.4))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.09, right=0.98, top=0.9, bottom=0.14)
    plot_stale_arrows(async_run, _line_grid([async_run, sync_run]), sync=sync_run, ax=ax, fontsize=13)
    angles = async_run.angles()[async_run.staleness > 0]
    ax.set_title(f"Stale arrows: {int((async_run.staleness > 0).sum())} of {async_run.updates} gradients were applied "
                 f"to a θ that had moved on\n(median {np.median(angles):.0f}° off the fresh direction)",
                 fontsize=14, loc="left")
    _waiting_footer(fig, f"Measured: {async_run.describe()}.\n{sync_run.describe()}.")
    return fig


def figure_waiting_sync_vs_async(async_run, sync_run) -> Figure:
    """Chapter 11: sync against async with one slow worker: loss against wall time and updates, and the staleness."""
    fig = Figure(figsize=(18, 6.2))
    a, b, c = fig.subplots(1, 3, width_ratios=(1, 1, 0.9))
    fig.subplots_adjust(left=0.05, right=0.98, top=0.8, bottom=0.25, wspace=0.28)
    runs = {f"async: {async_run.updates} updates of 1 gradient": async_run,
            f"sync: {sync_run.updates} updates of {sync_run.k} gradients": sync_run}
    plot_loss_against(runs, x="wall", ax=a, fontsize=13, title="Against wall-clock time")
    rates = waiting_theory.update_rates(async_run.seconds_per_gradient())
    for run, rate in ((sync_run, rates[0]), (async_run, rates[1])):
        a.plot(np.arange(run.updates + 1) / rate, run.loss, ":", color="#556476", linewidth=1.4)
    a.plot([], [], ":", color="#556476", label="modeled: sync at 1/max t_i, async at\nΣ 1/t_i updates per second")
    a.legend(fontsize=10, frameon=False, loc="upper right")
    plot_loss_against(runs, x="updates", ax=b, fontsize=13, title="Against updates")
    plot_staleness(async_run, modeled=waiting_theory.async_staleness(async_run.seconds_per_gradient()), ax=c, fontsize=13,
                   modeled_label="modeled mean τ, from each worker's\nmeasured seconds per gradient")
    idle = sync_run.worker_idle / (sync_run.worker_idle + sync_run.worker_busy)
    fig.suptitle(f"Async never waits ({async_run.wall[-1]:.2f} s for {async_run.updates} gradients against "
                 f"{sync_run.wall[-1]:.2f} s; sync's fast workers sat idle {idle[:-1].mean():.0%} of the time),\n"
                 f"but its gradients are stale (mean τ = {async_run.staleness.mean():.1f}) and its path is not sync's",
                 fontsize=15, x=0.01, ha="left")
    note = ""
    if async_run.oversubscribed:
        note = (f" {async_run.k + 1} processes on {async_run.meta['cores']} cores: the workers' compute is a sleep, so they "
                "seldom need a core at once; the modeled times beside the measured ones assume none ever waits for one.")
    _waiting_footer(fig, f"Measured: {async_run.describe()}.\n{sync_run.describe()}.{note}")
    return fig


def draw_waiting(records: dict) -> dict:
    """Chapter 11's figures from the records of :data:`WAITING_STEMS`, each with the runs it came from."""
    sweep, overlap = records["waiting_straggler"], records["waiting_overlap"]
    async_run, sync_run = records["waiting_async"], records["waiting_sync"]
    return {
        "waiting_straggler": (figure_waiting_straggler(sweep), [sweep]),
        "waiting_overlap": (figure_waiting_overlap(overlap), [overlap]),
        "waiting_stale_arrows": (figure_waiting_stale_arrows(async_run, sync_run), [async_run, sync_run]),
        "waiting_sync_vs_async": (figure_waiting_sync_vs_async(async_run, sync_run), [async_run, sync_run]),
    }


def verify_waiting(records: dict) -> str:
    """Chapter 11's claims asserted on the figure records; one line for the terminal."""
    lines = [records["waiting_straggler"].check(), records["waiting_overlap"].check(),
             records["waiting_async"].check(), records["waiting_sync"].check()]
    async_run, sync_run = records["waiting_async"], records["waiting_sync"]
    assert not np.array_equal(async_run.theta_after[sync_run.updates * async_run.k - 1], sync_run.theta_after[-1])
    return "waiting: " + " ".join(lines)


GROUPS.append(FigureGroup(
    name="waiting",
    stems=WAITING_STEMS,
    record="dpviz.runs.waiting:record_figure_records",
    draw=draw_waiting,
    verify=verify_waiting,
))
