"""The chapter's slider: the one-picture summary, walked step by step through a recorded run.

    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.ground_floor import timing
    run = shipped.drift_runs()[("sgd", True)]
    summary_widget(run, timing.step_times(run))

:func:`dpviz.topics.whole_picture.plots_summary.plot_summary` draws step ``step`` once; that drawing is the
background (slices' frames, copy boxes, circles, the all-reduce band, the time bar: most of
the drawing time). :class:`SummaryFigure` then holds the artists that change from one step
to the next (each rank's examples, every θ, the arrows and their common scale, the measured
relative error, the replicas' verdict and the title) and, for every step of the run, the
numbers they show, worked out once when the widget is built. A move hands one step's numbers
to those artists; nothing is drawn anew but them.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz.engine.checks import check_int
from dpviz.engine.style import RED, REPLICA, is_source_note
from dpviz.topics.whole_picture.plots_summary import COL, GIDS, RADIUS, Y_COPY, Y_MEAN, Y_NEW, Y_SLICE, plot_summary
from dpviz.engine.slider import SliderFigure, animate, find

SLICE_W, SLICE_H = 2.4, 1.4  # the slice boxes of plot_summary: width and height in data units


def _theta_words(theta) -> str:
    return f"θ = ({theta[0]:.3f}, {theta[1]:.3f})"


def _error_words(err: float) -> str:
    return f"equals the big-batch gradient\n(relative error {err:.0e}); arrows: (∂L/∂w, ∂L/∂c)"


def _verdict(same: bool) -> tuple[str, str]:
    if same:
        return "every copy stepped by the same ḡ, so all hold bit-identical θ", REPLICA
    return "the copies hold different θ: they drifted", RED


class SummaryFigure:
    """The one-picture summary of ``run`` with every step's numbers precomputed; ``update(step=...)`` shows one.

    ``times`` is :func:`dpviz.topics.ground_floor.timing.step_times` of the run (the corner bar is the run's
    typical step, the same at every step).
    """

    def __init__(self, run, times, *, step: int = 0, figsize=(7.4, 7.4)):
        self.run = run
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        ax = self.ax = fig.subplots()
        fig.subplots_adjust(left=0.01, right=0.99, bottom=0.035, top=0.95)
        plot_summary(run, times, step=step, ax=ax, fontsize=10)  # 9 pt its smallest: room between copies
        for note in [t for t in ax.texts if is_source_note(t)]:
            note.xyann = (0, -1)  # no tick labels under this Axes: the note needs no room for them
        k = run.k
        centres = (np.arange(k) - (k - 1) / 2) * COL
        self.local, self.faint, self.reduced = (find(ax, GIDS[name]) for name in ("local", "local_faint", "reduced"))
        self.dots = [line for line in ax.lines if line.get_marker() == "o"]
        self.before = self._texts_at(centres, Y_COPY - 0.22)
        self.after = self._texts_at(centres, Y_NEW - 0.22)
        (self.error,) = [t for t in ax.texts if t.get_position() == (RADIUS + 0.2, Y_MEAN - 0.4)]
        (self.verdict,) = [t for t in ax.texts if t.get_position() == (0, Y_NEW - 0.95)]
        self.title = ax.set_title(ax.get_title(loc="left"), loc="left")
        if len(self.dots) != k:
            raise RuntimeError(f"plot_summary drew {len(self.dots)} slices of dots for k={k}; the widget expects one per rank.")
        # The verdict under the copies is the same at almost every step, and a long text is slow to draw:
        # it stays in the background, one background per verdict (the layout key update() returns).
        animate(self.local, self.faint, self.reduced, *self.dots, *self.before, *self.after, self.error, self.title)
        self.frames = [self._frame(s, centres) for s in range(run.steps)]  # every step, worked out once

    def layouts(self) -> list[dict]:
        """One step for each verdict the run has, so that each background is drawn when the widget is built."""
        first = {}
        for step, frame in enumerate(self.frames):
            first.setdefault(frame["verdict"], step)
        return [{"step": step} for step in first.values()]

    def _texts_at(self, centres, y) -> list:
        found = {t.get_position(): t for t in self.ax.texts}
        missing = [(cx, y) for cx in centres if (cx, y) not in found]
        if missing:
            raise RuntimeError(f"plot_summary drew no θ text at {missing}; the widget and the plot have parted ways.")
        return [found[(cx, y)] for cx in centres]

    def _frame(self, step: int, centres) -> dict:
        """Everything that step ``step`` shows, in the units plot_summary draws it in."""
        run = self.run
        g_local, g_mean = run.local_grad[step], run.reduced_grad[step, 0]
        arrows = np.concatenate([g_local, g_mean[None]])
        longest = np.hypot(*arrows.T).max()
        per_unit = 0.95 * RADIUS / longest if np.abs(arrows).max() > 0 else 1.0
        rows = run.batch_index[step]
        xs, ys = run.x[rows, 0], run.y[rows, 0]
        x0, y0 = xs.min(), ys.min()
        dx, dy = max(xs.max() - x0, 1e-12), max(ys.max() - y0, 1e-12)
        dots = []
        for i, cx in enumerate(centres):
            mine = run.example_rank == i
            dots.append((cx - SLICE_W / 2 + 0.1 + (xs[mine] - x0) / dx * (SLICE_W - 0.2),
                         Y_SLICE - SLICE_H / 2 + 0.1 + (ys[mine] - y0) / dy * (SLICE_H - 0.2)))
        return dict(
            scale=1 / per_unit, g_local=g_local, g_mean=g_mean, dots=dots,
            before=[_theta_words(t) for t in run.params[step]],
            after=[_theta_words(t) for t in run.params[step + 1]],
            error=_error_words(run.big_batch_rel_err()[step]),
            verdict=_verdict(bool(run.replicas_identical()[step + 1])),
            title=f"Data-parallel training in one picture: step {step} of a real run on k = {run.k} ranks",
        )

    def update(self, *, step: int) -> tuple:
        f = self.frames[check_int("step", step, low=0, high=len(self.frames) - 1)]
        for quiver, (u, v) in ((self.local, f["g_local"].T), (self.faint, f["g_local"].T), (self.reduced, f["g_mean"][:, None])):
            quiver.scale = f["scale"]
            quiver.set_UVC(u, v)
        for line, (px, py) in zip(self.dots, f["dots"]):
            line.set_data(px, py)
        for text, words in zip(self.before + self.after, f["before"] + f["after"]):
            text.set_text(words)
        self.error.set_text(f["error"])
        words, colour = f["verdict"]
        self.verdict.set_text(words)
        self.verdict.set_color(colour)
        self.title.set_text(f["title"])
        return words, colour


def summary_widget(run, times, *, step: int = 0, figsize=(7.4, 7.4)) -> SliderFigure:
    """A step slider over the one-picture summary of ``run`` (a line-model Run, all-reduce on, parameters kept)."""
    figure = SummaryFigure(run, times, step=step, figsize=figsize)
    slider = widgets.IntSlider(value=step, min=0, max=run.steps - 1, description="step", continuous_update=True)
    return SliderFigure(figure, {"step": slider},
                        title=f"The whole picture, step by step: {run.steps} steps of a real run on k = {run.k} ranks",
                        repeat_frames=True)
