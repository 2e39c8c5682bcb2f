"""The derivation's figures, Steps 1 to 5 and the one-picture summary, drawn from the records of its plan.

Records: :data:`dpviz.records.figure_set.FIGURE_PLAN` (the line model on k = 4 ranks with and without the
all-reduce, a biased grab, the hand-written ring and parameter server).
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz.claims import whole_picture
from dpviz.data import line_data
from dpviz.figures.group import FigureGroup
from dpviz.figures.layout import caption, lift_notes, new_figure, title_of, wrap_titles
from dpviz.plots.step1 import plot_loss_along
from dpviz.plots.step2 import plot_example_grads
from dpviz.plots.step3 import plot_big_average, plot_group_averages
from dpviz.plots.step4 import plot_devices
from dpviz.plots.step5 import plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule
from dpviz.plots.summary import plot_summary
from dpviz.records import Run, Schedule
from dpviz.records.figure_set import FIGURE_PLAN, Inputs
from dpviz.theory import landscape, timing


STEP1_SOURCE = "line model in one process, all 512 points (numpy)"  # no run: the loss is computed, not recorded


def figure_step1_loss(eta: float = 0.1) -> Figure:
    """Step 1: the loss along one knob of the line model on all 512 points, the red dot, the arrow and a few steps."""
    x, y = line_data()
    fig, ax = new_figure((6.6, 4.6))
    plot_loss_along(landscape.step1_data(x, y, eta=eta), ax=ax)
    alt = (f"Line chart of the loss L against one knob w of the line model, {len(x)} points: a red dot at θ now, "
           f"a downhill arrow and the first steps of η = {eta:g}; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), [f"Computed: {STEP1_SOURCE}", *lift_notes(fig)], alt=alt)


def figure_step2_gradients(run: Run, biased: Run) -> Figure:
    """Step 2: per-example gradients and their mean, a random grab beside a biased one, each beside the whole data set's gradient."""
    x, y = line_data()
    fig, (a, b) = new_figure((6.6, 9.8), nrows=2, gridspec_kw=dict(hspace=0.32))
    plot_example_grads(run, ax=a, reference=landscape.full_grad(x, y, run.params[0, 0]))
    plot_example_grads(biased, ax=b, reference=landscape.full_grad(x, y, biased.params[0, 0]))
    alt = [f"Two arrow plots in the gradient plane (∂L/∂w across, ∂L/∂c up), each with grey per-example gradient "
           f"arrows, their red mean and the whole data set's gradient: top, {title_of(fig, a)} "
           f"({_legend_words(a)[-1]}); bottom, {title_of(fig, b)} ({_legend_words(b)[-1]})"]
    return caption(wrap_titles(fig), ["Measured: " + note for note in lift_notes(fig)], alt=alt)


def figure_step3_average_of_averages(run: Run) -> Figure:
    """Step 3: all b·k arrows averaged at once beside the mean of the k group means."""
    fig, (a, b) = new_figure((6.6, 9.8), nrows=2, gridspec_kw=dict(hspace=0.32))
    plot_big_average(run, ax=a)
    plot_group_averages(run, ax=b)
    alt = (f"Two arrow plots in the gradient plane: top, all {run.k * run.b} per-example gradients in grey and their "
           f"red mean; bottom, the {run.k} group means of b = {run.b} and the mean of those, which lands on the tip of "
           f"the big-batch mean: the average of equal-sized averages is the big average")
    return caption(wrap_titles(fig), ["Measured: " + note for note in lift_notes(fig)], alt=alt)


