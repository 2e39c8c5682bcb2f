"""Chapter 09 on real runs: learning-rate rules, warm-up, the linear rule's argument, and the grids shipped for it."""

import json
import math
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from dpviz import course
from dpviz.engine.data import line_data
from dpviz.engine.schema import load
from dpviz.topics.bigger_batch.records import LrGrid, shipped_name
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.topics.bigger_batch import theory as lr_rules
from dpviz.topics.one_step.landscape import descent_path, full_grad


# --- the formulas ---------------------------------------------------------------------------------

def test_the_rules_multiply_by_1_sqrt_k_and_k():
    assert [lr_rules.multiplier(r, 4) for r in lr_rules.RULES] == [1.0, 2.0, 4.0]
    assert lr_rules.scaled_lr(0.1, "sqrt", 2) == pytest.approx(0.1 * math.sqrt(2))
    assert lr_rules.scaled_lr(0.1, "linear", 8) == pytest.approx(0.8)
    assert {lr_rules.multiplier(r, 1) for r in lr_rules.RULES} == {1.0}  # k = 1: every rule keeps η


def test_warmup_ramps_linearly_to_the_target_then_holds():
    rates = lr_rules.warmup_schedule(0.6, 6, 3)
    np.testing.assert_allclose(rates, [0.2, 0.4, 0.6, 0.6, 0.6, 0.6])
    np.testing.assert_array_equal(lr_rules.warmup_schedule(0.6, 4, 0), [0.6] * 4)
    assert lr_rules.warmup_schedule(0.6, 4, 4)[-1] == 0.6


@pytest.mark.parametrize("call, words", [
    (lambda: lr_rules.warmup_schedule(0.0, 10, 2), "lr must be a number > 0"),
    (lambda: lr_rules.warmup_schedule(-0.1, 10, 2), "lr must be a number > 0"),
    (lambda: lr_rules.warmup_schedule(0.1, 10, 11), "warmup must be an integer from 0 to steps=10"),
    (lambda: lr_rules.warmup_schedule(0.1, 10, -1), "warmup must be an integer >= 0"),
    (lambda: lr_rules.scaled_lr(0.0, "linear", 4), "lr_base must be a number > 0"),
    (lambda: lr_rules.multiplier("cube", 4), "rule must be one of"),
    (lambda: lr_rules.multiplier("linear", 0), "k must be an integer >= 1"),
    (lambda: lr_rules.bowl_step_gap(-1.0, 4, 2.0), "eta must be a number > 0"),
    (lambda: lr_rules.examples_to_reach([0, 8], [1.0, 0.5], 0.0), "target must be a number > 0"),
])
def test_bad_input_names_the_argument_in_one_sentence(call, words):
    with pytest.raises((ValueError, TypeError), match=words):
        call()


def test_the_bowl_gap_is_about_k_minus_1_times_eta_lambda_over_2_for_small_steps():
    for k in (2, 4, 8):
        assert lr_rules.bowl_step_gap(1e-4, k, 2.0) == pytest.approx((k - 1) * 1e-4 * 2.0 / 2, rel=1e-2)
    gaps = lr_rules.bowl_step_gap(np.geomspace(1e-3, 0.1, 5), 4, 2.0)
    assert (np.diff(gaps) > 0).all()  # the larger the small-step rate, the further apart


def test_the_line_models_limit_is_where_gradient_descent_stops_converging():
    x, y = line_data()
    lam = lr_rules.line_curvatures(x)
    assert lam[0] > lam[1] > 0
    limit = lr_rules.stability_limit(x)
    assert limit == pytest.approx(2 / lam[0])
    below = descent_path(x, y, eta=0.97 * limit, steps=400)["loss"]
    above = descent_path(x, y, eta=1.03 * limit, steps=400)["loss"]
    assert below[-1] < below[0] and above[-1] > 10 * above[0]


# --- real runs ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grid():
    from dpviz.topics.bigger_batch.run_lr_sweep import record_lr_grid

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return record_lr_grid(model="line", ks=(1, 2), multipliers=(1.0, 2.0, 128.0), warmups=(0, 2), examples=128)


