"""Sliders for this chapter and all-reduce: move k, b and the step across runs that were recorded for real.

    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.one_group_per_device.widget import devices_widget, all_reduce_widget
    devices_widget(shipped.grid_runs())      # Step 4: k boxes, k slices, k arrows
    all_reduce_widget(shipped.grid_runs())   # Step 5: k arrows into one red arrow and back

Each widget draws a fixed pool of boxes (as many as the largest k) once; a
slider move only hides the unused ones and sets new text, offsets and arrow
components on the rest. Within one frame all arrows share a scale (the largest
at which they all fit their boxes); gradients shrink a lot as the line fits, so
each frame is rescaled and the printed numbers carry the sizes.

:class:`GridFigure` is the figure: a :class:`~dpviz.topics.one_group_per_device.plots.DeviceBoxes` or
:class:`~dpviz.topics.one_group_per_device.plots_all_reduce.AllReduceFunnel` over the grid, with ``update(k=, b=, step=)``.
The artists that change with b and the step are marked animated, so that a
:class:`~dpviz.engine.slider.SliderFigure` keeps the rest (box frames, legend)
as a background and redraws only them. A move of k shows or hides boxes and
moves the hub, and a move of b changes the provenance note: each run has its own
background (its ``layout_key``), drawn once when the widget is built, so that a
move of k or b too redraws only the animated artists.

No slider starts a run: every (k, b) it offers is a record in ``grid_runs``.
"""

from __future__ import annotations

import ipywidgets as widgets
from matplotlib.figure import Figure

from dpviz.topics.one_group_per_device.plots import DeviceBoxes, y_range
from dpviz.topics.one_group_per_device.plots_all_reduce import AllReduceFunnel
from dpviz.engine.slider import SliderFigure, animate


def _check_grid(grid_runs: dict, k: int, b: int) -> tuple[list, list, int]:
    if not grid_runs:
        raise ValueError("grid_runs must hold at least one run, keyed by (k, b); got an empty dict.")
    ks = sorted({key[0] for key in grid_runs})
    bs = sorted({key[1] for key in grid_runs})
    missing = [(kk, bb) for kk in ks for bb in bs if (kk, bb) not in grid_runs]
    if missing:
        raise ValueError(f"grid_runs must hold a run for every (k, b) pair of its k and b values; missing {missing}.")
    if k not in ks or b not in bs:
        raise ValueError(f"k and b must be among the recorded values, k in {ks} and b in {bs}; got k={k}, b={b}.")
    for (kk, bb), run in grid_runs.items():
        if run.k != kk or run.meta["b"] != bb or run.meta["model"] != "line":
            raise ValueError(f"grid_runs[({kk}, {bb})] must be a line-model run with k={kk}, b={bb}; got {run!r}.")
    steps = min(run.steps for run in grid_runs.values())
    return ks, bs, steps


def _controls(ks, bs, steps, k, b, step) -> dict:
    style = {"description_width": "initial"}
    return {
        "k": widgets.SelectionSlider(options=ks, value=k, description="k (ranks)", style=style, continuous_update=True),
        "b": widgets.SelectionSlider(options=bs, value=b, description="b (per rank)", style=style, continuous_update=True),
        "step": widgets.IntSlider(min=0, max=steps - 1, value=min(step, steps - 1), description="step", style=style),
    }


class GridFigure:
    """A Step 4 or Step 5 figure over runs recorded for a grid of (k, b), built once.

    ``make(ax, slots)`` builds the artist holder (``DeviceBoxes`` or ``AllReduceFunnel`` with
    ``slots`` boxes); ``update(k=, b=, step=)`` shows that run and step on it and returns the
    holder's layout key, so that each run keeps a background of its own.
    """

    def __init__(self, grid_runs: dict, make, *, figsize, margins: dict):
        self.grid_runs = grid_runs
        self.fig = Figure(figsize=figsize)
        ax = self.fig.add_subplot()
        self.fig.subplots_adjust(**margins)
        self.holder = make(ax, max(k for k, _ in grid_runs))
        animate(*self.holder.changing_artists())

    def layouts(self) -> list[dict]:
        """One set of values for each layout the controls can reach: one per run."""
        return [{"k": k, "b": b} for k, b in sorted(self.grid_runs)]

    def update(self, *, k: int, b: int, step: int):
        run = self.grid_runs[(k, b)]
        self.holder.show(run, step)
        return self.holder.layout_key(run)


def devices_widget(grid_runs: dict, *, k: int = 4, b: int = 8, step: int = 0, figsize=(10, 5.2)) -> SliderFigure:
    """Step 4 with sliders for k, b and the step, over ``grid_runs`` ({(k, b): Run}, e.g. ``shipped.grid_runs()``)."""
    ks, bs, steps = _check_grid(grid_runs, k, b)
    any_run = next(iter(grid_runs.values()))
    figure = GridFigure(grid_runs, lambda ax, slots: DeviceBoxes(ax, slots=slots, y_range=y_range(any_run)),
                        figsize=figsize, margins=dict(left=0.01, right=0.99, top=0.91, bottom=0.14))
    return SliderFigure(figure, _controls(ks, bs, steps, k, b, step),
                        title="<b>Step 4</b>: every rank holds the same θ and sees its own slice; move k, b and the step.",
                        repeat_frames=True)


def all_reduce_widget(grid_runs: dict, *, k: int = 4, b: int = 8, step: int = 0, figsize=(9, 6)) -> SliderFigure:
    """Step 5 with sliders for k, b and the step: k grey arrows into the red all-reduced one, and k red copies back."""
    ks, bs, steps = _check_grid(grid_runs, k, b)
    figure = GridFigure(grid_runs, lambda ax, slots: AllReduceFunnel(ax, slots=slots),
                        figsize=figsize, margins=dict(left=0.01, right=0.99, top=0.93, bottom=0.13))
    return SliderFigure(figure, _controls(ks, bs, steps, k, b, step),
                        title="<b>Step 5</b>: the all-reduce averages the k arrows and hands the result to every rank.",
                        repeat_frames=True)
