"""Chapter 06: what the sync costs, with sliders for k, α, β, M and T_compute.

Left, figure s01: one step's time on 1, 2, 4 and 8 devices and on the slider's k, as lavender
compute (T_compute / k) and coral sync (T_comm from the cost model). Right, figure s02: the
speedup S over k for the three preset links, for your α, β (black) with your k marked, and, when
given, for α, β fitted to this machine's measured all-reduce times, with the speedups this
machine's real runs measured as points. Everything on the figure is modeled except those points
and the fitted α, β, and the figure says so::

    costs_widget(measured_bench=BenchRecord.load("runs/bench"), measured_runs=runs)

The preset menu sets α and β to a link's nominal numbers (the status line names their source);
moving α or β afterwards turns the settings into your own; a preset move redraws the figure once.
The figure is built once; each move only sets new widths, y-data and text on the artists already
there, and only those are drawn again over a cached background. The axis limits stay put while
the numbers fit them (the longest bar between about a fifth and two thirds of the time axis, the lowest S
within four octaves of the speedup axis's floor); a move that leaves that range moves the limits
and redraws the whole figure.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator

from dpviz.theory import costmodel, timing
from dpviz.checks import check_choice, check_int, check_real
from dpviz.theory.links import PRESETS, SPEED_ORDER, Link
from dpviz.plots import speedup as speedup_plot
from dpviz.plots import timeline as timeline_plot
from dpviz.plots.speedup import plot_speedup
from dpviz.plots.style import INK, REPLICA
from dpviz.plots.timeline import plot_timelines, row_label, time_unit
from dpviz.widgets.base import SliderFigure

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
OCTAVES = 4  # the speedup axis's floor is set again when the lowest S is this many octaves above it


def costs_widget(
    *,
    measured_bench=None,
    measured_runs=None,
    k: int = 8,
    t_compute: float = 1.0,
    m: float = 100e6,
    formula: str = "ring",
    preset: str = "100 Gb InfiniBand",
    k_max: int = 64,
) -> SliderFigure:
    """Build the chapter-06 figure and its controls; returns a :class:`SliderFigure` to display.

    ``measured_bench`` (a BenchRecord) adds the preset "this machine, measured" with α, β fitted
    to its all-reduce times; ``measured_runs`` ({k: Run} sharing one global batch, k = 1 included)
    adds this machine's measured speedups. ``t_compute`` (s), ``m`` (bytes), ``formula``, ``k`` and
    ``preset`` set where the controls start.
    """
    k_max = check_int("k_max", k_max, low=8, high=4096)
    k = check_int("k", k, low=1, high=k_max)
    t_compute = check_real("t_compute", t_compute, low=10.0 ** T_COMPUTE_RANGE[0], high=10.0 ** T_COMPUTE_RANGE[1])
    m = check_real("m", m, low=10.0 ** M_RANGE[0], high=10.0 ** M_RANGE[1])
    check_choice("formula", formula, costmodel.FORMULAS)
    fits = measured_bench.fits() if measured_bench is not None else {}
    where = _where(measured_bench.meta) if measured_bench is not None else ""
    presets = list(SPEED_ORDER) + ([MACHINE] if fits else [])
    check_choice("preset", preset, presets)
    measured = timing.measured_speedup(measured_runs) if measured_runs is not None else None

    def link_for(name, formula):
        if name == MACHINE:
            return timing.link_from_fit(fits[formula], name=MACHINE, where=where)
        return PRESETS[name]

    start = link_for(preset, formula)
    controls = {
        "k": widgets.IntSlider(value=k, min=1, max=k_max, description="k", continuous_update=False),
        "alpha": _log_slider("α (s)", _clip(start.alpha, ALPHA_RANGE), ALPHA_RANGE),
        "beta": _log_slider("β (B/s)", _clip(start.beta, BETA_RANGE), BETA_RANGE),
        "m": _log_slider("M (bytes)", m, M_RANGE),
        "t_compute": _log_slider("T_compute (s)", t_compute, T_COMPUTE_RANGE),
        "formula": widgets.Dropdown(options=list(costmodel.FORMULAS), value=formula, description="formula"),
        "preset": widgets.Dropdown(options=presets, value=preset, description="link"),
    }

    def use_preset():
        """The preset menu (or the formula, for the fitted preset) moves α and β to that link's numbers."""
        link = link_for(controls["preset"].value, controls["formula"].value)
        controls["alpha"].value = _clip(link.alpha, ALPHA_RANGE)
        controls["beta"].value = _clip(link.beta, BETA_RANGE)

    sf_box = []  # the SliderFigure, once built
    menus = {"preset": _OneRedraw(sf_box, use_preset),
             "formula": _OneRedraw(sf_box, lambda: controls["preset"].value == MACHINE and use_preset())}
    for name, menu in menus.items():
        controls[name].observe(menu.first, names="value")  # before the SliderFigure's own observer

    ks = np.arange(1, k_max + 1)

    def numbers(values):
        rows = timing.timeline_rows(FIXED_KS, t_compute=values["t_compute"], alpha=values["alpha"],
                                    beta=values["beta"], m=values["m"], formula=values["formula"])
        rows += timing.timeline_rows((values["k"],), t_compute=values["t_compute"], alpha=values["alpha"],
                                     beta=values["beta"], m=values["m"], formula=values["formula"])
        links = [PRESETS[name] for name in SPEED_ORDER]
        if fits:
            links.append(link_for(MACHINE, values["formula"]))
        links.append(Link(YOURS, alpha=values["alpha"], beta=values["beta"], source="the sliders"))
        curves = timing.speedup_curves(ks, t_compute=values["t_compute"], m=values["m"], links=links,
                                       formula=values["formula"])
        return rows, curves

    # --- build the figure once ---
    fig = Figure(figsize=(12.5, 5.4))
    ax_time, ax_speed = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=[1.15, 1]))
    fig.subplots_adjust(left=0.075, right=0.985, top=0.84, bottom=0.17, wspace=0.22)
    first = {name: c.value for name, c in controls.items()}
    rows, curves = numbers(first)
    plot_timelines(rows, ax=ax_time, fontsize=10, mark_source=False,
                   title="s01: one step on k devices, modeled: no step is shorter than its coral bar")
    ax_time.set_yticks(ax_time.get_yticks(), [f"k = {kk}" for kk in FIXED_KS] + ["your k"])
    plot_speedup(curves, measured=measured, ax=ax_speed, fontsize=10, colours={YOURS: INK, MACHINE: REPLICA})
    ax_speed.set_title("s02: speedup S against k", fontsize=11, loc="left")
    marker, = ax_speed.plot([k], [1.0], "o", markersize=11, markerfacecolor="white", markeredgecolor=INK,
                            markeredgewidth=2.2, zorder=6)
    k_line = ax_speed.axvline(k, color=INK, linewidth=0.8, linestyle=":", zorder=1)
    k_text = ax_speed.annotate("", (k, 1.0), xytext=(10, -14), textcoords="offset points", fontsize=10,
                               color=INK, weight="bold", zorder=7)
    headline = fig.text(0.01, 0.975, "", ha="left", va="top", fontsize=11, color=INK)
    above_curves = [line for line in ax_speed.lines if line.get_zorder() > 2 and line is not marker]  # measured

    compute_bars = [p for p in ax_time.patches if p.get_gid() == timeline_plot.GIDS["compute"]]
    comm_bars = [p for p in ax_time.patches if p.get_gid() == timeline_plot.GIDS["comm"]]
    bar_labels = [t for t in ax_time.texts if t.get_gid() == timeline_plot.GIDS["label"]]
    link_lines = {line.get_gid().split(":", 1)[1]: line for line in ax_speed.lines
                  if (line.get_gid() or "").startswith(speedup_plot.GIDS["link"] + ":")}
    note = next(t for t in ax_speed.texts if t.get_gid() == speedup_plot.GIDS["note"])
    # The workload is on the sliders and in the status line; under the plot only the measured points' run stays.
    note.set_text(f"measured points: real runs on {measured.host}, {measured.cores} cores, "
                  f"global batch {measured.global_batch}" if measured is not None else "")
    floor = float(np.min(measured.speedup)) if measured is not None else 1.0
    notes_at_points = [t for t in ax_speed.texts if t is not note and t is not k_text]  # "k > cores" and the like
    # What update() changes is drawn on each move over a cached background, and so is what is drawn above
    # it (the left spine over the bars; the measured points and their notes over the curves); the rest is
    # drawn once.
    for artist in (*compute_bars, *comm_bars, *bar_labels, ax_time.spines["left"], *link_lines.values(),
                   *above_curves, *notes_at_points, marker, k_line, k_text, headline):
        artist.set_animated(True)
    view = {}  # the axis limits in the background: time axis end (s), its unit and scale, the lowest S tick

    def update(values):
        rows, curves = numbers(values)
        longest = max(row.t_step for row in rows)
        moved = _time_view(view, longest)
        unit, scale = view["unit"], view["scale"]
        for bar_c, bar_s, text, row in zip(compute_bars, comm_bars, bar_labels, rows):
            bar_c.set_width(row.t_compute / scale)
            bar_s.set_x(row.t_compute / scale)
            bar_s.set_width(row.t_comm / scale)
            text.set_x(row.t_step / scale)
            text.set_text("  " + row_label(row, unit, scale, tag=False))
        bar_labels[-1].set_text(f"  {row_label(rows[-1], unit, scale, tag=False)} at k = {values['k']}")

        for name, curve in curves.curves.items():
            link_lines[name].set_ydata(curve.speedup)
        kk = values["k"]
        s_now = float(curves.curves[YOURS].speedup[kk - 1])
        marker.set_data([kk], [s_now])
        k_line.set_xdata([kk, kk])
        k_text.xy = (kk, s_now)
        right = kk > k_max ** 0.5  # past the middle of the log axis, write the label on the left
        k_text.set_horizontalalignment("right" if right else "left")
        k_text.xyann = (-12, 12) if right else (12, -16)
        k_text.set_text(f"S = {s_now:.3g} at k = {kk}")
        low = min(floor, 1.0, *(float(c.speedup.min()) for c in curves.curves.values()))
        moved |= _speed_view(view, low)

        t_comm_k = rows[-1].t_comm
        headline.set_text(
            f"{values['preset'] if _on_preset(values, link_for) else 'your own α, β'}, k = {kk}: "
            f"S = {s_now:.3g} ({s_now / kk:.0%} of k), capped by T_compute / T_comm = "
            f"{_ratio(values['t_compute'], t_comm_k)}"
        )
        link_words = _link_words(values, link_for)
        if sf_box:
            sf_box[0].status.value = (f"<b>{html.escape(headline.get_text())}</b><br>{html.escape(link_words)}<br>"
                                      f"modeled: {html.escape(speedup_plot.workload_words(curves))}")
        if not moved:
            return None
        ax_time.set_xlim(0, view["end"] / scale)
        ax_time.xaxis.label.set_text(f"time for one training step ({unit})")
        ax_speed.yaxis.set_major_locator(FixedLocator(2.0 ** np.arange(np.log2(view["floor"]), np.log2(k_max) + 1)))
        ax_speed.set_ylim(view["floor"] / 2, k_max * 1.3)
        return "full"  # the limits moved: the background is drawn again

    sf = SliderFigure(fig, controls, update, title="")
    sf_box.append(sf)
    for name, menu in menus.items():
        controls[name].observe(menu.last, names="value")  # after it
    update(sf.values)  # once more, now that the status line exists
    return sf


