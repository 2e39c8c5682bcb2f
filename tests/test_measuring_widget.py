"""The measuring chapter's slider panel: α and β set by hand against this machine's measured all-reduce times.

On the record ./run saved (figures/records/bench) and on a small sweep measured here: α moves the small messages'
residuals most and β the large ones'; no hand-set pair the sliders reach misses the points by less than the fit;
the panel draws the record's measured times and nothing else as points; its curves are the cost model's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.lines import Line2D

from dpviz.topics.ground_floor import costmodel
from dpviz.topics.measuring.hand_fit import fitted_points
from dpviz.topics.measuring.run_bench import BenchConfig, run_sweep
from dpviz.topics.measuring.widget import alpha_beta_widget
from dpviz.topics.speedup_model.figure_records import load_inputs
from widget_checks import assert_blit_is_right

FIGURE_RECORDS = Path(__file__).resolve().parents[1] / "figures" / "records"


@pytest.fixture(scope="module")
def bench():
    return load_inputs(FIGURE_RECORDS).bench


@pytest.fixture(scope="module")
def fresh():
    """A small sweep measured now, as the chapter measures one (k = 2, message sizes from 1 KiB to 4 MiB)."""
    return run_sweep(BenchConfig(ks=(2,), sizes=(1024, 65536, 4 << 20), impls=("all_reduce",), repeats=3,
                                 stall_timeout=180), progress=False)


@pytest.fixture()
def panel(bench, fresh):
    return alpha_beta_widget(bench, fresh)


def drawn_ratios(sf) -> dict:
    """M -> measured / modeled as the residual panel draws it (on its edge when past the axis)."""
    out = {}
    for artists in (sf.view.ratio_in, sf.view.ratio_up, sf.view.ratio_down):
        for line in artists.values():
            out.update(zip(*(np.asarray(v, float).tolist() for v in line.get_data())))
    return out


def test_the_panel_starts_at_the_fit_and_says_it_is_the_smallest_miss(panel, bench):
    fit = bench.fit("ring")
    assert panel.values["pair"] == "fit"
    assert np.isclose(panel.values["alpha"], fit.alpha) and np.isclose(panel.values["beta"], fit.beta)
    assert "the smallest any pair gives" in panel.status.value
    assert bench.describe() in panel.status.value  # the record the points come from, read from it


def test_alpha_moves_the_small_messages_residuals_most_and_beta_the_large_ones(panel, bench):
    points = fitted_points(bench)
    small, large = points.M.min(), points.M.max()
    start = drawn_ratios(panel)
    alpha, beta = panel.values["alpha"], panel.values["beta"]
    assert np.allclose([start[m] for m in points.M], points.ratio(alpha, beta))  # the panel draws the ratios

    def moved(before, after, M):
        return abs(np.log(after[M] / before[M]))

    panel.set(alpha=alpha * 3)
    after_alpha = drawn_ratios(panel)
    assert moved(start, after_alpha, small) > 5 * moved(start, after_alpha, large), (start, after_alpha)
    assert after_alpha[small] < 0.5  # the floor rose: the small messages now take a third of the modeled time
    panel.set(alpha=alpha, beta=beta / 3)
    after_beta = drawn_ratios(panel)
    assert moved(start, after_beta, large) > 5 * moved(start, after_beta, small), (start, after_beta)
    assert after_beta[large] < 0.5


def test_no_hand_set_pair_the_sliders_reach_misses_less_than_the_fit(panel, bench, fresh):
    for name, record in (("the record", bench), ("just now", fresh)):
        points = fitted_points(record, name)
        for formula in ("ring", "notes"):
            fit = record.fit(formula)
            best = points.rms(fit.alpha, fit.beta, formula)
            lo, hi = panel.view.alpha_range, panel.view.beta_range
            alphas, betas = np.meshgrid(np.logspace(*lo, 61), np.logspace(*hi, 61))
            grid = points.rms(alphas, betas, formula)
            assert grid.min() >= best - 1e-12, (name, formula, grid.min(), best)
            # and every step of a slider away from the fit misses by more
            for a, b in ((fit.alpha * 1.12, fit.beta), (fit.alpha / 1.12, fit.beta), (fit.alpha, fit.beta * 1.12),
                         (fit.alpha, fit.beta / 1.12)):
                assert points.rms(a, b, formula) > best
    panel.set(alpha=panel.values["alpha"] * 2)
    assert panel.values["pair"] == "hand" and "× the fit's" in panel.status.value


def test_the_panel_draws_only_the_measured_points_of_the_sweep_shown(panel, bench, fresh):
    """Each point is a measured time of the record (its fastest repeat, at a k with a core per rank); nothing else."""
    for times, record in (("the record", bench), ("just now", fresh)):
        panel.set(times=times)
        rows = (record.impl == "all_reduce") & np.isin(record.k, record.own_core_ks())
        expected = {(float(M), float(t)) for M, t in zip(record.M[rows], record.fastest[rows] / panel.view.scale)}
        shown = set()
        for ax in (panel.view.ax_time,):
            for line in ax.get_lines():
                if line.get_visible() and line.get_linestyle() == "None" and len(line.get_xdata()):
                    shown |= set(zip(np.asarray(line.get_xdata(), float).tolist(),
                                     np.asarray(line.get_ydata(), float).tolist()))
        assert shown == expected, times
        assert set(drawn_ratios(panel)) == {float(M) for M in record.M[rows]}
        assert record.describe() in panel.status.value


def test_the_curves_are_the_cost_model_and_say_so(panel):
    panel.set(alpha=1e-4, beta=1e9)
    view = panel.view
    for k, curve in view.curves.items():
        M, y = curve.get_data()
        assert np.allclose(np.asarray(y) * view.scale, costmodel.t_comm(k, np.asarray(M), 1e-4, 1e9, formula="ring"))
        _, floor = view.floors[k].get_data()
        assert np.allclose(np.asarray(floor) * view.scale, 2 * (k - 1) * 1e-4)
    words = [t.get_text() for t in view.fig.legends[0].get_texts()]
    assert "your α, β (modeled)" in words and "the fit (modeled)" in words and "k = 2, measured" in words
    assert_blit_is_right(panel, "alpha_beta_widget after a move")


def test_the_toggle_goes_to_the_fit_and_back_to_the_pair_set_by_hand(panel, bench):
    ring, notes = bench.fit("ring"), bench.fit("notes")
    panel.set(alpha=1e-3)
    hand = dict(panel.values)
    assert hand["pair"] == "hand"
    panel.set(pair="fit")
    assert np.isclose(panel.values["alpha"], ring.alpha) and np.isclose(panel.values["beta"], ring.beta)
    panel.set(pair="hand")
    assert panel.values == hand
    panel.set(formula="notes")  # a formula goes to its own fit: at k = 2 the notes' α is twice the ring's, β half
    assert panel.values["pair"] == "fit"
    assert np.isclose(panel.values["alpha"], notes.alpha) and np.isclose(panel.values["beta"], notes.beta)
    assert np.isclose(notes.alpha, 2 * ring.alpha) and np.isclose(notes.beta, ring.beta / 2)
    panel.set(times="just now")
    assert panel.values["pair"] == "fit" and "the smallest any pair gives" in panel.status.value
    assert_blit_is_right(panel, "alpha_beta_widget on the fresh sweep's notes fit")


def test_one_sentence_for_a_wrong_argument(bench):
    with pytest.raises(TypeError, match="bench must be a BenchRecord"):
        alpha_beta_widget("figures/records/bench")
    with pytest.raises(ValueError, match="formula"):
        alpha_beta_widget(bench, formula="tree")
    with pytest.raises(TypeError, match="fresh must be a BenchRecord"):
        alpha_beta_widget(bench, fresh={"k": 2})
