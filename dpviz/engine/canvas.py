"""The Agg canvas a slider figure draws on: Agg itself, with each text's layout and each glyph rendered once.

A slider move redraws a few dozen short texts ("rank 3", "g_0 = (+0.12, -0.40)", tick labels), and in
Agg nearly all of a text's time goes to laying the string out and asking FreeType to render every glyph
again. Both depend only on the string, the font and a glyph's position within its pixel, so
:class:`GlyphCacheRenderer` keeps them: a layout per word and font (kerning and ligatures act within a
word; a new number in a label is one new word, not a new string to lay out), a glyph's coverage bitmap
per (font, size, glyph, its offset in 1/64 pixel), and a whole text's bitmap, its glyphs put together,
which Agg then blends in one call instead of one per glyph. A glyph moved by whole pixels is the same
bitmap moved, so the pixels drawn are those of :class:`~matplotlib.backends.backend_agg.RendererAgg`, to
a level in 255 where two glyphs overlap (a kerned pair may, by a pixel). A text's size (which places it, and
which Agg measures by laying the whole string out again) is put together from its words' layouts too.

A move also draws again artists it did not change, and most of an artist's drawing time is matplotlib working
out in Python what to ask the renderer: :class:`KeptDrawings` keeps the renderer calls each artist made and makes
them again while the artist is unchanged, and :func:`draw_text` draws a text with its layout kept.

    FastCanvas(fig)     # as FigureCanvasAgg(fig); SliderFigure does this for every widget
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np
from matplotlib import colors as mcolors
from matplotlib.backend_bases import GraphicsContextBase
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Affine2DBase, Transform

try:  # the FreeType calls used here are matplotlib's own, private ones (3.11); without them Agg draws as it does
    from matplotlib.ft2font import FaceFlags, FT2Font, Kerning, RenderMode

    _SUPPORTED = all(hasattr(FT2Font, name) for name in ("_layout", "_set_transform", "_render_glyph")) \
        and hasattr(RendererAgg, "_prepare_font") and hasattr(fontManager, "_find_fonts_by_props")
except ImportError:
    _SUPPORTED = False

MAX_ENTRIES = 50_000  # glyph bitmaps (a few hundred bytes each) and layouts kept, for all figures together
# (string, font properties, dpi, hinting, features, language) -> ([(font, glyph index, dx, dy)], whether every
# dx and dy is a whole number of 1/64 pixel)
_layouts: dict = {}
_WORDS = re.compile(r"\S+\s*|\s+")  # a word and the spaces after it (or the spaces a string starts with)
_NUMERIC = frozenset("0123456789.,:;+-−=()[]%/×·<>± ")  # what numbers are written with: laid out by character
_words: dict = {}  # (word, font properties, dpi, hinting) -> ([(font, glyph index, dx, dy)], advance, bottom, top)
_texts: dict = {}  # (layout key, angle, render mode, where its glyphs sit within a pixel) -> (bitmap, left, top)
_boxes: dict = {}  # (font, size, dpi, glyph index, hinting) -> the bottom and top of its box, in 1/64 pixel
_heights: dict = {}  # (font properties, size, dpi) -> (ascent, descent, line gap) in pixels
_glyphs: dict = {}  # (font, size, dpi, glyph index, angle, hinting, antialiased, x % 64, y % 64) -> (bitmap, left, top)
# (string, font properties, size, alignments, rotation, line spacing, dpi, hinting) -> Text._get_layout's result
_text_layouts: dict = {}
_font_files: dict = {}  # font properties -> the font files matplotlib finds for them


class GlyphCacheRenderer(RendererAgg):
    """:class:`RendererAgg` whose ``draw_text`` reuses layouts and glyph bitmaps (mathtext and TeX draw as before)."""

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        global _SUPPORTED
        if ismath or not _SUPPORTED:
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        try:
            self._draw_cached_text(gc, x, y, s, prop, angle, mtext)
        except (AttributeError, TypeError, ValueError):
            # another matplotlib whose private FreeType calls differ: draw as Agg does, from now on
            _SUPPORTED = False
            super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)

    def _draw_cached_text(self, gc, x, y, s, prop, angle, mtext):
        flags = get_hinting_flag()
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        size = prop.get_size_in_points()
        key = (s, hash(prop), size, self.dpi, flags, features and tuple(features), language)
        laid = _layouts.get(key)
        if laid is None:
            items = self._layout(s, prop, key[1:], flags, features, language)
            laid = (items, _whole(items))
            _remember(_layouts, key, laid)
        items, whole = laid
        if not items:
            return
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        mode = RenderMode.NORMAL if gc.get_antialiased() else RenderMode.MONO
        top_y = self.height - y  # FreeType's y is upwards
        ox, oy = 0x40 * x, 0x40 * top_y  # the text's origin in 1/64 pixel
        if angle == 0 and whole and ox % 1 != 0.5 and oy % 1 != 0.5:
            # level text whose glyphs sit whole 1/64 pixels from its origin (FreeType's layouts are in
            # 1/64 pixel): each glyph's origin is the text's, rounded, plus its own offset
            px, py = round(ox), round(oy)
            bx, by = px >> 6, py >> 6
            text_key = ("level", key, mode, px & 63, py & 63)
            text = _texts.get(text_key)
            if text is None:
                origins = [(px + int(0x40 * dx), py + int(0x40 * dy)) for _, _, dx, dy in items]
                text = self._compose(items, origins, bx, by, size, cos, sin, angle, flags, mode)
                _remember(_texts, text_key, text)
        else:
            # each glyph's origin in 1/64 pixel, as RendererAgg hands it to FreeType
            origins = [(round(ox + 0x40 * (dx * cos - dy * sin)), round(oy + 0x40 * (dx * sin + dy * cos)))
                       for _, _, dx, dy in items]
            bx, by = origins[0][0] >> 6, origins[0][1] >> 6  # whole pixels: moving by them moves the bitmap
            text_key = ("any", key, angle, mode, tuple((px - 64 * bx, py - 64 * by) for px, py in origins))
            text = _texts.get(text_key)
            if text is None:
                text = self._compose(items, origins, bx, by, size, cos, sin, angle, flags, mode)
                _remember(_texts, text_key, text)
        buffer, left, top = text
        # draw_text_image's y is downwards and names the bitmap's bottom side
        self._renderer.draw_text_image(buffer, left + bx, int(self.height) - (top + by) + buffer.shape[0], 0, gc)

    def _prepare_font(self, prop):
        """RendererAgg's: the FT2Font for ``prop`` (:func:`_font`), cleared and at its size."""
        font = _font(prop)
        font.clear()
        font.set_size(prop.get_size_in_points(), self.dpi)
        return font

    def _get_font_height_metrics(self, prop):
        """What :meth:`matplotlib.text.Text._get_layout` reads from the font's tables on every draw, read once."""
        key = (hash(prop), prop.get_size_in_points(), self.dpi)
        if key not in _heights:
            font = _font(prop)
            metrics = (None, None, None)
            for table_name, gap, ascent, descent in (("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
                                                     ("hhea", "lineGap", "ascent", "descent")):
                table = font.get_sfnt_table(table_name)
                if table is not None:
                    scale = 1 / font.get_sfnt_table("head")["unitsPerEm"] * prop.get_size_in_points() * self.dpi / 72
                    metrics = (table[ascent] * scale, -table[descent] * scale, table[gap] * scale)
                    break
            _remember(_heights, key, metrics)
        return _heights[key]

    def get_text_width_height_descent(self, s, prop, ismath):
        """What :meth:`RendererAgg.get_text_width_height_descent` gives, from the cached layouts of ``s``'s words.

        Agg lays the whole string out again for every new string (a number that changed), for about as long
        as drawing it; this is Agg's width (the advance), height and descent (the extent of the glyphs' boxes)
        put together from each word's, each word laid out once.
        """
        global _SUPPORTED
        if ismath or not _SUPPORTED:
            return super().get_text_width_height_descent(s, prop, ismath)
        try:
            flags = get_hinting_flag()
            font_key = (hash(prop), prop.get_size_in_points(), self.dpi, flags, None, None)
            advance, low, high = 0.0, 0, 0
            for i, word in enumerate(_WORDS.findall(s)):
                _, word_advance, word_low, word_high = self._word(word, prop, font_key, flags)
                advance += word_advance
                low, high = (word_low, word_high) if i == 0 else (min(low, word_low), max(high, word_high))
            return advance, (high - low) / 64, -low / 64
        except (AttributeError, TypeError, ValueError):
            _SUPPORTED = False  # another matplotlib: measure as Agg does, from now on
            return super().get_text_width_height_descent(s, prop, ismath)

    def _layout(self, s, prop, font_key, flags, features, language) -> list:
        """[(font, glyph index, x, y)] of ``s``, as FT2Font lays it out, put together from its words.

        A new number in a label is a new string, and laying out costs tens of µs a character. Kerning and
        ligatures act within a word, not across a space, so a word's layout (cached) followed by the next
        word's at its advance is the string's. Font features or a language: the whole string, as Agg does.
        """
        if features or language:
            font = self._prepare_font(prop)
            return [(item.ft_object, item.glyph_index, item.x, item.y)
                    for item in font._layout(s, flags=flags, features=features, language=language)]
        items, x0 = [], 0.0
        for word in _WORDS.findall(s):
            glyphs, advance, _, _ = self._word(word, prop, font_key, flags)
            items.extend((font, index, x0 + x, y) for font, index, x, y in glyphs)
            x0 += advance
        return items

    def _word(self, word, prop, font_key, flags) -> tuple:
        """A word's glyphs [(font, glyph index, x, y)], its advance, and the bottom and top of its glyphs' boxes
        (1/64 pixel, upwards), laid out once."""
        key = (word, *font_key)
        laid = _words.get(key)
        if laid is None and len(word) > 1 and _NUMERIC.issuperset(word):
            laid = self._number(word, prop, font_key, flags)
            if laid is not None:
                _remember(_words, key, laid)
        if laid is None:
            font = self._prepare_font(prop)  # sets the size, and the transform a rotated glyph's rendering changed
            # a bar after the word says where the next one starts: the advance of its trailing space
            *glyphs, bar = font._layout(word + "|", flags=flags)
            boxes = [(self._box(item.ft_object, item.glyph_index, font_key[1], flags), round(0x40 * item.y))
                     for item in glyphs]
            laid = ([(item.ft_object, item.glyph_index, item.x, item.y) for item in glyphs], bar.x,
                    min((low + y for (low, _), y in boxes), default=0),
                    max((high + y for (_, high), y in boxes), default=0))
            _remember(_words, key, laid)
        return laid

    def _number(self, word, prop, font_key, flags):
        """A number's layout put together from its characters', kerned pair by pair as FreeType kerns them.

        Every move writes new numbers, and each new word costs a layout (hundreds of µs); a number's
        characters are a few dozen, each laid out once. Between these characters DejaVu, matplotlib's font,
        kerns but forms no ligatures, and FT2Font's layout of such a word is its characters' advances plus the
        kerning of each pair (tests/test_widget_panels.py checks it against whole layouts). None (lay the word
        out whole) when a character comes from a fallback font or the font has no kerning table to read.
        """
        font = self._prepare_font(prop)
        if not font.face_flags & FaceFlags.KERNING:  # any kerning is in tables only the whole layout reads
            return None
        glyphs, x, previous, low, high = [], 0.0, None, None, None
        for char in word:
            items, advance, char_low, char_high = self._word(char, prop, font_key, flags)
            if len(items) != 1 or items[0][0] is not font:
                return None
            item = items[0]
            if previous is not None:
                x += font.get_kerning(previous, item[1], Kerning.UNFITTED) / 64
            glyphs.append((font, item[1], x, 0.0))
            x += advance
            previous = item[1]
            low = char_low if low is None else min(low, char_low)
            high = char_high if high is None else max(high, char_high)
        return glyphs, x, low, high

    def _box(self, font, glyph_index, size, flags) -> tuple:
        """The bottom and top of a glyph's box, in 1/64 pixel from its origin, upwards (the font's size is set)."""
        key = (font, size, self.dpi, glyph_index, flags)
        box = _boxes.get(key)
        if box is None:
            bbox = font.load_glyph(glyph_index, flags).bbox
            box = (bbox[1], bbox[3])
            _remember(_boxes, key, box)
        return box

    def _compose(self, items, origins, bx, by, size, cos, sin, angle, flags, mode):
        """The coverage bitmap of a whole text, its glyphs placed at ``origins`` less (bx, by) whole pixels."""
        glyphs = []
        for (font, glyph_index, _, _), (px, py) in zip(items, origins):
            glyph_key = (font, size, self.dpi, glyph_index, angle, flags, mode, px & 63, py & 63)
            glyph = _glyphs.get(glyph_key)
            if glyph is None:
                glyph = self._render(font, size, glyph_index, cos, sin, flags, mode, px & 63, py & 63)
                _remember(_glyphs, glyph_key, glyph)
            buffer, left, top = glyph
            glyphs.append((buffer, left + (px >> 6) - bx, top + (py >> 6) - by))  # y upwards, as FreeType's
        left = min(g[1] for g in glyphs)
        top = max(g[2] for g in glyphs)
        right = max(g[1] + g[0].shape[1] for g in glyphs)
        bottom = min(g[2] - g[0].shape[0] for g in glyphs)
        shape = (max(top - bottom, 1), max(right - left, 1))
        spans = sorted((gl, gl + g.shape[1]) for g, gl, _ in glyphs if g.size)
        if all(a[1] <= b[0] for a, b in zip(spans, spans[1:])):  # side by side, as glyphs nearly always are
            out = np.zeros(shape, np.uint8)
            for buffer, gl, gt in glyphs:
                h, w = buffer.shape
                out[top - gt:top - gt + h, gl - left:gl - left + w] = buffer
            return out, left, top
        clear = np.ones(shape)  # 1 - coverage
        for buffer, gl, gt in glyphs:
            h, w = buffer.shape
            # where glyphs overlap (a kerned pair may, by a pixel), as if Agg had blended one over the other
            clear[top - gt:top - gt + h, gl - left:gl - left + w] *= 1 - buffer / 255
        return np.round(255 * (1 - clear)).astype(np.uint8), left, top

    def _render(self, font, size, glyph_index, cos, sin, flags, mode, fx: int, fy: int):
        """One glyph's coverage bitmap at an offset of (fx, fy)/64 pixel, with its left and top edges there."""
        font.set_size(size, self.dpi)
        font._set_transform(_rotation(cos, sin), [fx, fy])
        bitmap = font._render_glyph(glyph_index, flags, mode)
        buffer = np.array(bitmap.buffer, dtype=np.uint8)  # a copy: FreeType reuses its own
        if mode == RenderMode.MONO:
            buffer *= 0xff
        return buffer, bitmap.left, bitmap.top


@functools.lru_cache(maxsize=64)
def _rotation(cos: float, sin: float) -> np.ndarray:
    """FreeType's rotation matrix for an angle, in 16.16 fixed point, as RendererAgg computes it (one per angle)."""
    matrix = (0x10000 * np.array([[cos, -sin], [sin, cos]])).round().astype(int)
    matrix.flags.writeable = False
    return matrix


def _whole(items) -> bool:
    """Whether every glyph of a layout is a whole number of 1/64 pixel from its start (FreeType's are)."""
    return all((0x40 * dx) % 1 == 0 and (0x40 * dy) % 1 == 0 for _, _, dx, dy in items)


def _font(prop):
    """The FT2Font matplotlib draws ``prop`` with, its font files found once per font properties.

    Finding them (matplotlib's ``findfont``, which reads a dozen rcParams each time) is a third of what laying out a
    new number takes, and every move writes new numbers.
    """
    key = hash(prop)
    files = _font_files.get(key)
    if files is None:
        files = fontManager._find_fonts_by_props(prop)
        _remember(_font_files, key, files)
    return get_font(files)


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= MAX_ENTRIES:
        cache.clear()  # a figure's texts come back on the next move and fill it again
    cache[key] = value


class FixedLayer:
    """Artists that never change, drawn once onto a transparent canvas of the figure's size and blended onto each frame.

    For what a figure draws above the artists a move changes (a measured point over a curve that moves, and its
    note): redrawn on every move, such an artist costs as long as drawing it, an annotation's arrow a few
    milliseconds; blended from here, as long as the few pixels it covers. Blending is Agg's over a frame whose
    pixels are opaque, as a slider figure's are, to a level in 255.
    """

    def __init__(self, artists, figure):
        width, height = figure.canvas.get_width_height(physical=True)
        renderer = (GlyphCacheRenderer if _SUPPORTED else RendererAgg)(width, height, figure.dpi)
        renderer.clear()  # transparent
        for artist in artists:
            if artist.get_visible():
                artist.draw(renderer)
        layer = np.asarray(renderer.buffer_rgba())
        self._where = np.nonzero(layer[..., 3])  # the pixels the artists cover: rows, columns
        colour = layer[self._where].astype(np.float32)
        alpha = colour[:, 3:] / 255
        self._over = colour[:, :3] * alpha + 0.5  # premultiplied, plus a half for rounding down
        self._under = 1 - alpha

    def blend(self, frame: np.ndarray) -> None:
        """Draw the artists over ``frame`` (height, width, 4 uint8, opaque), in place."""
        under = frame[self._where][:, :3]
        frame[self._where + (slice(0, 3),)] = (under * self._under + self._over).astype(np.uint8)


class KeptDrawings:
    """What each artist last drew, as the renderer calls it made, replayed instead of drawing it while it is unchanged.

    Most of the time an artist takes to draw goes to matplotlib working out in Python what to ask the renderer
    (layouts, transforms, marker positions); the calls themselves take a fifth of it. An artist whose ``stale``
    flag is still down since it drew (every setter raises it) and whose Axes and figure are where they were
    (``state``) would make the same calls again: they are made again, on the same renderer, so the pixels are
    the ones drawing gives, bit for bit. An artist changed other than through a setter (an ``Annotation``'s
    ``xy``, assigned) must have its ``stale`` raised by whoever changed it. Any draw lowers ``stale``, a full
    draw or ``savefig`` included, so :meth:`forget_changed` must follow every change (a SliderFigure calls it
    after each ``update``), before anything else can draw the artist. Calls whose arguments this cannot keep (a
    collection's, an image's) leave that artist drawn every time. An artist that changed the last time it drew as
    well draws straight onto the renderer, unrecorded: while a slider is dragged, what it drew is dropped at once.
    """

    # the drawing calls kept, and where among their arguments (after the gc) their transforms are
    TRANSFORMS = {"draw_path": (1,), "draw_markers": (1, 3), "draw_text": ()}

    def __init__(self):
        self._kept: dict = {}  # artist -> (state, [(renderer method's name, gc, args, kwargs)])
        self._recorders: dict = {}  # id(renderer) -> (renderer, its _Recorder)
        self._moving: set = set()  # the artists that had changed the last time they drew

    def forget_changed(self) -> None:
        """Drop what the artists changed since they drew (``stale`` up) drew: it is no longer their picture."""
        for artist in [a for a in self._kept if a.stale]:
            del self._kept[artist]

    def draw(self, artist, renderer, state) -> None:
        """Draw ``artist`` on ``renderer``, or replay its last calls if it and ``state`` are unchanged since."""
        kept = self._kept.get(artist)
        if kept is not None and not artist.stale and kept[0] == state:
            for name, gc, args, kwargs in kept[1]:
                getattr(renderer, name)(gc, *args, **kwargs)
            self._moving.discard(artist)
            return
        self._kept.pop(artist, None)
        if artist.get_rasterized() or artist.get_agg_filter() is not None:
            artist.draw(renderer)  # these set state on the renderer itself
            return
        # An artist that changes move after move (the bars while a slider is dragged) is drawn straight onto the
        # renderer: what it draws would be dropped before the next move. Once it draws unchanged, it is kept again.
        if artist.stale and artist in self._moving:
            if not draw_text(artist, renderer):
                artist.draw(renderer)
            return
        if artist.stale:
            self._moving.add(artist)
        else:
            self._moving.discard(artist)
        entry = self._recorders.get(id(renderer))
        if entry is None or entry[0] is not renderer:
            entry = self._recorders[id(renderer)] = (renderer, _Recorder(renderer))
        recorder = entry[1]
        recorder.calls, recorder.complete = [], True
        if not draw_text(artist, recorder):
            artist.draw(recorder)
        if recorder.complete and not artist.stale:  # drawn through and marked drawn: what it drew is what it is
            self._kept[artist] = (state, recorder.calls)


def draw_text(text, renderer) -> bool:
    """``text.draw(renderer)`` for a plain Text or an Annotation without arrow, its layout worked out once; False
    (nothing drawn) for a text this does not cover: a box, path effects, TeX, wrapping, a rotation that follows its
    transform, an annotation that checks its point is inside the Axes, no text or a position that is not finite.

    Where a text's lines go relative to its position depends on its string and style alone, and working that out
    (:meth:`matplotlib.text.Text._get_layout`) is half of what ``Text.draw`` takes: it is kept, by string and style.
    The rest is ``Text.draw``'s own steps, so the renderer is asked what ``Text.draw`` asks it, bit for bit.
    """
    kind = type(text)
    if kind is Annotation:
        if text.arrow_patch is not None or text.get_annotation_clip() is not False:
            return False
    elif kind is not Text:
        return False
    try:
        if text._bbox_patch or text.get_path_effects() or text.get_usetex() or text.get_wrap() or \
                text.get_transform_rotates_text() or text.get_rasterized() or text.get_agg_filter() is not None or \
                not text.get_visible() or text.get_text() == "":
            return False
        if kind is Annotation:
            text.update_positions(renderer)  # its transform: offset from the point it annotates
        prop = text._fontproperties
        info = text_layout(text, renderer)[1]
        # From here on, Text.draw's steps.
        x, y = text._x, text._y
        posx = float(text.convert_xunits(np.nan if np.ma.is_masked(x) else x))
        posy = float(text.convert_yunits(np.nan if np.ma.is_masked(y) else y))
        posx, posy = text.get_transform().transform((posx, posy))
        if not (np.isfinite(posx) and np.isfinite(posy)):
            return False
        text._renderer = renderer
        canvash = renderer.get_canvas_width_height()[1]
        gc = renderer.new_gc()
        gc.set_foreground(mcolors.to_rgba(text.get_color()), isRGBA=True)
        gc.set_alpha(text.get_alpha())
        gc.set_url(text._url)
        gc.set_antialiased(text._antialiased)
        gc.set_snap(text.get_snap())
        text._set_gc_clip(gc)
    except AttributeError:  # another matplotlib, whose Text keeps these otherwise: Text.draw draws it
        return False
    angle = text.get_rotation()
    renderer.open_group("text", text.get_gid())
    for line, _, (dx, dy) in info:
        y = dy + posy
        if renderer.flipy():
            y = canvash - y
        clean_line, ismath = text._preprocess_math(line)
        renderer.draw_text(gc, dx + posx, y, clean_line, prop, angle, ismath=ismath,
                           mtext=text if len(info) == 1 else None)
    gc.restore()
    renderer.close_group("text")
    text.stale = False
    return True


def text_layout(text, renderer) -> tuple:
    """``text._get_layout(renderer)``, kept by string and style, its box as plain numbers: the bounds (x0, y0, width,
    height) of the text's box about its anchor (display units, before it is moved to where the text sits), its lines
    with their offsets, and its descent. A text's layout depends on those alone, and working it out is half of what
    drawing or measuring the text takes."""
    prop = text._fontproperties
    key = (text.get_text(), hash(prop), prop.get_size_in_points(), text.get_horizontalalignment(),
           text.get_verticalalignment(), text._multialignment, text.get_rotation(), text.get_rotation_mode(),
           text._linespacing, text._parse_math, text.get_figure(root=True).dpi, get_hinting_flag())
    layout = _text_layouts.get(key)
    if layout is None:
        box, lines, descent = text._get_layout(renderer)
        layout = (box.bounds, lines, descent)  # a Bbox kept would take a kilobyte an entry
        _remember(_text_layouts, key, layout)
    return layout


class _Recorder:
    """Stands in for a renderer while an artist draws: passes every call on, and keeps the drawing calls frozen."""

    def __init__(self, renderer):
        self._real = renderer
        self.calls: list = []
        self.complete = True  # False once a call could not be kept

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if name.startswith("draw_"):
            attr = functools.partial(self._record, name, attr)
        if callable(attr):  # a renderer's methods stay what they are: looked up once
            setattr(self, name, attr)
        return attr

    def _record(self, name, method, gc, *args, **kwargs):
        method(gc, *args, **kwargs)
        places = KeptDrawings.TRANSFORMS.get(name)
        if places is None or any(isinstance(v, Transform) for v in kwargs.values()) or \
                not all(len(args) > i and isinstance(args[i], Affine2DBase) for i in places):
            self.complete = False
            return
        kept = GraphicsContextBase()
        kept.copy_properties(gc)  # the artist's gc is its own to change after this call
        args = tuple(arg.frozen() if i in places else arg for i, arg in enumerate(args))
        self.calls.append((name, kept, args, kwargs))


class FastCanvas(FigureCanvasAgg):
    """:class:`FigureCanvasAgg` drawing with a :class:`GlyphCacheRenderer`."""

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lastKey != key:
            self.renderer = (GlyphCacheRenderer if _SUPPORTED else RendererAgg)(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer
