"""Step 6 and figure s01: one step's time on k devices, as a solid lavender compute bar and a lined coral sync bar.

Each row is one k. The lavender segment is T_compute / k, the share of the work one rank does; the
coral segment glued after it is T_comm, the all-reduce every rank must wait through before it can
step. Doubling k halves the lavender bar but not the coral one, so no row can get shorter than its
coral bar. The rows come from :mod:`dpviz.topics.ground_floor.timing`::

    plot_timelines(timing.machine_timelines(runs, bench))                      # this machine
    plot_timelines(timing.timeline_rows(t_compute=1.0, t_comm=0.2))           # the notes' toy numbers

An interactive figure keeps the :class:`TimelineBars` and calls its ``show`` with new rows.

The sync bar is crossed by horizontal lines, so it is told from compute without its colour. Rows the cost model
filled in add diagonal hatching and say "modeled".
"""

from __future__ import annotations

from matplotlib.patches import Patch, Rectangle
from matplotlib.transforms import BboxTransformTo

from dpviz.engine.style import (
    COMM_HATCH, CORAL, INK, LAVENDER, MEASURED_NOTE, MODELED_NOTE, get_ax, open_frame, source_note,
)

GIDS = {"compute": "timeline.compute", "comm": "timeline.comm", "label": "timeline.label"}
MODELED_HATCH = "///"
BAR_HEIGHT = 0.62


UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}  # seconds per unit


def time_unit(seconds: float) -> tuple[str, float]:
    """A readable unit for a span of ``seconds``: ``(name, seconds per unit)``."""
    for name, scale in UNITS.items():
        if seconds >= scale:
            return name, scale
    return "µs", 1e-6


def row_label(row, unit: str, scale: float, *, tag: bool = True) -> str:
    """The text at the end of a bar: its total and (``tag``) whether it was measured or modeled."""
    words = MEASURED_NOTE if row.source == MEASURED_NOTE else MODELED_NOTE
    if row.oversubscribed:
        words += ", k > cores"
    return f"{row.t_step / scale:.3g} {unit}" + (f"  ({words})" if tag else "")


def plot_timelines(rows, *, ax=None, fontsize: float = 11, title: str | None = None, note: str | None = None,
                   mark_source: bool = True):
    """Draw one horizontal time bar per row of :func:`dpviz.topics.ground_floor.timing.timeline_rows` (first row on top).

    ``note`` is written under the Axes (which run or which model the rows came from). With
    ``mark_source`` each bar says whether it was measured or modeled (modeled bars are hatched);
    turn it off only where the title already says that every row is modeled.
    """
    ax = get_ax(ax)
    TimelineBars(ax, rows, fontsize=fontsize, title=title, note=note, mark_source=mark_source)
    return ax


def _comm(hatch: str | None) -> str:
    """The sync bar's hatch: its own lines, and the diagonals of a modeled row on top."""
    return (hatch or "") + COMM_HATCH


class LevelBar(Rectangle):
    """A bar that is never turned: its patch transform is its box's alone.

    Rectangle's own composes a turn about a point with the box on every draw, which for an angle of 0 is the same
    matrix but more than half of what drawing a bar takes; a slider figure moves its bars on every move.
    """

    def get_patch_transform(self):
        if self.angle != 0:
            return super().get_patch_transform()
        return BboxTransformTo(self.get_bbox())


def _bar(ax, y: float, **style) -> LevelBar:
    """An empty horizontal bar centred on ``y``, from x = 0, added to ``ax`` as ``ax.barh`` adds one."""
    bar = LevelBar((0.0, y - BAR_HEIGHT / 2), 0.0, BAR_HEIGHT, edgecolor=INK, linewidth=0.8, label="_nolegend_",
                   **style)
    bar.sticky_edges.x.append(0.0)
    ax.add_patch(bar)
    return bar


