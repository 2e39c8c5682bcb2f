"""Sharded optimizer state: the memory each rank holds, and the parameters of both trainings side by side.

    plot_memory(zero_run, modeled={"ZeRO-2": ..., "ZeRO-3": ...})   # stacked bars per rank
    plot_zero_params(zero_run)                                     # a few parameters, step by step, both ways

Bars are bytes per rank: parameters (blue, the replica colour, solid), gradients (grey, vertical
lines) and Adam's state (butter, dotted). The measured bars come from the tensors each rank held in a
real run; the ones hatched with diagonals are what :func:`dpviz.topics.splitting.theory_memory.bytes_per_rank` gives for stages not run here.
"""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from dpviz.engine.style import (
    BUTTER, GREY, INK, MEASURED_NOTE, MODELED_NOTE, RED, REPLICA, get_ax, open_frame, source_note,
)

PART_COLOURS = {"params": REPLICA, "grads": GREY, "optimizer": BUTTER}
PART_WORDS = {"params": "parameters", "grads": "gradients", "optimizer": "Adam state (m and v)"}
PART_HATCHES = {"params": "", "grads": "||", "optimizer": ".."}  # the parts told apart without their colours
MODELED_HATCH = "///"


def plot_memory(record, *, modeled: dict | None = None, ax=None, fontsize: float = 11, note: str | None = None):
    """Stacked bytes per rank: plain data parallelism and ZeRO-1 (measured), then ``modeled`` stages. Returns the Axes.

    ``modeled`` maps a label to a ``{"params", "grads", "optimizer"}`` dict of bytes for one rank.
    """
    ax = get_ax(ax)
    k = record.k
    groups = [("plain data\nparallelism", record.memory_dp, False), ("ZeRO-1", record.memory_zero, False)]
    groups += [(label, np.array([[parts["params"], parts["grads"], parts["optimizer"]]]), True)
               for label, parts in (modeled or {}).items()]
    x, ticks, labels, centres = 0.0, [], [], []
    groups = [(label, np.asarray(values) / 1024, is_model) for label, values, is_model in groups]  # bytes -> KiB
    top = max(float(values.sum(axis=1).max()) for _, values, _ in groups)
    for label, values, is_model in groups:
        start = x
        for r, row in enumerate(values):
            bottom = 0.0
            for part, value in zip(PART_COLOURS, row):
                ax.bar(x, value, bottom=bottom, width=0.8, color=PART_COLOURS[part], edgecolor=INK, linewidth=0.8,
                       hatch=(MODELED_HATCH if is_model else "") + PART_HATCHES[part] or None)
                bottom += value
            ax.text(x, bottom + 0.01 * top, f"{bottom:.1f}", ha="center", va="bottom", fontsize=fontsize - 3)
            ticks.append(x)
            labels.append(f"{r}" if not is_model else "any")  # a rank's number; its group says "ranks"
            x += 1
        words = f"{label}\n(ranks, {MEASURED_NOTE})" if not is_model else f"{label}\n({MODELED_NOTE})"
        centres.append(((start + x - 1) / 2, words))
        x += 0.8
    ax.set_xticks(ticks, labels, fontsize=fontsize - 2, rotation=0)
    for centre, label in centres:
        ax.text(centre, -0.07, label, transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=fontsize - 2)
    ax.set_ylabel("KiB held per rank", fontsize=fontsize)
    ax.set_ylim(0, top * 1.12)
    ax.tick_params(axis="y", labelsize=fontsize - 1)
    open_frame(ax)
    handles = [Patch(facecolor=c, edgecolor=INK, hatch=PART_HATCHES[p] or None, label=PART_WORDS[p])
               for p, c in PART_COLOURS.items()]
    if modeled:  # an outline: it says how a bar was made, not what it holds
        handles.append(Patch(fill=False, edgecolor=INK, hatch=MODELED_HATCH, label=f"hatched ///: {MODELED_NOTE}"))
    ax.legend(handles=handles, fontsize=fontsize - 2, frameon=False, loc="upper right", handlelength=2.4,
              handleheight=1.2)
    shard = int(record.memory_zero[0, 2])
    ax.set_title(f"Memory per rank, k={k}, Adam: each ZeRO-1 rank holds {shard:,} of the\n"
                 f"{int(record.memory_dp[0, 2]):,} bytes of Adam state, 1/{k} of it", fontsize=fontsize + 1, loc="left")
    if note:
        source_note(ax, note)
        ax.texts[-1].set_position((0, -100))
    return ax


def plot_zero_params(record, *, indices=(0, 1, 2), ax=None, fontsize: float = 11):
    """A few parameters over the steps: plain data parallelism (lines) and ZeRO-1 (dots), rank 0. Returns the Axes."""
    ax = get_ax(ax)
    steps = np.arange(record.params_dp.shape[0])
    for n, i in enumerate(indices):
        ax.plot(steps, record.params_dp[:, 0, i], color=REPLICA, linewidth=2.2,
                label="plain data parallelism" if n == 0 else None)
        ax.plot(steps, record.params_zero[:, 0, i], "o", color=RED, ms=6, label="ZeRO-1" if n == 0 else None)
        ax.text(steps[-1] + 0.15, record.params_dp[-1, 0, i], f"θ[{i}]", va="center", fontsize=fontsize - 2, color=INK)
    diff = float(record.max_param_diff().max())
    same = int((record.params_zero == record.params_dp).all(axis=(1, 2)).sum())
    ax.set_xlabel("step", fontsize=fontsize)
    ax.set_ylabel("parameter value (rank 0)", fontsize=fontsize)
    ax.set_xlim(-0.3, steps[-1] + 0.9)
    ax.tick_params(labelsize=fontsize - 1)
    open_frame(ax)
    ax.legend(fontsize=fontsize - 2, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    ax.set_title(f"Same parameters: largest difference {diff:.1e} over all ranks and steps\n"
                 f"({same} of {len(steps)} recorded states equal bit for bit)", fontsize=fontsize + 1, loc="left")
    return ax
