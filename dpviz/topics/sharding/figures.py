"""Shard everything's figures: memory per rank at each ZeRO stage, bytes sent per step, measured beside the model,
and one rank's bytes held through one ZeRO-3 step as it gathers and frees each layer.

Records: :data:`dpviz.topics.sharding.records.FIGURE_PLAN` (the same MLP trained at stages 0 to 3 on k = 2 and 4), by stem.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.topics.sharding import claims
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, figure, legend_below, measured_lines, title_of, wrap_titles
from dpviz.topics.sharding.plots import plot_stage3_timeline, plot_stage_bytes, plot_stage_memory
from dpviz.topics.sharding.records import FIGURE_PLAN


def _by_k(runs) -> list:
    return sorted(runs, key=lambda r: r.k)


def figure_sharding_memory(runs) -> Figure:
    """Bytes one rank held at its peak, by category, at each stage, for each k: measured beside modeled."""
    runs = _by_k(runs)
    fig = figure((6.8, 4.4 * len(runs) + 1.6))
    axes = fig.subplots(len(runs) + 1, 1, height_ratios=[1] * len(runs) + [0.32])
    fig.subplots_adjust(left=0.12, right=0.97, top=0.87, bottom=0.02, hspace=0.42)
    for ax, run in zip(axes, runs):
        bars = {int(s): (claims.peak_by_category(run.memory[row, 0]), claims.peak_by_category(run.modeled_memory(int(s))))
                for row, s in enumerate(run.stage)}
        plot_stage_memory(bars, k=run.k, ax=ax, fontsize=11, legend=ax is axes[len(runs) - 1])
    legend_below(axes[len(runs) - 1], into=axes[-1], gap=0.0, ncol=2, fontsize=9, handlelength=2.4, handleheight=1.2)
    fig.suptitle(claims.memory_title(runs), fontsize=12, x=0.01, y=0.995, ha="left", va="top")
    alt = [f"Stacked bars of the bytes one rank held at its peak, in KiB, for k = {' and '.join(str(r.k) for r in runs)}: "
           "for plain data parallelism, ZeRO-1, ZeRO-2 and ZeRO-3 a measured bar and a modeled, hatched bar of the "
           "same height, stacking parameters, gradients, Adam state and the one layer held whole",
           *_peak_words(runs), title_of(fig)]
    return caption(wrap_titles(fig), measured_lines(runs), alt=alt)


def _peak_words(runs) -> list[str]:
    """Per k, the bar heights (one rank's peak at each stage) and where they rise or fall, from the records."""
    words = []
    for run in runs:
        peak = [int(claims.peak_by_category(run.memory[row, 0]).sum()) for row in range(len(run.stage))]
        rises = [f"{claims.STAGE_WORDS[int(run.stage[i])]} to {claims.STAGE_WORDS[int(run.stage[i + 1])]}"
                 for i in range(len(peak) - 1) if peak[i + 1] > peak[i]]
        trend = ("each bar lower than the one before" if not rises else
                 f"the bars rise from {', and from '.join(rises)}, as the layer held whole outweighs what sharding saved")
        words.append(f"At k = {run.k} the peaks, plain to ZeRO-3, are " + ", ".join(f"{p:,}" for p in peak) + f" B: {trend}")
    return words


def figure_sharding_bytes(runs) -> Figure:
    """Bytes one rank sent per step at each stage, reduce-scatter and all-gather, for each k, beside the model."""
    runs = _by_k(runs)
    fig = figure((6.8, 3.6 * len(runs) + 1.5))
    axes = fig.subplots(len(runs) + 1, 1, height_ratios=[1] * len(runs) + [0.42])
    fig.subplots_adjust(left=0.13, right=0.97, top=0.88, bottom=0.02, hspace=0.45)
    for ax, run in zip(axes, runs):
        sent = {int(s): (int(run.rs_bytes[row, 0, 0]), int(run.ag_bytes[row, 0, 0])) for row, s in enumerate(run.stage)}
        modeled = {int(s): sum(run.modeled_bytes(int(s)).values()) for s in run.stage}
        plot_stage_bytes(sent, modeled=modeled, plain=modeled[0], k=run.k, ax=ax, fontsize=11,
                         legend=ax is axes[len(runs) - 1])
    legend_below(axes[len(runs) - 1], into=axes[-1], gap=0.0, ncol=1, fontsize=9)
    fig.suptitle(claims.bytes_title(runs), fontsize=12, x=0.01, y=0.995, ha="left", va="top")
    alt = [f"Stacked bars of the bytes one rank sent per step, in KiB, for k = {' and '.join(str(r.k) for r in runs)}: "
           "reduce-scatter and all-gather for plain data parallelism, ZeRO-1, ZeRO-2 and ZeRO-3; the first three reach "
           "the dashed line of one all-reduce, ZeRO-3's bar is half as tall again; white diamonds, the model, sit on "
           "top of every bar", title_of(fig)]
    return caption(wrap_titles(fig), measured_lines(runs), alt=alt)


def figure_sharding_timeline(runs, rank: int = 0) -> Figure:
    """One rank's bytes held through the traced ZeRO-3 step, for each k: every gather and free, the level at
    rest and plain data parallelism's level (both measured), the model's peak."""
    runs = _by_k(runs)
    fig = figure((6.8, 3.3 * len(runs) + 1.9))
    axes = fig.subplots(len(runs) + 1, 1, height_ratios=[1] * len(runs) + [0.5])
    fig.subplots_adjust(left=0.11, right=0.97, top=0.85, bottom=0.01, hspace=0.5)
    for ax, run in zip(axes, runs):
        line = run.timeline(3, rank)
        xlabel = (f"time since the step began, ms (measured; {run.k} ranks on {run.cores} cores, so they "
                  f"took turns)" if run.oversubscribed else f"time since the step began, ms (measured, {run.k} ranks "
                  f"on {run.cores} cores)")
        plot_stage3_timeline(line["seconds"], line["bytes"], uses=run.uses(3, rank), rings=run.rings(3, rank),
                             rest=int(run.timeline(3, rank)["bytes"][0]), plain=int(run.timeline(0, rank)["bytes"][0]),
                             peak=int(run.modeled_memory(3).sum(axis=1).max()), k=run.k, rank=rank, ax=ax,
                             fontsize=11, legend=ax is axes[len(runs) - 1], xlabel=xlabel)
    legend_below(axes[len(runs) - 1], into=axes[-1], gap=0.0, ncol=1, fontsize=9, handlelength=2.6)
    fig.suptitle(claims.timeline_title(runs), fontsize=12, x=0.01, y=0.995, ha="left", va="top")
    first = runs[0].timeline(3, rank)
    alt = [f"Step lines of the bytes rank {rank} held, in KiB, against the time since one ZeRO-3 step began, in ms, "
           f"for k = {' and '.join(str(r.k) for r in runs)}: the line starts at the level the rank keeps at rest "
           f"({int(first['bytes'][0]):,} B at k = {runs[0].k}), rises as each of the {len(runs[0].unit_size)} layers is "
           "gathered for its forward and falls back when it is freed, then rises again, higher, as each layer is "
           "gathered for its backward with its full gradient; it never crosses the dash-dotted modeled peak and stays "
           "below the dashed level of plain data parallelism; shaded spans labelled L1 to "
           f"L{len(runs[0].unit_size)} fwd and bwd mark each gathered layer, a hatched lane at the bottom each ring "
           "collective", title_of(fig)]
    return caption(wrap_titles(fig), measured_lines(runs), alt=alt)


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    runs = [records[stem] for stem in FIGURE_PLAN.stems]
    return {
        "sharding_memory": (figure_sharding_memory(runs), runs),
        "sharding_bytes": (figure_sharding_bytes(runs), runs),
        "sharding_timeline": (figure_sharding_timeline(runs), runs),
    }


GROUP = FigureGroup(name="sharding", plan=FIGURE_PLAN, draw=draw, claims=claims.figure_claims)
