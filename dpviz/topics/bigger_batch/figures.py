"""A bigger batch wants a bigger step: loss curves by learning-rate rule, the linear rule's one step, warm-up.

Records: :data:`dpviz.topics.bigger_batch.records.FIGURE_PLAN` (one grid of runs per model); the chapter's claims
are :func:`dpviz.topics.bigger_batch.claims.lr_claims`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from dpviz.topics.bigger_batch import claims
from dpviz.engine.data import line_data
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, figure, legend_below, measured_lines, title_of, wrap_titles
from dpviz.topics.bigger_batch.plots import (
    K1_COLOUR,
    LINE_STYLES,
    WARMUP_COLOURS,
    plot_loss_curves,
    plot_paths,
    plot_rule_curves,
    plot_step_gaps,
    plot_twin_distance,
)
from dpviz.topics.bigger_batch.records import FIGURE_PLAN, LrGrid
from dpviz.topics.bigger_batch import theory as lr_rules


def figure_lr_loss_curves(line: LrGrid, mlp: LrGrid, *, k: int = 4) -> Figure:
    """K = 1 at η beside k ranks at ×1, ×√k and ×k, against examples seen and against steps, both models."""
    fig = figure((6.8, 7.2))
    axes = fig.subplots(2, 2)
    fig.subplots_adjust(left=0.11, right=0.98, top=0.83, bottom=0.17, hspace=0.42, wspace=0.32)
    for row, grid in enumerate((line, mlp)):
        for col, against in enumerate(("examples", "steps")):
            plot_rule_curves(grid, k=k, against=against, ax=axes[row, col], fontsize=10, note=False)
            axes[row, col].set_ylabel("loss, whole data set", fontsize=10)
            _plain_log_labels(axes[row, col])
    for ax in (axes[0, 0], axes[0, 1], axes[1, 1]):
        ax.get_legend().remove()  # the four panels draw the same four runs: one legend, under them
    legend_below(axes[1, 0], gap=0.55, ncol=2, fontsize=9)
    words = [f"{grid.model_short}: ×√k {grid.examples_ratio(k=k, rule='sqrt'):.2g}×, ×1 {grid.examples_ratio(k=k, rule='x1'):.2g}×"
             for grid in (line, mlp)]
    fig.suptitle(f"The same examples on k = {k} ranks: with ×k the big batch keeps pace with one rank, example "
                      f"for example. The gentler rules need more examples to reach the same loss ({'; '.join(words)}).",
                 fontsize=11, x=0.01, y=0.99, ha="left", va="top")
    alt = [f"Four line charts of loss on a log scale, the line model on top and the MLP below, against examples seen "
           f"(left) and optimizer steps (right), for k = 1 at η = {line.meta['base_lr']:g} and k = {k} at ×1, ×√k and ×k",
           title_of(fig)]
    return caption(wrap_titles(fig), measured_lines([line, mlp], "Runs"), alt=alt)


def _plain_log_labels(ax) -> None:
    """Label a log axis that spans less than a decade with plain numbers (0.02, 0.03 ...), short beside its label."""
    low, high = ax.get_ylim()
    if high / low < 40:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(  # 2, 3 and 5 of each decade: more would touch
            lambda v, _pos: f"{v:g}" if round(v / 10 ** np.floor(np.log10(v))) in (2, 3, 5) else ""))
        ax.tick_params(axis="y", which="both", labelsize=9)


def _path_surface(grid: LrGrid, rows) -> tuple:
    """Contours under the line model's paths: the loss on the grid's own data set, over the paths' extent."""
    x, y = line_data(grid.meta["dataset_size"], seed=grid.meta["seed"])
    theta = np.concatenate([grid.params[r, : grid.steps[r] + 1] for r in rows])
    theta = theta[np.isfinite(theta).all(axis=1)]
    lo, hi = theta.min(axis=0), theta.max(axis=0)
    pad = 0.25 * (hi - lo) + 0.1
    ws = np.linspace(lo[0] - pad[0], hi[0] + pad[0], 160)
    cs = np.linspace(lo[1] - pad[1], hi[1] + pad[1], 160)
    return ws, cs, lr_rules.line_loss_surface(x, y, ws, cs)


