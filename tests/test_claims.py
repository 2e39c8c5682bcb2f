"""The chapters' claims (dpviz.claims), each on the real record its chapter uses, and each failing by name when
one number of that record is tampered with.

The records are the shipped runs (dpviz/records/shipped_runs/), the figure records (figures/records/), the cost
model's own numbers, or, where a chapter starts a run that ships nowhere, the same run started here (gloo on CPU,
a few seconds each). Every expected sentence is written out: what the chapter prints for that record.
"""

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from dpviz.claims import (
    accumulation, all_reduce, average_of_averages, ground_floor, mini_batch, one_group_per_device, one_step,
    question_bank, splitting, sync_costs, waiting, whole_picture,
)
from dpviz.data import LINE_START, line_data
from dpviz.plots.step1 import arrow_end
from dpviz.records import load, shipped
from dpviz.records.async_sgd import shipped_async
from dpviz.records.figure_set import load_inputs
from dpviz.runs.accumulation import AccumConfig, record_accumulation
from dpviz.runs.training import record_run
from dpviz.theory import costmodel, landscape
from dpviz.theory.links import PRESETS, Link

FIGURES = Path(__file__).resolve().parents[1] / "figures" / "records"


def record(**config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ranks may share cores; nothing here is timed
        return record_run(**config)


def tampered(rec, name, change):
    """A copy of ``rec`` with ``change`` applied, in place, to a copy of its array ``name``."""
    arrays = {key: value.copy() for key, value in rec.arrays.items()}
    change(arrays[name])
    return type(rec)(rec.meta, arrays)


def with_meta(rec, **meta):
    return type(rec)(dict(rec.meta, **meta), rec.arrays)


def with_arrays(rec, **arrays):
    return type(rec)(rec.meta, dict(rec.arrays, **arrays))


def last_bit(values, index):
    values[index] = np.nextafter(values[index], np.float32(0))


# --- chapter: the ground floor ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_ranks():
    """The shipped k = 2, b = 4 run (the chapter's settings, 5 steps), and g_B of its first batch by the formula."""
    run = shipped.grid_runs()[(2, 4)]
    rows = run.batch_index[0]
    return run, landscape.full_grad(run.x[rows], run.y[rows], LINE_START)


def test_ground_floor_average_is_the_batch_gradient(two_ranks):
    assert ground_floor.average_is_the_batch_gradient(*two_ranks) == (
        "At all 5 steps the average of the 2 ranks' gradients equals the gradient of the combined batch "
        "(relative error ≤ 1e-5), and the replicas stayed identical.")


@pytest.mark.parametrize("change, claim", [
    (lambda run, g: (tampered(run, "local_grad", lambda a: a.__setitem__((1, 0), a[1, 0] * 1.01)), g),
     "the average of the 2 ranks' gradients is not the combined batch's"),
    (lambda run, g: (run, g * 1.01), "is not the batch gradient g_B"),
    (lambda run, g: (tampered(run, "param_digest", lambda d: d.__setitem__((3, 1), b"0" * 40)), g),
     r"the replicas are not identical: they differ at states \[3\]"),
])
def test_ground_floor_fails_on_a_tampered_run(two_ranks, change, claim):
    with pytest.raises(AssertionError, match=claim):
        ground_floor.average_is_the_batch_gradient(*change(*two_ranks))


# --- chapter: one step -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def step1():
    x, y = line_data()
    return x, y, landscape.step1_data(x, y, knob=0, eta=0.1, steps=5), landscape.step1_data(x, y, knob=0, eta=0.9, steps=5)


def test_one_step_claims_hold_on_the_line_model(step1):
    x, y, curve, too_big = step1
    assert one_step.one_step_claims(x, y, curve, too_big, arrow_tip=arrow_end(curve)[0]) == (
        "One step with η = 0.1 lowered the loss; the red arrow is −η times the gradient, which is the slope of the "
        "drawn curve; with η = 0.9 the loss rose at every step.")


def test_one_step_claims_fail_on_a_wrong_arrow_a_rising_step_or_a_converging_eta(step1):
    x, y, curve, too_big = step1
    tip = arrow_end(curve)[0]
    with pytest.raises(AssertionError, match="the red arrow is not −η times the gradient"):
        one_step.one_step_claims(x, y, curve, too_big, arrow_tip=tip + 0.01)
    uphill = dataclasses.replace(curve, path_loss=curve.path_loss[[1, 0, 2, 3, 4, 5]])
    with pytest.raises(AssertionError, match="the step along one knob did not lower the loss"):
        one_step.one_step_claims(x, y, uphill, too_big, arrow_tip=tip)
    below_the_limit = landscape.step1_data(x, y, knob=0, eta=0.5, steps=5)   # 2 / L'' is about 0.74
    with pytest.raises(AssertionError, match="with η = 0.5 the loss did not rise at every step"):
        one_step.one_step_claims(x, y, curve, below_the_limit, arrow_tip=tip)


# --- chapter: a mini-batch -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grabs():
    """The chapter's two one-rank runs: 64 examples at random, and 64 with x ≥ 0."""
    return record(k=1, b=64, steps=1), record(k=1, b=64, steps=1, sampling="biased")


def test_mini_batch_claims_hold_on_a_random_and_a_biased_grab(grabs):
    assert mini_batch.mean_of_a_random_grab(*grabs) == (
        "The red arrow is the mean of the 64 grey arrows; the sum is b times the mean; the biased grab points far "
        "from the whole data set's gradient and the random grab does not.")


def test_mini_batch_claims_fail_on_tampered_runs(grabs):
    run, biased = grabs
    with pytest.raises(AssertionError, match="is not the mean"):
        mini_batch.mean_of_a_random_grab(tampered(run, "example_grad", lambda g: g.__setitem__((0, 5), g[0, 5] + 1)), biased)
    with pytest.raises(AssertionError, match="the update used"):
        mini_batch.mean_of_a_random_grab(tampered(run, "reduced_grad", lambda g: last_bit(g, (0, 0, 1))), biased)
    with pytest.raises(AssertionError, match="the two grabs started from different θ"):
        mini_batch.mean_of_a_random_grab(run, tampered(biased, "params", lambda p: p.__setitem__((0, 0, 0), 0.5)))
    with pytest.raises(AssertionError, match="the random grab is 5"):   # the biased run in the random one's place
        mini_batch.mean_of_a_random_grab(biased, biased)
    with pytest.raises(AssertionError, match="the biased grab is only"):
        mini_batch.mean_of_a_random_grab(run, with_arrays(biased, local_grad=run.local_grad))


# --- chapter: the average of averages --------------------------------------------------------------------


@pytest.fixture(scope="module")
def uneven():
    """The chapter's second run: k = 2 ranks with 4 and 28 examples, the weighted all-reduce."""
    return record(k=2, shard_sizes=(4, 28), mean="weighted", steps=1)


def test_equal_groups_on_the_shipped_run():
    assert average_of_averages.equal_groups(shipped.grid_runs()[(4, 16)]) == (
        "Equal groups: the mean of the 4 group means matched the big-batch gradient to within 1e-5 (relative), "
        "and every rank received the same bits.")


@pytest.mark.parametrize("name, change, claim", [
    ("reduced_grad", lambda g: g.__setitem__((0,), g[0] * 1.01), "the all-reduced gradient is not the big-batch gradient"),
    ("local_grad", lambda g: g.__setitem__((0, 2), g[0, 2] * 1.01), "the mean of the 4 group means is not"),
    ("reduced_grad", lambda g: last_bit(g, (2, 3, 0)), r"the ranks did not receive the same bits at steps \[2\]"),
])
def test_equal_groups_fail_on_a_tampered_run(name, change, claim):
    with pytest.raises(AssertionError, match=claim):
        average_of_averages.equal_groups(tampered(shipped.grid_runs()[(4, 16)], name, change))


def test_unequal_groups_on_the_chapters_run(uneven):
    assert average_of_averages.unequal_groups(uneven) == \
        "Unequal groups (4 and 28): the weighted mean matched; the plain mean missed."


def test_unequal_groups_fail_on_a_tampered_run(uneven):
    big = np.repeat(uneven.big_grad[:, None, :], 2, axis=1)
    with pytest.raises(AssertionError, match="the plain mean did not miss"):   # as if both groups had the big batch's gradient
        average_of_averages.unequal_groups(with_arrays(uneven, local_grad=big))
    with pytest.raises(AssertionError, match="the weighted mean of the group means is not"):
        average_of_averages.unequal_groups(with_arrays(uneven, shard_sizes=np.array([16, 16])))
    with pytest.raises(AssertionError, match="the weighted all-reduce is not the big-batch gradient"):
        average_of_averages.unequal_groups(with_arrays(uneven, reduced_grad=uneven.local_grad))
    with pytest.raises(ValueError, match="uneven must be a run with unequal shards"):
        average_of_averages.unequal_groups(with_meta(uneven, mean="plain"))
    with pytest.raises(ValueError, match="run must have equal groups"):
        average_of_averages.equal_groups(uneven)


# --- chapters: one group per device, the all-reduce ------------------------------------------------------


@pytest.fixture(scope="module")
def line_pair():
    """The figure records of k = 4, b = 8, 5 steps: with the all-reduce and without (the chapters' settings)."""
    return load(FIGURES / "line_k4"), load(FIGURES / "line_k4_no_all_reduce")


def test_replicas_part_without_the_sync(line_pair):
    assert one_group_per_device.replicas_part_without_the_sync(*line_pair) == (
        "With the all-reduce the 4 replicas stayed bit-identical for all 5 steps; without it they parted at step 1 "
        "and never met again.")


def test_replicas_claims_fail_on_a_tampered_pair(line_pair):
    run, alone = line_pair
    claim = one_group_per_device.replicas_part_without_the_sync
    with pytest.raises(AssertionError, match=r"with the all-reduce the replicas differ at states \[2\]"):
        claim(tampered(run, "param_digest", lambda d: d.__setitem__((2, 1), b"0" * 40)), alone)
    with pytest.raises(AssertionError, match=r"identical again at states \[3\]"):
        claim(run, tampered(alone, "param_digest", lambda d: d.__setitem__((3,), d[3, 0])))
    with pytest.raises(AssertionError, match="a rank stepped with another's g_i"):
        claim(run, tampered(alone, "reduced_grad", lambda g: g.__setitem__((0, 1), g[0, 0])))
    with pytest.raises(AssertionError, match="a rank did not step as θ − η g_i"):
        claim(run, tampered(alone, "params", lambda p: p.__setitem__((1, 2, 0), p[1, 2, 0] + 0.01)))
    with pytest.raises(ValueError, match="alone must have it off"):
        claim(run, run)


def test_the_all_reduce_returns_the_big_batch_gradient(line_pair):
    assert all_reduce.received_the_big_batch_gradient(line_pair[0]) == (
        "At all 5 steps the 4 ranks received bit-identical gradients, equal to the big-batch gradient within 1e-5 "
        "(relative), and the replicas stayed bit-identical.")


@pytest.mark.parametrize("name, change, claim", [
    ("reduced_grad", lambda g: last_bit(g, (4, 2, 1)), r"the ranks received different gradients at steps \[4\]"),
    ("reduced_grad", lambda g: g.__setitem__((1,), g[1] * 1.01), "the all-reduced gradient is not the big-batch gradient"),
    ("param_digest", lambda d: d.__setitem__((5, 3), b"0" * 40), r"the replicas are not bit-identical at states \[5\]"),
])
def test_the_all_reduce_claim_fails_on_a_tampered_run(line_pair, name, change, claim):
    with pytest.raises(AssertionError, match=claim):
        all_reduce.received_the_big_batch_gradient(tampered(line_pair[0], name, change))


@pytest.fixture(scope="module")
def inputs():
    return load_inputs(FIGURES)


def test_ring_against_server_on_the_recorded_schedules(inputs):
    assert all_reduce.ring_against_server(inputs.ring, inputs.server) == (
        "Ring: every rank sent and received 72 bytes. Server: rank 0 received and sent 144 bytes, the others 48. "
        "Both equal dist.all_reduce bit for bit.")


def test_ring_against_server_fails_on_tampered_schedules(inputs):
    ring, server = inputs.ring, inputs.server
    claim = all_reduce.ring_against_server
    with pytest.raises(AssertionError, match=r"the ring's ranks sent \[76, 72, 72, 72\] bytes"):
        claim(tampered(ring, "bytes_sent", lambda b: b.__setitem__(0, b[0] + 4)), server)
    with pytest.raises(AssertionError, match=r"the server's rank 0 sent and received \(144, 96\)"):
        claim(ring, tampered(server, "bytes_received", lambda b: b.__setitem__(0, 96)))
    with pytest.raises(AssertionError, match="the server's other ranks"):
        claim(ring, tampered(server, "bytes_sent", lambda b: b.__setitem__(2, 96)))
    with pytest.raises(AssertionError, match="the hand-written parameter_server differs from dist.all_reduce"):
        claim(ring, with_meta(server, equal=False))
    with pytest.raises(ValueError, match="the same M on the same k"):
        claim(ring, with_meta(server, message_bytes=96))


# --- chapter: the speedup model ------------------------------------------------------------------------------


@pytest.fixture
def model():
    """The chapter's modeled numbers: T_compute = 1 s, a 0.02 s sync beyond k = 1."""
    ks = np.array([1, 2, 4, 8, 16, 32, 64])
    t_comm = np.where(ks > 1, 0.02, 0.0)
    return 1.0, ks, t_comm, costmodel.speedup(1.0, ks, t_comm)


def test_speedup_limits_hold_on_the_cost_model(model):
    assert sync_costs.speedup_limits(*model) == (
        "Checked on the cost model: S = 1 at k = 1 with T_comm = 0; S = k/2 when T_comm = T_compute/k; "
        "S -> k for free sync and S -> T_compute/T_comm when the sync dominates.")


def test_speedup_limits_fail_on_other_numbers_or_a_wrong_model(model, monkeypatch):
    t_compute, ks, t_comm, s = model
    with pytest.raises(AssertionError, match="with a sync cost, S is not below k: S = 8 at k = 8"):
        sync_costs.speedup_limits(t_compute, ks, t_comm, np.where(ks == 8, 8.0, s))
    with pytest.raises(AssertionError, match="S is not below the ceiling T_compute/T_comm"):   # a sync 10× as long
        sync_costs.speedup_limits(t_compute, ks, 10 * t_comm, s)
    monkeypatch.setattr(costmodel, "efficiency", lambda t, k, c: costmodel.speedup(t, k, c))   # forgot to divide by k
    with pytest.raises(AssertionError, match="with T_comm = T_compute/k at k = 2"):
        sync_costs.speedup_limits(*model)


def test_the_mlp_runs_are_right_and_fair(inputs):
    assert sync_costs.runs_are_right_and_fair(inputs.mlp) == (
        "The MLP runs for k = [1, 2, 4] passed check(): big-batch gradient matched, bits received identical, "
        "replicas identical after every step; every run gave each process 1 thread.")


def test_the_mlp_runs_claim_fails_on_a_tampered_run(inputs):
    runs = inputs.mlp
    no_sync = {**runs, 2: tampered(runs[2], "t_comm", lambda t: t.__setitem__((3, 1), 0.0))}
    with pytest.raises(AssertionError, match="k=2: a step with no time in the all-reduce"):
        sync_costs.runs_are_right_and_fair(no_sync)
    with pytest.raises(AssertionError, match="each process ran 2 threads, not one"):
        sync_costs.runs_are_right_and_fair({k: with_meta(run, threads_per_rank=2) for k, run in runs.items()})
    drift = {**runs, 4: tampered(runs[4], "param_digest", lambda d: d.__setitem__((1, 0), b"0" * 40))}
    with pytest.raises(AssertionError, match="replicas differ"):   # the run's own check()
        sync_costs.runs_are_right_and_fair(drift)


def test_the_ring_sends_what_the_formulas_count(inputs):
    assert sync_costs.ring_sends(inputs.ring) == (
        "Ring all-reduce of M = 48 bytes on k = 4: each rank sent 36 bytes in the reduce-scatter ((k-1)/k·M, the "
        "notes' term) and 72 bytes in all (2(k-1)/k·M), in 6 messages (2(k-1)).")


def test_the_ring_claim_fails_on_a_tampered_schedule(inputs):
    ring = inputs.ring
    first_rs = int(np.flatnonzero(ring.phase == ring.meta["phases"].index("reduce-scatter"))[0])
    first_ag = int(np.flatnonzero(ring.phase == ring.meta["phases"].index("all-gather"))[0])
    with pytest.raises(AssertionError, match="in the reduce-scatter the ranks sent"):
        sync_costs.ring_sends(tampered(ring, "bytes", lambda b: b.__setitem__(first_rs, b[first_rs] + 4)))
    with pytest.raises(AssertionError, match="messages, not 2"):   # one all-gather message sent by another rank
        sync_costs.ring_sends(tampered(ring, "src", lambda s: s.__setitem__(first_ag, (s[first_ag] + 1) % ring.k)))
    with pytest.raises(AssertionError, match="bytes in all, not 2"):
        sync_costs.ring_sends(tampered(ring, "bytes_sent", lambda b: b.__setitem__(3, 60)))
    with pytest.raises(AssertionError, match="the hand-written ring differs"):
        sync_costs.ring_sends(with_meta(ring, equal=False))
    with pytest.raises(ValueError, match="ring must be the hand-written ring's schedule"):
        sync_costs.ring_sends(inputs.server)


# --- chapter: the whole picture ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards():
    """The chapter's two k = 2, b = 16 runs: one kind of example per shard, and a biased global batch."""
    return record(k=2, b=16, steps=1, sampling="by_kind"), record(k=2, b=16, steps=1, sampling="biased")


def test_a_biased_shard_against_a_biased_batch(shards):
    assert whole_picture.biased_shard_or_batch(*shards) == (
        "One kind per shard: the shards' gradients disagree and are each further off than their all-reduced mean, "
        "which is close to the whole data set's gradient. A biased global batch: the exact mean of its shards "
        "points far off.")


def test_the_biased_shard_claim_fails_on_tampered_runs(shards):
    by_kind, biased = shards
    claim = whole_picture.biased_shard_or_batch
    with pytest.raises(AssertionError, match="only 0.0° apart"):
        claim(tampered(by_kind, "local_grad", lambda g: g.__setitem__((0, 1), g[0, 0])), biased)
    with pytest.raises(AssertionError, match="by_kind: the all-reduced gradient is not the global batch's"):
        claim(tampered(by_kind, "reduced_grad", lambda g: g.__setitem__((0,), g[0] * 1.01)), biased)
    fair = with_arrays(biased, reduced_grad=by_kind.reduced_grad, big_grad=by_kind.big_grad)   # as if the batch were fair
    with pytest.raises(AssertionError, match="the biased global batch's mean is only"):
        claim(by_kind, fair)
    with pytest.raises(ValueError, match="sampling='by_kind'"):
        claim(biased, by_kind)


# --- chapter: gradient accumulation --------------------------------------------------------------------------

WIDTH, D_IN, B = 32, 8, 64
P = D_IN * WIDTH + WIDTH + WIDTH * WIDTH + WIDTH + WIDTH + 1  # the MLP's parameters: two tanh layers, one output


@pytest.fixture(scope="module")
def six_ways():
    """The chapter's six configurations on a smaller MLP, in one launch of 2 ranks, gradients kept."""
    small = dict(width=WIDTH, depth=2, d_in=D_IN, steps=3, dataset_size=512)
    return record_accumulation([
        AccumConfig(k=1, m=1, b=B, **small), AccumConfig(k=1, m=2, b=B, **small), AccumConfig(k=1, m=4, b=B, **small),
        AccumConfig(k=2, m=1, b=B // 2, **small), AccumConfig(k=2, m=2, b=B // 2, sync="accumulate", **small),
        AccumConfig(k=2, m=2, b=B // 2, sync="every", **small),
    ])


def test_one_update_six_ways(six_ways):
    assert accumulation.one_update_six_ways(*six_ways) == [
        f"All 6 runs stepped with the big-batch gradient of {B} examples, within 1e-5, at all 3 steps.",
        "One process summing 2 micro-batches got what 2 ranks got from the all-reduce, within 1e-5.",
        "With m = 1 the update is the plain one-pass gradient, bit for bit.",
        f"Accumulating first: 1 all-reduce of {4 * P:,} bytes per update; after every micro-batch: 2 of them, "
        f"{8 * P:,} bytes.",
    ]


@pytest.mark.parametrize("which, name, change, claim", [
    (2, "big_rel_err", lambda e: e.__setitem__((2, 0), 1e-3), "m=4 micro-batches of 16, summed: the update is 1.0e-03"),
    (0, "reduced_grad", lambda g: last_bit(g, (1, 0, 7)), "with m = 1 the update is not the plain one-pass gradient"),
    (3, "reduced_grad", lambda g: g.__setitem__((0,), g[0] * 1.001), "one process summing 2 micro-batches is"),
    (5, "reduced_grad", lambda g: g.__setitem__((0,), g[0] * 1.001), "accumulating first is"),
    (5, "param_digest", lambda d: d.__setitem__((2, 1), b"0" * 40), "after every micro-batch: the replicas are not"),
    (5, "allreduce_calls", lambda c: c.__setitem__((), 1), r"all-reduces per update: \(1, 1\)"),
    (4, "allreduce_bytes", lambda b: b.__setitem__((), 2 * b), "bytes all-reduced per update"),
])
def test_one_update_fails_on_a_tampered_run(six_ways, which, name, change, claim):
    runs = list(six_ways)
    runs[which] = tampered(runs[which], name, change)
    with pytest.raises(AssertionError, match=claim):
        accumulation.one_update_six_ways(*runs)


def test_one_update_refuses_runs_in_the_wrong_places(six_ways):
    big, one2, one4, ranks2, accumulate, every = six_ways
    with pytest.raises(ValueError, match="accumulate and every must be"):
        accumulation.one_update_six_ways(big, one2, one4, ranks2, every, accumulate)
    with pytest.raises(ValueError, match="big must be one process with m = 1"):
        accumulation.one_update_six_ways(one2, big, one4, ranks2, accumulate, every)


# --- chapter: waiting ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep():
    """The figure record's sweep cut down to the chapter's two settings: d = 0, then d = 50 ms, rank 1 slow."""
    full = load(FIGURES / "waiting_straggler")
    keep = np.flatnonzero((full.slow_rank == 1) & np.isin(np.round(full.delay, 3), (0.0, 0.05)))
    return type(full)(full.meta, {name: value[keep] for name, value in full.arrays.items()})


def test_straggler_waits_on_the_figure_record(sweep):
    assert waiting.straggler_waits(load(FIGURES / "waiting_straggler")) == (
        "In all 8 settings the ranks that did not sleep waited d inside the all-reduce, within 5 ms + 30 % of d, "
        "and with d = 25, 50, 100 ms a step of either rank lasted longer than d.")
    assert waiting.straggler_waits(sweep) == (
        "In both settings rank 0 waited d inside the all-reduce, within 5 ms + 30 % of d, and with d = 50 ms a step "
        "of either rank lasted longer than d.")


def test_straggler_waits_fail_on_a_tampered_sweep(sweep):
    with pytest.raises(AssertionError, match="with d = 50 ms the others waited 100"):   # rank 0 sat 50 ms longer
        waiting.straggler_waits(tampered(sweep, "t_exit", lambda t: t.__setitem__((1, slice(None), 0), t[1, :, 0] + 0.05)))
    with pytest.raises(AssertionError, match="with d = 50 ms a step lasted"):   # every step began 40 ms later
        waiting.straggler_waits(tampered(sweep, "t_begin", lambda t: t.__setitem__((1,), t[1] + 0.04)))

    arrays = {name: value.copy() for name, value in sweep.arrays.items()}
    for name in ("t_enter", "t_exit"):   # rank 1's clock 40 ms ahead: the same time inside the all-reduce
        arrays[name][1, :, 1] += 0.04
    with pytest.raises(AssertionError, match="the clocks disagree"):
        waiting.straggler_waits(type(sweep)(sweep.meta, arrays))


@pytest.fixture(scope="module")
def pair():
    return shipped_async()


def test_async_against_sync_on_the_shipped_pair(pair):
    assert waiting.async_against_sync(pair["async"], pair["sync"]) == [
        "Asynchronous: 90 updates in 0.23 s, τ from 0 to 8 (mean 1.92); synchronous: 30 updates of 3 gradients in 0.65 s.",
        "Mean τ per worker: measured 1.3, 1.2, 7.4; modeled from the delays 1.2, 1.2, 10.0; modeled from the measured "
        "seconds per gradient 1.3, 1.2, 7.6.",
        "After 90 gradients the two θ differ by up to 0.075: the asynchronous run did not follow the synchronous path.",
    ]


def test_async_against_sync_fails_on_a_tampered_pair(pair):
    fast, slow = pair["async"], pair["sync"]
    with pytest.raises(AssertionError, match="did not arrive sooner asynchronously"):
        waiting.async_against_sync(tampered(fast, "wall", lambda w: w.__setitem__(-1, 10.0)), slow)
    delays = [0.02, 0.004, 0.004]   # as if worker 1 had been the slow one
    with pytest.raises(AssertionError, match=r"the slowest worker \(1\) is not the stalest"):
        waiting.async_against_sync(with_meta(fast, delays=delays), with_meta(slow, delays=delays))
    with pytest.raises(AssertionError, match="θ_pulled is not θ_"):   # the record's own bookkeeping check
        waiting.async_against_sync(tampered(fast, "staleness", lambda s: s.__setitem__((), 0)), slow)
    with pytest.raises(ValueError, match="its sync twin"):
        waiting.async_against_sync(slow, fast)


# --- chapter: splitting the model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def zero():
    return load(FIGURES / "zero_k4")


def test_zero_one_claims_on_the_figure_record(zero):
    assert splitting.zero_one_claims(zero) == [
        "k = 4, P = 1,684 parameters, M = 6,736 bytes: ZeRO-1 parameters match plain data parallelism within 1e-5 "
        "at every step;",
        "Adam state per rank: plain 13,472 bytes, ZeRO-1 3,368 bytes (1/4);",
        "reduce-scatter: 5,052 bytes per rank per step = (k−1)/k · M, the notes' formula; with the all-gather, "
        "10,104 bytes, one ring all-reduce.",
    ]


def test_zero_one_claims_fail_on_a_tampered_record(zero):
    def shift(b):   # 4 bytes moved from rank 1's reduce-scatter to rank 0's: the total is what check() sees
        b[2, 0] += 4
        b[2, 1] -= 4

    with pytest.raises(AssertionError, match="the reduce-scatter sent"):
        splitting.zero_one_claims(tampered(zero, "rs_bytes", shift))
    with pytest.raises(AssertionError, match="the reduce-scatter and the all-gather sent"):
        splitting.zero_one_claims(tampered(zero, "ag_bytes", lambda b: b.__setitem__((0, 0), b[0, 0] + 4)))
    sizes = np.array([422, 420, 421, 421])   # shards of another size, the state held true to them
    memory = zero.memory_zero.copy()
    memory[:, 2] = 2 * 4 * sizes
    with pytest.raises(AssertionError, match="Adam state per rank is"):
        splitting.zero_one_claims(with_arrays(zero, shard_size=sizes, memory_zero=memory))
    with pytest.raises(AssertionError, match="ZeRO-1 parameters differ"):   # the record's own check()
        splitting.zero_one_claims(tampered(zero, "params_zero", lambda p: p.__setitem__((3, slice(None), 0), p[3, :, 0] + 1)))


# --- chapter: the question bank --------------------------------------------------------------------------


def test_cost_model_edge_cases_on_every_preset():
    assert question_bank.cost_model_edge_cases(PRESETS, M=100_000_000, t_compute=0.5, ks=np.arange(1, 1025)) == (
        "Checked on 3 link presets and k = 1 to 1024: T_comm = 0 and S = 1 at k = 1; S = k/2 when T_comm = "
        "T_compute/k; (k-1)/k < 1 and rising; T_comm rising with k.")


def test_cost_model_edge_cases_fail_on_a_free_link_or_a_wrong_model(monkeypatch):
    free = Link("free", alpha=0.0, beta=1e9, source="made up: no latency")
    with pytest.raises(AssertionError, match="free, t_comm_notes: T_comm not rising with k"):   # nothing to send, no latency
        question_bank.cost_model_edge_cases([free], M=0, t_compute=0.5, ks=np.arange(1, 65))
    with pytest.raises(ValueError, match="ks must start 1, 2"):
        question_bank.cost_model_edge_cases(PRESETS, M=1e8, t_compute=0.5, ks=np.arange(2, 65))
    monkeypatch.setattr(costmodel, "speedup", lambda t, k, c: t / (t + c))   # forgot that the compute is shared
    with pytest.raises(AssertionError, match="S is not k/2 when T_comm = T_compute/k"):
        question_bank.cost_model_edge_cases(PRESETS, M=1e8, t_compute=0.5, ks=np.arange(1, 65))


@pytest.fixture(scope="module")
def unequal():
    """The chapter's run: k = 2 ranks with 2 and 6 examples, the plain all-reduce."""
    return record(k=2, shard_sizes=(2, 6), steps=1)


def test_weighted_mean_for_unequal_batches(unequal):
    assert question_bank.weighted_mean_for_unequal_batches(unequal) == \
        "The weighted mean equals the big-batch gradient (relative error ≤ 1e-5); the plain mean does not."


def test_weighted_mean_claim_fails_on_a_tampered_run(unequal, uneven):
    claim = question_bank.weighted_mean_for_unequal_batches
    weighted = np.average(unequal.local_grad, axis=1, weights=unequal.shard_sizes).astype(np.float32)
    with pytest.raises(AssertionError, match="the ranks did not receive the plain mean"):
        claim(with_arrays(unequal, reduced_grad=np.repeat(weighted[:, None, :], 2, axis=1)))
    with pytest.raises(AssertionError, match="the weighted mean is not the big-batch gradient"):
        claim(with_arrays(unequal, shard_sizes=np.array([4, 4])))
    with pytest.raises(AssertionError, match="the plain mean is the big-batch gradient too"):
        claim(with_arrays(unequal, local_grad=np.repeat(unequal.big_grad[:, None, :], 2, axis=1),
                          reduced_grad=np.repeat(unequal.big_grad[:, None, :], 2, axis=1)))
    with pytest.raises(ValueError, match="run must have unequal shards and the plain all-reduce"):
        claim(uneven)
