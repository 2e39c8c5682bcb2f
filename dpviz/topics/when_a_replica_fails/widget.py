"""The chapter's slider: the checkpoint cost δ and the mean time between failures over the modeled waste curve.

    from dpviz.topics.when_a_replica_fails.widget import young_daly_widget
    young_daly_widget(record)      # a Young/Daly record (run_shipped.shipped()[1])

:class:`YoungDalyFigure` draws, built once, the modeled time lost per unit of useful work,
δ/τ + τ/(2·MTBF) (:func:`dpviz.topics.when_a_replica_fails.theory.waste_fraction`), against C, the steps between
checkpoints (τ = C · the measured step time), with Young/Daly's τ* = √(2·δ·MTBF) marked; the record's measured
points (what its runs lost, over their useful work) stay where they were measured, at the record's δ and MTBF.
``update(delta_ms=, mtbf_steps=)`` only moves the curve, the τ* line and the texts. No slider starts a run.
"""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz.engine.checks import check_real
from dpviz.engine.slider import SliderFigure, animate, clip_to_range, log_slider
from dpviz.engine.style import CORAL, GRID_LINE, INK, MODELED_NOTE, SLATE, open_frame
from dpviz.topics.when_a_replica_fails import theory

DELTA_EXPONENTS = (-1, 2)  # δ from 0.1 ms to 100 ms
MTBF_EXPONENTS = (0, 3)    # a failure every 1 to 1,000 steps of work
C_MAX = 1000               # steps between checkpoints on the x axis


def _number(x: float) -> str:
    """Three significant digits, with no exponent for the slider's largest values: 0.135, 3.68, 361, 1,000."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


class YoungDalyFigure:
    """Modeled waste against C at δ and MTBF, τ* marked, the record's measured points fixed; see the module."""

    def __init__(self, record, *, figsize=(8.2, 4.4), fontsize: float = 11):
        self.step_seconds = float(record.meta["step_seconds"])
        self.status_line = ""
        self.every = np.unique(np.round(np.logspace(0, np.log10(C_MAX), 300)))
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.ax = ax = fig.subplots()
        fig.subplots_adjust(left=0.13, right=0.97, top=0.8, bottom=0.15)
        useful = record.meta["steps"] * self.step_seconds
        delta_ms, mtbf = 1e3 * record.meta["save_seconds"], record.meta["mtbf_steps"]
        ax.plot(record.every, record.waste / useful, linestyle="none", marker="o", markersize=8, color=CORAL,
                markeredgecolor=INK, label=f"measured: {record.meta['k']} ranks, δ = {delta_ms:.2f} ms, a failure "
                                           f"every {mtbf:g} steps")
        (self.curve,) = ax.plot(self.every, np.ones_like(self.every), color=SLATE, linestyle="--", linewidth=2,
                                label=f"{MODELED_NOTE}: δ/τ + τ/(2·MTBF), at the sliders' δ and MTBF")
        # from above the legend up: a τ* far along the axis never runs through the legend's words
        self.optimum = ax.axvline(1.0, ymin=0.3, color=INK, linewidth=2, label="Young/Daly τ* = √(2·δ·MTBF)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(0.8, C_MAX)  # room for the dot at C = 1
        ax.set_ylim(1e-3, 1e2)
        ax.grid(True, which="major", color=GRID_LINE, linewidth=0.8)
        ax.set_axisbelow(True)
        ax.set_xlabel(f"C, steps between checkpoints (τ = C × {1e3 * self.step_seconds:.2f} ms, measured)",
                      fontsize=fontsize)
        ax.set_ylabel("time lost per second\nof useful work", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize - 1)
        ax.legend(fontsize=fontsize - 1, frameon=False, loc="lower left")
        open_frame(ax)
        fig.text(0.01, 0.97, "How often to checkpoint: saves cost δ each, a failure redoes half an interval",
                 ha="left", va="top", fontsize=fontsize + 1, color=INK, weight="bold")
        self.headline = fig.text(0.01, 0.9, "", ha="left", va="top", fontsize=fontsize, color=INK)
        animate(self.curve, self.optimum, self.headline)

    def update(self, *, delta_ms: float, mtbf_steps: float) -> None:
        delta = 1e-3 * check_real("delta_ms", delta_ms, low=0, low_open=True)
        mtbf = check_real("mtbf_steps", mtbf_steps, low=0, low_open=True) * self.step_seconds
        tau = theory.young_daly_interval(delta, mtbf)
        self.curve.set_ydata(theory.waste_fraction(self.every * self.step_seconds, delta, mtbf))
        self.optimum.set_xdata([tau / self.step_seconds] * 2)
        least = float(theory.waste_fraction(tau, delta, mtbf))
        self.headline.set_text(f"δ = {_number(1e3 * delta)} ms, a failure every {_number(mtbf_steps)} steps: τ* = "
                               f"{_number(tau / self.step_seconds)} steps, losing {_number(100 * least)} % of the time "
                               "there")
        self.status_line = (f"Modeled: δ/τ + τ/(2·MTBF), least at τ* = √(2·δ·MTBF) = {1e3 * tau:.3g} ms of work; "
                            "restarts cost the same at every C and are left out; the dots were measured")


def young_daly_widget(record, *, delta_ms: float | None = None, mtbf_steps: float | None = None) -> SliderFigure:
    """Sliders for δ (ms) and the MTBF (steps) over :class:`YoungDalyFigure`; they start at the record's values."""
    figure = YoungDalyFigure(record)
    delta_ms = 1e3 * record.meta["save_seconds"] if delta_ms is None else delta_ms
    mtbf_steps = record.meta["mtbf_steps"] if mtbf_steps is None else mtbf_steps
    controls = {
        "delta_ms": log_slider("checkpoint cost δ (ms)", clip_to_range(delta_ms, DELTA_EXPONENTS), DELTA_EXPONENTS),
        "mtbf_steps": log_slider("steps between failures", clip_to_range(mtbf_steps, MTBF_EXPONENTS),
                                 MTBF_EXPONENTS),
    }
    return SliderFigure(figure, controls, repeat_frames=True)
