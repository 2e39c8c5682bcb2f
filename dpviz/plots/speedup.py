"""Figure s02: speedup S against the number of devices k, modeled for three links and measured here.

The dashed slate line is the ideal S = k (sync for free). Each coloured curve is the cost model's
S = T_compute / (T_compute / k + T_comm(k)) for one interconnect: mint fast, butter medium, coral
slow. Black points are speedups this machine measured in real runs; a point with more ranks than
cores is drawn hollow, because there the ranks took turns on the CPU and the point says as much
about the machine as about the sync::

    plot_speedup(timing.speedup_curves(np.arange(1, 65), t_compute=1.0, m=100e6),
                 measured=timing.measured_speedup(runs))
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import FixedLocator, NullLocator

from dpviz.theory.links import SPEED_ORDER
from dpviz.plots.style import (
    BUTTER, CORAL, IDEAL_STYLE, INK, MEASURED_NOTE, MINT, MODELED_NOTE, REPLICA, SLATE, get_ax, source_note,
)

GIDS = {"ideal": "speedup.ideal", "link": "speedup.link", "measured": "speedup.measured",
        "oversubscribed": "speedup.oversubscribed", "superlinear": "speedup.superlinear", "note": "speedup.note"}
SPEED_COLOURS = dict(zip(SPEED_ORDER, (MINT, BUTTER, CORAL)))
OTHER_COLOURS = (REPLICA, INK, SLATE)  # links that are not presets, e.g. this machine's fit


def link_colour(name: str, index: int = 0) -> str:
    """Mint, butter or coral for the presets (fast to slow); another colour for any other link."""
    return SPEED_COLOURS.get(name, OTHER_COLOURS[index % len(OTHER_COLOURS)])


def workload_words(curves) -> str:
    """The assumptions behind the modeled curves, in one line."""
    return f"T_compute = {curves.t_compute:.3g} s per step on one device, M = {_bytes(curves.m)}, {curves.formula} all-reduce"


def plot_speedup(curves, *, measured=None, ax=None, log: bool = True, fontsize: float = 11, note: str | None = None,
                 colours: dict | None = None):
    """Draw :class:`dpviz.theory.timing.SpeedupCurves` and, optionally, a :class:`dpviz.theory.timing.MeasuredSpeedup`.

    ``log=True`` puts both axes on a log scale, so small k and large k read equally well and
    the ideal line is a diagonal. ``colours`` maps a link name to a colour, for links that are
    not presets.
    """
    colours = colours or {}
    ax = get_ax(ax)
    k = curves.k
    ax.plot(k, curves.ideal, gid=GIDS["ideal"], label="ideal S = k (free sync)", **IDEAL_STYLE)
    others = 0
    for name, curve in curves.curves.items():
        colour = colours.get(name) or link_colour(name, others)
        others += name not in SPEED_COLOURS
        ax.plot(k, curve.speedup, color=colour, linewidth=2.6, gid=f"{GIDS['link']}:{name}",
                label=f"{name} ({MODELED_NOTE})")

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
    ax.grid(True, color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title("Speedup against devices: a slower link peels away from S = k sooner",
                 fontsize=fontsize + 1, loc="left")
    # Modeled curves never rise above S = k, so the upper left is empty, unless a measured point is superlinear.
    superlinear = measured is not None and bool(np.any(getattr(measured, "superlinear", False)))
    ax.legend(loc="lower right" if superlinear else "upper left", fontsize=fontsize - 2, frameon=False)
    lines = [f"{MODELED_NOTE}: {workload_words(curves)}"]
    if measured is not None:
        lines.append(f"{MEASURED_NOTE}: {measured.describe}, global batch {measured.global_batch}")
    if note:
        lines.append(note)
    source_note(ax, "\n".join(lines))
    ax.texts[-1].set_gid(GIDS["note"])
    return ax


def _draw_measured(ax, measured, fontsize):
    k, s, over = np.asarray(measured.k), np.asarray(measured.speedup), np.asarray(measured.oversubscribed, bool)
    label = f"{MEASURED_NOTE} on {measured.host}, {measured.cores} cores"
    ax.plot(k, s, color=INK, linewidth=1.0, linestyle=":", zorder=4)
    ax.plot(k[~over], s[~over], "o", color=INK, markersize=8, zorder=5, gid=GIDS["measured"],
            label=label if (~over).any() else None)
    if over.any():
        ax.plot(k[over], s[over], "o", markerfacecolor="white", markeredgecolor=INK, markeredgewidth=1.8,
                markersize=8, zorder=5, gid=GIDS["oversubscribed"],
                label=f"{MEASURED_NOTE}, k > {measured.cores} cores")
        for ki, si in zip(k[over], s[over]):
            ax.annotate("k > cores:\nranks share cores", (ki, si), xytext=(8, -4), textcoords="offset points",
                        fontsize=fontsize - 2, color=INK, va="top")
    above = np.asarray(getattr(measured, "superlinear", np.zeros(len(k), bool)), bool)
    if above.any():  # one note is enough; it points at the highest such point
        ki, si = k[above][np.argmax(s[above])], s[above].max()
        ax.annotate("S > k: not the sync; the k = 1 baseline\nran slower per example (threads, load, cache)",
                    (ki, si), xytext=(8, 8), textcoords="offset points", fontsize=fontsize - 2, color=INK,
                    va="bottom", gid=GIDS["superlinear"])


def _bytes(m: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if m >= scale:
            return f"{m / scale:.3g} {unit}"
    return f"{m:.3g} B"


__all__ = ["plot_speedup", "link_colour", "workload_words"]
