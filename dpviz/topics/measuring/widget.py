"""The chapter's sliders: α and β set by hand against this machine's measured all-reduce times.

    from dpviz.topics.measuring.widget import alpha_beta_widget
    alpha_beta_widget(inputs.bench)               # the sweep ./run recorded
    alpha_beta_widget(inputs.bench, fresh)        # and one measured in the notebook just now, to switch to

:class:`AlphaBetaFigure` draws three panels, built once. Top left, the measured all-reduce times against M (the
fastest repeat at each point, for the k the fit used), the fitted model's curve (dashed) and the model's curve for
the sliders' α and β (solid) with its two terms: the latency term A(k)·α, flat and dotted, and the transfer term
W(k)·M/β, a dash-dotted slope. Under it, measured / modeled at each point for the sliders' pair (grey squares:
for the fit's).
Right, the map of the RMS relative miss over every (α, β) the sliders reach, its contours labelled, the fitted pair
a star at its lowest point and the sliders' pair a ring. Every curve is modeled; every point was measured.

``update(times=, formula=, pair=, alpha=, beta=)`` moves only the sliders' curve, terms, residual points and ring;
what the sweep and the formula choose (the points, the fit's curve, the map) is in a background of its own,
one per (sweep, formula), drawn when the widget is built. The toggle "α, β" sets the sliders to the fit, or back to
the pair last set by hand; choosing a sweep or a formula sets them to its fit.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import BoundaryNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, LogLocator, NullLocator

from dpviz.engine.checks import check_choice
from dpviz.engine.slider import SliderFigure, animate, clip_to_range, log_slider, rate_readout, seconds_readout
from dpviz.engine.style import (BAND_GREY, GREY, GRID_LINE, INK, MEASURED_NOTE, MODELED_NOTE, RED, SLATE, open_frame)
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.measuring.hand_fit import FittedPoints, fitted_points
from dpviz.topics.measuring.plots_bench import k_colours, k_markers

FORMULAS = ("ring", "notes")  # the two the chapter sets side by side (at k = 2, halving-doubling is the ring)
FIT, HAND = "fit", "hand"  # the "α, β" toggle: the fit's pair, or the one last set by hand
DECADES = 1  # the sliders reach this many powers of ten either side of every fit (and on to a whole power)
BAND = 0.20  # the ±20 % band behind the residuals: the project's target for the median miss
RATIO_LIMIT = 16.0  # the residual axis runs from ×1/16 to ×16; a point past it sits on the edge, as a triangle
CONTOURS = (0.15, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30, 100)  # RMS relative miss, drawn on the map where the map reaches them
MAP_POINTS = 81  # map cells per axis
SMALL_BELOW = 64 << 10  # the status line's small messages; the large ones are from 1 MiB up
LARGE_FROM = 1 << 20
STAR = "#ffd24a"  # the fitted pair on the map


class AlphaBetaFigure:
    """The measured times, the model for a hand-set (α, β), its residuals and the map of the RMS miss."""

    def __init__(self, sweeps: dict[str, FittedPoints], *, formulas=FORMULAS, figsize=(11.5, 5.3)):
        if not sweeps:
            raise ValueError("sweeps must hold at least one set of fitted points; got none.")
        self.sweeps = dict(sweeps)
        self.formulas = tuple(check_choice("formula", f, costmodel.FORMULAS) for f in formulas)
        self.fits = {(s, f): points.fit(f) for s, points in self.sweeps.items() for f in self.formulas}
        self.alpha_range, self.beta_range = _ranges(self.fits.values())
        self.best = {key: self.sweeps[key[0]].rms(*self.pair_of(key), key[1]) for key in self.fits}
        self.status_line = ""
        self._key = None

        every = np.concatenate([p.seconds for p in self.sweeps.values()])
        self.unit, self.scale = ("ms", 1e-3) if every.max() >= 1e-3 else ("µs", 1e-6)
        sizes = np.concatenate([p.M for p in self.sweeps.values()])
        self.M_line = np.geomspace(sizes.min() / 2, sizes.max() * 2, 60)
        self.ks = sorted({int(k) for p in self.sweeps.values() for k in p.k})
        colours, markers = k_colours(self.ks), k_markers(self.ks)

        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.ax_time = ax_time = fig.add_axes((0.075, 0.47, 0.52, 0.32))
        self.ax_res = ax_res = fig.add_axes((0.075, 0.10, 0.52, 0.24), sharex=ax_time)
        self.ax_map = ax_map = fig.add_axes((0.71, 0.10, 0.27, 0.65))
        headline = "Set α and β by hand: α sets the small messages' floor, β the large ones' time per byte"
        fig.text(0.01, 0.985, headline, ha="left", va="top", fontsize=12, weight="bold", color=INK)

        # Top: the points (one artist per sweep and k), the fit's curve and the sliders' curve with its two terms
        self.points = {}
        for s, points in self.sweeps.items():
            for k in self.ks:
                sel = points.k == k
                self.points[(s, k)], = ax_time.plot(points.M[sel], points.seconds[sel] / self.scale, markers[k],
                                                    color=colours[k], markersize=7, markeredgecolor=INK,
                                                    markeredgewidth=0.8, zorder=5, linestyle="none",
                                                    gid=f"alpha_beta_widget.points:{s}:k{k}")
        self.fit_lines = {k: ax_time.plot([], [], color=SLATE, linestyle="--", linewidth=1.6, zorder=2)[0]
                          for k in self.ks}
        self.curves = {k: ax_time.plot([], [], color=RED, linewidth=2.2, zorder=3)[0] for k in self.ks}
        self.floors = {k: ax_time.plot([], [], color=RED, linestyle=":", linewidth=1.3, zorder=3)[0] for k in self.ks}
        self.slopes = {k: ax_time.plot([], [], color=RED, linestyle="-.", linewidth=1.2, alpha=0.7,
                                       zorder=3)[0] for k in self.ks}
        ax_time.set_xscale("log")
        ax_time.set_yscale("log")
        ax_time.set_xlim(self.M_line[0], self.M_line[-1])
        ax_time.set_ylim(every.min() / self.scale / 6, every.max() / self.scale * 4)
        ax_time.set_ylabel(f"all-reduce time ({self.unit})", fontsize=10)
        ax_time.tick_params(labelsize=9, labelbottom=False)
        ax_time.grid(True, which="major", color=GRID_LINE, linewidth=0.8)
        ax_time.set_axisbelow(True)
        open_frame(ax_time)
        self.time_title = ax_time.set_title("", fontsize=10, loc="left")
        # Bottom: measured / modeled for the sliders' pair (filled) and for the fit's (grey squares)
        ax_res.axhspan(1 - BAND, 1 + BAND, color=BAND_GREY, zorder=0)
        ax_res.axhline(1, color=SLATE, linewidth=1, linestyle="--", zorder=1)
        self.fit_ratio = {k: ax_res.plot([], [], "s", color=GREY, markerfacecolor="none", markersize=10,
                                         markeredgewidth=1.2, zorder=2)[0] for k in self.ks}
        self.ratio_in, self.ratio_up, self.ratio_down = {}, {}, {}
        for k in self.ks:
            style = dict(color=colours[k], markeredgecolor=INK, markeredgewidth=0.8, linestyle="none", zorder=4,
                         clip_on=False)
            self.ratio_in[k], = ax_res.plot([], [], markers[k], markersize=7, **style)
            self.ratio_up[k], = ax_res.plot([], [], "^", markersize=8, **style)
            self.ratio_down[k], = ax_res.plot([], [], "v", markersize=8, **style)
        ax_res.set_yscale("log", base=2)
        ax_res.set_ylim(1 / RATIO_LIMIT, RATIO_LIMIT)
        ax_res.yaxis.set_major_locator(FixedLocator([1 / 16, 1 / 4, 1, 4, 16]))
        ax_res.yaxis.set_minor_locator(NullLocator())
        ax_res.yaxis.set_major_formatter(lambda v, _pos: f"×{v:g}" if v >= 1 else f"×1/{1 / v:g}")
        ax_res.set_ylabel(f"{MEASURED_NOTE} / {MODELED_NOTE}", fontsize=10)
        ax_res.set_xlabel("message size M (bytes)", fontsize=10, loc="right")
        ax_res.tick_params(labelsize=9)
        open_frame(ax_res)
        ax_res.set_title("measured / modeled at each point, for your α, β (grey squares: for the fit's)", fontsize=10,
                         loc="left")

        # Right: the RMS miss over the sliders' (α, β), one contour set per (sweep, formula), the fit a star
        alphas = np.geomspace(*(10.0 ** np.array(self.alpha_range)), MAP_POINTS)
        betas = np.geomspace(*(10.0 ** np.array(self.beta_range)), MAP_POINTS)
        grid_alpha, grid_beta = np.meshgrid(alphas, betas)
        self.maps = {}
        for key in self.fits:
            rms = self.sweeps[key[0]].rms(grid_alpha, grid_beta, key[1])
            levels = [v for v in CONTOURS if rms.min() < v < rms.max()]
            bounds = [rms.min(), *levels, rms.max()]
            filled = ax_map.contourf(alphas, betas / 1e9, rms, levels=bounds,
                                     cmap="Blues", norm=BoundaryNorm(bounds, 256), alpha=0.45, zorder=0)
            lines = ax_map.contour(alphas, betas / 1e9, rms, levels=levels, colors=INK, linewidths=0.7, zorder=1)
            labels = ax_map.clabel(lines, fontsize=9, fmt=lambda v: f"{v:.0%}", inline_spacing=2)
            star_alpha, star_beta = self.pair_of(key)  # a fit pinned at α = 0 or β = ∞ sits on the map's edge
            star, = ax_map.plot([star_alpha], [star_beta / 1e9], "*", color=INK, markersize=16,
                                markerfacecolor=STAR, zorder=4)
            self.maps[key] = [filled, lines, *labels, star]
        self.ring, = ax_map.plot([], [], "o", markersize=13, markerfacecolor="none", markeredgecolor=RED,
                                 markeredgewidth=2.6, zorder=5)
        ax_map.set_xscale("log")
        ax_map.set_yscale("log")
        ax_map.set_xlim(alphas[0], alphas[-1])
        ax_map.set_ylim(betas[0] / 1e9, betas[-1] / 1e9)
        ax_map.xaxis.set_major_locator(LogLocator(numticks=6))
        ax_map.xaxis.set_major_formatter(lambda v, _pos: seconds_readout(v))
        ax_map.yaxis.set_major_formatter(lambda v, _pos: f"{v:g}")
        ax_map.set_xlabel("α, latency per step", fontsize=10)
        ax_map.set_ylabel("β (GB/s)", fontsize=10)
        ax_map.tick_params(labelsize=9)
        ax_map.set_title("RMS of (measured − modeled) / measured\nover every (α, β) the sliders reach", fontsize=10,
                         loc="left")
        # One legend for the three panels, under the headline: nothing that moves can run into it
        handles = [Line2D([], [], marker=markers[k], color=colours[k], markeredgecolor=INK, linestyle="none",
                          label=f"k = {k}, {MEASURED_NOTE}") for k in self.ks]
        handles += [Line2D([], [], color=RED, linewidth=2.2, label=f"your α, β ({MODELED_NOTE})"),
                    Line2D([], [], color=RED, linestyle=":", linewidth=1.3, label="its latency term A·α"),
                    Line2D([], [], color=RED, linestyle="-.", alpha=0.7, linewidth=1.2,
                           label="its transfer term W·M/β"),
                    Line2D([], [], color=SLATE, linestyle="--", linewidth=1.6, label=f"the fit ({MODELED_NOTE})"),
                    Line2D([], [], marker="s", color=GREY, markerfacecolor="none", markersize=9, linestyle="none",
                           label="the fit's measured / modeled"),
                    Line2D([], [], marker="*", color=INK, markerfacecolor=STAR, markersize=13, linestyle="none",
                           label="the fitted pair"),
                    Line2D([], [], marker="o", color=RED, markerfacecolor="none", markersize=11, markeredgewidth=2.4,
                           linestyle="none", label="your pair")]
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.005, 0.935), ncol=4, fontsize=9,
                   frameon=False, handlelength=2.2, columnspacing=1.5)
        self._drop_cut_labels()
        moving = [*self.curves.values(), *self.floors.values(), *self.slopes.values()]
        animate(*moving, *self.ratio_in.values(), *self.ratio_up.values(), *self.ratio_down.values(), self.ring)

    def _drop_cut_labels(self) -> None:
        """Take off the map each contour label that runs past the map's edges (matplotlib places them on the line)."""
        self.fig.canvas.draw()
        renderer, box = self.fig.canvas.get_renderer(), self.ax_map.bbox
        for key, artists in self.maps.items():
            kept = []
            for artist in artists:
                if hasattr(artist, "get_text"):
                    extent = artist.get_window_extent(renderer)
                    if extent.x0 < box.x0 or extent.x1 > box.x1 or extent.y0 < box.y0 or extent.y1 > box.y1:
                        artist.remove()
                        continue
                kept.append(artist)
            self.maps[key] = kept

    def pair_of(self, key) -> tuple[float, float]:
        """The fitted (α, β) of (sweep, formula), inside the sliders' reach."""
        fit = self.fits[key]
        return clip_to_range(fit.alpha, self.alpha_range), clip_to_range(fit.beta, self.beta_range)

    def at_fit(self, values: dict) -> bool:
        alpha, beta = self.pair_of((values["times"], values["formula"]))
        return _close(values["alpha"], alpha) and _close(values["beta"], beta)

    def layouts(self) -> list[dict]:
        """One background per (sweep, formula): its points, its fit's curve and squares, its map."""
        return [{"times": s, "formula": f, "pair": FIT} for s, f in self.fits]

    def fixed_artists(self) -> list:
        """The measured points, drawn over the moving curves."""
        return list(self.points.values())

    def update(self, *, times: str, formula: str, alpha: float, beta: float, pair: str = FIT):
        key = (check_choice("times", times, tuple(self.sweeps)), check_choice("formula", formula, self.formulas))
        changed = key != self._key
        if changed:
            self._show(key)
        points = self.sweeps[times]
        for k in self.ks:
            sel = points.k == k
            if not sel.any():  # a k the other sweep measured: nothing of it shows
                for artists in (self.curves, self.floors, self.slopes, self.ratio_in, self.ratio_up, self.ratio_down):
                    artists[k].set_data([], [])
                continue
            latency = float(costmodel.t_comm(k, 0.0, alpha, 1.0, formula=formula))
            line = np.asarray(costmodel.t_comm(k, self.M_line, alpha, beta, formula=formula)) / self.scale
            transfer = line - latency / self.scale
            self.curves[k].set_data(self.M_line, line)
            self.floors[k].set_data(self.M_line[[0, -1]], [latency / self.scale] * 2)
            self.slopes[k].set_data(self.M_line, transfer)
            ratio = points.ratio(alpha, beta, formula)[sel]
            M = points.M[sel]
            inside = (ratio >= 1 / RATIO_LIMIT) & (ratio <= RATIO_LIMIT)
            self.ratio_in[k].set_data(M[inside], ratio[inside])
            self.ratio_up[k].set_data(M[ratio > RATIO_LIMIT], np.full((ratio > RATIO_LIMIT).sum(), RATIO_LIMIT))
            self.ratio_down[k].set_data(M[ratio < 1 / RATIO_LIMIT],
                                        np.full((ratio < 1 / RATIO_LIMIT).sum(), 1 / RATIO_LIMIT))
        self.ring.set_data([alpha], [beta / 1e9])
        rms, best = points.rms(alpha, beta, formula), self.best[key]
        at_fit = self.at_fit(dict(times=times, formula=formula, alpha=alpha, beta=beta))
        self.status_line = self._words(key, alpha, beta, rms, best, at_fit)
        return key if changed else None

    def _show(self, key) -> None:
        """What the sweep and the formula choose: their points, the fit's curve and squares, their map."""
        self._key = key
        times, formula = key
        points, (alpha, beta) = self.sweeps[times], self.pair_of(key)  # a pinned fit (α = 0, β = ∞) at the edge
        for (s, _k), artist in self.points.items():
            artist.set_visible(s == times)
        ratio = points.ratio(alpha, beta, formula)
        for k in self.ks:
            line = np.asarray(costmodel.t_comm(k, self.M_line, alpha, beta, formula=formula)) / self.scale
            self.fit_lines[k].set_data(self.M_line, line if (points.k == k).any() else [])
            sel = points.k == k
            self.fit_ratio[k].set_data(points.M[sel], np.clip(ratio[sel], 1 / RATIO_LIMIT, RATIO_LIMIT))
        for other, artists in self.maps.items():
            for artist in artists:
                artist.set_visible(other == key)
        ks = ", ".join(map(str, sorted(set(points.k.tolist()))))
        self.time_title.set_text(f"{points.name}: fastest of {points.repeats} calls per point, k = {ks}; "
                                 f"{formula} model")

    def _words(self, key, alpha, beta, rms, best, at_fit) -> str:
        """The status line: the pair, its miss against the fit's, where it misses, and what was measured."""
        points, formula, fit = self.sweeps[key[0]], key[1], self.fits[key]
        ratio = points.ratio(alpha, beta, formula)
        small, large = points.M < SMALL_BELOW, points.M >= LARGE_FROM

        def miss(sel) -> str:
            return f"×{np.exp(np.mean(np.log(ratio[sel]))):.2g}" if sel.any() else "none measured"

        inside = self.pair_of(key) == (fit.alpha, fit.beta)
        fitted = (f"α = {seconds_readout(fit.alpha)}, "
                  f"β = {rate_readout(fit.beta) if np.isfinite(fit.beta) else '∞ (no transfer term found)'}")
        pair = (f"α = {seconds_readout(alpha)}, β = {rate_readout(beta)}"
                + ((f" (the {formula} fit's)" if inside else f" (the {formula} fit, {fitted}, as far as the sliders "
                    "reach)") if at_fit else f" (by hand; the {formula} fit: {fitted})"))
        verdict = (("the smallest any pair gives" if inside else "the fit's own is smaller") if at_fit else
                   f"{rms / best:.3g}× the fit's" if rms > best * 1.0005 else "as low as the fit's")
        left_out = (f"; k = {', '.join(map(str, points.left_out))} not fitted (more ranks than cores)"
                    if points.left_out else "")
        best_words = "" if at_fit and inside else f" ({best:.1%})"
        # a space before each break: the alt text, stripped of its tags, keeps its sentences apart
        return (f"<b>{html.escape(pair, quote=False)}</b>: RMS relative miss {rms:.1%} over the "
                f"{len(points.seconds)} fitted points, {verdict}{best_words}. <br>Measured / modeled, geometric mean: "
                f"small messages (under {SMALL_BELOW >> 10} KiB) {miss(small)}, large (from {LARGE_FROM >> 20} MiB) "
                f"{miss(large)}. <br>{MEASURED_NOTE} ({html.escape(points.name, quote=False)}): "
                f"{html.escape(points.where, quote=False)}{left_out}")


