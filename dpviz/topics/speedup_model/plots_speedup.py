"""Figure s02: speedup S against the number of devices k, modeled for three links and measured here.

The dashed slate line is the ideal S = k (sync for free). Each coloured curve is the cost model's
S = T_compute / (T_compute / k + T_comm(k)) for one interconnect: mint fast, butter medium, coral
slow. Black points are speedups this machine measured in real runs; a point with more ranks than
cores is drawn hollow, because there the ranks took turns on the CPU and the point says as much
about the machine as about the sync. Measured points belong on a curve modeled for their own
workload (their T_compute and M, with alpha and beta fitted on the same machine): ``measured_model``
draws that one, dash-dotted in black, apart from the curves of any other workload::

    plot_speedup(timing.speedup_curves(np.arange(1, 65), t_compute=1.0, M=100e6),
                 measured=timing.measured_speedup(runs))
    workload = timing.measured_workload(runs)
    plot_speedup(curves, measured=timing.measured_speedup(runs),
                 measured_model=timing.speedup_curves(ks, t_compute=workload.t_compute, M=workload.M,
                                                      links=[timing.link_from_fit(bench.fit("ring"))]))
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import FixedLocator, NullLocator

from dpviz.topics.ground_floor.links import SPEED_ORDER
from dpviz.engine.style import (
    BUTTER, CORAL, GRID_LINE, IDEAL_STYLE, INK, MEASURED_NOTE, MINT, MODELED_NOTE, REPLICA, SLATE, get_ax, source_note,
    open_frame,
)

GIDS = {"ideal": "speedup.ideal", "link": "speedup.link", "measured": "speedup.measured",
        "measured_line": "speedup.measured_line", "oversubscribed": "speedup.oversubscribed",
        "oversubscribed_note": "speedup.oversubscribed_note", "superlinear": "speedup.superlinear",
        "measured_model": "speedup.measured_model", "note": "speedup.note"}
MEASURED_MODEL_STYLE = dict(color=INK, linestyle="-.", linewidth=1.6, zorder=3)  # under the points, over the links
SPEED_COLOURS = dict(zip(SPEED_ORDER, (MINT, BUTTER, CORAL)))
LINK_MARKERS = ("^", "s", "v", "D", "P")  # a shape per link curve, a few along it: told apart without colour
MARK_EVERY = 0.12  # axes-diagonal fractions between a curve's marks, from past the low k where the curves still coincide
OTHER_COLOURS = (REPLICA, INK, SLATE)  # links that are not presets, e.g. this machine's fit


def link_colour(name: str, index: int = 0) -> str:
    """Mint, butter or coral for the presets (fast to slow); another colour for any other link."""
    return SPEED_COLOURS.get(name, OTHER_COLOURS[index % len(OTHER_COLOURS)])


def workload_words(curves) -> str:
    """The assumptions behind the modeled curves, in one line."""
    return f"T_compute = {curves.t_compute:.3g} s per step on one device, M = {bytes_words(curves.M)}, {curves.formula} all-reduce"


def plot_speedup(curves, *, measured=None, measured_model=None, ax=None, log: bool = True, fontsize: float = 11,
                 note: str | None = None, colours: dict | None = None):
    """Draw :class:`dpviz.topics.ground_floor.timing.SpeedupCurves` and, optionally, a :class:`dpviz.topics.ground_floor.timing.MeasuredSpeedup`.

    ``measured_model`` (SpeedupCurves with one link, e.g. this machine's fit) is the curve modeled for
    the measured runs' own T_compute and M. ``log=True`` puts both axes on a log scale, so small k
    and large k read equally well and the ideal line is a diagonal. ``colours`` maps a link name to a
    colour, for links that are not presets.
    """
    colours = colours or {}
    ax = get_ax(ax)
    k = curves.k
    ax.plot(k, curves.ideal, gid=GIDS["ideal"], label="ideal S = k (free sync)", **IDEAL_STYLE)
    others = 0
    for i, (name, curve) in enumerate(curves.curves.items()):
        colour = colours.get(name) or link_colour(name, others)
        others += name not in SPEED_COLOURS
        ax.plot(k, curve.speedup, color=colour, linewidth=2.6, gid=f"{GIDS['link']}:{name}",
                marker=LINK_MARKERS[i % len(LINK_MARKERS)], markersize=7, markeredgecolor=INK, markeredgewidth=0.8,
                markevery=(0.36 + 0.04 * i, MARK_EVERY), label=f"{name} ({MODELED_NOTE})")

    if measured_model is not None:
        if len(measured_model.curves) != 1:
            raise ValueError("measured_model must hold one curve, for the link the measured runs used; "
                             f"got {len(measured_model.curves)}.")
        (own,) = measured_model.curves.values()
        ax.plot(measured_model.k, own.speedup, gid=GIDS["measured_model"], label=measured_model_words(measured_model),
                **MEASURED_MODEL_STYLE)
    if measured is not None:
        _draw_measured(ax, measured, fontsize)

    top = max(float(k.max()), float(np.max(measured.speedup)) if measured is not None else 1.0)
    if log:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        low = min(1.0, float(np.min(measured.speedup)) if measured is not None else 1.0)
        ticks = 2.0 ** np.arange(np.floor(np.log2(low)), np.ceil(np.log2(top)) + 1)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(FixedLocator(ticks))
            axis.set_minor_locator(NullLocator())
            axis.set_major_formatter(lambda v, _pos: f"{v:g}")
        ax.set_xlim(1 / 1.15, float(k.max()) * 1.15)
        ax.set_ylim(low / 2, top * 1.3)  # room under the lowest point for its note
    else:
        ax.set_xlim(0, float(k.max()) * 1.02)
        ax.set_ylim(0, top * 1.05)
    ax.set_xlabel("k, number of devices", fontsize=fontsize, loc="right")
    ax.set_ylabel("speedup S over one device", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(True, color=GRID_LINE, linewidth=0.8)
    ax.set_axisbelow(True)
    open_frame(ax)
    ax.set_title("Speedup against devices: a slower link peels away from S = k sooner",
                 fontsize=fontsize + 1, loc="left")
    # Modeled curves never rise above S = k, so the upper left is empty: a measured S(k) > k at a few k stays far
    # below it, and its note is written under the curves (see _draw_measured).
    ax.legend(loc="upper left", fontsize=fontsize - 2, frameon=False)
    lines = [f"{MODELED_NOTE}: {workload_words(curves)}"]
    if measured is not None:
        lines.append(f"{MEASURED_NOTE}: {measured.describe}, global batch {measured.global_batch}")
    if measured_model is not None:
        lines.append(f"dash-dot, {MODELED_NOTE} for the measured runs: {workload_words(measured_model)}, "
                     f"{_link_words(next(iter(measured_model.curves.values())))}")
    if note:
        lines.append(note)
    source_note(ax, "\n".join(lines))
    ax.texts[-1].set_gid(GIDS["note"])
    return ax


def _draw_measured(ax, measured, fontsize):
    k, s, over = np.asarray(measured.k), np.asarray(measured.speedup), np.asarray(measured.oversubscribed, bool)
    label = f"{MEASURED_NOTE} on {measured.host}, {measured.cores} cores"
    ax.plot(k, s, color=INK, linewidth=1.0, linestyle=":", zorder=4, gid=GIDS["measured_line"])
    ax.plot(k[~over], s[~over], "o", color=INK, markersize=8, zorder=5, gid=GIDS["measured"],
            label=label if (~over).any() else None)
    if over.any():
        ax.plot(k[over], s[over], "o", markerfacecolor="white", markeredgecolor=INK, markeredgewidth=1.8,
                markersize=8, zorder=5, gid=GIDS["oversubscribed"],
                label=f"{MEASURED_NOTE}, k > {measured.cores} cores")
        for ki, si in zip(k[over], s[over]):
            ax.annotate("k > cores:\nranks share cores", (ki, si), xytext=(8, -4), textcoords="offset points",
                        fontsize=fontsize - 2, color=INK, va="top", gid=GIDS["oversubscribed_note"])
    above = np.asarray(getattr(measured, "superlinear", np.zeros(len(k), bool)), bool)
    if above.any():  # one note is enough; it points at the highest such point
        ki, si = k[above][np.argmax(s[above])], s[above].max()
        ax.annotate("S > k: not the sync; the k = 1 baseline\nran slower per example (threads, load, cache)",
                    (ki, si), xytext=(12, -50), textcoords="offset points", fontsize=fontsize - 2, color=INK,
                    va="top", gid=GIDS["superlinear"], arrowprops=dict(arrowstyle="-", color=INK, linewidth=0.8))


def measured_model_words(curves) -> str:
    """The legend entry of the curve modeled for the measured runs' own workload."""
    (own,) = curves.curves.values()
    return (f"{MODELED_NOTE} for the measured runs:\nT_compute = {seconds_words(curves.t_compute)}, "
            f"M = {bytes_words(curves.M)},\nα, β: {own.name}")


def power_of_two(value: float, _pos=None) -> str:
    """A log-2 tick label that stays short below 1: 8, 1, 1/4, 1/32 (a tick formatter)."""
    return f"{value:g}" if value >= 1 or value <= 0 else f"1/{1 / value:g}"


def seconds_words(seconds: float) -> str:
    """A duration in s, ms or µs."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e6:.3g} µs"


def _link_words(curve) -> str:
    beta = "∞" if not np.isfinite(curve.beta) else f"{curve.beta / 1e9:.3g} GB/s"
    return f"α = {curve.alpha * 1e6:.3g} µs, β = {beta} ({curve.source})"


def bytes_words(M: float) -> str:
    """A byte count in B, kB, MB or GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if M >= scale:
            return f"{M / scale:.3g} {unit}"
    return f"{M:.3g} B"


__all__ = ["plot_speedup", "link_colour", "workload_words", "measured_model_words", "power_of_two", "bytes_words",
           "seconds_words"]
