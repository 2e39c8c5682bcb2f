"""The chapter's slider: the Gantt chart of a real pipelined step for every p, m and schedule shipped with dpviz.

    from dpviz.topics.splitting.records_pipeline import shipped_grid
    from dpviz.topics.splitting.widget import pipeline_widget
    pipeline_widget(shipped_grid())

Left, the measured Gantt chart of the chosen run (:class:`dpviz.topics.splitting.plots_pipeline.GanttBars`, built
once with room for the largest p and m). Right, the bubble formula (p−1)/(m+p−1) for the chosen p,
modeled, with the measured idle share of every shipped run of that p, the chosen one ringed.
A move of m or of the schedule redraws only the bars, the ring and the title over a cached
background; a move of p switches to that p's background (its rows, its time axis, its curve),
each drawn once. No slider starts a run.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from dpviz.topics.splitting.plots_pipeline import GanttBars, plot_bubble
from dpviz.engine.style import RED
from dpviz.topics.splitting.records_pipeline import idle_points
from dpviz.topics.splitting import theory_pipeline as theory
from dpviz.engine.slider import SliderFigure, animate

SCHEDULE_LABELS = {"gpipe": "GPipe: all F, then all B", "1f1b": "1F1B: one F, one B"}


def _check_grid(grid: dict, p: int, m: int, schedule: str) -> tuple[list, list, list]:
    if not grid:
        raise ValueError("grid must hold at least one PipelineRun, keyed by (p, m, schedule); got an empty dict.")
    ps = sorted({key[0] for key in grid})
    ms = sorted({key[1] for key in grid})
    schedules = [s for s in theory.SCHEDULES if any(key[2] == s for key in grid)]
    missing = [(a, b, c) for a in ps for b in ms for c in schedules if (a, b, c) not in grid]
    if missing:
        raise ValueError(f"grid must hold a run for every (p, m, schedule) of its values; missing {missing[:3]}.")
    if p not in ps or m not in ms or schedule not in schedules:
        raise ValueError(f"p, m and schedule must be among the recorded values, p in {ps}, m in {ms} and schedule in "
                         f"{schedules}; got p={p}, m={m}, schedule={schedule!r}.")
    for (a, b, c), run in grid.items():
        if (run.p, run.m, run.schedule) != (a, b, c):
            raise ValueError(f"grid[({a}, {b}, {c!r})] must be a run with p={a}, m={b}, schedule={c!r}; got {run!r}.")
    return ps, ms, schedules


class PipelineFigure:
    """The Gantt chart beside the bubble panel, built once; ``update(p=, m=, schedule=)`` refills them."""

    def __init__(self, grid: dict, *, figsize=(11.5, 5.6)):
        self.grid = grid
        self.ps = sorted({key[0] for key in grid})
        self.ms = sorted({key[1] for key in grid})
        self.fig = Figure(figsize=figsize)
        self.gantt_ax, self.bubble_ax = self.fig.subplots(1, 2, width_ratios=(1.75, 1))
        self.fig.subplots_adjust(left=0.07, right=0.98, top=0.86, bottom=0.27, wspace=0.22)
        self.bars = GanttBars(self.gantt_ax, slots_p=max(self.ps), slots_m=max(self.ms))
        # The bubble panel: one modeled curve and the measured points of one p, refilled on a move of p.
        plot_bubble({max(self.ps): (np.array([1, 2]), np.array([0.5, 0.5]))},
                    {"p": np.array([max(self.ps)] * 2), "m": np.array([1, 2]), "idle": np.array([0.5, 0.5]),
                     "oversubscribed": np.array([False, True])}, ax=self.bubble_ax, title="")
        self.curve, self.points, self.hollow = self.bubble_ax.lines[:3]
        (self.ring,) = self.bubble_ax.plot([], [], "o", ms=20, markerfacecolor="none", markeredgecolor=RED,
                                           markeredgewidth=2.5, zorder=5)
        self.bubble_title = self.bubble_ax.set_title("", fontsize=12, loc="left")
        self.bubble_ax.set_xlim(0.8, max(self.ms) * 1.25)
        self.ends = {p: max(max(np.nanmax(r.fwd), np.nanmax(r.bwd)) for key, r in grid.items() if key[0] == p) * 1.02
                     for p in self.ps}
        animate(*self.bars.changing_artists(), self.ring)
        self.shown_p = None
        self.status_line = ""

    def layouts(self) -> list[dict]:
        """One background per p."""
        return [{"p": p} for p in self.ps]

    def _show_p(self, p: int) -> None:
        runs = [r for key, r in sorted(self.grid.items()) if key[0] == p]
        m_all = np.arange(1, max(self.ms) + 1)
        self.curve.set_data(m_all, theory.bubble_fraction(p, m_all))
        self.curve.set_label(f"modeled: (p−1)/(m+p−1), p={p}")
        points = idle_points(runs)
        over = points["oversubscribed"]
        self.points.set_data(points["m"][~over], points["idle"][~over])
        self.hollow.set_data(points["m"][over], points["idle"][over])
        cores = runs[0].meta["cores"]
        self.points.set_label(f"measured idle share, p={p} (both schedules)")
        self.hollow.set_label(f"measured, p={p} stages on {cores} cores")
        shown = [self.curve] + [line for line, rows in ((self.points, ~over), (self.hollow, over)) if rows.any()]
        self.bubble_ax.legend(handles=shown, fontsize=9, frameon=False, loc="lower left")
        self.bubble_title.set_text(f"Idle share against m, p={p}"
                                   + (f": {p} stages > {cores} cores,\nso measured stages also wait for a core"
                                      if p > cores else ""))
        self.bars.set_layout(p, self.ends[p])
        self.shown_p = p

    def update(self, *, p: int, m: int = None, schedule: str = None):
        m = self.ms[0] if m is None else m
        schedule = schedule or theory.SCHEDULES[0]
        run = self.grid[(p, m, schedule)]
        if p != self.shown_p:
            self._show_p(p)
        self.bars.show(run)
        idle = float(run.idle_fraction().mean())
        self.ring.set_data([m], [idle])
        self.status_line = (
            f"<b>p={p}, m={m}, {html.escape(theory.SCHEDULE_NAMES[schedule])}</b>: measured idle share "
            f"{idle:.2f} (mean over stages), modeled (p−1)/(m+p−1) = {run.bubble():.2f}; a stage held at most "
            f"{int(run.max_in_flight.max())} micro-batches' activations at once."
        )
        return p


def pipeline_widget(grid: dict, *, p: int = 2, m: int = 4, schedule: str = "gpipe", figsize=(11.5, 5.6)) -> SliderFigure:
    """Sliders for p and m and a schedule switch over ``grid`` ({(p, m, schedule): PipelineRun}, e.g. ``shipped_grid()``)."""
    ps, ms, schedules = _check_grid(grid, p, m, schedule)
    style = {"description_width": "initial"}
    controls = {
        "p": widgets.SelectionSlider(options=ps, value=p, description="p (stages)", style=style),
        "m": widgets.SelectionSlider(options=ms, value=m, description="m (micro-batches)", style=style),
        "schedule": widgets.ToggleButtons(options=[(SCHEDULE_LABELS[s], s) for s in schedules], value=schedule,
                                          description="schedule", style=style),
    }
    return SliderFigure(PipelineFigure(grid, figsize=figsize), controls, repeat_frames=True)


__all__ = ["PipelineFigure", "pipeline_widget"]