def test_every_run_has_identical_replicas_and_the_rates_its_rule_and_warmup_set(grid):
    assert "bit-identical" in grid.check()
    assert grid.replicas_identical.all()
    assert sorted(set(grid.steps.tolist())) == [8, 16]  # 128 examples: 16 steps on one rank, 8 on two
    assert grid.lr.shape == (12, 16) and grid.loss.shape == (12, 17) and grid.params.shape == (12, 17, 2)
    row = grid.index(k=2, multiplier=2.0, warmup=2)
    np.testing.assert_allclose(grid.lr[row, :8], lr_rules.warmup_schedule(0.02, 8, 2))
    assert np.isnan(grid.lr[row, 8:]).all()  # past its last step


def test_each_step_is_the_mean_gradient_of_the_k_shards_of_the_stream(grid):
    from dpviz.topics.bigger_batch.run_lr_sweep import LrGridConfig, stream_rows

    config = LrGridConfig(model="line", ks=(1, 2), multipliers=(1.0, 2.0, 128.0), warmups=(0, 2), examples=128)
    x, y = line_data(512, seed=0)
    row = grid.index(k=2, multiplier=2.0)
    for t in range(int(grid.steps[row])):
        rows = np.concatenate([stream_rows(config, 2 * t + r) for r in range(2)])
        expected = grid.params[row, t] - grid.lr[row, t] * full_grad(x[rows], y[rows], grid.params[row, t])
        np.testing.assert_allclose(grid.params[row, t + 1], expected, rtol=0, atol=2e-6)


def test_step_gap_is_the_distance_to_k_small_steps_from_the_same_theta(grid):
    from dpviz.topics.bigger_batch.run_lr_sweep import LrGridConfig, stream_rows

    config = LrGridConfig(model="line", ks=(1, 2), multipliers=(1.0, 2.0, 128.0), warmups=(0, 2), examples=128)
    x, y = line_data(512, seed=0)
    for multiplier in (2.0, 128.0):
        row = grid.index(k=2, multiplier=multiplier)
        for t in range(3):
            theta = grid.params[row, t].astype(np.float64)
            for i in range(2):  # the two shards of step t, one after the other, at half the rate
                rows = stream_rows(config, 2 * t + i)
                theta = theta - grid.lr[row, t] / 2 * full_grad(x[rows], y[rows], theta).astype(np.float64)
            gap = np.linalg.norm(grid.params[row, t + 1] - theta)
            assert grid.step_gap[row, t] == pytest.approx(gap, rel=1e-3, abs=1e-5)
    assert np.isnan(grid.step_gap[grid.k == 1]).all()  # one rank: nothing to compare


def test_twin_distance_is_measured_against_the_one_rank_run_at_one_kth_the_rate(grid):
    row = grid.index(k=2, multiplier=2.0)
    twin = int(grid.twin[row])
    assert (grid.k[twin], grid.multiplier[twin], grid.warmup[twin]) == (1, 1.0, 0)
    d = np.linalg.norm(grid.params[row, :9].astype(np.float64) - grid.params[twin, :17:2], axis=1)
    np.testing.assert_allclose(grid.twin_distance[row, :9], d, rtol=1e-5, atol=1e-7)
    assert grid.twin[grid.index(k=2, multiplier=1.0)] == -1  # k = 1 at ×0.5 is not in the grid


def test_with_the_linear_rule_two_ranks_keep_pace_with_one_example_for_example(grid):
    one, two = grid.index(k=1, multiplier=1.0), grid.index(k=2, multiplier=2.0)
    same = grid.curve(one)[::2]  # k = 1 after as many examples as k = 2 at each of its states
    np.testing.assert_allclose(grid.curve(two), same, rtol=0.05)
    slow = grid.curve(grid.index(k=2, multiplier=1.0))  # ×1: as many steps, so twice the examples for the same loss
    assert (slow[1:] > grid.curve(two)[1:]).all()


def test_a_rate_past_the_limit_diverges_and_the_run_stops_there(grid):
    row = grid.index(k=1, multiplier=128.0)
    at = int(grid.diverged_at[row])
    assert 0 < at < grid.steps[row]
    assert grid.diverged(row) and np.isinf(grid.loss[row, at + 1:17]).all()
    assert np.isnan(grid.lr[row, at:16]).all()  # no step was taken after it
    assert grid.examples_to_reach(row, 0.01) == math.inf


