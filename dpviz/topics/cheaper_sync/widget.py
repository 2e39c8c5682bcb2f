"""The chapter's sliders: each cheaper sync's knob (PowerSGD's r, local SGD's H, the group size g) and the link.

    from dpviz.topics.cheaper_sync.widget import cheaper_sync_widget
    cheaper_sync_widget()

:class:`CheaperSyncFigure` draws, built once, one horizontal bar per method, the modeled speedup
S = T_compute / (T_compute/k + T_comm) of the plain ring, fp16, PowerSGD at r, local SGD at H and two
levels of g (NVLink inside a group, the chosen link between), for the chapter's modeled workload
(:mod:`dpviz.topics.cheaper_sync.records_compression`'s ``PRICED_*``). The S axis is fixed from 0 to k, so ``update(r=, H=, g=,
link=)`` only sets bar widths, colours and texts, redrawn over a cached background. Everything here is
modeled; no slider starts a run.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz.engine.checks import check_choice, check_int
from dpviz.topics.cheaper_sync.claims import priced_rows
from dpviz.topics.cheaper_sync.plots import LINK_COLOURS, LINK_HATCHES, method_label
from dpviz.engine.style import GRID_LINE, IDEAL_STYLE, INK, MODELED_NOTE, SLATE
from dpviz.topics.cheaper_sync import records_compression as compression
from dpviz.topics.ground_floor.links import SPEED_ORDER
from dpviz.engine.slider import SliderFigure, animate

RANKS = (1, 2, 4, 8, 16, 32, 64)    # PowerSGD's r on the slider
PERIODS = (1, 2, 4, 8, 16, 32, 64)  # local SGD's H on the slider


def _seconds(t: float) -> str:
    return f"{t:.3g} s" if t >= 1 else f"{t * 1e3:.3g} ms"


class CheaperSyncFigure:
    """Modeled S of five ways to sync, one bar each, on one link; see the module docstring."""

    def __init__(self, *, figsize=(11.5, 4.8), fontsize: float = 12):
        self.k = compression.PRICED_K
        self.groups = [g for g in range(1, self.k + 1) if self.k % g == 0]
        self.status_line = ""
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.ax = ax = fig.subplots()
        fig.subplots_adjust(left=0.2, right=0.97, top=0.84, bottom=0.16)
        y = np.arange(5)
        self.bars = ax.barh(y, np.ones(5), height=0.62, color=LINK_COLOURS[0], edgecolor=INK, linewidth=0.6)
        self.values = [ax.text(0, yi, "", va="center", ha="left", fontsize=fontsize, color=INK) for yi in y]
        self.names = [ax.text(-0.02, yi, "", transform=ax.get_yaxis_transform(), va="center", ha="right",
                              fontsize=fontsize, color=INK) for yi in y]
        ax.set_yticks([])
        ax.set_ylim(4.6, -0.6)
        ax.set_xlim(0, self.k * 1.12)
        ax.axvline(self.k, **IDEAL_STYLE)
        ax.text(self.k, -0.62, f"S = k = {self.k}", ha="center", va="bottom", fontsize=fontsize - 2, color=SLATE)
        ax.grid(True, axis="x", color=GRID_LINE, linewidth=0.8)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_xlabel(f"speedup S on k = {self.k} devices, {MODELED_NOTE}", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize - 1)
        fig.text(0.01, 0.97, f"Modeled: {compression.PRICED_LAYERS} layers of {compression.PRICED_WIDTH}×{compression.PRICED_WIDTH} "
                 f"(M = {compression.PRICED_M / 1e9:.2f} GB), T_compute = {compression.PRICED_T_COMPUTE:g} s on one device",
                 ha="left", va="top", fontsize=fontsize + 1, color=INK, weight="bold")
        self.headline = fig.text(0.01, 0.9, "", ha="left", va="top", fontsize=fontsize, color=INK)
        animate(*self.bars, *self.values, *self.names, self.headline, ax.spines["left"])  # the spine over the bars

    def update(self, *, r: int, H: int, g: int, link: str) -> None:
        r = check_int("r", r, low=1, high=max(RANKS))
        H = check_int("H", H, low=1, high=max(PERIODS))
        g = check_choice("g", g, tuple(self.groups))
        link = check_choice("link", link, SPEED_ORDER)
        rows = priced_rows(link, k=self.k, group_size=g, rank=r, period=H, t_compute=compression.PRICED_T_COMPUTE,
                           M=compression.PRICED_M, shapes=compression.PRICED_SHAPES)
        i = SPEED_ORDER.index(link)
        for bar, value, name, row in zip(self.bars, self.values, self.names, rows):
            bar.set_width(row["speedup"])
            bar.set_facecolor(LINK_COLOURS[i])
            bar.set_hatch(LINK_HATCHES[i])
            inside = row["speedup"] > 0.55 * self.k  # a long bar holds its own label
            value.set_x(row["speedup"] - (0.05 if inside else -0.02))
            value.set_ha("right" if inside else "left")
            value.set_text(f"S = {row['speedup']:.2f}, T_comm = {_seconds(row['t_comm'])}")
            name.set_text(method_label(row))
        best = max(rows[1:], key=lambda row: row["speedup"])
        self.headline.set_text(f"{link} between devices (two levels: NVLink inside groups of {g}): the ring gives "
                               f"S = {rows[0]['speedup']:.2f}, {method_label(best)} {best['speedup']:.2f}")
        self.status_line = (f"Modeled with the α-β ring model and the {link} preset; PowerSGD's bytes as torch's hook "
                        "decides them, its extra compute left out; local SGD's S counts steps, not loss")


def cheaper_sync_widget(*, r: int = compression.PRICED_RANK, H: int = compression.PRICED_PERIOD, g: int = compression.PRICED_GROUP,
                        link: str = "10 Gb Ethernet") -> SliderFigure:
    """Sliders for r, H, g and the link over :class:`CheaperSyncFigure`."""
    figure = CheaperSyncFigure()
    r = check_choice("r", r, RANKS)
    H = check_choice("H", H, PERIODS)
    g = check_choice("g", g, tuple(figure.groups))
    link = check_choice("link", link, SPEED_ORDER)
    controls = {
        "r": widgets.SelectionSlider(options=RANKS, value=r, description="PowerSGD r", continuous_update=True),
        "H": widgets.SelectionSlider(options=PERIODS, value=H, description="local SGD H", continuous_update=True),
        "g": widgets.SelectionSlider(options=figure.groups, value=g, description="group size g",
                                     continuous_update=True),
        "link": widgets.ToggleButtons(options=SPEED_ORDER, value=link, description="link"),
    }
    return SliderFigure(figure, controls, repeat_frames=True)
