"""Step 2 with a slider for the batch size b (and a random/biased toggle).

The arrows are the per-example gradients one rank recorded for one large
mini-batch (record e.g. ``record_run(k=1, b=64, steps=1)``); the slider keeps the
first b of them and the red arrow is their mean. With a second run recorded with
``sampling="biased"``, a toggle swaps in its arrows. :class:`BatchFigure` is the figure;
``update(b=..., grab=...)`` sets new arrows and text on it::

    batch_widget(run, biased=biased_run)
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz.engine.checks import check_int
from dpviz.topics.one_step.landscape import angle_deg, full_grad
from dpviz.topics.mini_batch.plots import GIDS, NOTE_GID, check_record, grab_words, plot_example_grads
from dpviz.engine.slider import SliderFigure, animate, find


def _batch(run, step: int, rank: int) -> dict:
    """One run's arrows at ``step`` for ``rank``, the θ they were taken at, and the whole data set's gradient there."""
    theta = run.params[step, rank]
    return {
        "grads": run.example_grad[step][run.example_rank == rank],  # (b, 2)
        "reference": full_grad(run.x, run.y, theta),                # computed once, here, by autograd
        "words": grab_words(run),
        "note": f"{run.describe()}; step {step}, rank {rank}" + (", biased sampling" if run.meta.get("sampling") == "biased" else ""),
    }


class BatchFigure:
    """The Step 2 picture over a pool of recorded per-example gradients, built once.

    ``batches`` maps a grab's name ("random", "biased") to what :func:`_batch` returns; ``run``,
    ``step`` and ``rank`` say which record the first one came from. ``update(b=..., grab=...)``
    shows the first b arrows of that grab and their mean.
    """

    def __init__(self, run, batches: dict, *, step: int = 0, rank: int = 0, figsize=(7.2, 5.4)):
        self.batches = batches
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.ax = ax = fig.add_subplot()
        plot_example_grads(run, step=step, rank=rank, ax=ax, reference=batches["random"]["reference"])
        for batch in batches.values():  # one view for every state the controls can reach
            ax.update_datalim(np.vstack([batch["grads"], batch["reference"][None]]))
        ax.autoscale_view()
        fig.subplots_adjust(left=0.11, right=0.97, bottom=0.18, top=0.88)  # fixed: the title changes length

        self.examples, self.mean = find(ax, GIDS["examples"]), find(ax, GIDS["mean"])
        self.reference, self.note = find(ax, GIDS["reference"]), find(ax, NOTE_GID)
        legend_texts = ax.get_legend().get_texts()
        legend_texts[0].set_text("one example's gradient $\\nabla_j$")  # counts and angles go in the title,
        legend_texts[2].set_text("gradient of the whole data set")      # so the legend never changes
        self.pool = len(self.examples.U)
        # what update() changes is redrawn on each move over a cached background that holds the rest
        animate(self.examples, self.reference, self.mean, ax.title, self.note)

    def update(self, *, b: int, grab: str = "random") -> None:
        batch = self.batches[grab]
        shown = np.zeros((self.pool, 2))
        shown[:b] = batch["grads"][:b]  # the rest of the pool stays as zero-length arrows
        self.examples.set_UVC(shown[:, 0], shown[:, 1])
        g = batch["grads"][:b].mean(axis=0)
        self.mean.set_UVC([g[0]], [g[1]])
        self.reference.xy = tuple(batch["reference"])
        self.ax.title.set_text(f"b = {b}, {batch['words']}\n"
                               f"g is {angle_deg(g, batch['reference']):.0f}° from the whole data set's gradient")
        self.note.set_text(batch["note"])


def batch_widget(run, *, biased=None, step: int = 0, rank: int = 0, b: int = 8, figsize=(7.2, 5.4)) -> SliderFigure:
    """A slider for b over one recorded mini-batch: the first b per-example gradients (grey) and their mean (red).

    ``biased`` (optional) is a run recorded with ``sampling="biased"``; a toggle
    then switches between the two grabs. The dashed arrow is the gradient of the
    whole data set at the same θ, for reference.
    """
    check_record(run, step, rank)
    batches = {"random": _batch(run, step, rank)}
    if biased is not None:
        check_record(biased, step, rank)
        if biased.meta.get("sampling") != "biased":
            raise ValueError("biased must be a run recorded with sampling='biased'; "
                             f"got one with sampling={biased.meta.get('sampling')!r}.")
        batches["biased"] = _batch(biased, step, rank)
    n = min(len(batch["grads"]) for batch in batches.values())
    b = check_int("b", b, low=1, high=n)
    figure = BatchFigure(run, batches, step=step, rank=rank, figsize=figsize)

    controls = {"b": widgets.IntSlider(value=b, min=1, max=n, description="b", continuous_update=True)}
    if biased is not None:
        controls["grab"] = widgets.ToggleButtons(options=["random", "biased"], value="random", description="grab")
    return SliderFigure(figure, controls, title="A mini-batch: its gradient is the mean of the examples' gradients",
                        repeat_frames=True)
