"""Steps 4 and 5: the device boxes, the all-reduce funnel, replica parameters, the ring and server schedules,
their sliders, and the shipped records, all on real runs."""

import copy

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402
from matplotlib.quiver import Quiver  # noqa: E402

from dpviz.topics.one_group_per_device import shipped  # noqa: E402
from dpviz.engine.paths import SHIPPED_DIR  # noqa: E402
from dpviz.topics.one_group_per_device.plots import plot_devices  # noqa: E402
from dpviz.topics.one_group_per_device.plots_all_reduce import (
    plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule,
)
from dpviz.topics.all_reduce.run_schedule import record_schedule, record_schedules  # noqa: E402
from dpviz.topics.ground_floor.run_training import record_run  # noqa: E402
from dpviz.topics.one_group_per_device.widget import all_reduce_widget, devices_widget  # noqa: E402
from widget_checks import assert_blit_is_right  # noqa: E402

K = 3
B = 4
N_ELEMENTS = 7  # does not split evenly over 3 ranks: chunks of 3, 2 and 2 elements
F32 = 4


@pytest.fixture(scope="module")
def recorded():
    """Real small records, made once for the module: runs with and without the all-reduce, an MLP, two schedules."""
    ring, server = record_schedules(K, N_ELEMENTS, stall_timeout=180)  # both in one launch
    return {
        "on": record_run(k=K, b=B, steps=3, stall_timeout=180),
        "off": record_run(k=K, b=B, steps=3, all_reduce=False, optimizer="momentum", stall_timeout=180),
        "mlp": record_run(k=2, b=B, steps=2, model="mlp", width=8, depth=1, stall_timeout=180),
        "ring": ring,
        "server": server,
    }


@pytest.fixture(scope="module")
def grid():
    return shipped.grid_runs()


def quivers(ax, prefix):
    """The visible Quivers whose gid starts with ``prefix``, in rank order."""
    found = [c for c in ax.get_children() if isinstance(c, Quiver) and (c.get_gid() or "").startswith(prefix) and c.get_visible()]
    return sorted(found, key=lambda q: q.get_gid())


def uv(q):
    return np.array([np.asarray(q.U)[0], np.asarray(q.V)[0]])


def texts(ax):
    return [t.get_text() for t in ax.texts if t.get_visible()]


def sibling_snapshot(ax):
    return ax.get_xlim(), ax.get_ylim(), len(ax.get_children()), ax.get_title(), ax.get_position().bounds


def draws_only_on_its_axes(plot, data, **kw):
    """Call ``plot`` on one of two Axes and assert that the sibling, the figure size and rcParams did not change."""
    params = copy.deepcopy(dict(matplotlib.rcParams))
    fig, (ax, other) = plt.subplots(1, 2, figsize=(12, 5))
    other.plot([0, 1], [2, 3])
    other.set_title("sibling")
    before, size = sibling_snapshot(other), tuple(fig.get_size_inches())
    position = ax.get_position().bounds
    assert plot(data, ax=ax, **kw) is ax
    fig.canvas.draw()
    assert sibling_snapshot(other) == before
    assert tuple(fig.get_size_inches()) == size
    assert ax.get_position().bounds == position
    assert dict(matplotlib.rcParams) == params
    plt.close(fig)


# --- Step 4 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [0, 2])
def test_devices_draw_k_boxes_one_theta_k_slices_k_arrows(recorded, step):
    run = recorded["on"]
    fig, ax = plt.subplots()
    plot_devices(run, step=step, ax=ax)
    arrows = quivers(ax, "local-")
    assert len(arrows) == K
    for i, q in enumerate(arrows):
        np.testing.assert_array_equal(uv(q), run.local_grad[step, i])
    # The g_i differ from each other: each rank saw different data.
    assert len({tuple(uv(q)) for q in arrows}) == K
    shown = texts(ax)
    assert [t for t in shown if t.startswith("rank ")] == [f"rank {i}: {B} examples" for i in range(K)]
    thetas = [t for t in shown if t.startswith("θ")]
    w, c = run.params[step, 0]
    assert thetas == [f"θ = (w {w:+.3f}, c {c:+.3f})"] * K  # the same θ in every box, from the record
    # Each box's dark dots are its own slice of the step's batch, b of them.
    slices = [c for c in ax.collections if not isinstance(c, Quiver) and c.get_sizes()[0] == 18]
    assert [len(c.get_offsets()) for c in slices] == [B] * K
    assert "One group per device" in ax.get_title() and f"k={K}" in ax.get_title()
    assert len(ax.get_legend().get_texts()) == 4
    assert any(run.describe() in t for t in shown)
    plt.close(fig)


