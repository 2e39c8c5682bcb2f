"""Step 2 with a slider for the batch size b (and a random/biased toggle).

The arrows are the per-example gradients one rank recorded for one large
mini-batch (record e.g. ``record_run(k=1, b=64, steps=1)``); the slider keeps the
first b of them and the red arrow is their mean. With a second run recorded with
``sampling="biased"``, a toggle swaps in its arrows::

    batch_widget(run, biased=biased_run)
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz.checks import check_int
from dpviz.theory.landscape import angle_deg, full_grad
from dpviz.plots.step2 import GIDS, NOTE_GID, check_record, grab_words, plot_example_grads
from dpviz.widgets.base import SliderFigure
from dpviz.widgets.step1 import find


def _batch(run, step: int, rank: int) -> dict:
    """One run's arrows at ``step`` for ``rank``, the θ they were taken at, and the whole data set's gradient there."""
    theta = run.params[step, rank]
    return {
        "grads": run.example_grad[step][run.example_rank == rank],  # (b, 2)
        "reference": full_grad(run.x, run.y, theta),                # computed once, here, by autograd
        "words": grab_words(run),
        "note": f"{run.describe()}; step {step}, rank {rank}" + (", biased sampling" if run.meta.get("sampling") == "biased" else ""),
    }


def batch_widget(run, *, biased=None, step: int = 0, rank: int = 0, b: int = 8, figsize=(7.2, 5.2)) -> SliderFigure:
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

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    plot_example_grads(run, step=step, rank=rank, ax=ax, reference=batches["random"]["reference"])
    for batch in batches.values():  # one view for every state the controls can reach
        ax.update_datalim(np.vstack([batch["grads"], batch["reference"][None]]))
    ax.autoscale_view()
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.15, top=0.88)  # fixed: the title changes length

    examples, mean = find(ax, GIDS["examples"]), find(ax, GIDS["mean"])
    reference, note = find(ax, GIDS["reference"]), find(ax, NOTE_GID)
    legend_texts = ax.get_legend().get_texts()
    legend_texts[0].set_text("one example's gradient $\\nabla_j$")  # counts and angles go in the title,
    legend_texts[2].set_text("gradient of the whole data set")      # so the legend never changes
    pool = len(examples.U)
    # what update() changes is redrawn on each move over a cached background that holds the rest
    for artist in (examples, reference, mean, ax.title, note):
        artist.set_animated(True)

    controls = {"b": widgets.IntSlider(value=b, min=1, max=n, description="b", continuous_update=True)}
    if biased is not None:
        controls["grab"] = widgets.ToggleButtons(options=["random", "biased"], value="random", description="grab")

    def update(values: dict) -> None:
        batch = batches[values.get("grab", "random")]
        b = values["b"]
        shown = np.zeros((pool, 2))
        shown[:b] = batch["grads"][:b]  # the rest of the pool stays as zero-length arrows
        examples.set_UVC(shown[:, 0], shown[:, 1])
        g = batch["grads"][:b].mean(axis=0)
        mean.set_UVC([g[0]], [g[1]])
        reference.xy = tuple(batch["reference"])
        ax.title.set_text(f"b = {b}, {batch['words']}\n"
                          f"g is {angle_deg(g, batch['reference']):.0f}° from the whole data set's gradient")
        note.set_text(batch["note"])

    return SliderFigure(fig, controls, update, title="Step 2: the mini-batch gradient is the mean of the examples' gradients")
