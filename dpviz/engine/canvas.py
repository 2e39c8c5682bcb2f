"""What a slider frame is made of besides Agg's blit: layers blended onto it, and the PNG it goes out as.

A move restores the figure's background and draws its animated artists over it (:mod:`dpviz.engine.slider`). Two
kinds of them are blended from layers instead of drawn, with matplotlib's and Pillow's public calls alone:

* :class:`TextLayers`: each animated text, drawn once per look (its string, place, font ...) onto a transparent
  canvas, and blended from there while it looks the same. Texts are most of what a move draws.
* :class:`FixedLayer`: artists that never change but lie above some that do, drawn once per background.

:func:`png_bytes` writes the frame as Pillow's PNG.
"""

from __future__ import annotations

import io
from collections import OrderedDict

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.colors import to_rgba
from matplotlib.text import Annotation
from PIL import Image


def png_bytes(rgba: np.ndarray, *, opaque: bool | None = None) -> bytes:
    """A PNG file of an (height, width, 4) uint8 image, written by Pillow at its fastest deflate level.

    An image whose pixels are all opaque (``opaque``, or found so; a slider figure's are) is written as RGB: the same
    picture, a quarter less to filter and compress. Pillow picks each row's PNG filter, which is most of the few
    milliseconds this takes.
    """
    height, width = rgba.shape[:2]
    if opaque or (opaque is None and rgba[..., 3].min() == 255):
        image = Image.frombytes("RGB", (width, height), np.ascontiguousarray(rgba), "raw", "RGBX")
    else:
        image = Image.fromarray(np.ascontiguousarray(rgba), "RGBA")
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()


TEXT_LAYER_BYTES = 16 << 20  # the texts' pixels a SliderFigure keeps (10-30 kB a label), least recently drawn dropped


class TextLayers:
    """The pixels of a figure's animated texts, each drawn once per look and blended onto later frames from here.

    Texts are most of what a move draws (a short label takes Agg a few milliseconds: FreeType lays the string out
    and renders every glyph again on every draw), yet a move changes a few of them; the others, and those that come
    back to a look they had (a title per menu choice, a label per slider position), look as they did. A text's
    *look* is what decides its pixels, read from its public getters: its string, where its anchor falls on the
    canvas, its font, colour, alpha, antialiasing, alignment, rotation, clip box and the box drawn behind it. A look
    seen before is blended from its layer; a new one is drawn alone onto a transparent canvas, and its pixels are
    kept. Blending is Agg's over the figure's opaque pixels, to two levels in 255. Line spacing, multi-alignment and
    font features are read when a text is first drawn and taken as fixed, as the widgets build them. Texts this does
    not cover (an arrow, path effects, TeX, a clip path, an annotation that hides itself outside its Axes in other
    than data coordinates) are drawn by Agg.
    """

    def __init__(self, figure):
        self._figure = figure
        face = figure.patch
        self.opaque = face.get_visible() and face.get_facecolor()[3] == 1  # so is every frame: blending assumes it
        self._layers: OrderedDict = OrderedDict()  # look -> (top, left, 255 - alpha, colour * alpha + 127) or None
        self._bytes = 0
        self._scratch = None  # a transparent canvas of the figure's size, to draw a new look on

    def draw(self, text, frame: np.ndarray, renderer) -> bool:
        """Draw ``text`` onto ``frame`` (the pixels of the canvas whose renderer is ``renderer``) from its layer,
        made now if its look is new; False (nothing drawn) for a text this does not cover."""
        if not self.opaque:
            return False
        look = _look(text, renderer)
        if look is None:
            return False
        layer = self._layers.get(look, False)
        if layer is False:
            layer = self._layers[look] = self._render(text)
            self._bytes += 0 if layer is None else layer[2].nbytes + layer[3].nbytes
            while self._bytes > TEXT_LAYER_BYTES and len(self._layers) > 1:
                old = self._layers.popitem(last=False)[1]
                self._bytes -= 0 if old is None else old[2].nbytes + old[3].nbytes
        else:
            self._layers.move_to_end(look)
        if layer is not None:
            top, left, clear, over = layer
            under = frame[top:top + clear.shape[0], left:left + clear.shape[1], :3]
            under[...] = (under * clear + over) // 255
        return True

    def _render(self, text):
        """``text`` drawn alone onto a transparent canvas: its pixels' top row, left column, 255 - their alpha, and
        their colour times alpha (plus a half for rounding), as uint16; None if it covers no pixel."""
        width, height = self._figure.canvas.get_width_height(physical=True)
        if self._scratch is None:
            self._scratch = RendererAgg(width, height, self._figure.dpi)
        self._scratch.clear()
        text.draw(self._scratch)
        layer = np.asarray(self._scratch.buffer_rgba())
        top, left = 0, 0
        if not text.get_wrap() and text.get_bbox_patch() is None:  # where to look: its box, and glyphs reaching past it
            pad = int(np.ceil(text.get_fontsize() * self._figure.dpi / 72)) + 2
            x0, y0, x1, y1 = text.get_window_extent(self._scratch).extents
            top, left = max(int(height - y1) - pad, 0), max(int(x0) - pad, 0)
            layer = layer[top:max(int(height - y0) + pad, 0), left:max(int(x1) + pad, 0)]
        rows = np.flatnonzero(layer[..., 3].any(axis=1))
        if not rows.size:
            return None
        band = layer[rows[0]:rows[-1] + 1]
        cols = np.flatnonzero(band[..., 3].any(axis=0))
        crop = band[:, cols[0]:cols[-1] + 1].astype(np.uint16)
        alpha = crop[..., 3:]
        return top + int(rows[0]), left + int(cols[0]), 255 - alpha, crop[..., :3] * alpha + 127


