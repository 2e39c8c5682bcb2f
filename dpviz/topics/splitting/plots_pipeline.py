"""Pipeline parallelism: the Gantt chart of one step, and the idle share against the bubble formula.

    plot_gantt(run)                                   # a PipelineRun (measured) or a theory.pipeline.Timeline (modeled)
    plot_bubble(curves, points)                       # (p-1)/(m+p-1) against m, with measured idle shares

One row per stage (stage 0 on top). Lavender bars are forward passes, darker lavender backward
passes, each numbered by its micro-batch; coral ticks are the hand-offs to the next or previous
stage; the light grey band behind a row is the stage's time, so whatever shows of it is idle.
:class:`GanttBars` builds the artists once and :meth:`GanttBars.show` refills them, so a slider
can move through records without making new artists.
"""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter

from dpviz.engine.style import (
    BACKWARD_HATCH,
    COMM_HATCH,
    CORAL,
    DARK_LAVENDER,
    GREY,
    IDLE,
    INK,
    LAVENDER,
    MEASURED_NOTE,
    MINT,
    MODELED_NOTE,
    REPLICA,
    SLATE,
    WAIT_HATCH,
    get_ax,
    source_note,
    open_frame,
)

BACKWARD = DARK_LAVENDER  # compute too, the backward pass
ROW = 0.62             # bar height, in rows
SEND_MIN = 0.004       # a send is drawn at least this share of the axis wide, so that it shows at all
LABEL_MIN = 0.022      # a bar narrower than this share of the axis carries no number
NOTE_WIDTH = 110       # characters per line of the note under a chart


def _rect(x0, x1, y):
    return [(x0, y - ROW / 2), (x1, y - ROW / 2), (x1, y + ROW / 2), (x0, y + ROW / 2)]


def _hatched(colour, **style) -> dict:
    """``style`` with a hatch in ``colour`` and no edge drawn. matplotlib 3.11 colours a hatch on its own
    (``hatchcolor``); before it (Colab's 3.10), a hatch takes the edge's colour: the edge gets it, at width 0."""
    if hasattr(Patch, "set_hatchcolor"):
        return dict(style, edgecolor="none", hatchcolor=colour)
    return dict(style, edgecolor=colour, linewidth=0)


