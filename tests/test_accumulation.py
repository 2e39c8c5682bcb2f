"""Chapter 10, gradient accumulation, on real runs: m micro-batches summed give the big-batch gradient and what
k = m ranks all-reduce; m = 1 changes nothing; accumulate-then-all-reduce is the same update with m times fewer
all-reduces; the bytes saved for backward shrink with the micro-batch. Records, theory, figures, widget, cards."""

import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from dpviz.topics.accumulation import claims  # noqa: E402
from dpviz.topics.accumulation.claims import figure_claims  # noqa: E402
from dpviz.engine.data import teacher_data  # noqa: E402
from dpviz.course import GROUPS
from dpviz.topics.accumulation.figures import (
    figure_accumulation_memory, figure_accumulation_sync, figure_accumulation_timelines,
)
from dpviz.topics.accumulation.plots import UpdateBars, plot_activation_memory, plot_comm_per_update, plot_update_rows  # noqa: E402
from dpviz.engine.schema import load, provenance  # noqa: E402
from dpviz.topics.accumulation.records import (
    FIGURE_PLAN,
    FIGURE_STEMS,
    TIMELINE_BATCH,
    AccumulationRun,
    accumulation_grid,
    figure_records,
    figure_selection,
    grid_keys,
    grid_name,
    grid_run,
    same_update,
    timeline_stem,
)
from dpviz.engine.paths import SHIPPED_DIR  # noqa: E402
from dpviz.topics.ground_floor.records import rel_err  # noqa: E402
from dpviz.topics.accumulation.run_accumulation import (
    AccumConfig, figure_configs, micro_batches_of, record_accumulation, saved_activation_bytes,
)
from dpviz.topics.ground_floor.rank_models import build_model  # noqa: E402
from dpviz.topics.question_bank.bank import ALL_CARDS, cards_for  # noqa: E402
from dpviz.topics.accumulation import theory as acc  # noqa: E402
from dpviz.topics.ground_floor import costmodel  # noqa: E402
from dpviz.topics.accumulation.widget import accumulation_widget  # noqa: E402
from widget_checks import assert_blit_is_right  # noqa: E402

WIDTH, DEPTH, D_IN = 32, 2, 8
SMALL = dict(width=WIDTH, depth=DEPTH, d_in=D_IN, steps=3, dataset_size=512)
B = 64  # examples per update in every run of the fixture
P = D_IN * WIDTH + WIDTH + WIDTH * WIDTH + WIDTH + WIDTH + 1  # the MLP's parameters


