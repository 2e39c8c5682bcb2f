"""Shard everything: what one rank holds at each ZeRO stage, and what it sends per step, measured beside the model.

    plot_stage_memory({0: (measured, modeled), ...}, k=4)    # stacked bars per stage: measured, then modeled (///)
    plot_stage_bytes({0: (rs, ag), ...}, modeled={0: total}, plain=plain_total, k=4)
    plot_stage3_timeline(seconds, held, uses=uses, rings=rings, rest=rest, plain=plain, peak=peak, k=4)

Memory bars stack, bottom to top, parameters (blue, solid), gradients (grey, ``||``), Adam's state (butter,
``..``) and the one layer a rank holds whole for a moment (lavender, ``xx``: the gathered parameters of ZeRO-3,
the full gradient of ZeRO-2). Each stage has two bars, told apart by more than colour: the measured one, and the
modeled one hatched ``///``. Byte bars stack each rank's reduce-scatter (coral, solid) and all-gather (butter,
``..``); diamonds are the model's total; the dashed line is plain data parallelism's all-reduce.
The ZeRO-3 timeline is one rank's bytes held through one step, a solid step line, over shaded spans where a
layer is held whole (lavender: plain for its forward, hatched ``\\`` for its backward), each labelled with
its layer; a lane at the bottom marks each ring collective in the colours of the byte bars (all-gather ``..``,
reduce-scatter ``-``, communication's hatch, so that it parts from the solid forward spans). Its
levels are told apart by line style: at rest dotted, plain data parallelism dashed, the model's peak dash-dotted.
Drawing only: the caller passes the numbers.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from dpviz.engine.style import (
    BACKWARD_HATCH,
    BUTTER,
    COMM_HATCH,
    CORAL,
    GREY,
    IDEAL_STYLE,
    INK,
    LAVENDER,
    MEASURED_NOTE,
    MODELED_NOTE,
    REPLICA,
    get_ax,
    open_frame,
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
    open_frame(ax)


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


PASS_HATCHES = {"fwd": None, "bwd": BACKWARD_HATCH * 2}
PASS_WORDS = {"fwd": "forward", "bwd": "backward"}
REST_STYLE = dict(color=INK, linestyle=":", linewidth=1.8)
PEAK_STYLE = dict(color=INK, linestyle="-.", linewidth=1.3)
RING_LANE = 0.085  # the height of the collectives' lane, a fraction of the Axes
LANE_HATCHES = {"all-gather": RING_HATCHES["all-gather"], "reduce-scatter": COMM_HATCH * 3}  # apart from the solid spans
PEAK_MARK = dict(marker="o", ms=10, markerfacecolor="white", markeredgecolor=REPLICA, markeredgewidth=2.2,
                 linestyle="none")


def plot_stage3_timeline(seconds, held, *, uses, rings, rest: float, plain: float, peak: float, k: int, rank: int = 0,
                         ax=None, fontsize: float = 11, legend: bool = True,
                         xlabel: str = f"time since the step began, ms ({MEASURED_NOTE})"):
    """One rank's bytes held through one ZeRO-3 step, as a step line: ``seconds`` (each event's time) and ``held``
    (bytes right after it); ``uses`` ``[(layer, "fwd" or "bwd", start, end)]`` the spans a layer is held whole,
    shaded and labelled ``L1 fwd`` (layers counted from 1); ``rings`` ``[(kind, layer, start, end)]`` each ring
    collective, in the lane at the bottom; ``rest``, ``plain`` and ``peak`` the levels drawn across: what the rank
    keeps at rest, what plain data parallelism held (both measured) and the model's peak. Seconds and bytes in,
    drawn in ms and KiB. Returns the Axes."""
    ax = get_ax(ax)
    t = np.asarray(seconds, float) * 1e3
    kib = np.asarray(held, float) / 1024
    top = max(float(kib.max()), plain / 1024, peak / 1024)
    for layer, which, start, end in uses:
        ax.axvspan(start * 1e3, end * 1e3, color=LAVENDER, alpha=0.45 if which == "fwd" else 0.3, lw=0,
                   hatch=PASS_HATCHES[which], zorder=1)
        level = float(kib[(t >= start * 1e3) & (t < end * 1e3)].max())
        ax.annotate(f"L{layer + 1}\n{which}", ((start + end) / 2 * 1e3, level), xytext=(0, 4), textcoords="offset points",
                    ha="center", va="bottom", fontsize=fontsize - 1.5, color=INK, linespacing=0.95, zorder=6)
    for kind, layer, start, end in rings:
        ax.axvspan(start * 1e3, end * 1e3, ymin=0, ymax=RING_LANE, facecolor=RING_COLOURS[kind], edgecolor=INK,
                   lw=0.6, hatch=LANE_HATCHES[kind], zorder=2)
    ax.step(t, kib, where="post", color=REPLICA, linewidth=2.4, zorder=5, label="_held")
    at = int(np.argmax(kib))                              # the peak lasts microseconds: a ring shows where it is
    ax.plot([(t[at] + t[at + 1]) / 2 if at + 1 < len(t) else t[at]], [kib[at]], **PEAK_MARK, zorder=7)
    for level, style in ((rest, REST_STYLE), (plain, IDEAL_STYLE), (peak, PEAK_STYLE)):
        ax.axhline(level / 1024, **style, zorder=4)
    ax.set_xlim(0, t[-1] * 1.005)
    ax.set_ylim(0, top * 1.2)
    ax.set_xlabel(xlabel, fontsize=fontsize)
    ax.set_ylabel("KiB held by the rank", fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    _tidy(ax, fontsize)
    ax.set_title(f"k = {k} ranks, rank {rank}", fontsize=fontsize + 1, loc="left")
    if legend:
        handles = [
            Line2D([], [], color=REPLICA, linewidth=2.4, label=f"bytes the rank held, {MEASURED_NOTE}"),
            Line2D([], [], **PEAK_MARK, label="its peak: the largest layer gathered, with its full gradient"),
            Patch(facecolor=LAVENDER, alpha=0.45, label="a layer gathered for its forward (L1, the first layer)"),
            Patch(facecolor=LAVENDER, alpha=0.3, hatch=PASS_HATCHES["bwd"],
                  label="gathered again for its backward, then its full gradient until reduce-scattered"),
            *[Patch(facecolor=RING_COLOURS[kind], edgecolor=INK, hatch=LANE_HATCHES[kind],
                    label=f"the ring's {kind} of one layer (bottom lane)") for kind in ("all-gather", "reduce-scatter")],
            Line2D([], [], **REST_STYLE, label=f"ZeRO-3 at rest: the shards, 16P/k, {MEASURED_NOTE}"),
            Line2D([], [], **IDEAL_STYLE, label=f"plain data parallelism, 16P, {MEASURED_NOTE}"),
            Line2D([], [], **PEAK_STYLE, label=f"{MODELED_NOTE} peak: 16P/k + the largest layer and its gradient"),
        ]
        ax.legend(handles=handles, fontsize=fontsize - 2, frameon=False, loc="upper left", handlelength=2.6)
    return ax
