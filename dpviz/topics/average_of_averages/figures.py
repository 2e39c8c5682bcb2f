"""Step 3's figures: all b·k arrows averaged at once beside the mean of the k group means; unequal groups, where the
plain mean misses and the weighted one hits."""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.engine.layout import caption, lift_notes, new_figure, wrap_titles
from dpviz.topics.average_of_averages.claims import unequal_groups
from dpviz.topics.average_of_averages.plots import draw_group_averages, plot_big_average, plot_group_averages
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


def figure_unequal_groups(uneven: Run) -> Figure:
    """Unequal groups: the plain mean of the group means, computed here, misses the big-batch tip; the weighted mean the
    run's all-reduce delivered hits it. The titles say so because :func:`unequal_groups` asserts it on ``uneven``."""
    unequal_groups(uneven)
    local = uneven.local_grad[0]
    fig, (plain, weighted) = new_figure((6.8, 10), nrows=2, gridspec_kw={"hspace": 0.35})
    draw_group_averages(plain, local, local.mean(axis=0), uneven.big_grad[0], sizes=list(uneven.shard_sizes),
                        mean_label=r"plain mean $(1/k)\,\Sigma_i\, g_i$ (computed here)")
    plot_group_averages(uneven, ax=weighted)
    plain.set_title("Plain mean of unequal groups: misses")
    weighted.set_title("Weighted mean, from the all-reduce: hits")
    return caption(fig, lift_notes(fig))
