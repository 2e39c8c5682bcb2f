"""Step 1: one training step on one machine, as the loss along one knob.

The black curve is the real loss of the line model as one knob moves and the
other stays frozen; the red dot is θ now; the red arrow is the step
−η ∂L/∂knob that gradient descent takes from there; the joined dots are the
next few steps. The numbers come from :func:`dpviz.topics.one_step.landscape.step1_data`::

    curve = landscape.step1_data(x, y, knob=0, eta=0.1, steps=5)
    plot_loss_along(curve)
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch

from dpviz.topics.one_step.landscape import Step1Data
from dpviz.engine.style import INK, RED, get_ax, source_note

NOTE_OFFSET = (0, -40)  # points below the Axes for the source note
GIDS = {"curve": "step1.curve", "dot": "step1.dot", "arrow": "step1.arrow", "path": "step1.path"}


def _fmt(value: float) -> str:
    return f"{value:.3g}".replace("-", "−")


def step_title(curve: Step1Data) -> str:
    """The title line: η, and what the loss did over the steps (or that it diverges)."""
    first, last = curve.path_loss[0], curve.path_loss[-1]
    if curve.diverging:
        return f"η = {curve.eta:.3g}: diverging, the loss grows {_fmt(first)} → {_fmt(last)} in {curve.steps} steps"
    return f"η = {curve.eta:.3g}: the loss falls {_fmt(first)} → {_fmt(last)} in {curve.steps} steps"


def arrow_end(curve: Step1Data) -> tuple[float, float]:
    """Where the red arrow ends: one step −η ∂L/∂knob from θ, drawn level with the dot."""
    start = float(curve.theta[curve.knob])
    return start - curve.eta * float(curve.grad[curve.knob]), float(curve.path_loss[0])


def fit_arrow_head(ax, arrow, start, end, *, head: float = 20.0) -> None:
    """Shrink the arrow's head when the arrow is short (a small η), so the head never points backwards."""
    pixels = np.hypot(*(ax.transData.transform(end) - ax.transData.transform(start)))
    arrow.set_mutation_scale(float(np.clip(0.8 * pixels, 1.0, head)))


def plot_loss_along(curve: Step1Data, *, ax=None, show_path: bool = True, fontsize: float = 10) -> "Axes":
    """Draw the loss along one knob, θ as a red dot, the downhill step as a red arrow and (optionally) the path.

    ``curve`` comes from :func:`dpviz.topics.one_step.landscape.step1_data`. The view holds the
    curve; steps that leave it (a too-large η) are clipped and the title says the
    loss diverges.
    """
    ax = get_ax(ax)
    knob, frozen = curve.knob_name, curve.frozen_name
    x0, l0 = float(curve.theta[curve.knob]), float(curve.path_loss[0])
    g = float(curve.grad[curve.knob])

    ax.plot(curve.values, curve.loss, color=INK, linewidth=2.2, gid=GIDS["curve"],
            label=f"loss L as {knob} moves ({frozen} frozen)")
    if show_path:
        ax.plot(curve.path[:, curve.knob], curve.path_loss, color=RED, alpha=0.55, linewidth=1.2,
                marker="o", markersize=5, gid=GIDS["path"], zorder=3)
    arrow = FancyArrowPatch((x0, l0), arrow_end(curve), arrowstyle="-|>", mutation_scale=20,
                            color=RED, linewidth=2.5, shrinkA=0, shrinkB=0, gid=GIDS["arrow"], zorder=4)
    ax.add_patch(arrow)
    ax.plot([x0], [l0], "o", color=RED, markersize=10, gid=GIDS["dot"], zorder=5)
    downhill_right = g <= 0
    ax.annotate(f"∂L/∂{knob} = {_fmt(g)}", (x0, l0), xytext=(6 if downhill_right else -6, 10),
                textcoords="offset points", ha="left" if downhill_right else "right", va="bottom",
                fontsize=fontsize, color=RED)

    handles = [
        Line2D([], [], color=INK, linewidth=2.2, label=f"loss L ({frozen} frozen at {curve.theta[1 - curve.knob]:.3g})"),
        Line2D([], [], color=RED, marker="o", linestyle="none", markersize=9, label=f"θ now ({knob} = {x0:.3g})"),
        Line2D([], [], color=RED, linewidth=2.5, marker=">", markersize=8,  # an arrow, as drawn
               label=f"one step: −η·∂L/∂{knob} (downhill)"),
    ]
    if show_path:
        handles.append(Line2D([], [], color=RED, alpha=0.55, marker="o", markersize=5, linewidth=1.2,
                              label=f"{curve.steps} steps {knob} ← {knob} − η·∂L/∂{knob}"))
    top = float(np.nanmax(curve.loss))
    # the curve is a valley: the legend goes in the empty middle, above it or (if the valley floor is high) below it
    where = "lower center" if float(np.nanmin(curve.loss)) > 0.45 * top else "upper center"
    ax.legend(handles=handles, loc=where, fontsize=fontsize - 1, framealpha=0.92)

    ax.set_xlim(float(curve.values[0]), float(curve.values[-1]))
    ax.set_ylim(0, top * 1.12)
    fit_arrow_head(ax, arrow, (x0, l0), arrow_end(curve))
    ax.set_xlabel(f"knob {knob} (one number inside θ)", fontsize=fontsize)
    ax.set_ylabel("loss L (mean squared error)", fontsize=fontsize)
    ax.set_title(step_title(curve), fontsize=fontsize + 1)
    ax.tick_params(labelsize=fontsize - 1)
    source_note(ax, curve.source)
    ax.texts[-1].xyann = NOTE_OFFSET  # below the axis label, not on it
    ax.texts[-1].set_gid("source_note")
    return ax
