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


def alpha_beta():
    from dpviz.topics.speedup_model.figure_records import load_inputs
    from dpviz.topics.measuring.widget import alpha_beta_widget
    return alpha_beta_widget(load_inputs(FIGURE_RECORDS).bench)


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


def young_daly():
    from dpviz.topics.when_a_replica_fails.run_shipped import shipped
    from dpviz.topics.when_a_replica_fails.widget import young_daly_widget
    return young_daly_widget(shipped()[1])


PANELS = {
    "speedup_widget": speedup,
    "eta_widget": eta,
    "batch_widget": batch,
    "average_widget": average,
    "devices_widget": devices,
    "all_reduce_widget": all_reduce,
    "costs_widget": costs,
    "alpha_beta_widget": alpha_beta,
    "summary_widget": summary,
    "lr_widget": lr,
    "accumulation_widget": accumulation,
    "straggler_widget": straggler,
    "pipeline_widget": pipeline,
    "sharding_widget": sharding,
    "cheaper_sync_widget": cheaper_sync,
    "young_daly_widget": young_daly,
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


def _moves(sf, n: int, seed: int = 0) -> list[dict]:
    """``n`` moves of each control of ``sf`` in turn, each to a value other than the one before."""
    import numpy as np

    rng = np.random.default_rng(seed)
    moves = []
    for name, control in sf.controls.items():
        if hasattr(control, "options"):
            pool = [o[1] if isinstance(o, tuple) else o for o in control.options]
        elif isinstance(control, widgets.FloatLogSlider):
            pool = list(control.base ** np.linspace(control.min, control.max, 9))
        elif isinstance(control, widgets.IntSlider):
            pool = sorted(set(np.linspace(control.min, control.max, 9).round().astype(int).tolist()))
        else:
            pool = list(np.linspace(control.min, control.max, 9))
        last = control.value
        for _ in range(n):
            value = pool[int(rng.integers(len(pool)))]
            if value != last:
                moves.append({name: value})
                last = value
    return moves


def test_texts_blended_from_their_layers_are_what_agg_draws(panel):
    """Every move's frame, its texts blended from the layers of looks seen before, is the frame Agg draws with every
    text drawn again, to two levels in 255 (Agg's blending and the layer's round differently)."""
    import numpy as np
    from widget_checks import decode

    name, sf = panel
    assert sf._texts.opaque, name
    for move in _moves(sf, 3) * 2:  # the second time round, the texts come back to looks they had
        sf.set(**move)
        blended = decode(sf.png(full=False))
        sf._texts.opaque = False  # every text drawn by Agg
        try:
            drawn = decode(sf.png(full=False))
        finally:
            sf._texts.opaque = True
        assert np.abs(blended - drawn).max() <= 2, (name, move)
    from matplotlib.text import Text

    assert bool(sf._texts._layers) == any(isinstance(a, Text) for a in sf._animated), name


def test_a_text_layer_follows_every_change_of_its_look():
    """A text whose string, place, font, colour, alignment, rotation, clip or box changed is drawn anew; one that comes
    back to a look it had is blended from that look's layer; each frame is what Agg draws."""
    import numpy as np
    from matplotlib.figure import Figure

    from dpviz.engine.slider import SliderFigure, animate
    from widget_checks import decode

    class View:
        def __init__(self):
            self.fig = Figure(figsize=(4, 3))
            self.ax = self.fig.add_subplot(xlim=(0, 10), ylim=(0, 10))
            self.text = self.ax.text(2, 5, "S = 1.00", fontsize=10, clip_on=True)
            self.note = self.ax.annotate("k = 1", (5, 5), xytext=(4, 4), textcoords="offset points")
            animate(self.text, self.note)

        def update(self, step):
            text, note = self.text, self.note
            changes = [lambda: None, lambda: text.set_text("S = 2.00"), lambda: text.set_x(3.3),
                       lambda: text.set_fontsize(12), lambda: text.set_color("C1"), lambda: text.set_alpha(0.5),
                       lambda: text.set_ha("center"), lambda: text.set_rotation(30), lambda: text.set_weight("bold"),
                       lambda: text.set_bbox(dict(facecolor="w", edgecolor="k")), lambda: self.ax.set_xlim(0, 12),
                       lambda: text.set_clip_on(False), lambda: setattr(note, "xy", (6, 2)),
                       lambda: note.set_position((-20, 4)), lambda: note.set_text("k = 2")]
            changes[step]()

    view = View()
    sf = SliderFigure(view, {"step": widgets.IntSlider(0, min=0, max=14)})
    for step in range(1, 15):
        sf.set(step=step)
        sf._texts.opaque = False
        try:
            drawn = decode(sf.png(full=False))
        finally:
            sf._texts.opaque = True
        assert np.abs(decode(sf.image.value) - drawn).max() <= 2, step
    looks = len(sf._texts._layers)
    sf.png(full=False)
    assert len(sf._texts._layers) == looks  # nothing changed: every text blended from a layer


def test_png_bytes_writes_pillows_png_of_the_pixels():
    """An opaque frame goes out as an RGB PNG, any other as RGBA; either decodes to the pixels it was given."""
    import numpy as np

    from dpviz.engine.slider import png_bytes

    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (37, 70, 4)).astype(np.uint8)
    frame[..., 3] = 255
    see_through = frame.copy()
    see_through[3, 5, 3] = 17
    for pixels, mode in ((frame, "RGB"), (see_through, "RGBA")):
        image = Image.open(io.BytesIO(png_bytes(pixels)))
        assert image.format == "PNG" and image.mode == mode
        assert np.array_equal(np.asarray(image.convert("RGBA")), pixels)


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


