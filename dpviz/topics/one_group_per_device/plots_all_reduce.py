"""Step 5: the all-reduce, drawn from real runs and a real recorded schedule.

* :func:`plot_all_reduce`: the k local arrows g_i (grey) funnel into one red
  arrow, the gradient every rank received; a red copy of it lands back on every
  rank.
* :func:`plot_replica_params`: one knob of every replica over the steps; with the
  all-reduce the lines lie on top of each other, without it they drift apart.
* :func:`plot_ring_schedule`: which chunk each rank hands to its right-hand
  neighbour at each of the ring's 2(k−1) steps (reduce-scatter, then all-gather).
* :func:`plot_parameter_server`: the star through rank 0, with the bytes on each link.

The schedules come from :func:`dpviz.topics.all_reduce.run_schedule.record_schedule`.
"""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch, Rectangle

from dpviz.topics.one_group_per_device.plots import PITCH, fit_scale
from dpviz.engine.style import CORAL, GREY, INK, PALE_RED, PANEL, PANEL_EDGE, RED, REPLICA, get_ax, source_note

TOP = (0.72, 1.0)     # the row of ranks that send their g_i
HUB = (0.36, 0.64)    # the all-reduce in the middle
BOTTOM = (0.0, 0.28)  # the row of ranks that receive the result
HUB_WIDTH = 1.6
ROOM = (0.4, 0.075)   # half width and half height an arrow may fill, between a box's name and its numbers
ARROW_Y = 0.135       # height of an arrow's tail above its box's bottom edge


def plot_all_reduce(run, *, step: int = 0, ax=None, slots: int | None = None):
    """Draw the all-reduce of ``run`` at ``step``: k grey g_i into one red arrow, and k red copies back. Returns the Axes.

    Every arrow is a Quiver whose U, V hold the recorded gradient; the red one in
    the middle is ``run.reduced_grad[step, 0]``, the copies ``run.reduced_grad[step, i]``.
    ``slots`` leaves room for that many ranks. All arrows share one scale, the
    largest at which every one of them fits its box.
    """
    ax = get_ax(ax)
    funnel = AllReduceFunnel(ax, slots=slots or run.k)
    funnel.show(run, step)
    return ax


