"""The chapter's pictures: time bars of one update, all-reduce time against m, memory against micro-batch size.

Each function draws rows or points that :mod:`dpviz.topics.accumulation.theory` computed from records;
nothing here measures or models anything::

    plot_update_rows(acc.three_ways(one_process, ranks, big_batch))
    plot_comm_per_update(acc.comm_curves(k2_runs))
    plot_activation_memory(acc.memory_points(one_process_runs))
    plot_update_error(acc.memory_points(one_process_runs))

Lavender is compute (one block per micro-batch, solid), coral the all-reduce (horizontal lines),
light grey the rest of the update (the optimizer step, vertical lines). Modeled bars add diagonal
hatching and say so.
"""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from dpviz.engine.style import (
    COMM_HATCH,
    CORAL,
    ERROR_BARS,
    GREY,
    IDEAL_STYLE,
    INK,
    LAVENDER,
    MEASURED_NOTE,
    MODELED_NOTE,
    REST,
    SLATE,
    get_ax,
    source_note,
    open_frame,
)
from dpviz.topics.speedup_model.plots_timeline import time_unit
from dpviz.engine.tolerance import GRAD_TOLERANCE

COLOURS = {"compute": LAVENDER, "comm": CORAL, "rest": REST}
HATCHES = {"compute": "", "comm": COMM_HATCH, "rest": "||"}  # told apart without their colours
MODELED_HATCH = "///"
BAR = 0.5  # bar height; rows are 1.0 apart, the label sits above its bar


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


class UpdateBars:
    """The artists of a column of update bars, built once; :meth:`show` fills them without making new ones.

    Row i (counting from the top) has one PolyCollection per segment kind, a label above the bar
    and the total after it. The chapter's widget calls :meth:`show` on every slider move.
    """

    def __init__(self, ax, rows: int, *, fontsize: float = 12):
        self.ax = ax
        self.n = rows
        self.fontsize = fontsize
        self.bars, self.labels, self.totals = [], [], []
        for i in range(rows):
            y = self._y(i)
            kinds = {}
            for kind, colour in COLOURS.items():
                kinds[kind] = ax.broken_barh([], (y - BAR / 2, BAR), facecolors=colour, edgecolors=INK, linewidths=0.8,
                                             hatch=HATCHES[kind] or None)
            self.bars.append(kinds)
            self.labels.append(ax.text(0, y + BAR / 2 + 0.06, "", ha="left", va="bottom", fontsize=fontsize, color=INK))
            self.totals.append(ax.text(0, y, "", ha="left", va="center", fontsize=fontsize - 1, color=INK))
        ax.set_ylim(-0.6, rows - 0.15)
        ax.set_yticks([])
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="x", labelsize=fontsize - 1)

    def _y(self, i: int) -> float:
        return self.n - 1 - i

    def changing_artists(self) -> list:
        return [c for kinds in self.bars for c in kinds.values()] + self.labels + self.totals

    def show(self, rows, *, unit: tuple[str, float] | None = None, xmax: float | None = None) -> tuple[str, float]:
        """Fill the bars from ``rows`` (UpdateRows, top first); hide the bars beyond them. Returns the unit used."""
        rows = list(rows)
        if len(rows) > self.n:
            raise ValueError(f"rows must hold at most {self.n} UpdateRows for these bars; got {len(rows)}.")
        longest = max((row.t_update for row in rows), default=1.0)
        name, scale = unit or time_unit(longest)
        for i in range(self.n):
            row = rows[i] if i < len(rows) else None
            y = self._y(i)
            for kind, coll in self.bars[i].items():
                segs = [] if row is None else [s for s in row.segments if s.kind == kind]
                coll.set_verts([_rect(s.start / scale, s.width / scale, y) for s in segs])
                modeled = row is not None and row.source != MEASURED_NOTE
                coll.set_hatch((MODELED_HATCH if modeled else "") + HATCHES[kind] or None)
            self.labels[i].set_text("" if row is None else row.label + (f"  ({row.note})" if row.note else ""))
            self.totals[i].set_position(((row.t_update / scale) if row else 0, y))
            self.totals[i].set_text("" if row is None else "  " + _total_words(row, name, scale))
        self.ax.set_xlim(0, xmax / scale if xmax else longest / scale * 1.45)
        self.ax.set_xlabel(f"time in one update ({name})", fontsize=self.fontsize, loc="right")
        return name, scale


def _rect(x: float, w: float, y: float):
    y0, y1 = y - BAR / 2, y + BAR / 2
    return [(x, y0), (x, y1), (x + w, y1), (x + w, y0)]


def _total_words(row, unit: str, scale: float) -> str:
    words = f"{row.t_update / scale:.3g} {unit}"
    tags = [MODELED_NOTE] if row.source != MEASURED_NOTE else []  # the row's note is in its label, above the bar
    return words + (f"  ({'; '.join(tags)})" if tags else "")


def legend_handles(rows) -> list:
    handles = [
        Patch(facecolor=LAVENDER, edgecolor=INK, label="compute: one block per micro-batch"),
        Patch(facecolor=CORAL, edgecolor=INK, hatch=HATCHES["comm"], label="all-reduce"),
        Patch(facecolor=REST, edgecolor=INK, hatch=HATCHES["rest"], label="optimizer step, copies"),
    ]
    if any(row.source != MEASURED_NOTE for row in rows):  # an outline: it says how a bar was made, not what it is
        handles.append(Patch(fill=False, edgecolor=INK, hatch=MODELED_HATCH, label=f"hatched ///: {MODELED_NOTE}"))
    return handles