class _OneRedraw:
    """One redraw for a menu whose change runs ``action``, which moves other controls (α and β).

    Observe the menu with ``first`` before the SliderFigure observes it and with ``last`` after:
    ``first`` opens :meth:`SliderFigure.hold` and runs the action, the SliderFigure's observer then
    only collects the change, and ``last`` closes the hold, which updates and redraws once.
    """

    def __init__(self, sf_box: list, action):
        self.sf_box, self.action, self.held = sf_box, action, []

    def first(self, _change=None) -> None:
        if self.sf_box:
            hold = self.sf_box[0].hold()
            hold.__enter__()
            self.held.append(hold)
        try:
            self.action()
        except BaseException:
            self.last()
            raise

    def last(self, _change=None) -> None:
        while self.held:
            self.held.pop().__exit__(None, None, None)


def _time_view(view: dict, longest: float) -> bool:
    """Keep the time axis while the longest bar (s) fits it well; else choose a new end. True if it moved."""
    if "end" in view and view["end"] / (ROOM * SHRINK) <= longest <= view["end"] / ROOM:
        return False
    unit, scale = time_unit(longest)
    view.update(end=_round_end(ROOM * longest / scale) * scale, unit=unit, scale=scale)
    return True


def _speed_view(view: dict, low: float) -> bool:
    """Keep the speedup axis's lowest tick while the lowest S sits just above it; else move it. True if it moved."""
    if "floor" in view and view["floor"] <= low < view["floor"] * 2.0 ** OCTAVES:
        return False
    view["floor"] = float(2.0 ** np.floor(np.log2(low)))  # a power of two at or below every S
    return True


