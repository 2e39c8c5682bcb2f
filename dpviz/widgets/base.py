"""The one pattern every interactive figure follows, and the helpers the widgets share.

A widget is two pieces:

* a *figure class* (``EtaFigure``, ``CostsFigure``, ``DevicesFigure`` ...) that builds its
  matplotlib figure once and whose ``update(**values)`` only sets new data on the artists it
  holds (``set_data``, ``set_UVC``, ``set_width``, ``set_text``, ``set_visible`` ...);
* a :class:`SliderFigure`, the thin control layer: ipywidgets controls whose values go to
  ``update`` on every move, then one redraw, whose PNG goes into an ``ipywidgets.Image``.
  Errors in a callback are shown in a visible ``Output`` under the figure, never swallowed.

The figure class marks the artists its ``update`` changes with ``artist.set_animated(True)``
when it builds them. The rest of the figure (axes, ticks, legends: most of the drawing time) is
drawn once and kept as a background, and each move redraws only the animated artists on top of
it (matplotlib's blitting). When the non-animated part depends on a control (k boxes out of a
pool of eight, say), ``update`` returns a *layout key* naming it; a SliderFigure keeps one
background per key, drawn once, ahead of time for the layouts the figure lists in its optional
``layouts()``. ``update`` returns None when the background is unchanged. An optional ``caption``
attribute (HTML) becomes the status line above the figure after each move.

Displayed, it is the live widget in JupyterLab and Voilà; the saved notebook also carries a PNG
of the first state, so the page reads well on GitHub.
"""

from __future__ import annotations

import base64
import contextlib
import struct
import time
import traceback
import zlib

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.path import Path

DPI = 80  # pixels per inch of the PNG sent to the browser; small enough to redraw fast


class SliderFigure:
    """Controls driving a figure object's ``update(**values)``; one redraw per change.

    ``view`` is a figure class instance: it has ``fig`` and ``update(**values)`` (see the module
    docstring). ``controls`` maps each keyword of ``update`` to an ipywidgets control.
    ``linked(name, values)`` (optional) returns the other controls' values that a change of
    control ``name`` implies, such as a link preset's α and β; they move with it, in one redraw.
    """

    def __init__(self, view, controls: dict[str, widgets.Widget], *, title: str = "", linked=None):
        self.view = view
        self.fig = fig = view.fig
        fig.set_dpi(DPI)
        if not isinstance(fig.canvas, FigureCanvasAgg):
            FigureCanvasAgg(fig)
        fig.set_layout_engine("none")  # a layout engine would lay the figure out again on every draw
        self._animated = sorted(
            (a for a in fig.findobj() if a.get_animated() and a is not fig), key=lambda a: (_depth(a), a.get_zorder())
        )
        self._backgrounds: dict = {}  # layout key -> the figure without its animated artists, drawn once
        self._background = None
        self._held = False
        self.controls = controls
        self._linked = linked
        self._names = {id(control): name for name, control in controls.items()}
        self._update = lambda values: view.update(**values)
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
        for values in getattr(view, "layouts", lambda: ())():  # every background a move may need, drawn now
            self._use_background(self._update({**self.values, **values}))
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
        """Inside this block control changes only collect; one update and redraw follow at its end."""
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
        """Draw the figure (only its animated artists over the background unless ``full``) and return PNG bytes."""
        canvas = self.fig.canvas
        if full or self._background is None:
            canvas.draw()  # Agg leaves animated artists out of a full draw: that is the background
            self._background = canvas.copy_from_bbox(self.fig.bbox)
        else:
            canvas.restore_region(self._background)
        for artist in self._animated:
            self.fig.draw_artist(artist)
        return png_bytes(np.asarray(canvas.buffer_rgba()))

    def _use_background(self, key) -> None:
        """Switch to the background of layout ``key`` (None: keep the current one), drawing it the first time."""
        if key is None:
            return
        if key not in self._backgrounds:
            self.fig.canvas.draw()
            self._backgrounds[key] = self.fig.canvas.copy_from_bbox(self.fig.bbox)
        self._background = self._backgrounds[key]

    def _on_change(self, change) -> None:
        with self.hold():  # a change and the moves it implies: one update, one redraw
            if self._linked is not None:
                for name, value in self._linked(self._names[id(change["owner"])], self.values).items():
                    self.controls[name].value = value

    def _apply(self) -> None:
        start = time.perf_counter()
        try:
            self._use_background(self._update(self.values))
            caption = getattr(self.view, "caption", None)
            if caption is not None:
                self.status.value = caption
            self.image.value = self.png(full=not self._animated)
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


def png_bytes(rgba: np.ndarray) -> bytes:
    """A PNG file of an (height, width, 4) uint8 image, written for speed: no row filters, zlib level 1.

    A figure's flat colours compress well without PNG's per-row filters, and skipping them makes the
    file several times faster to write than Pillow's (which tries every filter on every row).
    """
    height, width, _ = rgba.shape
    rows = np.empty((height, 1 + 4 * width), np.uint8)
    rows[:, 0] = 0  # filter type "none" for every row
    rows[:, 1:] = rgba.reshape(height, -1)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8 bits per channel, RGBA, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
            + chunk(b"IEND", b""))


def find(ax, gid: str):
    """The one artist of ``ax`` whose gid is ``gid``."""
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    if len(found) != 1:
        raise LookupError(f"expected one artist with gid {gid!r} on the Axes, found {len(found)}")
    return found[0]


def animate(*artists) -> None:
    """Mark ``artists`` as the ones an update changes: redrawn on every move over the cached background."""
    for artist in artists:
        artist.set_animated(True)


def keep_off_legend(ax, *artists) -> None:
    """Clip ``artists`` to ``ax`` less its legend's box, as if the legend were drawn over them.

    For artists redrawn on a cached background (which holds the legend): they are drawn
    last, so without this a path that runs into the legend would cover its words. The
    hole is in figure fractions, which do not change when the figure's dpi does.
    """
    renderer = ax.figure.canvas.get_renderer()
    to_fraction = ax.figure.transFigure.inverted()
    (x0, y0), (x1, y1) = to_fraction.transform(ax.bbox.get_points())
    (a0, b0), (a1, b1) = to_fraction.transform(ax.get_legend().get_window_extent(renderer).get_points())
    # the outer box counter-clockwise, the legend's box clockwise: a hole under either fill rule
    verts = [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0), (a0, b0), (a0, b1), (a1, b1), (a1, b0), (a0, b0)]
    codes = [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY] * 2
    for artist in artists:
        artist.set_clip_path(Path(verts, codes), ax.figure.transFigure)


def _depth(artist) -> int:
    """Artists in later-added Axes draw later; within one Axes, zorder decides."""
    axes = artist.axes
    return artist.figure.axes.index(axes) if axes is not None and axes in artist.figure.axes else len(artist.figure.axes)
