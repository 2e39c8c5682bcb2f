"""Step 3 with sliders for k and b: regroup one recorded big batch and compare the two means.

The arrows are the per-example gradients of one recorded global batch (e.g.
``record_run(k=1, b=64, steps=1)`` or ``record_run(k=4, b=16, steps=1)``). The
sliders take the first k·b of them and cut them into k groups of b, in batch
order. One panel: all k·b averaged at once; the other: each group averaged, then the
k group means averaged. The text gives the measured gap between the two red tips,
computed here in float32 from the recorded arrows. The b slider ends at the largest b
the record can fill for the k chosen (k·b at most the examples recorded), so its end
moves with k and every position it offers changes the picture. :class:`AverageFigure` is the figure;
``update(k=..., b=...)`` regroups and sets new arrows and text on it::

    average_widget(run)
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz.engine.checks import check_int
from dpviz.topics.mini_batch.plots import NOTE_GID, check_record, run_note
from dpviz.topics.average_of_averages.plots import GIDS, draw_group_averages, gap_words, plot_big_average
from dpviz.engine.slider import SliderFigure, animate, find


def regroup(grads: np.ndarray, k: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first k·b rows of ``grads`` (B, 2): their mean, the k group means (k, 2), and the mean of those."""
    groups = grads[: k * b].reshape(k, b, -1).mean(axis=1)
    return grads[: k * b].mean(axis=0), groups, groups.mean(axis=0)


class AverageFigure:
    """The Step 3 picture over one recorded global batch, built once for up to ``k_max`` groups.

    ``update(k=..., b=...)`` takes the first k·b per-example gradients (b cut to fit the record),
    shows them and their mean on the left, and on the right the k group means and their mean.
    """

    def __init__(self, run, *, step: int = 0, k: int = 1, b: int = 1, k_max: int = 8, figsize=(11, 4.8)):
        self.grads = grads = run.example_grad[step]  # (B, 2) in batch order, float32 as recorded
        self.total, self.k_max = len(grads), k_max
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.left, self.right = left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2, sharex=None)
        plot_big_average(run, step=step, ax=left)
        big, groups, mean = regroup(grads, k, min(b, self.total // k))
        draw_group_averages(right, np.zeros((k_max, 2)), mean, big, sizes=[b] * k, view=grads,
                            mean_label=r"mean of the group means $(1/k)\,\Sigma_i\, g_i$")
        # both panels show the same view: one set of y labels is enough, and short labels draw faster
        right.tick_params(labelleft=False)
        right.set_ylabel("")
        for ax in (left, right):
            ax.set_xlabel("∂L/∂w")
        left.set_ylabel("∂L/∂c")
        find(left, NOTE_GID).remove()  # one note for both panels, starting under the left one
        run_note(left, run, f"step {step}; the groups are formed here from its per-example gradients")
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.2, top=0.86, wspace=0.06)  # fixed: titles change length

        self.examples, self.big_arrow = find(left, GIDS["examples"]), find(left, GIDS["big"])
        self.group_arrows, self.mean_arrow = find(right, GIDS["groups"]), find(right, GIDS["mean"])
        self.big_tip, self.gap = find(right, GIDS["big_tip"]), find(right, GIDS["difference"])
        left.get_legend().get_texts()[0].set_text("one example's gradient $\\nabla_j$")  # counts go in the titles,
        right.get_legend().get_texts()[0].set_text("group mean $g_i$, one per group")   # so the legends never change
        # everything update() changes; the rest is drawn once and kept as the background
        animate(self.examples, self.big_arrow, self.group_arrows, self.mean_arrow, self.big_tip, self.gap,
                left.title, right.title)

    def update(self, *, k: int, b: int) -> None:
        grads, total = self.grads, self.total
        b_asked, b = b, min(b, total // k)
        big, groups, mean = regroup(grads, k, b)
        shown = np.zeros((total, 2))
        shown[: k * b] = grads[: k * b]  # unused arrows stay in the pool with zero length
        self.examples.set_UVC(shown[:, 0], shown[:, 1])
        self.big_arrow.set_UVC([big[0]], [big[1]])
        padded = np.zeros((self.k_max, 2))
        padded[:k] = groups
        self.group_arrows.set_UVC(padded[:, 0], padded[:, 1])
        self.mean_arrow.set_UVC([mean[0]], [mean[1]])
        self.big_tip.set_data([big[0]], [big[1]])
        capped = f"\n(b cut to {b}: the record holds {total} examples)" if b < b_asked else ""
        self.gap.set_text(gap_words(mean, big))
        self.left.title.set_text(f"All k·b = {k * b} examples averaged at once")
        self.right.title.set_text(f"{k} group means of b = {b} each, then their mean{capped}")


def average_widget(run, *, step: int = 0, k: int | None = None, b: int | None = None, k_max: int = 8,
                   figsize=(11, 4.8)) -> SliderFigure:
    """Sliders for k and b that regroup one recorded global batch: the big mean against the mean of group means.

    k·b can be at most the recorded batch: the b slider's end follows k (``total // k``), and its label says so.
    """
    check_record(run, step)
    total = len(run.example_grad[step])
    k_max = check_int("k_max", k_max, low=1, high=total)
    k = check_int("k", run.k if k is None else k, low=1, high=k_max)
    b = check_int("b", total // k if b is None else b, low=1, high=total // k)
    figure = AverageFigure(run, step=step, k=k, b=b, k_max=k_max, figsize=figsize)
    b_slider = widgets.IntSlider(value=b, min=1, max=total // k, description=f"b (per group; k·b ≤ {total})",
                                 continuous_update=True)
    controls = {
        "k": widgets.IntSlider(value=k, min=1, max=k_max, description="k (groups)", continuous_update=True),
        "b": b_slider,
    }

    def follow_k(name: str, values: dict) -> dict:
        """A move of k moves the end of b's slider to total // k; a b past it comes back to it (ipywidgets clamps)."""
        if name == "k":
            b_slider.max = total // values["k"]
        return {}

    return SliderFigure(figure, controls, title="The average of averages: the mean of all examples equals the mean of the group means",
                        linked=follow_k, repeat_frames=True)
