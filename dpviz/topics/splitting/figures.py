"""Splitting the model's figures: pipeline Gantt charts and the bubble, a tensor-parallel layer, ZeRO-1's memory.

Records: :data:`dpviz.topics.splitting.records_pipeline.FIGURE_PLAN` (pipelines, the tensor split, ZeRO-1), by stem.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz.topics.splitting import claims
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, figure, legend_below, lift_notes, measured_lines, title_of, wrap_titles
from dpviz.topics.splitting.plots_pipeline import GanttBars, plot_bubble, plot_gantt
from dpviz.topics.splitting.plots_tensor_parallel import plot_exchange_bytes, plot_tensor_split
from dpviz.topics.splitting.plots_zero import plot_memory, plot_zero_params
from dpviz.topics.splitting.records_pipeline import FIGURE_PIPELINES, FIGURE_PLAN, idle_points, pipeline_stem
from dpviz.topics.waiting.figures import panel_places
from dpviz.topics.splitting import theory_memory as memory_theory
from dpviz.topics.splitting import theory_pipeline as pipeline_theory
from dpviz.topics.splitting import theory_tensor_parallel as tensor_theory


def figure_pipeline_gantt(gpipe, one_f_one_b, bubble_runs) -> Figure:
    """One pipelined step as measured Gantt charts (both schedules), and the idle share against m."""
    fig = figure((6.8, 11.2))
    axes = fig.subplot_mosaic([["gpipe"], ["1f1b"], ["legend"], ["bubble"]], height_ratios=(1, 1, 0.2, 1.7))
    fig.subplots_adjust(left=0.15, right=0.97, top=0.89, bottom=0.15, hspace=0.55)
    xmax = max(r.span() for r in (gpipe, one_f_one_b)) * 1.03
    for name, run in (("gpipe", gpipe), ("1f1b", one_f_one_b)):
        plot_gantt(run, ax=axes[name], xmax=xmax, note="", legend=False, fontsize=11)
        axes[name].set_title(axes[name].get_title(loc="left"), fontsize=11, loc="left")
    GanttBars.legend(axes["1f1b"], 11)
    legend_below(axes["1f1b"], into=axes["legend"], gap=0.0, ncol=2, fontsize=9, handlelength=2.4, handleheight=1.2)
    runs = list(bubble_runs)
    ps = sorted({r.p for r in runs})
    over = [r for r in runs if r.oversubscribed]
    plot_bubble(pipeline_theory.bubble_curves(ps, 16), idle_points(runs), ax=axes["bubble"], fontsize=10,
                title="Idle share of a step against m" + (
                    f": hollow points had {over[0].p} stages on {over[0].meta['cores']} cores,\n"
                    "so their stages also waited for a core" if over else ""))
    legend_below(axes["bubble"], gap=0.5, fontsize=9)
    fig.suptitle(claims.gantt_title(gpipe, one_f_one_b), fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    shown = {(r.p, r.m, r.schedule) for r in (gpipe, one_f_one_b)}
    others = sorted({(r.p, r.m, r.schedule) for r in runs} - shown)
    parts = measured_lines([gpipe, one_f_one_b])
    if others:
        parts.append("Idle-share points also from: " + ", ".join(f"p={p}, m={m} ({s})" for p, m, s in others)
                     + ", the same model and machine")
    gpipe_at, one_f_one_b_at, bubble = panel_places(axes["gpipe"], axes["1f1b"], axes["bubble"])
    alt = [f"{gpipe_at} and {one_f_one_b_at.lower()}, two Gantt charts of one measured step of a {gpipe.p}-stage pipeline with {gpipe.m} micro-batches, "
           "one row per stage, forward and backward blocks per micro-batch and idle gaps between: all forwards then "
           f"all backwards, then one forward, one backward. {bubble}, a chart of the idle share against m, modeled curves "
           f"(p−1)/(m+p−1) for p = {', '.join(map(str, ps))} with the measured points", title_of(fig)]
    return caption(wrap_titles(fig), parts, alt=alt)


def figure_modeled_schedule(p: int = 4, m: int = 4, schedule: str = "gpipe") -> Figure:
    """The modeled schedule of ``p`` stages and ``m`` micro-batches (t_b = 2 t_f, free hand-offs) as a Gantt chart:
    what the chapter derives the bubble from, before any stage runs."""
    fig = figure((9, 4.6))   # 900 px: shown 1:1
    plot_gantt(pipeline_theory.modeled_timeline(p=p, m=m, schedule=schedule), ax=fig.subplots())
    order = "every forward first" if schedule == "gpipe" else "one forward, one backward"
    timeline = pipeline_theory.modeled_timeline(p=p, m=m, schedule=schedule)
    alt = (f"Modeled Gantt chart, one row per stage for {p} stages, against time in units of one forward pass: "
           f"{m} forward and {m} backward passes per stage ({order}, a backward taking twice a forward), each stage "
           f"starting one pass after the one before; every stage idles {float(timeline.idle_fraction().mean()):.0%} "
           f"of the step, the bubble (p−1)/(m+p−1) = {pipeline_theory.bubble_fraction(p, m):.0%}")
    return caption(fig, lift_notes(fig) or f"Modeled: p = {p} stages, m = {m} micro-batches, t_b = 2 t_f, {order}",
                   alt=alt)


def figure_tensor_parallel(split) -> Figure:
    """One linear layer split by columns and by rows over k ranks, and the bytes against data parallelism."""
    fig = figure((6.8, 12))
    axes = fig.subplot_mosaic([["column"], ["row"], ["bytes"]], height_ratios=(1, 1, 1.15))
    fig.subplots_adjust(left=0.13, right=0.97, top=0.9, bottom=0.05, hspace=0.3)
    plot_tensor_split(split, "column", ax=axes["column"], fontsize=10)
    plot_tensor_split(split, "row", ax=axes["row"], fontsize=10)
    m = split.meta
    batch = 2 ** np.arange(0, 13)
    per_step = {s: np.array([sum(tensor_theory.exchange_bytes(int(b), m["d_in"], m["d_out"], m["k"], s).values())
                             for b in batch]) for s in tensor_theory.SPLITS}
    dp = tensor_theory.data_parallel_bytes(m["n_params"], m["k"])
    curves = {f"tensor parallel, {s} split": (batch, per_step[s]) for s in tensor_theory.SPLITS}
    curves["data parallelism, the same layer"] = (batch, np.full(len(batch), dp))
    measured = {f"tensor parallel, {s} split": (m["batch"], int(split.bytes_sent[i].sum(axis=0).max()))
                for i, s in enumerate(tensor_theory.SPLITS)}
    plot_exchange_bytes(curves, measured, ax=axes["bytes"], fontsize=10)
    fig.suptitle(claims.tensor_split_title(split), fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    column, row, chart = panel_places(axes["column"], axes["row"], axes["bytes"])
    alt = [f"{column} and {row.lower()}, two diagrams of a {m['d_in']}→{m['d_out']} linear layer split over k = {m['k']} "
           "ranks, by columns (each rank's block of Y, joined by an all-gather) and by rows (partial sums of Y, added by "
           f"an all-reduce). {chart}, a log-log chart of bytes each rank sends per step against batch size B, 1 to {batch[-1]:,}: tensor "
           f"parallelism's grows with B, data parallelism's stays at {dp:,.0f} B", title_of(fig)]
    return caption(wrap_titles(fig), [*measured_lines([split]), *lift_notes(fig)], alt=alt)


def figure_zero_memory(zero) -> Figure:
    """Bytes per rank with and without sharded Adam state, and the parameters of both trainings."""
    fig = figure((6.8, 9.6))
    left, right = fig.subplots(2, 1, height_ratios=(1.3, 1))
    fig.subplots_adjust(left=0.13, right=0.95, top=0.84, bottom=0.07, hspace=0.6)
    modeled = {f"ZeRO-{s}": memory_theory.bytes_per_rank(zero.n_params, zero.k, zero_stage=s) for s in (2, 3)}
    plot_memory(zero, modeled=modeled, ax=left, fontsize=11)
    plot_zero_params(zero, ax=right, fontsize=10)
    fig.suptitle(claims.zero_memory_title(zero), fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    alt = [f"Stacked bars of bytes per rank on k = {zero.k} ranks, parameters, gradients and Adam state, for plain data "
           "parallelism, ZeRO-1 (measured) and ZeRO-2 and ZeRO-3 (modeled, hatched); below, one parameter of both "
           "trainings against step, the two lines on one another", title_of(fig)]
    return caption(wrap_titles(fig), [*measured_lines([zero]), *lift_notes(fig)], alt=alt)


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    pipes = {key: records[pipeline_stem(*key)] for key in FIGURE_PIPELINES}
    gpipe, f1b = pipes[(2, 4, "gpipe")], pipes[(2, 4, "1f1b")]
    curve_runs = [r for key, r in pipes.items() if key[2] == "gpipe"]
    split, zero = records["tensor_split_k2"], records["zero_k4"]
    return {
        "pipeline_gantt": (figure_pipeline_gantt(gpipe, f1b, curve_runs), list(pipes.values())),
        "tensor_parallel_split": (figure_tensor_parallel(split), [split]),
        "zero_memory": (figure_zero_memory(zero), [zero]),
    }


GROUP = FigureGroup(name="splitting", plan=FIGURE_PLAN, draw=draw, claims=claims.figure_claims)
