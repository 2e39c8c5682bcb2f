"""The chapter's sliders: move k (ranks) and m (micro-batches per rank) over accumulation runs recorded for real.

    from dpviz.topics.accumulation.records import accumulation_grid
    from dpviz.topics.accumulation.widget import accumulation_widget
    accumulation_widget(accumulation_grid())

For the chosen (k, m) the figure shows one update of k·m micro-batches three ways, each bar the
medians of a shipped run: one process running all k·m micro-batches in a row; k ranks that
all-reduce after every micro-batch; and k ranks that accumulate their m micro-batches and
all-reduce once. The status line counts the all-reduce calls and bytes each way.

:class:`AccumulationFigure` builds three bars once (:class:`~dpviz.topics.accumulation.plots.UpdateBars`);
a move sets new vertices and texts on them. The time axis fits each (k, m), so each has a
background of its own, all drawn when the widget is built. No slider starts a run.
"""

from __future__ import annotations

import ipywidgets as widgets
from matplotlib.figure import Figure

from dpviz.topics.accumulation.plots import UpdateBars, legend_handles
from dpviz.engine.style import source_note
from dpviz.topics.accumulation.records import AccumulationRun, grid_run
from dpviz.topics.accumulation.theory import measured_row
from dpviz.engine.slider import SliderFigure, animate


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


class AccumulationFigure:
    """One update for a (k, m) of the shipped grid, three ways; ``update(k=, m=)`` fills the bars in place."""

    def __init__(self, grid: dict, *, figsize=(11, 5.4)):
        self.grid = grid
        self.ks = sorted({k for k, _, _ in grid if k > 1} | {1})
        self.ms = sorted({m for k, m, _ in grid if k > 1}) or sorted({m for _, m, _ in grid})
        self.fig = Figure(figsize=figsize)
        ax = self.fig.add_subplot()
        self.fig.subplots_adjust(left=0.02, right=0.98, top=0.9, bottom=0.34)
        self.bars = UpdateBars(ax, 3, fontsize=11)
        ax.set_title("One update, as recorded: one process against k ranks, with m all-reduces or one",
                     fontsize=12, loc="left")
        ax.legend(handles=legend_handles([]), loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=10,
                  frameon=False)
        first = next(iter(grid.values()))
        source_note(ax, f"Shipped runs: {first.setting()}; every rank 1 thread; "
                        f"medians of {first.steps - 1} updates after the first")
        ax.texts[-1].set_position((0, -84))  # below the legend
        # Each (k, m) has a background of its own, drawn with its labels and totals; only the bars are
        # redrawn over it on a move (text is the slow part of a draw).
        animate(*[bar for kinds in self.bars.bars for bar in kinds.values()])
        self.status_line = ""

    def layouts(self) -> list[dict]:
        """Every (k, m) the sliders reach: each has its own time axis."""
        return [{"k": k, "m": m} for k in self.ks for m in self.ms]

    def rows(self, k: int, m: int) -> list:
        one = grid_run(self.grid, 1, k * m)
        if k == 1:
            return [measured_row(one, label=f"one process: m={m} micro-batch{'es' if m > 1 else ''} in a row "
                                            "(no one to all-reduce with)")]
        every, accumulate = grid_run(self.grid, k, m, "every"), grid_run(self.grid, k, m, "accumulate")
        return [
            measured_row(one, label=f"one process: all k·m = {k * m} micro-batches in a row"),
            measured_row(every, label=f"k={k} ranks, m={m} each: all-reduce after every micro-batch"),
            measured_row(accumulate, label=f"k={k} ranks, m={m} each: accumulate, then all-reduce once"),
        ]

    def update(self, *, k: int, m: int):
        rows = self.rows(k, m)
        self.bars.show(rows)
        self.status_line = self._caption(k, m, rows)
        return (k, m)

    def _caption(self, k: int, m: int, rows) -> str:
        run: AccumulationRun = grid_run(self.grid, k, m)
        head = (f"<b>k={k}, m={m}</b>: {k * m} micro-batches of {run.meta['micro_batch']}, "
                f"{run.meta['global_batch']} examples per update, the same update every way. ")
        if k == 1:
            return head + "One process: no all-reduce at all."
        every, accumulate = rows[1], rows[2]
        words = (f"All-reduce after every micro-batch: {every.calls} call{'s' if every.calls > 1 else ''}, "
                 f"{_mib(every.sent_bytes)} per rank, {every.total('comm') * 1e3:.1f} ms; "
                 f"accumulate first: {accumulate.calls} call, {_mib(accumulate.sent_bytes)}, "
                 f"{accumulate.total('comm') * 1e3:.1f} ms.")
        if run.oversubscribed:
            words += f" <i>k={k} ranks shared {run.meta['cores']} cores and took turns: their times are inflated.</i>"
        return head + words


def accumulation_widget(grid: dict, *, k: int = 2, m: int = 4) -> SliderFigure:
    """Sliders for k and m over ``grid`` ({(k, m, sync): AccumulationRun}, e.g. ``accumulation_grid()``)."""
    if not grid:
        raise ValueError("grid must hold the shipped accumulation runs, keyed by (k, m, sync); got an empty dict.")
    figure = AccumulationFigure(grid)
    if k not in figure.ks or m not in figure.ms:
        raise ValueError(f"k and m must be among the recorded values, k in {figure.ks} and m in {figure.ms}; got k={k}, m={m}.")
    style = {"description_width": "initial"}
    controls = {
        "k": widgets.SelectionSlider(options=figure.ks, value=k, description="k (ranks)", style=style),
        "m": widgets.SelectionSlider(options=figure.ms, value=m, description="m (micro-batches per rank)", style=style),
    }
    return SliderFigure(figure, controls, title="", repeat_frames=True)