class GanttBars:
    """The artists of a pipeline Gantt chart with room for ``slots_p`` stages and ``slots_m`` micro-batches.

    :meth:`show` sets vertices, text, positions and visibility only; :meth:`changing_artists` lists
    what it touches, for a widget to redraw over a cached background.
    """

    def __init__(self, ax, *, slots_p: int, slots_m: int, fontsize: float = 11, legend: bool = True):
        self.ax, self.fontsize = ax, fontsize
        self.bands = [ax.add_patch(Rectangle((0, -s - 0.42), 0, 0.84, **_hatched(GREY, facecolor=IDLE, hatch=WAIT_HATCH,
                                                                                linewidth=0, zorder=1)))
                      for s in range(slots_p)]  # dotted where no block covers it
        style = dict(edgecolor=INK, linewidths=0.6, zorder=2)
        self.fwd = ax.add_collection(PolyCollection([], facecolors=LAVENDER, **style))
        self.bwd = ax.add_collection(PolyCollection([], facecolors=BACKWARD, hatch=BACKWARD_HATCH, **style))
        self.send = ax.add_collection(PolyCollection([], facecolors=CORAL, edgecolor="none", zorder=3))  # too thin to hatch
        self.labels = [[ax.text(0, 0, "", ha="center", va="center", fontsize=fontsize - 3, color=INK, zorder=4)
                        for _ in range(2 * slots_m)] for _ in range(slots_p)]
        self.title = ax.set_title("", fontsize=fontsize + 1, loc="left")
        self.scale = 1e3  # drawn units per second of the timeline
        ax.tick_params(labelsize=fontsize - 1)
        open_frame(ax)
        if legend:
            self.legend(ax, fontsize)

    @staticmethod
    def legend(ax, fontsize: float = 11, **where):
        """The chart's key: what each colour and hatch means."""
        where = where or dict(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        return ax.legend(handles=[
            Patch(facecolor=LAVENDER, edgecolor=INK, label="forward pass of micro-batch j"),
            Patch(facecolor=BACKWARD, edgecolor=INK, hatch=BACKWARD_HATCH, label="backward pass"),
            Patch(**_hatched(INK, facecolor=CORAL, hatch=COMM_HATCH, label="hand-off to the next / previous stage (thin)")),
            Patch(**_hatched(GREY, facecolor=IDLE, hatch=WAIT_HATCH, label="idle: waiting for a neighbour")),
        ], fontsize=fontsize - 2, frameon=False, handlelength=2.4, handleheight=1.2, **where)

    def set_layout(self, p: int, xmax: float, *, measured: bool = True) -> None:
        """Rows and x range for p stages up to time ``xmax``: what a widget's background depends on.

        A measured timeline is in seconds and drawn in ms; a modeled one is in units of one
        forward pass and drawn as it is.
        """
        ax = self.ax
        self.scale = 1e3 if measured else 1.0
        ax.set_yticks(-np.arange(p), [f"stage {s}\n(rank {s})" for s in range(p)], fontsize=self.fontsize - 1)
        ax.set_ylim(-p + 0.5, 0.5)
        ax.set_xlim(0, xmax * self.scale)
        ax.set_xlabel("time since the first stage left the barrier (ms)" if measured
                      else "time, in units of one forward pass", fontsize=self.fontsize, loc="right")

    def changing_artists(self) -> list:
        return [*self.bands, self.fwd, self.bwd, self.send, *(t for row in self.labels for t in row), self.title]

    def show(self, timeline, *, title: str | None = None) -> None:
        """Fill the bars from a :class:`~dpviz.topics.splitting.records_pipeline.PipelineRun` or a modeled ``Timeline``."""
        p, m = timeline.fwd.shape[:2]
        if p > len(self.bands) or 2 * m > len(self.labels[0]):
            raise ValueError(f"this chart has room for {len(self.bands)} stages and {len(self.labels[0]) // 2} "
                             f"micro-batches, so p and m must be at most that; got p={p}, m={m}.")
        ms = self.scale
        x0, x1 = self.ax.get_xlim()
        width = x1 - x0
        start = min(np.nanmin(timeline.fwd[..., 0]), np.nanmin(timeline.bwd[..., 0])) * ms
        fwd, bwd, send = [], [], []
        for s in range(len(self.bands)):
            on = s < p
            self.bands[s].set_visible(on)
            for t in self.labels[s]:
                t.set_visible(False)
            if not on:
                continue
            end = max(np.nanmax(timeline.fwd[:, :, 1]), np.nanmax(timeline.bwd[:, :, 1])) * ms
            self.bands[s].set_x(start)
            self.bands[s].set_width(end - start)
            for kind, bars, out in (("F", timeline.fwd, fwd), ("B", timeline.bwd, bwd)):
                for j in range(m):
                    a, b = bars[s, j] * ms
                    out.append(_rect(a, b, -s))
                    label = self.labels[s][j if kind == "F" else m + j]
                    if (b - a) >= LABEL_MIN * width:
                        label.set_position(((a + b) / 2, -s))
                        label.set_text(str(j))
                        label.set_visible(True)
            for sends in (getattr(timeline, "send_fwd", None), getattr(timeline, "send_bwd", None)):
                if sends is None:
                    continue
                for a, b in sends[s] * ms:
                    if np.isfinite(a):
                        send.append(_rect(a, max(b, a + SEND_MIN * width), -s))
        self.fwd.set_verts(fwd)
        self.bwd.set_verts(bwd)
        self.send.set_verts(send)
        self.title.set_text(title if title is not None else gantt_title(timeline))


def gantt_title(timeline) -> str:
    """What the chart shows, from the timeline itself (and, for a record, its stages against the cores)."""
    p, m = timeline.fwd.shape[:2]
    source = getattr(timeline, "source", MODELED_NOTE)
    head = f"{source.capitalize()}: p={p} stages, m={m} micro-batches, {_schedule_words(timeline.schedule)}"
    if getattr(timeline, "oversubscribed", False):
        head += f"\n{p} stages share {timeline.meta['cores']} cores, so stages also wait for a core"
    return head


def _schedule_words(schedule: str) -> str:
    return {"gpipe": "all forwards, then all backwards", "1f1b": "one forward, one backward"}.get(schedule, schedule)


def plot_gantt(timeline, *, ax=None, fontsize: float = 11, xmax: float | None = None, title: str | None = None,
               note: str | None = None, legend: bool = True):
    """Draw one pipelined step as a Gantt chart, one row per stage. Returns the Axes.

    ``timeline`` is a :class:`~dpviz.topics.splitting.records_pipeline.PipelineRun` (measured) or a
    :class:`dpviz.topics.splitting.theory_pipeline.Timeline` (modeled); ``xmax`` (seconds) fixes the x range, so
    that several charts share a scale. ``note`` goes under the Axes (a record's description by default).
    """
    ax = get_ax(ax)
    p, m = timeline.fwd.shape[:2]
    bars = GanttBars(ax, slots_p=p, slots_m=m, fontsize=fontsize, legend=legend)
    end = max(np.nanmax(timeline.fwd[..., 1]), np.nanmax(timeline.bwd[..., 1]))
    bars.set_layout(p, xmax if xmax is not None else end * 1.02, measured=getattr(timeline, "source", "") == MEASURED_NOTE)
    bars.show(timeline, title=title)
    if note is None and hasattr(timeline, "describe"):
        note = f"run: {timeline.describe()}"
    if note:
        source_note(ax, textwrap.fill(note, NOTE_WIDTH))
        if legend:
            ax.texts[-1].set_position((0, -95))  # below the legend
    return ax


def plot_bubble(curves: dict, points=None, *, ax=None, fontsize: float = 11, title: str | None = None):
    """The idle share of a pipelined step against m: modeled curves and measured points. Returns the Axes.

    ``curves`` maps p to ``(m, fraction)`` arrays from :func:`dpviz.topics.splitting.theory_pipeline.bubble_fraction`;
    ``points`` (optional) is a dict of equal-length arrays ``p``, ``m``, ``idle``, ``oversubscribed``
    (see :func:`dpviz.topics.splitting.records_pipeline.idle_points`). Measured points with more stages than cores
    are drawn hollow and say so.
    """
    ax = get_ax(ax)
    colours = _p_colours(sorted(curves))
    styles = dict(zip(sorted(curves), ("--", ":", "-.")))  # one dash per p, as well as one colour
    markers = dict(zip(sorted(curves), ("o", "s", "D")))
    for p, (ms, frac) in sorted(curves.items()):
        ax.plot(ms, frac, color=colours[p], linestyle=styles.get(p, "--"), linewidth=1.8,
                label=f"{MODELED_NOTE}: (p−1)/(m+p−1), p={p}")
    if points is not None and len(points["p"]):
        for p in sorted(set(np.asarray(points["p"]).tolist())):
            for over in (False, True):
                rows = (points["p"] == p) & (points["oversubscribed"] == over)
                if not rows.any():
                    continue
                colour = colours.get(p, SLATE)
                words = f"{MEASURED_NOTE} idle share, p={p}" + (" (more stages than cores)" if over else "")
                ax.plot(points["m"][rows], points["idle"][rows], markers.get(p, "^"), ms=9, linestyle="none",
                        markerfacecolor="white" if over else colour, markeredgecolor=colour, markeredgewidth=2,
                        label=words)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("m, micro-batches per step", fontsize=fontsize)
    ax.set_ylabel("share of the step a stage is idle", fontsize=fontsize)
    ax.set_ylim(0, 1)
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(alpha=0.3)
    open_frame(ax)
    ax.set_title(title or "The bubble shrinks as m grows", fontsize=fontsize + 1, loc="left")
    ax.legend(fontsize=fontsize - 2, frameon=False, loc="lower left")
    return ax


def _p_colours(ps) -> dict:
    palette = [SLATE, DARK_LAVENDER, CORAL, REPLICA, MINT]
    return {p: palette[i % len(palette)] for i, p in enumerate(ps)}

