"""Step 1 with a slider for the step size η.

Every path the slider can show is computed once, when the widget is built, by
real gradient descent (:func:`dpviz.theory.landscape.descent_path`); moving the slider
only hands another precomputed path to the same artists::

    from dpviz.data import line_data
    eta_widget(*line_data())
"""

from __future__ import annotations

import dataclasses

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.path import Path

from dpviz.checks import check_int, check_real
from dpviz.data import LINE_START
from dpviz.theory.landscape import descent_path, knob_range, step1_data
from dpviz.plots.step1 import GIDS, arrow_end, fit_arrow_head, plot_loss_along, step_title
from dpviz.widgets.base import SliderFigure


def find(ax, gid: str):
    """The one artist of ``ax`` whose gid is ``gid``."""
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    if len(found) != 1:
        raise LookupError(f"expected one artist with gid {gid!r} on the Axes, found {len(found)}")
    return found[0]


def keep_off_legend(ax, *artists) -> None:
    """Clip ``artists`` to ``ax`` less its legend's box, as if the legend were drawn over them.

    For artists redrawn on a cached background (which holds the legend): they are drawn
    last, so without this a path that runs into the legend would cover its words. The
    hole is in figure fractions, which do not change when the figure's dpi does.
    """
    renderer = ax.figure.canvas.get_renderer()
    to_fraction = ax.figure.transFigure.inverted()
    (x0, y0), (x1, y1) = to_fraction.transform(ax.bbox.get_points())
    (a0, b0), (a1, b1) = to_fraction.transform(ax.get_legend().get_window_extent(renderer).get_points())
    # the outer box counter-clockwise, the legend's box clockwise: a hole under either fill rule
    verts = [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0), (a0, b0), (a0, b1), (a1, b1), (a1, b0), (a0, b0)]
    codes = [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY] * 2
    for artist in artists:
        artist.set_clip_path(Path(verts, codes), ax.figure.transFigure)


def eta_grid(eta_min: float, eta_max: float, n: int) -> np.ndarray:
    """The η values the slider can take: ``n`` points evenly spaced in log10 from ``eta_min`` to ``eta_max``."""
    return np.logspace(np.log10(eta_min), np.log10(eta_max), n)


def eta_widget(x, y, *, knob: int = 0, steps: int = 8, start=LINE_START, eta: float = 0.1,
               eta_min: float = 0.01, eta_max: float = 1.5, n_eta: int = 31, view_margin: float = 1.0,
               figsize=(7.5, 4.6)) -> SliderFigure:
    """A log-scale slider for η over the Step 1 picture: the loss along one knob and ``steps`` descent steps.

    ``x``, ``y`` are the data (e.g. ``line_data()`` or ``run.x, run.y``). Past
    η ≈ 2 / (curvature of the loss along the knob) the steps overshoot further each
    time and the title says the loss diverges; steps that leave the view are clipped.
    """
    eta_min = check_real("eta_min", eta_min, low=0, low_open=True)
    eta_max = check_real("eta_max", eta_max, low=eta_min, low_open=True)
    n_eta = check_int("n_eta", n_eta, low=2, high=1000)
    check_real("eta", eta, low=eta_min, high=eta_max)
    etas = eta_grid(eta_min, eta_max, n_eta)
    exponent_step = float(np.log10(etas[1] / etas[0]))

    low, high = knob_range(x, y, start, knob=knob, margin=view_margin)
    values = np.linspace(low, high, 201, dtype=np.float32)
    first = int(np.argmin(np.abs(np.log10(etas) - np.log10(eta))))
    base = step1_data(x, y, start, knob=knob, eta=float(etas[first]), steps=steps, values=values)
    curves = []
    for value in etas:  # every state the slider can reach, computed now so a move only swaps arrays
        path = descent_path(x, y, eta=float(value), steps=steps, start=start, knob=knob)
        curves.append(dataclasses.replace(base, eta=float(value), path=path["theta"], path_loss=path["loss"]))

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    plot_loss_along(curves[first], ax=ax)
    fig.tight_layout()
    fig.set_layout_engine(None)  # laid out once; a leftover engine would make every PNG draw the figure twice
    path_line, arrow = find(ax, GIDS["path"]), find(ax, GIDS["arrow"])
    # What update() changes, and the dot drawn above it, is drawn on each move over a cached background
    # that holds the rest; the path and the arrow stay out of the legend's box, as under a drawn legend.
    for artist in (path_line, arrow, find(ax, GIDS["dot"]), ax.title):
        artist.set_animated(True)
    keep_off_legend(ax, path_line, arrow)
    start_point = (float(base.theta[base.knob]), float(base.path_loss[0]))

    slider = widgets.FloatLogSlider(value=float(etas[first]), base=10, min=float(np.log10(etas[0])),
                                    max=float(np.log10(etas[-1])), step=exponent_step, description="η",
                                    readout_format=".3f", continuous_update=True)

    def update(values: dict) -> None:
        i = int(np.clip(np.rint((np.log10(values["eta"]) - np.log10(etas[0])) / exponent_step), 0, n_eta - 1))
        curve = curves[i]
        path_line.set_data(curve.path[:, curve.knob], curve.path_loss)
        arrow.set_positions(start_point, arrow_end(curve))
        fit_arrow_head(ax, arrow, start_point, arrow_end(curve))
        ax.title.set_text(step_title(curve))

    return SliderFigure(fig, {"eta": slider}, update,
                        title=f"Step 1: gradient descent on one machine, {steps} steps, knob {base.knob_name}")
