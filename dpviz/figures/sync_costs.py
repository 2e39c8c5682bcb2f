"""The speedup model's figures: s01's sync timelines, s02's speedup curves, all-reduce time against M.

Records: the MLP runs and the all-reduce sweep of :data:`dpviz.records.figure_set.FIGURE_PLAN`; every
title's claim comes from :mod:`dpviz.claims.sync_costs`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz.claims import sync_costs as cost_claims
from dpviz.figures.group import FigureGroup
from dpviz.figures.layout import new_figure
from dpviz.plots.alpha_beta import plot_fitted_times, plot_residuals
from dpviz.plots.bench import plot_allreduce_times
from dpviz.plots.speedup import GIDS as speedup_gids
from dpviz.plots.speedup import plot_speedup
from dpviz.plots.style import SOURCE_NOTE_OFFSET
from dpviz.plots.timeline import plot_timelines
from dpviz.records import BenchRecord
from dpviz.records.figure_set import FIGURE_PLAN, Inputs
from dpviz.records.published import published_allreduce
from dpviz.theory import alpha_beta, timing
from dpviz.theory.links import SPEED_ORDER


def figure_s01_sync_timelines(mlp: dict, bench: BenchRecord) -> Figure:
    """S01: compute and sync per step for each k, measured with the same threads per rank, beside the model fitted here.

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
    fig, ax = new_figure((9.5, 4.8))
    plot_timelines(rows, ax=ax, title=title, note=note)
    return fig


def figure_s02_speedup(mlp: dict, bench: BenchRecord) -> Figure:
    """S02: speedup against k for three links and for this machine's fitted link, all for the measured runs' workload.

    Every curve uses the runs' own T_compute (their k = 1 step) and M (their gradient), so the measured
    points sit on the dash-dotted curve of this machine's fitted α, β, not on another workload's curve.
    The title's claim (a slower link peels away from S = k sooner) is asserted on the curves drawn.
    """
    cost_claims.threads_per_rank(mlp)
    ks = np.arange(1, 65)
    workload = timing.measured_workload(mlp)
    curves = timing.speedup_curves(ks, t_compute=workload.t_compute, M=workload.M)
    here = timing.link_from_fit(bench.fit("ring"), name="this machine, fitted",
                                where=f"{bench.meta.get('host')}, {bench.meta.get('cores')} cores")
    own = timing.speedup_curves(ks, t_compute=workload.t_compute, M=workload.M, links=[here])
    fig, ax = new_figure((8.5, 6))
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


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    inputs = Inputs.from_records(records)
    mlp = [*inputs.mlp.values()]
    published = published_allreduce()  # shipped: real GPU systems measured by others, beside this machine
    return {
        "s01_sync_timelines": (figure_s01_sync_timelines(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "s02_speedup": (figure_s02_speedup(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "allreduce_time_vs_size": (figure_allreduce_time_vs_size(inputs.bench, published),
                                   [inputs.bench, published.describe()]),
    }


GROUP = FigureGroup(name="sync_costs", plan=FIGURE_PLAN, draw=draw, claims=cost_claims.figure_claims)