def figure_step4_devices(run: Run) -> Figure:
    """Step 4: k device boxes, one θ, different slices, different arrows."""
    fig, ax = new_figure((7.6, 4.2))
    fig.subplots_adjust(left=0.01, right=0.99, top=0.88, bottom=0.12)
    plot_devices(run, ax=ax)
    alt = (f"Diagram of {run.k} device boxes side by side, each holding the same θ, its own slice of b = {run.b} "
           f"examples of the data and its own gradient arrow g_i, each pointing a different way; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), _measured(lift_notes(fig)), alt=alt)


def figure_step5_all_reduce(run: Run) -> Figure:
    """Step 5: the k arrows funnelling into the all-reduce and the one mean coming back."""
    fig, ax = new_figure((7.2, 5.4))
    fig.subplots_adjust(left=0.01, right=0.99, top=0.9, bottom=0.1)
    plot_all_reduce(run, ax=ax)
    alt = (f"Diagram: {run.k} ranks' grey gradient arrows g_i flow into one all-reduce box, and one red mean arrow "
           f"flows back out to every rank; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), _measured(lift_notes(fig)), alt=alt)


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
    return caption(wrap_titles(fig), _measured(lift_notes(fig)), alt=alt)


def figure_step5_ring_vs_parameter_server(ring: Schedule, server: Schedule) -> Figure:
    """Step 5: the ring's transfers chunk by chunk, beside the parameter server's star."""
    fig, (a, b) = new_figure((6.8, 11), nrows=2, height_ratios=(1.3, 1), gridspec_kw=dict(hspace=0.4))
    plot_ring_schedule(ring, ax=a)
    plot_parameter_server(server, ax=b)
    k, m = ring.meta["k"], ring.meta["message_bytes"]
    alt = (f"Top, a grid of the ring all-reduce's transfers: {k} ranks by 2(k−1) = {2 * (k - 1)} steps, each cell the "
           f"chunk a rank sends to its right neighbour, each rank sending 2(k−1)/k·M = {2 * (k - 1) * m // k} B for M = {m} B. "
           f"Bottom, a star: {k - 1} ranks push to and pull from rank 0, which receives and sends {(k - 1) * m} B")
    return caption(wrap_titles(fig), _measured(lift_notes(fig)), alt=alt)


def figure_summary(run: Run) -> Figure:
    """The whole story in one picture."""
    fig, ax = new_figure((10, 10))  # the picture is laid out in inches; cropped tight it is about 7.8 wide
    plot_summary(run, timing.step_times(run), ax=ax)
    alt = (f"Diagram of one data-parallel step on k = {run.k} ranks: the data split into {run.k} slices of b = {run.b}, "
           f"each rank's gradient, the all-reduce to their mean, the identical update on every replica, and a timeline "
           f"of compute then communication; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), ["Measured: " + note for note in lift_notes(fig)], alt=alt)


def _legend_words(ax) -> list[str]:
    """The words of ``ax``'s legend entries."""
    legend = ax.get_legend()
    return [" ".join(t.get_text().split()) for t in legend.get_texts()] if legend is not None else [""]


def _measured(notes: list[str]) -> list[str]:
    """The plots' notes ("run: ...", "schedule: ...") as a caption's parts, each saying it was measured."""
    return ["Measured: " + note.split(": ", 1)[-1] for note in notes]


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    inputs = Inputs.from_records(records)
    return {
        "step1_loss": (figure_step1_loss(), [STEP1_SOURCE]),
        "step2_gradients": (figure_step2_gradients(inputs.main, inputs.biased), [inputs.main, inputs.biased]),
        "step3_average_of_averages": (figure_step3_average_of_averages(inputs.main), [inputs.main]),
        "step4_devices": (figure_step4_devices(inputs.main), [inputs.main]),
        "step5_all_reduce": (figure_step5_all_reduce(inputs.main), [inputs.main]),
        "step5_replicas": (figure_step5_replicas(inputs.main, inputs.alone), [inputs.main, inputs.alone]),
        "step5_ring_vs_parameter_server": (figure_step5_ring_vs_parameter_server(inputs.ring, inputs.server),
                                           [inputs.ring, inputs.server]),
        "summary": (figure_summary(inputs.main), [inputs.main]),
    }


GROUP = FigureGroup(name="derivation", plan=FIGURE_PLAN, draw=draw, claims=whole_picture.figure_claims)