class TimelineBars:
    """The artists of figure s01, built once; :meth:`show` sets new rows on them without making new ones.

    ``self.compute``, ``self.comm`` and ``self.labels`` hold one lavender bar, one coral bar and
    one end-of-bar text per row, first row on top. The x axis is in ``self.unit``; :meth:`show`
    keeps it unless told another unit. With ``snap_labels``, :meth:`show` starts each label on the
    whole pixel nearest its bar's end (at most half a pixel off), so a figure redrawn many times, as a
    slider's is, puts each label at the same place for the same bar each time, and the slider can reuse the text it drew there
    """

    def __init__(self, ax, rows, *, fontsize: float = 11, title: str | None = None, note: str | None = None,
                 mark_source: bool = True, snap_labels: bool = False):
        rows = list(rows)
        if not rows:
            raise ValueError("rows must hold at least one TimelineRow.")
        self.ax, self.mark_source, self.snap_labels = ax, mark_source, snap_labels
        y = [len(rows) - 1 - i for i in range(len(rows))]
        self.compute, self.comm, self.labels = [], [], []
        for yi, row in zip(y, rows):  # row by row, the order a saved SVG lists them in
            hatch = self._hatch(row)
            self.compute.append(_bar(ax, yi, facecolor=LAVENDER, gid=GIDS["compute"], hatch=hatch))
            self.comm.append(_bar(ax, yi, facecolor=CORAL, gid=GIDS["comm"], hatch=_comm(hatch)))
            self.labels.append(ax.text(0.0, yi, "", va="center", ha="left", fontsize=fontsize - 1, color=INK,
                                       gid=GIDS["label"]))
        longest = max(row.t_step for row in rows)
        self.unit, self.scale = time_unit(longest if longest > 0 else 1.0)
        self.show(rows)

        ax.set_yticks(y, [f"k = {row.k}" for row in rows], fontsize=fontsize)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlim(0, longest / self.scale * 1.6 if longest > 0 else 1.0)  # room for the label after the longest bar
        ax.set_xlabel(f"time for one training step ({self.unit})", fontsize=fontsize, loc="right")
        ax.tick_params(axis="x", labelsize=fontsize - 1)
        open_frame(ax)
        ax.set_title(title or "One step on k devices: compute shrinks as 1/k, the sync does not,\n"
                              "so no step can get shorter than its coral bar", fontsize=fontsize + 1, loc="left")

        handles = [
            Patch(facecolor=LAVENDER, edgecolor=INK, label="compute, T_compute / k"),
            Patch(facecolor=CORAL, edgecolor=INK, hatch=COMM_HATCH, label="sync (all-reduce), T_comm"),
        ]
        sources = {row.source for row in rows} if mark_source else set()
        if MEASURED_NOTE in sources:  # the keys to measured and modeled are outlines: they say how, not what
            handles.append(Patch(fill=False, edgecolor=INK, label=f"no diagonals: {MEASURED_NOTE} by a run"))
        if MODELED_NOTE in sources:
            handles.append(Patch(fill=False, edgecolor=INK, hatch=MODELED_HATCH,
                                 label=f"hatched ///: {MODELED_NOTE} (cost model)"))
        ax.legend(handles=handles, loc="lower right", fontsize=fontsize - 2, frameon=False, handlelength=2.4,
                  handleheight=1.2)  # room for the hatches
        if note:
            source_note(ax, note)

    def _on_whole_pixel(self, x: float) -> float:
        """The x (data) nearest ``x`` that falls on a whole pixel of the figure as it is now laid out."""
        (left, _), (right, _) = self.ax.transData.transform([(0.0, 0.0), (1.0, 0.0)])  # a linear axis: two points
        return (round(left + (right - left) * x) - left) / (right - left)

    def _hatch(self, row) -> str | None:
        return MODELED_HATCH if self.mark_source and row.source != MEASURED_NOTE else None

    def show(self, rows, *, unit: str | None = None, suffix: str = "") -> None:
        """Set the bars to ``rows`` (as many as built), in ``unit`` if given; ``suffix`` ends the last label."""
        rows = list(rows)
        if len(rows) != len(self.compute):
            raise ValueError(f"rows must hold {len(self.compute)} rows, one per bar built; got {len(rows)}.")
        if unit is not None:
            self.unit, self.scale = unit, UNITS[unit]
        scale = self.scale
        label_x = self._on_whole_pixel if self.snap_labels else (lambda x: x)
        # Only what changed is set: a setter marks its artist changed even when the value is the same, and a
        # widget redraws the artists marked changed.
        for compute, comm, label, row in zip(self.compute, self.comm, self.labels, rows):
            for now, value, set_ in ((compute.get_width(), row.t_compute / scale, compute.set_width),
                                     (comm.get_x(), row.t_compute / scale, comm.set_x),
                                     (comm.get_width(), row.t_comm / scale, comm.set_width),
                                     (label.get_position()[0], label_x(row.t_step / scale), label.set_x)):
                if now != value:
                    set_(value)
            if compute.get_hatch() != self._hatch(row):  # a row that turned from measured to modeled, or back
                compute.set_hatch(self._hatch(row))
                comm.set_hatch(_comm(self._hatch(row)))
            words = "  " + row_label(row, self.unit, scale, tag=self.mark_source)
            label.set_text(words + suffix if label is self.labels[-1] else words)  # set_text leaves equal words be
