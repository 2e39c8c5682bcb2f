"""The derivation's figures, Steps 1 to 5 and the one-picture summary, drawn from the records of its plan.

Records: :data:`dpviz.topics.speedup_model.figure_records.FIGURE_PLAN` (the line model on k = 4 ranks with and without the
all-reduce, a biased grab, the hand-written ring and parameter server).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.topics.whole_picture import claims as whole_picture
from dpviz.topics.all_reduce.figures import (
    figure_step5_all_reduce, figure_step5_replicas, figure_step5_ring_vs_parameter_server,
)
from dpviz.topics.average_of_averages.figures import figure_step3_average_of_averages
from dpviz.topics.average_of_averages.plots import plot_group_averages
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, lift_notes, new_figure, title_of, wrap_titles
from dpviz.topics.mini_batch.figures import figure_step2_gradients
from dpviz.topics.one_group_per_device.figures import figure_step4_devices
from dpviz.topics.one_step.figures import STEP1_SOURCE, figure_step1_loss
from dpviz.topics.whole_picture.plots_batchnorm import plot_batchnorm_errors, plot_batchnorm_means
from dpviz.topics.whole_picture.plots_summary import plot_summary
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.speedup_model.figure_records import FIGURE_PLAN, DerivationRecords
from dpviz.topics.ground_floor import timing


def figure_summary(run: Run) -> Figure:
    """The whole story in one picture."""
    fig, ax = new_figure((10, 10))  # the picture is laid out in inches; cropped tight it is about 7.8 wide
    plot_summary(run, timing.step_times(run), ax=ax)
    alt = (f"Diagram of one data-parallel step on k = {run.k} ranks: the data split into {run.k} slices of b = {run.b}, "
           f"each rank's gradient, the all-reduce to their mean, the identical update on every replica, and a timeline "
           f"of compute then communication; {title_of(fig, ax)}")
    return caption(wrap_titles(fig), ["Measured: " + note for note in lift_notes(fig)], alt=alt)


def figure_shard_or_batch(by_kind: Run, biased: Run, full) -> Figure:
    """A biased shard against a biased batch: each run's shard gradients and their all-reduced mean, stacked, beside
    ``full``, the whole data set's gradient at the same θ (what :func:`claims.biased_shard_or_batch` asserts)."""
    fig, (fair, skewed) = new_figure((6.8, 11), nrows=2, gridspec_kw={"hspace": 0.55})  # stacked: a narrow column
    plot_group_averages(by_kind, ax=fair, reference=full)
    plot_group_averages(biased, ax=skewed, reference=full)
    fair.set_title("One kind per shard, a fair global batch", fontsize=12)
    skewed.set_title("Both shards x ≥ 0: a biased global batch", fontsize=12)
    return caption(fig, lift_notes(fig))  # which runs: the line under the figure


def figure_batchnorm(bn, *, step: int = 0) -> Figure:
    """Batch normalisation against the average of averages: the means each rank normalised with at ``step``, above
    how far the all-reduced gradient landed from the big batch's at every step, both ways."""
    fig, (means, errors) = new_figure((6.8, 9.5), nrows=2, gridspec_kw={"hspace": 0.45})
    plot_batchnorm_means(bn, step=step, ax=means)
    plot_batchnorm_errors(bn, ax=errors, note=False)
    return caption(fig, lift_notes(fig))  # which run: the line under the figure


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    inputs = DerivationRecords.from_records(records)
    return {
        "step1_loss": (figure_step1_loss(), [STEP1_SOURCE]),
        "step2_gradients": (figure_step2_gradients(inputs.synced, inputs.biased), [inputs.synced, inputs.biased]),
        "step3_average_of_averages": (figure_step3_average_of_averages(inputs.synced), [inputs.synced]),
        "step4_devices": (figure_step4_devices(inputs.synced), [inputs.synced]),
        "step5_all_reduce": (figure_step5_all_reduce(inputs.synced), [inputs.synced]),
        "step5_replicas": (figure_step5_replicas(inputs.synced, inputs.unsynced), [inputs.synced, inputs.unsynced]),
        "step5_ring_vs_parameter_server": (figure_step5_ring_vs_parameter_server(inputs.ring, inputs.server),
                                           [inputs.ring, inputs.server]),
        "summary": (figure_summary(inputs.synced), [inputs.synced]),
    }


GROUP = FigureGroup(name="derivation", plan=FIGURE_PLAN, draw=draw, claims=whole_picture.figure_claims)
