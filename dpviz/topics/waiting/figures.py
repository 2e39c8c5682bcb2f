"""Waiting's figures: a straggler's timeline, overlap against backward, stale arrows, sync against async.

Records: :data:`dpviz.topics.waiting.plan.FIGURE_PLAN` (a straggler sweep, an overlap run, an asynchronous and
a synchronous parameter-server run), by stem.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz.topics.waiting import claims
from dpviz.engine.data import line_data
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, figure, legend_below, lift_notes, title_of, wrap_titles
from dpviz.topics.waiting.plots_async_sgd import plot_loss_against, plot_stale_arrows, plot_staleness
from dpviz.topics.waiting.plots_overlap import plot_overlap_steps, plot_overlap_timelines
from dpviz.topics.waiting.plots_straggler import plot_straggler_timeline, plot_wait_against_delay
from dpviz.engine.style import SLATE
from dpviz.topics.waiting.records_overlap import MODES
from dpviz.topics.waiting.records_straggler import WAIT_TOLERANCE
from dpviz.topics.waiting.plan import FIGURE_DELAY, FIGURE_PLAN
from dpviz.topics.waiting import theory as waiting_theory


ROW_WORDS = {1: ("",), 2: ("Top", "Bottom"), 3: ("Top", "Middle", "Bottom")}
COLUMN_WORDS = {1: ("",), 2: ("left", "right"), 3: ("left", "middle", "right")}


def panel_places(*axes) -> list[str]:
    """Where each of ``axes`` sits among them, read from the figure's layout, as an alt text begins a panel's
    description: "Top", "Bottom", "Middle" for panels stacked in one column, "Left", "Right" for panels in one row,
    "Top left" and so on in a grid ("Bottom" alone for a panel as wide as two columns; "Panel 4" past three rows or
    columns). A figure restacked (side by side, or top and bottom) changes these words with it."""
    boxes = [ax.get_position() for ax in axes]
    tops = sorted({round(b.y1, 2) for b in boxes}, reverse=True)
    lefts = sorted({round(b.x0, 2) for b in boxes})
    words = []
    for i, box in enumerate(boxes):
        row, col = tops.index(round(box.y1, 2)), lefts.index(round(box.x0, 2))
        spans = any(round(other.x0, 2) > round(box.x0, 2) and other.x0 < box.x1 - 0.01 for other in boxes)
        if len(tops) > 3 or len(lefts) > 3:
            words.append(f"Panel {i + 1}")
            continue
        place = " ".join(w for w in (ROW_WORDS[len(tops)][row], "" if spans else COLUMN_WORDS[len(lefts)][col]) if w)
        words.append(place[:1].upper() + place[1:] if place else f"Panel {i + 1}")
    return words


def figure_waiting_straggler(sweep, *, delay: float = FIGURE_DELAY) -> Figure:
    """One rank sleeps d; the timeline of a few steps, and the others' wait against d."""
    slow = int(sweep.slow_rank[np.flatnonzero(np.isclose(sweep.delay, delay))[-1]])
    titles = claims.straggler_titles(sweep, delay=delay, slow_rank=slow)
    fig = figure((6.8, 9.0))
    left, right = fig.subplots(2, 1, height_ratios=(1, 1.1))
    fig.subplots_adjust(left=0.13, right=0.97, top=0.88, bottom=0.08, hspace=0.6)
    plot_straggler_timeline(sweep, delay=delay, slow_rank=slow, ax=left, fontsize=10, title=titles["timeline"])
    plot_wait_against_delay([sweep], ax=right, fontsize=10, tolerance=WAIT_TOLERANCE, title=titles["wait"])
    fig.suptitle(titles["figure"], fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    first, second = panel_places(left, right)
    alt = [f"{first}, a timeline of a few steps on each rank: compute, rank {slow}'s injected sleep, and the others' "
           f"wait inside the all-reduce. {second}, the others' measured wait against the injected delay d, on the line "
           "wait = d", title_of(fig)]
    return caption(wrap_titles(fig), [f"Measured: {sweep.describe()}", *lift_notes(fig)], alt=alt)


def figure_waiting_overlap(run) -> Figure:
    """When each bucket's all-reduce ran against the backward pass, and the step time it gave."""
    serial = run.phases("serial")
    bounds = waiting_theory.overlap_bounds(serial["forward"], serial["backward"], serial["comm"])
    fig = figure((6.8, 9.6))
    left, right = fig.subplots(2, 1, height_ratios=(1.5, 1))
    fig.subplots_adjust(left=0.17, right=0.97, top=0.88, bottom=0.07, hspace=0.62)
    plot_overlap_timelines(run, ax=left, fontsize=10)
    legend_below(left, gap=0.55, fontsize=9, handlelength=2.4, handleheight=1.2)
    plot_overlap_steps(run, bounds, ax=right, fontsize=10)
    fig.suptitle(claims.overlap_title(run), fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    first, second = panel_places(left, right)
    alt = [f"{first}, one step per mode on rank 0 as a timeline: forward, backward and the optimizer step, with each "
           f"all-reduce drawn as a bar from its start to its completion. {second}, horizontal bars of the median step time "
           f"per mode ({', '.join(m.replace('_', ' ') for m in MODES)}) beside the modeled serial step "
           f"({bounds.serial * 1e3:.2g} ms) and the fully hidden sync ({bounds.best * 1e3:.2g} ms)",
           title_of(fig)]
    return caption(wrap_titles(fig), [f"Measured: {run.describe()}", "Gradients of every mode compared with serial's at every step",
                         "Modeled lines from the serial mode's own forward, backward and all-reduce times",
                         *lift_notes(fig)], alt=alt)


def _line_grid(runs, points: int = 90):
    """The line model's loss on a mesh of (w, c) around the paths of ``runs`` (theory, numpy)."""
    x, y = line_data(int(runs[0].meta["dataset_size"]), seed=int(runs[0].meta["seed"]))
    path = np.concatenate([np.concatenate([r.theta_before, r.theta_after]) for r in runs])
    lo, hi = path.min(axis=0), path.max(axis=0)
    pad = 0.15 * (hi - lo) + 0.1
    w, c = np.meshgrid(np.linspace(lo[0] - pad[0], hi[0] + pad[0], points), np.linspace(lo[1] - pad[1], hi[1] + pad[1], points))
    return w, c, waiting_theory.line_loss(x, y, np.stack([w, c], axis=-1))


def figure_waiting_stale_arrows(async_run, sync_run) -> Figure:
    """The asynchronous path in the (w, c) plane with stale gradients drawn where they were applied."""
    fig = figure((6.6, 7.0))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.12, right=0.97, top=0.9, bottom=0.3)
    plot_stale_arrows(async_run, _line_grid([async_run, sync_run]), sync=sync_run, ax=ax, fontsize=10)
    legend_below(ax, gap=0.55, fontsize=9)
    ax.set_title(claims.stale_arrows_title(async_run), fontsize=11, loc="left")
    alt = [f"Paths in the line model's (w, c) plane over loss contours: synchronous SGD's {sync_run.updates} updates "
           f"and asynchronous SGD's {async_run.updates}, with a few stale steps drawn as arrows beside the fresh step "
           "from the same θ", title_of(fig, ax)]
    return caption(wrap_titles(fig), [f"Measured: {async_run.describe()}", sync_run.describe(), *lift_notes(fig)], alt=alt)


def figure_waiting_sync_vs_async(async_run, sync_run) -> Figure:
    """Sync against async with one slow worker: loss against wall time and updates, and the staleness."""
    fig = figure((6.8, 8.8))
    axes = fig.subplot_mosaic([["wall", "updates"], ["stale", "stale"]], height_ratios=(1, 1))
    a, b, c = axes["wall"], axes["updates"], axes["stale"]
    fig.subplots_adjust(left=0.1, right=0.97, top=0.86, bottom=0.08, hspace=0.72, wspace=0.3)
    runs = {f"async: {async_run.updates} updates of 1 gradient": async_run,
            f"sync: {sync_run.updates} updates of {sync_run.k} gradients": sync_run}
    plot_loss_against(runs, x="wall", ax=a, fontsize=10, title="Against wall-clock time")
    rates = waiting_theory.update_rates(async_run.seconds_per_gradient())
    for run, rate in ((sync_run, rates[0]), (async_run, rates[1])):
        a.plot(np.arange(run.updates + 1) / rate, run.loss, ":", color=SLATE, linewidth=1.4)
    a.plot([], [], ":", color=SLATE, label="modeled: sync at 1/max t_i, async at\nΣ 1/t_i updates per second")
    a.legend(fontsize=9, frameon=False, loc="upper right")
    plot_loss_against(runs, x="updates", ax=b, fontsize=10, title="Against updates")
    b.get_legend().remove()  # the same two runs as on its left: one legend for the row
    legend_below(a, gap=0.5, ncol=2, fontsize=9)
    plot_staleness(async_run, modeled=waiting_theory.async_staleness(async_run.seconds_per_gradient()), ax=c, fontsize=10,
                   modeled_label="modeled mean τ, from each worker's\nmeasured seconds per gradient")
    fig.suptitle(claims.sync_vs_async_title(async_run, sync_run), fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    note = ""
    if async_run.oversubscribed:
        note = (f" {async_run.k + 1} processes on {async_run.meta['cores']} cores: the workers' compute is a sleep, so they "
                "seldom need a core at once; the modeled times beside the measured ones assume none ever waits for one.")
    wall, updates, stale = panel_places(a, b, c)
    alt = [f"{wall} and {updates.lower()}, two line charts of loss for async ({async_run.updates} updates of 1 gradient) "
           f"and sync ({sync_run.updates} updates of {sync_run.k}), against wall-clock time and against updates. "
           f"{stale}, bars of how many updates had each staleness τ, per worker", title_of(fig)]
    return caption(wrap_titles(fig), [f"Measured: {async_run.describe()}", sync_run.describe(), note, *lift_notes(fig)],
                   alt=alt)


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    sweep, overlap = records["waiting_straggler"], records["waiting_overlap"]
    async_run, sync_run = records["waiting_async"], records["waiting_sync"]
    return {
        "waiting_straggler": (figure_waiting_straggler(sweep), [sweep]),
        "waiting_overlap": (figure_waiting_overlap(overlap), [overlap]),
        "waiting_stale_arrows": (figure_waiting_stale_arrows(async_run, sync_run), [async_run, sync_run]),
        "waiting_sync_vs_async": (figure_waiting_sync_vs_async(async_run, sync_run), [async_run, sync_run]),
    }


GROUP = FigureGroup(name="waiting", plan=FIGURE_PLAN, draw=draw, claims=claims.figure_claims)
