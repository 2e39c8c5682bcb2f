"""What every published figure shares: a bare matplotlib Figure that carries a one-line caption naming its runs.

The picture holds what a reader needs to read it (titles, axes, legends); which runs made it (k, b,
backend, host, date) is its caption, printed under it as one plain line::

    fig = figure_step5_replicas(run, alone)
    fig.caption            # "Measured: k=4, b=8, line model, ... 2026-11-30."

A chapter cell whose last expression is such a figure shows the PNG, then the caption as a text line
(:meth:`CaptionedFigure._ipython_display_`); ``./run`` writes each caption into the manifest.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from dpviz.plots.style import is_source_note

WIDTH = 6.8  # inches: at the inline backend's 100 dpi a figure is 680 px, so the book's 688 px column shows it 1:1


class CaptionedFigure(Figure):
    """A Figure with a ``caption``: one line, a plain sentence saying which runs made it and what is modeled."""

    caption: str = ""

    def _ipython_display_(self):
        """In a notebook: the PNG the inline backend would show (100 dpi, cropped tight), then the caption."""
        from IPython.core.pylabtools import print_figure
        from IPython.display import Image, display

        display(Image(print_figure(self, "png", bbox_inches="tight"), format="png"))
        if self.caption:
            display({"text/plain": self.caption}, raw=True)


def figure(figsize) -> CaptionedFigure:
    """A CaptionedFigure of ``figsize`` inches (no pyplot, no global state)."""
    return CaptionedFigure(figsize=figsize)


def new_figure(figsize, ncols: int = 1, *, nrows: int = 1, **kwargs):
    """A CaptionedFigure of ``figsize`` inches with ``nrows`` × ``ncols`` Axes, as ``Figure.subplots`` returns them."""
    fig = figure(figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def sentence(parts) -> str:
    """``parts`` (words, or a list of them) as one line: every line of every part joined by "; ", one full stop."""
    parts = [parts] if isinstance(parts, str) else list(parts)
    lines = [" ".join(line.split()).rstrip(".;, ") for part in parts for line in str(part).splitlines()]
    text = "; ".join(line for line in lines if line)
    return text + "." if text else ""


def caption(fig: CaptionedFigure, parts) -> CaptionedFigure:
    """Give ``fig`` its caption: ``parts`` (words, or a list of them) as one line (see :func:`sentence`)."""
    fig.caption = sentence(parts)
    return fig


def lift_notes(fig: Figure) -> list[str]:
    """Take the source notes the ``plot_*`` functions wrote under their Axes out of the picture; their words, in order.

    A note that repeats one before it word for word is dropped.
    """
    words = []
    for ax in fig.axes:
        for text in [t for t in ax.texts if is_source_note(t)]:
            text.remove()
            if text.get_text().strip() and text.get_text() not in words:
                words.append(text.get_text())
    return words


def stacked(fig: Figure, heights, gaps, *, left: float = 0.8, right: float = 0.15, top: float = 0.1):
    """One column of Axes ``heights`` inches tall, each followed by a gap of ``gaps`` inches (its tick labels, its
    x label, a legend put there by :func:`legend_below`, the next title); the figure gets their height.

    Nothing a layout engine guesses decides where a legend goes.
    """
    rows = [size for pair in zip(heights, gaps) for size in pair]
    height = top + sum(rows)
    fig.set_figheight(height)
    grid = fig.add_gridspec(len(rows), 1, height_ratios=rows, hspace=0, left=left / fig.get_figwidth(),
                            right=1 - right / fig.get_figwidth(), top=1 - top / height, bottom=0)
    return [fig.add_subplot(grid[2 * i]) for i in range(len(heights))]


def legend_below(ax, *, gap: float = 0.5, into=None, **kwargs):
    """Move ``ax``'s legend ``gap`` inches under the Axes' bottom edge (below its tick labels and x label),
    left-aligned with it, frameless, at least 8 pt; ``into`` an empty Axes under it (turned off) puts it ``gap``
    inches under that one's top edge. ``kwargs`` go to ``legend`` (``ncol``, say)."""
    legend = ax.get_legend()
    handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
    legend.remove()
    host = into if into is not None else ax
    if into is not None:
        into.set_axis_off()
    inches = host.get_position().height * host.figure.get_figheight()
    style = dict(loc="upper left", frameon=False, borderaxespad=0, handlelength=1.6, columnspacing=1.0,
                 fontsize=max(8, legend.get_texts()[0].get_fontsize()))
    anchor = 1 - gap / inches if into is not None else -gap / inches
    return host.legend(handles, labels, bbox_to_anchor=(0, anchor), **{**style, **kwargs})


def measured_lines(records, word: str = "Measured") -> list[str]:
    """One caption part per record, from the record itself: ``Measured: <record.describe()>``."""
    return [f"{word}: {record.describe()}" for record in records]


def wrap_titles(fig: Figure) -> Figure:
    """Draw the suptitle and the titles of full-width Axes as paragraphs wrapped at the figure's edge.

    A claim's sentence keeps its words (``get_text`` is unchanged but for its line breaks, now spaces); matplotlib
    breaks the lines where the figure ends, and ``bbox_inches="tight"`` crops to the wrapped lines. A panel beside
    another keeps its title's own line breaks: wrapped at the figure's edge it would run into its neighbour's.
    """
    texts = [fig._suptitle] if fig._suptitle is not None else []
    texts += [title for ax in fig.axes if ax.get_position().width > 0.6
              for title in (ax.title, ax._left_title, ax._right_title)]
    for text in texts:
        if "\n" in text.get_text():
            text.set_text(text.get_text().replace("\n", " "))
        text.set_wrap(True)
    return fig
