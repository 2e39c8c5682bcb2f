"""Overlap timelines: when each bucket's all-reduce ran against the backward pass, one row per way of syncing.

    plot_overlap_timelines(run)                     # one typical step per mode, measured (an OverlapRecord)
    plot_overlap_steps(run, bounds)                 # median step per mode, beside the modeled bounds

In each row the thick bar is the rank's own work: lavender while it computes (forward, backward,
and the optimizer step at the end), grey while it can do nothing but wait for the gradients to
come back. Under it, each coral bar is one all-reduce, from the moment it was started to the
moment it completed. Coral that lies under lavender is communication the backward pass hid; coral
under grey is what it could not hide.
"""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from dpviz.engine.style import (
    COMM_HATCH, CORAL, GREY, IDEAL_STYLE, INK, LAVENDER, MODELED_NOTE, SLATE, WAIT, WAIT_HATCH, get_ax,
    open_frame,
)

MODE_LABELS = {
    "serial": "serial\n(s01: no overlap)",
    "per_parameter": "per parameter",
    "one_buffer": "one flat buffer",
    "buckets": "buckets",
    "ddp": "DDP",
}


def plot_overlap_timelines(record, *, rank: int = 0, ax=None, fontsize: float = 11, title: str | None = None):
    """One typical (median-length) step of every mode on ``rank``, compute and wait above, all-reduces below."""
    ax = get_ax(ax)
    modes = list(record.mode)
    longest = 0.0
    for row, mode in enumerate(modes):
        r, s = record.index(mode), record.typical_step(mode, rank)
        fwd, ready, synced, end = (float(a[r, s, rank]) * 1e3 for a in
                                   (record.t_forward_end, record.t_grads_ready, record.t_synced, record.t_step_end))
        y = row
        ax.broken_barh([(0, ready), (synced, end - synced)], (y - 0.38, 0.4), facecolors=LAVENDER, edgecolors=INK,
                       linewidth=0.6)
        ax.broken_barh([(ready, synced - ready)], (y - 0.38, 0.4), facecolors=WAIT, edgecolors=GREY, linewidth=0.6,
                       hatch=WAIT_HATCH)
        ax.plot([fwd, fwd], [y - 0.38, y + 0.02], color=INK, linewidth=0.8)
        n = int(record.n_buckets[r])
        starts, ends = record.comm_start[r, s, rank, :n] * 1e3, record.comm_end[r, s, rank, :n] * 1e3
        ax.broken_barh(list(zip(starts, ends - starts)), (y + 0.06, 0.26), facecolors=CORAL, edgecolors=INK,
                       linewidth=0.5, alpha=0.85, hatch=COMM_HATCH)
        ax.text(end, y - 0.18, f"  {end:.1f} ms", va="center", ha="left", fontsize=fontsize - 1, color=INK)
        longest = max(longest, end, float(np.nanmax(ends)) if n else 0.0)
    ax.set_yticks(range(len(modes)), [MODE_LABELS.get(m, m) for m in modes], fontsize=fontsize - 1)
    ax.set_ylim(len(modes) - 0.5, -0.6)
    ax.set_xlim(0, longest * 1.22)
    ax.set_xlabel(f"time within one step on rank {rank} (ms), measured: the median-length step of each", fontsize=fontsize - 1)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    open_frame(ax)
    handles = [
        Patch(facecolor=LAVENDER, edgecolor=INK, label="compute: forward | backward, then the optimizer step"),
        Patch(facecolor=WAIT, edgecolor=GREY, hatch=WAIT_HATCH, label="waiting for the averaged gradients"),
        Patch(facecolor=CORAL, edgecolor=INK, hatch=COMM_HATCH, label="an all-reduce, from start to completion"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=3, fontsize=fontsize - 2, frameon=False,
              handlelength=2.4, handleheight=1.2)
    ax.set_title(title or "When the all-reduces ran against the backward pass", fontsize=fontsize + 1, loc="left")
    return ax


def plot_overlap_steps(record, bounds, *, ax=None, fontsize: float = 11, title: str | None = None):
    """Median step time of each mode (measured bars) beside ``bounds``, an :class:`~dpviz.topics.waiting.theory.OverlapBounds`.

    ``bounds`` is modeled from the serial mode's own phases: its ``serial`` sum is what s01 assumes,
    its ``best`` the shortest step any overlap could give.
    """
    ax = get_ax(ax)
    modes = list(record.mode)
    steps = [record.phases(m)["step"] * 1e3 for m in modes]
    y = np.arange(len(modes))
    ax.barh(y, steps, height=0.6, color=LAVENDER, edgecolor=INK, linewidth=0.8)
    for yi, value in zip(y, steps):
        ax.text(value, yi, f"  {value:.1f}", va="center", ha="left", fontsize=fontsize - 1, color=INK)
    ax.axvline(bounds.serial * 1e3, **IDEAL_STYLE, label=f"{MODELED_NOTE}, no overlap (s01): {bounds.serial * 1e3:.1f} ms")
    ax.axvline(bounds.best * 1e3, color=SLATE, linestyle=":", linewidth=1.8,
               label=f"{MODELED_NOTE}, sync fully hidden: {bounds.best * 1e3:.1f} ms")
    ax.set_yticks(y, [MODE_LABELS.get(m, m).split("\n")[0] for m in modes], fontsize=fontsize - 1)
    ax.set_ylim(len(modes) - 0.4, -0.6)
    ax.set_xlim(0, max(max(steps), bounds.serial * 1e3) * 1.3)
    ax.set_xlabel("median step (ms), measured", fontsize=fontsize - 1)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, fontsize=fontsize - 2, frameon=False)  # under
    for side in ("top", "right"):  # the axis label, where no bar or line can run into it
        ax.spines[side].set_visible(False)
    ax.set_title(title or "Step time per mode", fontsize=fontsize + 1, loc="left")
    return ax
