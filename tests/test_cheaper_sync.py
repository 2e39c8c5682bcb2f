"""A cheaper sync: compression hooks, local SGD and a two-level all-reduce, on real ranks, and their prices.

Every record here comes from a real run (gloo ranks on CPU). Bytes are counted as the hooks and rings sent
them and compared with numbers worked out by hand; the hand-written local SGD is held to plain data
parallelism (H = 1) and to torch's PeriodicModelAverager; the two-level all-reduce to dist.all_reduce.
Tampering with one number of a real record makes the claim that rests on it fail, by name.
"""

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from dpviz.topics.cheaper_sync import claims
from dpviz.engine.schema import load
from dpviz.topics.cheaper_sync.records_compression import CompressionRecord
from dpviz.topics.cheaper_sync.records_hierarchical import HierarchicalRecord
from dpviz.topics.cheaper_sync.records_local_sgd import LocalSgdRecord
from dpviz.topics.ground_floor.records import rel_err
from dpviz.topics.cheaper_sync.run_compression import CompressionConfig, record_compression
from dpviz.topics.cheaper_sync.run_hierarchical import HierarchicalConfig, record_hierarchical
from dpviz.topics.cheaper_sync.run_local_sgd import LocalSgdConfig, record_local_sgd
from dpviz.topics.cheaper_sync import theory
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.ground_floor.links import PRESETS

# The default MLP: 16 inputs, two hidden layers of 32, one output: 1,633 parameters, M = 6,532 bytes.
M = 6_532
SHAPES = [(32, 16), (32,), (32, 32), (32,), (1, 32), (1,)]
UNCOMPRESSED = 32 + 32 + 32 + 1  # the biases and the 1×32 output layer: too small to gain from compression
POWERSGD_BYTES = {r: 4 * (UNCOMPRESSED + (32 + 32) * r + (16 + 32) * r) for r in (1, 2, 4)}  # 836, 1284, 2180


@pytest.fixture(scope="module")
def comp() -> CompressionRecord:
    return record_compression(k=2, steps=6, ranks=(1, 2, 4))


@pytest.fixture(scope="module")
def full_rank() -> CompressionRecord:
    """PowerSGD at a rank as large as every matrix, told to compress everything: it must send the gradient back."""
    return record_compression(k=2, steps=4, ranks=(32,), min_compression_rate=0.0)


@pytest.fixture(scope="module")
def local() -> LocalSgdRecord:
    return record_local_sgd(k=2, steps=8, periods=(1, 2, 4))


@pytest.fixture(scope="module")
def local_k1() -> LocalSgdRecord:
    return record_local_sgd(k=1, steps=8, periods=(8,), oracle=False)  # 7 local steps: forward, backward, no sync


@pytest.fixture(scope="module")
def hier() -> HierarchicalRecord:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"k=\d+ ranks share")  # 4 ranks on 2 cores: nothing asserted is timed
        return record_hierarchical(k=4, group_size=2, sizes=(1001, 4096), repeats=2)


def tampered(record, name, change):
    arrays = {key: value.copy() for key, value in record.arrays.items()}
    change(arrays[name])
    return type(record)(record.meta, arrays)


def flip_bit(array, index):
    """Flip the lowest bit of one element, whatever its dtype."""
    view = array.view(np.uint32 if array.dtype == np.float32 else np.uint64 if array.dtype.itemsize == 8 else array.dtype)
    view[index] ^= 1


# --- send fewer bytes ------------------------------------------------------------------------------------