def test_every_panel_says_its_picture_in_words_after_each_move(panel):
    """The live region a screen reader reads out: the settings and what the picture shows, new after every move."""
    name, sf = panel
    before = sf.spoken.value
    assert 'aria-live="polite"' in before and "The picture now, at " in before, f"{name}: {before[:200]!r}"
    for control_name, control in sf.controls.items():
        options = getattr(control, "options", None)
        choices = [v for v in ((options and [o[1] if isinstance(o, tuple) else o for o in options])
                               or [getattr(control, "min", None), getattr(control, "max", None)]) if v is not None]
        other = next((v for v in choices if v != control.value), None)
        if other is None:
            continue
        sf.set(**{control_name: other})
        spoken = html_unescape(sf.spoken.value)
        assert f"{control_name} = " in spoken and spoken != html_unescape(before), \
            f"{name}: moving {control_name} left its text alternative as it was: {spoken[:200]!r}"
        before = sf.spoken.value
        break
    else:
        pytest.fail(f"{name}: no control could be moved to another value")


def html_unescape(text: str) -> str:
    import html
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def test_a_saved_panel_says_it_is_a_still_picture():
    """Where no widget runs (a saved chapter before Run All, the book, GitHub) the panel's PNG carries a band that
    says it is a still picture; the live widget's own frame has none."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    from dpviz.engine.slider import STILL_NOTE
    from dpviz.topics.ground_floor.widget import speedup_widget

    panel = speedup_widget(k=8, ratio=0.05)
    bundle, metadata = panel._repr_mimebundle_()
    saved = Image.open(io.BytesIO(base64.b64decode(bundle["image/png"]))).convert("RGB")
    live = Image.open(io.BytesIO(panel.image.value)).convert("RGB")
    assert saved.width == live.width and saved.height > live.height
    band = np.asarray(saved)[: saved.height - live.height]
    assert (band != band[0, 0]).any(), "the band above the saved picture holds no text"
    assert np.array_equal(np.asarray(saved)[saved.height - live.height:], np.asarray(live))
    assert "as saved" in metadata["image/png"]["alt"] and STILL_NOTE.startswith("A still picture")
