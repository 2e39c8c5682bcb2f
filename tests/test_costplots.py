"""The cost figures (s01 timelines, s02 speedup, the all-reduce benchmark), the one-picture summary and the
chapter-06 widget, on small real records made once for this module."""

import copy

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dpviz.topics.ground_floor import costmodel, timing  # noqa: E402
from dpviz.topics.measuring.run_bench import BenchConfig, run_sweep  # noqa: E402
from dpviz.topics.ground_floor.links import PRESETS, SPEED_ORDER  # noqa: E402
from dpviz.topics.measuring import plots_bench as bench_plot  # noqa: E402
from dpviz.topics.speedup_model import plots_speedup as speedup_plot  # noqa: E402
from dpviz.topics.whole_picture import plots_summary as summary_plot  # noqa: E402
from dpviz.topics.speedup_model import plots_timeline as timeline_plot  # noqa: E402
from dpviz.topics.measuring.plots_bench import plot_allreduce_times  # noqa: E402
from dpviz.topics.speedup_model.plots_speedup import plot_speedup  # noqa: E402
from dpviz.topics.whole_picture.plots_summary import plot_summary  # noqa: E402
from dpviz.topics.speedup_model.plots_timeline import plot_timelines  # noqa: E402
from dpviz.topics.ground_floor.run_training import record_run  # noqa: E402
from dpviz.topics.speedup_model.widget import MACHINE, YOURS, CostsFigure, costs_widget  # noqa: E402
from widget_checks import assert_blit_is_right  # noqa: E402

GLOBAL_BATCH = 32
KS = (1, 2, 4)