def figure_lr_linear_rule(line: LrGrid, mlp: LrGrid, *, k: int = 4, small: float = 4.0, large: float = 64.0,
                          big_steps: int = 6) -> Figure:
    """One step of k·η against k steps of η, from the same θ: in the (w, c) plane, and measured on every run."""
    fig = figure((6.8, 9.6))
    mosaic = fig.subplot_mosaic([["small", "large"], ["gaps", "gaps"]], height_ratios=(1, 1.15))
    axes = [mosaic["small"], mosaic["large"], mosaic["gaps"]]
    fig.subplots_adjust(left=0.11, right=0.98, top=0.86, bottom=0.2, hspace=0.75, wspace=0.32)
    gaps = {}
    for ax, multiplier in zip(axes[:2], (small, large)):
        row = line.index(k=k, multiplier=multiplier)
        twin = int(line.twin[row])
        eta = line.small_step_rate(row)
        shown = None if multiplier == small else big_steps * k * line.meta["b"]
        plot_paths(line, [twin, row], surface=_path_surface(line, [twin, row]), max_examples=shown,
                   colours=[K1_COLOUR, WARMUP_COLOURS[0]], ax=ax, fontsize=10, note=False,
                   labels=[f"k=1: {k} steps of η={eta:.3g}", f"k={k}: 1 step of {k}η={k * eta:.3g}"])
        gaps[multiplier] = line.median_relative_gap(row)
        what = "whole run" if shown is None else f"first {big_steps} big steps"
        ax.set_title(f"line model, ×{multiplier:g}\n({what})", fontsize=11, loc="left")
        legend_below(ax, gap=0.5, fontsize=8.5)
    x, _ = line_data(line.meta["dataset_size"], seed=line.meta["seed"])
    lam = lr_rules.line_curvatures(x)
    rates = np.geomspace(0.002, 2.0 / lam[0] / k * 1.2, 80)
    bowl = (rates, {f"line's bowl, k={k}, λ = {lam[0]:.2f}": lr_rules.bowl_step_gap(rates, k, lam[0]),
                    f"line's bowl, k={k}, λ = {lam[1]:.2f}": lr_rules.bowl_step_gap(rates, k, lam[1])})
    plot_step_gaps([line, mlp], bowl=bowl, ax=axes[2], fontsize=10, note=False)
    axes[2].set_ylabel("|big step − k small| / |big step|", fontsize=10)
    legend_below(axes[2], gap=0.55, ncol=2, fontsize=9)
    fig.suptitle(f"The linear rule: one step of {k}η on the mean of {k} batches lands where {k} steps of η land, "
                      f"while η is small. From the same θ they land {gaps[small]:.0%} of a step apart at "
                      f"η = {line.small_step_rate(line.index(k=k, multiplier=small)):.3g} (median), {gaps[large]:.0%} at "
                      f"η = {line.small_step_rate(line.index(k=k, multiplier=large)):.3g}: there the big steps overshoot "
                      "the valley.", fontsize=11, x=0.01, y=0.99, ha="left", va="top")
    alt = [f"Top, two paths in the line model's (w, c) plane over loss contours: {k} small steps against one step of "
           f"{k}η, at ×{small:g} (the paths coincide) and ×{large:g} (the big steps overshoot). Bottom, a log-log chart "
           "of the gap between them against the small-step rate, measured on both models, beside the bowl's modeled gap",
           title_of(fig)]
    return caption(wrap_titles(fig), measured_lines([line, mlp], "Runs"), alt=alt)


def _warmup_words(warmup: int) -> str:
    return f"warm-up {warmup} steps" if warmup else "no warm-up"


