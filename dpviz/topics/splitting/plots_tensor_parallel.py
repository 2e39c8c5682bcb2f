"""Tensor parallelism: one linear layer's matrices cut into blocks, coloured by the rank that holds them.

    plot_tensor_split(split_record, "column")     # X · [W_1 W_2] = [Y_1 Y_2], then an all-gather
    plot_tensor_split(split_record, "row")        # [X_1 X_2] · [W_1; W_2] = X_1 W_1 + X_2 W_2, then an all-reduce
    plot_exchange_bytes(curves, measured)         # bytes per rank per step against the batch size

Every matrix is drawn to scale, one square per value, from the shapes in a
:class:`~dpviz.topics.splitting.records_tensor_parallel.TensorSplit`; the bytes and the agreement with the unsplit
layer printed below come from the same record.
"""

from __future__ import annotations

from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter

from dpviz.engine.style import (
    BUTTER, CORAL, DARK_LAVENDER, INK, LAVENDER, MEASURED_NOTE, MINT, MODELED_NOTE, SHARED, SLATE, get_ax, source_note,
    open_frame,
)

RANK_COLOURS = (LAVENDER, DARK_LAVENDER, MINT, BUTTER)  # rank 0, 1, 2, 3 (more ranks cycle)
GAP = 1.6  # data units between matrices


def _sub(i: int) -> str:
    return str(i).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _blocks(name: str, k: int, sep: str = " ") -> str:
    """``W₀ W₁`` for k = 2; the first and last with an ellipsis for larger k. ``name="XW"`` gives ``XW₀ XW₁``."""
    parts = [f"{name}{_sub(i)}" for i in range(k)]
    return sep.join(parts) if k <= 3 else f"{parts[0]}{sep}…{sep}{parts[-1]}"


def _rank_colour(rank: int) -> str:
    return RANK_COLOURS[rank % len(RANK_COLOURS)]


def _matrix(ax, x0, rows, cols, *, label, holder=None, axis=1, k=1):
    """Draw a rows × cols grid left-aligned at x0, centred on y = 0; block i along ``axis`` coloured by its ``holder(i)``."""
    y0 = -rows / 2
    for i in range(k if holder else 1):
        if holder:
            w, h = (cols / k, rows) if axis == 1 else (cols, rows / k)
            bx, by = (x0 + i * w, y0) if axis == 1 else (x0, y0 + rows - (i + 1) * h)
            face = _rank_colour(holder(i))
            ax.text(bx + w / 2, by + h / 2, f"rank {holder(i)}", ha="center", va="center", fontsize=10, color=INK,
                    zorder=4, bbox=dict(facecolor="white", edgecolor="none", alpha=0.75, pad=1.5))
        else:
            w, h, bx, by, face = cols, rows, x0, y0, SHARED
        ax.add_patch(Rectangle((bx, by), w, h, facecolor=face, edgecolor=INK, linewidth=1.6, zorder=2))
    for c in range(1, cols):  # one square per value
        ax.plot([x0 + c, x0 + c], [y0, y0 + rows], color=INK, linewidth=0.3, alpha=0.35, zorder=3)
    for r in range(1, rows):
        ax.plot([x0, x0 + cols], [y0 + r, y0 + r], color=INK, linewidth=0.3, alpha=0.35, zorder=3)
    ax.text(x0 + cols / 2, y0 + rows + 0.5, label, ha="center", va="bottom", fontsize=12, color=INK)
    return x0 + cols