def _look(text, renderer):
    """What decides ``text``'s pixels, read from its public getters; None for a text :class:`TextLayers` leaves to
    Agg."""
    if (not text.get_text() or text.get_path_effects() or text.get_usetex() or text.get_clip_path() is not None
            or text.get_agg_filter() is not None or text.get_rasterized()
            or getattr(text, "arrow_patch", None) is not None):
        return None
    box = text.get_bbox_patch()  # a box drawn behind the text: its size follows the text, its style is read here
    if box is not None:
        style = box.get_boxstyle()
        box = (type(style).__name__, tuple(sorted(vars(style).items())), box.get_facecolor(), box.get_edgecolor(),
               box.get_linewidth(), box.get_linestyle(), box.get_hatch(), box.get_fill(), box.get_alpha(),
               box.get_mutation_scale(), box.get_mutation_aspect(), box.get_visible(), box.get_clip_on())
    shown = True
    if isinstance(text, Annotation):
        clip = text.get_annotation_clip()
        if clip or (clip is None and text.xycoords == "data"):  # drawn only while its point is inside its Axes
            if text.xycoords != "data" or text.axes is None:
                return None
            shown = text.axes.contains_point(text.axes.transData.transform(text.xy))
        text.update_positions(renderer)  # its transform: offset from the point it annotates
    x, y = text.get_transform().transform(text.get_unitless_position())
    clip = text.get_clip_box() if text.get_clip_on() else None
    return (shown, text.get_text(), float(x), float(y), hash(text.get_fontproperties()), to_rgba(text.get_color()),
            text.get_alpha(), text.get_antialiased(), text.get_horizontalalignment(), text.get_verticalalignment(),
            text.get_rotation(), text.get_rotation_mode(), text.get_wrap(), text.get_parse_math(),
            None if clip is None else tuple(clip.bounds), box, renderer.dpi)


class FixedLayer:
    """Artists that never change, drawn once onto a transparent canvas of the figure's size and blended onto each frame.

    For what a figure draws above the artists a move changes (a measured point over a curve that moves, and its
    note): redrawn on every move, such an artist costs as long as drawing it, an annotation's arrow a few
    milliseconds; blended from here, as long as the few pixels it covers. Blending is Agg's over a frame whose
    pixels are opaque, as a slider figure's are, to a level in 255.
    """

    def __init__(self, artists, figure):
        width, height = figure.canvas.get_width_height(physical=True)
        renderer = RendererAgg(width, height, figure.dpi)
        renderer.clear()  # transparent
        for artist in artists:
            if artist.get_visible():
                artist.draw(renderer)
        layer = np.asarray(renderer.buffer_rgba())
        self._covered = np.nonzero(layer[..., 3])  # the pixels the artists cover: rows, columns
        colour = layer[self._covered].astype(np.float32)
        alpha = colour[:, 3:] / 255
        self._over = colour[:, :3] * alpha + 0.5  # premultiplied, plus a half for rounding down
        self._under = 1 - alpha

    def blend(self, frame: np.ndarray) -> None:
        """Draw the artists over ``frame`` (height, width, 4 uint8, opaque), in place."""
        under = frame[self._covered][:, :3]
        frame[self._covered + (slice(0, 3),)] = (under * self._under + self._over).astype(np.uint8)