def test_devices_for_an_mlp_show_a_digest_and_row_numbers(recorded):
    run = recorded["mlp"]
    fig, ax = plt.subplots()
    plot_devices(run, ax=ax)
    shown = texts(ax)
    assert sum(t.startswith("θ digest " + run.param_digest[0, 0].decode()[:10]) for t in shown) == 2
    assert sum(t.startswith("rows ") for t in shown) == 2
    assert len(quivers(ax, "local-")) == 2
    plt.close(fig)


def test_devices_touch_nothing_outside_their_axes(recorded):
    draws_only_on_its_axes(plot_devices, recorded["on"], step=1)


def test_devices_with_ax_none_use_the_current_axes(recorded):
    fig = plt.figure()
    ax = plot_devices(recorded["on"])
    assert ax is plt.gca() and ax.figure is fig
    plt.close(fig)


def test_devices_reject_a_step_outside_the_run(recorded):
    with pytest.raises(ValueError, match="step must be"):
        plot_devices(recorded["on"], step=3, ax=plt.figure().add_subplot())
    plt.close("all")


# --- Step 5: the funnel -------------------------------------------------------------------------


@pytest.mark.parametrize("step", [0, 2])
def test_funnel_red_tip_is_the_recorded_all_reduced_gradient(recorded, step):
    run = recorded["on"]
    fig, ax = plt.subplots()
    plot_all_reduce(run, step=step, ax=ax)
    (red,) = quivers(ax, "reduced")
    np.testing.assert_array_equal(uv(red), run.reduced_grad[step, 0])
    # The red arrow is the mean of the grey ones (within float rounding), and equals the big-batch gradient.
    np.testing.assert_allclose(uv(red), run.local_grad[step].mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(uv(red), run.big_grad[step], rtol=1e-5, atol=1e-6)
    local, funnel, copies = quivers(ax, "local-"), quivers(ax, "funnel-"), quivers(ax, "copy-")
    assert len(local) == len(funnel) == len(copies) == K
    for i in range(K):
        np.testing.assert_array_equal(uv(local[i]), run.local_grad[step, i])
        np.testing.assert_array_equal(uv(funnel[i]), run.local_grad[step, i])
        np.testing.assert_array_equal(uv(copies[i]), run.reduced_grad[step, i])
        np.testing.assert_array_equal(uv(copies[i]), uv(red))  # every rank holds the same red arrow
    assert "The all-reduce" in ax.get_title()
    assert f"all {K} ranks received bit-identical copies of g at step {step}" in texts(ax)
    assert any(run.describe() in t for t in texts(ax))
    plt.close(fig)


def test_funnel_without_all_reduce_has_no_red_average(recorded):
    run = recorded["off"]
    fig, ax = plt.subplots()
    plot_all_reduce(run, step=1, ax=ax)
    assert quivers(ax, "reduced") == [] and quivers(ax, "funnel-") == []
    copies = quivers(ax, "copy-")
    for i, q in enumerate(copies):
        np.testing.assert_array_equal(uv(q), run.local_grad[1, i])
    assert "no all-reduce" in ax.get_title()
    plt.close(fig)


def test_funnel_touches_nothing_outside_its_axes(recorded):
    draws_only_on_its_axes(plot_all_reduce, recorded["on"], step=1)


def test_funnel_with_ax_none(recorded):
    fig = plt.figure()
    assert plot_all_reduce(recorded["on"]) is plt.gca()
    plt.close(fig)


# --- Step 5: replicas over the steps --------------------------------------------------------------


@pytest.mark.parametrize("knob", [0, 1])
def test_replica_lines_overlap_with_the_all_reduce_and_drift_without(recorded, knob):
    fig, (ax_on, ax_off) = plt.subplots(1, 2)
    for ax, key in ((ax_on, "on"), (ax_off, "off")):
        run = recorded[key]
        plot_replica_params(run, ax=ax, knob=knob)
        assert len(ax.lines) == K
        for i, line in enumerate(ax.lines):
            np.testing.assert_array_equal(line.get_ydata(), run.params[:, i, knob])
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"rank {i}" for i in range(K)]
        assert ax.get_xlabel() == "step" and ("w", "b")[knob] in ax.get_ylabel()
    on, off = recorded["on"], recorded["off"]
    assert on.replicas_identical().all()
    assert any("bit-identical" in t for t in texts(ax_on))
    for i in range(1, K):  # exactly on top of each other
        np.testing.assert_array_equal(ax_on.lines[i].get_ydata(), ax_on.lines[0].get_ydata())
    assert not off.replicas_identical().all()
    assert not any("bit-identical" in t for t in texts(ax_off))
    assert any("drifted apart" in t for t in texts(ax_off))
    plt.close(fig)


