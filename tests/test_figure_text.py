"""Every published figure reads from the back of a classroom: in the book's column and in JupyterLab.

Each figure of every group is drawn from the committed records behind figures/ and measured as a page shows
it (:mod:`figure_text`): its smallest text is at least MIN_TEXT_PX tall, its provenance is a one-line caption
under it rather than small type inside it, and no legend sits on the data it explains.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle
from matplotlib.quiver import Quiver

from dpviz.course import GROUPS
from dpviz.engine.schema import provenance
from figure_text import BOOK_COLUMN_PX, LAB_OUTPUT_PX, MIN_TEXT_PX, shown_texts, smallest_text

RECORDS = Path(__file__).resolve().parents[1] / "figures" / "records"
STEP_PX = 2.0     # a drawn line is checked every STEP_PX pixels along it, not only at its data points
INSET_PX = 2.0    # a legend's box is shrunk by this much: a line grazing its empty border is not under it


@pytest.fixture(scope="module")
def drawn():
    """{figure name: (Figure, the records it came from)} for every group, from the committed records."""
    plans = {group.plan.name: group.plan for group in GROUPS}
    records = {name: plan.load(RECORDS) for name, plan in plans.items()}
    figs = {}
    for group in GROUPS:
        figs.update(group.draw(records[group.plan.name]))
    yield figs
    for fig, _ in figs.values():
        plt.close(fig)


@pytest.mark.parametrize("where, column_px", [("the book's column", BOOK_COLUMN_PX),
                                              ("JupyterLab's output area", LAB_OUTPUT_PX)])
def test_every_text_is_big_enough_where_it_is_shown(drawn, where, column_px):
    small = []
    for name, (fig, _) in drawn.items():
        found = smallest_text(fig, column_px)
        if found.px < MIN_TEXT_PX:
            small.append(f"{name}: {found.text[:60]!r} is {found.px:.1f} px (the {found.natural_px} px PNG shown "
                         f"{found.shown_px:.0f} px wide)")
    assert not small, f"text under {MIN_TEXT_PX} px in {where} ({column_px} px):\n" + "\n".join(small)


def test_every_figure_has_a_one_line_caption(drawn):
    for name, (fig, _) in drawn.items():
        caption = getattr(fig, "caption", "")
        assert caption and caption.strip(), f"{name}: no caption"
        assert "\n" not in caption, f"{name}: the caption is more than one line: {caption!r}"


def provenance_words(source) -> tuple[list[str], str]:
    """What says which run made a figure (the record's description and date, or a computation's name), and of
    those the words its caption must hold (the date it ran, or the computation's name)."""
    entry = provenance(source)
    if "source" in entry:
        return [entry["source"]], entry["source"]
    date = str(entry["date"])[:10]
    return [entry["describe"], date], date


def test_provenance_is_in_the_caption_not_in_the_image(drawn):
    for name, (fig, sources) in drawn.items():
        texts = [text for text, _box, _drawn in shown_texts(fig)]  # one draw a figure, whatever its sources
        for words, needed in map(provenance_words, sources):
            for text in texts:
                for word in words:
                    assert word not in text.get_text(), (f"{name}: the image says {word!r} in "
                                                         f"{text.get_text()[:80]!r}; it belongs in the caption")
            assert needed in fig.caption, f"{name}: the caption does not say {needed!r}: {fig.caption!r}"


def along(xy: np.ndarray) -> np.ndarray:
    """Points every STEP_PX pixels along the polyline ``xy`` (n, 2), display coordinates; breaks at non-finite points."""
    out = [xy]
    for a, b in zip(xy[:-1], xy[1:]):
        if np.isfinite(a).all() and np.isfinite(b).all():
            n = int(np.hypot(*(b - a)) // STEP_PX)
            if n > 1:
                out.append(a + np.linspace(0, 1, n)[:, None] * (b - a))
    return np.vstack(out)


def data_points(ax, renderer):
    """(what, points (n, 2) in display pixels, radius in pixels) for the data drawn in ``ax``.

    Lines (axhline and axvline too: a modeled level is data), with their markers;
    patches (a bar's whole area, sampled on a grid; any other patch along its outline); scatter
    offsets with their marker radius; quiver arrows along their polygons.
    """
    for line in ax.lines:
        if not line.get_visible() or len(line.get_xydata()) == 0:
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        drawn_line = line.get_linestyle() not in ("None", "", " ") and line.get_linewidth() > 0
        radius = line.get_markersize() * renderer.points_to_pixels(1) / 2 if line.get_marker() not in (None, "None", "", " ") else 0
        yield f"line {line.get_label() or line.get_gid()!r}", along(xy) if drawn_line else xy, radius
    for patch in ax.patches:
        if not patch.get_visible():
            continue
        if isinstance(patch, Rectangle):
            box = patch.get_window_extent(renderer)
            xs, ys = np.arange(box.x0, box.x1 + 1, STEP_PX), np.arange(box.y0, box.y1 + 1, STEP_PX)
            grid = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)
            yield f"bar {patch.get_label() or patch.get_gid()!r}", grid, 0
        else:
            path = patch.get_transform().transform_path(patch.get_path())
            yield f"patch {type(patch).__name__}", along(path.vertices), 0
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, Quiver):
            offsets = collection.get_offset_transform().transform(collection.get_offsets())
            for path, offset in zip(collection.get_paths(), offsets):
                yield f"arrow {collection.get_gid()!r}", along(collection.get_transform().transform(path.vertices) + offset), 0
        elif isinstance(collection, PathCollection) and len(collection.get_offsets()):
            sizes = collection.get_sizes()
            radius = float(np.sqrt(sizes.max()) * renderer.points_to_pixels(1) / 2) if len(sizes) else 0
            yield f"points {collection.get_label() or collection.get_gid()!r}", \
                collection.get_offset_transform().transform(collection.get_offsets()), radius


def legend_overlaps(fig) -> list[str]:
    """What data each legend of ``fig`` covers: every drawn point inside a legend's box (less INSET_PX), as words."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    found = []
    for legend in legends:
        if not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer).padded(-INSET_PX)
        label = legend.get_texts()[0].get_text() if legend.get_texts() else "?"
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            frame = ax.get_window_extent(renderer)
            for what, points, radius in data_points(ax, renderer):
                points = points[np.isfinite(points).all(axis=1)]
                shown = ((points[:, 0] >= frame.x0) & (points[:, 0] <= frame.x1)
                         & (points[:, 1] >= frame.y0) & (points[:, 1] <= frame.y1))  # clipped to the Axes
                inside = ((points[:, 0] > box.x0 - radius) & (points[:, 0] < box.x1 + radius)
                          & (points[:, 1] > box.y0 - radius) & (points[:, 1] < box.y1 + radius))
                if (shown & inside).any():
                    found.append(f"the legend starting {label[:40]!r} covers {what} "
                                 f"({int((shown & inside).sum())} points) in the Axes {ax.get_title(loc='left')[:40] or ax.get_title()[:40]!r}")
    return found


def test_no_legend_covers_data(drawn):
    covered = [f"{name}: {words}" for name, (fig, _) in drawn.items() for words in legend_overlaps(fig)]
    assert not covered, "legends over data:\n" + "\n".join(covered)
