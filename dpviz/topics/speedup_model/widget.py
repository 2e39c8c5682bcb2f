"""The speedup model: what the sync costs, with sliders for k, α, β, M and T_compute.

Left, figure s01: one step's time on 1, 2, 4 and 8 devices and on the slider's k, as lavender
compute (T_compute / k) and coral sync (T_comm from the cost model). Right, figure s02: the
speedup S over k for the three preset links, for your α, β (black) with your k marked, and, when
given, for α, β fitted to this machine's measured all-reduce times. All of these curves are
modeled for the workload on the sliders. The speedups this machine's real runs measured are
points, and they sit on a curve of their own (dash-dotted): the one modeled for their workload,
the runs' own T_compute and gradient bytes M with the α, β fitted here, which no slider moves::

    costs_widget(measured_bench=BenchRecord.load("runs/bench"), measured_runs=runs)

:class:`CostsFigure` is the figure, built once; its ``update(k=, alpha=, beta=, M=, t_compute=,
formula=, preset=)`` only sets new widths, y-data and text on the artists already there, which
are drawn again over a cached background. The speedup axis is fixed from S = 1/32 to k_max (a
curve below it runs off the bottom; the marker then points down); the time axis is redrawn with
the bars, its end kept while the longest bar fills between a fifth and two thirds of it.

:func:`costs_widget` is the control layer: the sliders and menus, and the preset menu setting α
and β to a link's nominal numbers (the status line names their source); moving α or β
afterwards turns the settings into your own. A preset move redraws the figure once.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator

from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.topics.speedup_model import plots_speedup as speedup_plot
from dpviz.topics.speedup_model.plots_speedup import plot_speedup, seconds_words
from dpviz.engine.style import INK, REPLICA
from dpviz.topics.speedup_model.plots_timeline import TimelineBars, time_unit
from dpviz.topics.speedup_model.records import BenchRecord
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.ground_floor import costmodel, timing
from dpviz.topics.ground_floor.links import PRESETS, SPEED_ORDER, Link
from dpviz.engine.slider import (
    SliderFigure, TimeTicks, animate, bytes_readout, clip_to_range, find, log_slider, rate_readout,
    seconds_readout,
)

MACHINE = "this machine, fitted"
YOURS = "your α, β"
FIXED_KS = (1, 2, 4, 8)
# Slider ranges, as powers of ten.
ALPHA_RANGE = (-7, -2)  # seconds
BETA_RANGE = (6, 12)  # bytes per second
M_RANGE = (3, 10)  # bytes
T_COMPUTE_RANGE = (-4, 1)  # seconds
# The time axis ends at one of these (times a power of ten), at least ROOM times the longest bar.
ROUND_ENDS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
ROOM = 1.5  # the axis is this much longer than the longest bar when it is set: room for the bar labels
SHRINK = 3.0  # ... and is set again when the longest bar is shorter than the axis / (ROOM * SHRINK)
SPEED_FLOOR = 2.0 ** -5  # the lowest tick of the speedup axis, unless a measured point is lower


class CostsFigure:
    """Figures s01 and s02 side by side, built once; :meth:`update` changes only their artists.

    ``machine`` maps each cost-model formula to the :class:`~dpviz.topics.ground_floor.links.Link` fitted to
    this machine's all-reduce times (it adds the preset :data:`MACHINE`); ``measured`` is a
    :class:`~dpviz.topics.ground_floor.timing.MeasuredSpeedup` and ``workload`` the
    :class:`~dpviz.topics.ground_floor.timing.Workload` of the same runs. With ``machine`` and ``workload`` the
    measured points get the curve modeled for their own workload, for the formula in use.
    """

    def __init__(self, *, k_max: int = 64, machine: dict | None = None, measured=None, workload=None,
                 figsize=(11.5, 5.6)):
        self.k_max = check_int("k_max", k_max, low=8, high=4096)
        self.ks = np.arange(1, self.k_max + 1)
        self.machine = dict(machine or {})
        self.presets = list(SPEED_ORDER) + ([MACHINE] if self.machine else [])
        self.measured = measured
        self.own = {}  # formula -> the measured runs' modeled curve: their T_compute and M, α, β fitted here
        if workload is not None and self.machine:
            self.own = {formula: timing.speedup_curves(self.ks, t_compute=workload.t_compute, M=workload.M,
                                                       links=[link], formula=formula)
                        for formula, link in self.machine.items()}
        self.status_line = ""  # HTML for the status line above the figure
        self._measured_line = self._measured_words(workload)
        self._time = {}  # the time axis now: its end (s), unit and seconds per unit
        self._links = (None, None)  # (T_compute, M, formula; the links' curves for them), as last worked out
        self._yours = (None, None, None)  # (the cost model's inputs; the rows of FIXED_KS, your curve), as last worked out

        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.ax_time, self.ax_speed = ax_time, ax_speed = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=[1.15, 1]))
        fig.subplots_adjust(left=0.075, right=0.985, top=0.87, bottom=0.31, wspace=0.22)
        # Drawn first with placeholder numbers; update() puts in the real ones.
        rows, curves = self._numbers(k=self.k_max, alpha=1e-5, beta=1e9, M=1e8, t_compute=1.0, formula="ring")
        # snap_labels: the numbers after the bars start on whole pixels, as Agg draws text
        self.bars = TimelineBars(ax_time, rows, fontsize=10, mark_source=False, snap_labels=True,
                                 title="s01: one step on k devices, modeled: no step is shorter than its coral bar")
        ax_time.set_yticks(ax_time.get_yticks(), [f"k = {k}" for k in FIXED_KS] + ["your k"])
        # The time axis rescales with the numbers, so its ticks are drawn by hand, as artists that
        # update() moves: redrawing them is cheap, redrawing a matplotlib Axis is not.
        ax_time.tick_params(axis="x", bottom=False, labelbottom=False)
        ax_time.set_xlabel("time for one training step", fontsize=10, loc="right")
        ax_time.xaxis.labelpad = 16
        self.time_ticks = TimeTicks(ax_time, fontsize=9, nbins=5, count=8, below_points=5, mark_size=3.5)
        plot_speedup(curves, measured=measured, measured_model=next(iter(self.own.values()), None), ax=ax_speed,
                     fontsize=10, colours={YOURS: INK, MACHINE: REPLICA})
        ax_speed.set_title("s02: speedup S against k", fontsize=11, loc="left")
        self.lines = {name: find(ax_speed, f"{speedup_plot.GIDS['link']}:{name}") for name in curves.curves}
        self.own_line = find(ax_speed, speedup_plot.GIDS["measured_model"]) if self.own else None
        self.marker, = ax_speed.plot([1], [1.0], "o", markersize=11, markerfacecolor="white", markeredgecolor=INK,
                                     markeredgewidth=2.2, zorder=6)
        self.k_line = ax_speed.axvline(1, color=INK, linewidth=0.8, linestyle=":", zorder=1)
        self.headline = fig.text(0.01, 0.975, "", ha="left", va="top", fontsize=11, color=INK)
        # The legends go under the Axes, where no bar, curve or label can run into them; the legend
        # names the measured runs and the workload of their curve, so the note under s02 goes.
        for ax, left in ((ax_time, -0.01), (ax_speed, -0.1)):  # s02's from under its tick labels: long entries
            legend = ax.get_legend()
            ax.legend(legend.legend_handles, [t.get_text() for t in legend.get_texts()], loc="upper left",
                      bbox_to_anchor=(left, -0.11), ncol=2, fontsize=8, frameon=False, columnspacing=1.2)
        find(ax_speed, speedup_plot.GIDS["note"]).set_text("")

        # The speedup axis stays put: S from SPEED_FLOOR (or the lowest measured point) to k_max.
        low = min(SPEED_FLOOR, float(np.min(measured.speedup)) if measured is not None else 1.0)
        self.floor = float(2.0 ** np.floor(np.log2(low)))
        ax_speed.yaxis.set_major_locator(FixedLocator(2.0 ** np.arange(np.log2(self.floor), np.log2(self.k_max) + 1)))
        ax_speed.yaxis.set_major_formatter(speedup_plot.power_of_two)
        ax_speed.set_ylim(self.floor / 1.5, self.k_max * 1.3)
        ax_speed.set_xlim(1 / 1.15, self.k_max * 1.15)
        # Each link curve keeps its marks at the k where plot_speedup's spacing puts them for the curves drawn now
        # (T_compute = 1 s, M = 100 MB, the controls' defaults): spaced along the curve on the screen anew on every
        # draw, they would slide along the curves as a slider moves, and placing them is half of what drawing a
        # curve takes.
        for line in self.lines.values():
            line.set_markevery(_marks_now(line))

        # What update() changes is drawn on each move over a cached background, and so is what is drawn
        # above it: the left spine over the bars; the measured points and their notes over the curves.
        # The time axis moves with the bars, so it is redrawn too rather than making the background stale.
        # The measured points and their notes never move: they are drawn once, into a layer (fixed_artists).
        above = [a for a in ax_speed.get_children()
                 if (a.get_gid() or "").startswith(("speedup.measured", "speedup.oversubscribed", "speedup.superlinear"))]
        self._fixed = [a for a in above if a is not self.own_line]  # the dash-dot curve changes with the formula
        animate(*self.bars.compute, *self.bars.comm, *self.bars.labels, ax_time.spines["left"], *self.time_ticks.artists(),
                *self.lines.values(), *above, self.marker, self.k_line, self.headline)

    def frame_state(self) -> tuple:
        """What the picture depends on besides the controls: where the time axis ends, kept over moves."""
        return self._time.get("end"), self._time.get("unit")

    def fixed_artists(self) -> list:
        """The measured points, their line and notes: drawn over the curves, the same on every move."""
        return self._fixed

    def link_for(self, name: str, formula: str) -> Link:
        """The link of preset ``name``; this machine's is fitted with ``formula``."""
        return self.machine[formula] if name == MACHINE else PRESETS[name]

    def on_preset(self, *, alpha: float, beta: float, formula: str, preset: str) -> bool:
        """True while α and β still hold the chosen preset's numbers (as far as the sliders reach)."""
        link = self.link_for(preset, formula)
        return _close(alpha, clip_to_range(link.alpha, ALPHA_RANGE)) and _close(beta, clip_to_range(link.beta, BETA_RANGE))

    def update(self, *, k: int, alpha: float, beta: float, M: float, t_compute: float, formula: str,
               preset: str) -> None:
        rows, curves = self._numbers(k=k, alpha=alpha, beta=beta, M=M, t_compute=t_compute, formula=formula)
        if self._time_view(max(row.t_step for row in rows)):
            self._set_time_axis()
        self.bars.show(rows, unit=self._time["unit"], suffix=f" at k = {k}")

        for name, curve in curves.curves.items():
            _set_ydata(self.lines[name], curve.speedup)
        if self.own_line is not None:
            _set_ydata(self.own_line, self.own[formula].curves[MACHINE].speedup)
        s_now = float(curves.curves[YOURS].speedup[k - 1])
        bottom = self.ax_speed.get_ylim()[0]
        shown = max(s_now, bottom * 1.15)  # below the axis, the marker sits on its floor and points down
        self.marker.set_data([k], [shown])
        self.marker.set_marker("o" if s_now >= bottom * 1.15 else "v")
        self.k_line.set_xdata([k, k])

        t_comm_k = rows[-1].t_comm
        on_preset = self.on_preset(alpha=alpha, beta=beta, formula=formula, preset=preset)
        self.headline.set_text(
            f"{preset if on_preset else 'your own α, β'}: S = {s_now:.3g} at k = {k} ({s_now / k:.0%} of k), "
            f"capped by T_compute / T_comm = {_ratio(t_compute, t_comm_k)}"
        )
        # The headline is the figure's first line, above both panels: S at your k is written there, never beside the
        # marker, where at large k it covered the curves. The status line says where the numbers come from.
        if on_preset:
            link_words = f"preset {preset}:<br>{_html(self.link_for(preset, formula).source)}"
        else:
            link_words = f"your own settings (moved away from the preset {_html(preset)})"
        self.status_line = (f"Modeled for the sliders' workload, {formula} all-reduce; α, β: {link_words}"
                        f"{self._measured_line}")

    def _numbers(self, *, k, alpha, beta, M, t_compute, formula):
        """The rows of s01 (k = 1, 2, 4, 8 and yours) and the curves of s02 for these values.

        What a move leaves alone is kept from the move before: the links' curves, which α, β and k do not move,
        and your curve and the rows of k = 1, 2, 4, 8, which k does not.
        """
        workload = dict(t_compute=t_compute, M=M, formula=formula)
        if self._links[0] != workload:
            links = [PRESETS[name] for name in SPEED_ORDER] + ([self.machine[formula]] if self.machine else [])
            self._links = (workload, timing.speedup_curves(self.ks, links=links, **workload).curves)
        model = dict(alpha=alpha, beta=beta, **workload)
        if self._yours[0] != model:
            yours = Link(YOURS, alpha=alpha, beta=beta, source="the sliders")
            self._yours = (model, timing.timeline_rows(FIXED_KS, **model),
                           timing.speedup_curves(self.ks, links=[yours], **workload).curves)
        _, fixed_rows, your_curve = self._yours
        curves = timing.SpeedupCurves(self.ks, self.ks.astype(float), {**self._links[1], **your_curve}, t_compute, M,
                                      formula)
        return fixed_rows + timing.timeline_rows((k,), **model), curves

    def _time_view(self, longest: float) -> bool:
        """Keep the time axis while the longest bar (s) fits it well; else choose a new end. True if it moved."""
        view = self._time
        if "end" in view and view["end"] / (ROOM * SHRINK) <= longest <= view["end"] / ROOM:
            return False
        unit, scale = time_unit(longest)
        view.update(end=_round_end(ROOM * longest / scale) * scale, unit=unit, scale=scale)
        return True

    def _set_time_axis(self) -> None:
        """Move the time axis's end, ticks and tick labels to the view in ``self._time``; the last label has the unit."""
        self.time_ticks.set(self._time["end"] / self._time["scale"], unit=self._time["unit"])

    def _measured_words(self, workload) -> str:
        """For the status line: which runs the points come from and, if drawn, what their own curve assumes."""
        if self.measured is None:
            return ""
        measured = self.measured
        # one line: the legend under s02 spells out the dash-dot curve's workload too
        words = f"points: real runs on {measured.host}, {measured.cores} cores, batch {measured.global_batch}"
        if self.own:
            words += (f"; dash-dot: modeled for them, T_compute = {seconds_words(workload.t_compute)} (k = 1), "
                      f"M = {speedup_plot.bytes_words(workload.M)}, α, β fitted here")
        return "<br>" + _html(words)


