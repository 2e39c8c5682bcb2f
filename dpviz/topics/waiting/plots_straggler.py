"""The straggler's timeline: one row per rank, lavender compute, the injected delay, grey waiting, coral all-reduce.

    plot_straggler_timeline(sweep, delay=0.05, slow_rank=1)       # measured, from a StragglerRecord
    plot_wait_against_delay([sweep])                             # the others' wait against the delay d

Each row is one rank over a few consecutive steps. A step starts with the rank's compute
(lavender, solid); the rank that was told to sleep adds its delay d (deeper lavender, cross-hatched); a rank
that reaches the all-reduce early sits in it doing nothing (grey, dotted) until the last rank arrives;
then the all-reduce itself runs (coral, horizontal lines) and every rank leaves it at about the same moment.

:class:`StragglerBars` holds the artists (one collection per kind of segment) so that a slider can
set new segments on them; :func:`measured_segments` and :func:`modeled_segments` turn a record or
a :class:`~dpviz.topics.waiting.theory.StragglerStep` into segments. Nothing here is computed beyond
rearranging those numbers.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path

from dpviz.engine.style import (
    COMM_HATCH, CORAL, DELAY, GREY, IDEAL_STYLE, INK, LAVENDER, SLATE, SLEEP_HATCH, WAIT, WAIT_HATCH, get_ax,
    open_frame,
)

KINDS = ("compute", "delay", "wait", "comm")
COLOURS = {"compute": LAVENDER, "delay": DELAY, "wait": WAIT, "comm": CORAL}
HATCHES = {"delay": SLEEP_HATCH, "wait": WAIT_HATCH, "comm": COMM_HATCH}  # compute stays solid
WORDS = {
    "compute": "compute (forward + backward)",
    "delay": "injected delay d (sleep)",
    "wait": "waiting inside the all-reduce",
    "comm": "all-reduce, everyone there",
}
BAR = 0.62


def measured_segments(record, setting: int, *, first: int | None = None, steps: int = 3) -> tuple[dict, float]:
    """Segments {kind: [(rank, start, width), ...]} of ``steps`` recorded steps of ``setting`` (seconds), and their end.

    Times start at 0 where the first drawn step began on its earliest rank. ``first`` defaults to the
    first step after the warm-up.
    """
    first = int(record.meta["warmup"]) if first is None else first
    chosen = slice(first, first + steps)
    begin, enter, leave = record.t_begin[setting, chosen], record.t_enter[setting, chosen], record.t_exit[setting, chosen]
    slept = record.slept[setting, chosen]
    origin = begin[0].min()
    last_in = enter.max(axis=1, keepdims=True)
    out = {kind: [] for kind in KINDS}
    for rank in range(record.k):
        for i in range(begin.shape[0]):
            b, e, s, x, m = begin[i, rank], enter[i, rank], slept[i, rank], leave[i, rank], last_in[i, 0]
            out["compute"].append((rank, b - origin, e - s - b))
            if s > 0:
                out["delay"].append((rank, e - s - origin, s))
            out["wait"].append((rank, e - origin, m - e))
            out["comm"].append((rank, m - origin, x - m))
    return out, float(leave.max() - origin)


def modeled_segments(step, *, steps: int = 3) -> tuple[dict, float]:
    """Segments of ``steps`` modeled steps (a :class:`~dpviz.topics.waiting.theory.StragglerStep`), back to back, and their end."""
    out = {kind: [] for kind in KINDS}
    slowest = float(step.compute.max())
    base = float(step.compute.min())
    for i in range(steps):
        start = i * step.t_step
        for rank, own in enumerate(step.compute):
            out["compute"].append((rank, start, base))
            if own > base:
                out["delay"].append((rank, start + base, own - base))
            out["wait"].append((rank, start + own, slowest - own))
            out["comm"].append((rank, start + slowest, step.t_comm))
    return out, steps * step.t_step


class StragglerBars:
    """The bars of a straggler timeline on one Axes, rank 0 on top, built once for up to ``slots`` ranks.

    :meth:`show` sets new segments (seconds; drawn in ``scale`` seconds per unit) and says how many
    ranks there are; rows past that stay empty. With ``one_path`` each kind's bars are drawn as one
    path (see :class:`OnePathBars`), which a slider redrawing them on every move wants.
    """

    def __init__(self, ax, *, slots: int = 4, fontsize: float = 11, one_path: bool = False):
        self.ax, self.slots = ax, slots
        self.collections = {}
        for kind in KINDS:
            self.collections[kind] = ax.add_collection((OnePathBars if one_path else PolyCollection)(
                [], facecolors=COLOURS[kind], edgecolors=INK if kind != "wait" else GREY, linewidths=0.6,
                hatch=HATCHES.get(kind), gid=f"straggler.{kind}"))
        ax.set_ylim(-0.6, slots - 0.4)
        ax.invert_yaxis()
        ax.tick_params(axis="both", labelsize=fontsize - 1)
        open_frame(ax)

    def artists(self) -> list:
        return list(self.collections.values())

    def show(self, segments: dict, *, scale: float = 1e-3) -> None:
        for kind, collection in self.collections.items():
            collection.set_verts([_box(rank, start / scale, width / scale) for rank, start, width in segments.get(kind, [])])


class OnePathBars(PolyCollection):
    """A PolyCollection of bars of one style, drawn as one compound path.

    Agg renders a hatch pattern afresh for every path it fills; one path for all the bars of a kind
    renders it once. The bars stay the collection's paths (``get_paths``), one per bar, and do not
    overlap, so the pixels are those of drawing them one by one.
    """

    _patch = None  # the PathPatch that draws the bars, made on the first draw: a slider draws them on every move

    def draw(self, renderer):
        paths = self.get_paths()
        if not self.get_visible() or not paths:
            return
        style = dict(facecolor=self.get_facecolor()[0], edgecolor=self.get_edgecolor()[0],
                     linewidth=self.get_linewidth()[0], hatch=self.get_hatch(), transform=self.get_transform(),
                     clip_box=self.get_clip_box(), clip_on=self.get_clip_on(), clip_path=self.get_clip_path(),
                     antialiased=self.get_antialiased()[0])
        if hasattr(self, "get_hatchcolor"):  # matplotlib 3.11; before it (Colab's 3.10) a hatch takes the edge's colour
            style.update(hatchcolor=self.get_hatchcolor()[0], hatch_linewidth=self.get_hatch_linewidth())
        if self._patch is None:
            self._patch = PathPatch(Path.make_compound_path(*paths), **style)
            self._patch.set_figure(self.figure)  # get_figure(root=False) is 3.10 on; .figure is the same on 3.8 on
            self._style = style
        else:
            self._patch.set_path(Path.make_compound_path(*paths))
            if not _same_style(style, self._style):
                self._patch.set(**style)
                self._style = style
        self._patch.draw(renderer)
        self.stale = False


def _same_style(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[name], b[name]) if isinstance(a[name], np.ndarray) else a[name] is b[name]
               or a[name] == b[name] for name in a)


def _box(rank: int, x: float, width: float) -> list:
    y0, y1 = rank - BAR / 2, rank + BAR / 2
    return [(x, y0), (x + width, y0), (x + width, y1), (x, y1)]


def legend_handles() -> list:
    return [Patch(facecolor=COLOURS[kind], edgecolor=INK if kind != "wait" else GREY, hatch=HATCHES.get(kind),
                  label=WORDS[kind]) for kind in KINDS]


def plot_straggler_timeline(record, *, delay: float, slow_rank: int, steps: int = 3, ax=None, fontsize: float = 11,
                            title: str | None = None):
    """A few measured steps of one setting of a :class:`~dpviz.topics.waiting.records_straggler.StragglerRecord`, one row per rank."""
    ax = get_ax(ax)
    s = record.setting(delay, slow_rank)
    segments, end = measured_segments(record, s, steps=steps)
    bars = StragglerBars(ax, slots=record.k, fontsize=fontsize)
    bars.show(segments)
    ax.set_xlim(0, end * 1e3 * 1.02)
    ax.set_yticks(range(record.k), [f"rank {r}" + ("  (sleeps d)" if r == slow_rank and delay > 0 else "")
                                   for r in range(record.k)], fontsize=fontsize)
    ax.set_xlabel("time (ms), measured", fontsize=fontsize)
    others = record.measured_wait()[s]
    ax.set_title(title or f"Rank {slow_rank} sleeps d = {delay * 1e3:g} ms each step: the others wait "
                          f"{others * 1e3:.1f} ms (median)\ninside the all-reduce",
                 fontsize=fontsize + 1, loc="left")
    ax.legend(handles=legend_handles(), loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=fontsize - 2,
              handlelength=2.4, handleheight=1.2,
              frameon=False)
    if record.oversubscribed:
        ax.text(0.99, 0.02, f"k = {record.k} ranks on {record.meta['cores']} cores: they take turns on the CPU",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=fontsize - 2, color=SLATE)
    return ax


def plot_wait_against_delay(records, *, ax=None, fontsize: float = 11, tolerance=(0.005, 0.30), title: str | None = None):
    """The wait of the ranks that did not sleep against the delay d, one point per setting of each record.

    The dashed line is the model (they wait exactly d); the shaded band is the tolerance within which the
    chapter counts a wait as d, ``tolerance = (seconds, fraction)``. Records with more ranks than cores are drawn hollow.
    """
    ax = get_ax(ax)
    records = list(records)
    top = max(float(r.delay.max()) for r in records) * 1e3 * 1.1 or 1.0
    d = np.linspace(0, top, 50)
    absolute, relative = tolerance
    ax.fill_between(d, d - (absolute * 1e3 + relative * d), d + (absolute * 1e3 + relative * d), color=GREY, alpha=0.18,
                    linewidth=0, label=f"tolerance: within {absolute * 1e3:g} ms + {relative:.0%} of d")
    ax.plot(d, d, **IDEAL_STYLE, label="modeled: the others wait exactly d")
    markers = "osD^v"
    for i, record in enumerate(records):
        hollow = record.oversubscribed
        label = f"measured, k = {record.k}" + (f" ({record.k} ranks on {record.meta['cores']} cores)" if hollow else "")
        ax.plot(record.delay * 1e3, record.measured_wait() * 1e3, markers[i % len(markers)], markersize=8,
                markerfacecolor="white" if hollow else INK, markeredgecolor=INK, linestyle="none", label=label)
    ax.set_xlim(0, top)
    ax.set_ylim(min(-absolute * 1e3, ax.get_ylim()[0]), top * 1.3)
    ax.set_xlabel("injected delay d (ms)", fontsize=fontsize)
    ax.set_ylabel("others' wait inside the all-reduce (ms)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.set_title(title or "The others' wait against d", fontsize=fontsize + 1, loc="left")
    ax.legend(fontsize=fontsize - 2, loc="upper left", frameon=False)
    open_frame(ax)
    return ax


def modeled_note(step) -> str:
    """The words under a modeled timeline: what it assumes."""
    return (f"modeled: compute {step.compute.min() * 1e3:.2g} ms per rank, all-reduce {step.t_comm * 1e3:.2g} ms, "
            f"the slow rank {float(step.compute.max() - step.compute.min()) * 1e3:g} ms late")


__all__ = ["StragglerBars", "OnePathBars", "measured_segments", "modeled_segments", "plot_straggler_timeline",
           "plot_wait_against_delay", "legend_handles", "modeled_note"]
