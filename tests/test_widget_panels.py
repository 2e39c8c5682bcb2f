"""Every slider panel the chapters display, built from shipped records (no run started), as the chapters build them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURE_RECORDS = ROOT / "figures" / "records"


def speedup():
    from dpviz.topics.ground_floor.widget import speedup_widget
    return speedup_widget(k=8, ratio=0.05)


def eta():
    from dpviz.engine.data import line_data
    from dpviz.topics.one_step.widget import eta_widget
    return eta_widget(*line_data())


def batch():
    from dpviz.engine.schema import load
    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.mini_batch.widget import batch_widget
    return batch_widget(shipped.grid_runs()[(1, 16)], biased=load(FIGURE_RECORDS / "line_k1_biased"))


def average():
    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.average_of_averages.widget import average_widget
    return average_widget(shipped.grid_runs()[(4, 16)])


def devices():
    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.one_group_per_device.widget import devices_widget
    return devices_widget(shipped.grid_runs())


def all_reduce():
    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.one_group_per_device.widget import all_reduce_widget
    return all_reduce_widget(shipped.grid_runs())


def costs():
    from dpviz.topics.speedup_model.figure_records import load_inputs
    from dpviz.topics.speedup_model.widget import costs_widget
    inputs = load_inputs(FIGURE_RECORDS)
    return costs_widget(measured_bench=inputs.bench, measured_runs=inputs.mlp)


def summary():
    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.ground_floor import timing
    from dpviz.topics.whole_picture.widget import summary_widget
    run = shipped.drift_runs()[("sgd", True)]
    return summary_widget(run, timing.step_times(run))


def lr():
    from dpviz.topics.bigger_batch.records import LrGrid
    from dpviz.topics.bigger_batch.widget import lr_widget
    return lr_widget({"line": LrGrid.shipped("line"), "mlp": LrGrid.shipped("mlp")})


def accumulation():
    from dpviz.topics.accumulation.records import accumulation_grid
    from dpviz.topics.accumulation.widget import accumulation_widget
    return accumulation_widget(accumulation_grid())


def straggler():
    from dpviz.topics.waiting.records_straggler import shipped_straggler
    from dpviz.topics.waiting.widget import straggler_widget
    return straggler_widget(shipped_straggler(), k=2, delay=0.05, slow_rank=1)


def pipeline():
    from dpviz.topics.splitting.records_pipeline import shipped_grid
    from dpviz.topics.splitting.widget import pipeline_widget
    return pipeline_widget(shipped_grid())


def sharding():
    from dpviz.topics.sharding.widget import sharding_widget
    return sharding_widget()


# The widget function each builder calls: what a chapter's cell names, whatever the chapter's number.
def cheaper_sync():
    from dpviz.topics.cheaper_sync.widget import cheaper_sync_widget
    return cheaper_sync_widget()


PANELS = {
    "speedup_widget": speedup,
    "eta_widget": eta,
    "batch_widget": batch,
    "average_widget": average,
    "devices_widget": devices,
    "all_reduce_widget": all_reduce,
    "costs_widget": costs,
    "summary_widget": summary,
    "lr_widget": lr,
    "accumulation_widget": accumulation,
    "straggler_widget": straggler,
    "pipeline_widget": pipeline,
    "sharding_widget": sharding,
    "cheaper_sync_widget": cheaper_sync,
}


# --- what a room sees: every panel readable and whole on a 1366×768 laptop in JupyterLab ---

import io  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402

import ipywidgets as widgets  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")

import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from dpviz.engine.slider import DPI, bytes_readout, rate_readout, seconds_readout  # noqa: E402
from figure_text import LAB_OUTPUT_PX, MIN_TEXT_PX, shown_texts, smallest_text  # noqa: E402

SCREEN_PX = 650  # the tallest panel that a 768-px screen shows whole in JupyterLab, under its menus and toolbar
IMAGE_PX = LAB_OUTPUT_PX - 4  # the image's share of the output area: it has a 2 px margin on each side
# How tall the parts around the image are in JupyterLab (measured in Chromium at 1366×768, 13 px widget text):
STATUS_LINE_PX, STATUS_CHAR_PX = 17, 6.8  # a line of the status HTML; the mean width of one of its characters
ROW_PX, TOGGLE_ROW_PX = 32, 60  # a row of sliders; a row with toggle buttons, whose label sits above them
SLACK_PX = 20  # margins between the parts


@pytest.fixture(scope="module", params=list(PANELS))
def panel(request):
    return request.param, PANELS[request.param]()


def png_size(sf) -> tuple[int, int]:
    return Image.open(io.BytesIO(sf.image.value)).size


def test_every_panel_is_shown_at_its_own_size_and_its_text_is_readable(panel):
    name, sf = panel
    width, height = png_size(sf)
    assert width <= IMAGE_PX, f"{name}: the PNG is {width} px wide; JupyterLab at 1366×768 shows {IMAGE_PX} px"
    assert (width, height) == (round(sf.fig.get_figwidth() * DPI), round(sf.fig.get_figheight() * DPI))
    smallest = smallest_text(sf.fig, LAB_OUTPUT_PX, dpi=DPI)
    assert smallest.px >= MIN_TEXT_PX - 1e-9, f"{name}: {smallest.text!r} is {smallest.px:.1f} px on screen"
    ticks = {label for ax in sf.fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks() for label in (tick.label1, tick.label2)}
    cut = [(text.get_text()[:40], [round(v) for v in box.extents]) for text, box, _ in shown_texts(sf.fig)
           if text not in ticks and (box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1)]
    assert not cut, f"{name}: texts run past the PNG's edges (px): {cut}"


def estimated_height(sf) -> float:
    """The panel's height in JupyterLab at 1366×768 as its parts add up: status lines, control rows, the PNG."""
    status, middle = sf.widget.children[0], sf.widget.children[1]
    lines = 0
    for part in re.split(r"<br\s*/?>", status.value):
        words = re.sub(r"<[^>]+>", "", part)
        lines += max(1, math.ceil(len(words) * STATUS_CHAR_PX / LAB_OUTPUT_PX)) if words.strip() else 0
    _, image_px = png_size(sf)
    if middle is sf.widget.children[1] and isinstance(middle, widgets.HBox):  # controls beside the figure
        return lines * STATUS_LINE_PX + image_px + SLACK_PX
    rows = sum(TOGGLE_ROW_PX if any(isinstance(w, widgets.ToggleButtons) for w in _leaves(row)) else ROW_PX
               for row in middle.children)
    return lines * STATUS_LINE_PX + rows + image_px + SLACK_PX


