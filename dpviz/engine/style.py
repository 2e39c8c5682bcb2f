"""The notes' palette and the small drawing conventions every figure shares.

Colours carry meaning across the chapters: lavender is compute, coral is
communication, grey arrows are single examples, red is an average. Link speeds
run mint (fast), butter (medium), coral (slow); the ideal line is dashed slate.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

LAVENDER = "#b4a7e5"  # compute
CORAL = "#f0806c"     # communication; the slow link
MINT = "#6fcfa3"      # the fast link
BUTTER = "#f3cf5a"    # the medium link
SLATE = "#556476"     # the ideal line, drawn dashed
GREY = "#9a9a9a"      # per-example gradients
RED = "#d62728"       # averages and the current θ
REPLICA = "#3a7bd5"   # the model copy every device holds (one colour: they are identical); also a plain blue series
INK = "#222222"       # text and outlines

# Shades of those, where a figure needs two of one meaning.
DARK_LAVENDER = "#7c6bc4"  # compute too, told from LAVENDER: the backward pass, rank 1, a second compute curve
DELAY = "#7d6cc9"          # a deeper lavender: compute time, but time the rank was told to waste (the waiting chapter)
MINT_SHADES = (MINT, "#c9ecda", "#1b9e77", "#1b7f5b")  # one worker after another: mint, pale, teal, forest
WORKER_HATCHES = ("", "..", "\\\\", "||")  # and a hatch each, so that stacked workers part without their colours
PALE_RED = "#fff4f2"       # the fill of a box outlined in RED (the all-reduce's hub)
PALE_CORAL = "#fbe3de"     # the fill of a box outlined in CORAL (the all-reduce in the summary)
PALE_REPLICA = "#dfe9f9"   # the fill of a box outlined in REPLICA (a model copy)

# Greys for what sits behind the data.
ZERO_LINE = "#d8d8d8"      # the lines through 0 of a gradient plane or an error axis
GRID_LINE = "#e6e6e6"      # grid lines
BAND_GREY = "#e4e4e4"      # a tolerance band drawn behind residuals
PANEL = "#f6f6f6"          # the fill of a rank's box, a data slice or a label's box
PANEL_EDGE = "#cccccc"     # thin outlines: a note's box, a rank's data panel and its gradient axes
SLOT_EDGE = "#d0d0d0"      # the outline of a circle a gradient arrow is drawn in
SLICE_EDGE = "#bbbbbb"     # the outline of a rank's data slice
SHARED = "#f4f4f4"         # a matrix every rank holds whole
WAIT = "#d9d9d9"           # time a rank spends waiting for the others
IDLE = "#ececec"           # a pipeline stage's band, showing where it waits
REST = "#dddddd"           # the optimizer step and bookkeeping
ERROR_BARS = "#c9d1db"     # bars of a relative error

# Series that differ by colour alone (ColorBrewer's Dark2 where it has one).
TEAL = "#1b9e77"
ORANGE = "#d95f02"
AMBER = "#e08a00"
PURPLE = "#7570b3"
MAGENTA = "#e7298a"
PLUM = "#8e44ad"
FOREST = "#1b7f5b"
BRICK = "#c0392b"

# Hatches, so that no kind of time is told apart by colour alone (a colour-blind reader, a grey projector):
# compute stays solid, communication is crossed by horizontal lines (a wire), time spent waiting is dotted.
# A modeled bar adds the diagonal "///" to whichever of these it is.
COMM_HATCH = "-"
WAIT_HATCH = ".."
SLEEP_HATCH = "x"    # time a rank was told to waste (the waiting chapter)
BACKWARD_HATCH = "\\"  # the backward pass of a pipeline, told from the solid forward pass

LINK_COLOURS = {"fast": MINT, "medium": BUTTER, "slow": CORAL}
IDEAL_STYLE = dict(color=SLATE, linestyle="--", linewidth=1.5)
MODELED_NOTE = "modeled"     # how a curve from the cost model is labelled
MEASURED_NOTE = "measured"   # how a timing from a run is labelled


def get_ax(ax=None):
    """The Axes to draw on: the one given, or the current one (a new figure if none)."""
    return ax if ax is not None else plt.gca()


SOURCE_NOTE_OFFSET = (0, -40)  # points from the Axes' lower left corner to a source note


def open_frame(ax) -> None:
    """Take away the top and right spines: the notes' figures frame a plot on its two axes only."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def source_note(ax, text: str) -> None:
    """Write which run (or which model) a figure came from, small, under the Axes."""
    ax.annotate(text, xy=(0, 0), xycoords="axes fraction", xytext=SOURCE_NOTE_OFFSET, textcoords="offset points",
                fontsize=8, color=SLATE, ha="left", va="top")


def is_source_note(text) -> bool:
    """Whether ``text`` is a note :func:`source_note` wrote, wherever it was moved: hung from its Axes' lower left corner."""
    return (getattr(text, "xycoords", None) == "axes fraction" and tuple(text.xy) == (0, 0)
            and getattr(text, "anncoords", None) == "offset points" and text.xyann[0] == 0 and text.xyann[1] < 0)