@pytest.fixture(scope="module")
def runs():
    """MLP runs that split one global batch over k = 1, 2, 4 ranks (k = 4 oversubscribes a 2-core machine)."""
    with pytest.warns() if max(KS) > _cores() else _nothing():
        return {k: record_run(model="mlp", width=64, k=k, b=GLOBAL_BATCH // k, steps=4, stall_timeout=180) for k in KS}


@pytest.fixture(scope="module")
def line_run():
    with pytest.warns() if 4 > _cores() else _nothing():
        return record_run(model="line", k=4, b=4, steps=2, stall_timeout=180)


@pytest.fixture(scope="module")
def bench():
    return run_sweep(BenchConfig(ks=(2,), sizes=(1024, 16384, 262144), impls=("all_reduce",), repeats=3, stall_timeout=180),
                     progress=False)


@pytest.fixture(scope="module")
def widget(bench, runs):
    return costs_widget(measured_bench=bench, measured_runs=runs)


def _cores():
    from dpviz.engine.launch import cpu_count

    return cpu_count()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _draw_isolated(draw):
    """Draw on the left Axes of a two-Axes figure; check the right one and rcParams are untouched."""
    rc = copy.deepcopy(dict(matplotlib.rcParams))
    fig, (ax, sibling) = plt.subplots(1, 2, figsize=(14, 6))
    sibling.plot([0, 1], [2, 3])
    sibling.set_title("sibling")
    before = (sibling.get_xlim(), sibling.get_ylim(), list(sibling.get_children()), sibling.get_position().bounds)
    out = draw(ax)
    fig.canvas.draw()
    assert out is ax
    assert (sibling.get_xlim(), sibling.get_ylim(), list(sibling.get_children()), sibling.get_position().bounds) == before
    assert dict(matplotlib.rcParams) == rc
    assert ax.get_title() or ax.get_title(loc="left")
    return fig, ax


def _with_gid(artists, gid):
    return [a for a in artists if a.get_gid() == gid]


def _legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


# --- timing: the numbers -------------------------------------------------------------------------


def test_measured_step_times_are_medians_of_the_record(runs):
    times = timing.measured_step_times(runs)
    assert sorted(times) == list(KS)
    for k, run in runs.items():
        t = times[k]
        assert t.t_compute == pytest.approx(np.median(run.t_compute[1:]))
        expected_comm = np.median(run.t_comm[1:]) if k > 1 else 0.0  # one device has nothing to sync
        assert t.t_comm == pytest.approx(expected_comm)
        assert t.t_step == pytest.approx(t.t_compute + t.t_comm)
        assert t.global_batch == GLOBAL_BATCH and t.oversubscribed == (k > run.meta["cores"])


def test_measured_speedup_divides_step_times(runs):
    measured = timing.measured_speedup(list(runs.values()))
    times = timing.measured_step_times(runs)
    np.testing.assert_array_equal(measured.k, KS)
    np.testing.assert_allclose(measured.speedup, [times[1].t_step / times[k].t_step for k in KS])
    assert measured.speedup[0] == 1.0
    np.testing.assert_array_equal(measured.oversubscribed, [k > measured.cores for k in KS])
    np.testing.assert_array_equal(measured.superlinear, measured.speedup > 1.05 * np.array(KS))


def test_measured_speedup_rejects_runs_that_do_different_work(runs, line_run):
    with pytest.raises(ValueError, match="runs must share one global batch"):
        timing.measured_speedup({1: runs[1], 4: line_run})
    with pytest.raises(ValueError, match="runs must include a k=1 run"):
        timing.measured_speedup({2: runs[2], 4: runs[4]})
    with pytest.raises(ValueError, match="runs must be keyed by each run's k"):
        timing.measured_step_times({3: runs[2]})
    with pytest.raises(TypeError, match="runs must"):
        timing.measured_step_times({1: "not a run"})
    with pytest.raises(ValueError, match="warmup"):
        timing.measured_step_times(runs, warmup=99)


def test_timeline_rows_mix_measured_and_modeled(runs):
    times = timing.measured_step_times(runs)
    rows = timing.timeline_rows((1, 2, 4, 8), t_compute=0.5, alpha=1e-5, beta=1e9, M=4e6, measured=times)
    assert [r.k for r in rows] == [1, 2, 4, 8]
    assert [r.source for r in rows] == ["measured"] * 3 + ["modeled"]
    assert rows[1].t_compute == times[2].t_compute and rows[2].oversubscribed == times[4].oversubscribed
    assert rows[3].t_compute == 0.5 / 8
    assert rows[3].t_comm == pytest.approx(costmodel.t_comm_ring(8, 4e6, 1e-5, 1e9))

    notes = timing.timeline_rows(t_compute=1.0, t_comm=0.2)  # the notes' s01: one fixed coral bar
    assert [r.t_comm for r in notes] == [0.0, 0.2, 0.2, 0.2]  # k = 1 has nobody to sync with
    assert [r.t_compute for r in notes] == [1.0, 0.5, 0.25, 0.125]
    pairs = timing.timeline_rows((1, 2), measured={1: (0.3, 0.0), 2: (0.2, 0.05)})
    assert [r.t_step for r in pairs] == [0.3, 0.25] and pairs[0].source == "measured"


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(ks=(0, 2)), "ks"),
        (dict(ks=np.linspace(1, 4, 4)), "ks"),
        (dict(ks=(2, 2)), "ks"),
        (dict(t_compute=-1.0), "t_compute"),
        (dict(t_compute=float("nan")), "t_compute"),
        (dict(t_comm=-0.1), "t_comm"),
        (dict(t_comm=None, alpha=-1.0, beta=1e9, M=1e6), "alpha"),
        (dict(t_comm=None, alpha=1e-6, beta=0.0, M=1e6), "beta"),
        (dict(t_comm=None, alpha=1e-6, beta=1e9, M=-1.0), "M"),
        (dict(t_comm=None), "t_comm"),
        (dict(t_comm=None, alpha=1e-6, beta=1e9, M=1e6, formula="tree"), "formula"),
        (dict(measured={2: (0.1,)}), "measured"),
        (dict(measured={2: (0.1, -1.0)}), "measured"),
        (dict(measured=[(0.1, 0.2)]), "measured"),
    ],
)
def test_timeline_rows_name_the_bad_argument(kwargs, name):
    args = dict(t_compute=1.0, t_comm=0.1)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=name):
        timing.timeline_rows(**args)


def test_speedup_curves_follow_the_cost_model():
    ks = np.arange(1, 65)
    curves = timing.speedup_curves(ks, t_compute=1.0, M=100e6)
    assert list(curves.curves) == list(SPEED_ORDER)
    np.testing.assert_array_equal(curves.ideal, ks)
    for name, curve in curves.curves.items():
        link = PRESETS[name]
        expected = costmodel.speedup(1.0, ks, costmodel.t_comm_ring(ks, 100e6, link.alpha, link.beta))
        np.testing.assert_allclose(curve.speedup, expected)
        assert curve.speedup[0] == 1.0 and np.all(curve.speedup <= ks)
    fast, medium, slow = (curves.curves[n].speedup[-1] for n in SPEED_ORDER)
    assert fast > medium > slow  # the slower the link, the earlier the curve leaves S = k


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(ks=np.linspace(1, 8, 8)), "ks"),
        (dict(ks=[]), "ks"),
        (dict(t_compute=0.0), "t_compute"),
        (dict(M=-5.0), "M"),
        (dict(formula="star"), "formula"),
        (dict(links=["NVLink"]), "links"),
    ],
)
def test_speedup_curves_name_the_bad_argument(kwargs, name):
    args = dict(ks=np.arange(1, 9), t_compute=1.0, M=1e6)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=name):
        timing.speedup_curves(**args)


