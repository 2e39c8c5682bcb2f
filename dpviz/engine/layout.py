"""What every published figure shares: a bare matplotlib Figure that carries a one-line caption naming its runs.

The picture holds what a reader needs to read it (titles, axes, legends); which runs made it (k, b,
backend, host, date) is its caption, printed under it as one plain line::

    fig = figure_step5_replicas(run, alone)
    fig.caption            # "Measured: k=4, b=8, line model, ... 2026-11-30."
    fig.alt                # "Line chart: ... ranks' parameters, identical at all 8 steps ..."

It also carries ``alt``: what the picture shows and the numbers that matter, in a sentence or two, for a reader
who cannot see it. Each ``figure_*`` function writes it from the data it drew (``caption(fig, parts, alt=...)``);
a figure given none gets :func:`alt_text`'s, read off its Axes (titles, axis labels and ranges, legend entries).

A chapter cell whose last expression is such a figure shows the PNG (with ``alt`` beside it: an ``<img alt>`` in
the output's text/html, and in the image's output metadata, where the book finds it), then the caption as a text
line (:meth:`CaptionedFigure._ipython_display_`); ``./run`` writes each caption into the manifest.
"""

from __future__ import annotations

import base64
import html

from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure
from matplotlib.text import Text

from dpviz.engine.style import is_source_note

WIDTH = 6.8  # inches: at the inline backend's 100 dpi a figure is 680 px, so the book's 688 px column shows it 1:1


class CaptionedFigure(Figure):
    """A Figure with a ``caption``: one line, a plain sentence saying which runs made it and what is modeled."""

    caption: str = ""
    alt: str = ""  # what the picture shows, in words, for a screen reader; alt_text(self) where none was given

    def _ipython_display_(self):
        """In a notebook: the PNG the inline backend would show (100 dpi, cropped tight), with its alt text, then the
        caption. The PNG is sent twice: as image/png (the book and nbval read it) and inside an ``<img alt>`` as
        text/html, which JupyterLab and Voilà prefer (their image renderer has no alt). It is drawn by Agg, as the
        sliders are."""
        from IPython.core.pylabtools import print_figure
        from IPython.display import display

        from matplotlib.backends.backend_agg import FigureCanvasAgg

        if type(self.canvas) is FigureCanvasBase:  # not yet given a canvas of its own
            FigureCanvasAgg(self)
        alt = self.alt or alt_text(self)
        png = base64.b64encode(print_figure(self, "png", bbox_inches="tight")).decode("ascii")
        tag = f'<img src="data:image/png;base64,{png}" alt="{html.escape(alt, quote=True)}"/>'
        display({"image/png": png, "text/html": tag, "text/plain": alt},
                metadata={"image/png": {"alt": alt}}, raw=True)
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


def sentences(parts) -> str:
    """``parts`` (words, or a list of them) as sentences: each part one line, ending in a full stop."""
    parts = [parts] if isinstance(parts, str) else list(parts)
    return " ".join(sentence(part) for part in parts if sentence(part))


def caption(fig: CaptionedFigure, parts, *, alt=None) -> CaptionedFigure:
    """Give ``fig`` its caption: ``parts`` (words, or a list of them) as one line (see :func:`sentence`); and its alt
    text: ``alt`` (words, or a list of them, the same way) or, without one, :func:`alt_text`'s."""
    fig.caption = sentence(parts)
    fig.alt = sentences(alt) if alt else alt_text(fig)
    return fig


def alt_text(fig: Figure) -> str:
    """Alt text read off ``fig``'s Axes: the suptitle, then per panel its title, what is drawn (lines, bars, points,
    arrows), its axes with their labels and ranges, and its legend's entries. A default for a figure no one
    described; a ``figure_*`` function says more, from its records."""
    words = []
    if fig.get_suptitle().strip():
        words.append(_flat(fig.get_suptitle()))
    panels = [ax for ax in fig.axes if _drawn(ax)]
    for i, ax in enumerate(panels):
        title = title_of(fig, ax)
        lead = (f"Panel {i + 1}" if len(panels) > 1 else "The chart") + (f", {title}" if title else "")
        what = f"{lead}: {_kinds(ax)}"
        axes = [f"{name} {_flat(label)} ({_span(lim)})" for name, label, lim, on in (
            ("x:", ax.get_xlabel(), ax.get_xlim(), ax.xaxis.get_visible()),
            ("y:", ax.get_ylabel(), ax.get_ylim(), ax.yaxis.get_visible())) if label and on and ax.axison]
        if axes:
            what += "; " + ", ".join(axes)
        legend = ax.get_legend()
        entries = [_flat(t.get_text()) for t in legend.get_texts()] if legend is not None else []
        if entries:
            what += "; legend: " + ", ".join(e for e in entries if e)
        words.append(what)
    return sentence(words) or "A figure."


