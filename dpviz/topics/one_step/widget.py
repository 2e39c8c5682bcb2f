"""Step 1 with a slider for the step size η.

Every path the slider can show is computed once, when the widget is built, by
real gradient descent (:func:`dpviz.topics.one_step.landscape.descent_path`); moving the slider
only hands another precomputed path to the same artists of an :class:`EtaFigure`::

    from dpviz.engine.data import line_data
    eta_widget(*line_data())
"""

from __future__ import annotations

import dataclasses

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz.engine.checks import check_int, check_real
from dpviz.engine.data import LINE_START
from dpviz.topics.one_step.landscape import descent_path, knob_range, step1_data
from dpviz.topics.one_step.plots import GIDS, arrow_end, fit_arrow_head, plot_loss_along, step_title
from dpviz.engine.slider import MIN_POINTS, SliderFigure, animate, at_least, find, keep_off_legend


def eta_grid(eta_min: float, eta_max: float, n: int) -> np.ndarray:
    """The η values the slider can take: ``n`` points evenly spaced in log10 from ``eta_min`` to ``eta_max``."""
    return np.logspace(np.log10(eta_min), np.log10(eta_max), n)


class EtaFigure:
    """The Step 1 picture for every η of ``etas``, built once; ``update(eta=...)`` swaps in that η's descent.

    ``x``, ``y`` are the data; ``steps`` descent steps from ``start`` along ``knob`` are computed
    for each η now, so a move only hands precomputed arrays to the path, the arrow and the title.
    """

    def __init__(self, x, y, etas, *, knob: int = 0, steps: int = 8, start=LINE_START, eta: float | None = None,
                 view_margin: float = 1.0, figsize=(7.5, 4.6)):
        self.etas = np.asarray(etas, dtype=float)
        self._log_etas = np.log10(self.etas)
        low, high = knob_range(x, y, start, knob=knob, margin=view_margin)
        values = np.linspace(low, high, 201, dtype=np.float32)
        first = self.nearest(self.etas[0] if eta is None else eta)
        base = step1_data(x, y, start, knob=knob, eta=float(self.etas[first]), steps=steps, values=values)
        self.base = base
        self.curves = []
        for value in self.etas:  # every state the slider can reach, computed now so a move only swaps arrays
            path = descent_path(x, y, eta=float(value), steps=steps, start=start, knob=knob)
            self.curves.append(dataclasses.replace(base, eta=float(value), path=path["theta"], path_loss=path["loss"]))

        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.ax = ax = fig.add_subplot()
        plot_loss_along(self.curves[first], ax=ax)
        at_least(fig, MIN_POINTS)  # before the layout and the legend's hole below: both depend on text sizes
        fig.tight_layout()
        fig.set_layout_engine(None)  # laid out once; a leftover engine would make every PNG draw the figure twice
        self.path, self.arrow = find(ax, GIDS["path"]), find(ax, GIDS["arrow"])
        # What update() changes, and the dot drawn above it, is drawn on each move over a cached background
        # that holds the rest; the path and the arrow stay out of the legend's box, as under a drawn legend.
        animate(self.path, self.arrow, find(ax, GIDS["dot"]), ax.title)
        keep_off_legend(ax, self.path, self.arrow)
        self.start = (float(base.theta[base.knob]), float(base.path_loss[0]))

    def nearest(self, eta: float) -> int:
        """The precomputed η nearest ``eta`` on the log scale."""
        return int(np.argmin(np.abs(self._log_etas - np.log10(eta))))

    def update(self, *, eta: float) -> None:
        curve = self.curves[self.nearest(eta)]
        self.path.set_data(curve.path[:, curve.knob], curve.path_loss)
        self.arrow.set_positions(self.start, arrow_end(curve))
        fit_arrow_head(self.ax, self.arrow, self.start, arrow_end(curve))
        self.ax.title.set_text(step_title(curve))


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
    figure = EtaFigure(x, y, etas, knob=knob, steps=steps, start=start, eta=eta, view_margin=view_margin,
                       figsize=figsize)
    exponent_step = float(np.log10(etas[1] / etas[0]))
    slider = widgets.FloatLogSlider(value=float(etas[figure.nearest(eta)]), base=10, min=float(np.log10(etas[0])),
                                    max=float(np.log10(etas[-1])), step=exponent_step, description="η",
                                    readout_format=".3f", continuous_update=True)
    return SliderFigure(figure, {"eta": slider},
                        title=f"One training step: gradient descent on one machine, {steps} steps, knob {figure.base.knob_name}",
                        repeat_frames=True)
