"""Steps 1–3: the landscape computations, the figures and the sliders, on real small runs.

The runs are recorded once for the module by real ranks (gloo on CPU); every
arrow a test checks is one those ranks (or one process's autograd) computed.
"""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from dpviz.topics.one_step import landscape  # noqa: E402
from dpviz.engine.data import line_data  # noqa: E402
from dpviz.engine.data import LINE_START  # noqa: E402
from dpviz.topics.one_step import plots as step1
from dpviz.topics.mini_batch import plots as step2
from dpviz.topics.average_of_averages import plots as step3  # noqa: E402
from dpviz.engine.schema import load as load_shipped  # noqa: E402
from dpviz.topics.ground_floor.records import Run  # noqa: E402
from dpviz.engine.paths import SHIPPED_DIR  # noqa: E402
from dpviz.topics.one_group_per_device.shipped import grid_name  # noqa: E402
from dpviz.topics.ground_floor.run_training import record_run  # noqa: E402
from dpviz.engine.slider import find, png_bytes  # noqa: E402
from dpviz.topics.one_step.widget import EtaFigure, eta_grid, eta_widget  # noqa: E402
from dpviz.topics.mini_batch.widget import BatchFigure, batch_widget  # noqa: E402
from dpviz.topics.mini_batch.widget import _batch as batch_of  # noqa: E402
from dpviz.topics.average_of_averages.widget import AverageFigure, average_widget, regroup  # noqa: E402
from widget_checks import assert_blit_is_right, decode  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6  # float32 means taken in a different order agree to rounding


def record(**config):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ranks share")  # gradients, not timings, are tested here
        return record_run(steps=1, stall_timeout=180, **config)


@pytest.fixture(scope="module")
def runs():
    """Five small real runs: random and biased single-rank batches, k = 3 equal shards, unequal shards two ways."""
    return {
        "random": record(k=1, b=16),
        "biased": record(k=1, b=16, sampling="biased"),
        "equal": record(k=3, b=8),
        "plain": record(k=2, shard_sizes=(2, 14), mean="plain"),
        "weighted": record(k=2, shard_sizes=(2, 14), mean="weighted"),
    }


@pytest.fixture(scope="module")
def data():
    return line_data()


@pytest.fixture
def fig_with_sibling():
    """A figure with the Axes to draw on and a sibling that must not change; closes the figure afterwards."""
    fig, (ax, sibling) = plt.subplots(1, 2)
    sibling.plot([0, 1], [5, 6], label="sibling")
    sibling.set_xlim(-3, 3)
    sibling.set_title("untouched")
    yield fig, ax, sibling
    plt.close(fig)


def snapshot(sibling):
    return (sibling.get_xlim(), sibling.get_ylim(), len(sibling.get_children()), sibling.get_title(),
            dict(matplotlib.rcParams))


def quiver(ax, gid):
    return find(ax, gid)


def tips(q) -> np.ndarray:
    """Where each arrow of a quiver ends, in data coordinates (all our arrows start at the origin)."""
    return np.column_stack([q.X + q.U, q.Y + q.V])


def legend_labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


# --- landscape: the numbers behind Step 1 ---

def test_loss_along_is_the_real_mse_of_the_line_model(data):
    x, y = data
    values = np.linspace(-2, 3, 7, dtype=np.float32)
    got = landscape.loss_along(x, y, (0.5, 1.0), knob=0, values=values)
    expected = [np.mean((w * x + 1.0 - y) ** 2) for w in values]
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    got_b = landscape.loss_along(x, y, (0.5, 1.0), knob=1, values=values)
    np.testing.assert_allclose(got_b, [np.mean((0.5 * x + b - y) ** 2) for b in values], rtol=1e-5)