def test_fit_lines_evaluate_the_bench_fits(bench):
    lines = timing.fit_lines(bench, ("notes", "ring"))
    for formula, fl in lines.items():
        fit = bench.fit(formula)
        assert fl.fit.alpha == fit.alpha and fl.fit.beta == fit.beta
        np.testing.assert_allclose(fl.seconds[2], costmodel.t_comm(2, fl.M, fit.alpha, fit.beta, formula=formula))
        assert fl.M[0] == bench.M.min() and fl.M[-1] == pytest.approx(bench.M.max())
    with pytest.raises(ValueError, match="formulas"):
        timing.fit_lines(bench, ("tree",))
    with pytest.raises(ValueError, match="impl"):
        timing.fit_lines(bench, impl="ring")
    with pytest.raises(TypeError, match="fit"):
        timing.link_from_fit(0.5)
    link = timing.link_from_fit(bench.fit("ring"))
    assert link.alpha == bench.fit("ring").alpha and "fitted" in link.source


# --- the figures ---------------------------------------------------------------------------------


def test_plot_timelines_draws_two_bars_per_row(runs, bench):
    rows = timing.machine_timelines(runs, bench)
    fig, ax = _draw_isolated(lambda ax: plot_timelines(rows, ax=ax, note=runs[1].describe()))
    compute = _with_gid(ax.patches, timeline_plot.GIDS["compute"])
    comm = _with_gid(ax.patches, timeline_plot.GIDS["comm"])
    assert len(compute) == len(comm) == len(rows) == 4
    scale = timeline_plot.time_unit(max(r.t_step for r in rows))[1]
    for c, s, row in zip(compute, comm, rows):
        assert c.get_width() == pytest.approx(row.t_compute / scale)
        assert s.get_x() == pytest.approx(row.t_compute / scale)  # glued on after compute
        assert s.get_width() == pytest.approx(row.t_comm / scale)
        assert bool(c.get_hatch()) == (row.source == "modeled")
    labels = [t.get_text() for t in _with_gid(ax.texts, timeline_plot.GIDS["label"])]
    assert ["(measured" in t for t in labels] == [r.source == "measured" for r in rows]
    assert "(modeled)" in labels[-1]
    legend = " ".join(_legend_texts(ax))
    assert "compute" in legend and "sync" in legend and "measured" in legend and "modeled" in legend
    assert [t.get_text() for t in ax.get_yticklabels()] == ["k = 1", "k = 2", "k = 4", "k = 8"]
    plt.close(fig)


def test_plot_speedup_draws_ideal_links_and_measured_points(runs):
    curves = timing.speedup_curves(np.arange(1, 65), t_compute=1.0, M=100e6)
    measured = timing.measured_speedup(runs)
    fig, ax = _draw_isolated(lambda ax: plot_speedup(curves, measured=measured, ax=ax))
    ideal = _with_gid(ax.lines, speedup_plot.GIDS["ideal"])
    links = [line for line in ax.lines if (line.get_gid() or "").startswith(speedup_plot.GIDS["link"])]
    assert len(ideal) == 1 and ideal[0].get_linestyle() == "--"
    assert len(links) == 3
    assert [line.get_color() for line in links] == [speedup_plot.SPEED_COLOURS[n] for n in SPEED_ORDER]
    filled = _with_gid(ax.lines, speedup_plot.GIDS["measured"])
    hollow = _with_gid(ax.lines, speedup_plot.GIDS["oversubscribed"])
    over = measured.oversubscribed
    n_filled = sum(len(line.get_xdata()) for line in filled)
    n_hollow = sum(len(line.get_xdata()) for line in hollow)
    assert n_filled + n_hollow == len(KS)  # no point hidden
    assert n_hollow == over.sum() and n_filled == (~over).sum()
    if over.any():
        assert hollow[0].get_markerfacecolor() == "white"
        assert any("ranks share cores" in t.get_text() for t in ax.texts)
    assert len(_with_gid(ax.texts, speedup_plot.GIDS["superlinear"])) == int(measured.superlinear.any())
    legend = _legend_texts(ax)
    assert sum("(modeled)" in t for t in legend) == 3
    assert any(t.startswith(f"measured on {measured.host}, {measured.cores} cores") for t in legend) or n_filled == 0
    plt.close(fig)


