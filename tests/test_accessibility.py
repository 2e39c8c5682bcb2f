"""Figures for everyone: alt text from the data, no meaning by colour alone, colours apart under colour blindness.

Every published figure is drawn once (from figures/records, no run) and checked:

* its ``alt`` is a sentence or more that names what is drawn and carries numbers;
* in every legend, the entries differ in something besides colour (line style, marker, hatch, kind of mark)
  or the Axes labels its series directly;
* every pair of colours that carry a legend entry in one Axes stays at least ``MIN_DELTA_E`` apart (CIEDE2000)
  under normal vision and simulated protanopia and deuteranopia (tests/cvd.py: Machado et al. 2009, severity 1).

The chapters' saved outputs are checked too: every PNG a chapter shows carries an alt text (so these fail on a
chapter saved before dpviz wrote them, until it is executed and saved again).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import Collection
from matplotlib.colors import to_hex, to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from cvd import distance

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "figures" / "records"
# CIEDE2000 between two series' colours in one Axes, after simulation. 2.3 is a just-noticeable difference on
# large patches; thin lines and small markers on a projector need several times that. 10 is where Dark2's pairs
# sit under deuteranopia and still read apart at a glance; every pair below also differs by line style, marker
# or hatch, so colour is never the only cue.
MIN_DELTA_E = 10.0
VISIONS = (None, "protanopia", "deuteranopia")
KINDS = re.compile(r"\b(chart|charts|diagram|diagrams|bars?|bands?|lines?|arrows?|points|plots?|grid|timeline|Gantt|star)\b",
                   re.IGNORECASE)


@pytest.fixture(scope="module")
def figures() -> dict:
    """Every published figure by name, drawn from the committed records."""
    from dpviz.course import GROUPS

    plans = {group.plan.name: group.plan for group in GROUPS}
    records = {name: plan.load(RECORDS) for name, plan in plans.items()}
    drawn = {}
    for group in GROUPS:
        for name, (fig, _) in group.draw(records[group.plan.name]).items():
            fig.canvas.draw()  # legends and layout as saved
            drawn[name] = fig
    return drawn


def test_every_published_figure_has_alt_text_from_its_data(figures):
    problems = []
    for name, fig in figures.items():
        alt = getattr(fig, "alt", "")
        if len(alt) < 40 or not KINDS.search(alt) or not re.search(r"\d", alt):
            problems.append(f"{name}: {alt!r}")
    assert not problems, "alt texts that do not say what is drawn, with numbers:\n" + "\n".join(problems)


def _handle_style(handle) -> tuple:
    """What tells a legend entry apart besides colour: its kind of mark, line style, marker (a ring or a dot), hatch."""
    if isinstance(handle, Line2D):
        style = handle.get_linestyle() if handle.get_linewidth() > 0 else "None"
        marker = handle.get_marker() if handle.get_marker() not in (None, "", " ") else "None"
        face = handle.get_markerfacecolor()
        hollow = marker != "None" and (to_rgba(face)[3] == 0 or to_hex(face) == "#ffffff")  # a ring, not a dot
        return ("line", style, marker, hollow, round(handle.get_linewidth() / 2))
    if isinstance(handle, Patch):
        return ("patch", handle.get_hatch() or "", handle.get_fill())
    if isinstance(handle, Collection):
        paths = handle.get_paths()
        return ("collection", type(handle).__name__, len(paths[0].vertices) if paths else 0,
                bool(len(handle.get_facecolor())) and to_rgba(handle.get_facecolor()[0])[3] > 0)
    return (type(handle).__name__,)


def _handle_colour(handle) -> str | None:
    try:
        if isinstance(handle, Line2D):
            drawn_line = handle.get_linewidth() > 0 and handle.get_linestyle() not in ("None", "", " ")
            colour = handle.get_color() if drawn_line or handle.get_marker() in (None, "None", "") \
                else handle.get_markerfacecolor()
            if drawn_line is False and to_rgba(colour)[3] == 0 or to_hex(colour) == "#ffffff":
                colour = handle.get_markeredgecolor()
        elif isinstance(handle, Patch):
            colour = handle.get_facecolor() if handle.get_fill() and to_rgba(handle.get_facecolor())[3] > 0 \
                else handle.get_edgecolor()
        elif isinstance(handle, Collection):
            face = handle.get_facecolor()
            colour = face[0] if len(face) and face[0][3] > 0 else handle.get_edgecolor()[0]
        else:
            return None
        return to_hex(colour)
    except (IndexError, ValueError, TypeError):
        return None


def _legends(fig):
    """(Axes or figure, legend) for every legend drawn."""
    for ax in fig.axes:
        if ax.get_legend() is not None:
            yield ax, ax.get_legend()
    for legend in fig.legends:
        yield fig, legend


def _labelled_directly(host, label: str) -> bool:
    """Whether the Axes writes ``label`` (its first words) beside its data as well as in the legend."""
    texts = host.texts if hasattr(host, "texts") else []
    head = " ".join(label.split()[:2]).lower()
    return bool(head) and any(head in t.get_text().lower() for t in texts)


def test_legend_entries_differ_in_more_than_colour(figures):
    problems = _colour_only(figures)
    assert not problems, "legend entries told apart by colour alone:\n" + "\n".join(problems)


def _colour_only(figures) -> list[str]:
    problems = []
    for name, fig in figures.items():
        for host, legend in _legends(fig):
            entries = [(h, t.get_text()) for h, t in zip(legend.legend_handles, legend.get_texts())
                       if _handle_colour(h) is not None]
            for (h1, l1), (h2, l2) in itertools.combinations(entries, 2):
                if _handle_colour(h1) == _handle_colour(h2):
                    continue  # the same colour: told apart by something else already, or not by colour at all
                if _handle_style(h1) != _handle_style(h2):
                    continue
                if _labelled_directly(host, l1) and _labelled_directly(host, l2):
                    continue
                problems.append(f"{name}: {l1!r} and {l2!r} differ only by colour ({_handle_style(h1)})")
    return problems


def test_colours_in_one_axes_stay_apart_under_colour_blindness(figures):
    problems = _too_close(figures)
    assert not problems, f"colours closer than ΔE2000 {MIN_DELTA_E}:\n" + "\n".join(problems)


def _too_close(figures) -> list[str]:
    problems = []
    for name, fig in figures.items():
        for host, legend in _legends(fig):
            colours = {}
            for handle, text in zip(legend.legend_handles, legend.get_texts()):
                colour = _handle_colour(handle)
                if colour is not None and to_rgba(colour)[3] > 0:
                    colours.setdefault(colour, text.get_text())
            for (c1, l1), (c2, l2) in itertools.combinations(colours.items(), 2):
                for vision in VISIONS:
                    d = distance(c1, c2, vision)
                    if d < MIN_DELTA_E:
                        problems.append(f"{name}: {l1!r} {c1} and {l2!r} {c2}: ΔE2000 {d:.1f} "
                                        f"({vision or 'normal vision'})")
    return problems


def test_the_palette_s_series_colours_stay_apart_under_colour_blindness():
    """The sets of colours dpviz gives series drawn together stay apart."""
    from dpviz.topics.measuring import plots_alpha_beta as alpha_beta
    from dpviz.topics.bigger_batch import plots as lr
    from dpviz.topics.one_group_per_device import plots_all_reduce as step5
    from dpviz.engine import style

    groups = {
        "meanings": (style.LAVENDER, style.CORAL, style.SLATE, style.GREY, style.RED, style.REPLICA),
        "links": tuple(style.LINK_COLOURS.values()),
        "learning-rate rules": (lr.K1_COLOUR, *lr.RULE_COLOURS.values()),
        "warm-ups": (lr.K1_COLOUR, *lr.WARMUP_COLOURS),
        "published systems": alpha_beta.SYSTEM_COLOURS,
        "ring chunks": step5.CHUNK_COLOURS[:4],
    }
    problems = [f"{group}: {c1} and {c2}: ΔE2000 {distance(c1, c2, v):.1f} ({v or 'normal vision'})"
                for group, colours in groups.items() for c1, c2 in itertools.combinations(colours, 2)
                for v in VISIONS if distance(c1, c2, v) < MIN_DELTA_E]
    assert not problems, "\n".join(problems)


def test_every_figure_a_chapter_shows_has_alt_text():
    """Every saved PNG output of every chapter carries an alt text (image metadata or an <img alt> beside it)."""
    missing = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for i, cell in enumerate(cells):
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if "image/png" not in data:
                    continue
                alt = out.get("metadata", {}).get("image/png", {}).get("alt", "")
                tag = re.search(r'<img [^>]*alt="([^"]+)"', "".join(data.get("text/html", "")))
                if len(alt.strip()) < 20 and not tag:
                    missing.append(f"{path.name} cell {i}: {''.join(cell['source']).splitlines()[:1]}")
    assert not missing, (f"{len(missing)} chapter figures without alt text (execute and save the chapter again; a "
                         "plain matplotlib Figure needs dpviz.engine.layout.figure instead):\n" + "\n".join(missing))


@pytest.fixture(scope="module")
def widget_figures() -> dict:
    """Every chapter's slider panel as it first appears, built from the committed records as the chapters build it."""
    from test_widget_panels import PANELS

    drawn = {}
    for name, build in PANELS.items():
        fig = build().fig
        fig.canvas.draw()
        drawn[f"{name} (slider panel)"] = fig
    return drawn


def test_slider_panel_legends_differ_in_more_than_colour(widget_figures):
    problems = _colour_only(widget_figures)
    assert not problems, "slider panels whose legend entries are told apart by colour alone:\n" + "\n".join(problems)


def test_slider_panel_colours_stay_apart_under_colour_blindness(widget_figures):
    problems = _too_close(widget_figures)
    assert not problems, f"slider panels with colours closer than ΔE2000 {MIN_DELTA_E}:\n" + "\n".join(problems)
