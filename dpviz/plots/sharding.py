"""Shard everything: what one rank holds at each ZeRO stage, and what it sends per step, measured beside the model.

    plot_stage_memory({0: (measured, modeled), ...}, k=4)    # stacked bars per stage: measured, then modeled (///)
    plot_stage_bytes({0: (rs, ag), ...}, modeled={0: total}, plain=plain_total, k=4)

Memory bars stack, bottom to top, parameters (blue, solid), gradients (grey, ``||``), Adam's state (butter,
``..``) and the one layer a rank holds whole for a moment (lavender, ``xx``: the gathered parameters of ZeRO-3,
the full gradient of ZeRO-2). Each stage has two bars, told apart by more than colour: the measured one, and the
modeled one hatched ``///``. Byte bars stack each rank's reduce-scatter (coral, solid) and all-gather (butter,
``..``); diamonds are the model's total; the dashed line is plain data parallelism's all-reduce.
Drawing only: the caller passes the numbers.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from dpviz.plots.style import (
    BUTTER, CORAL, GREY, IDEAL_STYLE, INK, LAVENDER, MEASURED_NOTE, MODELED_NOTE, REPLICA, get_ax,
)

CATEGORY_COLOURS = {"params": REPLICA, "grads": GREY, "optimizer": BUTTER, "layer": LAVENDER}
CATEGORY_HATCHES = {"params": "", "grads": "||", "optimizer": "..", "layer": "xx"}
CATEGORY_WORDS = {"params": "parameters", "grads": "gradients", "optimizer": "Adam state (m and v)",
                  "layer": "one layer held whole (gathered θ, full g)"}
MODELED_HATCH = "///"
STAGE_LABELS = {0: "plain DP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}
RING_COLOURS = {"reduce-scatter": CORAL, "all-gather": BUTTER}
RING_HATCHES = {"reduce-scatter": "", "all-gather": ".."}


def _tidy(ax, fontsize):
    ax.tick_params(axis="y", labelsize=fontsize - 1)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def plot_stage_memory(bars: dict, *, k: int, ax=None, fontsize: float = 11, legend: bool = True):
    """Bytes one rank held at its peak, by category, for each stage: ``bars[stage] = (measured, modeled)``, each four
    numbers (parameters, gradients, Adam state, the layer held whole) in bytes. Drawn in KiB. Returns the Axes."""
    ax = get_ax(ax)
    top = max(float(np.sum(v)) for pair in bars.values() for v in pair) / 1024
    ticks, labels = [], []
    for i, (stage, (measured, modeled)) in enumerate(sorted(bars.items())):
        for j, (values, is_model) in enumerate(((measured, False), (modeled, True))):
            x, bottom = 3 * i + j, 0.0
            for category, value in zip(CATEGORY_COLOURS, np.asarray(values, float) / 1024):
                if value > 0:
                    ax.bar(x, value, bottom=bottom, width=0.85, color=CATEGORY_COLOURS[category], edgecolor=INK,
                           linewidth=0.8, hatch=((MODELED_HATCH if is_model else "") + CATEGORY_HATCHES[category]) or None)
                bottom += value
            ax.text(x, bottom + 0.015 * top, f"{bottom:.1f}", ha="center", va="bottom", fontsize=fontsize - 2)
        ticks.append(3 * i + 0.5)
        labels.append(STAGE_LABELS.get(stage, f"stage {stage}"))
    ax.set_xticks(ticks, labels, fontsize=fontsize)
    ax.set_ylabel("KiB held per rank", fontsize=fontsize)
    ax.set_ylim(0, top * 1.14)
    _tidy(ax, fontsize)
    ax.set_title(f"k = {k} ranks", fontsize=fontsize + 1, loc="left")
    if legend:
        handles = [Patch(facecolor=CATEGORY_COLOURS[c], edgecolor=INK, hatch=CATEGORY_HATCHES[c] or None,
                         label=CATEGORY_WORDS[c]) for c in CATEGORY_COLOURS]
        handles.append(Patch(fill=False, edgecolor=INK, label=f"left bar of a pair: {MEASURED_NOTE} (every rank the same)"))
        handles.append(Patch(fill=False, edgecolor=INK, hatch=MODELED_HATCH, label=f"right bar, hatched ///: {MODELED_NOTE}"))
        ax.legend(handles=handles, fontsize=fontsize - 2, frameon=False, ncol=2, handlelength=2.4, handleheight=1.2)
    return ax


def plot_stage_bytes(sent: dict, *, modeled: dict, plain: float, k: int, ax=None, fontsize: float = 11,
                     legend: bool = True):
    """Bytes one rank sent per step at each stage: ``sent[stage] = (reduce-scatter, all-gather)`` measured,
    ``modeled[stage]`` the model's total, ``plain`` plain data parallelism's all-reduce. Drawn in KiB. Returns the Axes."""
    ax = get_ax(ax)
    stages = sorted(sent)
    top = max(max(float(sum(v)) for v in sent.values()), max(modeled.values()), plain) / 1024
    for x, stage in enumerate(stages):
        bottom = 0.0
        for phase, value in zip(RING_COLOURS, np.asarray(sent[stage], float) / 1024):
            ax.bar(x, value, bottom=bottom, width=0.6, color=RING_COLOURS[phase], edgecolor=INK, linewidth=0.8,
                   hatch=RING_HATCHES[phase] or None)
            bottom += value
        ax.annotate(f"{bottom:.1f}", (x, bottom), xytext=(0, 8), textcoords="offset points", ha="center", va="bottom",
                    fontsize=fontsize - 2)
    ax.plot(range(len(stages)), [modeled[s] / 1024 for s in stages], "D", color=INK, ms=8,
            markerfacecolor="white", markeredgewidth=1.6, linestyle="none", zorder=5)
    ax.axhline(plain / 1024, **IDEAL_STYLE, zorder=4)
    ax.set_xticks(range(len(stages)), [STAGE_LABELS.get(s, f"stage {s}") for s in stages], fontsize=fontsize)
    ax.set_xlim(-0.6, len(stages) - 0.2)
    ax.set_ylabel("KiB sent per rank per step", fontsize=fontsize)
    ax.set_ylim(0, top * 1.22)
    _tidy(ax, fontsize)
    ax.set_title(f"k = {k} ranks", fontsize=fontsize + 1, loc="left")
    if legend:
        handles = [Patch(facecolor=RING_COLOURS[p], edgecolor=INK, hatch=RING_HATCHES[p] or None,
                         label=f"{p}, {MEASURED_NOTE} (counted by the ring)") for p in RING_COLOURS]
        handles.append(Line2D([], [], marker="D", color=INK, markerfacecolor="white", markeredgewidth=1.6,
                              linestyle="none", ms=8, label=f"{MODELED_NOTE}: (k−1)/k · M per ring pass"))
        handles.append(Line2D([], [], **IDEAL_STYLE, label="plain data parallelism's all-reduce, 2(k−1)/k · M"))
        ax.legend(handles=handles, fontsize=fontsize - 2, frameon=False, loc="upper left")
    return ax
