"""A bigger batch wants a bigger step, drawn from recorded grids of runs (:class:`~dpviz.topics.bigger_batch.records.LrGrid`).

* :func:`plot_loss_curves`: chosen runs' loss against examples seen or against steps; a diverged
  run ends in a red ×.
* :func:`plot_rule_curves`: k = 1 beside k ranks under the three rules ×1, ×√k and ×k.
* :func:`plot_paths`: the line model's runs as paths in the (w, c) plane over the loss's contours.
* :func:`plot_step_gaps`: the linear rule's error per step against the small-step rate, measured,
  beside the line model's bowl (modeled).
* :func:`plot_twin_distance`: how far a k-rank run is from its one-rank twin after as many examples.
* :class:`LossCurves`: the artists of the chapter's slider figure, built once and refilled in place.

Everything drawn is a recorded array or a record method; the contours and the modeled gap come
from :mod:`dpviz.topics.bigger_batch.theory`, computed by the caller.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from dpviz.engine.checks import check_choice
from dpviz.engine.style import AMBER, INK, MODELED_NOTE, ORANGE, PURPLE, RED, REPLICA, SLATE, TEAL, get_ax, source_note

K1_COLOUR = INK                                                       # the run on one rank, the reference
RULE_COLOURS = {"×1": TEAL, "×√k": AMBER, "×k": REPLICA}              # k ranks under each rule
RULE_STYLES = {"×1": ":", "×√k": "-.", "×k": "-"}  # and a line style each: told apart without colour too
LINE_STYLES = ("-", "--", "-.", ":")  # curves of one chart, one style each beside their colour
# warm-up lengths, in the order given: three colours apart under colour blindness (magenta is teal's twin under
# deuteranopia, purple the blue's), and a line style each (LINE_STYLES) where a fourth repeats a colour
WARMUP_COLOURS = (REPLICA, TEAL, ORANGE)
MODEL_MARKERS = {"line": "o", "mlp": "s"}
K_COLOURS = {2: TEAL, 4: REPLICA, 8: PURPLE}
AGAINST = ("examples", "steps")
FONT = 12


def _x(grid, row, against):
    return grid.examples_seen(row) if against == "examples" else np.arange(grid.steps[row] + 1)


def _finite_curve(grid, row):
    """The run's loss up to its last finite state (a diverged run's curve stops where it blew up)."""
    loss = grid.curve(row)
    bad = np.flatnonzero(~np.isfinite(loss))
    return loss[: bad[0]] if bad.size else loss


def _finish_log_axes(ax, xlabel: str, ylabel: str, *, fontsize: int, legend_size: int, x_max, legend_loc, title,
                     note: str | None):
    """What the loss curves and the twin distances share: a log y axis, labels, a light grid, the legend, the title
    and the source note."""
    ax.set_yscale("log")
    ax.set_xlabel(xlabel, fontsize=fontsize)
    ax.set_ylabel(ylabel, fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    if x_max is not None:
        ax.set_xlim(0, x_max)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=legend_size, frameon=True, framealpha=0.9, edgecolor="none", loc=legend_loc)
    if title is not None:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    if note:
        source_note(ax, note)
    return ax


def plot_loss_curves(grid, rows, *, against: str = "examples", colours=None, labels=None, styles=None,
                     ax=None, title: str | None = None, x_max=None, fontsize: int = FONT, note: bool = True,
                     legend_loc: str = "upper right"):
    """Draw the loss of each run in ``rows`` against examples seen or steps, log scale. Returns the Axes.

    A run that diverged is drawn up to its last finite state and ends in a red ×, labelled with
    the step at which it blew up.
    """
    check_choice("against", against, AGAINST)
    ax = get_ax(ax)
    rows = list(rows)
    colours = colours or [WARMUP_COLOURS[i % len(WARMUP_COLOURS)] for i in range(len(rows))]
    labels = labels or [grid.label(row) for row in rows]
    styles = styles or [{} for _ in rows]
    for i, (row, colour, label, style) in enumerate(zip(rows, colours, labels, styles)):
        loss = _finite_curve(grid, row)
        x = _x(grid, row, against)[: len(loss)]
        if grid.diverged(row):
            label += f": diverged at step {int(grid.diverged_at[row])}"
        ax.plot(x, loss, color=colour, lw=style.get("lw", 2.4), ls=style.get("ls", style.get("linestyle", LINE_STYLES[i % len(LINE_STYLES)])), label=label,
                zorder=style.get("zorder", 3), alpha=style.get("alpha", 1.0))
        if grid.diverged(row):
            ax.plot(x[-1:], loss[-1:], "x", color=RED, ms=13, mew=3, zorder=6)
    return _finish_log_axes(ax, "examples seen" if against == "examples" else "optimizer steps",
                            "loss on the whole data set", fontsize=fontsize, legend_size=fontsize - 1, x_max=x_max,
                            legend_loc=legend_loc, title=title, note=grid.describe() if note else None)


def plot_rule_curves(grid, *, k: int = 4, against: str = "examples", warmup: int = 0, ax=None, fontsize: int = FONT,
                     note: bool = True):
    """k = 1 at the base rate beside k ranks under ×1, ×√k and ×k (same examples each). Returns the Axes."""
    rows = [grid.index(k=1, multiplier=1.0)] + [grid.rule_index(k=k, rule=r, warmup=warmup) for r in ("x1", "sqrt", "linear")]
    colours = [K1_COLOUR] + [RULE_COLOURS[grid.rule_words(r)] for r in rows[1:]]
    styles = [dict(lw=4.5, alpha=0.45, zorder=2)] + [dict(linestyle=RULE_STYLES[grid.rule_words(r)]) for r in rows[1:]]
    what = "examples seen" if against == "examples" else "steps"
    title = f"{grid.model_short}: loss against {what}"
    return plot_loss_curves(grid, rows, against=against, colours=colours, styles=styles, ax=ax, title=title,
                            fontsize=fontsize, note=note)


def plot_paths(grid, rows, *, surface=None, max_examples: int | None = None, colours=None, labels=None, ax=None,
               title: str | None = None, fontsize: int = FONT, note: bool = True):
    """The line model's runs in ``rows`` as paths of θ = (w, c), one dot per state, over ``surface``. Returns the Axes.

    ``surface`` is ``(ws, cs, loss)`` from :func:`dpviz.topics.bigger_batch.theory.line_loss_surface`, drawn as
    contours; ``max_examples`` (default: all) ends every path once it has seen that many examples.
    """
    if grid.params is None:
        raise ValueError("grid must hold every run's parameters (line-model grids do); this one does not.")
    ax = get_ax(ax)
    rows = list(rows)
    colours = colours or [WARMUP_COLOURS[i % len(WARMUP_COLOURS)] for i in range(len(rows))]
    labels = labels or [grid.label(row) for row in rows]
    if surface is not None:
        ws, cs, loss = surface
        levels = np.geomspace(max(float(loss.min()), 1e-3) * 1.05, float(loss.max()), 12)
        ax.contour(ws, cs, loss, levels=levels, colors=SLATE, linewidths=0.8, alpha=0.45, zorder=1)
    for row, colour, label in zip(rows, colours, labels):
        theta = grid.params[row, : grid.steps[row] + 1]
        if max_examples is not None:
            theta = theta[grid.examples_seen(row) <= max_examples]
        theta = theta[np.isfinite(theta).all(axis=1)]
        small = grid.k[row] == 1
        ax.plot(theta[:, 0], theta[:, 1], "-o" if small else "-s", color=colour, lw=1.6 if small else 2.6,  # k = 1: dots
                ms=4.5 if small else 7,
                label=label, zorder=3 if small else 4, alpha=0.9)
    start = grid.params[rows[0], 0]
    ax.plot([start[0]], [start[1]], "*", color=INK, ms=16, zorder=5, label="θ(0), where every run starts")
    ax.set_xlabel("w (slope)", fontsize=fontsize)
    ax.set_ylabel("c (intercept)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.legend(fontsize=fontsize - 2, frameon=True, framealpha=0.9, edgecolor="none", loc="upper right")
    if title is not None:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    if note:
        source_note(ax, grid.describe())
    return ax


def plot_step_gaps(grids, *, bowl=None, ax=None, fontsize: int = FONT, note: bool = True):
    """Each un-warmed k > 1 run's median step_gap / step_length against its small-step rate lr/k. Returns the Axes.

    ``grids`` is a list of LrGrid; a diverged run is left out (its steps stop making sense).
    ``bowl`` is ``(rates, {label: gaps})`` from :func:`dpviz.topics.bigger_batch.theory.bowl_step_gap`, drawn
    dashed and labelled modeled.
    """
    ax = get_ax(ax)
    for grid in grids:
        model = grid.meta["model"]
        for k in sorted(set(grid.k.tolist()) - {1}):
            rows = [r for r in np.flatnonzero((grid.k == k) & (grid.warmup == 0)) if not grid.diverged(r)]
            rates = [grid.small_step_rate(r) for r in rows]
            gaps = [grid.median_relative_gap(r) for r in rows]
            ax.plot(rates, gaps, MODEL_MARKERS[model], ls="-", lw=1.2, color=K_COLOURS.get(k, INK), ms=9,
                    mfc="white" if model == "mlp" else K_COLOURS.get(k, INK), mew=2,
                    label=f"{grid.model_short}, k={k} (measured)", zorder=4)
    if bowl is not None:
        rates, curves = bowl
        for (label, gaps), ls in zip(curves.items(), ("--", ":")):
            ax.plot(rates, gaps, color=SLATE, ls=ls, lw=1.8, label=f"{label} ({MODELED_NOTE})", zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("small-step rate lr / k", fontsize=fontsize)
    ax.set_ylabel("|one big step − k small steps| / |big step|", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=fontsize - 2, frameon=True, framealpha=0.9, edgecolor="none", loc="lower right")
    ax.set_title("every run: the gap, median over its steps", fontsize=fontsize + 1, loc="left")
    if note:
        source_note(ax, "; ".join(grid.describe() for grid in grids))
    return ax


def plot_twin_distance(grid, rows, *, colours=None, labels=None, x_max=None, ax=None, title: str | None = None,
                       fontsize: int = FONT, note: bool = True, legend_loc: str = "upper right"):
    """|θ(t) − θ_twin(k·t)| of each run in ``rows`` against examples seen, log scale. Returns the Axes."""
    ax = get_ax(ax)
    rows = list(rows)
    colours = colours or [WARMUP_COLOURS[i % len(WARMUP_COLOURS)] for i in range(len(rows))]
    labels = labels or [grid.label(row) for row in rows]
    for row, colour, label in zip(rows, colours, labels):
        if grid.twin[row] < 0:
            raise ValueError(f"rows must name runs that have a twin in the grid; run {row} ({grid.label(row)}) has none.")
        d = grid.twin_distance[row, : grid.steps[row] + 1]
        x = grid.examples_seen(row)
        keep = np.isfinite(d) & (d > 0)
        ax.plot(x[keep], d[keep], "-o", color=colour, lw=2.4, ms=5, label=label, zorder=3)
    return _finish_log_axes(ax, "examples seen", "|θ − θ of its k = 1 twin|", fontsize=fontsize,
                            legend_size=fontsize - 2, x_max=x_max, legend_loc=legend_loc, title=title,
                            note=grid.describe() if note else None)


class LossCurves:
    """The slider figure's artists, built once: loss against examples (left) and against steps (right).

    In each panel: the k = 1 reference run (wide, dark, part of the background: it changes only
    with the grid), the chosen run (blue), the same run without warm-up (dashed, when the chosen
    one has a warm-up), and a red × where a run diverged. :meth:`show` refills them in place.
    """

    def __init__(self, fig, axes, *, fontsize: int = FONT):
        self.fig = fig
        self.axes = axes
        self.reference, self.chosen, self.plain, self.blowup = [], [], [], []
        for ax, against in zip(axes, AGAINST):
            self.reference.append(ax.plot([], [], color=K1_COLOUR, lw=5, alpha=0.4, zorder=2)[0])
            self.plain.append(ax.plot([], [], color=REPLICA, lw=1.8, ls="--", alpha=0.7, zorder=3)[0])
            self.chosen.append(ax.plot([], [], color=REPLICA, lw=2.6, zorder=4)[0])
            self.blowup.append(ax.plot([], [], "x", color=RED, ms=14, mew=3, zorder=5)[0])
            ax.set_yscale("log")
            ax.set_xlabel("examples seen" if against == "examples" else "optimizer steps", fontsize=fontsize)
            ax.tick_params(labelsize=fontsize - 1)
            ax.grid(True, which="major", alpha=0.3)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        axes[0].set_ylabel("loss on the whole data set", fontsize=fontsize)
        handles = [Line2D([], [], color=K1_COLOUR, lw=5, alpha=0.4), Line2D([], [], color=REPLICA, lw=2.6),
                   Line2D([], [], color=REPLICA, lw=1.8, ls="--", alpha=0.7),
                   Line2D([], [], ls="", marker="x", color=RED, ms=12, mew=3)]
        self.legend = axes[1].legend(handles, ["k = 1 at η (reference)", "the chosen run", "the same without warm-up",
                                               "diverged"], fontsize=fontsize - 2, loc="upper right", frameon=True,
                                     framealpha=0.9, edgecolor="none")
        self.titles = [ax.set_title("", fontsize=fontsize + 1, loc="left") for ax in axes]
        self.note = fig.text(0.01, 0.01, "", fontsize=8, color=SLATE, ha="left", va="bottom")

    def changing_artists(self) -> list:
        """What :meth:`show_run` changes on every move (the reference and the axes change only with the grid)."""
        return [*self.chosen, *self.plain, *self.blowup]

    def show_grid(self, grid) -> None:
        """Set everything that depends on the grid alone: the reference curve, the axis ranges, titles and note."""
        ref = grid.index(k=1, multiplier=1.0)
        loss = _finite_curve(grid, ref)
        finite = grid.loss[np.isfinite(grid.loss)]
        low, start = float(finite.min()), float(grid.loss[ref, 0])
        for line, ax, against in zip(self.reference, self.axes, AGAINST):
            line.set_data(_x(grid, ref, against)[: len(loss)], loss)
            ax.set_ylim(low / 1.6, start * 12)
            ax.set_xlim(0, _x(grid, ref, against)[-1] * 1.02)
        self.titles[0].set_text(f"{grid.model_words}: loss against examples seen")
        self.titles[1].set_text("… and against optimizer steps")
        self.note.set_text(grid.describe())

    def show_run(self, grid, row: int, plain: int | None = None) -> None:
        """Draw run ``row`` (and ``plain``, the same rate without warm-up, dashed; None hides it)."""
        for panel, against in enumerate(AGAINST):
            for line, r in ((self.chosen[panel], row), (self.plain[panel], plain)):
                if r is None:
                    line.set_data([], [])
                    continue
                loss = _finite_curve(grid, r)
                line.set_data(_x(grid, r, against)[: len(loss)], loss)
            loss = _finite_curve(grid, row)
            if grid.diverged(row) and len(loss):
                # where it blew up; a loss above the view is marked at the top edge, where the curve leaves it
                top = self.axes[panel].get_ylim()[1] / 1.4
                self.blowup[panel].set_data(_x(grid, row, against)[len(loss) - 1: len(loss)], [min(loss[-1], top)])
            else:
                self.blowup[panel].set_data([], [])