def test_plot_speedup_draws_the_measured_runs_own_curve_apart(runs, bench):
    workload = timing.measured_workload(runs)
    own = timing.speedup_curves(np.arange(1, 65), t_compute=workload.t_compute, M=workload.M,
                                links=[timing.link_from_fit(bench.fit("ring"), name="this machine")])
    curves = timing.speedup_curves(np.arange(1, 65), t_compute=1.0, M=100e6)
    fig, ax = _draw_isolated(lambda ax: plot_speedup(curves, measured=timing.measured_speedup(runs),
                                                     measured_model=own, ax=ax))
    (line,) = _with_gid(ax.lines, speedup_plot.GIDS["measured_model"])
    np.testing.assert_array_equal(line.get_ydata(), own.curves["this machine"].speedup)
    assert line.get_linestyle() == "-." and line.get_color() == speedup_plot.INK
    (label,) = [t for t in _legend_texts(ax) if t.startswith("modeled for the measured runs")]
    assert speedup_plot.seconds_words(workload.t_compute) in label and speedup_plot.bytes_words(workload.M) in label
    assert len(_with_gid(ax.lines, speedup_plot.GIDS["link"] + ":NVLink")) == 1  # the other curves stay
    with pytest.raises(ValueError, match="measured_model must hold one curve"):
        plot_speedup(curves, measured_model=curves, ax=ax)
    plt.close(fig)


def test_plot_allreduce_times_draws_points_and_fitted_lines(bench):
    fig, ax = _draw_isolated(lambda ax: plot_allreduce_times(bench, timing.fit_lines(bench), ax=ax))
    assert len(ax.containers) == 1  # one errorbar set per k
    points = ax.containers[0].lines[0]
    np.testing.assert_allclose(points.get_ydata(), bench.fastest)  # what the lines are fitted to
    bars = ax.containers[0].lines[2][0].get_segments()  # each rises from the fastest call to the median
    np.testing.assert_allclose([seg[:, 1] for seg in bars], np.stack([bench.fastest, bench.median], axis=1))
    for formula in ("notes", "ring"):
        (line,) = _with_gid(ax.lines, f"{bench_plot.GIDS['fit']}:{formula}")
        fit = bench.fit(formula)
        np.testing.assert_allclose(line.get_ydata(), costmodel.t_comm(2, line.get_xdata(), fit.alpha, fit.beta,
                                                                      formula=formula))
    legend = _legend_texts(ax)
    assert sum("fitted" in t and "α =" in t and "β =" in t and "median error" in t for t in legend) == 2
    assert any("measured" in t for t in legend)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    plt.close(fig)


def test_plot_allreduce_times_draws_the_fits_it_is_given_and_fits_nothing(bench, monkeypatch):
    lines = timing.fit_lines(bench, ("ring",))
    monkeypatch.setattr(type(bench), "fit", lambda *a, **k: pytest.fail("the plot fitted"))
    monkeypatch.setattr(timing, "fit_lines", lambda *a, **k: pytest.fail("the plot fitted"))
    fig, ax = plt.subplots()
    plot_allreduce_times(bench, lines, ax=ax)
    (line,) = _with_gid(ax.lines, f"{bench_plot.GIDS['fit']}:ring")
    np.testing.assert_array_equal(line.get_ydata(), lines["ring"].seconds[2])
    assert not _with_gid(ax.lines, f"{bench_plot.GIDS['fit']}:notes")
    with pytest.raises(TypeError, match="fits must be the dict timing.fit_lines"):
        plot_allreduce_times(bench, ("notes", "ring"), ax=ax)
    plt.close(fig)


def test_plot_summary_shows_k_copies_arrows_and_the_shared_red_arrow(line_run):
    step = 1
    times = timing.step_times(line_run)
    fig, ax = _draw_isolated(lambda ax: plot_summary(line_run, times, step=step, ax=ax))
    quivers = {q.get_gid(): q for q in ax.collections if q.get_gid()}
    grey, red = quivers[summary_plot.GIDS["local"]], quivers[summary_plot.GIDS["reduced"]]
    assert grey.N == line_run.k
    np.testing.assert_array_equal(np.stack([grey.U, grey.V], axis=1), line_run.local_grad[step])
    assert red.N == 1
    np.testing.assert_array_equal([red.U[0], red.V[0]], line_run.reduced_grad[step, 0])  # the red tip is the mean
    np.testing.assert_allclose([red.U[0], red.V[0]], line_run.local_grad[step].mean(axis=0), rtol=1e-5)
    assert grey.scale == red.scale  # one scale, so lengths compare
    assert len(_with_gid(ax.patches, summary_plot.GIDS["copy"])) == line_run.k
    assert len(_with_gid(ax.patches, summary_plot.GIDS["new_copy"])) == line_run.k
    assert len(_with_gid(ax.patches, summary_plot.GIDS["slice"])) == line_run.k
    texts = [t.get_text() for t in ax.texts]
    w, b = line_run.params[step + 1, 0]
    assert sum(f"θ = ({w:.3f}, {b:.3f})" in t for t in texts) == line_run.k  # every copy lands on the same θ
    (compute,) = _with_gid(ax.patches, summary_plot.GIDS["compute"])
    (comm,) = _with_gid(ax.patches, summary_plot.GIDS["comm"])
    assert times == timing.measured_step_times({4: line_run})[4]
    assert compute.get_width() / comm.get_width() == pytest.approx(times.t_compute / times.t_comm)
    assert comm.get_facecolor()[:3] == pytest.approx(matplotlib.colors.to_rgb(summary_plot.CORAL))
    plt.close(fig)