def test_descent_path_takes_real_sgd_steps(data):
    x, y = data
    eta = 0.1
    path = landscape.descent_path(x, y, eta=eta, steps=6)
    assert path["theta"].shape == (7, 2) and path["loss"].shape == (7,) and path["grad"].shape == (7, 2)
    np.testing.assert_array_equal(path["theta"][0], np.float32(LINE_START))
    np.testing.assert_allclose(path["theta"][1:], path["theta"][:-1] - eta * path["grad"][:-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(path["grad"][0], landscape.full_grad(x, y, LINE_START), rtol=1e-6)
    assert np.all(np.diff(path["loss"]) < 0), "a small η must lower the loss every step"
    # the gradient from autograd is the analytic one of the mean squared error
    w, b = LINE_START
    residual = w * x + b - y
    np.testing.assert_allclose(path["grad"][0], [np.mean(2 * residual * x), np.mean(2 * residual)], rtol=1e-4)


def test_descent_along_one_knob_freezes_the_other_and_large_eta_diverges(data):
    x, y = data
    path = landscape.descent_path(x, y, eta=0.1, steps=4, knob=0)
    assert np.all(path["theta"][:, 1] == np.float32(LINE_START[1]))
    np.testing.assert_allclose(path["loss"], landscape.loss_along(x, y, LINE_START, knob=0, values=path["theta"][:, 0]),
                               rtol=1e-5)
    wild = landscape.descent_path(x, y, eta=1.5, steps=4, knob=0)
    assert wild["loss"][-1] > wild["loss"][0]
    assert len(landscape.descent_path(x, y, eta=0.1, steps=0)["theta"]) == 1


@pytest.mark.parametrize("call, name", [
    (lambda x, y: landscape.descent_path(x, y, eta=0, steps=3), "eta"),
    (lambda x, y: landscape.descent_path(x, y, eta=-1.0, steps=3), "eta"),
    (lambda x, y: landscape.descent_path(x, y, eta=0.1, steps=-1), "steps"),
    (lambda x, y: landscape.descent_path(x, y, eta=0.1, steps=2.5), "steps"),
    (lambda x, y: landscape.descent_path(x, y, eta=0.1, steps=3, knob=2), "knob"),
    (lambda x, y: landscape.loss_along(x, y, (0, 0), knob=3, values=[0.0]), "knob"),
    (lambda x, y: landscape.loss_along(x, y, (0, 0), values=[]), "values"),
    (lambda x, y: landscape.loss_along(x, y, (0, 0, 0), values=[1.0]), "theta"),
    (lambda x, y: landscape.loss_along(x, y[:5], (0, 0), values=[1.0]), "x and y"),
    (lambda x, y: landscape.step1_data(x, y, eta=0.0), "eta"),
])
def test_bad_landscape_arguments_name_the_argument(data, call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call(*data)


# --- Step 1 figure ---

def test_plot_loss_along_draws_the_curve_dot_arrow_and_path(data, fig_with_sibling):
    fig, ax, sibling = fig_with_sibling
    before = snapshot(sibling)
    curve = landscape.step1_data(*data, knob=0, eta=0.1, steps=5)
    assert step1.plot_loss_along(curve, ax=ax) is ax
    assert snapshot(sibling) == before

    line = find(ax, step1.GIDS["curve"])
    np.testing.assert_array_equal(line.get_xdata(), curve.values)
    np.testing.assert_array_equal(line.get_ydata(), curve.loss)
    dot = find(ax, step1.GIDS["dot"])
    assert (dot.get_xdata()[0], dot.get_ydata()[0]) == (curve.theta[0], curve.path_loss[0])
    path = find(ax, step1.GIDS["path"])
    assert len(path.get_xdata()) == curve.steps + 1 == 6
    # the red arrow is one real step −η ∂L/∂w, and it lands where the path's next dot is
    arrow = find(ax, step1.GIDS["arrow"])
    (x0, _), (x1, _) = arrow._posA_posB
    np.testing.assert_allclose(x1 - x0, -0.1 * curve.grad[0], rtol=1e-6)
    np.testing.assert_allclose(x1, path.get_xdata()[1], rtol=1e-5)
    assert curve.grad[0] < 0 < x1 - x0, "downhill: the step goes against the slope"
    assert len(legend_labels(ax)) == 4
    assert "η = 0.1" in ax.get_title() and "falls" in ax.get_title()
    assert ax.get_xlabel() and ax.get_ylabel()


def test_plot_loss_along_without_ax_and_when_diverging(data):
    plt.figure()
    try:
        curve = landscape.step1_data(*data, knob=1, eta=1.5, steps=4)
        ax = step1.plot_loss_along(curve, show_path=False)
        assert ax is plt.gca()
        assert "diverging" in ax.get_title()
        assert not [a for a in ax.get_children() if a.get_gid() == step1.GIDS["path"]]
    finally:
        plt.close("all")


# --- Step 2 figures ---

def test_example_grads_red_tip_is_the_recorded_mean(runs, fig_with_sibling):
    fig, ax, sibling = fig_with_sibling
    run = runs["random"]
    before = snapshot(sibling)
    step2.plot_example_grads(run, ax=ax)
    assert snapshot(sibling) == before

    examples = quiver(ax, step2.GIDS["examples"])
    recorded = run.example_grad[0][run.example_rank == 0]
    assert examples.N == 16
    np.testing.assert_array_equal(tips(examples), recorded)
    mean = tips(quiver(ax, step2.GIDS["mean"]))[0]
    np.testing.assert_allclose(mean, recorded.mean(axis=0), rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(mean, run.local_grad[0, 0])
    assert "b = 16" in ax.get_title() and "random" in ax.get_title()
    assert len(legend_labels(ax)) == 2 and ax.get_xlabel().startswith("∂L/∂w")


def test_a_biased_grab_points_away_from_the_whole_data_gradient(runs):
    fig, axes = plt.subplots(1, 2)
    try:
        angles = {}
        for ax, name in zip(axes, ("random", "biased")):
            run = runs[name]
            reference = landscape.full_grad(run.x, run.y, run.params[0, 0])
            step2.plot_example_grads(run, ax=ax, reference=reference)
            np.testing.assert_allclose(find(ax, step2.GIDS["reference"]).xy, reference)
            angles[name] = landscape.angle_deg(run.local_grad[0, 0], reference)
            assert f"{angles[name]:.0f}°" in legend_labels(ax)[2]
        assert (runs["biased"].x[runs["biased"].batch_index[0], 0] >= 0).all()
        assert "biased" in axes[1].get_title()
        assert angles["biased"] > 30 > angles["random"], angles
    finally:
        plt.close(fig)


def test_mean_vs_sum_sum_is_b_times_the_mean(runs):
    fig, ax = plt.subplots()
    try:
        run = runs["random"]
        step2.plot_mean_vs_sum(run, ax=ax)
        total = tips(quiver(ax, step2.GIDS["sum"]))[0]
        mean = tips(quiver(ax, step2.GIDS["mean"]))[0]
        np.testing.assert_allclose(total, 16 * mean, rtol=RTOL, atol=1e-5)
        assert len(legend_labels(ax)) == 3
    finally:
        plt.close(fig)


def test_plot_example_grads_ax_none_and_other_ranks(runs):
    plt.figure()
    try:
        run = runs["equal"]
        ax = step2.plot_example_grads(run, rank=2)
        assert ax is plt.gca()
        assert quiver(ax, step2.GIDS["examples"]).N == 8
        np.testing.assert_array_equal(tips(quiver(ax, step2.GIDS["mean"]))[0], run.local_grad[0, 2])
    finally:
        plt.close("all")


@pytest.mark.parametrize("kwargs, name", [(dict(step=1), "step"), (dict(rank=3), "rank"), (dict(step=-1), "step")])
def test_bad_step2_arguments_name_them(runs, kwargs, name):
    with pytest.raises(ValueError, match=name):
        step2.plot_example_grads(runs["equal"], **kwargs)


def test_a_run_without_per_example_gradients_is_refused():
    shipped = load_shipped(SHIPPED_DIR / grid_name(1, 4))  # a real line-model record, less its optional array
    run = Run(shipped.meta, {name: a for name, a in shipped.arrays.items() if name != "example_grad"})
    with pytest.raises(ValueError, match="run must be a line-model Run"):
        step2.plot_example_grads(run)


# --- Step 3 figures ---

def test_big_average_and_group_averages_share_the_red_tip(runs, fig_with_sibling):
    fig, ax, sibling = fig_with_sibling
    run = runs["equal"]
    before = snapshot(sibling)
    step3.plot_big_average(run, ax=ax)
    assert snapshot(sibling) == before
    examples = quiver(ax, step3.GIDS["examples"])
    assert examples.N == 24
    big = tips(quiver(ax, step3.GIDS["big"]))[0]
    np.testing.assert_array_equal(big, run.big_grad[0])
    np.testing.assert_allclose(big, run.example_grad[0].mean(axis=0), rtol=RTOL, atol=ATOL)
    assert "24" in ax.get_title() and len(legend_labels(ax)) == 2

    fig2, right = plt.subplots()
    try:
        step3.plot_group_averages(run, ax=right)
        groups = quiver(right, step3.GIDS["groups"])
        assert groups.N == 3
        np.testing.assert_array_equal(tips(groups), run.local_grad[0])
        red = tips(quiver(right, step3.GIDS["mean"]))[0]
        np.testing.assert_array_equal(red, run.reduced_grad[0, 0])
        np.testing.assert_allclose(red, run.local_grad[0].mean(axis=0), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(red, big, rtol=RTOL, atol=ATOL)
        text = find(right, step3.GIDS["difference"]).get_text()
        assert "float rounding" in text or "same bits" in text
        assert len(legend_labels(right)) == 3
    finally:
        plt.close(fig2)


def test_unequal_shards_plain_mean_misses_weighted_hits(runs):
    fig, (a, b) = plt.subplots(1, 2)
    try:
        step3.plot_group_averages(runs["plain"], ax=a)
        step3.plot_group_averages(runs["weighted"], ax=b)
        for ax, name in ((a, "plain"), (b, "weighted")):
            run = runs[name]
            red = tips(quiver(ax, step3.GIDS["mean"]))[0]
            np.testing.assert_array_equal(red, run.reduced_grad[0, 0])
            ring = find(ax, step3.GIDS["big_tip"])
            np.testing.assert_array_equal([ring.get_xdata()[0], ring.get_ydata()[0]], run.big_grad[0])
            assert {t.get_text() for t in ax.texts} >= {"$b_i$=2", "$b_i$=14"}
        plain, weighted = runs["plain"], runs["weighted"]
        miss = np.abs(plain.reduced_grad[0, 0] - plain.big_grad[0]).max()
        assert miss > 1e-3 * np.abs(plain.big_grad[0]).max()
        assert "real miss" in find(a, step3.GIDS["difference"]).get_text()
        np.testing.assert_allclose(weighted.reduced_grad[0, 0], weighted.big_grad[0], rtol=RTOL, atol=ATOL)
        assert "real miss" not in find(b, step3.GIDS["difference"]).get_text()
        assert "weighted" in legend_labels(b)[1]
    finally:
        plt.close(fig)


def test_step3_plots_with_ax_none(runs):
    plt.figure()
    try:
        assert step3.plot_group_averages(runs["equal"]) is plt.gca()
        with pytest.raises(ValueError, match="step"):
            step3.plot_big_average(runs["equal"], step=4)
    finally:
        plt.close("all")


# --- widgets ---

def artists(ax, gids):
    return [find(ax, gid) for gid in gids]


def report(record_property, name, sf):
    median_ms = 1000 * float(np.median(sf.timings[1:]))
    record_property(f"{name}_median_ms", median_ms)
    print(f"{name}: median {median_ms:.0f} ms over {len(sf.timings) - 1} moves")
    assert median_ms < 2000, "a slider move must not take seconds"


def test_eta_widget_swaps_precomputed_real_paths_in_place(data, record_property):
    sf = eta_widget(*data, steps=6)
    ax = sf.fig.axes[0]
    path, arrow = artists(ax, [step1.GIDS["path"], step1.GIDS["arrow"]])
    before_png, before_y = sf.png(), path.get_ydata().copy()
    for eta in (0.02, 0.3, 0.7, 1.5, 0.05, 0.1):
        sf.set(eta=eta)
    assert artists(ax, [step1.GIDS["path"], step1.GIDS["arrow"]]) == [path, arrow]
    assert "η = 0.1" in ax.get_title()
    sf.set(eta=1.5)
    assert "diverging" in ax.get_title()
    assert not np.array_equal(path.get_ydata(), before_y) and sf.png() != before_png
    expected = landscape.descent_path(*data, eta=sf.controls["eta"].value, steps=6, knob=0)
    np.testing.assert_allclose(path.get_xdata(), expected["theta"][:, 0], rtol=1e-5)
    np.testing.assert_allclose(path.get_ydata(), expected["loss"], rtol=1e-5)
    report(record_property, "eta_widget", sf)


def test_batch_widget_red_tip_is_the_mean_of_the_first_b(runs, record_property):
    random, biased = runs["random"], runs["biased"]
    sf = batch_widget(random, biased=biased, b=4)
    ax = sf.fig.axes[0]
    examples, mean = artists(ax, [step2.GIDS["examples"], step2.GIDS["mean"]])
    first_png = sf.png()
    for b in (1, 7, 16):
        sf.set(b=b)
        grads = random.example_grad[0][:b]
        np.testing.assert_array_equal(tips(examples)[:b], grads)
        assert not tips(examples)[b:].any(), "the unused arrows have zero length"
        np.testing.assert_allclose(tips(mean)[0], grads.mean(axis=0), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(tips(mean)[0], random.local_grad[0, 0], rtol=RTOL, atol=ATOL)
    assert sf.png() != first_png
    sf.set(grab="biased")
    np.testing.assert_allclose(tips(mean)[0], biased.local_grad[0, 0], rtol=RTOL, atol=ATOL)
    assert "biased" in ax.get_title() and "b = 16" in ax.get_title()
    assert f"{landscape.angle_deg(tips(mean)[0], landscape.full_grad(biased.x, biased.y, biased.params[0, 0])):.0f}°" \
        in ax.get_title()
    assert artists(ax, [step2.GIDS["examples"], step2.GIDS["mean"]]) == [examples, mean]
    for b in range(1, 17, 3):
        sf.set(b=b)
    report(record_property, "batch_widget", sf)
    with pytest.raises(ValueError, match="biased"):
        batch_widget(random, biased=random)
    with pytest.raises(ValueError, match="b must"):
        batch_widget(random, b=17)


def test_average_widget_regroups_the_recorded_batch(runs, record_property):
    run = runs["equal"]
    sf = average_widget(run, k_max=4)
    left, right = sf.fig.axes
    assert sf.values == {"k": 3, "b": 8}
    pool = artists(left, [step3.GIDS["examples"], step3.GIDS["big"]]) + \
        artists(right, [step3.GIDS["groups"], step3.GIDS["mean"], step3.GIDS["difference"]])
    first_png = sf.png()
    grads = run.example_grad[0]
    for k, b in ((1, 24), (2, 5), (4, 6), (3, 8)):
        sf.set(k=k, b=b)
        examples, big, groups, mean, gap = pool
        assert (np.abs(tips(examples)).sum(axis=1) > 0).sum() == k * b
        np.testing.assert_allclose(tips(big)[0], grads[: k * b].mean(axis=0), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(tips(groups)[:k], grads[: k * b].reshape(k, b, 2).mean(axis=1), rtol=RTOL, atol=ATOL)
        assert not tips(groups)[k:].any()
        np.testing.assert_allclose(tips(mean)[0], tips(big)[0], rtol=RTOL, atol=ATOL)
        assert "measured gap" in gap.get_text() and "real miss" not in gap.get_text()
        assert (sf.png() == first_png) == ((k, b) == (3, 8)), "the picture changes with k and b, and only with them"
    # the recorded grouping: the widget's group means are what the ranks computed, to rounding
    np.testing.assert_allclose(tips(pool[2])[:3], run.local_grad[0], rtol=RTOL, atol=ATOL)
    sf.set(k=4, b=20)
    assert sf.values["b"] == 6 and sf.controls["b"].max == 6, "b's slider ends where k·b fills the 24 recorded examples"
    assert "b cut to" not in right.get_title()
    assert pool == artists(left, [step3.GIDS["examples"], step3.GIDS["big"]]) + \
        artists(right, [step3.GIDS["groups"], step3.GIDS["mean"], step3.GIDS["difference"]])
    for b in range(1, 9):
        sf.set(b=b)
    report(record_property, "average_widget", sf)
    with pytest.raises(ValueError, match="k must"):
        average_widget(run, k=0)
    with pytest.raises(ValueError, match="k_max"):
        average_widget(run, k_max=25)


def test_eta_widget_blitted_frames_match_full_redraws(data):
    sf = eta_widget(*data, steps=6)
    for eta in (0.02, 1.5, 0.3, 0.9, 0.1):
        sf.set(eta=eta)
        assert_blit_is_right(sf, f"eta={eta}")


def test_batch_widget_blitted_frames_match_full_redraws(runs):
    sf = batch_widget(runs["random"], biased=runs["biased"], b=4)
    for move in ({"b": 1}, {"b": 16}, {"grab": "biased"}, {"b": 7}, {"grab": "random"}, {"b": 2}):
        sf.set(**move)
        assert_blit_is_right(sf, str(move))


def test_average_widget_blitted_frames_match_full_redraws(runs):
    sf = average_widget(runs["equal"], k_max=4)
    for move in ({"k": 1}, {"b": 24}, {"k": 4, "b": 20}, {"k": 2}, {"b": 3}):
        sf.set(**move)
        assert_blit_is_right(sf, str(move))


def ids(fig):
    return [id(a) for a in fig.findobj()]


def test_eta_figure_update_sets_the_precomputed_path_on_the_same_artists(data):
    etas = eta_grid(0.01, 1.5, 7)
    figure = EtaFigure(*data, etas, steps=4)
    before = ids(figure.fig)
    for eta in etas[::-1]:
        figure.update(eta=float(eta))
        curve = figure.curves[figure.nearest(eta)]
        np.testing.assert_array_equal(figure.path.get_ydata(), curve.path_loss)
        assert figure.ax.get_title() == step1.step_title(curve) and f"η = {eta:.3g}" in figure.ax.get_title()
        start, end = figure.arrow._posA_posB
        assert end == pytest.approx(step1.arrow_end(curve))
    figure.update(eta=0.0105)  # between grid points: the nearest on the log scale
    assert figure.ax.get_title().startswith("η = 0.01:")
    assert ids(figure.fig) == before


def test_batch_figure_update_shows_the_first_b_and_their_mean(runs):
    run, biased = runs["random"], runs["biased"]
    figure = BatchFigure(run, {"random": batch_of(run, 0, 0), "biased": batch_of(biased, 0, 0)})
    before = ids(figure.fig)
    for b, grab in ((3, "random"), (16, "biased"), (1, "random")):
        figure.update(b=b, grab=grab)
        source = (run if grab == "random" else biased).example_grad[0]
        np.testing.assert_allclose([figure.mean.U[0], figure.mean.V[0]], source[:b].mean(axis=0))
        assert np.count_nonzero(np.hypot(figure.examples.U, figure.examples.V)) == b
        assert figure.ax.get_title().startswith(f"b = {b}, ")
    assert ids(figure.fig) == before


def test_average_figure_update_regroups_on_the_same_artists(runs):
    run = runs["equal"]
    figure = AverageFigure(run, k=3, b=8, k_max=4)
    before = ids(figure.fig)
    grads = run.example_grad[0]
    for k, b in ((2, 5), (4, 6), (1, 24), (3, 9)):
        figure.update(k=k, b=b)
        used = min(b, len(grads) // k)
        big, groups, mean = regroup(grads, k, used)
        np.testing.assert_array_equal(figure.group_arrows.U[:k], groups[:, 0])
        assert not np.any(figure.group_arrows.U[k:])
        np.testing.assert_array_equal([figure.mean_arrow.U[0], figure.mean_arrow.V[0]], mean)
        assert ("b cut to" in figure.right.get_title()) == (used < b)
    assert ids(figure.fig) == before


def test_png_bytes_is_a_png_of_the_canvas(data):
    sf = eta_widget(*data, steps=3)
    rgba = np.asarray(sf.fig.canvas.buffer_rgba())
    png = png_bytes(rgba)
    assert png.startswith(b"\x89PNG")
    np.testing.assert_array_equal(decode(png), rgba.astype(np.int16))


def test_regroup_is_the_average_of_averages():
    grads = torch.randn(12, 2, generator=torch.Generator().manual_seed(0)).numpy()
    big, groups, mean = regroup(grads, 3, 4)
    assert groups.shape == (3, 2)
    np.testing.assert_allclose(mean, big, rtol=RTOL, atol=ATOL)


def test_eta_widget_bad_arguments(data):
    with pytest.raises(ValueError, match="eta_min"):
        eta_widget(*data, eta_min=0)
    with pytest.raises(ValueError, match="eta"):
        eta_widget(*data, eta=5.0)
    with pytest.raises(ValueError, match="knob"):
        eta_widget(*data, knob=2)
