"""Asynchronous SGD in pictures: stale arrows on the line model's loss, loss curves, and the staleness itself.

    plot_stale_arrows(run, grid, sync=sync_run)          # the path in the (w, c) plane, stale gradients drawn at θ_t
    plot_loss_against(runs, x="wall")                    # loss against wall-clock time (or x="updates")
    plot_staleness(run, modeled=tau)                     # how stale each worker's gradients were

``grid`` is ``(w, c, loss)`` from :func:`dpviz.topics.waiting.theory.line_loss` on a mesh. At an update t
with staleness τ, the red arrow is the step the server really took, −η·g with g computed at
θ_(t−τ) (the hollow dot, joined by a dotted line), drawn from θ_t where it was applied; the grey
arrow is the step a fresh gradient of the same mini-batch would have taken from θ_t.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from dpviz.engine.style import (
    BUTTER, GREY, INK, MINT, MINT_SHADES, RED, REPLICA, SLATE, WORKER_HATCHES, get_ax, open_frame,
)

COLOURS = {"async": INK, "sync": REPLICA}
ARROW = dict(angles="xy", scale_units="xy", scale=1.0, width=0.004, headwidth=4, headlength=5, headaxislength=4.5)


def notable_updates(record, *, count: int = 3, spacing: int = 6) -> list:
    """Updates worth drawing: stale ones (τ >= 1) whose step differs most from a fresh gradient's, ``spacing`` apart."""
    error = np.linalg.norm(record.grad.astype(float) - record.fresh_grad.astype(float), axis=1)
    chosen = []
    for t in np.argsort(-error, kind="stable"):
        if record.staleness[t] >= 1 and all(abs(int(t) - c) >= spacing for c in chosen):
            chosen.append(int(t))
        if len(chosen) == count:
            break
    return sorted(chosen)


