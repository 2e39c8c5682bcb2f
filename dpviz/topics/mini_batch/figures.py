"""Step 2's figures: per-example gradients and their mean, a random grab beside a biased one; one grab's arrows; the
mean against the sum."""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.engine.data import line_data
from dpviz.engine.layout import caption, legend_words, lift_notes, new_figure, title_of, wrap_titles
from dpviz.topics.mini_batch.plots import plot_example_grads, plot_mean_vs_sum
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.one_step import landscape


def figure_step2_gradients(run: Run, biased: Run) -> Figure:
    """Step 2: per-example gradients and their mean, a random grab beside a biased one, each beside the whole data set's gradient."""
    x, y = line_data()
    fig, (a, b) = new_figure((6.6, 9.8), nrows=2, gridspec_kw=dict(hspace=0.32))
    plot_example_grads(run, ax=a, reference=landscape.full_grad(x, y, run.params[0, 0]))
    plot_example_grads(biased, ax=b, reference=landscape.full_grad(x, y, biased.params[0, 0]))
    alt = [f"Two arrow plots in the gradient plane (∂L/∂w across, ∂L/∂c up), each with grey per-example gradient "
           f"arrows, their red mean and the whole data set's gradient: top, {title_of(fig, a)} "
           f"({legend_words(a)[-1]}); bottom, {title_of(fig, b)} ({legend_words(b)[-1]})"]
    return caption(wrap_titles(fig), ["Measured: " + note for note in lift_notes(fig)], alt=alt)


def figure_example_grads(run: Run) -> Figure:
    """One grab: every example's gradient ∇_j (grey) and their mean g (red), from rank 0 at step 0 of ``run``."""
    fig, ax = new_figure((6.8, 4))
    plot_example_grads(run, ax=ax)
    return caption(fig, lift_notes(fig) or run.describe())


def figure_mean_vs_sum(run: Run) -> Figure:
    """The same arrows with their sum beside their mean: the sum is b times as long."""
    fig, ax = new_figure((6.8, 4))
    plot_mean_vs_sum(run, ax=ax)
    return caption(fig, lift_notes(fig) or run.describe())
