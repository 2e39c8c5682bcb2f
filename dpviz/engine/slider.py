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
it: matplotlib's blitting, with its public calls alone (``canvas.copy_from_bbox``, ``restore_region``,
``Figure.draw_artist``), as in matplotlib's blitting tutorial. When the non-animated part depends on a
control (k boxes out of a pool of eight, say), ``update`` returns a *layout key* naming it; a SliderFigure
keeps one background per key, drawn once, ahead of time for the layouts the figure lists in its optional
``layouts()``. ``update`` returns None when the background is unchanged. An optional ``status_line``
attribute (HTML) becomes the status line above the figure after each move. Artists that never change but are drawn
above ones that do (a measured point over a moving curve) are listed by the figure's optional ``fixed_artists()``:
they are drawn once per layout into a transparent layer, which each move blends in at their place in the drawing
order (:class:`~dpviz.engine.canvas.FixedLayer`). Texts are most of what a move draws, and most of them look as
they did the move before: each animated text is drawn once per look (its string, place, font ...) and blended in
from then on (:class:`~dpviz.engine.canvas.TextLayers`). The PNG is Pillow's. A widget whose picture depends on its
controls alone (``repeat_frames=True``) sends the PNG a setting gave before when a slider comes back to it.

A move that arrives while the callback is still drawing the one before does not queue: the widgets' front end
(JupyterLab's, Voilà's, Notebook's) holds a control's newer values while the kernel is busy with its last one, and
sends only the newest when it is idle again, so a busy callback draws the value the slider ends on, not every value
it passed (benchmarks/bench_browser_sliders.py checks it in Chromium).

What a room sees is fixed here too. The figure is shown at its own size (never scaled up, which blurs it),
no wider than JupyterLab's output area on a 1366×768 laptop; every text in it is at least 10 px there
(:data:`MIN_POINTS`); and the panel, controls included, fits that screen's height: controls in rows above a wide
figure, in a column beside a narrow one. A slider whose value is in seconds, bytes or bytes per second reads
out in µs, ms, kB, MB or GB/s (``readouts``), while ``update`` still receives SI values.

Displayed, it is the live widget in JupyterLab and Voilà; the saved notebook also carries a PNG
of the first state, so the page reads well on GitHub.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import re
import time
import traceback
from collections import OrderedDict

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.lines import TICKDOWN
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import offset_copy

from dpviz.engine.canvas import FixedLayer, TextLayers, png_bytes
from dpviz.engine.layout import alt_text, sentences
from dpviz.engine.style import INK

DPI = 80  # pixels per inch of the PNG sent to the browser; small enough to redraw fast
# What a room can read, and what a laptop's screen holds. JupyterLab 4 at 1366×768, file browser open, gives an
# output 934 px wide (measured in Chromium; tests/figure_text.py's LAB_OUTPUT_PX), less the image's own 2 px margins.
# A figure no wider than WIDTH_IN is shown 1:1, so text of MIN_POINTS is 10 px on screen; a panel (status, controls,
# figure) must fit in 650 px of height.
WIDTH_IN = 11.5  # inches: 920 px at DPI
MIN_POINTS = 9  # the smallest font size in a slider figure: 9 pt at 80 dpi is 10 px
COLUMNS = 3  # controls per row
CONTROL_PX = 300  # the width of one control: a slider with its label and readout
FRAMES = 96  # PNGs a SliderFigure with ``repeat_frames`` keeps for settings seen before (about 70 kB each)


class SliderFigure:
    """Controls driving a figure object's ``update(**values)``; one redraw per change.

    ``view`` is a figure class instance: it has ``fig`` and ``update(**values)`` (see the module
    docstring). ``controls`` maps each keyword of ``update`` to an ipywidgets control.
    ``linked(name, values)`` (optional) returns the other controls' values that a change of
    control ``name`` implies, such as a link preset's α and β; they move with it, in one redraw.
    ``readouts`` (optional) maps a control's name to a function that writes its value in words
    (:func:`seconds_readout`, :func:`bytes_readout`, :func:`rate_readout`): shown beside it instead of
    its own readout. ``columns``: controls per row above a wide figure. ``repeat_frames``: the picture
    is a function of the controls' values (and of the view's optional ``frame_state()``, for what else it
    depends on), so a setting seen before sends the PNG it gave then, after ``update``, without drawing it again.
    """

    def __init__(self, view, controls: dict[str, widgets.Widget], *, title: str = "", linked=None,
                 readouts: dict | None = None, columns: int = COLUMNS, repeat_frames: bool = False):
        self.view = view
        self.fig = fig = view.fig
        fig.set_dpi(DPI)
        FigureCanvasAgg(fig)  # the frames are Agg's whatever the notebook's backend: PNGs made here, sent as bytes
        fig.set_layout_engine("none")  # a layout engine would lay the figure out again on every draw
        at_least(fig, MIN_POINTS)
        wrap_to_figure(fig)
        fixed_artists = list(getattr(view, "fixed_artists", lambda: ())())
        animate(*fixed_artists)
        fixed = {id(a) for a in fixed_artists}
        self._animated = sorted(
            (a for a in fig.findobj() if a.get_animated() and a is not fig), key=lambda a: (_depth(a), a.get_zorder())
        )
        # What a frame draws over its background, in drawing order: an artist, or a run of fixed artists (a list),
        # which are drawn once per layout into a layer and blended from it
        self._plan: list = []
        for artist in self._animated:
            if id(artist) not in fixed:
                self._plan.append(artist)
            elif self._plan and isinstance(self._plan[-1], list):
                self._plan[-1].append(artist)
            else:
                self._plan.append([artist])
        self._layers: dict = {}  # (layout key, place in the plan) -> FixedLayer
        self._texts = TextLayers(fig)  # each animated text's pixels, for as long as it looks the same
        self._backgrounds: dict = {}  # layout key -> the figure without its animated artists, drawn once
        self._background = None
        self._key = None  # the layout key of the background in use
        self._held = False
        self._frames = OrderedDict() if repeat_frames else None  # (values, view's state) -> PNG, the latest last
        self.controls = controls
        self._linked = linked
        self._names = {id(control): name for name, control in controls.items()}
        self._update = lambda values: view.update(**values)
        self.timings: list[float] = []  # seconds per change: callback plus redraw
        # A flex column stretches its children to its width: the image would be scaled up and blurred. It keeps
        # its own width (the PNG's), and shrinks only where the page is narrower.
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto",
                                                                       align_self="flex-start"))
        self.errors = widgets.Output()
        self._words = title  # the status line's words, for the output's text form
        self.status = widgets.HTML(_status_html(title))
        # The picture in words for a screen reader, said again after each move: a PNG in a widget has no alt
        self.spoken = widgets.HTML()
        # A slider whose value is in SI units (seconds, bytes) shows it in words instead ("2.7 µs", "100 MB").
        self._readouts = {name: (words, widgets.Label(layout=widgets.Layout(width="6.5em", margin="0 0 0 4px")))
                          for name, words in (readouts or {}).items()}
        # A narrow figure has its controls in a column beside it; a wide one has them in rows of ``columns`` above it.
        beside = fig.get_figwidth() * DPI + CONTROL_PX <= WIDTH_IN * DPI
        cells = []  # (the control's box, how many of a row's columns it takes)
        for name, control in controls.items():
            control.observe(self._on_change, names="value")
            if hasattr(control, "style") and hasattr(control.style, "description_width"):
                control.style.description_width = "initial"  # long labels such as "b (per group)" stay whole
            span = 1
            if isinstance(control, widgets.ToggleButtons):
                control.style.button_width = "auto"  # each button as wide as its label; a long row takes two cells
                span = 1 if beside else min(columns, 1 + _toggle_px(control) // CONTROL_PX)
            else:  # a slider or menu fills its cell, less its readout
                control.layout.width, control.layout.min_width, control.layout.flex = "auto", "0", "1 1 auto"
            if name in self._readouts:
                control.readout = False
                cell = widgets.HBox([control, self._readouts[name][1]])
            else:
                cell = widgets.Box([control])
            cell.layout.min_width = "0"
            cells.append((cell, span))
        if beside:
            for cell, _ in cells:
                cell.layout.width = f"{CONTROL_PX}px"
            box = widgets.VBox([cell for cell, _ in cells], layout=widgets.Layout(margin="0 0 0 8px"))
            self.widget = widgets.VBox([self.status, widgets.HBox([self.image, box]), self.spoken, self.errors])
        else:
            box = widgets.VBox(_rows(cells, columns))
            self.widget = widgets.VBox([self.status, box, self.image, self.spoken, self.errors])
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
        renderer = canvas.get_renderer()
        frame = np.asarray(canvas.buffer_rgba())  # the canvas's own pixels: blending into it draws on the canvas
        for i, step in enumerate(self._plan):
            if isinstance(step, list):
                if (self._key, i) not in self._layers:
                    self._layers[(self._key, i)] = FixedLayer(step, self.fig)
                self._layers[(self._key, i)].blend(frame)
            elif not step.get_visible():  # a hidden Quiver still lays its arrows out before it finds it draws nothing
                continue
            elif not (isinstance(step, Text) and self._texts.draw(step, frame, renderer)):
                self.fig.draw_artist(step)
        return png_bytes(frame, opaque=self._texts.opaque)

    def _use_background(self, key) -> None:
        """Switch to the background of layout ``key`` (None: keep the current one), drawing it the first time."""
        if key is None:
            return
        if key not in self._backgrounds:
            self.fig.canvas.draw()
            self._backgrounds[key] = self.fig.canvas.copy_from_bbox(self.fig.bbox)
        self._background = self._backgrounds[key]
        self._key = key

    def _on_change(self, change) -> None:
        with self.hold():  # a change and the moves it implies: one update, one redraw
            if self._linked is not None:
                for name, value in self._linked(self._names[id(change["owner"])], self.values).items():
                    self.controls[name].value = value

    def _apply(self) -> None:
        start = time.perf_counter()
        try:
            self._use_background(self._update(self.values))
            line = getattr(self.view, "status_line", None)
            if line is not None:
                self._words = line
                self.status.value = _status_html(line)
            values = self.values
            for name, (words, label) in self._readouts.items():
                label.value = words(values[name])
            self.image.value = self._frame(values)
            self.spoken.value = _spoken_html(self.said(values))
        except Exception:
            self.errors.append_stdout(traceback.format_exc())
            raise
        self.timings.append(time.perf_counter() - start)

    def said(self, values: dict | None = None) -> str:
        """What the picture shows now, in words: the controls' settings and the status line (each move's numbers),
        or the picture's own description where the panel has no status line. Read out after each move."""
        values = self.values if values is None else values
        settings = ", ".join(f"{name} = {self._readouts[name][0](v) if name in self._readouts else v}"
                             for name, v in values.items())
        words = " ".join(re.sub(r"<[^>]+>", " ", self._words or "").split()) or alt_text(self.fig)
        return f"The picture now, at {settings}: {words}"

    def _frame(self, values: dict) -> bytes:
        """The PNG of the figure as ``update`` left it: drawn, or the one this setting gave before."""
        if self._frames is None:
            return self.png(full=not self._animated)
        key = (tuple(values.items()), getattr(self.view, "frame_state", lambda: None)())
        frame = self._frames.get(key)
        if frame is None:
            frame = self._frames[key] = self.png(full=not self._animated)
            if len(self._frames) > FRAMES:
                self._frames.popitem(last=False)
        else:
            self._frames.move_to_end(key)
        return frame

    def _repr_mimebundle_(self, **kwargs):
        bundle = widget_bundle(self.widget)
        # the widget's own text form spells out every child, PNG bytes included; say what it is instead
        bundle["text/plain"] = f"SliderFigure({', '.join(self.controls)}): {self._words or 'interactive figure'}"
        # the static view, for pages that show no live widget (a saved chapter before Run All, the book, GitHub)
        bundle["image/png"] = base64.b64encode(still_picture(self.image.value)).decode()
        # the book shows that PNG with this alt (myst-nb reads it from the output's metadata)
        alt = sentences([f"Interactive figure with controls {', '.join(self.controls)}, as saved", self._words,
                         alt_text(self.fig)]) if self._words else alt_text(self.fig)
        return bundle, {"image/png": {"alt": re.sub(r"<[^>]+>", "", alt)}}


STILL_NOTE = "A still picture of the panel as saved: run the chapter in JupyterLab or Voilà to move its controls."


def still_picture(png: bytes) -> bytes:
    """``png`` with a band above it that says it is a still picture and how to make it move: what a saved slider
    panel shows where no widget runs, so that nobody drags at a picture."""
    from matplotlib import font_manager
    from PIL import Image, ImageDraw, ImageFont

    frame = Image.open(io.BytesIO(png)).convert("RGB")
    font = ImageFont.truetype(font_manager.findfont("DejaVu Sans"), 14)
    band = 26
    out = Image.new("RGB", (frame.width, frame.height + band), "#eef2f7")
    out.paste(frame, (0, band))
    ImageDraw.Draw(out).text((8, band // 2), STILL_NOTE, fill=INK, font=font, anchor="lm")
    return png_bytes(np.asarray(out.convert("RGBA")), opaque=True)  # the frames' own PNG writer


def widget_bundle(widget: widgets.Widget) -> dict:
    """The display data that shows ``widget`` live: a view of its model, as ipywidgets 7 and 8 both write it.

    ipywidgets 8 has it as the widget's ``_repr_mimebundle_``; ipywidgets 7 (Colab's) only displays it from
    ``_ipython_display_``. The mime type and its version 2.0 are the widget message protocol's, the same in both.
    """
    return {"text/plain": repr(widget)[:110],
            "application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0,
                                                         "model_id": widget.model_id}}


def at_least(fig, points: float) -> None:
    """Raise every text of ``fig`` smaller than ``points`` to ``points``: tick labels (those to come as well),
    legends, notes. Plot functions size their text for a figure at 100 dpi; a slider figure is drawn at 80."""
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for which in ("major", "minor"):
                ticks = axis.get_major_ticks() if which == "major" else axis.get_minor_ticks()
                if ticks and ticks[0].label1.get_fontsize() < points:
                    ax.tick_params(axis=name, which=which, labelsize=points)
    for text in fig.findobj(Text):
        if text.get_fontsize() < points:
            text.set_fontsize(points)


def _rows(cells: list, columns: int) -> list:
    """Rows of ``columns`` equal columns (flex boxes: a page ignores a grid cell's span), cells placed in order."""
    rows, row, used = [], [], 0
    for cell, span in cells:
        if used + span > columns:
            rows.append((row, used))
            row, used = [], 0
        cell.layout.flex = f"{span} 1 0px"
        row.append(cell)
        used += span
    rows.append((row, used))
    boxes = []
    for row, used in rows:
        if used < columns:  # an empty cell keeps a short last row's columns as wide as the others
            row.append(widgets.Box(layout=widgets.Layout(flex=f"{columns - used} 1 0px")))
        boxes.append(widgets.HBox(row, layout=widgets.Layout(grid_gap="0 16px", width="100%")))
    return boxes


def _toggle_px(control) -> int:
    """About how wide a row of toggle buttons is, label included (13 px text, 7 px a character; 24 px of padding)."""
    labels = [str(option[0] if isinstance(option, tuple) else option) for option in control.options]
    return 7 * len(control.description) + sum(7 * len(label) + 24 for label in labels) + 16


def wrap_to_figure(fig) -> None:
    """Wrap at the figure's edge each text that runs past it as drawn now (a long source note, at 9 pt, does)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = {t for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if legend is not None
               for t in legend.get_texts()}
    for text in fig.findobj(Text):
        if text in legends or not text.get_visible() or not text.get_text():
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < fig.bbox.x0 - 0.5 or box.x1 > fig.bbox.x1 + 0.5:
            text.set_wrap(True)


def _status_html(words: str) -> str:
    """The status line's HTML: lines at the height of the text, not at a widget row's 28 px each."""
    return f'<div style="line-height: 1.3; margin: 2px 0 4px 0">{words}</div>' if words else ""


# Kept off the screen but read by screen readers (the usual "visually hidden" rules); role=status announces changes
_SPOKEN_STYLE = ("position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; overflow: hidden; "
                 "clip: rect(0 0 0 0); white-space: nowrap; border: 0")


def _spoken_html(words: str) -> str:
    return f'<div class="dpviz-spoken" role="status" aria-live="polite" style="{_SPOKEN_STYLE}">{html.escape(words)}</div>'


def seconds_readout(seconds: float) -> str:
    """A time as a person reads it: "2.7 µs", "12.5 ms", "1.5 s"."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale * 0.9995 or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"


def bytes_readout(n: float, per: str = "") -> str:
    """A size (decimal prefixes, as links and datasheets quote them): "282 kB", "100 MB"; ``per="/s"`` for a rate."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0)):
        if n >= scale * 0.9995 or unit == "B":
            return f"{n / scale:.3g} {unit}{per}"


def rate_readout(bytes_per_second: float) -> str:
    """A bandwidth: "12.5 GB/s"."""
    return bytes_readout(bytes_per_second, "/s")


def find(ax, gid: str):
    """The one artist of ``ax`` whose gid is ``gid``."""
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    if len(found) != 1:
        raise LookupError(f"expected one artist with gid {gid!r} on the Axes, found {len(found)}")
    return found[0]


def log_slider(description: str, value: float, exponents: tuple) -> widgets.FloatLogSlider:
    """A slider over 10**exponents[0] .. 10**exponents[1] in twentieths of a decade, set on release."""
    return widgets.FloatLogSlider(value=value, base=10, min=exponents[0], max=exponents[1], step=0.05,
                                  description=description, readout_format=".3g", continuous_update=False,
                                  style={"description_width": "initial"})


def clip_to_range(value: float, exponents: tuple) -> float:
    """``value`` kept inside a log slider's range (a fitted β can be infinite, a fitted α zero)."""
    return float(np.clip(value, 10.0 ** exponents[0], 10.0 ** exponents[1]))


def animate(*artists) -> None:
    """Mark ``artists`` as the ones an update changes: redrawn on every move over the cached background."""
    for artist in artists:
        artist.set_animated(True)


class TimeTicks:
    """A time axis drawn by hand, as tick marks and labels that an update moves: for an x axis whose end changes
    with the controls. Resetting a matplotlib Axis on each move would mean a new background; these are animated
    artists redrawn over the one already there.

    ``count`` labels are made once (at least as many as ``nbins`` ticks can need); ``set(end, unit)`` places the
    ticks :class:`~matplotlib.ticker.MaxNLocator` chooses between 0 and ``end`` and writes ``unit`` after the last.
    """

    def __init__(self, ax, *, fontsize: float, nbins: int, count: int, below_points: float, mark_size: float,
                 labelled: bool = True):
        self.ax = ax
        self.locator = MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10])
        ax.tick_params(axis="x", bottom=False, labelbottom=False)
        at_axis = ax.get_xaxis_transform()  # x in data, y in axes fractions
        self.marks, = ax.plot([], [], linestyle="none", marker=TICKDOWN, markersize=mark_size, markeredgewidth=0.8,
                              color=INK, transform=at_axis, clip_on=False)
        below = offset_copy(at_axis, fig=ax.figure, y=-below_points, units="points")
        # every text drawn costs about a millisecond a move: a panel that shares another's scale can go unlabelled
        self.labels = [ax.text(0, 0, "", transform=below, ha="center", va="top", fontsize=fontsize, color=INK,
                               clip_on=False) for _ in range(count if labelled else 0)]
        animate(*self.artists())

    def artists(self) -> list:
        return [self.marks, *self.labels]

    def set(self, end: float, unit: str = "") -> None:
        self.ax.set_xlim(0, end)
        values = [v for v in self.locator.tick_values(0, end) if -1e-9 <= v <= end * (1 + 1e-9)]
        self.marks.set_data(values, np.zeros(len(values)))
        for i, label in enumerate(self.labels):
            label.set_visible(i < len(values))
            if i < len(values):
                label.set_x(values[i])
                label.set_text(f"{values[i]:g}" + (f" {unit}" if unit and i == len(values) - 1 else ""))


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
