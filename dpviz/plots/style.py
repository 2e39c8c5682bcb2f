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
REPLICA = "#3a7bd5"   # the model copy every device holds (one colour: they are identical)
INK = "#222222"       # text and outlines

LINK_COLOURS = {"fast": MINT, "medium": BUTTER, "slow": CORAL}
IDEAL_STYLE = dict(color=SLATE, linestyle="--", linewidth=1.5)
MODELED_NOTE = "modeled"     # how a curve from the cost model is labelled
MEASURED_NOTE = "measured"   # how a timing from a run is labelled


def get_ax(ax=None):
    """The Axes to draw on: the one given, or the current one (a new figure if none)."""
    return ax if ax is not None else plt.gca()


SOURCE_NOTE_OFFSET = (0, -40)  # points from the Axes' lower left corner to a source note


def source_note(ax, text: str) -> None:
    """Write which run (or which model) a figure came from, small, under the Axes."""
    ax.annotate(text, xy=(0, 0), xycoords="axes fraction", xytext=SOURCE_NOTE_OFFSET, textcoords="offset points",
                fontsize=8, color=SLATE, ha="left", va="top")


def stack_notes(axes, gap: float = 12) -> None:
    """Side-by-side panels: each panel's source note one line lower than the last, so long notes never overlap.

    A note that repeats the one before it word for word is dropped.
    """
    seen = []
    for ax in axes:
        for note in [t for t in ax.texts if getattr(t, "xyann", None) == SOURCE_NOTE_OFFSET]:
            if note.get_text() in seen:
                note.remove()
                continue
            seen.append(note.get_text())
            note.xyann = (SOURCE_NOTE_OFFSET[0], SOURCE_NOTE_OFFSET[1] - gap * (len(seen) - 1))