def plot_stale_arrows(record, grid, *, sync=None, updates=None, ax=None, fontsize: float = 11, title: str | None = None):
    """The async path over the loss contours, with the stale and the fresh step at each of ``updates``.

    ``updates`` (indices t) default to :func:`notable_updates`. ``sync`` (an AsyncRecord of
    mode "sync") adds the synchronous path, dashed, for comparison.
    """
    ax = get_ax(ax)
    w, c, loss = grid
    levels = np.quantile(loss, np.linspace(0.0, 0.9, 14) ** 2)
    ax.contour(w, c, loss, levels=np.unique(levels), colors=GREY, linewidths=0.6, alpha=0.7)
    if sync is not None:
        path = np.concatenate([sync.theta_before, sync.theta_after[-1:]])
        ax.plot(path[:, 0], path[:, 1], "--", color=COLOURS["sync"], linewidth=1.6, marker=".", markersize=5,
                label=f"synchronous: {sync.updates} updates, each the mean of {sync.k} fresh gradients")
    path = np.concatenate([record.theta_before, record.theta_after[-1:]])
    ax.plot(path[:, 0], path[:, 1], "-", color=COLOURS["async"], linewidth=1.0, marker=".", markersize=4,
            label=f"asynchronous: {record.updates} updates, one gradient each")
    if updates is None:
        updates = notable_updates(record)
    eta = float(record.meta["lr"])
    for t in updates:
        now, pulled = record.theta_before[t], record.theta_pulled[t]
        ax.plot([pulled[0], now[0]], [pulled[1], now[1]], ":", color=SLATE, linewidth=1.2)
        ax.plot(*pulled, "o", markerfacecolor="white", markeredgecolor=SLATE, markersize=7)
        ax.annotate("", xy=now - eta * record.fresh_grad[t], xytext=now, zorder=4,  # dashed: the step not taken
                    arrowprops=dict(arrowstyle="-|>", color=GREY, linewidth=1.6, linestyle="--", shrinkA=0, shrinkB=0,
                                    mutation_scale=14))
        ax.quiver(*now, *(-eta * record.grad[t]), color=RED, zorder=5, **ARROW)
        ax.plot(*now, "o", color=RED, markersize=6, zorder=6)
        ax.annotate(f"t = {t}, τ = {record.staleness[t]}", now, xytext=(8, 6), textcoords="offset points",
                    fontsize=fontsize - 2, color=INK)
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color=RED, marker=r"$\rightarrow$", markersize=14, linestyle="none",
               label="the step taken at θ_t: −η·g, g computed at θ_(t−τ)"),
        Line2D([], [], color=GREY, marker=">", markersize=6, linestyle="--", linewidth=1.6,
               label="dashed: a fresh gradient's step from θ_t (same mini-batch)"),
        Line2D([], [], color=SLATE, linestyle=":", marker="o", markerfacecolor="white",
               label="θ_(t−τ), where the worker pulled θ"),
    ]
    ax.legend(handles=handles, loc="upper right", fontsize=fontsize - 2, framealpha=0.9)
    ax.set_xlabel("w (slope)", fontsize=fontsize)
    ax.set_ylabel("c (intercept)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.set_xlim(w.min(), w.max())
    ax.set_ylim(c.min(), c.max())
    ax.set_title(title or "Stale arrows: a gradient computed at an old θ is applied at the current one",
                 fontsize=fontsize + 1, loc="left")
    return ax


def plot_loss_against(runs: dict, *, x: str = "wall", ax=None, fontsize: float = 11, title: str | None = None):
    """Loss on the whole data set after every update of each run in ``runs`` ({label: AsyncRecord}).

    ``x="wall"``: against seconds since the start, by the server's clock; ``x="updates"``: against
    the number of updates.
    """
    if x not in ("wall", "updates"):
        raise ValueError(f"x must be one of 'wall', 'updates'; got {x!r}.")
    ax = get_ax(ax)
    for label, run in runs.items():
        xs = run.wall if x == "wall" else np.arange(run.updates + 1)
        ax.plot(xs, run.loss, color=COLOURS.get(run.mode, MINT), linestyle="--" if run.mode == "sync" else "-",
                linewidth=2, marker="." if run.updates <= 80 else None, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the start (server clock), measured" if x == "wall" else "updates applied",
                  fontsize=fontsize)
    ax.set_ylabel("loss on all the data", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.legend(fontsize=fontsize - 2, frameon=False)
    open_frame(ax)
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax


def plot_staleness(record, *, modeled=None, modeled_label: str = "modeled mean τ per worker", ax=None,
                   fontsize: float = 11, title: str | None = None):
    """How many updates had each staleness τ, stacked by worker; ``modeled`` (k,) marks each worker's modeled τ."""
    ax = get_ax(ax)
    top = int(record.staleness.max()) if record.updates else 0
    bins = np.arange(top + 2)
    bottom = np.zeros(top + 1)
    delays = record.meta["delays"]
    slowest = int(np.argmax(delays)) + 1
    for w, taus in record.staleness_by_worker().items():
        counts = np.histogram(taus, bins=bins)[0]
        colour = BUTTER if w == slowest and len(set(delays)) > 1 else MINT_SHADES[(w - 1) % len(MINT_SHADES)]
        ax.bar(bins[:-1], counts, bottom=bottom, width=0.8, color=colour, edgecolor=INK, linewidth=0.6,
               hatch=WORKER_HATCHES[(w - 1) % len(WORKER_HATCHES)] or None, label=f"worker {w} ({delays[w - 1] * 1e3:g} ms per gradient)")
        bottom += counts
    if modeled is not None:
        groups = []  # workers whose marks would overlap share one label, at their mean
        for tau, w in sorted((float(tau), w) for w, tau in enumerate(np.asarray(modeled), start=1)):
            if groups and tau - groups[-1][0][-1] < 0.6:
                groups[-1][0].append(tau)
                groups[-1][1].append(w)
            else:
                groups.append(([tau], [w]))
        for taus, workers in groups:
            tau = float(np.mean(taus))
            ax.plot([tau], [0], marker="^", markersize=11, color=SLATE, clip_on=False, zorder=5)
            ax.annotate("w" + ",".join(map(str, workers)), (tau, 0), xytext=(0, -30), textcoords="offset points",
                        ha="center", fontsize=fontsize - 2, color=SLATE, annotation_clip=False)
        ax.plot([], [], "^", color=SLATE, label=modeled_label)
    ax.set_xlabel("staleness τ (updates between pull and push)", fontsize=fontsize, labelpad=24)
    ax.set_ylabel("updates", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.set_ylim(0, bottom.max() * 1.7 if bottom.size else 1)
    ax.legend(fontsize=fontsize - 2, frameon=False, loc="upper right", handlelength=2.4, handleheight=1.2)
    open_frame(ax)
    ax.set_title(title or "How stale the asynchronous gradients were", fontsize=fontsize + 1, loc="left")
    return ax