def _check_measured(measured_bench, measured_runs) -> None:
    """Refuse a record of the wrong kind in one sentence, before anything is built."""
    if measured_bench is not None and not isinstance(measured_bench, BenchRecord):
        raise TypeError(f"measured_bench must be a BenchRecord (a record of kind 'bench', from "
                        f"dpviz.topics.measuring.run_bench.run_sweep or load('....json')); got {_kind_of(measured_bench)}.")
    if measured_runs is None:
        return
    if not isinstance(measured_runs, dict) or not all(isinstance(r, Run) for r in measured_runs.values()):
        raise TypeError("measured_runs must be a dict {k: Run} of training runs (kind 'run') that share one global "
                        f"batch, k = 1 included; got {_kind_of(measured_runs)}.")


def _kind_of(value) -> str:
    """How an error names what it was given: a record's kind, or the Python type."""
    kind = getattr(type(value), "KIND", None)
    if kind is not None:
        return f"a record of kind {kind.name!r}"
    if isinstance(value, dict):
        inner = sorted({_kind_of(v).removeprefix("a record").removeprefix("a ") for v in value.values()})
        return "a dict of " + (" and ".join(f"records{i}" if i.startswith(" of kind") else i for i in inner) or "nothing")
    return f"a {type(value).__name__}"