def _leaves(box):
    for child in getattr(box, "children", ()):
        yield child
        yield from _leaves(child)


def test_every_panel_fits_a_laptop_screen_with_its_controls(panel):
    name, sf = panel
    assert estimated_height(sf) <= SCREEN_PX, f"{name}: about {estimated_height(sf):.0f} px tall"


def test_the_costs_panel_fits_for_every_link_and_its_own_settings():
    sf = costs()
    for preset in sf.controls["preset"].options:  # each preset's source is a status line of its own length
        for formula in sf.controls["formula"].options:
            sf.set(preset=preset, formula=formula)
            assert estimated_height(sf) <= SCREEN_PX, f"{preset}, {formula}: about {estimated_height(sf):.0f} px"
    sf.set(alpha=1e-3)
    assert "your own settings" in sf.status.value and estimated_height(sf) <= SCREEN_PX


def test_no_slider_reads_out_raw_si_numbers(panel):
    """A readout such as 0.00000270 (α) or 1.25e+10 (β): such sliders read out in µs, GB/s, MB instead."""
    name, sf = panel
    for key, control in sf.controls.items():
        if isinstance(control, (widgets.FloatSlider, widgets.FloatLogSlider)) and control.readout:
            shown = format(control.value, control.readout_format)
            assert not re.search(r"e[+-]|\.000", shown), f"{name}: slider {key} reads out {shown}"


