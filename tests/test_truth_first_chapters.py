"""The first chapters' sentences from data: each new claim on the real record its chapter prints, and on copies
tampered so that the data show something else, where the sentence must change (or, for a correctness claim,
raise naming the numbers).

Chapters by topic: the ground floor (S measured against one device, probing every knob, a 0/1 loss), a
mini-batch (a step along the biased arrow, half by half), one group per device (the replicas' spread without
the sync).
"""

import dataclasses
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from dpviz.topics.ground_floor import claims as ground_floor
from dpviz.topics.mini_batch import claims as mini_batch
from dpviz.topics.one_group_per_device import claims as one_group_per_device
from dpviz.engine.data import LINE_START, line_data
from dpviz.engine.schema import load
from dpviz.topics.ground_floor.rank_models import LineModel
from dpviz.topics.ground_floor.run_probing import probe_every_knob
from dpviz.topics.ground_floor.run_training import record_run
from dpviz.topics.one_step import landscape

FIGURES = Path(__file__).resolve().parents[1] / "figures" / "records"


def record(**config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ranks may share cores; the claims below say so themselves
        return record_run(**config)


def with_meta(rec, **meta):
    return type(rec)(dict(rec.meta, **meta), rec.arrays)


def with_arrays(rec, **arrays):
    return type(rec)(rec.meta, dict(rec.arrays, **arrays))


def timed(rec, t_compute, t_comm=0.0):
    """A copy of ``rec`` whose every step and rank took ``t_compute`` and ``t_comm`` seconds (arrays broadcast)."""
    shape = rec.t_compute.shape
    return with_arrays(rec, t_compute=np.broadcast_to(np.asarray(t_compute, float), shape).copy(),
                       t_comm=np.broadcast_to(np.asarray(t_comm, float), shape).copy())


# --- the ground floor: S measured ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair():
    """The chapter's timing pair: one device with all 8 examples, two ranks with 4 each, 20 steps, one thread each."""
    return record(k=1, b=8, steps=20, threads=1), record(k=2, b=4, steps=20, threads=1)


def test_measured_slowdown_on_the_chapters_pair(pair):
    one, two = pair
    sentence = ground_floor.measured_slowdown(one, two)
    assert re.fullmatch(r"One device took [\d.]+ ms per step for all 8 examples; 2 ranks took [\d.]+ ms \([\d.]+ ms "
                        r"computing 4 examples each, [\d.]+ ms in the all-reduce; medians of 19 steps\)\. Measured "
                        r"S = [\d.]+(, with a core per rank: splitting this job made it slower\.|.*shared 1 core.*|"
                        r".*the machine was busy\.) The formula fed T_compute = 2 × a rank's compute time and this "
                        r"T_comm gives S = [\d.]+; one device's compute took [\d.]+× a rank's for 2× the examples"
                        r"(, not the 2× the formula assumes)?\.", sentence), sentence
    if two.meta["cores"] >= 2:
        assert "splitting this job made it slower" in sentence or "the machine was busy" in sentence


def test_measured_slowdown_in_words_on_chosen_times(pair):
    one, two = pair
    one, two = timed(one, 0.3e-3), timed(two, 0.25e-3, 1.0e-3)
    assert ground_floor.measured_slowdown(one, with_meta(two, cores=2)) == (
        "One device took 0.3 ms per step for all 8 examples; 2 ranks took 1.25 ms (0.25 ms computing 4 examples "
        "each, 1 ms in the all-reduce; medians of 19 steps). Measured S = 0.24, with a core per rank: splitting this "
        "job made it slower. The formula fed T_compute = 2 × a rank's compute time and this T_comm gives S = 0.40; "
        "one device's compute took 1.2× a rank's for 2× the examples, not the 2× the formula assumes.")


def test_measured_slowdown_says_when_the_ranks_shared_a_core(pair):
    one, two = timed(pair[0], 0.3e-3), with_meta(timed(pair[1], 0.25e-3, 1.0e-3), cores=1)
    assert "Measured S = 0.24: slower, but the 2 ranks shared 1 core and took turns, so the split time includes " \
           "waiting for the CPU." in ground_floor.measured_slowdown(one, two)
    faster = timed(pair[0], 3e-3)    # as if one device were slower: with shared cores that is said, not asserted
    assert "Measured S = 2.40: not slower, but the 2 ranks shared 1 core" in ground_floor.measured_slowdown(faster, two)


def test_measured_slowdown_says_a_faster_split_with_a_core_per_rank_and_steady_times(pair):
    # a timing lesson the data do not show is a sentence, never an exception (a busy machine, a chapter in class)
    one, two = timed(pair[0], 3e-3), with_meta(timed(pair[1], 0.25e-3, 1.0e-3), cores=2)   # one device "slower"
    assert ("Measured S = 2.40: faster split, with a core per rank, by 1.75 ms, more than the 0 ms the step times "
            "varied by: one device's compute took more than 2× a rank's, so other work on the machine slowed it while "
            "it ran. The lesson that a job this small is slower split does not show on this run."
            in ground_floor.measured_slowdown(one, two))
    one, two = timed(pair[0], 3e-3), with_meta(timed(pair[1], 2e-3, 0.1e-3), cores=2)   # a bigger job: the split pays
    assert ("Measured S = 1.43: faster split, with a core per rank, by 0.9 ms, more than the 0 ms the step times "
            "varied by: the all-reduce (0.1 ms) cost less than the 1 ms of compute the split took off one device."
            in ground_floor.measured_slowdown(one, two))


def test_measured_slowdown_calls_noisy_times_a_busy_machine(pair):
    steps = pair[0].steps
    jumpy = np.where(np.arange(steps) % 2, 4e-3, 0.5e-3)[:, None]   # step times jumping by 3.5 ms, every other step
    one, two = timed(pair[0], jumpy), with_meta(timed(pair[1], 0.25e-3, 1.0e-3), cores=2)
    sentence = ground_floor.measured_slowdown(one, two)
    assert "Measured S = 3.20: not slower here, but the step times varied by 3.5 ms from step to step " \
           "(interquartile range), more than the 2.75 ms between the two: the machine was busy." in sentence


def test_measured_slowdown_refuses_runs_that_do_not_compare(pair):
    one, two = pair
    with pytest.raises(ValueError, match="one must be a k=1 run"):
        ground_floor.measured_slowdown(two, one)
    with pytest.raises(ValueError, match="the same examples per step; got 8 and 4"):
        ground_floor.measured_slowdown(one, with_arrays(two, shard_sizes=np.array([2, 2])))
    with pytest.raises(ValueError, match="the same threads per rank"):
        ground_floor.measured_slowdown(with_meta(one, threads_per_rank=2), two)


# --- the ground floor: probing every knob ----------------------------------------------------------------


@pytest.fixture(scope="module")
def probe():
    return probe_every_knob(width=8)   # 217 knobs: the chapter's claim on a smaller MLP, quickly


def test_probing_costs_on_a_real_probe(probe):
    sentence = ground_floor.probing_costs(probe)
    assert re.fullmatch(r"On the MLP 2×8 on 16 inputs, float64 \(217 knobs, 64 examples\), one forward and backward "
                        r"pass took [\d.]+ ms \(median of 5\) and gave every slope; probing each knob took 218 forward "
                        r"passes, [\d.]+ ms: .+\. The probed slopes match autograd's to \de-\d+ \(relative\), inside "
                        r"the 1e-4 this check allows\.", sentence), sentence


def test_probing_costs_follow_the_times(probe):
    exact = dataclasses.replace(probe, probed=probe.autograd.copy(), t_backward=np.full(5, 1e-3))
    assert ground_floor.probing_costs(dataclasses.replace(exact, t_probe=0.5)).endswith(
        "one forward and backward pass took 1 ms (median of 5) and gave every slope; probing each knob took 218 "
        "forward passes, 500 ms: 500 times as long. The probed slopes match autograd's to 0 (relative), inside the "
        "1e-4 this check allows.")
    assert "218 forward passes, 1 ms: about as long." in ground_floor.probing_costs(dataclasses.replace(exact, t_probe=1e-3))
    assert "218 forward passes, 0.5 ms: less time (0.5×)." in ground_floor.probing_costs(dataclasses.replace(exact, t_probe=5e-4))


def test_probing_costs_raise_on_a_wrong_slope(probe):
    wrong = probe.probed.copy()
    wrong[7] += 0.01 * np.abs(probe.autograd).max()
    with pytest.raises(AssertionError, match=r"probing each knob did not give autograd's slopes: relative error 1.0e-02"):
        ground_floor.probing_costs(dataclasses.replace(probe, probed=wrong))


# --- the ground floor: a 0/1 loss --------------------------------------------------------------------------


def zero_one(tol):
    """What the chapter's cell computes: the share of examples missed by more than tol, and autograd's gradient."""
    x, y = line_data()
    model = LineModel()
    verdict = ((torch.sign((model(torch.from_numpy(x)) - torch.from_numpy(y)).abs() - tol) + 1) / 2).mean()
    verdict.backward()
    return x, y, np.array([model.w.grad.item(), model.c.grad.item()]), verdict.item()


def test_zero_one_loss_is_flat_on_the_line():
    x, y, grad, verdict = zero_one(0.5)
    assert ground_floor.zero_one_loss_is_flat(x, y, LINE_START, grad, verdict, tol=0.5,
                                              mse_grad=landscape.full_grad(x, y, LINE_START)) == (
        "The 0/1 loss, the share of the 512 examples the line misses by more than 0.5, is 0.893 at θ = (-1, +2); "
        "autograd's gradient of it is (0, 0), and nudging either knob by ±0.001 leaves it at 0.893: it gives no "
        "direction. The squared error's gradient at the same θ is (-6.4401, +2.4245).")


def test_zero_one_loss_says_when_a_nudge_crosses_the_threshold():
    x, y = line_data()
    residual = np.abs(LINE_START[0] * x[:, 0].astype(float) + LINE_START[1] - y[:, 0])
    tol = float(residual[0]) - 1e-4        # example 0 sits just past the threshold: a nudge of c moves it across
    x, y, grad, verdict = zero_one(tol)
    sentence = ground_floor.zero_one_loss_is_flat(x, y, LINE_START, grad, verdict, tol=tol)
    assert "; nudging a knob by ±0.001 moved it only in jumps of 1/512 (to " in sentence
    assert sentence.endswith("a step, not a slope to follow.")


def test_zero_one_loss_raises_on_a_slope_or_a_wrong_share():
    x, y, grad, verdict = zero_one(0.5)
    with pytest.raises(AssertionError, match=r"autograd's gradient of the 0/1 loss is \[0.0, 0.25\], not zero"):
        ground_floor.zero_one_loss_is_flat(x, y, LINE_START, np.array([0.0, 0.25]), verdict, tol=0.5)
    with pytest.raises(AssertionError, match="the 0/1 loss autograd saw, 0.5000, is not the share missed, 0.8926"):
        ground_floor.zero_one_loss_is_flat(x, y, LINE_START, grad, 0.5, tol=0.5)


# --- a mini-batch: a step along the biased arrow ------------------------------------------------------------


@pytest.fixture(scope="module")
def grabs():
    """The chapter's two one-rank runs: 64 examples at random, and 64 with x ≥ 0."""
    return record(k=1, b=64, steps=1), record(k=1, b=64, steps=1, sampling="biased")


def test_biased_step_on_each_half_of_the_chapters_runs(grabs):
    assert mini_batch.biased_step_on_each_half(*grabs) == (
        "The biased arrow is 50.4° from the whole data set's gradient, and its slope along c has the opposite sign "
        "(-2.2568 against +2.4245). A step of η = 0.1 along it takes the loss on the x ≥ 0 half, the kind it was "
        "drawn from, from 3.39 to 1.86, and on the x < 0 half from 18.40 to 16.48; the same step along the random "
        "arrow takes them to 1.66 and 10.89. Both halves improve, but on the half it never saw the biased step "
        "lowers the loss by 1.92, the random one by 7.52 (on its own half, by 1.53 against 1.73). On all 512 points "
        "the loss goes from 10.08 to 8.37 along the biased arrow and to 5.77 along the random one.")


@pytest.mark.parametrize("arrow, says", [
    ((0.0, -20.0), "The biased step helps the half it saw at the expense of the other."),
    ((5.0, -10.0), "The biased step makes the loss worse on both halves."),
    ((-10.0, 10.0), "On the half it never saw the biased step lowers the loss by 13.39, more than the random one's 7.52."),
])
def test_biased_step_follows_a_tampered_arrow(grabs, arrow, says):
    run, biased = grabs
    tampered = with_arrays(biased, local_grad=np.array(arrow, dtype=np.float32).reshape(1, 1, 2))
    assert says in mini_batch.biased_step_on_each_half(run, tampered)


def test_biased_step_refuses_a_grab_of_both_kinds(grabs):
    run, _ = grabs
    with pytest.raises(ValueError, match="biased must draw one kind of example only"):
        mini_batch.biased_step_on_each_half(run, run)


# --- one group per device: the spread without the sync ------------------------------------------------------


@pytest.fixture(scope="module")
def alone():
    """The figure record of k = 4, b = 8, 5 steps without the all-reduce (the chapter's settings)."""
    return load(FIGURES / "line_k4_no_all_reduce")


def test_spread_without_the_sync_on_the_figure_record(alone):
    assert one_group_per_device.spread_without_the_sync(alone) == (
        "Without the sync, the spread of w across the 4 replicas (largest minus smallest) after steps 1 to 5 was "
        "0.39, 0.73, 0.34, 0.21, 0.13: largest after step 2, then it shrank at every step. The spread of c was "
        "0.20, 0.18, 0.36, 0.37, 0.42: largest after step 5, the last. After the last step they still differed by "
        "0.13 in w and 0.42 in c: 4 models, not one.")


def test_spread_follows_tampered_replicas(alone):
    params = alone.params.copy()
    fan = np.arange(alone.steps + 1)[:, None, None] * np.arange(alone.k)[None, :, None] * 0.1   # (steps+1, k, 1)
    growing = with_arrays(alone, params=(params[:1] + fan).astype(np.float32))
    sentence = one_group_per_device.spread_without_the_sync(growing)
    assert "was 0.30, 0.60, 0.90, 1.20, 1.50: it grew at every step." in sentence
    assert sentence.endswith("still differed by 1.50 in w and 1.50 in c: 4 models, not one.")
    closing = with_arrays(alone, params=(params[:1] + fan[::-1]).astype(np.float32))
    assert "was 1.20, 0.90, 0.60, 0.30, 0.00: it shrank at every step." in \
        one_group_per_device.spread_without_the_sync(closing)


def test_spread_refuses_a_synced_run():
    with pytest.raises(ValueError, match="alone must be a line-model run with the all-reduce off"):
        one_group_per_device.spread_without_the_sync(load(FIGURES / "line_k4"))