def test_replica_params_touch_nothing_outside_and_work_with_ax_none(recorded):
    draws_only_on_its_axes(plot_replica_params, recorded["off"])
    fig = plt.figure()
    assert plot_replica_params(recorded["on"], knob=1) is plt.gca()
    with pytest.raises(ValueError, match="knob must be"):
        plot_replica_params(recorded["on"], knob=2)
    plt.close(fig)


# --- Step 5: schedules ---------------------------------------------------------------------------


def test_recorded_ring_equals_dist_all_reduce_and_follows_the_ring(recorded):
    s = recorded["ring"]
    assert s.equal and s.max_abs_diff == 0.0
    np.testing.assert_array_equal(s.results, s.all_reduce)
    np.testing.assert_array_equal(s.results[0], s.inputs.sum(axis=0))  # whole numbers: the sum is exact
    entries = s.entries
    assert len(entries) == 2 * (K - 1) * K
    for rank in range(K):
        mine = [e for e in entries if e["src"] == rank]
        assert len(mine) == 2 * (K - 1)  # k-1 sends per phase, two phases
        assert all(e["dst"] == (rank + 1) % K for e in mine)  # only ever to the right-hand neighbour
        for phase in ("reduce-scatter", "all-gather"):
            assert sorted(e["step"] for e in mine if e["phase"] == phase) == list(range(K - 1))
    # Together the ranks send 2(k-1)/k of the message each, 2(k-1)·M in all.
    M = N_ELEMENTS * F32
    assert s.message_bytes == M
    assert s.bytes_sent.sum() == 2 * (K - 1) * M
    # Each rank receives exactly what its left-hand neighbour sends.
    np.testing.assert_array_equal(s.bytes_received, np.roll(s.bytes_sent, 1))
    assert list(s.chunk_sizes) == [3, 2, 2]


def test_recorded_parameter_server_goes_through_rank_0(recorded):
    s = recorded["server"]
    M = N_ELEMENTS * F32
    assert s.equal
    assert len(s.entries) == 2 * (K - 1)
    assert s.bytes_sent[0] == s.bytes_received[0] == (K - 1) * M
    assert list(s.bytes_sent[1:]) == [M] * (K - 1)


def test_ring_schedule_figure_has_one_cell_per_transfer(recorded):
    s = recorded["ring"]
    fig, ax = plt.subplots()
    plot_ring_schedule(s, ax=ax)
    cells = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(cells) == 2 * (K - 1) * K
    assert len(ax.get_yticks()) == 2 * (K - 1) + 1  # 2(k-1) steps and the bytes row
    shown = texts(ax)
    for e in s.entries:
        assert f"chunk {e['chunk']} → rank {e['dst']}" in shown
    assert [t for t in shown if t.startswith("sent ")] == [f"sent {int(b)} B" for b in s.bytes_sent]
    assert "2(k−1)/k·M" in ax.get_title() and "bit for bit" in ax.get_title()
    assert len(ax.get_legend().get_texts()) == K
    plt.close(fig)


def test_parameter_server_figure_is_a_star_with_bytes(recorded):
    s = recorded["server"]
    fig, ax = plt.subplots()
    plot_parameter_server(s, ax=ax)
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == 2 * (K - 1)
    M = N_ELEMENTS * F32
    assert f"rank 0 (server)\nreceives {(K - 1) * M} B\nsends {(K - 1) * M} B" in texts(ax)
    assert "(k−1)·M" in ax.get_title()
    assert len(ax.get_legend().get_texts()) == 2
    plt.close(fig)