class AllReduceFunnel:
    """The artists of a Step 5 funnel figure, built once; :meth:`show` fills them from a run in place.

    Arrows are found by gid: ``local-i`` (top row), ``funnel-i`` (faint, in the
    hub), ``reduced`` (the red arrow in the hub) and ``copy-i`` (bottom row).
    """

    def __init__(self, ax, *, slots: int):
        self.ax = ax
        self.n = slots
        width = max((slots - 1) * PITCH + 1.0, HUB_WIDTH)  # room for the hub too, when one rank is all there is
        self.top = [self._rank_box(i, TOP, GREY, "local") for i in range(slots)]
        self.bottom = [self._rank_box(i, BOTTOM, RED, "copy") for i in range(slots)]
        self.pipes_in = [ax.plot([], [], color=GREY, lw=1.5, zorder=1)[0] for _ in range(slots)]
        self.pipes_out = [ax.plot([], [], color=RED, lw=1.5, alpha=0.6, zorder=1)[0] for _ in range(slots)]
        lo, hi = HUB
        self.hub = ax.add_patch(FancyBboxPatch((0, lo), HUB_WIDTH, hi - lo, boxstyle="round,pad=0.0,rounding_size=0.04",
                                               facecolor=PALE_RED, edgecolor=RED, linewidth=1.8, zorder=2))
        self.hub_title = ax.text(0, hi - 0.025, "", ha="center", va="top", fontsize=10, fontweight="bold", color=RED, zorder=3)
        self.hub_value = ax.text(0, lo + 0.02, "", ha="center", va="bottom", fontsize=9, color=INK, zorder=3)
        self.funnel = []
        for i in range(slots):
            q = ax.quiver([0], [0], [0.0], [0.0], angles="uv", scale_units="width", scale=1.0,
                          color=GREY, alpha=0.45, width=0.004, zorder=4)
            q.set_gid(f"funnel-{i}")
            self.funnel.append(q)
        self.reduced = ax.quiver([0], [0], [0.0], [0.0], angles="uv", scale_units="width", scale=1.0,
                                 color=RED, width=0.008, zorder=5)
        self.reduced.set_gid("reduced")
        ax.set_xlim(-0.08, width + 0.08)
        ax.set_ylim(-0.04, 1.06)
        ax.set_axis_off()
        self.title = ax.set_title("", fontsize=11, y=1.0, pad=8)  # a fixed y skips the costly automatic placement on every redraw
        self.verdict = ax.text(0.5, -0.065, "", transform=ax.transAxes, ha="center", va="top", fontsize=10, color=INK)
        source_note(ax, "")
        self.source = ax.texts[-1]
        self.source.set_position((0, -40))

    @staticmethod
    def layout_key(run) -> tuple:
        """What decides the artists outside :meth:`changing_artists`: the run (its k, all-reduce and provenance note).

        Two steps of one run differ only inside :meth:`changing_artists`; so do runs with the same key.
        """
        return (run.k, bool(run.meta["all_reduce"]), run.describe())

    def changing_artists(self) -> list:
        """The artists :meth:`show` may set new data or text on between runs of the same :meth:`layout_key`."""
        values = [box["value"] for box in self.top + self.bottom]
        return [*self._arrows(), *values, self.hub_value, self.title, self.verdict]

    def _arrows(self):
        return [self.reduced, *self.funnel, *(box["arrow"] for box in self.top + self.bottom)]

    def _rank_box(self, i: int, rows: tuple, colour: str, kind: str) -> dict:
        ax, x0 = self.ax, i * PITCH
        lo, hi = rows
        a = {}
        a["box"] = ax.add_patch(FancyBboxPatch((x0, lo), 1.0, hi - lo, boxstyle="round,pad=0.0,rounding_size=0.03",
                                               facecolor=PANEL, edgecolor=INK, linewidth=1.3, zorder=2))
        a["label"] = ax.text(x0 + 0.04, hi - 0.02, "", ha="left", va="top", fontsize=10, fontweight="bold", color=INK, zorder=3)
        a["value"] = ax.text(x0 + 0.5, lo + 0.015, "", ha="center", va="bottom", fontsize=9, color=INK, zorder=3)
        a["arrow"] = ax.quiver([x0 + 0.5], [lo + ARROW_Y], [0.0], [0.0], angles="uv", scale_units="width",
                               scale=1.0, color=colour, width=0.006, zorder=4)
        a["arrow"].set_gid(f"{kind}-{i}")
        return a

    def show(self, run, step: int = 0) -> None:
        """Fill the figure from ``run`` at ``step`` with set_* calls on the existing artists only."""
        if not 0 <= step < run.steps:
            raise ValueError(f"step must be an integer from 0 to {run.steps - 1} for this run; got {step}.")
        k = run.k
        if k > self.n:
            raise ValueError(f"this figure has room for {self.n} ranks, so k must be <= {self.n}; got k={k}.")
        local, reduced = run.local_grad[step], run.reduced_grad[step]
        scale = fit_scale(self.ax, np.concatenate([local, reduced]), *ROOM)
        for q in self._arrows():
            q.scale = scale
        on = bool(run.meta["all_reduce"])
        # the hub sits under the ranks in use, moved right only as far as it must to stay inside the view (k = 1)
        centre = max(((k - 1) * PITCH + 1.0) / 2, self.ax.get_xlim()[0] + HUB_WIDTH / 2 + 0.02)
        lo, hi = HUB
        mid = lo + ARROW_Y
        self.hub.set_x(centre - HUB_WIDTH / 2)
        self.hub_title.set_position((centre, hi - 0.025))
        self.hub_title.set_text(f"all-reduce: g = (1/{k}) Σ g_i" if on else "no all-reduce in this run")
        self.hub_value.set_position((centre, lo + 0.02))
        self.hub_value.set_text(f"g = ({reduced[0, 0]:+.3f}, {reduced[0, 1]:+.3f})" if on else "nothing is averaged")
        self.reduced.set_visible(on)
        self.reduced.set_offsets([[centre, mid]])
        self.reduced.set_UVC(reduced[0, 0], reduced[0, 1])
        for i in range(self.n):
            used = i < k
            for artist in (*self.top[i].values(), *self.bottom[i].values()):
                artist.set_visible(used)
            for artist in (self.pipes_in[i], self.pipes_out[i], self.funnel[i]):
                artist.set_visible(used and on)
            if not used:
                continue
            x = i * PITCH + 0.5
            top, bottom = self.top[i], self.bottom[i]
            top["label"].set_text(f"rank {i}: g_{i}")
            top["value"].set_text(f"({local[i, 0]:+.2f}, {local[i, 1]:+.2f})")
            top["arrow"].set_UVC(local[i, 0], local[i, 1])
            bottom["label"].set_text(f"rank {i} receives" if on else f"rank {i} keeps g_{i}")
            bottom["value"].set_text(f"({reduced[i, 0]:+.3f}, {reduced[i, 1]:+.3f})")
            bottom["arrow"].set_UVC(reduced[i, 0], reduced[i, 1])
            bottom["arrow"].set_color(RED if on else GREY)  # without the sync, what a rank steps with is its own g_i
            spread = 0.25 * HUB_WIDTH * (i - (k - 1) / 2) / max(k - 1, 1)
            self.pipes_in[i].set_data([x, centre + spread], [TOP[0], hi])
            self.pipes_out[i].set_data([centre + spread, x], [lo, BOTTOM[1]])
            self.funnel[i].set_offsets([[centre, mid]])
            self.funnel[i].set_UVC(local[i, 0], local[i, 1])
        same = bool(run.received_identical()[step])
        if on and same and k == 1:
            verdict = f"one rank: nothing to average, so at step {step} it got its own g_0 back, bit for bit"
        elif on and same:
            verdict = f"{'both' if k == 2 else f'all {k}'} ranks received bit-identical copies of g at step {step}"
        elif on:
            verdict = f"the ranks received different g at step {step}"
        else:
            verdict = "all-reduce off: each rank steps with its own g_i, so the copies will drift"
        self.verdict.set_text(verdict)
        what = "grey g_i in, their average (red) back to every rank" if on else "no all-reduce: every rank keeps its own g_i"
        self.title.set_text(f"The all-reduce · k={k}, b={run.meta['b']}, training step {step}: {what}")
        self.source.set_text(f"run: {run.describe()}")