def test_plot_summary_rejects_a_run_it_cannot_draw(runs, line_run):
    with pytest.raises(ValueError, match="run must be a line-model run"):
        plot_summary(runs[2], timing.step_times(runs[2]))
    with pytest.raises(ValueError, match="step"):
        plot_summary(line_run, timing.step_times(line_run), step=5)
    with pytest.raises(TypeError, match="times must be the run's StepTimes"):
        plot_summary(line_run, 0.5)


def test_step_times_is_the_runs_median_step(runs, line_run):
    assert timing.step_times(runs[2]) == timing.measured_step_times(runs)[2]
    assert timing.step_times(line_run, warmup=5) == timing.measured_step_times({4: line_run}, warmup=1)[4]


def test_measured_workload_is_the_k1_step_and_the_gradient_bytes(runs):
    workload = timing.measured_workload(runs)
    assert workload.t_compute == timing.measured_step_times(runs)[1].t_compute
    assert workload.M == runs[1].local_grad.shape[-1] * 4 == timing.grad_bytes(runs[2])
    with pytest.raises(ValueError, match="k=1"):
        timing.measured_workload({2: runs[2]})


def test_every_plot_works_without_an_axes(runs, bench, line_run):
    draws = [
        lambda: plot_timelines(timing.timeline_rows(t_compute=1.0, t_comm=0.1)),
        lambda: plot_speedup(timing.speedup_curves(np.arange(1, 9), t_compute=1.0, M=1e6), log=False),
        lambda: plot_allreduce_times(bench, timing.fit_lines(bench)),
        lambda: plot_summary(line_run, timing.step_times(line_run)),
    ]
    for draw in draws:
        fig = plt.figure()
        assert draw() is plt.gca()
        plt.close(fig)


# --- the widget ----------------------------------------------------------------------------------


def _artists(sf):
    return [list(ax.get_children()) for ax in sf.fig.axes] + [list(sf.fig.texts)]


def _your_line(sf):
    ax = sf.fig.axes[1]
    return next(line for line in ax.lines if line.get_gid() == f"{speedup_plot.GIDS['link']}:{YOURS}")


@pytest.mark.parametrize(
    "name, value",
    [("k", 40), ("alpha", 3e-4), ("beta", 2e7), ("M", 5e8), ("t_compute", 0.02), ("formula", "notes"),
     ("preset", "10 Gb Ethernet")],
)
def test_widget_updates_artists_in_place(widget, name, value):
    sf = widget
    before_artists = _artists(sf)
    ax_time, ax_speed = sf.fig.axes
    before = dict(
        png=sf.png(),
        widths=[p.get_width() for p in ax_time.patches],
        curves=[np.array(line.get_ydata(), dtype=float) for line in ax_speed.lines],
        texts=[t.get_text() for t in sf.fig.texts],
    )
    sf.set(**{name: value})
    after_artists = _artists(sf)
    assert [list(map(id, a)) for a in after_artists] == [list(map(id, a)) for a in before_artists]
    assert sf.png() != before["png"]
    assert sf.image.value == sf.png()
    widths = [p.get_width() for p in ax_time.patches]
    curves = [np.array(line.get_ydata(), dtype=float) for line in ax_speed.lines]
    changed_curves = any(c.shape != d.shape or not np.allclose(c, d) for c, d in zip(curves, before["curves"]))
    assert widths != before["widths"] or changed_curves
    assert [t.get_text() for t in sf.fig.texts] != before["texts"]
    assert sf.errors.outputs == ()


def test_widget_presets_set_alpha_and_beta(widget, bench):
    sf = widget
    for name in SPEED_ORDER:
        sf.set(preset=name)
        assert sf.values["alpha"] == pytest.approx(PRESETS[name].alpha)
        assert sf.values["beta"] == pytest.approx(PRESETS[name].beta)
        assert PRESETS[name].source in sf.status.value
    sf.set(formula="ring", preset=MACHINE)
    fit = bench.fit("ring")
    assert sf.values["alpha"] == pytest.approx(np.clip(fit.alpha, 1e-7, 1e-2))
    assert sf.values["beta"] == pytest.approx(np.clip(fit.beta, 1e6, 1e12))
    assert "fitted" in sf.status.value
    sf.set(alpha=5e-3)  # moving a slider leaves the preset
    assert "your own" in sf.status.value
    s_your = _your_line(sf).get_ydata()
    np.testing.assert_allclose(
        s_your, costmodel.speedup(sf.values["t_compute"], np.arange(1, 65),
                                  costmodel.t_comm_ring(np.arange(1, 65), sf.values["M"], 5e-3, sf.values["beta"])))


