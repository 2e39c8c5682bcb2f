"""Step 3: the mean of all b·k examples equals the mean of the k group means.

Two figures meant to sit side by side (share their axes so the tips line up)::

    fig, (left, right) = plt.subplots(1, 2, sharex=True, sharey=True)
    plot_big_average(run, ax=left)      # every example's gradient and the big-batch gradient
    plot_group_averages(run, ax=right)  # each rank's mean, and the mean the all-reduce delivered

Left, the red arrow is ``run.big_grad``: one process's gradient of the whole
global batch. Right, the faint arrows are the ranks' ``local_grad`` and the red
one is ``reduced_grad``, what the all-reduce gave back. The figure writes how far
apart the two red tips were in the record. With unequal shards the plain mean
``(1/k) Σ g_i`` misses the big-batch tip and the weighted mean ``Σ b_i g_i / Σ b_i``
hits it.
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.textpath import TextPath

from dpviz.topics.mini_batch.plots import (
    EXAMPLE_STYLE, MEAN_STYLE, arrows, check_record, dashed_arrow, gradient_plane, run_note,
)
from dpviz.engine.style import GREY, INK, RED, SLATE, get_ax
from dpviz.engine.tolerance import GRAD_TOLERANCE
from dpviz.topics.one_step.landscape import angle_deg

GROUP_STYLE = dict(color=RED, alpha=0.35, width=0.008, headwidth=3.5, headlength=4, headaxislength=3.6)
BIG_MARK = dict(marker="o", markersize=15, markerfacecolor="none", markeredgecolor=INK, markeredgewidth=1.8,
                linestyle="none")
GIDS = {"examples": "step3.examples", "big": "step3.big", "groups": "step3.groups", "mean": "step3.mean",
        "big_tip": "step3.big_tip", "difference": "step3.difference", "reference": "step3.reference"}
ROUNDING = GRAD_TOLERANCE  # relative difference below which two float32 gradients agree to rounding


def agreement_words(diff: float, scale: float) -> str:
    """Say whether a measured difference is float rounding or a real miss."""
    if diff == 0:
        return "0, the same bits"
    if diff <= ROUNDING * max(scale, 1e-30):
        return f"{diff:.1g} (float rounding)"
    return f"{diff:.3g}, a real miss"


def gap_words(mean, big) -> str:
    """The text under the Step 3 figure: how far the combined tip is from the big-batch tip, measured."""
    diff = float(np.abs(np.asarray(mean) - np.asarray(big)).max())
    return f"measured gap to the big-batch tip: {agreement_words(diff, float(np.abs(big).max()))}"


def mean_words(run) -> str:
    if run.meta.get("mean") == "weighted":
        return r"weighted mean $(\Sigma_i\, b_i g_i) \,/\, \Sigma_i\, b_i$"
    return r"mean of the group means $(1/k)\,\Sigma_i\, g_i$"


def _label_tip(ax, tip, text: str, *, fontsize: float) -> None:
    """Write ``text`` just beyond the tip of the arrow from the origin to ``tip``, along the arrow.

    The view grows to hold the whole label: a label past the tip of the longest arrow would
    otherwise stick out of the Axes.
    """
    direction = ax.transData.transform(tip) - ax.transData.transform((0.0, 0.0))
    direction = direction / max(np.hypot(*direction), 1e-9)
    offset = 12 * direction  # points
    ax.annotate(text, tuple(tip), xytext=tuple(offset), textcoords="offset points", fontsize=fontsize,
                color=RED, ha="left" if direction[0] >= 0 else "right", va="bottom" if direction[1] >= 0 else "top")
    extent = TextPath((0, 0), text, size=fontsize).get_extents()  # points, mathtext included
    far = offset + np.sign(direction) * np.array([extent.width, extent.height]) * 1.15
    for _ in range(2):  # the limits move as the view grows, so the data size of a point does too
        corner = ax.transData.inverted().transform(ax.transData.transform(tip) + far * ax.figure.dpi / 72)
        ax.update_datalim([corner])
        ax.autoscale_view()


def plot_big_average(run, *, step: int = 0, ax=None, fontsize: float = 10) -> "Axes":
    """All b·k per-example gradients of one global batch (grey) and the big-batch gradient (red).

    The red arrow is ``run.big_grad[step]``, computed in one process on the whole
    batch; it is the mean of the grey arrows ``run.example_grad[step]``.
    """
    step, _ = check_record(run, step)
    ax = get_ax(ax)
    grads = run.example_grad[step]  # (B, 2), every rank's examples
    big = run.big_grad[step]
    arrows(ax, grads, gid=GIDS["examples"], **EXAMPLE_STYLE)
    arrows(ax, big, gid=GIDS["big"], zorder=4, **MEAN_STYLE)
    handles = [
        Line2D([], [], color=GREY, linewidth=1.2, label=rf"one example's gradient $\nabla_j$ ({len(grads)} of them)"),
        Line2D([], [], color=RED, linewidth=3, label=r"big-batch mean $g_{big} = (1/bk)\,\Sigma_j\, \nabla_j$"),
    ]
    gradient_plane(ax, np.vstack([grads, big]), fontsize=fontsize)
    ax.legend(handles=handles, loc="upper left", fontsize=fontsize - 1, framealpha=0.92)
    ax.set_title(f"All {len(grads)} examples averaged at once", fontsize=fontsize + 1)
    run_note(ax, run, f"step {step}")
    return ax


def plot_group_averages(run, *, step: int = 0, ax=None, show_big: bool = True, reference=None,
                        reference_label: str = "gradient of the whole data set", fontsize: float = 10) -> "Axes":
    """The k group means (faint red), their combination from the all-reduce (red), and the measured difference.

    The faint arrows are ``run.local_grad[step]``, one per rank; the red arrow is
    ``run.reduced_grad[step, 0]``. With ``show_big`` a black ring marks the
    big-batch tip ``run.big_grad[step]``, and the text says how far the red tip
    is from it. Unequal shards are labelled with their sizes. ``reference`` (a (2,)
    gradient, e.g. :func:`dpviz.topics.one_step.landscape.full_grad` at the same θ) is drawn
    dashed, with its angle to the red arrow in the legend.
    """
    step, _ = check_record(run, step)
    ax = get_ax(ax)
    sizes = [int(s) for s in run.shard_sizes]
    draw_group_averages(ax, run.local_grad[step], run.reduced_grad[step, 0], run.big_grad[step], sizes=sizes,
                        mean_label=mean_words(run) + " (all-reduced)", show_big=show_big, fontsize=fontsize,
                        reference=reference, reference_label=reference_label)
    run_note(ax, run, f"step {step}")
    return ax


def draw_group_averages(ax, groups, mean, big, *, sizes, mean_label: str, show_big: bool = True,
                        view=None, reference=None, reference_label: str = "gradient of the whole data set",
                        fontsize: float = 10) -> None:
    """Draw group means ``groups`` (k, 2) faint, their combination ``mean`` red, the ``big`` tip as a ring, the gap.

    ``sizes`` are the groups' example counts (labelled at the tips when unequal);
    ``view`` (n, 2) are extra points the view must hold (a widget's largest state).
    """
    groups = np.asarray(groups).reshape(-1, 2)
    unequal = len(set(sizes)) > 1
    arrows(ax, groups, gid=GIDS["groups"], **GROUP_STYLE)
    arrows(ax, mean, gid=GIDS["mean"], zorder=4, **MEAN_STYLE)
    handles = [
        Line2D([], [], color=RED, alpha=0.35, linewidth=2.5, label=f"group mean $g_i$, one per group (k = {len(sizes)})"),
        Line2D([], [], color=RED, linewidth=3, label=mean_label),
    ]
    if show_big:
        ax.plot([big[0]], [big[1]], gid=GIDS["big_tip"], zorder=3, **BIG_MARK)
        handles.append(Line2D([], [], label=r"tip of the big-batch mean $g_{big}$", **BIG_MARK))
    points = [groups, np.reshape(mean, (1, 2)), np.reshape(big, (1, 2))]
    if reference is not None:
        reference = np.asarray(reference, dtype=float).reshape(2)
        dashed_arrow(ax, reference, gid=GIDS["reference"])
        handles.append(Line2D([], [], color=SLATE, linestyle="--", linewidth=2,
                              label=f"{reference_label} ({angle_deg(mean, reference):.0f}° from the red arrow)"))
        points.append(reference[None])
    if view is not None:
        points.append(np.asarray(view).reshape(-1, 2))
    gradient_plane(ax, np.vstack(points), fontsize=fontsize)
    if unequal:
        ax.margins(0.16)  # room for the size labels beyond the tips
        ax.autoscale_view()
        for g, size in zip(groups, sizes):
            _label_tip(ax, g, f"$b_i$={size}", fontsize=fontsize - 1)
    ax.legend(handles=handles, loc="upper left", fontsize=fontsize - 1, framealpha=0.92)
    ax.text(0.98, 0.03, gap_words(mean, big), transform=ax.transAxes, ha="right", va="bottom", fontsize=fontsize,
            color=INK, gid=GIDS["difference"], bbox=dict(facecolor="white", edgecolor="none", alpha=0.85))
    shards = f"{len(sizes)} groups of b = {sizes[0]}" if not unequal else f"{len(sizes)} groups of b = {', '.join(map(str, sizes))}"
    ax.set_title(f"Average each of {shards}, then average those", fontsize=fontsize + 1)