def test_record_round_trip_and_a_missing_array_is_refused(grid, tmp_path):
    stem = grid.save(tmp_path / "lr")
    back = load(stem)
    assert isinstance(back, LrGrid) and back.describe() == grid.describe()
    for name, value in grid.arrays.items():
        np.testing.assert_array_equal(back.arrays[name], value)
    header = json.loads(stem.with_suffix(".json").read_text())
    arrays = dict(np.load(stem.with_suffix(".npz")))
    del arrays["step_gap"]
    np.savez(tmp_path / "broken.npz", **arrays)
    header["arrays"].remove("step_gap")
    header.pop("npz_sha256")  # a hand-made pair: no digest binds it, so the missing array is what load names
    (tmp_path / "broken.json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match="lacks the array 'step_gap'"):
        load(tmp_path / "broken")


def test_asking_for_a_run_the_grid_lacks_names_the_arguments(grid):
    with pytest.raises(ValueError, match="k, multiplier and warmup must name a run of this grid"):
        grid.index(k=4, multiplier=2.0)
    with pytest.raises(ValueError, match="warmup must be an integer >= 0"):
        grid.index(k=1, multiplier=1.0, warmup=-1)


@pytest.mark.parametrize("overrides, words", [
    (dict(base_lr=0.0), "base_lr must be a number > 0"),
    (dict(base_lr=-0.01), "base_lr must be a number > 0"),
    (dict(warmups=(0, 120)), "warmups entries must be at most 100"),
    (dict(examples=3204), "examples must be a multiple of k·b"),
    (dict(multipliers=(1.0, 0.0)), "multipliers entries must be a number > 0"),
    (dict(ks=()), "ks must list at least one value"),
    (dict(ks=(1, 1)), "ks must not repeat a value"),
    (dict(model="cnn"), "model must be one of"),
    (dict(b=200), "b must be at most dataset_size / k"),
])
def test_bad_grid_settings_are_refused_before_any_process_starts(overrides, words):
    from dpviz.topics.bigger_batch.run_lr_sweep import LrGridConfig

    with pytest.raises((ValueError, TypeError), match=words):
        LrGridConfig(**overrides)


def test_runs_that_share_a_launch_train_as_they_would_alone(grid):
    """A launch's runs step side by side, one all-reduce carrying all of them: a run alone in its launch gives the
    same bits at k = 1 and the same trajectory to rounding at k = 2, and a batch-mate that diverges and drops out
    (×128) disturbs neither."""
    from dpviz.topics.bigger_batch.run_lr_sweep import record_lr_grid

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = record_lr_grid(model="line", ks=(1, 2), multipliers=(2.0,), warmups=(0,), examples=128)
    assert grid.diverged(grid.index(k=2, multiplier=128.0))  # the shared launch held a run that stopped early
    for k in (1, 2):
        mine, theirs = alone.index(k=k, multiplier=2.0), grid.index(k=k, multiplier=2.0)
        n = int(alone.steps[mine])
        if k == 1:
            np.testing.assert_array_equal(alone.params[mine, : n + 1], grid.params[theirs, : n + 1])
            np.testing.assert_array_equal(alone.loss[mine, : n + 1], grid.loss[theirs, : n + 1])
        else:
            np.testing.assert_allclose(alone.params[mine, : n + 1], grid.params[theirs, : n + 1], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(alone.loss[mine, : n + 1], grid.loss[theirs, : n + 1], rtol=1e-5)
        assert alone.diverged_at[mine] == grid.diverged_at[theirs] == -1


# --- the shipped grids, and what chapter 09 claims on them ----------------------------------------

@pytest.fixture(scope="module")
def shipped():
    return LrGrid.shipped("line"), LrGrid.shipped("mlp")


def test_shipped_grids_are_whole_small_and_pass_their_checks(shipped):
    for grid in shipped:
        grid.check()
        assert grid.meta["ks"] == [1, 2, 4] and len(grid.k) == 3 * 9 * 4
        assert "k=1,2,4" in grid.describe() and grid.meta["host"] in grid.describe()
    total = sum((SHIPPED_DIR / shipped_name(m)).with_suffix(".npz").stat().st_size for m in ("line", "mlp"))
    assert total < 1_500_000


def test_the_chapters_claims_hold_on_the_shipped_grids(shipped):
    from dpviz.topics.bigger_batch.claims import lr_claims

    said = " ".join(lr_claims(*shipped))  # each sentence asserted before it is said
    for words in ("needed", "with each doubling of the rate", "between the bowl's two modeled curves",
                  "3-step warm-up", "diverged with every warm-up"):
        assert words in said


def test_a_missing_shipped_grid_says_how_to_record_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m dpviz.topics.bigger_batch.run_lr_sweep"):
        LrGrid.shipped("line", tmp_path)


def test_the_figures_draw_from_the_grids_and_are_registered(shipped):
    from dpviz.course import GROUPS
    from dpviz.topics.bigger_batch.records import FIGURE_PLAN
    from dpviz.topics.bigger_batch.run_lr_sweep import record_bigger_batch_plan
    from dpviz.recipes import RECIPES

    group = next(g for g in GROUPS if g.name == "bigger_batch")
    assert group.plan is FIGURE_PLAN and FIGURE_PLAN.stems == ("lr_line", "lr_mlp")
    assert RECIPES[FIGURE_PLAN.name] is record_bigger_batch_plan
    drawn = group.draw(dict(zip(FIGURE_PLAN.stems, shipped)))
    try:
        assert set(drawn) == {"lr_loss_curves", "lr_linear_rule", "lr_warmup"}
        for name, (fig, sources) in drawn.items():
            assert sources == list(shipped)
            assert all(ax.has_data() for ax in fig.axes), name
    finally:
        for fig, _ in drawn.values():
            plt.close(fig)


def test_the_slider_moves_only_its_artists_and_links_rule_and_multiplier(shipped):
    from tests.widget_checks import assert_blit_is_right
    from dpviz.topics.bigger_batch.widget import lr_widget

    sf = lr_widget({"line": shipped[0], "mlp": shipped[1]})
    chosen = sf.view.curves.chosen[0]
    before = chosen.get_ydata().copy()
    sf.set(rule="sqrt")
    assert sf.values["multiplier"] == 2.0 and not np.array_equal(chosen.get_ydata(), before)
    sf.set(multiplier=128.0)
    assert sf.values["rule"] == "free" and "diverged" in sf.status.value
    assert len(sf.view.curves.blowup[0].get_xdata()) == 1
    assert_blit_is_right(sf, "lr widget, diverged run")
    sf.set(rule="linear", k=2, warmup=3)
    assert sf.values["multiplier"] == 2.0 and len(sf.view.curves.plain[0].get_xdata()) > 0
    sf.set(model="mlp")
    assert "MLP" in sf.status.value
    assert_blit_is_right(sf, "lr widget, MLP")
    plt.close(sf.fig)


def test_the_slider_refuses_values_the_grid_lacks(shipped):
    from dpviz.topics.bigger_batch.widget import lr_widget

    with pytest.raises(ValueError, match="k must be one of"):
        lr_widget({"line": shipped[0]}, k=3)
    with pytest.raises(ValueError, match="warmup must be one of"):
        lr_widget({"line": shipped[0]}, warmup=7)
    with pytest.raises(ValueError, match="rule must be one of"):
        lr_widget({"line": shipped[0]}, rule="cube")
    with pytest.raises(ValueError, match=r"grids\['mlp'\] must be a grid of the mlp model"):
        lr_widget({"mlp": shipped[0]})


def test_chapter_09_cards_compute_their_numbers_and_the_bank_points_to_the_chapter():
    from dpviz.topics.question_bank.bank import cards_for

    cards = cards_for("bigger_batch")
    assert len(cards) >= 8
    for card in cards:
        assert "{" not in card.answer_text() and "{" not in card.question_text(), card.key
    rules = next(c for c in cards if c.key == "bigger_batch-num-rules").values()
    assert (rules["x1"], rules["sqrt"], rules["linear"]) == pytest.approx((0.01, 0.02, 0.04))
    pointed = {c.key for c in cards_for("question_bank") if course.Ref("bigger_batch") in c.answer_text()}
    assert {"question_bank-spot-lr", "question_bank-why-linear-rule", "question_bank-num-lr"} <= pointed
