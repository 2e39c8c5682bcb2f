"""All-reduce times with their fitted α-β lines, and the residual panel that says how far the fit misses.

Both draw what :mod:`dpviz.topics.measuring.alpha_beta` computed (a :class:`~dpviz.topics.measuring.alpha_beta.FittedTimes`
per machine or published system); nothing is fitted here::

    fitted = alpha_beta.published_fits(published_allreduce())
    plot_fitted_times(fitted.values(), ax=top)           # points and the ring fit, one colour per system
    plot_residuals(fitted.values(), ax=bottom)            # measured / modeled − 1 against M

Published points are drawn as what they are: measured by their source, not here. The residual panel
shades ±20 % (the project's target for the median error) and writes each fit's trust verdict.
"""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullLocator

from dpviz.topics.measuring.plots_bench import k_colours, k_markers
from dpviz.engine.style import (
    BAND_GREY, BRICK, FOREST, GRID_LINE, INK, MEASURED_NOTE, MODELED_NOTE, ORANGE, REPLICA, SLATE, get_ax, source_note,
    open_frame,
)

GIDS = {"points": "alpha_beta.points", "fit": "alpha_beta.fit", "residual": "alpha_beta.residual",
        "band": "alpha_beta.band", "verdict": "alpha_beta.verdict"}
SYSTEM_COLOURS = (REPLICA, ORANGE, FOREST, BRICK)  # published systems: blue, orange, green, red (apart under colour blindness)
SYSTEM_MARKERS = ("o", "s", "D", "^")
SYSTEM_LINESTYLES = ("-", "--", "-.", ":")  # each system's fit: a dash of its own as well as its colour
BAND = 0.20  # the residual band: the project's target for the median relative miss


def fit_words(fit) -> str:
    beta = "∞" if not np.isfinite(fit.beta) else f"{fit.beta / 1e9:.3g} GB/s"
    return f"α = {fit.alpha * 1e6:.3g} µs, β = {beta}, median error {fit.median_rel_err:.0%}"


