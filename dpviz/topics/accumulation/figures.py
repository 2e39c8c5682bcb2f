"""Gradient accumulation's figures: the same update three ways, sync every micro-batch or once, memory against m.

Records: :data:`dpviz.topics.accumulation.records.FIGURE_PLAN`, by stem (``figure_records()`` loads the saved ones).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.topics.accumulation import claims
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, figure, legend_below, lift_notes, wrap_titles
from dpviz.topics.accumulation.plots import (
    plot_activation_memory, plot_comm_per_update, plot_update_error, plot_update_rows,
)
from dpviz.topics.accumulation.records import FIGURE_PLAN, figure_selection
from dpviz.topics.accumulation import theory as accumulation_theory


def _caption_words(runs, *, timed: bool = True) -> str:
    """The runs' shared setting: threads per rank and what the cores allow, from the records."""
    first = runs[0]
    words = f"Measured: {first.setting()}."
    if timed:
        threads = {r.meta["threads_per_rank"] for r in runs}
        cores = first.meta["cores"]
        words += (f" Every rank of every run had {', '.join(map(str, sorted(threads)))} intra-op thread(s), so the "
                  f"times compare; with {cores} cores at most {cores} ranks really run at once. "
                  f"Times: medians of {first.steps - 1} updates after the first.")
    return words


def figure_accumulation_timelines(records: dict) -> Figure:
    """The same update three ways (one process accumulating m, k = m ranks, one big batch), m = 2 and 4.

    ``records`` are the chapter's figure records by stem (``dpviz.topics.accumulation.records.figure_records()``).
    The titles are what :mod:`dpviz.topics.accumulation.claims` found on these runs.
    """
    fig = figure((6.8, 8.4))
    axes = fig.subplots(2, 1)
    fig.subplots_adjust(left=0.03, right=0.97, top=0.86, bottom=0.17, hspace=0.6)
    panels = figure_selection(records)["timelines"]
    rows_by_panel = [accumulation_theory.three_ways(*runs) for runs in panels]
    xmax = max(row.t_update for rows in rows_by_panel for row in rows) * 1.5
    for ax, runs, rows in zip(axes, panels, rows_by_panel):
        plot_update_rows(rows, ax=ax, title=claims.timeline_title(*runs), xmax=xmax, legend=ax is axes[-1], fontsize=10)
    legend_below(axes[-1], gap=0.45, ncol=2, fontsize=9, handlelength=2.4, handleheight=1.2)
    fig.suptitle(claims.timelines_title(panels), fontsize=12, x=0.03, y=0.99, ha="left", va="top")
    return caption(wrap_titles(fig), _caption_words(_timeline_runs(panels)))


def figure_update_timeline(one, ranks, big) -> Figure:
    """One update three ways, from runs just recorded: ``one`` process accumulating m micro-batches, k = m
    ``ranks`` with one each, and ``big``, one process in one pass; the title is what the claims found on them."""
    fig = figure((8.6, 4.4))  # under 936 px: shown 1:1
    plot_update_rows(accumulation_theory.three_ways(one, ranks, big), ax=fig.subplots(), note=big.setting(),
                     title="This run: " + claims.timeline_title(one, ranks, big))
    return caption(wrap_titles(fig), lift_notes(fig))


def _timeline_runs(panels) -> list:
    """The timeline figure's records, each once (the one-pass run is in both panels)."""
    return list({id(run): run for runs in panels for run in runs}.values())


def figure_accumulation_sync(records: dict) -> Figure:
    """K ranks all-reducing after every micro-batch against once per update: timelines and time against m."""
    inputs = figure_selection(records)
    every = {r.m: r for r in inputs["every"]}
    accumulate = {r.m: r for r in inputs["accumulate"]}
    m = max(every)
    fig = figure((6.8, 8.8))
    left, right = fig.subplots(2, 1, height_ratios=(1, 1.1))
    fig.subplots_adjust(left=0.12, right=0.97, top=0.9, bottom=0.08, hspace=0.62)
    rows = accumulation_theory.sync_patterns(every[m], accumulate[m])
    saved = rows[0].calls - rows[1].calls
    plot_update_rows(rows, ax=left, fontsize=10,
                     title=f"k = {every[m].k} ranks, m = {m} micro-batches of {every[m].meta['micro_batch']}: "
                           f"{rows[0].calls} all-reduces or {rows[1].calls}")
    legend_below(left, gap=0.45, ncol=2, fontsize=9, handlelength=2.4, handleheight=1.2)
    box = left.get_position()
    left.set_position([0.03, box.y0, box.x1 - 0.03, box.height])  # the bars need no y axis: use its room
    plot_comm_per_update(accumulation_theory.comm_curves([*every.values(), *accumulate.values()]), ax=right, fontsize=10)
    right.set_title(f"Accumulating first saves {saved} of {rows[0].calls} all-reduces at m = {m}", fontsize=11, loc="left")
    fig.suptitle(f"The same update either way; accumulating first sends {rows[1].sent_bytes / 2**20:.2f} MiB "
                      f"per rank instead of {rows[0].sent_bytes / 2**20:.2f} MiB",
                 fontsize=12, x=0.02, y=0.99, ha="left", va="top")
    return caption(wrap_titles(fig), _caption_words([*every.values(), *accumulate.values()]))


def figure_accumulation_memory(records: dict) -> Figure:
    """Bytes held for backward against micro-batch size, and the update's error to the big batch."""
    one_process_runs = figure_selection(records)["memory"]
    points = accumulation_theory.memory_points(one_process_runs)
    fig = figure((6.6, 8.6))
    left, right = fig.subplots(2, 1)
    fig.subplots_adjust(left=0.14, right=0.97, top=0.88, bottom=0.08, hspace=0.55)
    plot_activation_memory(points, ax=left, fontsize=10)
    shrink = points.activation_bytes[0] / points.activation_bytes[-1]
    left.set_title(f"Memory for backward falls {shrink:.0f}× from m = {points.m[0]} to m = {points.m[-1]}",
                   fontsize=11, loc="left")
    plot_update_error(points, ax=right, fontsize=10)
    right.set_title("while the update stays the big-batch gradient, to rounding", fontsize=11, loc="left")
    fig.suptitle(f"One process, {points.global_batch} examples per update, cut into m micro-batches",
                 fontsize=12, x=0.02, y=0.99, ha="left", va="top")
    return caption(wrap_titles(fig), _caption_words(list(one_process_runs), timed=False))


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    inputs = figure_selection(records)
    return {
        "accumulation_timelines": (figure_accumulation_timelines(records), _timeline_runs(inputs["timelines"])),
        "accumulation_sync": (figure_accumulation_sync(records), inputs["every"] + inputs["accumulate"]),
        "accumulation_memory": (figure_accumulation_memory(records), inputs["memory"]),
    }


GROUP = FigureGroup(name="accumulation", plan=FIGURE_PLAN, draw=draw, claims=claims.figure_claims)