def plot_replica_params(run, *, ax=None, knob: int = 0):
    """Draw parameter ``knob`` of every replica over the steps, one line per rank. Returns the Axes.

    For the line model knob 0 is the slope w and knob 1 the intercept c. Lines of the same colour and
    decreasing width: replicas that agree draw as one nested stripe, replicas
    that drift fan out.
    """
    if "params" not in run.arrays:
        raise ValueError("run must keep every replica's parameters (models up to 20,000 parameters do); this one kept only digests.")
    ax = get_ax(ax)
    params = run.params  # (steps + 1, k, P)
    if not 0 <= knob < params.shape[2]:
        raise ValueError(f"knob must be an integer from 0 to {params.shape[2] - 1} for this run; got {knob}.")
    name = ("w", "c")[knob] if run.meta["model"] == "line" else f"θ[{knob}]"
    k = run.k
    steps = np.arange(params.shape[0])
    widths = np.linspace(7.0, 1.5, k) if k > 1 else [2.0]
    alphas = np.linspace(0.3, 1.0, k) if k > 1 else [1.0]
    for i in range(k):
        ax.plot(steps, params[:, i, knob], color=REPLICA, lw=widths[i], alpha=alphas[i], solid_capstyle="round",
                label=f"rank {i}", zorder=2 + i)
    identical = bool(run.replicas_identical().all())
    spread = float(np.ptp(params[-1, :, knob]))
    if identical:
        verdict = f"all {k} replicas bit-identical\nat every one of the {len(steps)} states"
    else:
        verdict = f"replicas drifted apart:\nspread of {name} after step {len(steps) - 1}: {spread:.3g}"
    ax.text(0.97, 0.05, verdict, transform=ax.transAxes, ha="right", va="bottom", fontsize=10, color=INK,
            bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor=PANEL_EDGE))
    mode = "with all-reduce" if run.meta["all_reduce"] else "without all-reduce"
    ax.set_title(f"{name} of every replica, {mode} ({run.meta['optimizer']})", fontsize=11)
    ax.set_xlabel("step", fontsize=10)
    ax.set_ylabel(f"{name} (knob {knob} of θ)", fontsize=10)
    ax.legend(loc="best", fontsize=9, frameon=True, framealpha=0.85, edgecolor="none")
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    source_note(ax, f"run: {run.describe()}")
    return ax


# ColorBrewer Set2's teal, orange, blue and yellow: its pink (the next one) is the blue's twin under protanopia
CHUNK_COLOURS = ("#66c2a5", "#fc8d62", "#8da0cb", "#ffd92f", "#a6d854", "#e5c494")


def _chunk_colours(k: int):
    return [CHUNK_COLOURS[c % len(CHUNK_COLOURS)] for c in range(k)]


