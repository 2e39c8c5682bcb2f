"""Measured all-reduce time against message size M, a colour and a marker per k, with the fitted cost models.

Points are the fastest repeat of ``dist.all_reduce`` at each size, and each bar rises from it to the
median of the repeats (on a small virtual machine the gap is the time ranks waited to be woken up: see
:mod:`dpviz.topics.speedup_model.records`). Lines are the cost model with alpha and beta fitted to those points:
solid for the ring all-reduce, dashed for the notes' formula (which prices only a reduce-scatter, so
its fitted beta comes out half the ring's). The fits are made by the caller,
with :func:`dpviz.topics.ground_floor.timing.fit_lines`; this module only draws them::

    plot_allreduce_times(bench, timing.fit_lines(bench))             # the notes' formula and the ring
    plot_allreduce_times(bench, timing.fit_lines(bench, ("ring", "halving_doubling")))
"""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.lines import Line2D

from dpviz.engine.style import GRID_LINE, INK, MEASURED_NOTE, MODELED_NOTE, get_ax, open_frame, source_note

GIDS = {"points": "bench.points", "fit": "bench.fit"}
FORMULA_STYLE = {"ring": "-", "notes": "--", "halving_doubling": "-."}
FORMULA_WORDS = {"ring": "ring", "notes": "notes' formula", "halving_doubling": "halving-doubling"}


def k_colours(ks) -> dict:
    """One colour per k, dark to light as k grows."""
    ks = sorted(ks)
    cmap = colormaps["viridis"]
    return {k: cmap(0.05 + 0.55 * i / max(len(ks) - 1, 1)) for i, k in enumerate(ks)}  # no pale yellow: it vanishes on a projector


def k_markers(ks) -> dict:
    """One marker shape per k, in the order of :func:`k_colours`: the k's are told apart without their colours."""
    return {k: "osD^v"[i % 5] for i, k in enumerate(sorted(ks))}


def fit_words(fit) -> str:
    """α in µs, β in GB/s and the median relative error, for a legend entry."""
    beta = "∞" if not np.isfinite(fit.beta) else f"{fit.beta / 1e9:.3g}"
    return f"α = {fit.alpha * 1e6:.3g} µs, β = {beta} GB/s, median error {fit.median_rel_err:.0%}"


def plot_allreduce_times(bench, fits, *, ax=None, impl: str = "all_reduce", fontsize: float = 11,
                         note: str | None = None):
    """Draw a :class:`dpviz.topics.speedup_model.records.BenchRecord`'s fastest all-reduce times (bars up to the median) on log-log
    axes, with fitted lines.

    ``fits`` is what :func:`dpviz.topics.ground_floor.timing.fit_lines` returns for ``bench`` and ``impl``: a dict
    {formula: FitLines}, one line style per formula.
    """
    if not isinstance(fits, dict) or not all(hasattr(fl, "seconds") and hasattr(fl, "fit") for fl in fits.values()):
        raise TypeError("fits must be the dict timing.fit_lines(bench) returns, {formula: FitLines}; "
                        f"got {type(fits).__name__}.")
    ax = get_ax(ax)
    rows = np.asarray(bench.impl) == impl
    k, M = np.asarray(bench.k)[rows], np.asarray(bench.M)[rows]
    fastest, median = np.asarray(bench.fastest)[rows], np.asarray(bench.median)[rows]
    colours = k_colours(set(k.tolist()))
    markers = k_markers(colours)
    cores = bench.meta.get("cores")

    handles, labels = [], []
    for kk, colour in colours.items():
        sel = k == kk
        err = np.stack([np.zeros(sel.sum()), median[sel] - fastest[sel]])  # (2, n): nothing below, up to the median
        shared = cores is not None and kk > cores
        style = dict(marker=markers[kk], color=colour, markersize=7, markerfacecolor="white" if shared else colour,
                     markeredgewidth=1.6)
        ax.errorbar(M[sel], fastest[sel], yerr=err, linestyle="none", capsize=3, zorder=4, gid=GIDS["points"], **style)
        handles.append(Line2D([], [], linestyle="none", **style))  # the point's own shape, not an error bar's
        labels.append(f"k = {kk}, {MEASURED_NOTE}" + (f" (k > {cores} cores: ranks share cores)" if shared else ""))
        for formula, fl in fits.items():
            if kk in fl.seconds:
                ax.plot(fl.M, fl.seconds[kk], color=colour, linestyle=FORMULA_STYLE.get(formula, ":"),
                        linewidth=2, gid=f"{GIDS['fit']}:{formula}", zorder=3)

    for formula, fl in fits.items():
        handles.append(Line2D([], [], color=INK, linestyle=FORMULA_STYLE.get(formula, ":"), linewidth=2))
        fitted = f" to k = {', '.join(map(str, fl.fitted_ks))}" if fl.fitted_ks and set(fl.fitted_ks) != set(fl.seconds) else ""
        labels.append(f"{FORMULA_WORDS.get(formula, formula)} ({MODELED_NOTE}, fitted{fitted}): {fit_words(fl.fit)}")
    ax.legend(handles, labels, loc="upper left", fontsize=fontsize - 2, frameon=False)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("message size M (bytes)", fontsize=fontsize, loc="right")
    ax.set_ylabel(f"all-reduce time (s), fastest of {bench.times.shape[1]}", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(True, which="major", color=GRID_LINE, linewidth=0.8)
    ax.set_axisbelow(True)
    open_frame(ax)
    low, high = float(np.min(fastest)), float(np.max(median))
    ax.set_ylim(low / 2, high * 20)  # headroom for the legend above the points
    ax.set_title(f"All-reduce time against message size ({impl}), with fitted α-β models", fontsize=fontsize + 1,
                 loc="left")
    meta = bench.meta
    source_note(ax, note or f"{MEASURED_NOTE}: {meta.get('backend')} on {meta.get('host')}, {cores} cores, "
                            f"{str(meta.get('date', ''))[:10]}; each bar rises from the fastest repeat to their median")
    return ax