def figure_lr_warmup(line: LrGrid, mlp: LrGrid, *, k: int = 4, rescued: float = 64.0, limit: float = 128.0,
                     mlp_limit: float = 64.0, x_max: int = 384) -> Figure:
    """Where the linear rule lags, a short warm-up rescues it; past the curvature limit it only postpones the blow-up."""
    fig = figure((6.8, 8.6))
    axes = fig.subplots(2, 2)
    fig.subplots_adjust(left=0.11, right=0.98, top=0.83, bottom=0.19, hspace=0.95, wspace=0.34)
    warmups = list(line.meta["warmups"])
    rows = [line.index(k=k, multiplier=rescued, warmup=w) for w in warmups]
    twin = int(line.twin[rows[0]])
    colours = [WARMUP_COLOURS[i % len(WARMUP_COLOURS)] for i in range(len(rows))]
    dashes = [dict(ls=LINE_STYLES[(i + 1) % len(LINE_STYLES)]) for i in range(len(warmups))]  # one per warm-up, all panels
    styles = [dict(lw=4.5, alpha=0.45, zorder=2)] + dashes
    floor = 1.5 * line.final_loss(twin)
    reach = {w: line.examples_to_reach(r, floor) for w, r in zip(warmups, rows)}
    best = min((w for w in warmups if w), key=lambda w: reach[w])
    words = [_warmup_words(w) for w in warmups]
    plot_loss_curves(line, [twin, *rows], colours=[K1_COLOUR, *colours], styles=styles, x_max=x_max, ax=axes[0, 0],
                     labels=[f"twin: {line.label(twin)}", *words], fontsize=10, note=False,
                     title=f"line model, k={k}, ×{rescued:g}\n(η={line.meta['base_lr'] * rescued:.3g}): the loss")
    plot_twin_distance(line, rows, colours=colours, x_max=x_max, ax=axes[0, 1], fontsize=10, note=False, labels=words,
                       title=f"… and its distance to the\ntwin, k=1 at η={line.small_step_rate(rows[0]):.3g}")
    axes[0, 1].get_legend().remove()  # the same runs as on its left: one legend for the row
    legend_below(axes[0, 0], gap=0.5, ncol=2, fontsize=9)
    at = {}
    for ax, grid, multiplier in ((axes[1, 0], line, limit), (axes[1, 1], mlp, mlp_limit)):
        runs = [grid.index(k=k, multiplier=multiplier, warmup=w) for w in grid.meta["warmups"]]
        at[grid.meta["model"]] = steps = [int(grid.diverged_at[r]) for r in runs]
        plot_loss_curves(grid, runs, against="steps", ax=ax, fontsize=10, note=False, styles=dashes[:len(runs)],
                         labels=[_warmup_words(w) for w in grid.meta["warmups"]],
                         title=f"{grid.model_short}, k={k}, ×{multiplier:g}\n(η={grid.meta['base_lr'] * multiplier:.3g}): past the limit")
        finite = grid.loss[runs][np.isfinite(grid.loss[runs])]
        ax.set_ylim(finite.min() / 2, finite.max() * 30)  # room above the highest × for its marker
        ax.set_xlim(0, max(steps) * 1.15 + 2)
        legend_below(ax, gap=0.5, fontsize=8.5)
    for ax in axes.flat:
        ax.set_ylabel(ax.get_ylabel().replace("loss on the whole data set", "loss, whole data set"), fontsize=10)
    limit_rate = lr_rules.stability_limit(line_data(line.meta["dataset_size"], seed=line.meta["seed"])[0])
    fig.suptitle(f"Warm-up shortens the first, overshooting steps: at ×{rescued:g} the loss is within 1.5× its floor "
                      f"after {reach[best]:.0f} examples with {best} warm-up steps, {reach[0]:.0f} without. It cannot make a "
                      f"rate past the curvature limit safe (line model: η = {line.meta['base_lr'] * limit:.3g} > "
                      f"2/λ_max = {limit_rate:.2f}): every warm-up only postpones the blow-up.",
                 fontsize=11, x=0.01, y=0.99, ha="left", va="top")
    alt = [f"Four line charts: top, the line model's loss and its distance to the k = 1 twin at ×{rescued:g} with "
           f"warm-ups of {', '.join(map(str, warmups))} steps; bottom, loss against steps past the limit, each curve "
           "ending in a cross where it diverged (line model at steps "
           f"{', '.join(map(str, at[line.meta['model']]))}; MLP at {', '.join(map(str, at[mlp.meta['model']]))})",
           title_of(fig)]
    return caption(wrap_titles(fig), measured_lines([line, mlp], "Runs"), alt=alt)


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    line, mlp = records["lr_line"], records["lr_mlp"]
    return {
        "lr_loss_curves": (figure_lr_loss_curves(line, mlp), [line, mlp]),
        "lr_linear_rule": (figure_lr_linear_rule(line, mlp), [line, mlp]),
        "lr_warmup": (figure_lr_warmup(line, mlp), [line, mlp]),
    }


GROUP = FigureGroup(name="bigger_batch", plan=FIGURE_PLAN, draw=draw, claims=claims.figure_claims)
