"""A cheaper sync, drawn: bytes and gradient error per comm hook, loss per hook and per H, drift between averages,
bytes per link in two levels, and the modeled speedup of each method beside the ring's.

    plot_hook_bytes(rec)                  # a CompressionRecord: bytes per step each hook handed to dist.all_reduce
    plot_hook_error(rec)                  # ... ‖g − ḡ‖/‖ḡ‖ per compressed step
    plot_hook_loss(rec, gap=False)        # ... loss per step, or its gap to the plain all-reduce's
    plot_local_loss(rec, x="examples")    # a LocalSgdRecord: loss against examples or against all-reduces
    plot_drift(rec)                       # ... the replicas' drift, step by step, zero at every average
    plot_link_bytes(rec)                  # a HierarchicalRecord: bytes inside and between groups, two ways
    plot_speedups(rows, k=k)              # rows of dpviz.topics.cheaper_sync.theory.priced per link: modeled S per method
    plot_measured_speedups(rows, k=k)     # rows of dpviz.topics.cheaper_sync.claims.measured_rows: S measured here
    plot_times(labels, seconds)           # measured medians, as bars

Series are told apart by line style and marker as well as colour. Drawing only: every number comes from a record
or from the theory rows handed in.
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import MaxNLocator, StrMethodFormatter

from dpviz import course
from dpviz.engine.style import (
    CORAL,
    GRID_LINE,
    IDEAL_STYLE,
    INK,
    LAVENDER,
    MEASURED_NOTE,
    MINT,
    MODELED_NOTE,
    PALE_REPLICA,
    PURPLE,
    RED,
    REPLICA,
    SLATE,
    TEAL,
    AMBER,
    BUTTER,
    get_ax,
)

HOOK_STYLE = {  # mode -> (colour, line style, marker)
    "allreduce": (INK, "-", "o"),
    "fp16": (REPLICA, "--", "s"),
    "powersgd_r1": (RED, ":", "v"),
    "powersgd_r2": (AMBER, "-.", "^"),
    "powersgd_r4": (TEAL, (0, (5, 1, 1, 1)), "D"),
}
EXTRA_STYLE = [(PURPLE, (0, (3, 1, 1, 1, 1, 1)), "P"), (SLATE, (0, (1, 2)), "X")]
PERIOD_STYLE = [(INK, "-", "o"), (REPLICA, "--", "s"), (TEAL, "-.", "^"), (RED, ":", "D"), (AMBER, (0, (5, 1)), "v"),
                (PURPLE, (0, (3, 1, 1, 1)), "P")]
LINK_COLOURS = (MINT, BUTTER, CORAL)   # fast to slow
LINK_HATCHES = ("", "..", "//")


def hook_label(mode: str) -> str:
    """``powersgd_r2`` as a reader says it: ``PowerSGD r = 2``."""
    if mode.startswith("powersgd_r"):
        return f"PowerSGD r = {mode[len('powersgd_r'):]}"
    return {"allreduce": "plain all-reduce", "fp16": "fp16"}.get(mode, mode)


def hook_style(mode: str, i: int = 0):
    return HOOK_STYLE.get(mode, EXTRA_STYLE[i % len(EXTRA_STYLE)])


def _finish(ax, *, fontsize: float, title: str | None):
    """What every line panel here ends with: tick labels, the grid, the legend, the title."""
    ax.tick_params(labelsize=fontsize - 1)
    _grid(ax)
    ax.legend(fontsize=fontsize - 1, frameon=False)
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax


def _grid(ax, axis: str = "y") -> None:
    ax.grid(True, axis=axis, color=GRID_LINE, linewidth=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)


def plot_hook_bytes(rec, *, ax=None, fontsize: float = 10, title: str | None = None):
    """Bytes per step each hook handed to ``dist.all_reduce`` on a compressed step, counted; one bar per hook."""
    ax = get_ax(ax)
    modes = list(rec.mode)
    sent = []
    for mode in modes:
        on = rec.compressed_steps(mode)
        column = rec.sent_bytes[rec.index(mode), :, 0]
        sent.append(int(column[on][0]) if on.any() else int(column[0]))
    y = np.arange(len(modes))
    ax.barh(y, sent, height=0.6, color=[CORAL if m != "allreduce" else LAVENDER for m in modes], edgecolor=INK,
            linewidth=0.6)
    M = int(rec.meta["message_bytes"])
    for yi, n in zip(y, sent):
        ax.text(n, yi, f"  {n:,} B" + (f" ({M / n:.1f}× fewer)" if n != M else ""), va="center", ha="left",
                fontsize=fontsize - 1, color=INK)
    ax.set_yticks(y, [hook_label(m) for m in modes], fontsize=fontsize)
    ax.invert_yaxis()
    ax.set_xlim(0, M * 1.6)
    ax.set_xlabel("bytes per rank per step, counted as each hook sent them", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    _grid(ax, "x")
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax


def plot_hook_error(rec, *, ax=None, fontsize: float = 10, title: str | None = None):
    """Relative error of each hook's averaged gradient against the exact average, on the steps it compressed."""
    ax = get_ax(ax)
    steps = np.arange(rec.steps)
    for i, mode in enumerate(rec.mode):
        if mode == "allreduce":
            continue
        on = rec.compressed_steps(mode)
        colour, style, marker = hook_style(mode, i)
        ax.plot(steps[on], rec.grad_rel_err[i][on, 0], color=colour, linestyle=style, marker=marker, markersize=5,
                linewidth=1.6, label=hook_label(mode))
    ax.set_yscale("log")
    ax.set_xlabel("step", fontsize=fontsize)
    ax.set_ylabel("‖g − ḡ‖ / ‖ḡ‖", fontsize=fontsize)
    ax.set_xlim(-0.5, rec.steps - 0.5)
    return _finish(ax, fontsize=fontsize, title=title)