def costs_widget(
    *,
    measured_bench=None,
    measured_runs=None,
    k: int = 8,
    t_compute: float = 1.0,
    M: float = 100e6,
    formula: str = "ring",
    preset: str = "100 Gb InfiniBand",
    k_max: int = 64,
) -> SliderFigure:
    """Build the chapter-06 figure and its controls; returns a :class:`SliderFigure` to display.

    ``measured_bench`` (a BenchRecord) adds the preset "this machine, fitted" with α, β fitted
    to its all-reduce times; ``measured_runs`` ({k: Run} sharing one global batch, k = 1 included)
    adds this machine's measured speedups, and with ``measured_bench`` the curve modeled for those
    runs' own T_compute and M. ``t_compute`` (s), ``M`` (bytes), ``formula``, ``k`` and ``preset``
    set where the controls start.
    """
    k_max = check_int("k_max", k_max, low=8, high=4096)
    k = check_int("k", k, low=1, high=k_max)
    t_compute = check_real("t_compute", t_compute, low=10.0 ** T_COMPUTE_RANGE[0], high=10.0 ** T_COMPUTE_RANGE[1])
    M = check_real("M", M, low=10.0 ** M_RANGE[0], high=10.0 ** M_RANGE[1])
    check_choice("formula", formula, costmodel.FORMULAS)
    check_choice("preset", preset, list(SPEED_ORDER) + ([MACHINE] if measured_bench is not None else []))
    _check_measured(measured_bench, measured_runs)
    machine = {}
    if measured_bench is not None:
        measured_on = _machine_words(measured_bench.meta)
        machine = {name: timing.link_from_fit(fit, name=MACHINE, measured_on=measured_on)
                   for name, fit in measured_bench.fits().items()}
    measured = workload = None
    if measured_runs is not None:
        measured, workload = timing.measured_speedup(measured_runs), timing.measured_workload(measured_runs)
    figure = CostsFigure(k_max=k_max, machine=machine, measured=measured, workload=workload)

    start = figure.link_for(preset, formula)
    controls = {  # three rows: the workload, the link, the formula
        "k": widgets.IntSlider(value=k, min=1, max=k_max, description="k", continuous_update=False),
        "t_compute": log_slider("T_compute", t_compute, T_COMPUTE_RANGE),
        "M": log_slider("M gradient", M, M_RANGE),
        "preset": widgets.Dropdown(options=figure.presets, value=preset, description="link"),
        "alpha": log_slider("α latency", clip_to_range(start.alpha, ALPHA_RANGE), ALPHA_RANGE),
        "beta": log_slider("β bandwidth", clip_to_range(start.beta, BETA_RANGE), BETA_RANGE),
        "formula": widgets.Dropdown(options=list(costmodel.FORMULAS), value=formula, description="formula"),
    }

    def linked(name: str, values: dict) -> dict:
        """The preset menu (and the formula, for the fitted preset) moves α and β to that link's numbers."""
        if name == "preset" or (name == "formula" and values["preset"] == MACHINE):
            link = figure.link_for(values["preset"], values["formula"])
            return {"alpha": clip_to_range(link.alpha, ALPHA_RANGE), "beta": clip_to_range(link.beta, BETA_RANGE)}
        return {}

    # The sliders hold SI values (s, B/s, B), which update() takes; their readouts are in the units people read.
    readouts = {"alpha": seconds_readout, "beta": rate_readout, "M": bytes_readout, "t_compute": seconds_readout}
    return SliderFigure(figure, controls, linked=linked, readouts=readouts, repeat_frames=True)