def test_the_link_sliders_read_out_in_units_and_hand_update_si_values():
    sf = costs()
    readouts = {name: label.value for name, (_, label) in sf._readouts.items()}
    assert readouts == {"alpha": "2.7 µs", "beta": "12.5 GB/s", "M": "100 MB", "t_compute": "1 s"}
    assert not any(sf.controls[name].readout for name in readouts)
    seen = {}
    update = sf.view.update
    sf.view.update = lambda **values: seen.update(values) or update(**values)
    sf.set(alpha=1e-5, beta=1e9, M=3e5, t_compute=0.02)
    assert (seen["alpha"], seen["beta"], seen["M"], seen["t_compute"]) == (1e-5, 1e9, 3e5, 0.02)
    assert [sf._readouts[n][1].value for n in ("alpha", "beta", "M", "t_compute")] == ["10 µs", "1 GB/s", "300 kB",
                                                                                       "20 ms"]
    sf.set(preset="10 Gb Ethernet")  # a preset moves α and β, and their readouts with them
    assert sf._readouts["beta"][1].value == "1.25 GB/s"


@pytest.mark.parametrize("value, words", [(2.7e-6, "2.7 µs"), (1e-3, "1 ms"), (0.114, "114 ms"), (1.0, "1 s"),
                                          (3e-9, "3 ns"), (9.9995e-4, "1 ms")])
def test_seconds_readout(value, words):
    assert seconds_readout(value) == words


@pytest.mark.parametrize("value, words", [(1e8, "100 MB"), (282e3, "282 kB"), (999.0, "999 B"), (1.34e9, "1.34 GB")])
def test_bytes_readout(value, words):
    assert bytes_readout(value) == words


def test_rate_readout():
    assert rate_readout(1.25e10) == "12.5 GB/s" and rate_readout(1.25e9) == "1.25 GB/s"


def test_the_glyph_cache_draws_what_agg_draws_and_falls_back_to_it(monkeypatch):
    """Slider panels draw text through dpviz.engine.canvas's cache of matplotlib's private FreeType calls; where those
    calls are missing (another matplotlib) the panel is drawn by plain Agg, and both agree to one level in 255."""
    import io

    import numpy as np
    from matplotlib.image import imread

    import dpviz.engine.canvas as agg

    for name in ("straggler_widget", "costs_widget"):
        monkeypatch.setattr(agg, "_SUPPORTED", True)
        cached = imread(io.BytesIO(PANELS[name]().png()))
        monkeypatch.setattr(agg, "_SUPPORTED", False)
        plain = imread(io.BytesIO(PANELS[name]().png()))
        assert cached.shape == plain.shape, name
        assert np.abs(cached - plain).max() <= 1 / 255 + 1e-6, name


def test_the_glyph_cache_lays_out_and_measures_text_as_freetype_does():
    """A text's glyph positions and size come from its words' cached layouts (a number's from its characters'):
    the same, bit for bit, as FT2Font laying the whole string out, for labels such as the panels write."""
    import random

    from matplotlib.backends.backend_agg import RendererAgg, get_hinting_flag
    from matplotlib.font_manager import FontProperties

    import dpviz.engine.canvas as agg

    if not agg._SUPPORTED:
        pytest.skip("this matplotlib lacks the private FreeType calls the cache uses; Agg draws as it does")
    rng = random.Random(0)
    numbers = "0123456789.,:;+-−=()[]%/×·<>± "
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZθαβηµ_'→≈…Δ&"
    strings = ["S = 7.19 at k = 8", "θ = (w -1.000, c +2.000)", "g_0 = (+0.12, −0.40)", "  0.139 s at k = 8", "",
               " ", "fi fl ffi AV To Wa 7. 1,", "S = 0.32, T_comm = 1.5 s", "(90% of k), capped by 37.1"]
    strings += ["".join(rng.choice(numbers if rng.random() < 0.7 else letters) for _ in range(rng.randint(1, 24)))
                for _ in range(300)]
    flags = get_hinting_flag()
    for dpi in (80, 100):
        plain, cached = RendererAgg(10, 10, dpi), agg.GlyphCacheRenderer(10, 10, dpi)
        for family, size, weight in (("DejaVu Sans", 9, "normal"), ("DejaVu Sans", 12, "bold"),
                                     ("DejaVu Sans Mono", 13, "normal")):
            prop = FontProperties(family=family, size=size, weight=weight)
            key = (hash(prop), prop.get_size_in_points(), dpi, flags, None, None)
            for s in strings:
                font = plain._prepare_font(prop)
                expected = [(item.glyph_index, item.x, item.y) for item in font._layout(s, flags=flags)]
                laid = [(index, x, y) for _, index, x, y in cached._layout(s, prop, key, flags, None, None)]
                assert laid == expected, (s, family, size, weight, dpi)
                assert cached.get_text_width_height_descent(s, prop, False) == \
                    plain.get_text_width_height_descent(s, prop, False), (s, family, size, weight, dpi)


