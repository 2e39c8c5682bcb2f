"""Step 3's figure: all b·k arrows averaged at once beside the mean of the k group means."""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.engine.layout import caption, lift_notes, new_figure, wrap_titles
from dpviz.topics.average_of_averages.plots import plot_big_average, plot_group_averages
from dpviz.topics.ground_floor.records import Run


def figure_step3_average_of_averages(run: Run) -> Figure:
    """Step 3: all b·k arrows averaged at once beside the mean of the k group means."""
    fig, (a, b) = new_figure((6.6, 9.8), nrows=2, gridspec_kw=dict(hspace=0.32))
    plot_big_average(run, ax=a)
    plot_group_averages(run, ax=b)
    alt = (f"Two arrow plots in the gradient plane: top, all {run.k * run.b} per-example gradients in grey and their "
           f"red mean; bottom, the {run.k} group means of b = {run.b} and the mean of those, which lands on the tip of "
           f"the big-batch mean: the average of equal-sized averages is the big average")
    return caption(wrap_titles(fig), ["Measured: " + note for note in lift_notes(fig)], alt=alt)
