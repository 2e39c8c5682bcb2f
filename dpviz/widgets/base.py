"""The one pattern every interactive figure follows.

A :class:`SliderFigure` owns a matplotlib figure built once (off screen, with the
Agg canvas, so it never depends on the notebook's backend) and a set of
ipywidgets controls. When a control moves, ``update(values)`` sets new data on
the existing artists (``set_data``, ``set_UVC``, ``set_width`` ...), then the
figure is drawn once and its PNG goes into an ``ipywidgets.Image``. Errors in a
callback are shown in a visible ``Output`` under the figure, never swallowed.

A widget marks the artists its ``update`` changes with ``artist.set_animated(True)``
when it builds the figure. The rest of the figure (axes, ticks, legends: most
of the drawing time) is then drawn once and kept as a background, and each move
redraws only the animated artists on top of it (matplotlib's blitting). An
``update`` that changed something unmarked, such as axis limits, returns
``"full"`` to have the whole figure drawn again.

Displayed, it is the live widget in JupyterLab and Voilà; the saved notebook
also carries a PNG of the first state, so the page reads well on GitHub.
"""

from __future__ import annotations

import base64
import contextlib
import io
import time
import traceback

import ipywidgets as widgets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

DPI = 80  # pixels per inch of the PNG sent to the browser; small enough to redraw fast


class SliderFigure:
    """A figure plus controls; ``update(values)`` must only change artists already on the figure."""

    def __init__(self, fig: Figure, controls: dict[str, widgets.Widget], update, *, title: str = ""):
        self.fig = fig
        fig.set_dpi(DPI)
        FigureCanvasAgg(fig)
        fig.set_layout_engine("none")  # a layout engine would lay the figure out again on every draw
        self._animated = sorted(
            (a for a in fig.findobj() if a.get_animated() and a is not fig), key=lambda a: (_depth(a), a.get_zorder())
        )
        self._background = None
        self._held = False
        self.controls = controls
        self._update = update
        self.timings: list[float] = []  # seconds per change: callback plus redraw
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.errors = widgets.Output()
        self.status = widgets.HTML(title)
        for control in controls.values():
            control.observe(self._on_change, names="value")
            if hasattr(control, "style") and hasattr(control.style, "description_width"):
                control.style.description_width = "initial"  # long labels such as "b (per group)" stay whole
        box = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([self.status, box, self.image, self.errors])
        self._apply()

    @property
    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def set(self, **values) -> None:
        """Move controls from code (tests and benchmarks); the figure is redrawn once, as after a click."""
        with self.hold():
            for name, value in values.items():
                self.controls[name].value = value

    @contextlib.contextmanager
    def hold(self):
        """Inside this block control changes only collect; one update and redraw follow at its end.

        For callbacks that move several controls at once, such as a preset setting α and β.
        """
        if self._held:
            yield
            return
        self._held = True
        try:
            yield
        finally:
            self._held = False
        self._apply()

    def png(self, *, full: bool = True) -> bytes:
        """Draw the figure (only its animated artists unless ``full``) and return it as PNG bytes."""
        canvas = self.fig.canvas
        if full or self._background is None:
            canvas.draw()  # Agg leaves animated artists out of a full draw: that is the background
            self._background = canvas.copy_from_bbox(self.fig.bbox)
        else:
            canvas.restore_region(self._background)
        for artist in self._animated:
            self.fig.draw_artist(artist)
        width, height = canvas.get_width_height()
        image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        buf = io.BytesIO()
        image.save(buf, format="png", compress_level=1)  # fast to write; the page is local
        return buf.getvalue()

    def _on_change(self, change) -> None:
        if not self._held:
            self._apply()

    def _apply(self) -> None:
        start = time.perf_counter()
        try:
            full = self._update(self.values) == "full" or not self._animated
            self.image.value = self.png(full=full)
        except Exception:
            self.errors.append_stdout(traceback.format_exc())
            raise
        self.timings.append(time.perf_counter() - start)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        # the widget's own text form spells out every child, PNG bytes included; say what it is instead
        bundle["text/plain"] = f"SliderFigure({', '.join(self.controls)}): {self.status.value or 'interactive figure'}"
        bundle["image/png"] = base64.b64encode(self.image.value).decode()  # the static view for pages that cannot run widgets
        return bundle


def _depth(artist) -> int:
    """Artists in later-added Axes draw later; within one Axes, zorder decides."""
    axes = artist.axes
    return artist.figure.axes.index(axes) if axes is not None and axes in artist.figure.axes else len(artist.figure.axes)
