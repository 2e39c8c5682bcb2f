"""The one-picture summary of data-parallel training, drawn from one step of a real run.

Top to bottom: k data slices, each fed to a copy of the same model (one colour: the copies are
identical); each copy's gradient on its slice as a grey arrow g_i; the all-reduce that averages
them into one red arrow ḡ, which every rank receives; and every copy stepping by that same arrow
to the same new θ. The small bar in the corner is one step's measured time: lavender compute,
coral sync, the price of keeping the copies in step, as :func:`dpviz.topics.ground_floor.timing.step_times`
measured it. For the line model (P = 2) every arrow is drawn in the (w, c) plane, at one common scale::

    run = record_run(model="line", k=4, b=8, steps=3)
    plot_summary(run, timing.step_times(run), step=0)
"""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from dpviz.engine.style import (
    CORAL,
    GREY,
    INK,
    LAVENDER,
    PALE_CORAL,
    PALE_REPLICA,
    PANEL,
    RED,
    REPLICA,
    SLATE,
    SLICE_EDGE,
    SLOT_EDGE,
    get_ax,
    source_note,
)
from dpviz.topics.speedup_model.plots_timeline import time_unit

GIDS = {"local": "summary.local", "local_faint": "summary.local_faint", "reduced": "summary.reduced",
        "copy": "summary.copy", "new_copy": "summary.new_copy", "slice": "summary.slice",
        "compute": "summary.compute", "comm": "summary.comm", "allreduce": "summary.allreduce"}

COL = 3.2  # data units between the centres of neighbouring copies
RADIUS = 1.2  # radius of the circle each gradient arrow is drawn in
Y_SLICE, Y_COPY, Y_GRAD, Y_REDUCE, Y_MEAN, Y_NEW = 9.0, 6.6, 4.3, 2.1, 0.0, -2.4
ARROW = dict(angles="xy", scale_units="xy", headwidth=4, headlength=4.5, headaxislength=4)


def plot_summary(run, times, *, step: int = 0, ax=None, fontsize: float = 11):
    """Draw the whole story of one step of ``run`` (a recorded Run with P = 2, all-reduce on).

    ``times`` is the run's typical step, :func:`dpviz.topics.ground_floor.timing.step_times` of it, for the time bar.
    """
    ax = get_ax(ax)
    if run.local_grad.shape[-1] != 2 or "params" not in run.arrays:
        raise ValueError(f"run must be a line-model run (P = 2 parameters, params kept); got P={run.local_grad.shape[-1]}.")
    if not run.meta.get("all_reduce", True):
        raise ValueError("run must have the all-reduce on: the summary shows every copy stepping by one shared arrow.")
    if not 0 <= step < run.steps:
        raise ValueError(f"step must be from 0 to {run.steps - 1} for this run; got {step}.")
    if not all(hasattr(times, name) for name in ("t_compute", "t_comm", "oversubscribed")):
        raise TypeError(f"times must be the run's StepTimes, timing.step_times(run); got {type(times).__name__}.")
    k = run.k
    g_local = run.local_grad[step]  # (k, 2)
    g_mean = run.reduced_grad[step, 0]  # (2,) what rank 0 received; every rank received the same bits
    theta, theta_new = run.params[step], run.params[step + 1]  # (k, 2) each
    centres = (np.arange(k) - (k - 1) / 2) * COL
    span = np.abs(np.concatenate([g_local, g_mean[None]])).max()
    per_unit = 0.95 * RADIUS / np.hypot(*np.concatenate([g_local, g_mean[None]]).T).max() if span > 0 else 1.0

    _slices(ax, run, step, centres, fontsize)
    for i, cx in enumerate(centres):
        _copy_box(ax, cx, Y_COPY, f"copy {i}", theta[i], fontsize, GIDS["copy"])
        _arrow(ax, (cx, Y_SLICE - 0.85), (cx, Y_COPY + 0.62), INK)
        ax.add_patch(Circle((cx, Y_GRAD), RADIUS, facecolor="white", edgecolor=SLOT_EDGE, linewidth=1))
        ax.text(cx - RADIUS, Y_GRAD + RADIUS, f"$g_{i}$", fontsize=fontsize, color=INK, ha="left", va="bottom")
        _arrow(ax, (cx, Y_COPY - 0.62), (cx, Y_GRAD + RADIUS), INK)
        _arrow(ax, (cx, Y_GRAD - RADIUS), (cx * 0.35, Y_REDUCE + 0.45), GREY)
    ax.quiver(centres, np.full(k, Y_GRAD), g_local[:, 0], g_local[:, 1], color=GREY, scale=1 / per_unit,
              width=0.005, gid=GIDS["local"], zorder=4, **ARROW)

    width = centres[-1] - centres[0] + 2 * RADIUS + 0.4
    ax.add_patch(FancyBboxPatch((-width / 2, Y_REDUCE - 0.45), width, 0.9, boxstyle="round,pad=0.05,rounding_size=0.4",
                                facecolor=PALE_CORAL, edgecolor=CORAL, linewidth=1.5, gid=GIDS["allreduce"]))
    ax.text(0, Y_REDUCE, f"all-reduce: sum the {k} arrows, divide by k, give every rank the result",
            ha="center", va="center", fontsize=fontsize, color=INK)

    ax.add_patch(Circle((0, Y_MEAN), RADIUS, facecolor="white", edgecolor=SLOT_EDGE, linewidth=1))
    ax.quiver(np.zeros(k), np.full(k, Y_MEAN), g_local[:, 0], g_local[:, 1], color=GREY, alpha=0.4,
              scale=1 / per_unit, width=0.0035, gid=GIDS["local_faint"], zorder=3, **ARROW)
    ax.quiver([0.0], [Y_MEAN], [g_mean[0]], [g_mean[1]], color=RED, scale=1 / per_unit, width=0.007,
              gid=GIDS["reduced"], zorder=5, **ARROW)
    ax.text(RADIUS + 0.2, Y_MEAN + 0.5, r"$\bar g = \frac{1}{k}\,\sum_i\, g_i$", fontsize=fontsize + 3, color=RED,
            ha="left", va="center")
    ax.text(RADIUS + 0.2, Y_MEAN - 0.4, f"equals the big-batch gradient\n(relative error {run.big_batch_rel_err()[step]:.0e}); "
                                        "arrows: (∂L/∂w, ∂L/∂c)",
            fontsize=fontsize - 1, color=INK, ha="left", va="center")
    _arrow(ax, (0, Y_REDUCE - 0.45), (0, Y_MEAN + RADIUS), RED)

    for i, cx in enumerate(centres):
        _arrow(ax, (0, Y_MEAN - RADIUS), (cx, Y_NEW + 0.62), RED, linewidth=1.4)
        _copy_box(ax, cx, Y_NEW, f"copy {i}, stepped", theta_new[i], fontsize, GIDS["new_copy"])
    same = bool(run.replicas_identical()[step + 1])
    ax.text(0, Y_NEW - 0.95, ("every copy stepped by the same ḡ, so all hold bit-identical θ"
                              if same else "the copies hold different θ: they drifted"),
            ha="center", va="top", fontsize=fontsize, color=REPLICA if same else RED)

    _sync_bar(ax, times, centres[-1] + 1.3, Y_NEW - 2.2, fontsize)
    # Room for the texts, which autoscaling ignores; limits stay automatic so the equal aspect can widen either axis.
    ax.update_datalim([(centres[0] - COL / 2, Y_NEW - 2.8), (centres[-1] + COL / 2, Y_SLICE + 1.3)])
    ax.autoscale_view()
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_axis_off()
    ax.set_title(f"Data-parallel training in one picture: step {step} of a real run on k = {k} ranks",
                 fontsize=fontsize + 2, loc="left")
    source_note(ax, run.describe())
    return ax


