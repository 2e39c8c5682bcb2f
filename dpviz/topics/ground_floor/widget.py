"""The ground floor's slider: k and T_comm/T_compute on one step's time bars, the speedup curve and the speedup table.

    from dpviz.topics.ground_floor.widget import speedup_widget
    speedup_widget()                 # k = 4, T_comm/T_compute = 0.05

Every number comes from :func:`dpviz.topics.ground_floor.costmodel.speedup` with T_compute = 1 (time is
counted in units of one device's step) and T_comm = the chosen ratio (0 on one device, where
there is nobody to sync with). They are all computed when the widget is built; a move only
hands them to the artists of a :class:`SpeedupFigure`. The numbers are modeled, not measured.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from dpviz.engine.checks import check_choice
from dpviz.engine.style import COMM_HATCH, CORAL, IDEAL_STYLE, INK, LAVENDER, MODELED_NOTE, RED, SLATE
from dpviz.topics.ground_floor.costmodel import speedup
from dpviz.engine.slider import SliderFigure, animate, keep_off_legend

KS = (1, 2, 4, 8, 16, 32, 64)  # the table's rows and the k slider's stops
RATIOS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # T_comm / T_compute
K_CURVE = np.arange(1, max(KS) + 1)
S_RANGE = (0.5, 90.0)  # the curve's vertical view; S < 1 happens once T_comm passes T_compute/2


def modeled(ks, ratio: float) -> np.ndarray:
    """S(k) with T_compute = 1 and T_comm = ``ratio`` (none at k = 1)."""
    ks = np.asarray(ks)
    return np.asarray(speedup(1.0, ks, np.where(ks > 1, ratio, 0.0)), dtype=float)


class SpeedupFigure:
    """One step's time on one device and on k, the modeled S(k) and a table of S for k = 1 to 64.

    Built once; ``update(k=..., ratio=...)`` hands precomputed numbers to the bars, the curve,
    the marker and the table's rows.
    """

    def __init__(self, *, k: int = 4, ratio: float = 0.05, figsize=(11.5, 4.4)):
        self.table = {r: modeled(KS, r) for r in RATIOS}  # every state the sliders can reach
        self.curves = {r: modeled(K_CURVE, r) for r in RATIOS}
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        bars, curve, table = fig.subplots(1, 3, width_ratios=(1.1, 1.2, 0.5))
        fig.subplots_adjust(left=0.1, right=0.99, bottom=0.2, top=0.88, wspace=0.3)
        self._build_bars(bars)
        self._build_curve(curve)
        self._build_table(table)
        fig.text(0.01, 0.02, f"{MODELED_NOTE}: S = T_compute / (T_compute/k + T_comm), T_compute = 1, "
                             "T_comm = 0 at k = 1 (dpviz.topics.ground_floor.costmodel.speedup); not a measurement",
                 fontsize=10, color=SLATE, ha="left", va="bottom")
        self.update(k=k, ratio=ratio)

    def _build_bars(self, ax):
        ax.barh([1], [1.0], color=LAVENDER, edgecolor=INK, height=0.5)
        self.compute = ax.barh([0], [1.0], color=LAVENDER, edgecolor=INK, height=0.5)[0]
        self.comm = ax.barh([0], [0.0], left=[1.0], color=CORAL, edgecolor=INK, height=0.5, hatch=COMM_HATCH)[0]
        ax.text(1.03, 1, "T_compute = 1", va="center", fontsize=11, color=INK)
        self.step_words = ax.text(0.03, -0.4, "", va="top", fontsize=11, color=INK)
        ax.set_yticks([1, 0], ["one device", "each of k"], fontsize=12)
        ax.tick_params(axis="x", labelsize=11)
        ax.set_xlim(0, 1.6)
        ax.set_ylim(-0.85, 1.95)
        ax.set_xlabel("time per step (units of T_compute)", fontsize=12)
        ax.legend(handles=[Patch(facecolor=LAVENDER, edgecolor=INK, label="compute"),
                           Patch(facecolor=CORAL, edgecolor=INK, hatch=COMM_HATCH, label="sync, T_comm")],
                  loc="upper left", ncol=2, fontsize=11, frameon=False, handlelength=2.4, handleheight=1.2)
        ax.set_title("one step", fontsize=13)
        animate(self.compute, self.comm, self.step_words)

    def _build_curve(self, ax):
        ax.plot(K_CURVE, K_CURVE, label="ideal S = k", **IDEAL_STYLE)
        (self.line,) = ax.plot(K_CURVE, self.curves[RATIOS[0]], color=INK, lw=2.2, label=f"S(k), {MODELED_NOTE}")
        self.ceiling = ax.axhline(1.0, color=CORAL, lw=1.2, linestyle=":", label="ceiling T_compute / T_comm")
        (self.marker,) = ax.plot([1], [1], "o", color=RED, markersize=10, zorder=5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(KS, [str(k) for k in KS])
        ax.set_yticks([0.5, 1, 2, 4, 8, 16, 32, 64], ["0.5", "1", "2", "4", "8", "16", "32", "64"])
        ax.set_xlim(0.85, max(KS) * 1.2)
        ax.set_ylim(*S_RANGE)
        ax.tick_params(labelsize=11)
        ax.set_xlabel("k, devices", fontsize=12)
        ax.set_ylabel("speedup S", fontsize=12)
        ax.legend(loc="upper left", fontsize=10, framealpha=0.9)
        self.curve_title = ax.set_title("", fontsize=13)
        animate(self.line, self.ceiling, self.marker, self.curve_title)
        keep_off_legend(ax, self.line, self.ceiling)

    def _build_table(self, ax):
        ax.set_axis_off()
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.text(0.0, 0.97, f"{'k':>3} {'S':>6} {'S/k':>5}", family="monospace", fontsize=13, color=INK,
                va="top", weight="bold")
        self.rows = [ax.text(0.0, 0.97 - 0.115 * (i + 1), "", family="monospace", fontsize=13, va="top")
                     for i in range(len(KS))]
        ax.set_title("S for every k", fontsize=13)
        animate(*self.rows)

    def update(self, *, k: int, ratio: float) -> None:
        check_choice("k", k, KS)
        check_choice("ratio", ratio, RATIOS)
        s = self.table[ratio]
        here = s[KS.index(k)]
        t_comm = ratio if k > 1 else 0.0
        self.compute.set_width(1.0 / k)
        self.comm.set_x(1.0 / k)
        self.comm.set_width(t_comm)
        self.step_words.set_text(f"k = {k}: 1/{k} + {t_comm:g} = {1.0 / k + t_comm:.3g}, so S = {here:.3g}")
        self.line.set_ydata(self.curves[ratio])
        self.ceiling.set_ydata([1.0 / ratio] * 2 if ratio > 0 else [1.0, 1.0])
        self.ceiling.set_visible(ratio > 0 and 1.0 / ratio < S_RANGE[1])
        self.marker.set_data([k], [here])
        self.curve_title.set_text(f"T_comm / T_compute = {ratio:g}")
        for row, kk, ss in zip(self.rows, KS, s):
            row.set_text(f"{kk:>3} {ss:6.2f} {ss / kk:5.0%}")
            row.set_color(RED if kk == k else INK)
        ceiling = f"; S can never pass T_compute/T_comm = {1 / ratio:.3g}" if ratio > 0 else "; free sync: S = k"
        self.status_line = (f"<b>k = {k}</b>, T_comm/T_compute = {ratio:g}: S = {here:.3g} ({MODELED_NOTE}), "
                        f"efficiency S/k = {here / k:.0%}{ceiling}")


def speedup_widget(*, k: int = 4, ratio: float = 0.05, figsize=(11.5, 4.4)) -> SliderFigure:
    """Sliders for k and T_comm/T_compute over the ground floor's speedup picture and table (modeled numbers)."""
    check_choice("k", k, KS)
    check_choice("ratio", ratio, RATIOS)
    figure = SpeedupFigure(k=k, ratio=ratio, figsize=figsize)
    controls = {
        "k": widgets.SelectionSlider(options=list(KS), value=k, description="k (devices)", continuous_update=True),
        "ratio": widgets.SelectionSlider(options=list(RATIOS), value=ratio, description="T_comm / T_compute",
                                         continuous_update=True),
    }
    return SliderFigure(figure, controls, title=figure.status_line, repeat_frames=True)
