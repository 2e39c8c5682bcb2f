"""Sliders for chapters 04 and 05: move k, b and the step across runs that were recorded for real.

    from dpviz.records import shipped
    from dpviz.widgets.step45 import devices_widget, all_reduce_widget
    devices_widget(shipped.grid_runs())      # Step 4: k boxes, k slices, k arrows
    all_reduce_widget(shipped.grid_runs())   # Step 5: k arrows into one red arrow and back

Each widget draws a fixed pool of boxes (as many as the largest k) once; a
slider move only hides the unused ones and sets new text, offsets and arrow
components on the rest. Within one frame all arrows share a scale (the largest
at which they all fit their boxes); gradients shrink a lot as the line fits, so
each frame is rescaled and the printed numbers carry the sizes.

The artists that change with b and the step are marked animated, so that a
:class:`~dpviz.widgets.base.SliderFigure` keeps the rest (box frames, legend)
as a background and redraws only them; a move of k shows or hides boxes and
moves the hub, so it asks for a full redraw (``layout_key``).

No slider starts a run: every (k, b) it offers is a record in ``grid_runs``.
"""

from __future__ import annotations

import ipywidgets as widgets
from matplotlib.figure import Figure

from dpviz.plots.step4 import DeviceBoxes, y_range
from dpviz.plots.step5 import AllReduceFunnel
from dpviz.widgets.base import SliderFigure


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


def _updater(figure, grid_runs: dict):
    """The slider callback: show the chosen run; ask for a full redraw when its layout (k, mostly) changed."""
    for artist in figure.changing_artists():
        artist.set_animated(True)
    shown = {"layout": None}

    def update(values):
        run = grid_runs[(values["k"], values["b"])]
        figure.show(run, values["step"])
        layout = figure.layout_key(run)
        changed, shown["layout"] = layout != shown["layout"], layout
        return "full" if changed else None

    return update


def devices_widget(grid_runs: dict, *, k: int = 4, b: int = 8, step: int = 0, figsize=(10, 5.2)) -> SliderFigure:
    """Step 4 with sliders for k, b and the step, over ``grid_runs`` ({(k, b): Run}, e.g. ``shipped.grid_runs()``)."""
    ks, bs, steps = _check_grid(grid_runs, k, b)
    fig = Figure(figsize=figsize)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.01, right=0.99, top=0.91, bottom=0.14)
    any_run = next(iter(grid_runs.values()))
    boxes = DeviceBoxes(ax, slots=max(ks), y_range=y_range(any_run))
    update = _updater(boxes, grid_runs)

    return SliderFigure(fig, _controls(ks, bs, steps, k, b, step), update,
                        title="<b>Step 4</b>: every rank holds the same θ and sees its own slice; move k, b and the step.")


def all_reduce_widget(grid_runs: dict, *, k: int = 4, b: int = 8, step: int = 0, figsize=(9, 6)) -> SliderFigure:
    """Step 5 with sliders for k, b and the step: k grey arrows into the red all-reduced one, and k red copies back."""
    ks, bs, steps = _check_grid(grid_runs, k, b)
    fig = Figure(figsize=figsize)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.01, right=0.99, top=0.93, bottom=0.13)
    funnel = AllReduceFunnel(ax, slots=max(ks))
    update = _updater(funnel, grid_runs)

    return SliderFigure(fig, _controls(ks, bs, steps, k, b, step), update,
                        title="<b>Step 5</b>: the all-reduce averages the k arrows and hands the result to every rank.")
