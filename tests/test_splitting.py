"""Chapter 12, splitting the model: pipeline stages, a tensor-parallel layer and sharded Adam state, on real runs.

The claims: a pipelined step computes the unsplit model's outputs and gradients (to rounding), in the
order its schedule prescribes, moving activations forward and gradients back; the bubble formula is
what a pipeline with equal stages and free transfers leaves idle; both splits of a linear layer
give the unsplit layer's Y, dX and dW, and the ring sends the bytes the formula counts; ZeRO-1 gives
plain data parallelism's parameters while each rank holds 1/k of Adam's state, and its reduce-scatter
sends (k−1)/k·M per rank, the bandwidth term of the notes' formula. Bad input is refused in one
sentence naming the argument; a failing or hung stage is named by its rank, and no process is left.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

import _splitting_workers
from dpviz import course
from dpviz.topics.splitting import figures as splitting_figures
from dpviz.topics.splitting.figures import figure_pipeline_gantt, figure_tensor_parallel, figure_zero_memory
from dpviz.topics.splitting import claims
from dpviz.topics.splitting.plots_pipeline import GanttBars, plot_bubble, plot_gantt
from dpviz.topics.splitting.plots_tensor_parallel import plot_tensor_split
from dpviz.engine.schema import load
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.topics.splitting.records_pipeline import PipelineRun, idle_points, shipped_grid
from dpviz.topics.ground_floor.records import rel_err
from dpviz.topics.splitting.records_tensor_parallel import TensorSplit
from dpviz.topics.splitting.records_zero import ZeroRun
from dpviz.topics.all_reduce.rank_collectives import owned_chunk
from dpviz.engine.supervise import RankError, RankTimeout
from dpviz.engine.launch import launch
from dpviz.topics.splitting.run_pipeline import (
    PipelineConfig, record_pipeline, record_pipelines, split_model, stage_layers,
)
from dpviz.topics.splitting.run_tensor_parallel import TensorConfig, record_tensor_split
from dpviz.topics.splitting.run_zero import ZeroConfig, record_zero
from dpviz.topics.question_bank.bank import ALL_CARDS, cards_for
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.splitting import theory_memory as memory
from dpviz.topics.splitting import theory_pipeline as theory
from dpviz.topics.splitting import theory_tensor_parallel as tp
from dpviz.topics.splitting.widget import pipeline_widget
from widget_checks import assert_blit_is_right

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(batch=64, width=16, depth=4)  # a pipeline that runs in a blink


def one_sentence(message: str) -> bool:
    return message.endswith(".") and ". " not in message.rstrip(".")


# ---------------------------------------------------------------------------------------------
# Theory: the bubble, memory per rank, bytes per exchange


@pytest.mark.parametrize("schedule", theory.SCHEDULES)
@pytest.mark.parametrize("p, m", [(1, 1), (1, 4), (2, 1), (2, 4), (3, 5), (4, 8), (4, 2)])
def test_modeled_timeline_leaves_exactly_the_bubble_idle(p, m, schedule):
    timeline = theory.modeled_timeline(p, m, schedule, t_f=1.0, t_b=2.0)
    np.testing.assert_allclose(timeline.idle_fraction(), theory.bubble_fraction(p, m), atol=1e-12)
    assert timeline.span() == pytest.approx((m + p - 1) * 3.0)
    # every stage works on micro-batch j only after its neighbour handed it over
    for s in range(1, p):
        assert (timeline.fwd[s, :, 0] >= timeline.fwd[s - 1, :, 1]).all()
        assert (timeline.bwd[s - 1, :, 0] >= timeline.bwd[s, :, 1]).all()


@pytest.mark.parametrize("schedule", theory.SCHEDULES)
def test_modeled_waits_sit_where_the_schedule_puts_them(schedule):
    p, m, t_f, t_b = 4, 5, 1.0, 2.0
    timeline = theory.modeled_timeline(p, m, schedule, t_f=t_f, t_b=t_b)
    s = np.arange(p)
    expected = np.stack([s * t_f, (p - 1 - s) * (t_f + t_b), s * t_b], axis=1)  # before, between, after
    np.testing.assert_allclose(timeline.idle_parts(), expected, atol=1e-12)
    np.testing.assert_allclose(timeline.idle_parts().sum(axis=1) / timeline.span(), theory.bubble_fraction(p, m))
    # the first stage waits only in the middle, the last only at the start and the end
    assert timeline.idle_parts()[0, [0, 2]].tolist() == [0, 0] and timeline.idle_parts()[-1, 1] == 0
    assert (theory.handoff_delays(timeline.fwd, timeline.bwd, schedule) == 0).all()  # free hand-offs
    again = theory.replay(timeline.fwd, timeline.bwd, schedule)
    np.testing.assert_allclose(again.fwd, timeline.fwd)
    np.testing.assert_allclose(again.bwd, timeline.bwd)


def test_replay_takes_unequal_passes_and_drops_the_time_between():
    t_f = np.array([[1.0, 1.0], [3.0, 3.0]])  # the last stage three times as slow
    timeline = theory.modeled_timeline(2, 2, "gpipe", t_f=t_f, t_b=2 * t_f)
    assert timeline.span() == pytest.approx(1 + 3 + 3 + 6 + 6 + 2)  # F0 on 0; both F and both B on 1; B1 on 0
    late = timeline.fwd.copy(), timeline.bwd.copy()
    late[0][1] += 0.5  # stage 1's forwards start 0.5 late, and everything after them waits
    late[1][1] += 0.5
    late[1][0] += 0.5
    assert theory.span(*late) == pytest.approx(timeline.span() + 0.5)
    assert theory.replay(*late, "gpipe").span() == pytest.approx(timeline.span())
    assert np.sort(theory.handoff_delays(*late, "gpipe")).tolist() == pytest.approx([0, 0, 0, 0.5])
    with pytest.raises(ValueError, match=r"^t_f must be a number or an array of shape \(p, m\) = \(2, 2\)"):
        theory.modeled_timeline(2, 2, t_f=np.ones(3))
    with pytest.raises(ValueError, match="^t_b must hold finite durations > 0 only"):
        theory.modeled_timeline(2, 2, t_b=np.zeros((2, 2)))


def test_bubble_formula_values_and_broadcasting():
    assert theory.bubble_fraction(1, 7) == 0.0
    assert theory.bubble_fraction(4, 1) == pytest.approx(3 / 4)
    assert theory.bubble_fraction(4, 8) == pytest.approx(3 / 11)
    np.testing.assert_allclose(theory.bubble_fraction(np.array([2, 3]), 4), [1 / 5, 2 / 6])
    curves = theory.bubble_curves((2, 4), 8)
    assert set(curves) == {2, 4} and len(curves[4][0]) == 8


def test_one_forward_one_backward_holds_fewer_activations():
    for p, m in [(2, 4), (4, 8), (3, 2)]:
        for s in range(p):
            order = theory.stage_order(p, m, "1f1b", s)
            assert sorted(order) == sorted(theory.stage_order(p, m, "gpipe", s))
            assert theory.max_in_flight(p, m, "gpipe", s) == m
            assert theory.max_in_flight(p, m, "1f1b", s) == min(p - s, m)


@pytest.mark.parametrize("call, name", [
    (lambda: theory.bubble_fraction(0, 4), "p"),
    (lambda: theory.bubble_fraction(2, 0), "m"),
    (lambda: theory.modeled_timeline(2, 4, "zigzag"), "schedule"),
    (lambda: theory.stage_order(2, 4, "gpipe", 2), "stage"),
    (lambda: memory.bytes_per_rank(0, 2), "n_params"),
    (lambda: memory.bytes_per_rank(10, 2, zero_stage=4), "zero_stage"),
    (lambda: memory.bytes_per_rank(10, 2, optimizer="lion"), "optimizer"),
    (lambda: tp.exchange_bytes(4, 6, 7, 2, "column"), "d_out"),
    (lambda: tp.exchange_bytes(4, 5, 8, 2, "row"), "d_in"),
    (lambda: tp.exchange_bytes(4, 6, 8, 2, "diagonal"), "split"),
])
def test_theory_refuses_bad_input_in_one_sentence(call, name):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    message = str(err.value)
    assert message.startswith(name + " ") and one_sentence(message), message


def test_memory_per_rank_plain_and_sharded():
    plain = memory.bytes_per_rank(1000, 4, zero_stage=0)
    assert plain == {"params": 4000, "grads": 4000, "optimizer": 8000, "total": 16000}  # Adam: two more copies
    assert memory.bytes_per_rank(1000, 8, zero_stage=0) == plain  # more replicas, the same per replica
    zero1 = memory.bytes_per_rank(1000, 4, zero_stage=1)
    assert zero1["optimizer"] == 2000 and zero1["params"] == zero1["grads"] == 4000
    assert memory.bytes_per_rank(1000, 4, zero_stage=3)["total"] == 4 * 250 * 4
    assert memory.bytes_per_parameter(8, zero_stage=1) == 9.0
    # a model too big for one device stays too big under plain data parallelism, whatever k
    assert memory.smallest_k(7_000_000_000, 80e9, zero_stage=0) is None
    k = memory.smallest_k(7_000_000_000, 80e9, zero_stage=1)
    assert memory.fits(7_000_000_000, 80e9, k, zero_stage=1) and not memory.fits(7_000_000_000, 80e9, k - 1, zero_stage=1)


def test_tensor_parallel_bytes_are_ring_counts():
    assert tp.exchange_bytes(4, 6, 8, 2, "column") == {"forward": 64.0, "backward": 96.0}
    assert tp.exchange_bytes(4, 6, 8, 2, "row") == {"forward": 128.0, "backward": 48.0}
    assert tp.data_parallel_bytes(48, 2) == 192.0
    # tensor parallelism grows with the batch, data parallelism does not
    assert tp.exchange_bytes(400, 6, 8, 2, "column")["forward"] == 100 * 64.0


# ---------------------------------------------------------------------------------------------
# A real pipeline


@pytest.fixture(scope="module")
def pipes():
    configs = [PipelineConfig(p=2, m=m, schedule=s, repeats=1, **SMALL) for m, s in ((4, "gpipe"), (4, "1f1b"), (1, "gpipe"))]
    return record_pipelines(configs)


def test_pipeline_equals_the_unsplit_model(pipes):
    for run in pipes:
        assert "outputs equal the unsplit model's" in run.check()
        assert rel_err(run.output, run.big_output) <= 1e-5
        assert rel_err(run.grad, run.big_grad) <= 1e-5
        assert rel_err(run.loss, run.big_loss) <= 1e-5
        assert run.grad.shape == (run.meta["n_params"],) == (int(run.stage_params.sum()),)


def test_pipeline_passes_run_in_schedule_order_and_wait_for_their_inputs(pipes):
    for run in pipes:
        for s in range(run.p):
            starts = [(run.fwd if kind == "F" else run.bwd)[s, j, 0] for kind, j in theory.stage_order(run.p, run.m, run.schedule, s)]
            assert starts == sorted(starts), (run.schedule, s)
            assert (run.fwd[s, :, 1] >= run.fwd[s, :, 0]).all() and (run.bwd[s, :, 1] >= run.bwd[s, :, 0]).all()
        # stage 1 starts micro-batch j after stage 0 finished it, and hands its gradient back before stage 0 uses it
        assert (run.fwd[1, :, 0] >= run.fwd[0, :, 1]).all()
        assert (run.bwd[0, :, 0] >= run.bwd[1, :, 1]).all()
        assert (run.send_fwd[0, :, 0] >= run.fwd[0, :, 1]).all() and np.isnan(run.send_fwd[-1]).all()
        assert np.isnan(run.send_bwd[0]).all() and (run.send_bwd[1, :, 0] >= run.bwd[1, :, 1]).all()
        assert (run.finish >= run.bwd[:, :, 1].max(axis=1)).all()
        idle = run.idle_fraction()
        assert ((idle >= 0) & (idle < 1)).all()


def test_pipeline_moves_activations_forward_and_gradients_back(pipes):
    for run in pipes:
        one_way = run.m * run.meta["micro_batch"] * run.meta["width"] * 4  # every micro-batch's (b, width) floats
        assert run.sent_bytes.tolist() == [[one_way, 0], [0, one_way]]
        expected = [theory.max_in_flight(run.p, run.m, run.schedule, s) for s in range(run.p)]
        assert run.max_in_flight.tolist() == expected
    gpipe, f1b, _ = pipes
    assert gpipe.max_in_flight.tolist() == [4, 4] and f1b.max_in_flight.tolist() == [2, 1]


def test_one_launch_times_a_pipeline_beside_one_process():
    """A p = 1 config in a p = 2 launch runs on rank 0 alone, the same model, data and micro-batches."""
    pipe, one = record_pipelines([PipelineConfig(p=2, m=2, repeats=1, **SMALL), PipelineConfig(p=1, m=2, repeats=2, **SMALL)])
    assert (pipe.p, one.p) == (2, 1)
    assert "outputs equal the unsplit model's" in one.check()
    assert one.stage_layers.tolist() == [SMALL["depth"]] and one.sent_bytes.tolist() == [[0, 0]]
    assert rel_err(one.grad, pipe.grad) <= 1e-5
    assert one.idle_parts()[0, [0, 2]].tolist() == [0, 0]  # one stage starts the step and ends it
    # one reference for both, the unsplit model computed by rank 1 while rank 0 warmed up alone
    assert np.array_equal(one.big_grad, pipe.big_grad) and np.array_equal(one.big_output, pipe.big_output)
    with pytest.raises(ValueError, match="^configs must all have the same threads"):
        record_pipelines([PipelineConfig(p=2, threads=1), PipelineConfig(p=1, threads=2)])


def test_the_reference_is_computed_by_a_rank_a_config_leaves_out_else_by_rank_0_last():
    from dpviz.topics.splitting.rank_pipeline import _same_model, reference_ranks

    pipe, one, other = PipelineConfig(p=2, **SMALL), PipelineConfig(p=1, **SMALL), PipelineConfig(p=2, **{**SMALL, "seed": 1})
    assert reference_ranks([pipe, one, other], 2) == {_same_model(one): 1}  # other's: rank 0, after the timed steps
    assert reference_ranks([pipe, other], 2) == {}


def test_a_stage_takes_the_gradient_of_its_output_to_the_bit():
    """A stage's backward, the gradient of sum(out * grad_out), gives out.backward(grad_out)'s bits, input's included."""
    import torch

    from dpviz.topics.splitting.run_pipeline import make_model

    stage = split_model(make_model(PipelineConfig(**SMALL)), SMALL["depth"], 2)[1]
    x = torch.randn(8, SMALL["width"], generator=torch.Generator().manual_seed(1))
    grad_out = torch.randn(8, 1, generator=torch.Generator().manual_seed(2))
    grads = []
    for backward in (lambda out: out.backward(grad_out), lambda out: (out * grad_out).sum().backward()):
        stage.zero_grad(set_to_none=True)
        inp = x.clone().requires_grad_(True)
        backward(stage(inp))
        grads.append([inp.grad] + [q.grad for q in stage.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_uneven_stages_still_equal_the_unsplit_model():
    assert stage_layers(4, 3) == [2, 1, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = record_pipeline(p=3, m=2, repeats=1, **SMALL)
    assert run.stage_layers.tolist() == [2, 1, 1]
    run.check()
    assert run.sent_bytes[1].tolist() == [run.sent_bytes[0, 0], run.sent_bytes[2, 1]]


def test_split_model_keeps_every_layer_once():
    from dpviz.topics.splitting.run_pipeline import make_model

    config = PipelineConfig(p=3, depth=5, **{k: v for k, v in SMALL.items() if k != "depth"})
    model = make_model(config)
    stages = split_model(model, 5, 3)
    assert [len(s) for s in stages] == [4, 4, 3]  # (Linear, Tanh) pairs, the output layer on the last
    assert sum(len(s) for s in stages) == len(model)


@pytest.mark.parametrize("kwargs, name", [
    (dict(p=13, depth=12), "p"),
    (dict(p=0), "p"),
    (dict(m=0), "m"),
    (dict(m=3, batch=64), "batch"),
    (dict(schedule="interleaved"), "schedule"),
    (dict(depth=0), "depth"),
])
def test_pipeline_refuses_bad_input_in_one_sentence(kwargs, name):
    with pytest.raises((ValueError, TypeError)) as err:
        PipelineConfig(**kwargs)
    message = str(err.value)
    assert message.startswith(name + " ") and one_sentence(message), message


def test_a_failing_stage_is_named_and_nothing_is_left(no_leftover_processes):
    configs = [PipelineConfig(p=2, m=2, repeats=1, **SMALL)]
    with pytest.raises(RankError, match="rank 1 failed") as info:
        launch(_splitting_workers.failing_stage, 2, args=(configs, 1), backend="gloo", stall_timeout=30)
    assert info.value.rank == 1
    assert "deliberate failure in stage 1" in info.value.rank_traceback


def test_a_hung_stage_is_named_at_the_timeout_and_nothing_is_left(no_leftover_processes):
    configs = [PipelineConfig(p=2, m=2, repeats=1, **SMALL)]
    with pytest.raises(RankTimeout, match="rank 1 stalled") as info:
        launch(_splitting_workers.hanging_stage, 2, args=(configs, 1), backend="gloo", stall_timeout=4)
    assert info.value.ranks == [1]


# ---------------------------------------------------------------------------------------------
# A real tensor-parallel layer


@pytest.fixture(scope="module")
def split():
    return record_tensor_split(k=2, batch=4, d_in=6, d_out=8)


def test_both_splits_equal_the_unsplit_layer(split):
    assert "equal the unsplit layer's" in split.check()
    for value in split.rel_errs().values():
        assert value <= 1e-5
    assert split.same_as_dist.all()  # the hand-written ring gives what dist.all_gather / all_reduce give, bit for bit
    # rank r held the block the ring's all-gather expects it to own
    assert split.block.tolist() == [[owned_chunk(r, 2) for r in range(2)]] * 2
    # column split: each rank computed only its 1/k of Y; row split: a full-size partial sum
    assert split.local_y.tolist() == [[16, 16], [32, 32]]


def test_tensor_parallel_bytes_match_the_formula(split):
    for i, name in enumerate(tp.SPLITS):
        modeled = tp.exchange_bytes(4, 6, 8, 2, name)
        assert split.bytes_sent[i, 0].tolist() == [modeled["forward"]] * 2
        assert split.bytes_sent[i, 1].tolist() == [modeled["backward"]] * 2
    assert split.meta["exchanges"]["column"] == {"forward": "all-gather", "backward": "all-reduce"}
    assert split.meta["exchanges"]["row"] == {"forward": "all-reduce", "backward": "all-gather"}


def test_tensor_config_refuses_a_split_that_does_not_divide():
    with pytest.raises(ValueError) as err:
        TensorConfig(k=2, d_out=7)
    assert str(err.value).startswith("d_out must be a multiple of k=2") and one_sentence(str(err.value))
    with pytest.raises(ValueError, match=r"^d_in must be a multiple of k=4"):
        TensorConfig(k=4, d_in=6, d_out=8)
    with pytest.raises(ValueError, match=r"^k must be"):
        TensorConfig(k=0)


# ---------------------------------------------------------------------------------------------
# ZeRO-1 against plain data parallelism


@pytest.fixture(scope="module")
def zero():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 ranks on fewer cores: nothing here is timed
        return record_zero(k=4, steps=3)


def test_zero1_matches_plain_data_parallelism(zero):
    assert "match plain data parallelism" in zero.check()
    scale = np.abs(zero.params_dp).max()
    assert zero.max_param_diff().max() <= 1e-6 * scale
    assert (zero.params_zero == zero.params_zero[:, :1]).all()  # replicas identical after every all-gather
    assert (zero.params_zero[0] == zero.params_dp[0]).all()     # the same start
    np.testing.assert_allclose(zero.loss_zero, zero.loss_dp, rtol=1e-5)


def test_each_rank_holds_one_kth_of_adam_state(zero):
    k, n = zero.k, zero.n_params
    assert zero.shard_size.tolist() == [n // k] * k  # 1,684 parameters: four equal shards
    assert (zero.memory_dp == [4 * n, 4 * n, 8 * n]).all()
    assert (zero.memory_zero == [4 * n, 4 * n, 8 * n // k]).all()
    modeled = zero.modeled_memory(1)
    assert zero.memory_zero[0].tolist() == [modeled["params"], modeled["grads"], modeled["optimizer"]]
    starts = sorted(zero.shard_start.tolist())
    assert starts == [i * n // k for i in range(k)]


def test_zero1_reduce_scatter_costs_the_notes_bandwidth_term(zero):
    M = zero.message_bytes
    # with alpha = 0 and beta = 1 byte/s the notes' formula is its bytes term: (k-1)/k * M
    notes = costmodel.t_comm_notes(zero.k, M, 0.0, 1.0)
    assert (zero.rs_bytes == notes).all() and (zero.ag_bytes == notes).all()
    # the two halves together are one ring all-reduce
    assert (zero.rs_bytes + zero.ag_bytes == costmodel.t_comm_ring(zero.k, M, 0.0, 1.0)).all()


def test_zero_config_refuses_bad_input():
    for kwargs, name in ((dict(k=0), "k"), (dict(steps=0), "steps"), (dict(lr=0), "lr"), (dict(b=0), "b")):
        with pytest.raises((ValueError, TypeError)) as err:
            ZeroConfig(**kwargs)
        assert str(err.value).startswith(name + " "), err.value


# ---------------------------------------------------------------------------------------------
# Records: round trip, and refusal of a damaged file


def test_records_round_trip_and_refuse_a_missing_array(tmp_path, pipes, split, zero):
    for record, missing in ((pipes[0], "fwd"), (split, "y_split"), (zero, "params_zero")):
        path = record.save(tmp_path / record.KIND.name)
        again = load(path)
        assert type(again) is type(record)
        assert again.describe() == record.describe()
        for name, value in record.arrays.items():
            assert np.array_equal(again.arrays[name], value, equal_nan=True), name
        arrays = dict(np.load(path.with_suffix(".npz")))
        del arrays[missing]
        np.savez(path.with_suffix(".npz"), **arrays)
        header = json.loads(path.with_suffix(".json").read_text())
        header["arrays"] = sorted(arrays)
        header.pop("npz_sha256", None)  # a header without the digest of its .npz: the missing array is what fails
        path.with_suffix(".json").write_text(json.dumps(header))
        with pytest.raises(ValueError, match=f"lacks the array '{missing}'"):
            load(path)


def test_describe_comes_from_the_record(pipes, split, zero):
    run = pipes[0]
    assert run.describe().startswith(f"pipeline p=2, m=4 micro-batches of {64 // 4}")
    assert f"{run.meta['cores']} cores" in run.describe()
    assert "k=2" in split.describe() and "6→8" in split.describe()
    assert zero.describe().startswith("k=4, b=16, MLP 2×33 (1,684 parameters), adam")


# ---------------------------------------------------------------------------------------------
# Pictures


def test_plots_draw_measured_and_modeled(pipes, split, zero):
    fig, ax = plt.subplots()
    plot_gantt(pipes[0], ax=ax)
    assert ax.get_title(loc="left").startswith("Measured: p=2 stages, m=4")
    assert len(ax.collections[0].get_paths()) == 2 * 4  # one lavender bar per stage and micro-batch
    fig2, ax2 = plt.subplots()
    plot_gantt(theory.modeled_timeline(4, 4, "1f1b"), ax=ax2)
    assert ax2.get_title(loc="left").startswith("Modeled: p=4") and "forward pass" in ax2.get_xlabel()
    fig3, ax3 = plt.subplots()
    plot_bubble(theory.bubble_curves((2,), 8), idle_points(pipes), ax=ax3)
    assert any("modeled" in t.get_text() for t in ax3.get_legend().get_texts())
    with pytest.raises(ValueError, match="^split must be one of"):
        plot_tensor_split(split, "diagonal", ax=ax3)
    plt.close("all")


def test_figure_functions_draw_from_live_records(pipes, split, zero):
    fig = figure_pipeline_gantt(pipes[0], pipes[1], [pipes[2], pipes[0]])
    assert fig.get_suptitle() == claims.gantt_title(pipes[0], pipes[1])
    assert "the first stage waits mostly" in fig.get_suptitle() and "(p−1)/(m+p−1) = 0.20 modeled" in fig.get_suptitle()
    fig = figure_tensor_parallel(split)
    assert "6→8 layer over k=2" in fig.get_suptitle()
    fig = figure_zero_memory(zero)
    title = fig.get_suptitle()
    assert f"1/{zero.k} of the state" in title and f"{int(zero.rs_bytes.max()):,} B per rank" in title


def test_committed_figure_records_draw_and_pass_their_checks():
    records = splitting_figures.FIGURE_PLAN.load(ROOT / "figures" / "records")
    assert "pipelined steps equal the unsplit model's" in splitting_figures.GROUP.claims(records)
    drawn = splitting_figures.GROUP.draw(records)
    assert set(drawn) == {"pipeline_gantt", "tensor_parallel_split", "zero_memory"}
    for name, (fig, sources) in drawn.items():
        assert fig.axes and sources, name
    over = [r for stem, r in records.items() if stem.startswith("pipeline_p4")]
    assert all(r.oversubscribed for r in over) == (over[0].meta["cores"] < 4)


def test_committed_manifest_names_the_runs():
    manifest = json.loads((ROOT / "figures" / "manifest.json").read_text())
    for name in ("pipeline_gantt", "tensor_parallel_split", "zero_memory"):
        entry = manifest[name]
        assert all((ROOT / "figures" / f).is_file() for f in entry["files"])
        assert all({"host", "cores", "date", "describe"} <= set(s) for s in entry["made_from"])


# ---------------------------------------------------------------------------------------------
# The slider over the shipped runs


@pytest.fixture(scope="module")
def grid():
    return shipped_grid()


def test_shipped_grid_is_complete_small_and_checked(grid):
    assert len(grid) == 4 * 4 * 2
    for (p, m, schedule), run in grid.items():
        assert (run.p, run.m, run.schedule) == (p, m, schedule)
        run.check()
    size = sum(f.stat().st_size for f in SHIPPED_DIR.glob("pipeline_*"))
    assert size < 2_000_000


def test_widget_update_changes_only_its_artists(grid):
    sf = pipeline_widget(grid)
    view = sf.view
    before = [path.vertices.copy() for path in view.bars.fwd.get_paths()]
    sf.set(m=8)
    assert len(view.bars.fwd.get_paths()) == 2 * 8 and len(before) == 2 * 4
    assert "m=8" in sf.status.value and "modeled (p−1)/(m+p−1) = 0.11" in sf.status.value
    assert_blit_is_right(sf, "m move")
    sf.set(p=4)
    assert len(view.bars.fwd.get_paths()) == 4 * 8
    assert view.bars.bands[3].get_visible()
    assert_blit_is_right(sf, "p move")
    sf.set(schedule="1f1b", p=2, m=4)
    ring_x = view.ring.get_xdata()
    assert list(ring_x) == [4]
    assert_blit_is_right(sf, "schedule move")
    with pytest.raises(ValueError, match="^p, m and schedule must be among the recorded values"):
        pipeline_widget(grid, p=5)


# ---------------------------------------------------------------------------------------------
# Self-check cards


def test_chapter_12_cards_cover_the_question_bank_topics():
    keys = {card.key for card in cards_for("splitting")}
    for topic in ("splitting-tf-tensor-pipeline", "splitting-spot-bubbles", "splitting-num-too-big", "splitting-tf-zero-params",
                  "splitting-why-activations-move", "splitting-num-bubble", "splitting-num-tensor-bytes"):
        assert topic in keys
    pointed = [c.key for c in cards_for("question_bank") if course.Ref("splitting") in c.answer_text()]
    for key in ("question_bank-tf-too-big", "question_bank-tf-tensor-pipeline", "question_bank-spot-too-big", "question_bank-spot-bubbles",
                "question_bank-why-model-parallel-traffic", "question_bank-edge-pipeline-two", "question_bank-edge-tensor-gather"):
        assert key in pointed


def test_chapter_12_numeric_cards_are_computed_by_the_library():
    cards = {c.key: c for c in ALL_CARDS if c.chapter == course.chapter("splitting").number and c.numeric}
    bubble = cards["splitting-num-bubble"].values()
    assert bubble["bubble"] == [3 / 4, 3 / 7, 3 / 19, 3 / 67]
    big = cards["splitting-num-too-big"].values()
    assert big["plain_gb"] == pytest.approx(7e9 * 16 / 1e9) and big["plain_gb"] > 80
    assert big["zero1_gb"] == pytest.approx(7e9 * (4 + 4 + 8 / 8) / 1e9) and big["zero1_gb"] <= 80
    assert big["fewest_zero1"] == 3  # 4 + 4 + 8/3 bytes per parameter is the first to fit in 80 GB
    tensor = cards["splitting-num-tensor-bytes"].values()
    per_layer = 16384 * 4096 * 4 * (1 / 2 + 1)  # all-gather of Y, then all-reduce of dX, k = 2
    assert tensor["tp_gb"] == pytest.approx(32 * per_layer / 1e9)
    assert tensor["dp_gb"] == pytest.approx(32 * 4096 * 4096 * 4 / 1e9)
    for card in cards.values():
        text = card.answer_text()
        assert "{" not in text and not re.search(r"\bnan\b", text)