def plot_ring_schedule(schedule: dict, *, ax=None):
    """Draw a recorded ring schedule as a grid: rows are the 2(k−1) steps, columns the ranks. Returns the Axes.

    Cell (step, rank) is coloured by the chunk that rank sends to its right-hand
    neighbour. The last row gives the bytes each rank sent, against 2(k−1)/k·M.
    """
    ax = get_ax(ax)
    if schedule.impl != "ring":
        raise ValueError(f"schedule must come from record_schedule(..., impl='ring'); got impl={schedule.impl!r}.")
    k, M = schedule.k, schedule.message_bytes
    colours = _chunk_colours(k)
    phases = schedule.phases
    rows = [(phase, s) for phase in phases for s in range(k - 1)]
    row_of = {key: r for r, key in enumerate(rows)}
    for e in schedule.entries:
        r = row_of[(e["phase"], e["step"])]
        ax.add_patch(Rectangle((e["src"] - 0.46, r - 0.42), 0.92, 0.84, facecolor=colours[e["chunk"]], edgecolor="white"))
        ax.text(e["src"], r, f"chunk {e['chunk']} → rank {e['dst']}", ha="center", va="center", fontsize=9, color=INK)
    n_rows = len(rows)
    if k > 1:
        ax.axhline(k - 1.5, color=INK, lw=1.2)
    ideal = 2 * (k - 1) / k * M
    for rank, sent in enumerate(schedule.bytes_sent):
        ax.text(rank, n_rows + 0.1, f"sent {int(sent)} B", ha="center", va="center", fontsize=10, fontweight="bold", color=INK)
    ax.set_xlim(-0.55, k - 0.45)
    ax.set_ylim(n_rows + 0.6, -0.6)
    ax.set_xticks(range(k), [f"rank {r}\n→ rank {(r + 1) % k}" for r in range(k)], fontsize=9)
    ax.xaxis.tick_top()
    verb = {"reduce-scatter": "receiver adds", "all-gather": "receiver keeps"}
    labels = [f"{p} {s + 1}" + (f"\n({verb[p]})" if s == 0 else "") for p, s in rows]
    ax.set_yticks(list(range(n_rows)) + [n_rows + 0.1], labels + ["bytes"], fontsize=9)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    handles = [Patch(facecolor=colours[c], label=f"chunk {c} ({n} elements)") for c, n in enumerate(schedule.chunk_sizes)]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=min(k, 2), fontsize=9, frameon=False)
    check = "equals dist.all_reduce bit for bit" if schedule.equal else f"differs from dist.all_reduce by {schedule.max_abs_diff:.2g}"
    ax.set_title(
        f"Ring all-reduce, k={k}, M={M} B: 2(k−1) = {2 * (k - 1)} steps, in each every rank passes one chunk\n"
        f"to its right; each rank sends 2(k−1)/k·M {'=' if ideal == int(ideal) else '≈'} {ideal:.3g} B;\n"
        f"the result {check}",
        fontsize=11,
    )
    source_note(ax, f"schedule: {schedule.describe()}")
    return ax


def plot_parameter_server(schedule: dict, *, ax=None):
    """Draw a recorded parameter-server schedule as a star through rank 0, bytes on every link. Returns the Axes."""
    ax = get_ax(ax)
    if schedule.impl != "parameter_server":
        raise ValueError(
            f"schedule must come from record_schedule(..., impl='parameter_server'); got impl={schedule.impl!r}."
        )
    k, M = schedule.k, schedule.message_bytes
    angles = np.pi / 2 - 2 * np.pi * np.arange(1, k) / max(k - 1, 1)
    where = {0: np.zeros(2)}
    for rank, angle in zip(range(1, k), angles):
        where[rank] = np.array([1.3 * np.cos(angle), np.sin(angle)])
    for e in schedule.entries:
        src, dst = where[e["src"]], where[e["dst"]]
        along = dst - src
        normal = np.array([-along[1], along[0]]) / np.linalg.norm(along)
        shift = 0.07 * normal  # push and pull travel side by side
        push = e["phase"] == "push"
        ax.add_patch(FancyArrowPatch(src + shift, dst + shift, arrowstyle="-|>", mutation_scale=14, shrinkA=26, shrinkB=26,
                                     color=CORAL if push else RED, lw=1.8, linestyle="-" if push else "--"))
        spot = src + 0.5 * along + 3.2 * shift
        ax.text(*spot, f"{e['bytes']} B", ha="center", va="center", fontsize=9, color=CORAL if push else RED)
    sent, received = schedule.bytes_sent, schedule.bytes_received
    for rank, xy in where.items():
        text = f"rank {rank}\nsends {int(sent[rank])} B"
        if rank == 0:
            text = f"rank 0 (server)\nreceives {int(received[0])} B\nsends {int(sent[0])} B"
        ax.text(*xy, text, ha="center", va="center", fontsize=9, color=INK, zorder=5,
                bbox=dict(boxstyle="round,pad=0.4", facecolor=PANEL, edgecolor=INK, lw=1.3))
    ax.set_xlim(-1.8, 1.8)
    ax.set_ylim(-1.35, 1.35)
    ax.set_axis_off()
    handles = [Line2D([], [], color=CORAL, lw=1.8, label="push: g_i to rank 0"),
               Line2D([], [], color=RED, lw=1.8, ls="--", label="pull: the sum back out")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=9, frameon=False)
    check = "equals dist.all_reduce bit for bit" if schedule.equal else f"differs from dist.all_reduce by {schedule.max_abs_diff:.2g}"
    ax.set_title(
        f"Parameter server, k={k}, M={M} B: all through rank 0,\n"
        f"which receives and sends (k−1)·M = {(k - 1) * M} B\n"
        f"(a ring: {2 * (k - 1) / k * M:.3g} B per rank); the result {check}",
        fontsize=11,
    )
    source_note(ax, f"schedule: {schedule.describe()}")
    return ax