def test_schedule_figures_touch_nothing_outside_and_work_with_ax_none(recorded):
    draws_only_on_its_axes(plot_ring_schedule, recorded["ring"])
    draws_only_on_its_axes(plot_parameter_server, recorded["server"])
    fig = plt.figure()
    assert plot_ring_schedule(recorded["ring"]) is plt.gca()
    plt.close(fig)
    with pytest.raises(ValueError, match="impl='ring'"):
        plot_ring_schedule(recorded["server"], ax=plt.figure().add_subplot())
    plt.close("all")


def test_record_schedule_checks_its_arguments():
    with pytest.raises(ValueError, match="k must be"):
        record_schedule(0, 4)
    with pytest.raises(ValueError, match="impl must be"):
        record_schedule(2, 4, impl="tree")
    with pytest.raises(ValueError, match="n_elements must be"):
        record_schedule(2, 0)
    with pytest.raises(ValueError, match="impls entries must be"):
        record_schedules(2, 4, impls=("ring", "tree"))
    with pytest.raises(ValueError, match="impls must name at least one"):
        record_schedules(2, 4, impls=())


def test_one_launch_of_both_schedules_gives_what_one_launch_each_gives(recorded):
    alone = record_schedule(K, N_ELEMENTS, impl="parameter_server", stall_timeout=180)
    for name, value in alone.arrays.items():
        np.testing.assert_array_equal(recorded["server"].arrays[name], value, err_msg=name)


# --- sliders ------------------------------------------------------------------------------------


def children(sf):
    return [id(a) for a in sf.fig.axes[0].get_children()]


def test_devices_widget_updates_its_artists_in_place(grid):
    sf = devices_widget(grid, k=4, b=8)
    ax = sf.fig.axes[0]
    ids, png = children(sf), sf.png()
    assert len(quivers(ax, "local-")) == 4
    for move, check in (({"k": 2}, 2), ({"b": 16}, 2), ({"step": 3}, 2), ({"k": 3}, 3)):
        before = np.array([uv(q) for q in quivers(ax, "local-")])
        sf.set(**move)
        values = sf.values
        run = grid[(values["k"], values["b"])]
        arrows = quivers(ax, "local-")
        assert len(arrows) == check == run.k
        for i, q in enumerate(arrows):
            np.testing.assert_array_equal(uv(q), run.local_grad[values["step"], i])
        assert [t for t in texts(ax) if t.startswith("rank ")] == [f"rank {i}: {values['b']} examples" for i in range(run.k)]
        after = np.array([uv(q) for q in arrows])
        assert after.shape != before.shape or not np.array_equal(after, before)
        new_png = sf.png()
        assert new_png != png
        png = new_png
        assert children(sf) == ids  # the same artist objects: nothing added, nothing removed
    assert len(sf.timings) >= 5


def test_all_reduce_widget_moves_the_red_arrow_in_place(grid):
    sf = all_reduce_widget(grid, k=4, b=8)
    ax = sf.fig.axes[0]
    ids, png = children(sf), sf.png()
    for move in ({"k": 2}, {"b": 4}, {"step": 4}, {"k": 1}, {"k": 4}):
        sf.set(**move)
        values = sf.values
        run = grid[(values["k"], values["b"])]
        (red,) = quivers(ax, "reduced")
        np.testing.assert_array_equal(uv(red), run.reduced_grad[values["step"], 0])
        assert len(quivers(ax, "copy-")) == len(quivers(ax, "local-")) == run.k
        new_png = sf.png()
        assert new_png != png
        png = new_png
        assert children(sf) == ids


@pytest.mark.parametrize("make", [devices_widget, all_reduce_widget])
def test_widget_blitted_frames_match_full_redraws(grid, make):
    sf = make(grid, k=4, b=8)
    for move in ({"step": 3}, {"b": 16}, {"step": 0}, {"k": 2}, {"step": 4}, {"b": 4}, {"k": 1}, {"step": 1},
                 {"k": 3, "b": 8}, {"step": 2}):
        sf.set(**move)
        assert_blit_is_right(sf, f"{make.__name__} {move}")