def plot_fitted_times(items, *, ax=None, fontsize: float = 11):
    """Each item's points (seconds against M, log-log) and its fitted line, one colour per item.

    ``items`` are FittedTimes (one per system), whose ``line_seconds`` hold the fitted model at their own k.
    """
    items = list(items)
    ax = get_ax(ax)
    for i, item in enumerate(items):
        colour, marker = SYSTEM_COLOURS[i % len(SYSTEM_COLOURS)], SYSTEM_MARKERS[i % len(SYSTEM_MARKERS)]
        dash = SYSTEM_LINESTYLES[i % len(SYSTEM_LINESTYLES)]
        ax.plot(item.M, item.seconds * 1e6, marker, color=colour, markersize=6, markerfacecolor="white",
                markeredgewidth=1.6, zorder=4, gid=f"{GIDS['points']}:{item.name}", label=item.label)
        for k, line in item.line_seconds.items():
            ax.plot(item.line_M, line * 1e6, color=colour, linewidth=2, linestyle=dash, zorder=3,
                    gid=f"{GIDS['fit']}:{item.name}",
                    label=f"  {item.fit.formula} fit, k = {k} ({MODELED_NOTE}): {fit_words(item.fit)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylabel("all-reduce time (µs)", fontsize=fontsize)
    ax.set_xlabel("message size M (bytes)", fontsize=fontsize, loc="right")
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(True, which="major", color=GRID_LINE, linewidth=0.8)
    ax.set_axisbelow(True)
    open_frame(ax)
    low = min(float(np.min(item.seconds)) for item in items) * 1e6
    high = max(float(np.max(item.seconds)) for item in items) * 1e6
    ax.set_ylim(low / 2, high * 60)  # headroom for the legend above the points
    ax.legend(loc="upper left", fontsize=fontsize - 3, frameon=False)
    return ax


def plot_residuals(items, *, ax=None, fontsize: float = 11, by_k: bool = False, verdicts: bool = True,
                   note: str | None = None, wrap: int = 105):
    """Measured / modeled against M for each item (log scale: ×2 over and ×2 under look alike), the ±20 % band,
    and under the Axes each fit's trust verdict, then ``note`` (lines wrapped at ``wrap`` characters).

    ``by_k`` colours points by k (one machine measured at several k; hollow points were not fitted),
    otherwise by item, as :func:`plot_fitted_times` does.
    """
    items = list(items)
    ax = get_ax(ax)
    ax.axhspan(1 - BAND, 1 + BAND, color=BAND_GREY, zorder=0, gid=GIDS["band"])
    ax.axhline(1, color=SLATE, linewidth=1, linestyle="--", zorder=1)
    handles = [Line2D([], [], color=BAND_GREY, linewidth=8, label=f"within ±{BAND:.0%}")]
    lines = []
    for i, item in enumerate(items):
        res = item.residuals
        ratio = 1 + res.rel
        if by_k:
            colours = k_colours(set(res.k.tolist()))
            markers = k_markers(colours)
            for kk, colour in colours.items():
                for fitted in (True, False):
                    sel = (res.k == kk) & (res.fitted == fitted)
                    if sel.any():
                        ax.plot(res.M[sel], ratio[sel], markers[kk], color=colour, markersize=7,
                                markerfacecolor=colour if fitted else "white", markeredgewidth=1.6, zorder=4,
                                gid=f"{GIDS['residual']}:{item.name}:k{kk}")
                handles.append(Line2D([], [], marker=markers[kk], linestyle="none", color=colour, label=f"k = {kk}"))
            if (~res.fitted).any():
                handles.append(Line2D([], [], marker="o", linestyle="none", color=INK, markerfacecolor="white",
                                      label="hollow: not fitted"))
        else:
            colour, marker = SYSTEM_COLOURS[i % len(SYSTEM_COLOURS)], SYSTEM_MARKERS[i % len(SYSTEM_MARKERS)]
            ax.plot(res.M, ratio, marker, color=colour, markersize=6, markerfacecolor="white",
                    markeredgewidth=1.4, zorder=4, gid=f"{GIDS['residual']}:{item.name}")
        if verdicts:
            lines.append((f"{item.label.split(':')[0]}: " if len(items) > 1 else "") + item.check.words())
    ax.set_xscale("log")
    ax.set_yscale("log", base=2)
    every = np.concatenate([1 + item.residuals.rel for item in items])
    low = 2.0 ** min(-1, np.floor(np.log2(max(every.min(), 1 / 64))))
    high = 2.0 ** max(1, np.ceil(np.log2(min(every.max(), 64))))
    ax.set_ylim(low / 1.3, high * 4)  # room above the points for the legend
    ax.yaxis.set_major_locator(FixedLocator(2.0 ** np.arange(np.log2(low), np.log2(high) + 1)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(lambda v, _pos: f"×{v:g}" if v >= 1 else f"×1/{1 / v:g}")
    ax.set_xlabel("message size M (bytes)", fontsize=fontsize, loc="right")
    ax.set_ylabel(f"{MEASURED_NOTE} / {MODELED_NOTE}", fontsize=fontsize - 1)
    ax.tick_params(labelsize=fontsize - 1)
    open_frame(ax)
    ax.legend(handles=handles, loc="upper right", ncol=len(handles), fontsize=fontsize - 3, frameon=False,
              handlelength=1.5, columnspacing=1.0)
    if note:
        lines.append(note)
    if lines:
        text = "\n".join(line if "://" in line else textwrap.fill(line, wrap, subsequent_indent="   ")
                         for block in lines for line in block.split("\n"))
        source_note(ax, text)
        ax.texts[-1].set_gid(GIDS["verdict"])
    return ax


__all__ = ["plot_fitted_times", "plot_residuals", "fit_words", "SYSTEM_COLOURS"]