@pytest.fixture(scope="module")
def runs():
    """One launch of 2 ranks: one process with m = 1, 2, 4; two ranks with m = 1, and m = 2 both ways."""
    configs = {
        "big": AccumConfig(k=1, m=1, b=B, **SMALL),
        "one2": AccumConfig(k=1, m=2, b=B, **SMALL),
        "one4": AccumConfig(k=1, m=4, b=B, **SMALL),
        "ranks2": AccumConfig(k=2, m=1, b=B // 2, **SMALL),
        "accumulate": AccumConfig(k=2, m=2, b=B // 2, sync="accumulate", **SMALL),
        "every": AccumConfig(k=2, m=2, b=B // 2, sync="every", **SMALL),
    }
    return dict(zip(configs, record_accumulation(list(configs.values()))))


# --- the notes' claims, on real runs ---------------------------------------------------------------


def test_every_way_steps_with_the_big_batch_gradient(runs):
    for name, run in runs.items():
        assert run.meta["global_batch"] == B, name
        assert run.big_rel_err.shape == (3, run.k)
        assert run.big_rel_err.max() <= 1e-5, name
        assert "matched the big-batch gradient" in run.check()


def test_m_micro_batches_summed_equal_what_m_ranks_all_reduce(runs):
    one2, ranks2 = runs["one2"], runs["ranks2"]
    assert one2.param_digest[0, 0] == ranks2.param_digest[0, 0]  # the same θ to start from
    assert same_update(one2, ranks2) <= 1e-5
    # ... and the two ranks' halves are the process's two micro-batches, in order
    assert np.array_equal(one2.batch_index, ranks2.batch_index)


def test_m_equal_one_changes_nothing(runs):
    big = runs["big"]
    assert (big.reduced_grad == big.big_grad[:, None, :]).all()  # bit for bit the one-pass gradient
    assert big.t_micro.shape == (3, 1, 1) and big.calls_per_update == 0
    assert big.meta["activation_bytes"] == 4 * runs["one4"].meta["activation_bytes"]


def test_accumulate_then_all_reduce_is_the_same_update_with_fewer_calls(runs):
    accumulate, every = runs["accumulate"], runs["every"]
    assert same_update(accumulate, every) <= 1e-5
    assert accumulate.replicas_identical().all() and every.replicas_identical().all()
    assert (accumulate.reduced_grad == accumulate.reduced_grad[:, :1]).all()  # every rank stepped with the same bits
    assert (accumulate.allreduce_calls == 1).all() and (every.allreduce_calls == 2).all()
    assert (accumulate.allreduce_bytes == 4 * P).all() and (every.allreduce_bytes == 2 * 4 * P).all()
    # only the pattern that talks after each micro-batch spends time in all_reduce before the last one
    assert (accumulate.t_comm[:, :, 0] == 0).all() and (every.t_comm[:, :, 0] > 0).all()
    assert (accumulate.t_comm[:, :, 1] > 0).all()


def test_runs_that_start_a_step_alike_share_its_reference_and_it_is_a_fresh_pass(runs):
    """one2 and ranks2 step alike, bit for bit, so one backward pass per step serves both; it is still a pass of its
    own over all the step's examples, on a fresh model at the parameters the step started from."""
    from dpviz.topics.accumulation.rank_accumulation import batch_rows, big_batch_grad

    one2, ranks2 = runs["one2"], runs["ranks2"]
    assert (one2.param_digest[:, 0] == ranks2.param_digest[:, 0]).all()
    assert np.array_equal(one2.big_grad, ranks2.big_grad)
    x, y = map(torch.from_numpy, teacher_data(SMALL["dataset_size"], D_IN, seed=0))
    config = AccumConfig(k=1, m=2, b=B, **SMALL)
    rows = batch_rows(config, 0)
    start = torch.nn.utils.parameters_to_vector(build_model("mlp", d_in=D_IN, width=WIDTH, depth=DEPTH).parameters())
    assert rel_err(big_batch_grad(config, start.detach().numpy(), x[rows], y[rows]), one2.big_grad[0]) <= 1e-6


def test_the_reference_plan_computes_each_distinct_reference_once_and_shares_the_passes_out():
    from dpviz.topics.accumulation.rank_accumulation import reference_plan

    same, apart = AccumConfig(k=1, m=2, b=B, **SMALL), AccumConfig(k=2, m=1, b=B // 2, **SMALL)
    other_seed = AccumConfig(k=1, m=1, b=B, **{**SMALL, "seed": 1})
    starts = np.arange(12, dtype=np.float32).reshape(4, 3)  # steps + 1 states of 3 parameters
    later = starts.copy()
    later[2:] += 1  # the same parameters for steps 0 and 1, then apart
    plan = reference_plan([same, apart, other_seed], [starts, later, starts], 2)
    assert [plan[(1, step)][0] for step in range(3)] == [(0, 0), (0, 1), (1, 2)]
    assert [plan[(2, step)][0] for step in range(3)] == [(2, 0), (2, 1), (2, 2)]  # another model: nothing shared
    computed = set(plan.values())
    assert len(computed) == 7
    owners = [owner for _, owner in computed]
    assert sorted(owners.count(rank) for rank in (0, 1)) == [3, 4]  # the same examples per pass: as even as can be


def test_one_process_never_calls_all_reduce(runs):
    for name in ("big", "one2", "one4"):
        run = runs[name]
        assert run.meta["launched_ranks"] == 2 and run.k == 1
        assert (run.t_comm == 0).all() and run.calls_per_update == 0 and run.bytes_per_update == 0


def test_bytes_saved_for_backward_are_the_activations_and_fall_with_the_micro_batch(runs):
    # this MLP keeps, per example: its d_in inputs, each tanh layer's output (the next layer's input), and f(x) − y
    per_example = 4 * (D_IN + DEPTH * WIDTH + 1)
    for run in runs.values():
        assert run.meta["activation_bytes"] == per_example * run.meta["micro_batch"]
    assert runs["big"].meta["activation_bytes"] == 2 * runs["one2"].meta["activation_bytes"]


def test_saved_activation_bytes_leaves_the_parameters_out():
    model = build_model("mlp", d_in=3, width=5, depth=1, seed=0)  # Linear(3, 5), tanh, Linear(5, 1)
    x, y = torch.randn(7, 3), torch.randn(7, 1)
    assert saved_activation_bytes(model, x, y) == 4 * 7 * (3 + 5 + 1)
    assert all(p.grad is not None for p in model.parameters())  # the backward pass ran and freed the graph


def test_every_rank_had_one_thread(runs):
    assert {run.meta["threads_per_rank"] for run in runs.values()} == {1}


# --- records ---------------------------------------------------------------------------------------


def test_record_round_trip_and_describe(runs, tmp_path):
    run = runs["accumulate"]
    again = load(run.save(tmp_path / "acc"))
    assert isinstance(again, AccumulationRun)
    for name, value in run.arrays.items():
        assert np.array_equal(getattr(again, name), value), name
    assert again.describe() == run.describe()
    assert "k=2 ranks, m=2 micro-batches of 16, accumulate, then one all-reduce" in run.describe()
    assert runs["big"].describe().startswith("one process, one batch of 64")
    entry = provenance(run)
    assert {"host", "cores", "date", "describe"} <= set(entry)


def test_load_refuses_a_missing_array(runs, tmp_path):
    stem = runs["every"].save(tmp_path / "every")
    with np.load(stem.with_suffix(".npz")) as z:
        arrays = {name: z[name] for name in z.files if name != "t_comm"}
    np.savez(stem.with_suffix(".npz"), **arrays)
    header = json.loads(stem.with_suffix(".json").read_text())
    header["arrays"] = sorted(arrays)
    header.pop("npz_sha256", None)  # a hand-made pair: no digest binds it
    stem.with_suffix(".json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match="t_comm"):
        load(stem)


def test_without_grads_the_record_keeps_the_errors_only():
    (run,) = record_accumulation(AccumConfig(k=1, m=2, b=16, keep_grads=False, **SMALL))
    assert run.reduced_grad is None and run.big_grad is None and run.batch_index is None
    assert run.big_rel_err.max() <= 1e-5
    with pytest.raises(ValueError, match="keep_grads"):
        same_update(run, run)


def test_check_catches_a_wrong_count(runs):
    run = runs["every"]
    broken = AccumulationRun(run.meta, {**run.arrays, "allreduce_calls": np.ones_like(run.allreduce_calls)})
    with pytest.raises(AssertionError, match="all-reduce calls"):
        broken.check()


# --- bad input -------------------------------------------------------------------------------------


def one_sentence(message: str) -> bool:
    return message.endswith(".") and ". " not in message


@pytest.mark.parametrize("bad, name", [
    (dict(m=0), "m"), (dict(m=-2), "m"), (dict(m=3, b=64), "b"), (dict(b=0), "b"), (dict(k=0), "k"),
    (dict(sync="sometimes"), "sync"), (dict(steps=0), "steps"), (dict(lr=0.0), "lr"), (dict(m=1.5), "m"),
])
def test_bad_config_is_one_sentence_naming_the_argument(bad, name):
    with pytest.raises((TypeError, ValueError)) as err:
        AccumConfig(**bad)
    message = str(err.value)
    assert message.startswith(f"{name} must"), message
    assert one_sentence(message), message


def test_a_batch_that_does_not_split_says_so():
    with pytest.raises(ValueError, match=r"b must split into m=3 equal micro-batches.*got b=64\.$"):
        AccumConfig(k=1, m=3, b=64)
    with pytest.raises(ValueError, match="global_batch must split into m=3"):
        micro_batches_of(64, 3)
    assert micro_batches_of(64, 4) == 16
    with pytest.raises(ValueError, match="configs"):
        record_accumulation([])


def test_theory_checks_its_input(runs):
    with pytest.raises(ValueError, match="m must"):
        costmodel.accumulation_update_time(0, 0.1, 0.01)
    with pytest.raises(ValueError, match="sync must"):
        costmodel.accumulation_allreduces(2, sync="never")
    with pytest.raises(ValueError, match="one_process"):
        acc.three_ways(runs["ranks2"], runs["ranks2"], runs["big"])
    with pytest.raises(ValueError, match="every"):
        acc.sync_patterns(runs["accumulate"], runs["accumulate"])
    with pytest.raises(ValueError, match="one-process"):
        acc.memory_points([runs["ranks2"]])


# --- theory ----------------------------------------------------------------------------------------


def test_cost_model_of_an_update():
    assert costmodel.accumulation_update_time(4, 0.01, 0.003) == pytest.approx(4 * 0.01 + 0.003)
    assert costmodel.accumulation_update_time(4, 0.01, 0.003, sync="every") == pytest.approx(4 * 0.013)
    assert costmodel.accumulation_update_time(1, 0.01, 0.003, sync="every") == costmodel.accumulation_update_time(1, 0.01, 0.003)
    np.testing.assert_array_equal(costmodel.accumulation_allreduces(np.array([1, 2, 8]), sync="every"), [1, 2, 8])
    assert costmodel.accumulation_allreduces(8) == 1


def test_rows_from_records(runs):
    rows = acc.three_ways(runs["one2"], runs["ranks2"], runs["big"])
    assert [row.source for row in rows] == ["measured"] * 3
    assert sum(s.kind == "compute" for s in rows[0].segments) == 2  # two micro-batches, one after the other
    assert rows[0].calls == 0 and rows[1].calls == 1
    starts = [s.start for s in rows[0].segments]
    assert starts == sorted(starts) and rows[0].t_update > 0
    every, once = acc.sync_patterns(runs["every"], runs["accumulate"])
    assert sum(s.kind == "comm" for s in every.segments) == 2 and sum(s.kind == "comm" for s in once.segments) == 1
    modeled = acc.modeled_row("x", m=3, t_micro=0.01, t_comm=0.002, sync="every")
    assert modeled.source == "modeled" and modeled.t_update == pytest.approx(3 * 0.012)
    curves = acc.comm_curves([runs["every"], runs["accumulate"]])
    assert curves["every"].calls.tolist() == [2] and curves["accumulate"].calls.tolist() == [1]
    points = acc.memory_points([runs["big"], runs["one2"], runs["one4"]])
    assert points.micro_batch.tolist() == [64, 32, 16] and points.rel_err[0] == 0.0


# --- figures, from the committed figure records ----------------------------------------------------


@pytest.fixture(scope="module")
def figure_set():
    return figure_records()


def test_the_group_is_registered_with_its_runs():
    from dpviz.topics.accumulation.run_accumulation import record_accumulation_plan
    from dpviz.recipes import RECIPES

    group = next(g for g in GROUPS if g.name == "accumulation")
    assert group.plan is FIGURE_PLAN and FIGURE_PLAN.stems == FIGURE_STEMS == tuple(figure_configs())
    assert RECIPES[FIGURE_PLAN.name] is record_accumulation_plan


def test_figures_draw_and_the_records_pass_their_checks(figure_set):
    drawn = next(g for g in GROUPS if g.name == "accumulation").draw(figure_set)
    assert set(drawn) == {"accumulation_timelines", "accumulation_sync", "accumulation_memory"}
    for name, (fig, sources) in drawn.items():
        assert fig.axes and sources, name
        assert all(isinstance(s, AccumulationRun) for s in sources)
        plt.close(fig)
    line = figure_claims(figure_set)
    assert "1 when accumulating" in line
    for run in figure_set.values():
        assert run.meta["threads_per_rank"] == 1


def test_figure_titles_are_true_of_their_records(figure_set):
    fig = figure_accumulation_memory(figure_set)
    points = acc.memory_points([figure_set[s] for s in FIGURE_STEMS if s.startswith("accumulation_one_b1024")])
    shrink = points.activation_bytes[0] / points.activation_bytes[-1]
    assert f"falls {shrink:.0f}×" in fig.axes[0].get_title(loc="left")
    fig = figure_accumulation_sync(figure_set)
    assert "saves 7 of 8 all-reduces" in fig.axes[1].get_title(loc="left")
    fig = figure_accumulation_timelines(figure_set)
    caption = fig.caption  # provenance is the one-line caption under the figure, not text in the image
    assert "1 intra-op thread(s)" in caption and "really run at once" in caption
    panels = figure_selection(figure_set)["timelines"]
    for ax, runs in zip(fig.axes, panels):  # each panel's title is the claims module's, on the runs it draws
        assert ax.get_title(loc="left") == claims.timeline_title(*runs)
    assert fig._suptitle.get_text() == claims.timelines_title(panels)
    k4 = figure_set[timeline_stem(4, 1)]
    labels = " ".join(t.get_text() for t in fig.axes[1].texts)
    if k4.oversubscribed:  # more ranks than cores: the bar says so, and a modeled bar stands beside it
        assert f"4 ranks on {k4.meta['cores']} cores took turns" in labels and "modeled" in labels
        assert fig.axes[1].get_title(loc="left").endswith(f"4 ranks, which shared {k4.meta['cores']} cores")
    plt.close("all")


def test_accumulating_is_slower_than_two_ranks_in_the_committed_record(figure_set):
    """The lesson the timeline workload was chosen for: at m = k = 2, with a core per rank, one process
    accumulating takes at least SLOWER times as long as two ranks on the same examples."""
    one, ranks = figure_set[timeline_stem(1, 2)], figure_set[timeline_stem(2, 1)]
    assert one.meta["global_batch"] == ranks.meta["global_batch"] == TIMELINE_BATCH
    if ranks.k > ranks.meta["cores"]:
        pytest.skip(f"the committed timeline runs had {ranks.meta['cores']} core(s) for 2 ranks")
    t_one, t_ranks = one.update_seconds(), ranks.update_seconds()  # median whole update against median whole update
    assert t_one / t_ranks >= claims.SLOWER, (f"one process accumulating took {t_one / t_ranks:.2f}× as long as 2 ranks "
                                              f"({t_one * 1e3:.1f} ms against {t_ranks * 1e3:.1f} ms)")
    assert "at least the 1.5× the lesson asks for" in claims.accumulating_against_ranks(one, ranks, at_least=claims.SLOWER)


def test_plots_draw_rows_and_points(runs):
    fig, ax = plt.subplots()
    assert plot_update_rows(acc.three_ways(runs["one2"], runs["ranks2"], runs["big"]), ax=ax) is ax
    fig, ax = plt.subplots()
    assert plot_comm_per_update(acc.comm_curves([runs["every"], runs["accumulate"]]), ax=ax) is ax
    fig, ax = plt.subplots()
    assert plot_activation_memory(acc.memory_points([runs["big"], runs["one2"]]), ax=ax) is ax
    with pytest.raises(ValueError, match="rows"):
        plot_update_rows([], ax=ax)
    plt.close("all")


def test_update_bars_change_in_place(runs):
    fig, ax = plt.subplots()
    bars = UpdateBars(ax, 3)
    artists = bars.changing_artists()
    bars.show(acc.three_ways(runs["one2"], runs["ranks2"], runs["big"]))
    first = [p.vertices.copy() for p in bars.bars[0]["compute"].get_paths()]
    bars.show(acc.sync_patterns(runs["every"], runs["accumulate"]))
    assert bars.changing_artists() == artists  # no new artists
    assert len(bars.bars[0]["compute"].get_paths()) == 2 and bars.labels[2].get_text() == ""
    assert not np.array_equal(first[0], bars.bars[0]["compute"].get_paths()[0].vertices)
    plt.close(fig)


# --- shipped runs and the sliders ------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid():
    return accumulation_grid()


def test_shipped_grid_is_complete_small_and_checked(grid):
    assert set(grid) == set(grid_keys())
    for key, run in grid.items():
        k, m, sync = key
        assert (run.k, run.m) == (k, m) and (k == 1 or run.sync == sync)
        run.check()
    size = sum(p.stat().st_size for key in grid for p in SHIPPED_DIR.glob(grid_name(*key) + ".*"))
    assert size < 1_000_000, f"the shipped accumulation runs take {size:,} bytes"
    with pytest.raises(ValueError, match="k and m"):
        grid_run(grid, 3, 1)


def test_widget_moves_change_its_artists(grid):
    sf = accumulation_widget(grid, k=2, m=2)
    view = sf.view
    before = [p.vertices.copy() for p in view.bars.bars[1]["comm"].get_paths()]
    caption = sf.status.value
    sf.set(m=8)
    after = view.bars.bars[1]["comm"].get_paths()
    assert len(before) == 2 and len(after) == 8  # one coral block per micro-batch in the every-micro-batch bar
    assert len(view.bars.bars[2]["comm"].get_paths()) == 1  # ... and one when accumulating
    assert sf.status.value != caption and "8 calls" in sf.status.value
    assert_blit_is_right(sf, "k=2, m=8")
    sf.set(k=1, m=4)
    assert view.bars.labels[1].get_text() == "" and "no all-reduce" in sf.status.value
    assert_blit_is_right(sf, "k=1, m=4")
    with pytest.raises(ValueError, match="k and m"):
        accumulation_widget(grid, k=3)
    with pytest.raises(ValueError, match="grid"):
        accumulation_widget({})


# --- cards -----------------------------------------------------------------------------------------


def test_chapter_10_cards_cover_the_question_bank_items():
    cards = cards_for("accumulation")
    kinds = {card.kind for card in cards}
    assert {"true/false", "spot the error", "edge case", "numeric"} <= kinds
    for key in ("question_bank-tf-accumulation", "question_bank-spot-accumulation-speed", "question_bank-edge-accumulate-one"):
        card = next(c for c in ALL_CARDS if c.key == key)
        assert re.search(r"Chapter 10 (shows this|times both) on real runs", card.answer_text()), key


def test_numeric_card_matches_an_independent_computation():
    card = next(c for c in cards_for("accumulation") if c.numeric)
    p = card.params
    k, m, t_micro, t_comm = p["k"], p["m"], p["t_micro"], p["t_comm"]
    expected = {
        "t_every": m * (t_micro + t_comm), "t_once": m * t_micro + t_comm, "calls_every": m, "calls_once": 1,
        "calls_saved": m - 1, "t_saved": (m - 1) * t_comm, "t_alone": k * m * t_micro,
    }
    got = card.values()
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-12), name
    assert "{" not in card.answer_text() and "{" not in card.question_text()
