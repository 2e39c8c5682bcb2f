"""The speedup model's figures: s01's sync timelines, s02's speedup curves, all-reduce time against M.

Records: the MLP runs and the all-reduce sweep of :data:`dpviz.topics.speedup_model.figure_records.FIGURE_PLAN`; every
title's claim comes from :mod:`dpviz.topics.speedup_model.claims`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.topics.speedup_model import claims as cost_claims
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, figure, legend_below, lift_notes, stacked, wrap_titles
from dpviz.topics.speedup_model.figures import figure_s01_sync_timelines, figure_s02_speedup
from dpviz.topics.measuring.plots_alpha_beta import plot_fitted_times, plot_residuals
from dpviz.topics.measuring.plots_bench import plot_allreduce_times
from dpviz.topics.speedup_model.records import BenchRecord
from dpviz.topics.speedup_model.figure_records import FIGURE_PLAN, DerivationRecords
from dpviz.topics.measuring.records import published_allreduce
from dpviz.topics.measuring import alpha_beta
from dpviz.topics.ground_floor import timing


def figure_allreduce_time_vs_size(bench: BenchRecord, published=None) -> Figure:
    """Measured all-reduce time against M with the notes' formula and the ring fitted, and the ring's residuals.

    With ``published`` (a PublishedAllReduce) a second column shows real GPU systems measured by others,
    fitted the same way, each labelled with who measured it. Under each fit, the residual panel and the
    trust verdict of :mod:`dpviz.topics.measuring.alpha_beta` (times rise with M; β only where the largest message
    is bandwidth-bound).
    """
    fig = figure((6.6, 1))
    # this machine's times and residuals, then the same for others' systems; under each its legend
    heights, gaps = (3.0, 1.5, 3.0, 1.5)[:2 if published is None else 4], (1.5, 1.2, 1.95, 0.75)
    axes = stacked(fig, heights, gaps, top=0.35)
    top, bottom = axes[0], axes[1]
    plot_allreduce_times(bench, timing.fit_lines(bench), ax=top, fontsize=10)
    top.set_title("This machine: all-reduce time against M, with fitted α-β models", fontsize=11, loc="left")
    mine = alpha_beta.bench_fit(bench, "ring")
    plot_residuals([mine], ax=bottom, by_k=True, fontsize=10,
                   note=f"Residuals of the ring fit (k = {', '.join(map(str, bench.own_core_ks()))} fitted)")
    bottom.set_title("This machine: measured / modeled", fontsize=10, loc="left")
    parts = [f"This machine (top): {' '.join(lift_notes(fig))}"]
    if published is not None:
        fits = alpha_beta.published_fits(published, "ring")
        plot_fitted_times(fits.values(), ax=axes[2], fontsize=10)
        axes[2].set_title("Real GPU systems, measured by others (not here), the same ring fit",
                          fontsize=11, loc="left")
        sources = [f"{item.name}: {item.source}" for item in fits.values()]
        plot_residuals(fits.values(), ax=axes[3], fontsize=10,
                       note="Residuals of each system's ring fit; nccl-tests all_reduce_perf tables, out-of-place, "
                            f"read {published.meta['date_read']}: " + "; ".join(sources))
        axes[3].set_title("Real GPU systems: measured / modeled", fontsize=10, loc="left")
        parts.append(f"Real GPU systems (bottom): {' '.join(lift_notes(fig))}")
        parts.append(f"From {published.describe()}")
    for i, ax in enumerate(axes):
        if ax.get_legend() is not None:
            legend_below(ax, gap=0.5, ncol=4 if i % 2 else 1)  # residuals: one row of four
            low = ax.get_ylim()[0]
            ax.set_ylim(auto=True)  # the legend's headroom above the points is not needed under them
            ax.relim()
            ax.autoscale_view(scalex=False)
            ax.set_ylim(bottom=min(low, ax.get_ylim()[0]))
    alt = [f"Log-log chart of this machine's all-reduce time against message size M, {bench.M.min():,} to "
           f"{bench.M.max():,} bytes: measured points for k = {', '.join(map(str, sorted(set(bench.k.tolist()))))} "
           f"with the fitted α-β lines (ring: α = {mine.fit.alpha * 1e6:.3g} µs, β = {mine.fit.beta / 1e9:.3g} GB/s); "
           f"under it measured / modeled, median error of the fitted points {mine.residuals.median_abs():.0%}"]
    if published is not None:
        alt.append("Below, the same for real GPU systems measured by others: " + "; ".join(
            f"{item.name} (α = {item.fit.alpha * 1e6:.3g} µs, β = {item.fit.beta / 1e9:.3g} GB/s)"
            for item in fits.values()))
    return caption(wrap_titles(fig), parts, alt=alt)


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    inputs = DerivationRecords.from_records(records)
    mlp = [*inputs.mlp.values()]
    published = published_allreduce()  # shipped: real GPU systems measured by others, beside this machine
    return {
        "s01_sync_timelines": (figure_s01_sync_timelines(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "s02_speedup": (figure_s02_speedup(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "allreduce_time_vs_size": (figure_allreduce_time_vs_size(inputs.bench, published),
                                   [inputs.bench, published.describe()]),
    }


GROUP = FigureGroup(name="sync_costs", plan=FIGURE_PLAN, draw=draw, claims=cost_claims.figure_claims)
