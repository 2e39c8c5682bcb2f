"""The sliders of chapters 00 and 08: a move changes only the figure's own artists, to numbers worked out beforehand
(the cost model's speedup; the recorded run's step), and a blitted frame looks like a full draw."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from dpviz.topics.whole_picture.plots_summary import GIDS, plot_summary  # noqa: E402
from dpviz.topics.one_group_per_device import shipped  # noqa: E402
from dpviz.topics.ground_floor import timing  # noqa: E402
from dpviz.topics.ground_floor.costmodel import speedup  # noqa: E402
from dpviz.engine.slider import find  # noqa: E402
from dpviz.topics.ground_floor.widget import KS, RATIOS, speedup_widget  # noqa: E402
from dpviz.topics.whole_picture.widget import summary_widget  # noqa: E402
from widget_checks import assert_blit_is_right  # noqa: E402


# --- chapter 00: k and T_comm/T_compute ---

def test_speedup_widget_shows_the_cost_models_numbers():
    sf = speedup_widget(k=4, ratio=0.05)
    view = sf.view
    before = sf.image.value
    sf.set(k=16, ratio=0.2)
    s = speedup(1.0, 16, 0.2)
    assert sf.image.value != before
    assert np.allclose(view.marker.get_data(), ([16], [s]))
    assert np.isclose(view.compute.get_width(), 1 / 16) and np.isclose(view.comm.get_width(), 0.2)
    assert np.isclose(view.comm.get_x(), 1 / 16)
    assert np.allclose(view.line.get_ydata()[[0, 1, 63]], [1.0, speedup(1.0, 2, 0.2), speedup(1.0, 64, 0.2)])
    assert np.isclose(view.ceiling.get_ydata()[0], 5.0) and view.ceiling.get_visible()
    row = view.rows[KS.index(16)]
    assert row.get_text().split()[:2] == ["16", f"{s:.2f}"] and row.get_color() != view.rows[0].get_color()
    assert f"S = {s:.3g}" in sf.status.value and "modeled" in sf.status.value


def test_speedup_widget_at_the_edges():
    sf = speedup_widget(k=1, ratio=1.0)
    assert sf.view.comm.get_width() == 0  # nobody to sync with on one device
    assert np.allclose(sf.view.marker.get_data(), ([1], [1.0]))
    sf.set(ratio=0.0, k=64)
    assert np.allclose(sf.view.line.get_ydata(), np.arange(1, 65))  # free sync: S = k
    assert not sf.view.ceiling.get_visible()
    assert_blit_is_right(sf, "speedup widget, free sync")


@pytest.mark.parametrize("k, ratio", [(1, 0.05), (16, 0.02), (64, 1.0), (2, 0.0)])
def test_speedup_widget_blitted_frames_match_full_redraws(k, ratio):
    sf = speedup_widget()
    sf.set(k=k, ratio=ratio)
    assert_blit_is_right(sf, f"speedup widget at k={k}, ratio={ratio}")


@pytest.mark.parametrize("kwargs, name", [(dict(k=3), "k"), (dict(ratio=0.3), "ratio")])
def test_speedup_widget_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        speedup_widget(**kwargs)
    assert set(RATIOS) >= {0.0, 1.0}


# --- chapter 08: the summary, step by step ---

@pytest.fixture(scope="module")
def run():
    return shipped.drift_runs()[("sgd", True)]  # k = 4, b = 8, 20 real SGD steps


def texts(ax):
    return sorted(t.get_text() for t in ax.texts if t.get_visible())


@pytest.mark.parametrize("step", [7, 19, 0])
def test_summary_widget_shows_what_plot_summary_draws_for_that_step(run, step):
    times = timing.step_times(run)
    sf = summary_widget(run, times, step=3)
    sf.set(step=step)
    fresh = Figure(figsize=(9, 9)).subplots()
    plot_summary(run, times, step=step, ax=fresh)
    ax = sf.view.ax
    assert texts(ax) == texts(fresh)
    assert ax.get_title(loc="left") == fresh.get_title(loc="left")
    for name in ("local", "local_faint", "reduced"):
        mine, theirs = find(ax, GIDS[name]), find(fresh, GIDS[name])
        assert np.allclose(mine.U, theirs.U) and np.allclose(mine.V, theirs.V) and np.isclose(mine.scale, theirs.scale)
    dots = [line.get_xydata() for line in ax.lines if line.get_marker() == "o"]
    expected = [line.get_xydata() for line in fresh.lines if line.get_marker() == "o"]
    assert len(dots) == run.k and all(np.allclose(a, b) for a, b in zip(dots, expected))
    assert_blit_is_right(sf, f"summary widget at step {step}")


def test_summary_widget_moves_change_the_image_and_refuse_a_step_past_the_run(run):
    sf = summary_widget(run, timing.step_times(run))
    first = sf.image.value
    sf.set(step=10)
    assert sf.image.value != first
    assert "step 10 of a real run" in sf.view.title.get_text()
    with pytest.raises(ValueError, match="step"):
        sf.view.update(step=run.steps)


# --- every slider: a callback still busy when newer values arrive draws only the newest ---

@pytest.mark.timeout(360)
def test_a_busy_slider_draws_only_the_newest_value_in_jupyterlab(tmp_path):
    """A slider pressed ten times while its callback takes 300 ms a move draws, each time the callback is free, the
    newest value, and last the one it ended on: JupyterLab's widgets front end holds a control's newer values while
    the kernel is busy and sends only the newest, so no queue of stale frames builds up
    (benchmarks/bench_browser_sliders.py's busy check, alone)."""
    import sys
    from pathlib import Path

    pytest.importorskip("playwright")
    import browser_support

    chromium = browser_support.find_chromium()
    if chromium is None:
        pytest.skip(browser_support.NO_CHROMIUM)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_browser_sliders as bench

    _, busy = bench.measure(chromium, tmp_path, [], 0, timeout=60)
    assert busy["drawn"][0] == 0 and bench.only_the_newest(busy), busy