def test_texts_drawn_with_their_layout_kept_are_what_text_draw_draws():
    """agg.draw_text (a text's layout kept by string and style, then Text.draw's steps) gives Text.draw's pixels, bit
    for bit, for the kinds of text the panels animate; a text it does not cover (an arrow, a box) it leaves alone."""
    import numpy as np
    from matplotlib.figure import Figure

    import dpviz.engine.canvas as agg

    fig = Figure(figsize=(4, 3), dpi=80)
    agg.FastCanvas(fig)
    ax = fig.add_subplot()
    texts = [ax.text(0.2, 0.5, "  0.139 s at k = 8", fontsize=9), fig.text(0.01, 0.98, "S = 7.19 (90% of k)", va="top"),
             ax.text(0.5, 0.4, "two\nlines", ha="center", va="top", rotation=30, color="C1"),
             ax.text(0.9, 0.1, "clipped at the Axes", clip_on=True, ha="right", va="bottom", alpha=0.5),
             ax.annotate("S = 21.3 at k = 32", (0.5, 0.5), xytext=(-12, 12), textcoords="offset points", ha="right",
                         va="center", weight="bold", annotation_clip=False)]
    for _ in range(2):  # the second time from the kept layouts
        for text in texts:
            drawn = []
            for draw in (text.draw, lambda renderer: agg.draw_text(text, renderer)):
                renderer = agg.GlyphCacheRenderer(*fig.canvas.get_width_height(physical=True), fig.dpi)
                assert draw(renderer) in (None, True)
                drawn.append(np.asarray(renderer.buffer_rgba()).copy())
            assert drawn[0].any() and np.array_equal(drawn[0], drawn[1]), text.get_text()
    arrow = ax.annotate("k", (0.5, 0.5), xytext=(0.1, 0.1), arrowprops=dict(arrowstyle="->"), annotation_clip=False)
    boxed = ax.text(0.5, 0.5, "boxed", bbox=dict(facecolor="white"))
    assert not agg.draw_text(arrow, fig.canvas.get_renderer()) and not agg.draw_text(boxed, fig.canvas.get_renderer())


def test_kept_drawings_replay_what_drawing_draws_and_draw_again_what_changed():
    """An unchanged artist's replayed calls give the pixels its draw gives, bit for bit; one changed through a
    setter, or whose Axes moved, is drawn again; forget_changed drops what a changed artist drew before."""
    import numpy as np
    from matplotlib.figure import Figure

    import dpviz.engine.canvas as agg

    fig = Figure(figsize=(4, 3), dpi=80)
    agg.FastCanvas(fig)
    ax = fig.add_subplot(yscale="log")
    line, = ax.plot([1, 2, 3], [1, 4, 2], marker="o", markevery=(0.1, 0.3), linewidth=2)
    bar = ax.barh(2, 1.5, height=0.5, hatch="//", edgecolor="k")[0]
    label = ax.annotate("S = 4", (2, 4), xytext=(6, 6), textcoords="offset points", annotation_clip=False)
    kept = agg.KeptDrawings()
    size = fig.canvas.get_width_height(physical=True)

    def frame(draw):
        renderer = agg.GlyphCacheRenderer(*size, fig.dpi)
        for artist in (line, bar, label):
            draw(artist, renderer)
        return np.asarray(renderer.buffer_rgba()).copy()

    def state():
        return ax.viewLim.bounds, ax.bbox.bounds

    def direct(artist, renderer):
        artist.draw(renderer)

    for change in (lambda: None, lambda: line.set_ydata([2, 1, 3]), lambda: bar.set_width(0.5),
                   lambda: label.set_text("S = 2"), lambda: ax.set_xlim(0, 5)):
        change()
        kept.forget_changed()
        assert np.array_equal(frame(lambda a, r: kept.draw(a, r, state())), frame(direct))  # kept drawings made
        replayed = frame(lambda a, r: kept.draw(a, r, state()))  # ... and replayed: none of them is stale
        assert np.array_equal(replayed, frame(direct)) and len(kept._kept) == 3
    line.set_ydata([3, 3, 1])  # changed, then marked drawn by a draw elsewhere: forget_changed came first
    kept.forget_changed()
    line.draw(fig.canvas.get_renderer())
    assert np.array_equal(frame(lambda a, r: kept.draw(a, r, state())), frame(direct))