def test_bytes_are_counted_exactly(comp):
    assert comp.meta["message_bytes"] == M and comp.n_params == M // 4
    sent = {mode: comp.sent_bytes[i] for i, mode in enumerate(comp.mode)}
    assert (sent["allreduce"] == M).all()
    assert (sent["fp16"] == M // 2).all()  # fp16 is half, every step, on every rank
    for r, want in POWERSGD_BYTES.items():
        per_step = sent[f"powersgd_r{r}"][:, 0]
        assert (per_step[:2] == M).all()  # start_powersgd_iter = 2: plain all-reduces first
        assert (per_step[2:] == want).all(), (r, per_step)
        calls = comp.sent_calls[comp.index(f"powersgd_r{r}")]
        assert (calls[:2] == 1).all() and (calls[2:] == 3).all()  # uncompressed tensors, then P, then Q
    assert POWERSGD_BYTES == {1: 836, 2: 1284, 4: 2180}


def test_powersgd_factor_sizes_from_theory_match_the_hand_count():
    for r, want in POWERSGD_BYTES.items():
        counts = theory.powersgd_elements(SHAPES, r)
        assert counts["uncompressed"] == UNCOMPRESSED
        assert counts["p"] == (32 + 32) * r and counts["q"] == (16 + 32) * r
        assert 4 * counts["total"] == want and counts["before"] == M // 4
    everything = theory.powersgd_elements(SHAPES, 1, min_compression_rate=0.0)
    assert everything["uncompressed"] == 0  # rate 0: even vectors become rank-1 factors


def test_gradient_error_is_zero_for_the_plain_hook_rounding_for_fp16_and_positive_for_rank_1(comp):
    err = {mode: comp.grad_rel_err[i] for i, mode in enumerate(comp.mode)}
    assert err["allreduce"].max() <= 1e-6
    assert 0 < err["fp16"].max() < 2e-3
    assert err["powersgd_r1"][:2].max() <= 1e-6  # the plain steps
    assert (err["powersgd_r1"][2:] > 0.01).all()
    assert np.median(err["powersgd_r4"][2:]) < np.median(err["powersgd_r1"][2:])


def test_powersgd_at_full_rank_is_the_identity(full_rank):
    i = full_rank.index("powersgd_r32")
    on = full_rank.compressed_steps("powersgd_r32")
    assert on.sum() == 2
    assert full_rank.grad_rel_err[i][on].max() < 1e-5  # zero-ish: P Pᵀ ḡ = ḡ when P spans ḡ's columns
    assert (full_rank.sent_bytes[i][on] > M).all()  # and it sent more than M to get there


def test_error_feedback_keeps_something(comp):
    for r in (1, 2, 4):
        i = comp.index(f"powersgd_r{r}")
        assert (comp.error_norm[i, :2] == 0).all()
        assert (comp.error_norm[i, 2:] > 0).all()
    assert (comp.error_norm[comp.index("fp16")] == 0).all()


def test_compression_claims_hold(comp):
    lines = claims.compression_claims(comp)
    assert any("836 bytes" in line and "3,266 bytes" in line for line in lines)
    assert any("Error feedback" in line for line in lines)
    assert any(line.startswith("After 6 steps the loss") for line in lines)


# --- sync less often -------------------------------------------------------------------------------------


def test_local_sgd_with_h_1_is_plain_data_parallelism(local):
    i = local.index(1)
    for step in range(local.steps + 1):
        assert rel_err(local.params_local[i, step], local.params_dp[step]) <= 1e-5, step
    assert local.loss_local[i].shape == local.loss_dp.shape


def test_drift_is_zero_after_each_sync_and_positive_between(local):
    for H in (2, 4):
        drift = local.drift(H)
        synced = local.synced(H)
        assert (drift[0] == 0) and (drift[1:][synced] == 0).all()
        assert (drift[1:][~synced] > 0).all()
        assert (local.drift_before_average(H)[synced] > 0).all()  # the average is what brought it back to 0
    assert (local.all_reduces(4) == [0, 0, 0, 1, 1, 1, 1, 2]).all()
    assert (local.examples() == np.arange(1, 9) * 2 * 16).all()


def test_hand_written_local_sgd_equals_torch_periodic_model_averager(local):
    assert local.params_torch is not None
    for i in range(len(local.period)):
        assert rel_err(local.params_torch[i], local.params_local[i]) <= 1e-5
    # k = 2: dividing by 2 before or after the all-reduce is exact, so here they agree bit for bit
    assert (local.params_torch == local.params_local).all()


def test_local_sgd_claims_hold(local):
    lines = claims.local_sgd_claims(local)
    assert any("H = 1" in line and "plain data parallelism" in line for line in lines)
    assert any("exactly 0 right after every average" in line for line in lines)
    assert any("PeriodicModelAverager" in line for line in lines)


# --- sync in two levels ----------------------------------------------------------------------------------


def test_two_level_all_reduce_equals_dist_all_reduce(hier):
    for s, span in enumerate(hier.spans()):
        two, ref = hier.two_level[:, span], hier.all_reduce[:, span]
        if hier.input_kind[s] == "int":
            assert (two == ref).all()
        else:
            assert rel_err(two, ref) <= 1e-5
        assert (two == two[:1]).all()


def test_bytes_per_link(hier):
    inside = hier.same_group()
    assert inside.tolist() == [[True, True, False, False], [True, True, False, False],
                               [False, False, True, True], [False, False, True, True]]
    s = int(np.flatnonzero(hier.size == 4096)[0])
    # inside: a ring of 2 over 4,096 values sends 4,096 values per rank (half in each phase), to its partner
    assert hier.link_bytes_inner[s].tolist() == [[0, 16384, 0, 0], [16384, 0, 0, 0], [0, 0, 0, 16384], [0, 0, 16384, 0]]
    # between: each rank all-reduces its half (2,048 values) with its counterpart: 2,048 values each way
    assert hier.link_bytes_outer[s].tolist() == [[0, 0, 8192, 0], [0, 0, 0, 8192], [8192, 0, 0, 0], [0, 8192, 0, 0]]
    # the flat ring 0 → 1 → 2 → 3 → 0: each rank sends 2·3/4 of M to its right; 1 → 2 and 3 → 0 cross groups
    assert (hier.link_bytes_flat[s].sum(axis=1) == 24576).all()
    assert hier.between_groups(hier.link_bytes_inner + hier.link_bytes_outer)[s] == 4 * 8192
    assert hier.between_groups(hier.link_bytes_flat)[s] == 2 * 24576
    for s, n in enumerate(hier.size.tolist()):  # 1,001 does not split evenly: the theory cuts chunks as the ring does
        assert (hier.link_bytes_inner[s] + hier.link_bytes_outer[s] == theory.link_bytes_two_level(4, 2, n)).all()
        assert (hier.link_bytes_flat[s] == theory.link_bytes_ring(range(4), n)).all()


def test_hierarchical_claims_hold(hier):
    lines = claims.hierarchical_claims(hier)
    assert "bit for bit" in lines[0]
    assert any("32,768 bytes crossed between groups, against 49,152 bytes in the flat ring" in line for line in lines)


def test_records_save_and_load(comp, local, local_k1, hier, tmp_path):
    for i, record in enumerate((comp, local, local_k1, hier)):
        path = record.save(tmp_path / f"{record.KIND.name}_{i}")
        again = load(path)
        assert type(again) is type(record)
        assert all((again.arrays[name] == value).all() for name, value in record.arrays.items())


# --- tamper: one number changed, the named claim fails ---------------------------------------------------


@pytest.mark.parametrize("name, change, claim", [
    ("sent_bytes", lambda a: flip_bit(a, (1, 3, 0)), "bytes counted"),
    ("sent_calls", lambda a: a.__setitem__((2, 4, 1), 2), "bytes counted"),
    ("grad_rel_err", lambda a: a.__setitem__((0, 2, 0), 1e-3), "the plain hook's gradient is the exact average"),
    ("grad_rel_err", lambda a: a.__setitem__((2, 3, 1), 0.0), "gradient error must be positive"),
    ("error_norm", lambda a: a.__setitem__((3, 4, 0), 0.0), "error feedback keeps what compression lost"),
    ("param_digest", lambda a: a.__setitem__((2, 3, 1), b"0" * 40), "the replicas are bit-identical"),
])
def test_a_tampered_compression_record_fails_its_claim(comp, name, change, claim):
    with pytest.raises(AssertionError, match=claim):
        claims.compression_claims(tampered(comp, name, change))


@pytest.mark.parametrize("name, change, claim", [
    ("params_local", lambda a: flip_bit(a, (1, 2, 1, 5)), "the drift is zero right after each average"),
    ("params_local", lambda a: a.__setitem__((0, 4, 0, 0), a[0, 4, 0, 0] * 1.01 + 0.01), "H = 1 is plain data parallelism"),
    ("params_torch", lambda a: a.__setitem__((2, 5, 0, 3), a[2, 5, 0, 3] + 0.01), "PeriodicModelAverager"),
    ("params_dp", lambda a: flip_bit(a, (3, 1, 0)), "keeps the replicas identical"),
])
def test_a_tampered_local_sgd_record_fails_its_claim(local, name, change, claim):
    with pytest.raises(AssertionError, match=claim):
        claims.local_sgd_claims(tampered(local, name, change))


def test_a_local_step_that_did_not_drift_fails(local):
    i = local.index(4)

    def no_drift(a):
        a[i, 2] = a[i, 2, :1]  # as if both replicas had stayed the same through a local step

    with pytest.raises(AssertionError, match="between averages the replicas drift apart"):
        claims.local_sgd_claims(tampered(local, "params_local", no_drift))


@pytest.mark.parametrize("name, change, claim", [
    ("two_level", lambda a: flip_bit(a, (2, 7)), "every rank receives the same sum"),
    ("two_level", lambda a: a.__setitem__((slice(None), 3), a[:, 3] + 1), "bit for bit on integer-valued inputs"),
    ("link_bytes_outer", lambda a: a.__setitem__((3, 0, 2), a[3, 0, 2] + 4), "bytes per link"),
    ("link_bytes_flat", lambda a: flip_bit(a, (0, 1, 2)), "bytes per link"),
])
def test_a_tampered_hierarchical_record_fails_its_claim(hier, name, change, claim):
    with pytest.raises(AssertionError, match=claim):
        claims.hierarchical_claims(tampered(hier, name, change))


# --- measured here: S = k · T_step(1) / T_step(k) ---------------------------------------------------------


def test_step_times_are_recorded_for_every_hook_and_the_exact_all_reduce_beside_it(comp):
    assert comp.t_exact.shape == comp.t_step.shape == (5, 6, 2)
    assert (comp.t_exact > 0).all() and (comp.t_step > 0).all()
    # warm-up: DDP's first step left out; PowerSGD timed on its compressed steps after the first one
    assert comp.timed_steps("allreduce").tolist() == [False] + [True] * 5
    assert comp.timed_steps("powersgd_r2").tolist() == [False, False, False, True, True, True]
    assert comp.step_seconds("fp16") == np.median(comp.t_step[comp.index("fp16"), 1:])
    assert comp.sync_seconds() == np.median(comp.t_exact[comp.index("allreduce"), 1:])


def test_local_sgd_records_each_step_s_time_and_whether_it_averaged(local, local_k1):
    assert local.t_step_dp.shape == local.t_sync_dp.shape == (8, 2)
    assert local.t_step_local.shape == local.t_sync_local.shape == local.averaged.shape == (3, 8, 2)
    assert (local.t_sync_dp > 0).all() and (local.t_sync_dp <= local.t_step_dp).all()  # the all-reduce is in the step
    for i, H in enumerate((1, 2, 4)):
        assert (local.averaged[i] == local.synced(H)[:, None]).all()
        assert ((local.t_sync_local[i] > 0) == local.averaged[i]).all()
        assert (local.t_sync_local[i] <= local.t_step_local[i]).all()
    t = local.t_step_local[local.index(4)]  # H = 4: steps 3 and 7 average; step 0 is the warm-up
    want = (3 * np.median(t[[1, 2, 4, 5, 6]]) + np.median(t[[3, 7]])) / 4
    assert local.step_seconds(4) == pytest.approx(want, rel=1e-12)
    assert local.step_seconds(1) == np.median(local.t_step_local[0, 1:])
    assert local_k1.k == 1 and local_k1.params_torch is None
    assert local_k1.averaged[0, :, 0].tolist() == [False] * 7 + [True]
    assert local_k1.local_step_seconds() == np.median(local_k1.t_step_local[0, 1:7])  # step 0: warm-up
    with pytest.raises(ValueError, match="has no local step to time"):
        tampered(local, "period", lambda a: a.__setitem__(slice(None), 1)).local_step_seconds()


def test_measured_speedups_are_k_times_the_one_rank_step_over_the_k_rank_step(comp, local, local_k1):
    rows = claims.measured_rows(comp, local, local_k1)
    assert [row["label"] for row in rows] == [
        "plain all-reduce", "fp16", "PowerSGD r = 1", "PowerSGD r = 2", "PowerSGD r = 4",
        "plain data parallelism", "local SGD H = 1", "local SGD H = 2", "local SGD H = 4"]
    for row in rows:
        assert row["k"] == 2 and row["speedup"] > 0 and row["t_one"] == local_k1.local_step_seconds()
        assert row["speedup"] == pytest.approx(2 * row["t_one"] / row["t_step"], rel=1e-12)
    plain, fp16, h4 = rows[0], rows[1], rows[-1]
    assert plain["t_step"] == comp.step_seconds("allreduce")
    assert plain["formula"] == pytest.approx(2 * plain["t_one"] / (plain["t_one"] + comp.sync_seconds()))
    assert fp16["formula"] is None  # its sync was not timed alone
    assert h4["t_step"] == local.step_seconds(4) and h4["t_comm"] == pytest.approx(local.sync_seconds(4) / 4)
    lines = claims.measured_speedup_claims(comp, local, local_k1)
    assert lines[0].startswith("Measured S = k · T_step(1) / T_step(k) at the same b = 16 examples per rank")
    assert "k = 2 ranks of 1 thread each" in lines[0] and f"{comp.meta['cores']} cores" in lines[0]
    assert f"T_step(1) = {plain['t_one'] * 1e3:.2f} ms" in lines[0]
    assert f"plain all-reduce {plain['t_step'] * 1e3:.2f} ms, S = {plain['speedup']:.2f}" in lines[1]
    assert f"local SGD H = 4 {h4['t_step'] * 1e3:.2f} ms, S = {h4['speedup']:.2f}" in lines[2]
    assert any(line.startswith("Chapter 06's formula fed the measured parts") for line in lines)
    assert any("not part 4's modeled" in line for line in lines)
    assert claims.measured_title(comp, local, local_k1).startswith("Measured here, k = 2: S = ")


def with_meta(record, **changes):
    return type(record)({**record.meta, **changes}, record.arrays)


@pytest.mark.parametrize("which, change, words", [
    ("comp", dict(b=8), "local_k1 must record the same workload as comp (same b, model, seed, threads and machine): "
                        "its b is 16, comp's 8"),
    ("local", dict(width=64), "local_k1 must record the same workload as local"),
    ("local_k1", dict(host="another machine"), "its host is 'another machine'"),
    ("local_k1", dict(threads_per_rank=2), "its threads_per_rank is 2"),
])
def test_measured_speedups_refuse_two_workloads(comp, local, local_k1, which, change, words):
    given = dict(comp=comp, local=local, local_k1=local_k1)
    given[which] = with_meta(given[which], **change)
    with pytest.raises(ValueError, match=re.escape(words)):
        claims.measured_speedup_claims(**given)


def test_measured_speedups_need_a_one_rank_run(comp, local):
    with pytest.raises(ValueError, match=r"local_k1 must be a run on one rank \(k = 1\); got k = 2\."):
        claims.measured_speedup_claims(comp, local, local)


@pytest.mark.parametrize("record, name, change, claim", [
    ("local", "averaged", lambda a: a.__setitem__((2, 3, 1), False), "local SGD averages after every H-th step"),
    ("local", "t_sync_dp", lambda a: a.__setitem__((4, 0), 1.0), "a step's all-reduce is part of the step"),
    ("local", "t_sync_local", lambda a: a.__setitem__((1, 2, 0), 1e-4), "recorded exactly on the steps that averaged"),
    ("local_k1", "t_step_local", lambda a: a.__setitem__((0, 2, 0), -1e-3), "every timed step took a positive"),
    ("comp", "t_step", lambda a: a.__setitem__((3, 2, 1), 0.0), "every timed step took a positive, finite time"),
    ("comp", "t_exact", lambda a: a.__setitem__((0, 1, 0), -1e-3), "every timed step took a positive, finite time"),
])
def test_a_tampered_timing_fails_the_measured_claims(comp, local, local_k1, record, name, change, claim):
    given = dict(comp=comp, local=local, local_k1=local_k1)
    given[record] = tampered(given[record], name, change)
    with pytest.raises(AssertionError, match=claim):
        claims.measured_speedup_claims(**given)


def test_claims_name_the_record_they_need(comp):
    with pytest.raises(TypeError, match="rec must be a LocalSgdRecord"):
        claims.local_sgd_claims(comp)


# --- priced in the cost model ----------------------------------------------------------------------------


def test_theory_prices_each_method_beside_the_ring():
    eth, nv = PRESETS["10 Gb Ethernet"], PRESETS["NVLink"]
    M_big = 100e6
    ring = costmodel.t_comm_ring(16, M_big, eth.alpha, eth.beta)
    assert theory.t_comm_local_sgd(16, M_big, eth.alpha, eth.beta, 4) == pytest.approx(ring / 4)
    assert theory.t_comm_fp16(16, M_big, eth.alpha, eth.beta) < ring
    # one group of all k is the flat ring on the fast link; groups of 1 the flat ring on the slow one
    assert theory.t_comm_two_level(8, 8, M_big, inner=nv, outer=eth) == pytest.approx(costmodel.t_comm_ring(8, M_big, nv.alpha, nv.beta))
    assert theory.t_comm_two_level(8, 1, M_big, inner=nv, outer=eth) == pytest.approx(costmodel.t_comm_ring(8, M_big, eth.alpha, eth.beta))
    assert theory.t_comm_two_level(8, 4, M_big, inner=nv, outer=eth) < theory.t_comm_flat(8, 4, M_big, inner=nv, outer=eth)
    rows = theory.priced(0.05, 16, M_big, link=eth, shapes=[(4096, 4096)] * 6, group_sizes=[8])
    assert rows[0]["method"] == "ring" and {r["method"] for r in rows} == {"ring", "fp16", "powersgd", "local_sgd", "two_level"}
    ring_s = rows[0]["speedup"]
    assert all(r["speedup"] >= ring_s - 1e-12 for r in rows if r["method"] != "powersgd")
    lines = claims.priced_claims(0.05, 16, M_big, shapes=[(4096, 4096)] * 6, group_size=8)
    assert len(lines) == 3 and all("PowerSGD r = 1" in line and "local SGD H = 8" in line for line in lines)


def test_theory_link_bytes_for_one_group_is_the_flat_ring():
    for n in (7, 1001, 4096):
        assert (theory.link_bytes_two_level(4, 4, n) == theory.link_bytes_ring(range(4), n)).all()
    # k = 4 in two pairs: as many bytes in all as the flat ring (1.5 M per rank), but a third fewer cross between groups
    two, flat = theory.link_bytes_two_level(4, 2, 4096), theory.link_bytes_ring(range(4), 4096)
    assert two.sum() == flat.sum() == 4 * 1.5 * 4096 * 4
    between = ~theory.same_group(4, 2)
    assert (two * between).sum() == 2 / 3 * (flat * between).sum()


# --- bad input: one sentence naming the field and its range, before any rank starts ----------------------


@pytest.mark.parametrize("make, error, words", [
    (lambda: CompressionConfig(k=0), ValueError, "k must be an integer from 1 to 64; got 0."),
    (lambda: CompressionConfig(ranks=(0,)), ValueError, "ranks entries must be an integer from 1 to 1024; got 0."),
    (lambda: CompressionConfig(ranks=()), ValueError, "ranks must list at least one"),
    (lambda: CompressionConfig(start_powersgd_iter=1), ValueError, "start_powersgd_iter must be an integer >= 2"),
    (lambda: CompressionConfig(min_compression_rate=-1.0), ValueError, "min_compression_rate must be a number >= 0"),
    (lambda: CompressionConfig(error_feedback="yes"), TypeError, "error_feedback must be True or False"),
    (lambda: CompressionConfig(lr=0.0), ValueError, "lr must be a number > 0"),
    (lambda: CompressionConfig(b=0), ValueError, "b must be an integer"),
    (lambda: LocalSgdConfig(periods=(0,)), ValueError, "periods entries must be an integer from 1 to 24; got 0."),
    (lambda: LocalSgdConfig(periods=(30,)), ValueError, "periods entries must be an integer from 1 to 24; got 30."),
    (lambda: LocalSgdConfig(steps=0), ValueError, "steps must be an integer from 1 to 10000; got 0."),
    (lambda: LocalSgdConfig(oracle=1), TypeError, "oracle must be True or False"),
    (lambda: HierarchicalConfig(group_size=3), ValueError, "group_size must divide k=4 into equal groups, one of 1, 2, 4; got 3."),
    (lambda: HierarchicalConfig(group_size=5), ValueError, "group_size must be an integer from 1 to 4; got 5."),
    (lambda: HierarchicalConfig(sizes=(0,)), ValueError, "sizes entries must be an integer from 1 to 16777216; got 0."),
    (lambda: HierarchicalConfig(repeats=0), ValueError, "repeats must be an integer from 1 to 1000; got 0."),
    (lambda: record_hierarchical(k=3), ValueError, "group_size must divide k=3"),
])
def test_bad_input_is_named_in_one_sentence(make, error, words):
    with pytest.raises(error) as caught:
        make()
    message = str(caught.value)
    assert message.startswith(words.rstrip(".")) or words in message, message
    assert message.endswith(".") and message.count("; got ") == 1


def test_the_fronts_check_configs_without_torch():
    code = (
        "import sys\n"
        "from dpviz.topics.cheaper_sync.run_compression import CompressionConfig, record_compression\n"
        "from dpviz.topics.cheaper_sync.run_local_sgd import LocalSgdConfig, record_local_sgd\n"
        "from dpviz.topics.cheaper_sync.run_hierarchical import HierarchicalConfig, record_hierarchical\n"
        "import dpviz.topics.cheaper_sync.claims, dpviz.topics.cheaper_sync.theory\n"
        "for make in (lambda: record_compression(ranks=(0,)), lambda: record_local_sgd(periods=(99,)),\n"
        "             lambda: record_hierarchical(group_size=3)):\n"
        "    try:\n"
        "        make()\n"
        "    except ValueError:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]"


def test_chapter_14_titles_hold_on_the_committed_records_and_fail_when_tampered():
    from dpviz.topics.cheaper_sync import claims as titles
    from dpviz.topics.cheaper_sync.records_compression import FIGURE_PLAN

    records = FIGURE_PLAN.load()
    comp, local = records["cheaper_sync_compression"], records["cheaper_sync_local_sgd"]
    hier = records["cheaper_sync_hierarchical"]
    local_k1 = records["cheaper_sync_local_sgd_k1"]
    assert local_k1.k == 1 and comp.meta["b"] == local.meta["b"] == local_k1.meta["b"]
    assert titles.measured_title(comp, local, local_k1).startswith(f"Measured here, k = {comp.k}: S = ")
    assert "fewer bytes than the plain all-reduce" in titles.compression_title(comp)
    assert "drift 0 after every average" in titles.drift_title(local)
    assert "fewer bytes between groups" in titles.two_levels_title(hier)
    rows = {name: titles.priced_rows(name, k=8, group_size=4, rank=4, period=8, t_compute=0.5, M=2**30,
                                     shapes=[(4096, 4096)] * 16) for name in ("NVLink", "10 Gb Ethernet")}
    assert "Modeled, k = 8" in titles.priced_title(rows, k=8)
    tampered = local.params_local.copy()  # a loaded array this large is read-only: tamper with a copy
    tampered[-1, -1, 0, 0] += 1.0  # the last average no longer brings the replicas together
    local.arrays["params_local"] = tampered
    with pytest.raises(AssertionError, match="drift is zero right after each average"):
        titles.drift_title(local)
    with pytest.raises(AssertionError, match="buys more on a slower link"):
        titles.priced_title(dict(reversed(list(rows.items()))), k=8)


@pytest.mark.parametrize("move", [{"r": 64}, {"H": 64}, {"g": 8}, {"link": "10 Gb Ethernet"}])
def test_the_sliders_frame_is_a_full_draw_of_the_same_setting(move):
    """Every move's blitted frame against full draws: the bars start on the left spine, which is redrawn over them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from widget_checks import assert_blit_is_right

    from dpviz.topics.cheaper_sync.widget import cheaper_sync_widget

    sf = cheaper_sync_widget()
    sf.set(**move)
    assert_blit_is_right(sf, str(move))