def title_of(fig: Figure, ax=None) -> str:
    """The words of ``ax``'s title (left, centre, right), or of the figure's suptitle without ``ax``, as one line."""
    if ax is None:
        return _flat(fig.get_suptitle())
    return _flat(" ".join(text for text in (ax.get_title(loc=loc) for loc in TITLE_PLACES) if text))


TEX_WORDS = {"\\nabla": "∇", "\\Sigma": "Σ", "\\sum": "Σ", "\\eta": "η", "\\theta": "θ", "\\,": " ", "_{big}": " big",
             "\\cdot": "·", "\\alpha": "α", "\\beta": "β"}


def _flat(text: str) -> str:
    """``text`` as plain words on one line: mathtext's $ and its commands a screen reader would spell out replaced."""
    text = str(text).replace("$", "")
    for tex, word in TEX_WORDS.items():
        text = text.replace(tex, word)
    return " ".join(text.split()).rstrip(".;:, ")


def _drawn(ax) -> bool:
    return bool(ax.lines or ax.patches or ax.collections or ax.images or ax.texts or ax.get_legend())


def _kinds(ax) -> str:
    """What an Axes holds, in words: ``3 lines, 12 bars, points``."""
    from matplotlib.collections import PathCollection, PolyCollection
    from matplotlib.patches import FancyArrow, FancyArrowPatch, Rectangle
    from matplotlib.quiver import Quiver

    lines = [line for line in ax.lines if len(line.get_xdata()) > 1 and not (line.get_label() or "").startswith("_")]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    arrows = [p for p in ax.patches if isinstance(p, (FancyArrow, FancyArrowPatch))]
    arrows += [p for p in ax.texts if getattr(p, "arrow_patch", None) is not None]
    counted = [(len(lines) or len([line for line in ax.lines if len(line.get_xdata()) > 1]), "line"),
               (len(bars), "bar"), (sum(len(c.U) for c in ax.collections if isinstance(c, Quiver)) + len(arrows), "arrow"),
               (sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection)), "point"),
               (sum(1 for c in ax.collections if isinstance(c, PolyCollection)), "shaded band")]
    return ", ".join(f"{n} {word}{'s' if n > 1 else ''}" for n, word in counted if n) or "a diagram with text"


def _span(lim) -> str:
    low, high = sorted(lim)
    return f"{low:.3g} to {high:.3g}"


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


TITLE_PLACES = ("left", "center", "right")  # an Axes' three titles, in reading order


def _texts_saying(artists, words) -> list:
    """The Text artists among ``artists`` that hold one of ``words`` (non-empty): how a title's artist is found
    through public calls (``get_title``, ``get_suptitle``, ``get_children``) rather than by its private name."""
    wanted = {w for w in words if w}
    return [a for a in artists if isinstance(a, Text) and a.get_text() in wanted]


def wrap_titles(fig: Figure) -> Figure:
    """Draw the suptitle and the titles of full-width Axes as paragraphs wrapped at the figure's edge.

    A claim's sentence keeps its words (``get_text`` is unchanged but for its line breaks, now spaces); matplotlib
    breaks the lines where the figure ends, and ``bbox_inches="tight"`` crops to the wrapped lines. A panel beside
    another keeps its title's own line breaks: wrapped at the figure's edge it would run into its neighbour's.
    """
    texts = _texts_saying(fig.texts, [fig.get_suptitle()])
    texts += [title for ax in fig.axes if ax.get_position().width > 0.6
              for title in _texts_saying(ax.get_children(), [ax.get_title(loc=loc) for loc in TITLE_PLACES])]
    for text in texts:
        if "\n" in text.get_text():
            text.set_text(text.get_text().replace("\n", " "))
        text.set_wrap(True)
    return fig


def legend_words(ax) -> list[str]:
    """The words of ``ax``'s legend entries."""
    legend = ax.get_legend()
    return [" ".join(t.get_text().split()) for t in legend.get_texts()] if legend is not None else [""]


def measured_notes(notes: list[str]) -> list[str]:
    """The plots' notes ("run: ...", "schedule: ...") as a caption's parts, each saying it was measured."""
    return ["Measured: " + note.split(": ", 1)[-1] for note in notes]