def plot_tensor_split(record, split: str = "column", *, ax=None, fontsize: float = 11):
    """Draw X · W = Y for one split of a recorded layer, blocks coloured by rank, and what the exchange cost.

    Returns the Axes.
    """
    ax = get_ax(ax)
    if split not in ("column", "row"):
        raise ValueError(f"split must be one of 'column', 'row'; got {split!r}.")
    i = 0 if split == "column" else 1
    m = record.meta
    k, batch, d_in, d_out = m["k"], m["batch"], m["d_in"], m["d_out"]
    holders = {int(b): r for r, b in enumerate(record.block[i])}  # block -> the rank that holds it
    holder = holders.__getitem__

    x = 0.0
    if split == "column":
        x = _matrix(ax, x, batch, d_in, label="X, on every rank")
        ax.text(x + GAP / 2, 0, "·", ha="center", va="center", fontsize=22)
        x = _matrix(ax, x + GAP, d_in, d_out, label=f"W = [{_blocks('W', k)}]", holder=holder, axis=1, k=k)
        ax.text(x + GAP / 2, 0, "=", ha="center", va="center", fontsize=18)
        x = _matrix(ax, x + GAP, batch, d_out, label=f"Y = [{_blocks('XW', k)}]", holder=holder, axis=1, k=k)
        title = f"Column split over k={k}: each rank computes its block of Y,\nan all-gather joins the blocks"
    else:
        x = _matrix(ax, x, batch, d_in, label=f"X = [{_blocks('X', k)}]", holder=holder, axis=1, k=k)
        ax.text(x + GAP / 2, 0, "·", ha="center", va="center", fontsize=22)
        x = _matrix(ax, x + GAP, d_in, d_out, label=f"W: row blocks {_blocks('W', k, sep=', ')}", holder=holder, axis=0, k=k)
        ax.text(x + GAP / 2, 0, "=", ha="center", va="center", fontsize=18)
        x = _matrix(ax, x + GAP, batch, d_out, label="Y = Σᵢ XᵢWᵢ")
        ax.text(x - d_out / 2, 0, f"{k} full-size\npartial sums", ha="center", va="center", fontsize=fontsize - 1,
                color=INK, zorder=4, bbox=dict(facecolor="white", edgecolor="none", alpha=0.8))
        title = f"Row split over k={k}: each rank computes a partial sum of all of Y,\nan all-reduce adds the partial sums"

    forward, backward = m["exchanges"][split]["forward"], m["exchanges"][split]["backward"]
    sent = record.bytes_sent[i]
    errs = record.rel_errs()
    worst = max(errs[(split, name)] for name in ("y", "dx", "dw"))
    lines = [
        f"forward: {forward} of Y ({batch}×{d_out} values): {_per_rank(sent[0])} sent per rank",
        f"backward: {backward} of dX ({batch}×{d_in} values): {_per_rank(sent[1])} sent per rank",
        f"every rank's Y, dX and dW equal the unsplit layer's to {worst:.0e} (max relative error)",
    ]
    top = max(batch, d_in) / 2
    ax.text(0, -top - 1.2, "\n".join(lines), ha="left", va="top", fontsize=fontsize, color=INK, linespacing=1.5)
    ax.set_xlim(-0.5, x + 0.5)
    ax.set_ylim(-top - 6.2, top + 2.2)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(title, fontsize=fontsize + 1, loc="left")
    return ax


def byte_words(n: float) -> str:
    """A byte count for an axis or a label: 96 B, 4 KiB, 1.5 MiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def _per_rank(values) -> str:
    values = sorted(set(int(v) for v in values))
    return f"{values[0]} B" if len(values) == 1 else " / ".join(f"{v} B" for v in values)


def plot_exchange_bytes(curves: dict, measured: dict | None = None, *, ax=None, fontsize: float = 11,
                        title: str | None = None, note: str | None = None):
    """Bytes each rank sends per training step for one layer, against the batch size. Returns the Axes.

    ``curves`` maps a label to ``(batch, bytes)`` arrays (modeled); ``measured`` maps a label to a
    ``(batch, bytes)`` point counted on a run. Labels starting with "data parallelism" are drawn
    in coral, tensor-parallel ones in lavender shades.
    """
    ax = get_ax(ax)
    styles = [dict(color=DARK_LAVENDER, linestyle="-"), dict(color=LAVENDER, linestyle="-."), dict(color=SLATE, linestyle=":")]
    tp = 0
    colours = {}
    for label, (batch, values) in curves.items():
        if label.startswith("data parallelism"):
            style = dict(color=CORAL, linestyle="--")
        else:
            style, tp = styles[tp % len(styles)], tp + 1
        colours[label] = style["color"]
        ax.plot(batch, values, linewidth=2.2, label=f"{label} ({MODELED_NOTE})", **style)
    for i, (label, (batch, value)) in enumerate((measured or {}).items()):
        colour = colours.get(label, INK)
        marker = "osD^"[i % 4]  # one shape per measured series, as well as its line's colour
        ax.plot([batch], [value], marker, ms=10, markerfacecolor=colour, markeredgecolor=INK, linestyle="none",
                label=f"{label} ({MEASURED_NOTE}: counted by the ring)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: byte_words(v)))
    ax.set_xlabel("B, examples in the batch", fontsize=fontsize)
    ax.set_ylabel("bytes each rank sends per step", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(alpha=0.3)
    open_frame(ax)
    ax.set_title(title or "Tensor parallelism moves activations, every layer, every pass;\n"
                          "data parallelism moves the gradient, once per step", fontsize=fontsize + 1, loc="left")
    ax.legend(fontsize=fontsize - 2, frameon=False, loc="upper left")
    if note:
        source_note(ax, note)
    return ax
