"""Step 4: one group per device.

k boxes side by side, one per rank of a recorded run. Each box holds the same θ
(the replica colour, its value printed from the record), is fed its own slice of
the step's global batch (dark dots; the other ranks' examples faint), and
produces its own gradient g_i (a grey arrow from ``run.local_grad``). The arrows
point different ways because the slices differ; nobody has talked yet.

    plot_devices(run, step=0)
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Rectangle

from dpviz.engine.style import GREY, INK, PANEL, PANEL_EDGE, REPLICA, SLATE, get_ax, source_note

PITCH = 1.15              # data units from one box's left edge to the next
DATA_PANEL = (0.47, 0.79)  # bottom and top of the data-slice panel, in box units
GRAD_CENTRE = 0.225        # height of the gradient arrow's tail, in box units
X_RANGE = (-2.3, 2.3)      # the line data's x lives in [-2, 2]
GRAD_ROOM = (0.36, 0.14)   # half width and half height of the room an arrow may fill, in box units


def plot_devices(run, *, step: int = 0, ax=None, slots: int | None = None):
    """Draw Step 4 for ``run`` at ``step``: k device boxes, one θ, k slices, k arrows g_i. Returns the Axes.

    ``slots`` leaves room for that many boxes (at least k; the unused ones are
    hidden). The arrows share one scale, the largest at which all of them fit in
    their panels; their printed components give the sizes.
    """
    ax = get_ax(ax)
    boxes = DeviceBoxes(ax, slots=slots or run.k, y_range=y_range(run))
    boxes.show(run, step)
    return ax


def fit_scale(ax, vectors, half_width: float, half_height: float) -> float:
    """The Quiver ``scale`` (``scale_units="width"``, ``angles="uv"``) at which every vector, drawn from the middle
    of a room ``2·half_width`` by ``2·half_height`` data units, stays inside it."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    box = ax.get_window_extent()
    room_x = 0.92 * half_width * box.width / abs(x1 - x0)  # pixels, with a margin for the arrow head
    room_y = 0.92 * half_height * box.height / abs(y1 - y0)
    g = np.abs(np.asarray(vectors, dtype=float)[:, :2])
    # A component u is drawn u / scale · (Axes width) pixels long.
    scale = max(g[:, 0].max() * box.width / room_x, g[:, 1].max() * box.width / room_y)
    return scale if scale > 0 else 1.0


def y_range(run) -> tuple[float, float]:
    lo, hi = float(run.y.min()), float(run.y.max())
    pad = 0.08 * (hi - lo)
    return lo - pad, hi + pad


