"""Step 2: a mini-batch gradient is the mean of per-example gradients.

For the two-knob line model every gradient is an arrow in the (∂L/∂w, ∂L/∂c)
plane. The grey arrows are the per-example gradients one rank recorded for its
mini-batch (``run.example_grad``); the red arrow is the gradient that rank
computed for the whole mini-batch (``run.local_grad``), which is their mean::

    plot_example_grads(run)                                   # a random grab
    plot_example_grads(biased_run, reference=landscape.full_grad(run.x, run.y, run.params[0, 0]))
    plot_mean_vs_sum(run)                                     # the sum is b times longer
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from dpviz.engine.checks import check_int
from dpviz.topics.one_step.landscape import angle_deg
from dpviz.engine.style import GREY, INK, RED, SLATE, ZERO_LINE, get_ax, source_note

LEGEND_ROOM = 0.4      # fraction of the arrows' height kept free above them for the legend
NOTE_OFFSET = (0, -40)  # points below the Axes for the source note, clear of the axis label
EXAMPLE_STYLE = dict(color=GREY, width=0.004, headwidth=4, headlength=5, headaxislength=4.5, alpha=0.85)
MEAN_STYLE = dict(color=RED, width=0.011, headwidth=3.5, headlength=4, headaxislength=3.6)
NOTE_GID = "source_note"
GIDS = {"examples": "step2.examples", "mean": "step2.mean", "reference": "step2.reference", "sum": "step2.sum"}


# --- drawing helpers shared with the Step 3 figures and the widgets ---

def check_record(run, step: int, rank: int | None = None) -> tuple[int, int | None]:
    """Check that ``run`` holds per-example gradients and that ``step`` (and ``rank``) exist in it."""
    if "example_grad" not in getattr(run, "arrays", {}):
        raise ValueError("run must be a line-model Run with per-example gradients (run.example_grad); "
                         "record it with record_run(model='line', ...).")
    step = check_int("step", step, low=0, high=run.steps - 1)
    if rank is not None:
        rank = check_int("rank", rank, low=0, high=run.k - 1)
    return step, rank


def arrows(ax, uv, *, gid: str, **style):
    """Arrows from the origin to each row of ``uv`` (n, 2), in data units: tip = the gradient itself."""
    uv = np.asarray(uv, dtype=float).reshape(-1, 2)
    zeros = np.zeros(len(uv))
    return ax.quiver(zeros, zeros, uv[:, 0], uv[:, 1], angles="xy", scale_units="xy", scale=1,
                     minlength=0, gid=gid, **style)


def dashed_arrow(ax, tip, *, gid: str, color=SLATE):
    """A dashed arrow from the origin to ``tip``: a reference direction, not a measurement of this batch."""
    return ax.annotate("", xy=tuple(np.asarray(tip, dtype=float)), xytext=(0.0, 0.0), gid=gid,
                       arrowprops=dict(arrowstyle="-|>", color=color, linestyle="--", linewidth=2,
                                       mutation_scale=18, shrinkA=0, shrinkB=0))


def gradient_plane(ax, points, *, fontsize: float = 10) -> None:
    """Label the (∂L/∂w, ∂L/∂c) plane, draw faint zero lines, and make room for ``points`` and the origin."""
    ax.axhline(0, color=ZERO_LINE, linewidth=0.8, zorder=0)
    ax.axvline(0, color=ZERO_LINE, linewidth=0.8, zorder=0)
    points = np.vstack([np.zeros((1, 2)), np.asarray(points, dtype=float).reshape(-1, 2)])
    points = points[np.isfinite(points).all(axis=1)]
    low, high = points[:, 1].min(), points[:, 1].max()
    room = np.array([[0.0, high + LEGEND_ROOM * (high - low)]])  # space above the arrows for the legend
    ax.update_datalim(np.vstack([points, room]))
    ax.margins(0.08)
    ax.autoscale_view()
    ax.set_xlabel("∂L/∂w  (slope along knob w)", fontsize=fontsize)
    ax.set_ylabel("∂L/∂c  (slope along knob c)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)


def run_note(ax, run, detail: str) -> None:
    """Write which run made the figure, plus ``detail`` (step, rank ...), under the Axes."""
    if run.meta.get("sampling") == "biased":
        detail += ", biased sampling"
    elif run.meta.get("sampling") == "by_kind":
        detail += ", each rank one kind of example"
    if len(set(run.meta["shard_sizes"])) > 1:
        detail += f", shards {'+'.join(str(s) for s in run.meta['shard_sizes'])}, {run.meta['mean']} mean"
    source_note(ax, f"{run.describe()}; {detail}")
    ax.texts[-1].xyann = NOTE_OFFSET
    ax.texts[-1].set_gid(NOTE_GID)


def grab_words(run) -> str:
    return "biased grab: only examples with x ≥ 0" if run.meta.get("sampling") == "biased" else "random grab"


# --- the figures ---

def plot_example_grads(run, *, step: int = 0, rank: int = 0, ax=None, reference=None,
                       reference_label: str = "gradient of the whole data set", fontsize: float = 10) -> "Axes":
    """One rank's mini-batch: its per-example gradients (grey) and its mini-batch gradient (red).

    The red arrow is ``run.local_grad[step, rank]``, the gradient the rank computed
    for its whole mini-batch; it is the mean of the grey arrows (``run.example_grad``
    at the positions ``run.example_rank == rank``). ``reference`` (a (2,) gradient,
    e.g. :func:`dpviz.topics.one_step.landscape.full_grad` at the same θ) is drawn dashed, so a
    biased grab can be seen pointing away from it.
    """
    step, rank = check_record(run, step, rank)
    ax = get_ax(ax)
    grads = run.example_grad[step][run.example_rank == rank]  # (b, 2)
    mean = run.local_grad[step, rank]                          # (2,)
    b = len(grads)

    arrows(ax, grads, gid=GIDS["examples"], **EXAMPLE_STYLE)
    arrows(ax, mean, gid=GIDS["mean"], zorder=4, **MEAN_STYLE)
    handles = [
        Line2D([], [], color=GREY, linewidth=1.2, label=f"one example's gradient $\\nabla_j$ ({b} of them)"),
        Line2D([], [], color=RED, linewidth=3, label=r"their mean $g = (1/b)\,\Sigma_j\, \nabla_j$"),
    ]
    points = [grads, mean]
    if reference is not None:
        reference = np.asarray(reference, dtype=float).reshape(2)
        dashed_arrow(ax, reference, gid=GIDS["reference"])
        handles.append(Line2D([], [], color=SLATE, linestyle="--", linewidth=2,
                              label=f"{reference_label} ({angle_deg(mean, reference):.0f}° from g)"))
        points.append(reference)
    gradient_plane(ax, np.vstack(points), fontsize=fontsize)
    ax.legend(handles=handles, loc="upper left", fontsize=fontsize - 1, framealpha=0.92)
    ax.set_title(f"Mini-batch of b = {b}, {grab_words(run)}", fontsize=fontsize + 1)
    run_note(ax, run, f"step {step}, rank {rank}")
    return ax


def plot_mean_vs_sum(run, *, step: int = 0, rank: int = 0, ax=None, fontsize: float = 10) -> "Axes":
    """The same mini-batch with the mean (red) and the sum (black) of its per-example gradients.

    The sum is b times the mean: it changes with the batch size, the mean does not,
    which is why η can stay the same when b changes.
    """
    step, rank = check_record(run, step, rank)
    ax = get_ax(ax)
    grads = run.example_grad[step][run.example_rank == rank]
    mean = run.local_grad[step, rank]
    total = grads.sum(axis=0)
    b = len(grads)

    arrows(ax, grads, gid=GIDS["examples"], **EXAMPLE_STYLE)
    arrows(ax, total, gid=GIDS["sum"], zorder=3, **{**MEAN_STYLE, "color": INK})
    arrows(ax, mean, gid=GIDS["mean"], zorder=4, **MEAN_STYLE)
    handles = [
        Line2D([], [], color=GREY, linewidth=1.2, label=f"one example's gradient $\\nabla_j$ ({b} of them)"),
        Line2D([], [], color=RED, linewidth=3, label=r"mean $(1/b)\,\Sigma_j\, \nabla_j$: the same scale for any b"),
        Line2D([], [], color=INK, linewidth=3, label=rf"sum $\Sigma_j\, \nabla_j$ = b·mean, {b}× longer"),
    ]
    gradient_plane(ax, np.vstack([grads, mean, total]), fontsize=fontsize)
    ax.legend(handles=handles, loc="upper left", fontsize=fontsize - 1, framealpha=0.92)
    ax.set_title(f"Mean against sum, b = {b}", fontsize=fontsize + 1)
    run_note(ax, run, f"step {step}, rank {rank}")
    return ax