def _slices(ax, run, step, centres, fontsize):
    """k small boxes with the examples each rank took at ``step``, on common axes."""
    rows = run.batch_index[step]  # (B,), rank 0's shard first
    xs, ys = run.x[rows, 0], run.y[rows, 0]
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    w, h = 2.4, 1.4
    for i, cx in enumerate(centres):
        mine = run.example_rank == i
        ax.add_patch(Rectangle((cx - w / 2, Y_SLICE - h / 2), w, h, facecolor=PANEL, edgecolor=SLICE_EDGE,
                               gid=GIDS["slice"]))
        px = cx - w / 2 + 0.1 + (xs[mine] - x0) / max(x1 - x0, 1e-12) * (w - 0.2)
        py = Y_SLICE - h / 2 + 0.1 + (ys[mine] - y0) / max(y1 - y0, 1e-12) * (h - 0.2)
        ax.plot(px, py, "o", color=INK, markersize=3.5)
        ax.text(cx, Y_SLICE + h / 2 + 0.08, f"slice {i}: {int(mine.sum())} examples", ha="center", va="bottom",
                fontsize=fontsize - 1, color=INK)


def _copy_box(ax, cx, cy, title, theta, fontsize, gid):
    ax.add_patch(FancyBboxPatch((cx - 1.45, cy - 0.55), 2.9, 1.1, boxstyle="round,pad=0.05,rounding_size=0.25",
                                facecolor=PALE_REPLICA, edgecolor=REPLICA, linewidth=2, gid=gid))
    ax.text(cx, cy + 0.2, title, ha="center", va="center", fontsize=fontsize - 1, color=REPLICA, weight="bold")
    ax.text(cx, cy - 0.22, f"θ = ({theta[0]:.3f}, {theta[1]:.3f})", ha="center", va="center",
            fontsize=fontsize - 2, color=INK)


def _arrow(ax, start, end, colour, linewidth=1.2):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=colour,
                                 linewidth=linewidth, shrinkA=0, shrinkB=0, zorder=2))


def _sync_bar(ax, times, right, y, fontsize):
    """One step's median measured time as a lavender compute bar and a coral sync bar, 2.6 units long."""
    total = times.t_step if times.t_step > 0 else 1.0
    length = 2.6
    left = right - length
    compute = length * times.t_compute / total
    ax.add_patch(Rectangle((left, y), compute, 0.35, facecolor=LAVENDER, edgecolor=INK, linewidth=0.6,
                           gid=GIDS["compute"]))
    ax.add_patch(Rectangle((left + compute, y), length - compute, 0.35, facecolor=CORAL, edgecolor=INK,
                           linewidth=0.6, gid=GIDS["comm"]))
    unit, scale = time_unit(total)
    ax.text(left, y + 0.45, "the price: one step, measured", ha="left", va="bottom", fontsize=fontsize - 2, color=INK)
    shared = ", ranks share cores" if times.oversubscribed else ""
    ax.text(right, y - 0.08, f"compute {times.t_compute / scale:.2g} {unit}, sync {times.t_comm / scale:.2g} {unit}{shared}",
            ha="right", va="top", fontsize=fontsize - 2, color=SLATE)
