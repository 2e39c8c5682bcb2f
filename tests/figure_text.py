"""How big a figure's text is on the screen it is read on.

A chapter's figure is a PNG drawn at the inline backend's 100 dpi (a slider's at its own dpi) and cropped to its
drawn area (``bbox_inches="tight"``). A page shows it at its natural width, or narrower when the column is narrower:
JupyterLab's output area in a 1366×768 window, the book's column in a 1280×720 window. Text of ``s`` points is then
``s · dpi / 72 · scale`` pixels tall on screen, where ``scale = min(1, column / natural width)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

INLINE_DPI = 100        # matplotlib-inline's figure dpi: how every chapter's static figure is saved
BOOK_COLUMN_PX = 688    # the book's output column at 1280×720 (sphinx-book-theme, measured in Chromium)
LAB_OUTPUT_PX = 934     # JupyterLab 4.6's output area at 1366×768, file browser open (250 px), as installed: measured in
                        # Chromium as a print() output's .jp-OutputArea-output width; a widget's image gets 930 of it
MIN_TEXT_PX = 10        # the smallest text a back row can read


@dataclass(frozen=True)
class Smallest:
    px: float          # on-screen size of the smallest text, in pixels
    text: str          # what that text says
    natural_px: int    # the PNG's width before the page scales it
    shown_px: float    # the width the page shows it at


def shown_texts(fig):
    """Every visible, non-empty Text of ``fig`` that lies at least partly inside the drawn figure."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    drawn = fig.get_tightbbox(renderer)
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        box = text.get_window_extent(renderer)
        if box.width <= 0 or box.height <= 0:
            continue
        yield text, box, drawn


def smallest_text(fig, column_px: float, *, dpi: float = INLINE_DPI) -> Smallest:
    """The smallest text of ``fig`` as a page ``column_px`` wide shows it, the figure saved at ``dpi``, cropped tight."""
    fig.set_dpi(dpi)
    found = None
    for text, _box, drawn in shown_texts(fig):
        natural = drawn.width * dpi  # the tight bbox is in inches
        scale = min(1.0, column_px / natural)
        px = text.get_fontsize() * dpi / 72 * scale
        if found is None or px < found.px:
            found = Smallest(px, text.get_text(), round(natural), natural * scale)
    if found is None:
        raise AssertionError("the figure has no text")
    return found
