"""Step 5's figures: the all-reduce, the replicas with and without it (for SGD, momentum and Adam too), the ring against
a parameter server."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz.engine.layout import caption, lift_notes, measured_notes, new_figure, title_of, wrap_titles
from dpviz.topics.one_group_per_device.plots_all_reduce import (
    plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule,
)
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.all_reduce.records import Schedule


def figure_step5_all_reduce(run: Run) -> Figure:
    """Step 5: the k arrows funnelling into the all-reduce and the one mean coming back."""
    fig, ax = new_figure((7.2, 5.4))
    fig.subplots_adjust(left=0.01, right=0.99, top=0.9, bottom=0.1)
    plot_all_reduce(run, ax=ax)
    alt = (f"Diagram: {run.k} ranks' grey gradient arrows g_i flow into one all-reduce box, and one red mean arrow "
           f"flows back out to every rank; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), measured_notes(lift_notes(fig)), alt=alt)


def figure_step5_replicas(run: Run, alone: Run) -> Figure:
    """Step 5: every replica's parameters with the all-reduce, beside the same run without it."""
    fig, (a, b) = new_figure((6.6, 8.2), nrows=2, gridspec_kw=dict(hspace=0.38))
    plot_replica_params(run, ax=a)
    plot_replica_params(alone, ax=b)
    spread = [float(np.ptp(r.params[..., 0], axis=1).max())
              for r in (run, alone)]
    alt = (f"Two line charts of knob w of each of the {run.k} replicas against step, 0 to {run.steps}: with the "
           f"all-reduce the {run.k} lines lie on one another (largest spread between replicas {spread[0]:.3g}); "
           f"without it they drift apart (largest spread {spread[1]:.3g})")
    return caption(wrap_titles(fig), measured_notes(lift_notes(fig)), alt=alt)


def figure_step5_ring_vs_parameter_server(ring: Schedule, server: Schedule) -> Figure:
    """Step 5: the ring's transfers chunk by chunk, beside the parameter server's star."""
    fig, (a, b) = new_figure((6.8, 11), nrows=2, height_ratios=(1.3, 1), gridspec_kw=dict(hspace=0.4))
    plot_ring_schedule(ring, ax=a)
    plot_parameter_server(server, ax=b)
    k, m = ring.meta["k"], ring.meta["message_bytes"]
    alt = (f"Top, a grid of the ring all-reduce's transfers: {k} ranks by 2(k−1) = {2 * (k - 1)} steps, each cell the "
           f"chunk a rank sends to its right neighbour, each rank sending 2(k−1)/k·M = {2 * (k - 1) * m // k} B for M = {m} B. "
           f"Bottom, a star: {k - 1} ranks push to and pull from rank 0, which receives and sends {(k - 1) * m} B")
    return caption(wrap_titles(fig), measured_notes(lift_notes(fig)), alt=alt)


def figure_replicas_by_optimizer(drift: dict, optimizers=("sgd", "momentum", "adam")) -> Figure:
    """One row per optimizer, the runs with and without the all-reduce side by side, each panel knob w of every
    replica. ``drift`` maps (optimizer, all_reduce) to a Run, as
    :func:`dpviz.topics.one_group_per_device.shipped.drift_runs` returns."""
    optimizers = [opt for opt in optimizers if (opt, True) in drift and (opt, False) in drift]
    if not optimizers:
        raise ValueError(f"drift must hold a run with and one without the all-reduce for an optimizer; got {list(drift)}.")
    fig, axes = new_figure((8.4, 3.8 * len(optimizers)), 2, nrows=len(optimizers), sharex=True, sharey="row",
                           squeeze=False)
    fig.subplots_adjust(hspace=0.4, wspace=0.12)
    for row, opt in enumerate(optimizers):
        for col, synced in enumerate((True, False)):
            ax = axes[row, col]
            plot_replica_params(drift[(opt, synced)], ax=ax)
            ax.set_title(f"{opt}, {'with' if synced else 'without'} the all-reduce", fontsize=11)
            if ax.get_legend() and (row, col) != (0, 1):
                ax.get_legend().remove()  # one legend for all the panels
            if col == 1:
                ax.set_ylabel("")
    lift_notes(fig)  # the runs' notes leave the picture; the caption names the runs once
    runs = [drift[(opt, synced)] for opt in optimizers for synced in (True, False)]
    return caption(fig, "Each panel one run: " + "; ".join(dict.fromkeys(run.describe() for run in runs)))
