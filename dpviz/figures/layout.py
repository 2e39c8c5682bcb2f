"""What every published figure shares: a bare matplotlib Figure, and the footer naming the runs that made it."""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.plots.style import SLATE


def new_figure(figsize, ncols: int = 1, **kwargs):
    """A Figure of ``figsize`` inches with one row of ``ncols`` Axes (no pyplot, no global state)."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(1, ncols, **kwargs)


def footer(fig: Figure, lines, *, y: float = 0.005, wrap: bool = False) -> None:
    """The figure's provenance, under it in small slate type: a line of words, or a list of lines."""
    text = lines if isinstance(lines, str) else "\n".join(lines)
    fig.text(0.01, y, text, fontsize=9, color=SLATE, ha="left", va="bottom", wrap=wrap)


def measured_lines(records, word: str = "Measured") -> list[str]:
    """One footer line per record, from the record itself: ``Measured: <record.describe()>``."""
    return [f"{word}: {record.describe()}" for record in records]