def test_widget_blitted_frames_match_full_redraws(bench, runs):
    sf = costs_widget(measured_bench=bench, measured_runs=runs)
    moves = [{"k": 3}, {"k": 50}, {"alpha": 2e-6}, {"beta": 3e10}, {"M": 2e8}, {"t_compute": 0.3}, {"alpha": 1e-7},
             {"t_compute": 1e-3}, {"beta": 1e7}, {"formula": "notes"}, {"preset": "NVLink"}, {"preset": MACHINE},
             {"formula": "ring"}, {"k": 2}, {"t_compute": 1e-4, "alpha": 1e-2, "M": 1e10}, {"t_compute": 10.0}]
    for move in moves:
        sf.set(**move)
        assert_blit_is_right(sf, str(move))  # the legends sit under the Axes: nothing runs into them


def test_widget_frames_after_moves_away_and_back_are_those_a_fresh_widget_draws(bench, runs):
    """Each move blends the texts it left alone from their kept layers: after moves away and back (the time axis
    moving, a frame sent again instead of drawn, a full draw elsewhere), the frame is the one a fresh widget draws at
    that setting, byte for byte."""
    sf = costs_widget(measured_bench=bench, measured_runs=runs)
    start = dict(sf.values)
    there = dict(k=40, t_compute=0.02, M=5e8, alpha=3e-4, beta=2e7, formula="notes", preset="NVLink")
    for name, value in there.items():
        sf.set(**{name: value})  # one control at a time: what it leaves alone is replayed
        sf.set(**{name: start[name]})  # back: a frame sent again, not drawn
        animated = [a for a in sf.fig.findobj() if a.get_animated() and a is not sf.fig]
        for artist in animated:
            artist.set_animated(False)
        sf.fig.canvas.draw()  # marks every artist drawn, as a savefig would
        for artist in animated:
            artist.set_animated(True)
        sf.set(k=sf.values["k"] % 64 + 1)  # a move that leaves most artists alone
        fresh = costs_widget(measured_bench=bench, measured_runs=runs, **_start_values(sf.values))
        assert sf.png(full=False) == fresh.image.value, name
        sf.set(**start)
    assert len(sf._texts._layers) > 20  # the texts' looks were kept, and blended again


def _start_values(values: dict) -> dict:
    """costs_widget's keyword arguments that start it at ``values`` (α and β come from the preset)."""
    return {name: values[name] for name in ("k", "t_compute", "M", "formula", "preset")}


def test_widget_moves_never_draw_the_whole_figure(bench, runs):
    """The axes stay put (or, for the time axis, are artists moved like the bars): every move is a blit."""
    sf = costs_widget(measured_bench=bench, measured_runs=runs)
    full_draws = []
    draw = sf.fig.canvas.draw
    sf.fig.canvas.draw = lambda *args, **kwargs: (full_draws.append(1), draw(*args, **kwargs))
    for t_compute in np.geomspace(1e-4, 10, 11):
        sf.set(t_compute=float(t_compute))
    for move in ({"k": 64}, {"alpha": 1e-2}, {"beta": 1e6}, {"M": 1e10}, {"preset": MACHINE}, {"formula": "notes"}):
        sf.set(**move)
    assert full_draws == []


def test_costs_figure_update_changes_only_its_artists(bench, runs):
    figure = CostsFigure(machine={f: timing.link_from_fit(fit, name=MACHINE) for f, fit in bench.fits().items()},
                         measured=timing.measured_speedup(runs), workload=timing.measured_workload(runs))
    before = [id(a) for a in figure.fig.findobj()]
    values = dict(k=5, alpha=1e-5, beta=1e9, M=1e7, t_compute=0.05, formula="ring", preset="10 Gb Ethernet")
    figure.update(**values)
    rows = timing.timeline_rows((1, 2, 4, 8, 5), t_compute=0.05, alpha=1e-5, beta=1e9, M=1e7)
    scale = timeline_plot.UNITS[figure.bars.unit]
    assert [bar.get_width() for bar in figure.bars.comm] == pytest.approx([r.t_comm / scale for r in rows])
    your = costmodel.speedup(0.05, figure.ks, costmodel.t_comm_ring(figure.ks, 1e7, 1e-5, 1e9))
    np.testing.assert_allclose(figure.lines[YOURS].get_ydata(), your)
    assert f"S = {your[4]:.3g} at k = 5" in figure.headline.get_text()
    assert figure.marker.get_xdata()[0] == 5 and "your own α, β" in figure.headline.get_text()
    assert figure.ax_time.get_xlim()[1] * scale >= max(r.t_step for r in rows)  # the longest bar fits
    assert [id(a) for a in figure.fig.findobj()] == before