def test_png_writer_reuses_unchanged_rows_and_writes_what_a_fresh_writer_writes():
    """Each frame's PNG, written after other frames (bands of rows unchanged since reused), is the file a fresh
    writer gives for it, and decodes to its pixels."""
    import numpy as np

    from dpviz.engine.slider import BAND_ROWS, PngWriter, png_bytes

    rng = np.random.default_rng(0)
    first = np.full((3 * BAND_ROWS + 5, 70, 4), 255, np.uint8)
    first[4:9, 10:60, :3] = rng.integers(0, 256, (5, 50, 3))
    second = first.copy()
    second[2 * BAND_ROWS + 1, 33] = (1, 2, 3, 255)  # one pixel, in one band
    writer = PngWriter()
    for frame in (first, second, first, first):
        png = writer(frame)
        assert png == png_bytes(frame)
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")), frame)


def test_png_writer_deflates_with_zlib_ng():
    """zlib-ng is a dependency for the sliders' speed; without it PngWriter falls back on zlib, silently slower."""
    from zlib_ng import zlib_ng

    from dpviz.engine import slider as base

    assert base._deflate_lib is zlib_ng


def test_png_writer_sharing_bands_with_its_helper_thread_writes_the_same_file(monkeypatch):
    """A frame with many bands changed is compressed in two threads; the file is the one one thread writes."""
    import numpy as np

    from dpviz.engine import slider as base

    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, (3 * base.SHARED_BANDS * base.BAND_ROWS + 7, 90, 4)).astype(np.uint8)
              for _ in range(2)]
    frames[1][: base.BAND_ROWS] = frames[0][: base.BAND_ROWS]  # one band the same: reused, not compressed again
    monkeypatch.setattr(base, "_cores", lambda: 2)
    shared = [base.PngWriter()(frame) for frame in frames] + [base.PngWriter()(frames[0])]
    writer = base.PngWriter()
    shared_after = [writer(frame) for frame in frames]
    monkeypatch.setattr(base, "SHARED_BANDS", 10**9)  # one thread only
    alone = [base.PngWriter()(frame) for frame in frames]
    assert shared[:2] == alone and shared[2] == alone[0] and shared_after == alone
    for png, frame in zip(shared_after, frames):
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")), frame)


@pytest.mark.parametrize("name, moves", [("devices_widget", ({"step": 3}, {"k": 2}, {"b": 16})),
                                         ("costs_widget", ({"k": 32}, {"alpha": 1e-4}, {"formula": "notes"}))])
def test_a_setting_shown_again_shows_the_picture_it_drew(name, moves):
    """A slider back at a setting sends the PNG that setting gave, which is the frame drawing it now gives."""
    from widget_checks import assert_blit_is_right

    sf = PANELS[name]()
    start, first = dict(sf.values), sf.image.value
    shown = []
    for move in moves:
        sf.set(**move)
        shown.append((dict(sf.values), sf.image.value))
    for values, png in reversed(shown):
        sf.set(**values)
        assert sf.image.value == png and sf.png(full=False) == png, (name, values)
    sf.set(**start)
    assert sf.image.value == first
    assert_blit_is_right(sf, f"{name} back at its first setting")