class DeviceBoxes:
    """The artists of a Step 4 figure, built once; :meth:`show` fills them from a run without making new ones.

    ``slots`` boxes are drawn; :meth:`show` hides those beyond the run's k. The
    artists of box ``i`` are in ``self.slots[i]`` (a dict); the arrows are
    Quivers whose U, V hold the recorded gradient itself.
    """

    def __init__(self, ax, *, slots: int, y_range: tuple[float, float]):
        self.ax = ax
        self.y_range = y_range
        n = slots
        self.slots = [self._box(i) for i in range(n)]
        # At least two boxes' room, so a lone rank keeps the shape of the others.
        centre, half = ((n - 1) * PITCH + 1) / 2, (max(n - 1, 1) * PITCH + 1) / 2 + 0.08
        ax.set_xlim(centre - half, centre + half)
        ax.set_ylim(-0.05, 1.08)
        ax.set_axis_off()
        self.title = ax.set_title("", fontsize=11, y=1.0, pad=8)  # a fixed y skips the costly automatic placement on every redraw
        proxies = [
            Line2D([], [], color=REPLICA, lw=2.5, label="θ, the same on every rank"),
            Line2D([], [], color=INK, marker="o", ls="", ms=5, label="this rank's slice"),
            Line2D([], [], color=GREY, marker="o", ls="", ms=4, markerfacecolor="none", label="other ranks' examples"),
            Line2D([], [], color=GREY, lw=2.5, marker=">", ms=7, label="g_i, from its slice alone"),
        ]
        ax.legend(handles=proxies, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=9, frameon=False, handletextpad=0.4, columnspacing=1.2)
        source_note(ax, "")
        self.source = ax.texts[-1]
        self.source.set_position((0, -40))  # below the legend

    def _box(self, i: int) -> dict:
        ax, x0 = self.ax, i * PITCH
        a = {}
        a["box"] = ax.add_patch(FancyBboxPatch((x0, 0.0), 1.0, 1.0, boxstyle="round,pad=0.0,rounding_size=0.04",
                                               facecolor=PANEL, edgecolor=INK, linewidth=1.5))
        a["label"] = ax.text(x0 + 0.5, 0.955, f"rank {i}", ha="center", va="center", fontsize=10, fontweight="bold", color=INK)
        a["theta"] = ax.text(x0 + 0.5, 0.865, "", ha="center", va="center", fontsize=9, color="white",
                             bbox=dict(boxstyle="round,pad=0.3", facecolor=REPLICA, edgecolor="none"))
        lo, hi = DATA_PANEL
        a["panel"] = ax.add_patch(Rectangle((x0 + 0.06, lo), 0.88, hi - lo, facecolor="white", edgecolor=PANEL_EDGE, lw=0.8))
        a["others"] = ax.scatter([], [], s=9, facecolors="none", edgecolors=GREY, linewidths=0.7)  # hollow: not this rank's
        a["slice"] = ax.scatter([], [], s=18, color=INK, linewidths=0, zorder=3)
        (a["line"],) = ax.plot([], [], color=REPLICA, lw=2.2, zorder=2)
        a["rows"] = ax.text(x0 + 0.5, (lo + hi) / 2, "", ha="center", va="center", fontsize=9, color=INK, wrap=True)
        for artist in (a["others"], a["slice"], a["line"]):
            artist.set_clip_path(a["panel"])
        c = GRAD_CENTRE
        (a["axis_w"],) = ax.plot([x0 + 0.12, x0 + 0.88], [c, c], color=PANEL_EDGE, lw=0.8)
        (a["axis_b"],) = ax.plot([x0 + 0.5, x0 + 0.5], [c - 0.15, c + 0.15], color=PANEL_EDGE, lw=0.8)
        if i == 0:  # the axes of every gradient panel are the same; naming them once keeps the redraw fast
            a["name_w"] = ax.text(x0 + 0.88, c + 0.01, "∂L/∂w", ha="right", va="bottom", fontsize=9, color=SLATE)
            a["name_b"] = ax.text(x0 + 0.52, c + 0.15, "∂L/∂c", ha="left", va="top", fontsize=9, color=SLATE)
        a["arrow"] = ax.quiver([x0 + 0.5], [c], [0.0], [0.0], angles="uv", scale_units="width", scale=1.0,
                               color=GREY, width=0.006, zorder=4)
        a["arrow"].set_gid(f"local-{i}")
        a["grad"] = ax.text(x0 + 0.5, 0.025, "", ha="center", va="bottom", fontsize=9, color=INK)
        return a

    @staticmethod
    def layout_key(run) -> tuple:
        """What decides the artists outside :meth:`changing_artists`: the run (its k, model and provenance note).

        Two steps of one run differ only inside :meth:`changing_artists`; so do runs with the same key.
        """
        return (run.k, run.meta["model"], run.describe())

    def changing_artists(self) -> list:
        """The artists :meth:`show` may set new data or text on between runs of the same :meth:`layout_key`."""
        names = ("theta", "slice", "others", "line", "rows", "arrow", "grad")
        return [a[name] for a in self.slots for name in names] + [self.title]

    def _to_panel(self, i: int, x, y):
        """Map data-set coordinates (x, y) into box i's data panel."""
        lo, hi = DATA_PANEL
        (xa, xb), (ya, yb) = X_RANGE, self.y_range
        px = i * PITCH + 0.06 + 0.88 * (np.asarray(x) - xa) / (xb - xa)
        py = lo + (hi - lo) * (np.asarray(y) - ya) / (yb - ya)
        return px, py

    def show(self, run, step: int = 0) -> None:
        """Fill the boxes from ``run`` at ``step``: set_text, set_offsets, set_data, set_UVC and set_visible only.

        The Quivers keep the recorded gradient as U, V; their shared scale is the
        largest at which every g_i of this step fits its panel.
        """
        if not 0 <= step < run.steps:
            raise ValueError(f"step must be an integer from 0 to {run.steps - 1} for this run; got {step}.")
        if run.k > len(self.slots):
            raise ValueError(f"this figure has room for {len(self.slots)} boxes, so k must be <= {len(self.slots)}; got k={run.k}.")
        line = run.meta["model"] == "line"
        rows = run.batch_index[step]
        scale = fit_scale(self.ax, run.local_grad[step], *GRAD_ROOM)
        for i, a in enumerate(self.slots):
            visible = i < run.k
            for artist in a.values():
                artist.set_visible(visible)
            if not visible:
                continue
            mine = rows[run.example_rank == i]
            g = run.local_grad[step, i]
            a["label"].set_text(f"rank {i}: {len(mine)} examples")
            if line:
                w, c = run.params[step, i]
                a["theta"].set_text(f"θ = (w {w:+.3f}, c {c:+.3f})")
                a["slice"].set_offsets(np.column_stack(self._to_panel(i, run.x[mine, 0], run.y[mine, 0])))
                theirs = rows[run.example_rank != i]
                a["others"].set_offsets(np.column_stack(self._to_panel(i, run.x[theirs, 0], run.y[theirs, 0])))
                xs = np.array(X_RANGE)
                a["line"].set_data(*self._to_panel(i, xs, w * xs + c))
                a["rows"].set_visible(False)
            else:
                a["theta"].set_text(f"θ digest {run.param_digest[step, i].decode()[:10]}…")
                shown = ", ".join(str(r) for r in mine[:6]) + (", …" if len(mine) > 6 else "")
                a["rows"].set_text(f"rows {shown}")
                for name in ("slice", "others", "line"):
                    a[name].set_visible(False)
                if i == 0:
                    a["name_w"].set_text("g[0]")
                    a["name_b"].set_text("g[1]")
            a["arrow"].set_UVC(g[0], g[1])
            a["arrow"].scale = scale
            a["grad"].set_text(f"g_{i} = ({g[0]:+.2f}, {g[1]:+.2f})" if line else f"g_{i}[:2] = ({g[0]:+.3g}, {g[1]:+.3g})")
        same = bool((run.param_digest[step] == run.param_digest[step, 0]).all())
        self.title.set_text(
            f"One group per device · k={run.k}, b={run.meta['b']}, training step {step}: "
            + (f"{'one θ' if same else 'θ differs'}, {run.k} slices, {run.k} different g_i" if run.k > 1
               else "one rank: the whole batch, one g")
        )
        self.source.set_text(f"run: {run.describe()}")