def alpha_beta_widget(bench, fresh=None, *, formula: str = "ring") -> SliderFigure:
    """Sliders for α and β against ``bench``'s measured all-reduce times (a BenchRecord), starting at its fit.

    ``fresh`` (a BenchRecord measured in the notebook) adds a choice between the two sweeps; ``formula`` is the
    cost model's formula the panel starts with ("ring" or "notes").
    """
    check_choice("formula", formula, FORMULAS)
    sweeps = {"the record": fitted_points(bench, "the record")}
    if fresh is not None:
        sweeps["just now"] = fitted_points(fresh, "just now", argument="fresh")
    figure = AlphaBetaFigure(sweeps)
    times = next(iter(sweeps))
    alpha, beta = figure.pair_of((times, formula))
    controls = {
        "times": widgets.ToggleButtons(options=list(sweeps), value=times, description="times"),
        "formula": widgets.ToggleButtons(options=list(FORMULAS), value=formula, description="formula"),
        "pair": widgets.ToggleButtons(options=[("the fit", FIT), ("by hand", HAND)], value=FIT, description="α, β"),
        "alpha": log_slider("α latency", alpha, figure.alpha_range),
        "beta": log_slider("β bandwidth", beta, figure.beta_range),
    }
    hand = {}  # the pair last set by hand, for the toggle to come back to
    going_to = []  # the pair a reset is moving the sliders to, until both are there

    def linked(name: str, values: dict) -> dict:
        """A sweep, a formula or "the fit" moves α and β to that fit; a slider moved off it makes the pair "by hand"
        (and "by hand" goes back to the pair last set so)."""
        if name in ("times", "formula") or (name == "pair" and values["pair"] == FIT):
            target = figure.pair_of((values["times"], values["formula"]))
            going_to[:] = [target] if target != (values["alpha"], values["beta"]) else []
            return {"alpha": target[0], "beta": target[1], "pair": FIT}
        if name == "pair":
            return dict(hand)
        if going_to:  # a slider moved by the reset itself
            if going_to[0] == (values["alpha"], values["beta"]):
                going_to.clear()
            return {}
        if figure.at_fit(values):
            return {"pair": FIT}
        hand.update(alpha=values["alpha"], beta=values["beta"])
        return {"pair": HAND}

    readouts = {"alpha": seconds_readout, "beta": rate_readout}
    return SliderFigure(figure, controls, linked=linked, readouts=readouts, repeat_frames=True)


def _ranges(fits) -> tuple[tuple[int, int], tuple[int, int]]:
    """The sliders' reach, in powers of ten: DECADES either side of every fitted α and β (a pinned one ignored)."""
    alphas = [f.alpha for f in fits if f.alpha > 0] or [1e-4]
    betas = [f.beta for f in fits if np.isfinite(f.beta)] or [1e9]
    return ((int(np.floor(np.log10(min(alphas)))) - DECADES, int(np.ceil(np.log10(max(alphas)))) + DECADES),
            (int(np.floor(np.log10(min(betas)))) - DECADES, int(np.ceil(np.log10(max(betas)))) + DECADES))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * abs(b)


__all__ = ["AlphaBetaFigure", "alpha_beta_widget"]