def plot_update_rows(rows, *, ax=None, fontsize: float = 12, title: str = "", note: str | None = None, xmax=None,
                     legend: bool = True):
    """Draw one bar per UpdateRow (first on top): compute, all-reduce and rest, each total written after its bar."""
    ax = get_ax(ax)
    rows = list(rows)
    if not rows:
        raise ValueError("rows must hold at least one UpdateRow.")
    UpdateBars(ax, len(rows), fontsize=fontsize).show(rows, xmax=xmax)
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left")
    if legend:
        ax.legend(handles=legend_handles(rows), loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
                  fontsize=fontsize - 2, frameon=False, handlelength=2.4, handleheight=1.2)  # room for the hatches
    if note:
        source_note(ax, note)
        if legend:  # below the legend's two rows, not across them
            ax.texts[-1].xy = (0, -0.16)
            ax.texts[-1].set_position((0, -3.0 * fontsize))
    return ax


def plot_comm_per_update(curves, *, ax=None, fontsize: float = 12, note: str | None = None):
    """Seconds inside all_reduce per update against m, one line per pattern, calls per update written at each point."""
    ax = get_ax(ax)
    styles = {"every": dict(color=CORAL, marker="o", linestyle="-", label="all-reduce after every micro-batch: m calls"),
              "accumulate": dict(color=INK, marker="s", linestyle="-", label="accumulate, then all-reduce once: 1 call")}
    top = max(float(np.max(c.seconds)) for c in curves.values())
    name, scale = time_unit(top)
    for sync, curve in curves.items():
        ax.plot(curve.m, curve.seconds / scale, lw=2.2, ms=8, **styles[sync])
    ms = sorted({int(m) for c in curves.values() for m in c.m})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ms, [str(m) for m in ms], fontsize=fontsize - 1)
    ax.minorticks_off()
    ax.set_xlim(ms[0] / 1.4, ms[-1] * 1.6)
    ax.set_ylim(0, top / scale * 1.25)
    ax.tick_params(axis="y", labelsize=fontsize - 1)
    ax.set_xlabel("m, micro-batches per rank per update", fontsize=fontsize)
    ax.set_ylabel(f"time in all-reduce per update ({name})", fontsize=fontsize)
    ax.legend(fontsize=fontsize - 2, frameon=False, loc="upper left")
    open_frame(ax)
    if note:
        source_note(ax, note)
    return ax


def plot_activation_memory(points, *, ax=None, fontsize: float = 12, note: str | None = None):
    """Bytes one micro-batch keeps for backward, one bar per micro-batch size, beside the parameters' size."""
    ax = get_ax(ax)
    x = np.arange(len(points.micro_batch))
    kib = points.activation_bytes / 1024
    ax.bar(x, kib, width=0.62, color=GREY, edgecolor=INK, linewidth=0.8, label=f"{MEASURED_NOTE}: saved for backward")
    for xi, v in zip(x, points.activation_bytes):
        ax.text(xi, v / 1024, _kib(v), ha="center", va="bottom", fontsize=fontsize - 2, color=INK)
    ax.axhline(points.param_bytes / 1024, **IDEAL_STYLE,
               label=f"parameters, {_kib(points.param_bytes)} (the summed gradient: as much again)")
    ax.legend(fontsize=fontsize - 2, frameon=False, loc="upper right")
    ax.set_xticks(x, [f"{b}\n(m={m})" for b, m in zip(points.micro_batch, points.m)], fontsize=fontsize - 1)
    ax.set_xlabel(f"examples per micro-batch ({points.global_batch} per update)", fontsize=fontsize)
    ax.set_ylabel("bytes held for backward (KiB)", fontsize=fontsize)
    ax.set_ylim(0, max(kib.max(), points.param_bytes / 1024) * 1.18)
    ax.tick_params(axis="y", labelsize=fontsize - 1)
    open_frame(ax)
    if note:
        source_note(ax, note)
    return ax


def plot_update_error(points, *, ax=None, fontsize: float = 12, tol: float = GRAD_TOLERANCE, note: str | None = None):
    """The update's largest relative error to the big-batch gradient for each m, on a log scale, with the tolerance."""
    ax = get_ax(ax)
    x = np.arange(len(points.m))
    base = tol * 1e-5  # the bottom of the log axis, where the bars start; an error of exactly 0 gets no bar
    nonzero = points.rel_err > 0
    ax.bar(x[nonzero], points.rel_err[nonzero] - base, width=0.62, bottom=base, color=ERROR_BARS, edgecolor=INK, linewidth=0.8,
           label=f"{MEASURED_NOTE}, worst step")
    for xi, err in zip(x, points.rel_err):
        words = "0: the same\nbits" if err == 0 else f"{err:.1e}"
        ax.text(xi, err if err > 0 else base * 10, words, ha="center", va="bottom", fontsize=fontsize - 2, color=INK)
    ax.set_xlim(-0.6, len(x) - 0.4)
    ax.axhline(tol, **IDEAL_STYLE)
    ax.text(x[-1] + 0.4, tol, f"float32 tolerance {tol:g}", ha="right", va="bottom", fontsize=fontsize - 2, color=SLATE)
    ax.set_yscale("log")
    ax.set_ylim(base, tol * 30)
    ax.set_xticks(x, [f"m={m}" for m in points.m], fontsize=fontsize - 1)
    ax.set_xlabel("micro-batches per update", fontsize=fontsize)
    ax.set_ylabel("max |g − g_big| / max |g_big|", fontsize=fontsize)
    ax.tick_params(axis="y", labelsize=fontsize - 1)
    open_frame(ax)
    if note:
        source_note(ax, note)
    return ax