@pytest.mark.parametrize("make", [devices_widget, all_reduce_widget])
def test_grid_figure_update_shows_the_run_and_names_its_layout(grid, make):
    figure = make(grid, k=4, b=8).view
    before = [id(a) for a in figure.fig.findobj()]
    for k, b, step in ((2, 16, 3), (1, 4, 0), (4, 8, 2)):
        key = figure.update(k=k, b=b, step=step)
        run = grid[(k, b)]
        assert key == figure.holder.layout_key(run)
        np.testing.assert_array_equal([uv(q) for q in quivers(figure.fig.axes[0], "local-")], run.local_grad[step])
        assert figure.update(k=k, b=b, step=(step + 1) % 5) == key  # another step of the same run: same layout
    assert [id(a) for a in figure.fig.findobj()] == before
    assert figure.layouts() == [{"k": k, "b": b} for k, b in sorted(grid)]


@pytest.mark.parametrize("make", [devices_widget, all_reduce_widget])
def test_widget_moves_redraw_only_the_animated_artists(grid, make):
    """Every run's background is drawn when the widget is built; a move of k, b or the step draws no whole figure."""
    sf = make(grid, k=4, b=8)
    full_draws = []
    draw = sf.fig.canvas.draw
    sf.fig.canvas.draw = lambda *args, **kwargs: (full_draws.append(1), draw(*args, **kwargs))
    for move in ({"k": 2}, {"b": 16}, {"step": 3}, {"k": 1}, {"b": 4}, {"k": 4, "b": 8}, {"k": 3}):
        sf.set(**move)
    assert full_draws == []
    sf.fig.canvas.draw = draw
    assert_blit_is_right(sf, f"{make.__name__} after moves from prebuilt backgrounds")


def test_widgets_check_their_data(grid):
    with pytest.raises(ValueError, match="k and b must be among"):
        devices_widget(grid, k=5)
    partial = {key: run for key, run in grid.items() if key != (2, 8)}
    with pytest.raises(ValueError, match="missing"):
        all_reduce_widget(partial)
    with pytest.raises(ValueError, match="at least one run"):
        devices_widget({})


# --- shipped records ----------------------------------------------------------------------------


def test_shipped_grid_loads_and_passes_its_checks(grid):
    assert set(grid) == {(k, b) for k in (1, 2, 3, 4) for b in (4, 8, 16)}
    for (k, b), run in grid.items():
        assert run.k == k and run.meta["b"] == b and run.steps == 5
        assert run.meta["model"] == "line" and run.meta["optimizer"] == "sgd" and run.meta["all_reduce"]
        for field in ("host", "cores", "date", "backend"):
            assert run.meta[field] not in (None, "")
        run.check()
        assert run.replicas_identical().all()


def test_shipped_drift_pairs_stay_identical_with_all_reduce_and_drift_without():
    drift = shipped.drift_runs()
    assert set(drift) == {(opt, on) for opt in ("sgd", "momentum", "adam") for on in (True, False)}
    for (opt, on), run in drift.items():
        assert run.k == 4 and run.meta["optimizer"] == opt and run.meta["all_reduce"] == on
        if on:
            run.check()
        else:
            assert not run.replicas_identical()[-1]
            assert np.ptp(run.params[-1], axis=0).max() > 1e-3  # they drifted visibly, not in the last bit


def test_shipped_records_are_small():
    mine = [p for p in SHIPPED_DIR.iterdir() if p.name.startswith(("grid_", "drift_"))]
    assert len([p for p in mine if p.suffix == ".npz"]) == 18
    assert sum(p.stat().st_size for p in mine) < 1_000_000
    everything = sum(p.stat().st_size for p in SHIPPED_DIR.iterdir())
    assert everything < 4_000_000, f"the shipped records of every chapter hold {everything:,} bytes; keep them to a few MB"


def test_regenerate_records_real_runs_that_load_back(tmp_path, monkeypatch):
    from dpviz.topics.one_group_per_device import run_shipped as recorder

    plan = [("grid_k2_b4", dict(shipped.GRID, k=2, b=4, steps=2))]
    monkeypatch.setattr(recorder, "planned", lambda: plan)
    written = recorder.regenerate(tmp_path, progress=False)
    assert [p.name for p in written] == ["grid_k2_b4"]
    run = shipped.Run.load(written[0])
    run.check()
    with pytest.raises(FileNotFoundError, match="python -m dpviz.topics.one_group_per_device.run_shipped"):
        shipped.grid_runs(tmp_path)  # the rest of the grid is not there