def plot_hook_loss(rec, *, gap: bool = False, ax=None, fontsize: float = 10, title: str | None = None):
    """Loss on the global batch per step under each hook; with ``gap``, minus the plain all-reduce's loss."""
    ax = get_ax(ax)
    steps = np.arange(rec.steps)
    ref = rec.mean_loss("allreduce")
    for i, mode in enumerate(rec.mode):
        if gap and mode == "allreduce":
            continue
        colour, style, marker = hook_style(mode, i)
        y = rec.mean_loss(mode) - (ref if gap else 0)
        ax.plot(steps, y, color=colour, linestyle=style, marker=marker, markersize=4.5, linewidth=1.6,
                label=hook_label(mode), markevery=max(1, rec.steps // 8))
    if gap:
        ax.axhline(0, color=INK, linewidth=0.8)
        ax.set_ylabel("loss − plain all-reduce's", fontsize=fontsize)
    else:
        ax.set_ylabel("loss on the global batch", fontsize=fontsize)
    ax.set_xlabel("step", fontsize=fontsize)
    return _finish(ax, fontsize=fontsize, title=title)


def plot_local_loss(rec, *, x: str = "examples", ax=None, fontsize: float = 10, title: str | None = None):
    """Mean loss of plain data parallelism and of local SGD at each H, against examples seen or all-reduces made."""
    ax = get_ax(ax)
    if x not in ("examples", "all_reduces"):
        raise ValueError(f"x must be 'examples' or 'all_reduces'; got {x!r}.")
    series = [("plain data parallelism", None)] + [(f"local SGD, H = {H}", int(H)) for H in rec.period if H != 1]
    for (label, H), (colour, style, marker) in zip(series, PERIOD_STYLE):
        loss = rec.mean_loss(H)
        if x == "examples":
            xs, ys = rec.examples(), loss
        else:  # the loss right after each all-reduce
            n = rec.all_reduces(H)
            at = np.flatnonzero(np.diff(np.concatenate([[0], n])) > 0)
            xs, ys = n[at], loss[at]
        ax.plot(xs, ys, color=colour, linestyle=style, marker=marker, markersize=4.5, linewidth=1.6, label=label,
                markevery=1 if x == "all_reduces" else max(1, rec.steps // 8))
    ax.set_xlabel("examples seen, all ranks together" if x == "examples" else
                  "all-reduces made by the end of the step (loss: that step's)", fontsize=fontsize)
    ax.set_ylabel("mean loss", fontsize=fontsize)
    if x == "all_reduces":
        ax.set_xscale("log", base=2)
    return _finish(ax, fontsize=fontsize, title=title)


def drift_path(rec, H: int) -> tuple[np.ndarray, np.ndarray]:
    """The drift as a sawtooth: up along each local step, straight down to 0 at each average (x: steps done)."""
    after, before, synced = rec.drift(H), rec.drift_before_average(H), rec.synced(H)
    xs, ys = [0.0], [float(after[0])]
    for s in range(rec.steps):
        xs.append(s + 1.0)
        ys.append(float(before[s]))
        if synced[s]:
            xs.append(s + 1.0)
            ys.append(float(after[s + 1]))
    return np.array(xs), np.array(ys)


def plot_drift(rec, *, periods=None, ax=None, fontsize: float = 10, title: str | None = None):
    """The replicas' drift max_r ‖θ_r − mean θ‖ after every step, for each H; a marker where each average falls."""
    ax = get_ax(ax)
    periods = [int(H) for H in rec.period if H != 1] if periods is None else list(periods)
    for H, (colour, style, marker) in zip(periods, PERIOD_STYLE[1:]):
        xs, ys = drift_path(rec, H)
        ax.plot(xs, ys, color=colour, linestyle=style, linewidth=1.5, label=f"local SGD, H = {H}")
        at = np.flatnonzero(rec.synced(H)) + 1.0
        ax.plot(at, np.zeros_like(at), linestyle="none", marker=marker, markersize=6, color=colour,
                markeredgecolor=INK, markeredgewidth=0.6, clip_on=False)
    ax.plot([], [], linestyle="none", marker="o", color="white", markeredgecolor=INK, label="marker: an average (drift 0)")
    ax.set_xlabel("steps done", fontsize=fontsize)
    ax.set_ylabel("drift  max_r ‖θ_r − mean θ‖", fontsize=fontsize)
    ax.set_xlim(0, rec.steps + 0.5)
    ax.set_ylim(bottom=0)
    return _finish(ax, fontsize=fontsize, title=title)


def plot_link_bytes(rec, *, ax=None, fontsize: float = 10, title: str | None = None):
    """Bytes sent inside groups and between groups, all ranks together, by the two-level all-reduce and the flat
    ring, for the record's largest input."""
    ax = get_ax(ax)
    s = int(np.argmax(rec.size))
    inside = rec.same_group()
    two = rec.link_bytes_inner[s] + rec.link_bytes_outer[s]
    rows = {"two levels": two, "flat ring": rec.link_bytes_flat[s]}
    y = np.arange(len(rows))
    h = 0.36
    for j, (where, mask, colour, hatch) in enumerate((("inside a group (fast link)", inside, MINT, ""),
                                                      ("between groups (slow link)", ~inside, CORAL, "//"))):
        values = [int((m * mask).sum()) for m in rows.values()]
        ax.barh(y + (j - 0.5) * h, values, height=h, color=colour, hatch=hatch, edgecolor=INK, linewidth=0.6,
                label=where)
        for yi, v in zip(y, values):
            ax.text(v, yi + (j - 0.5) * h, f"  {v:,} B", va="center", ha="left", fontsize=fontsize - 1, color=INK)
    ax.set_yticks(y, list(rows), fontsize=fontsize)
    ax.invert_yaxis()
    most = max(int(m.sum()) for m in rows.values())
    ax.set_xlim(0, most * 1.1)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel(f"bytes sent, all {rec.k} ranks together, for {int(rec.size[s]):,} float32 values",
                  fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    _grid(ax, "x")
    ax.legend(fontsize=fontsize - 1, frameon=False)
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax


def method_label(row: dict, *, inner: str = "NVLink") -> str:
    """One row of :func:`dpviz.topics.cheaper_sync.theory.priced` as a bar's label."""
    return {"ring": "plain ring", "fp16": "fp16", "powersgd": f"PowerSGD r = {row['knob']}",
            "local_sgd": f"local SGD H = {row['knob']}", "two_level": f"two levels of {row['knob']}"}[row["method"]]


def plot_speedups(rows_by_link: dict, *, k: int, ax=None, fontsize: float = 10, title: str | None = None):
    """Modeled S of each method beside the ring's, one group of bars per link (fast to slow: mint, butter, coral)."""
    ax = get_ax(ax)
    ticks, labels = [], []
    y0 = 0
    for i, (name, rows) in enumerate(rows_by_link.items()):
        y = y0 + np.arange(len(rows))
        values = [row["speedup"] for row in rows]
        ax.barh(y, values, height=0.7, color=LINK_COLOURS[i % 3], hatch=LINK_HATCHES[i % 3], edgecolor=INK,
                linewidth=0.6)
        for yi, v in zip(y, values):
            ax.text(v, yi, f" {v:.2f}", va="center", ha="left", fontsize=fontsize - 1, color=INK)
        ax.text(k * 1.02, y0 - 0.75, name, ha="right", va="bottom", fontsize=fontsize, color=INK, weight="bold")
        ticks += list(y)
        labels += [method_label(row) for row in rows]
        y0 += len(rows) + 1.2
    ax.axvline(k, **IDEAL_STYLE)
    ax.text(k, -1.6, f"S = k = {k}", ha="center", va="bottom", fontsize=fontsize - 1, color=SLATE)
    ax.set_yticks(ticks, labels, fontsize=fontsize - 1)
    ax.set_ylim(y0 - 1.0, -2.0)
    ax.set_xlim(0, k * 1.12)
    ax.set_xlabel(f"speedup S on k = {k} devices, {MODELED_NOTE}", fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    _grid(ax, "x")
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax


def plot_measured_speedups(rows, *, k: int, ax=None, fontsize: float = 10, title: str | None = None):
    """S measured here per way of syncing, one group of bars per family (the rows of
    :func:`dpviz.topics.cheaper_sync.claims.measured_rows`), the speedup model's formula on the measured parts as a
    hollow diamond where the run timed the sync alone, and the ideal S = k dashed."""
    ax = get_ax(ax)
    ticks, labels = [], []
    y0 = 0.0
    families = list(dict.fromkeys(row["family"] for row in rows))
    formula_label = f"{MODELED_NOTE}: {course.ref('speedup_model')}'s formula on the measured T_step(1), T_comm"
    for family in families:
        group = [row for row in rows if row["family"] == family]
        y = y0 + np.arange(len(group))
        values = [row["speedup"] for row in group]
        ax.barh(y, values, height=0.68, color=PALE_REPLICA, edgecolor=REPLICA, linewidth=1.0,
                label=f"{MEASURED_NOTE} S = k · T_step(1) / T_step(k)" if family == families[0] else None)
        for yi, row in zip(y, group):  # the numbers right of the bar and of its diamond, clear of both
            words = f"   {row['speedup']:.2f}" + (f"  (◇ {row['formula']:.2f})" if row["formula"] is not None else "")
            ax.text(max(row["speedup"], row["formula"] or 0), yi, words, va="center", ha="left", fontsize=fontsize - 1,
                    color=INK)
        formula = [(yi, row["formula"]) for yi, row in zip(y, group) if row["formula"] is not None]
        if formula:
            ys, xs = zip(*formula)
            ax.plot(xs, ys, linestyle="none", marker="D", markersize=7, markerfacecolor="white", markeredgecolor=INK,
                    markeredgewidth=1.3, label=formula_label)
            formula_label = None  # one legend entry for every group's diamonds
        ax.text(0, y0 - 0.62, family, ha="left", va="bottom", fontsize=fontsize, color=INK, weight="bold")
        ticks += list(y)
        labels += [row["label"] for row in group]
        y0 += len(group) + 1.3
    ax.axvline(k, label=f"ideal S = k = {k}", **IDEAL_STYLE)
    ax.set_yticks(ticks, labels, fontsize=fontsize - 1)
    ax.set_ylim(y0 - 1.1, -1.4)
    most = max([k] + [row["speedup"] for row in rows] + [row["formula"] or 0 for row in rows])
    ax.set_xlim(0, most * 1.15)
    ax.set_xlabel(f"speedup S on k = {k} ranks, {MEASURED_NOTE} here", fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    _grid(ax, "x")
    handles, names = ax.get_legend_handles_labels()
    order = sorted(range(len(names)),  # measured first, modeled last
                   key=lambda i: (not names[i].startswith(MEASURED_NOTE), names[i].startswith(MODELED_NOTE)))
    ax.legend([handles[i] for i in order], [names[i] for i in order], fontsize=fontsize - 1, frameon=False)
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax


def plot_times(labels, seconds, *, ax=None, fontsize: float = 10, title: str | None = None, xlabel: str = "",
               color: str = CORAL):
    """Measured median times as horizontal bars, labelled in ms."""
    ax = get_ax(ax)
    y = np.arange(len(labels))
    ms = np.asarray(seconds, float) * 1e3
    ax.barh(y, ms, height=0.6, color=color, edgecolor=INK, linewidth=0.6)
    for yi, v in zip(y, ms):
        ax.text(v, yi, f"  {v:.2f} ms", va="center", ha="left", fontsize=fontsize - 1, color=INK)
    ax.set_yticks(y, labels, fontsize=fontsize - 1)
    ax.invert_yaxis()
    ax.set_xlim(0, ms.max() * 1.35)
    ax.set_xlabel(xlabel or "median time (ms), measured", fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    _grid(ax, "x")
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax
