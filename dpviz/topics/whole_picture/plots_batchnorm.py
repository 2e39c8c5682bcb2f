"""Batch norm under data parallelism: the statistics each replica normalised with, and what that did to the gradient.

    from dpviz.topics.whole_picture.run_batchnorm import record_batchnorm
    run = record_batchnorm(k=2, b=8, steps=3)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    plot_batchnorm_means(run, ax=left)     # each shard's mean of the layer's input, against the whole batch's
    plot_batchnorm_errors(run, ax=right)   # the all-reduced gradient's distance from the big-batch gradient

Both draw a :class:`dpviz.topics.whole_picture.records.BatchNormRun` and compute nothing it does not hold, apart
from the relative error its own methods give.
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from dpviz.engine.style import CORAL, INK, REPLICA, SLATE, ZERO_LINE, get_ax, source_note
from dpviz.engine.tolerance import GRAD_TOLERANCE

RANK_MARKERS = "o^sDv<>p"


def plot_batchnorm_means(run, *, step: int = 0, ax=None, note: bool = True, fontsize: float = 11) -> "Axes":
    """Per hidden unit, the mean each rank's batch norm normalised with: its shard's (markers) and the batch's (bar)."""
    if not 0 <= step < run.steps:
        raise ValueError(f"step must be from 0 to {run.steps - 1} for this run; got {step}.")
    ax = get_ax(ax)
    shard, big = run.shard_mean[step], run.big_mean[step]  # (k, H), (H,)
    units = np.arange(len(big))
    ax.hlines(big, units - 0.35, units + 0.35, color=INK, linewidth=3, zorder=3)
    handles = [Line2D([], [], color=INK, linewidth=3, label="mean over the whole global batch")]
    for rank in range(run.k):
        marker = RANK_MARKERS[rank % len(RANK_MARKERS)]
        offset = 0.25 * (rank - (run.k - 1) / 2) / max(run.k - 1, 1)
        ax.plot(units + offset, shard[rank], marker, color=CORAL, markersize=8, linestyle="none", zorder=4)
        handles.append(Line2D([], [], marker=marker, color=CORAL, linestyle="none", markersize=8,
                              label=f"rank {rank}: mean over its own shard"))
    ax.plot(units, run.synced_mean[step, 0], "x", color=REPLICA, markersize=9, markeredgewidth=2, zorder=5)
    handles.append(Line2D([], [], marker="x", color=REPLICA, linestyle="none", markersize=9, markeredgewidth=2,
                          label="every rank, statistics all-reduced"))
    ax.axhline(0, color=ZERO_LINE, linewidth=0.8, zorder=0)
    ax.set_xticks(units)
    ax.set_xlabel("hidden unit (the batch norm's input)", fontsize=fontsize)
    ax.set_ylabel("mean it normalised with", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.legend(handles=handles, fontsize=fontsize - 2, loc="best", framealpha=0.92)
    ax.set_title(f"Training step {step}: each replica's own statistics, or the batch's", fontsize=fontsize + 1)
    if note:
        source_note(ax, run.describe())
    return ax


def plot_batchnorm_errors(run, *, tol: float = GRAD_TOLERANCE, ax=None, note: bool = True, fontsize: float = 11) -> "Axes":
    """Per step, max |all-reduced − big-batch| / max |big-batch|: per-shard statistics against all-reduced ones.

    ``note=False`` leaves out the line naming the run (for a panel beside another from the same run).
    """
    ax = get_ax(ax)
    local, synced = run.local_rel_err(), run.synced_rel_err()
    steps = np.arange(run.steps)
    floor = 1e-9  # a bar of exactly 0 (the same bits) still shows, at the bottom of the log scale
    ax.bar(steps - 0.2, np.maximum(local, floor), width=0.38, color=CORAL, edgecolor=INK,
           label="each replica's own statistics (BatchNorm1d)")
    ax.bar(steps + 0.2, np.maximum(synced, floor), width=0.38, color=REPLICA, edgecolor=INK,
           label="statistics all-reduced first")
    ax.axhline(tol, color=SLATE, linestyle="--", linewidth=1.5, label=f"float32 rounding ({tol:g})")
    ax.set_yscale("log")
    ax.set_ylim(floor, 1e3)  # room above the bars for the legend
    ax.set_xticks(steps)
    ax.set_xlabel("step", fontsize=fontsize)
    ax.set_ylabel("relative distance from the big-batch gradient", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.legend(fontsize=fontsize - 2, loc="upper center", framealpha=0.92)
    ax.set_title("The all-reduced gradient against one device on the whole batch", fontsize=fontsize + 1)
    if note:
        source_note(ax, run.describe())
    return ax