def _round_end(x: float) -> float:
    """The smallest of ROUND_ENDS times a power of ten that is at least ``x``."""
    if not x > 0:
        return 1.0
    decade = 10.0 ** np.floor(np.log10(x))
    return float(next(end * decade for end in ROUND_ENDS if end * decade >= x * (1 - 1e-12)))


def _on_preset(values, link_for) -> bool:
    """True while α and β still hold the chosen preset's numbers."""
    link = link_for(values["preset"], values["formula"])
    return bool(np.isclose(values["alpha"], _clip(link.alpha, ALPHA_RANGE))
                and np.isclose(values["beta"], _clip(link.beta, BETA_RANGE)))


def _link_words(values, link_for) -> str:
    """Which α, β are in use, and where they come from."""
    preset = values["preset"]
    now = f"α = {values['alpha'] * 1e6:.3g} µs, β = {values['beta'] / 1e9:.3g} GB/s, {values['formula']} formula"
    if _on_preset(values, link_for):
        return f"{now}: preset {preset} ({link_for(preset, values['formula']).source})"
    return f"{now}: your own settings (moved away from the preset {preset})"


def _ratio(t_compute: float, t_comm: float) -> str:
    return "∞ (no sync cost)" if t_comm <= 0 else f"{t_compute / t_comm:.3g}"


def _where(meta: dict) -> str:
    return f"{meta.get('host', '?')}, {meta.get('cores', '?')} cores, {meta.get('backend', '?')}"


def _log_slider(description: str, value: float, exponents: tuple) -> widgets.FloatLogSlider:
    return widgets.FloatLogSlider(value=value, base=10, min=exponents[0], max=exponents[1], step=0.05,
                                  description=description, readout_format=".3g", continuous_update=False,
                                  style={"description_width": "initial"})


def _clip(value: float, exponents: tuple) -> float:
    """A value kept inside a log slider's range (a fitted β can be infinite, a fitted α zero)."""
    return float(np.clip(value, 10.0 ** exponents[0], 10.0 ** exponents[1]))