def test_measured_points_get_a_curve_modeled_for_their_own_run(widget, bench, runs):
    """Chapter 06: the measured speedups sit on a curve for their own T_compute and M, with the α, β fitted here."""
    sf = widget
    figure = sf.view
    workload = timing.measured_workload(runs)
    ks = np.arange(1, 65)
    for formula in ("ring", "notes"):
        sf.set(formula=formula, t_compute=2.0, M=3e9, alpha=1e-3, beta=1e7)  # sliders far from the measured run
        fit = bench.fit(formula)
        own = costmodel.speedup(workload.t_compute, ks,
                                costmodel.t_comm(ks, workload.M, fit.alpha, fit.beta, formula=formula))
        np.testing.assert_allclose(figure.own_line.get_ydata(), own)
    assert workload.M == timing.grad_bytes(runs[1]) and workload.t_compute < 1.0  # not the sliders' 1 s, 100 MB
    label = next(t for t in _legend_texts(figure.ax_speed) if t.startswith("modeled for the measured runs"))
    assert speedup_plot.seconds_words(workload.t_compute) in label and speedup_plot.bytes_words(workload.M) in label
    assert figure.own_line.get_linestyle() == "-." and figure.own_line not in figure.lines.values()
    assert "dash-dot" in sf.status.value


def test_widget_says_s_at_k_above_the_panels_never_over_the_curves(bench, runs):
    """Chapter 06: "S = ... at k" is in the headline, above both Axes; no text is drawn inside the speedup Axes."""
    sf = costs_widget(measured_bench=bench, measured_runs=runs)
    figure = sf.view
    renderer = sf.fig.canvas.get_renderer()
    for k in (1, 2, 8, 32, 64):
        for t_compute in (1e-4, 1.0):
            sf.set(k=k, t_compute=t_compute)
            s_now = float(figure.lines[YOURS].get_ydata()[k - 1])
            assert f"S = {s_now:.3g} at k = {k}" in figure.headline.get_text()
            head = figure.headline.get_window_extent(renderer)
            assert not any(head.overlaps(ax.get_window_extent(renderer)) for ax in sf.fig.axes), (k, t_compute)
            inside = [t for t in figure.ax_speed.texts if t.get_text().startswith("S = ")]
            assert inside == [], [t.get_text() for t in inside]


def test_widget_menu_clicks_redraw_once(bench, runs):
    sf = costs_widget(measured_bench=bench, measured_runs=runs)
    for name, value in (("preset", "10 Gb Ethernet"), ("preset", MACHINE), ("formula", "notes"),
                        ("formula", "ring"), ("preset", "NVLink"), ("formula", "halving_doubling")):
        before = len(sf.timings)
        sf.controls[name].value = value  # as a click in the browser does: no sf.set around it
        assert len(sf.timings) == before + 1, f"{name} = {value!r} redrew {len(sf.timings) - before} times"
        if name == "preset" or sf.values["preset"] == MACHINE:
            link = PRESETS.get(value) or bench.fit(sf.values["formula"])
            assert sf.values["alpha"] == pytest.approx(np.clip(link.alpha, 1e-7, 1e-2))
            assert sf.values["beta"] == pytest.approx(np.clip(link.beta, 1e6, 1e12))
        assert sf.image.value == sf.png(full=True)
    assert sf.errors.outputs == ()


def test_widget_redraws_fast_enough(widget):
    sf = widget
    start = len(sf.timings)
    for k in range(1, 21):
        sf.set(k=k)
    median = float(np.median(sf.timings[start:]))
    print(f"costs widget: median callback + redraw {median * 1e3:.0f} ms over 20 moves of k")
    assert median < 1.0  # the 50 ms target is for an idle laptop; this only catches a rebuild on every move


def test_widget_rejects_bad_arguments(bench):
    with pytest.raises(ValueError, match="preset"):
        costs_widget(preset="carrier pigeon")
    with pytest.raises(ValueError, match="preset"):
        costs_widget(preset=MACHINE)  # needs a bench record
    with pytest.raises((ValueError, TypeError), match="k"):
        costs_widget(k=0)
    with pytest.raises(ValueError, match="t_compute"):
        costs_widget(t_compute=1e3)


