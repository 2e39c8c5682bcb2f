"""Step 1's figure: the loss along one knob of the line model, the red dot, the arrow and a few steps."""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.engine.data import line_data
from dpviz.engine.layout import caption, lift_notes, new_figure, title_of, wrap_titles
from dpviz.topics.one_step.plots import plot_loss_along
from dpviz.topics.one_step import landscape

STEP1_SOURCE = "line model in one process, all 512 points (numpy)"  # no run: the loss is computed, not recorded


def figure_step1_loss(eta: float = 0.1) -> Figure:
    """Step 1: the loss along one knob of the line model on all 512 points, the red dot, the arrow and a few steps."""
    x, y = line_data()
    fig, ax = new_figure((6.6, 4.6))
    plot_loss_along(landscape.step1_data(x, y, eta=eta), ax=ax)
    alt = (f"Line chart of the loss L against one knob w of the line model, {len(x)} points: a red dot at θ now, "
           f"a downhill arrow and the first steps of η = {eta:g}; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), [f"Computed: {STEP1_SOURCE}", *lift_notes(fig)], alt=alt)
