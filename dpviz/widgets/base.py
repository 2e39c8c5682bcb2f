"""The one pattern every interactive figure follows.

A :class:`SliderFigure` owns a matplotlib figure built once (off screen, with the
Agg canvas, so it never depends on the notebook's backend) and a set of
ipywidgets controls. When a control moves, ``update(values)`` sets new data on
the existing artists (``set_data``, ``set_UVC``, ``set_width`` ...), then the
figure is drawn once and its PNG goes into an ``ipywidgets.Image``. Errors in a
callback are shown in a visible ``Output`` under the figure, never swallowed.

Displayed, it is the live widget in JupyterLab and Voilà; the saved notebook
also carries a PNG of the first state, so the page reads well on GitHub.
"""

from __future__ import annotations

import base64
import io
import time
import traceback

import ipywidgets as widgets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 80  # pixels per inch of the PNG sent to the browser; small enough to redraw fast


class SliderFigure:
    """A figure plus controls; ``update(values)`` must only change artists already on the figure."""

    def __init__(self, fig: Figure, controls: dict[str, widgets.Widget], update, *, title: str = ""):
        self.fig = fig
        FigureCanvasAgg(fig)
        self.controls = controls
        self._update = update
        self.timings: list[float] = []  # seconds per change: callback plus redraw
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.errors = widgets.Output()
        self.status = widgets.HTML(title)
        for control in controls.values():
            control.observe(self._on_change, names="value")
        box = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([self.status, box, self.image, self.errors])
        self._apply()

    @property
    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def set(self, **values) -> None:
        """Move controls from code (tests and benchmarks); each move runs the callback as a click would."""
        for name, value in values.items():
            self.controls[name].value = value

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=DPI)
        return buf.getvalue()

    def _on_change(self, change) -> None:
        self._apply()

    def _apply(self) -> None:
        start = time.perf_counter()
        try:
            self._update(self.values)
            self.image.value = self.png()
        except Exception:
            self.errors.append_stdout(traceback.format_exc())
            raise
        self.timings.append(time.perf_counter() - start)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["image/png"] = base64.b64encode(self.image.value).decode()  # the static view for pages that cannot run widgets
        return bundle