def _marks_now(line) -> list[int]:
    """The points of ``line`` that its ``markevery=(start, step)`` marks as its Axes are laid out now.

    As matplotlib reads such a markevery: a mark every ``step`` of the Axes' diagonal along the curve on the screen,
    from ``start`` of it, each on the point nearest that distance.
    """
    start, step = line.get_markevery()
    ax = line.axes
    xy = ax.transData.transform(np.column_stack(line.get_data(orig=True)))
    along = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(xy, axis=0).T))])  # distance from the first point
    (x0, y0), (x1, y1) = ax.transAxes.transform([(0.0, 0.0), (1.0, 1.0)])
    diagonal = np.hypot(x1 - x0, y1 - y0)
    targets = np.arange(start * diagonal, along[-1], step * diagonal)
    return sorted(set(np.abs(along[None, :] - targets[:, None]).argmin(axis=1).tolist()))


def _set_ydata(line, y) -> None:
    """New y data for a curve, only if it changed: a line keeps its path on the log axes drawn, until its data moves."""
    if not np.array_equal(line.get_ydata(orig=True), y):
        line.set_ydata(y)


def _close(a: float, b: float) -> bool:
    """``np.isclose(a, b)`` for two finite numbers (its default tolerances), without numpy's cost per call."""
    return abs(a - b) <= 1e-8 + 1e-5 * abs(b)


def _round_end(x: float) -> float:
    """The smallest of ROUND_ENDS times a power of ten that is at least ``x``."""
    if not x > 0:
        return 1.0
    decade = 10.0 ** np.floor(np.log10(x))
    return float(next(end * decade for end in ROUND_ENDS if end * decade >= x * (1 - 1e-12)))


def _html(words: str) -> str:
    """Text for the HTML status line: <, > and & escaped; quotes, as in "NCCL's", stay as they are."""
    return html.escape(words, quote=False)


def _ratio(t_compute: float, t_comm: float) -> str:
    return "∞ (no sync cost)" if t_comm <= 0 else f"{t_compute / t_comm:.3g}"


def _machine_words(meta: dict) -> str:
    return f"{meta.get('host', '?')}, {meta.get('cores', '?')} cores, {meta.get('backend', '?')}"
