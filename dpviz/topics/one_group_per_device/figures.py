"""Step 4's figure: k device boxes, one θ, different slices, different arrows."""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.engine.layout import caption, lift_notes, measured_notes, new_figure, title_of, wrap_titles
from dpviz.topics.one_group_per_device.plots import plot_devices
from dpviz.topics.ground_floor.records import Run


def figure_step4_devices(run: Run) -> Figure:
    """Step 4: k device boxes, one θ, different slices, different arrows."""
    fig, ax = new_figure((7.6, 4.2))
    fig.subplots_adjust(left=0.01, right=0.99, top=0.88, bottom=0.12)
    plot_devices(run, ax=ax)
    alt = (f"Diagram of {run.k} device boxes side by side, each holding the same θ, its own slice of b = {run.b} "
           f"examples of the data and its own gradient arrow g_i, each pointing a different way; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), measured_notes(lift_notes(fig)), alt=alt)