def test_costs_widget_names_a_record_of_the_wrong_kind(bench, runs):
    """A record of another kind is refused in one sentence saying what was expected and what came, before any drawing."""
    cases = [
        (dict(measured_bench=runs), r"measured_bench must be a BenchRecord .* got a dict of records of kind 'run'"),
        (dict(measured_bench="bench.json"), r"measured_bench must be a BenchRecord .* got a str"),
        (dict(measured_runs=bench), r"measured_runs must be a dict \{k: Run\} .* got a record of kind 'bench'"),
        (dict(measured_runs=runs[1]), r"measured_runs must be a dict \{k: Run\} .* got a record of kind 'run'"),
        (dict(measured_runs=list(runs.values())), r"measured_runs must be a dict .* got a list"),
    ]
    for kwargs, message in cases:
        with pytest.raises(TypeError, match=message) as caught:
            costs_widget(**kwargs)
        assert len(str(caught.value)) < 300, str(caught.value)


def test_snapped_labels_start_on_whole_pixels_and_an_unchanged_row_leaves_its_label_alone():
    """A slider's timeline starts each label on the whole pixel nearest its bar's end, half a pixel at most away,
    and showing the same rows again sets nothing (a set label would be redrawn)."""
    from matplotlib.figure import Figure

    from dpviz.topics.speedup_model.plots_timeline import TimelineBars

    rows = timing.timeline_rows((1, 2, 4), t_compute=0.05, alpha=1e-5, beta=1e9, M=1e7)
    ax = Figure(figsize=(6, 3), dpi=80).subplots()
    bars = TimelineBars(ax, rows, snap_labels=True)
    bars.show(rows)  # again, now that the axis is laid out
    for label, row in zip(bars.labels, rows):
        x, y = label.get_position()
        px = ax.transData.transform((x, y))[0]
        assert abs(px - round(px)) < 1e-6
        assert abs(px - ax.transData.transform((row.t_step / bars.scale, y))[0]) <= 0.5 + 1e-9
    for artist in bars.labels + bars.compute + bars.comm:
        artist.stale = False
    bars.show(rows)
    assert not any(artist.stale for artist in bars.labels + bars.compute + bars.comm)


def test_link_curves_keep_the_marks_matplotlib_gives_the_starting_curves(bench, runs):
    """The widget's link curves are marked where plot_speedup's markevery (a step along the Axes' diagonal) puts the
    marks for the curves it starts with, and the marks stay at those k while the sliders move the curves."""
    from matplotlib.lines import _mark_every_path

    from dpviz.topics.speedup_model.widget import _marks_now

    for t_compute, M in ((1.0, 1e8), (1e-3, 1e9), (5.0, 1e4)):
        ax = plot_speedup(timing.speedup_curves(np.arange(1, 65), t_compute=t_compute, M=M),
                          ax=plt.figure(figsize=(5.5, 4)).add_subplot())
        ax.figure.canvas.draw()
        for line in ax.lines[1:]:
            tpath, affine = line._get_transformed_path().get_transformed_points_and_affine()
            marked = _mark_every_path(line.get_markevery(), tpath, affine, ax).vertices
            theirs = [int(np.flatnonzero((tpath.vertices == v).all(axis=1))[0]) for v in marked]
            assert _marks_now(line) == theirs, (line.get_gid(), t_compute, M)
        plt.close(ax.figure)

    figure = CostsFigure(machine={f: timing.link_from_fit(fit, name=MACHINE) for f, fit in bench.fits().items()},
                         measured=timing.measured_speedup(runs), workload=timing.measured_workload(runs))
    starting = {name: line.get_markevery() for name, line in figure.lines.items()}
    assert all(isinstance(marks, list) and 3 <= len(marks) <= 6 for marks in starting.values()), starting
    assert len({tuple(marks) for marks in starting.values()}) == len(starting)  # no two curves marked at the same k
    figure.update(k=5, alpha=1e-3, beta=1e7, M=1e9, t_compute=0.01, formula="notes", preset="NVLink")
    assert {name: line.get_markevery() for name, line in figure.lines.items()} == starting


def test_a_level_bar_is_drawn_with_the_transform_a_rectangle_has():
    """figure s01's bars skip Rectangle's turn about a point: for an unturned bar the matrix is the same to the bit,
    and a turned one is turned as a Rectangle is."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    ax = Figure().subplots()
    for angle in (0.0, 30.0):
        level = timeline_plot.LevelBar((0.25, 1.69), 3.7, 0.62, angle=angle)
        plain = Rectangle((0.25, 1.69), 3.7, 0.62, angle=angle)
        ax.add_patch(level), ax.add_patch(plain)
        for width in (0.0, 1e-7, 2.5, 812.125):
            level.set_width(width), plain.set_width(width)
            if angle == 0:
                assert np.array_equal(level.get_transform().get_matrix(), plain.get_transform().get_matrix())
            else:
                np.testing.assert_allclose(level.get_transform().get_matrix(), plain.get_transform().get_matrix(),
                                           rtol=0, atol=1e-12)
