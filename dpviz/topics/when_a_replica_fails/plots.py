"""Drawing the chapter's records: the loss through failures and restarts, what each checkpoint interval lost beside
the model, DiLoCo's loss and bytes. ``plot_*(record, *, ax=None) -> Axes``; nothing here computes what a run or
:mod:`dpviz.topics.when_a_replica_fails.theory` should have."""

from __future__ import annotations

import numpy as np

from dpviz.engine.style import (BAND_GREY, CORAL, INK, LAVENDER, MODELED_NOTE, ORANGE,
                                PURPLE, REPLICA, SLATE, TEAL, get_ax, open_frame)
from dpviz.topics.when_a_replica_fails.records import MODE_NAMES, MODES

MODE_STYLE = {"dp": dict(color=INK, marker="o"), "local": dict(color=TEAL, marker="s"),
              "diloco": dict(color=ORANGE, marker="^"), "streaming": dict(color=PURPLE, marker="v")}


def _finish(ax, fontsize: float, *, legend: bool = True):
    """What every plot here ends with: tick labels a size under the text, the legend without a frame, an open frame."""
    ax.tick_params(labelsize=fontsize - 1)
    if legend:
        ax.legend(fontsize=fontsize - 1, frameon=False)
    open_frame(ax)
    return ax


def plot_restart_loss(record, *, ax=None, fontsize: float = 10):
    """Each step's loss through the failures (markers) over the unfailed run's (line); each failure's redone steps
    shaded from the checkpoint it resumed from to the step it died in."""
    ax = get_ax(ax)
    steps = np.arange(record.meta["steps"])
    for i, (at, back) in enumerate(zip(record.kill_step, record.checkpoint_step)):
        ax.axvspan(back - 0.5, at + 0.5, color=BAND_GREY, zorder=0,
                   label="steps done again after a failure" if i == 0 else None)
        ax.axvline(at + 0.5, color=CORAL, linewidth=1.5, zorder=1, label="a rank SIGKILLed" if i == 0 else None)
    ax.plot(steps, record.loss_unfailed, color=SLATE, linewidth=2, label="no failure", zorder=2)
    ax.plot(steps, record.loss_restarted, linestyle="none", marker="o", markersize=4.5, color=REPLICA,
            label="restarted from the last checkpoint", zorder=3)
    ax.set_xlabel("step", fontsize=fontsize)
    ax.set_ylabel("loss (mean over ranks)", fontsize=fontsize)
    return _finish(ax, fontsize)


def plot_young_daly(record, modeled_every, modeled_ms, tau_steps: float, *, ax=None, fontsize: float = 10):
    """Measured seconds lost at each C (checkpoints plus redone work) beside the modeled curve, with Young/Daly's
    τ* (in steps) marked. ``modeled_every``, ``modeled_ms`` and ``tau_steps`` come from the theory."""
    ax = get_ax(ax)
    ax.plot(modeled_every, modeled_ms, color=SLATE, linestyle="--", linewidth=1.5,
            label=f"{MODELED_NOTE}: δ·(saves) + failures·C·t_step/2")
    ax.bar(record.every, 1e3 * record.checkpoint_seconds, width=0.35 * record.every, color=LAVENDER,
           edgecolor=INK, linewidth=0.6, label="measured: checkpoints")
    ax.bar(record.every, 1e3 * record.lost_seconds, bottom=1e3 * record.checkpoint_seconds,
           width=0.35 * record.every, color=CORAL, edgecolor=INK, linewidth=0.6, label="measured: work done again")
    ax.axvline(tau_steps, color=INK, linewidth=2, label=f"Young/Daly τ* = {tau_steps:.1f} steps")
    ax.set_xscale("log", base=2)
    ticks = 2 ** np.arange(int(np.log2(max(modeled_every))) + 1)
    ax.set_xticks(ticks, [str(int(t)) for t in ticks])
    ax.set_xlabel("C, steps between checkpoints (log scale)", fontsize=fontsize)
    ax.set_ylabel("ms lost to checkpoints\nand redone work", fontsize=fontsize)
    return _finish(ax, fontsize)


def plot_diloco_loss(record, *, ax=None, fontsize: float = 10):
    """The whole data set's loss after every H steps, one line per way to sync."""
    ax = get_ax(ax)
    steps = record.synced_steps()
    for i, mode in enumerate(MODES):
        ax.plot(steps, record.full_loss[i], label=MODE_NAMES[mode], markersize=5, linewidth=1.5, **MODE_STYLE[mode])
    ax.set_yscale("log")
    ax.set_xticks(steps)
    ax.set_xlabel(f"inner step (a sync every H = {record.meta['H']})", fontsize=fontsize)
    ax.set_ylabel("whole data set's loss", fontsize=fontsize)
    return _finish(ax, fontsize)


def plot_diloco_bytes(record, *, ax=None, fontsize: float = 10):
    """Bytes each rank all-reduced per inner step, counted in the ranks, one bar per way to sync."""
    ax = get_ax(ax)
    per_step = record.bytes_per_step()
    y = np.arange(len(MODES))
    values = [per_step[m] for m in MODES]
    ax.barh(y, values, height=0.6, color=[MODE_STYLE[m]["color"] for m in MODES], edgecolor=INK, linewidth=0.6)
    for yi, value in zip(y, values):
        ax.text(value, yi, f" {value:,.1f} B", va="center", ha="left", fontsize=fontsize - 1, color=INK)
    ax.set_yticks(y, [MODE_NAMES[m] for m in MODES])
    ax.set_ylim(len(MODES) - 0.5, -0.5)
    ax.set_xlim(0, 1.3 * max(values))
    ax.set_xlabel("bytes each rank all-reduced per inner step (counted in the ranks)", fontsize=fontsize)
    return _finish(ax, fontsize, legend=False)


def plot_carry_on_loss(record, *, ax=None, fontsize: float = 10):
    """Each step's loss through the shrink and the regrow (markers) over the unfailed run's (line); the steps taken
    by k − 1 ranks shaded, the kill and the newcomer's arrival marked."""
    ax = get_ax(ax)
    m = record.meta
    steps = np.arange(m["steps"])
    fewer = np.flatnonzero(record.world_size < m["k"])
    ax.axvspan(fewer[0] - 0.5, fewer[-1] + 0.5, color=BAND_GREY, zorder=0, label=f"{m['k'] - 1} ranks carry on")
    ax.axvline(m["kill_step"] - 0.5, color=CORAL, linewidth=1.5, zorder=1, label=f"rank {m['kill_rank']} SIGKILLed")
    ax.axvline(m["regrow_at"] - 0.5, color=INK, linewidth=1.5, linestyle=":", zorder=1, label="a newcomer joins")
    ax.plot(steps, record.loss_unfailed, color=SLATE, linewidth=2, label=f"{m['k']} ranks, no failure", zorder=2)
    ax.plot(steps, record.loss_carry_on, linestyle="none", marker="o", markersize=4.5, color=REPLICA,
            label="through the failure", zorder=3)
    ax.set_xlabel("step", fontsize=fontsize)
    ax.set_ylabel("loss (mean over ranks)", fontsize=fontsize)
    return _finish(ax, fontsize)
