"""Shard everything: ZeRO stages 0 to 3 (FSDP) on real gloo ranks, against plain data parallelism, torch's
fully_shard, the memory model and the ring's byte counts; one traced ZeRO-3 step against the model of its
gathers and frees; the ZeRO paper's numbers; bad input; tampering."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

from dpviz.topics.sharding import claims
from dpviz.engine.schema import load
from dpviz.topics.sharding.records import ShardingRun
from dpviz.topics.sharding.run_sharding import ShardingConfig, record_sharding, record_sharding_over_k
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.splitting import theory_memory as memory
from dpviz.topics.sharding import theory


@pytest.fixture(scope="module")
def runs():
    """k = 2 with the FSDP2 oracle, k = 4 without (4 ranks on 2 cores: nothing here asserts a time)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {2: record_sharding(k=2, fsdp=True), 4: record_sharding(k=4)}


def test_every_stage_equals_plain_data_parallelism_after_every_step(runs):
    for run in runs.values():
        assert "trained the same parameters as plain data parallelism" in claims.same_parameters(run)
        scale = np.abs(run.params[0]).max()
        assert run.stage.tolist() == [0, 1, 2, 3]
        assert (run.params[:, 0] == run.params[0, 0]).all()        # the same start
        for stage in (1, 2, 3):
            assert run.max_param_diff(stage).max() <= 1e-6 * scale  # float32 rounding, far below 1e-5
            np.testing.assert_allclose(run.loss[stage], run.loss[0], rtol=1e-5)
        assert not (run.params[0, -1] == run.params[0, 0]).all()   # and training moved them
        assert "bit for bit" in claims.replicas_hold_their_share(run)


def test_zero3_equals_torch_fully_shard(runs):
    run = runs[2]
    assert run.params_fsdp.shape == (run.steps + 1, run.n_params) and run.steps >= 3
    scale = np.abs(run.params_fsdp).max()
    diff = np.abs(run.params[3].astype(np.float64) - run.params_fsdp).max(axis=1)
    assert (diff <= claims.FSDP_TOLERANCE * scale).all(), diff / scale   # after each step, within 1e-5 of the largest
    assert "matches torch's fully_shard" in claims.matches_fully_shard(run)
    with pytest.raises(AssertionError, match="fsdp=True"):
        claims.matches_fully_shard(runs[4])


@pytest.mark.parametrize("k", [2, 4])
def test_measured_memory_is_the_models_count_exactly(runs, k):
    run = runs[k]
    P, element = run.n_params, 4
    assert P % k == 0 and all(n % k == 0 for n in run.unit_size)  # 496, 992, 32: no padding at k = 2 or 4
    for stage in range(4):
        measured = run.memory[stage]                               # (k, phases, categories)
        assert (measured == run.modeled_memory(stage)).all(), (stage, measured[0], run.modeled_memory(stage))
        at_rest = memory.bytes_per_rank(P, k, zero_stage=stage, optimizer="adam")  # ZeRO's stages, in float32
        assert (measured[:, :, :3] == [at_rest["params"], at_rest["grads"], at_rest["optimizer"]]).all()
    total = {stage: run.memory[stage, 0, 2, :3].sum() for stage in range(4)}
    assert total == {0: 16 * P, 1: 8 * P + 8 * P // k, 2: 4 * P + 12 * P // k, 3: 16 * P // k}
    largest = element * int(run.unit_size.max())
    assert run.memory[3, :, 0, 3].tolist() == [largest] * k        # the gathered layer, forward
    assert run.memory[3, :, 1, 3].tolist() == [2 * largest] * k    # gathered again, with its full gradient
    assert run.memory[2, :, 1, 3].tolist() == [largest] * k        # ZeRO-2: one layer's gradient until its reduce-scatter
    assert (run.memory[:2, :, :, 3] == 0).all()
    assert "exactly the bytes the model counts" in claims.memory_claims(run)[0]


def test_bytes_counted_by_the_ring(runs):
    for run in runs.values():
        k, M = run.k, run.message_bytes
        ring = costmodel.t_comm_ring(k, M, 0.0, 1.0)          # with α = 0, β = 1 B/s: one all-reduce's bytes
        sent = run.sent()
        assert (sent[0] == ring).all() and (sent[1] == ring).all() and (sent[2] == ring).all()
        assert (sent[3] == 1.5 * ring).all()
        assert (run.rs_bytes == (k - 1) * M // k).all()
        assert (run.ag_bytes[3] == 2 * (k - 1) * M // k).all()
        assert "1.5 times as much" in claims.bytes_claims(run)


def test_step_times_are_described_and_modeled_times_priced(runs):
    run = runs[4]
    line = claims.step_time_claims(run)
    assert line.startswith("k = 4, measured median step") and ("shared 2 cores" in line) == run.oversubscribed
    modeled = claims.modeled_time_claims(run, n_params=1_000_000_000)
    assert "NVLink 20 ms → 30 ms" in modeled  # α ≪ bytes: 2(k−1)/k · 4 GB at 300 GB/s, then 1.5 times that
    for stage in range(4):
        t = theory.t_comm_zero(4, 4e9, 0.0, 1e9, zero_stage=stage, layers=3)
        assert t == pytest.approx((1.5 if stage == 3 else 1.0) * costmodel.t_comm_ring(4, 4e9, 0.0, 1e9))
    lines = claims.sharding_claims(runs)
    assert any("over k = 2, 4" in line for line in lines) and lines[-1].endswith("Figure 1.")


def test_the_zero_papers_figure_one():
    gb = memory.zero_paper_gb(7.5e9, 64)      # mixed-precision Adam: 2 + 2 + 12 bytes per parameter
    assert gb[0] == 120.0
    assert round(gb[1], 1) == 31.4 and round(gb[2], 1) == 16.6 and round(gb[3], 1) == 1.9
    assert memory.MIXED_PRECISION == {"params": 2, "grads": 2, "optimizer": 12}
    assert "31.4 GB" in claims.zero_paper_claim()
    # float32 Adam through the same function is the existing model
    for stage in range(4):
        assert memory.bytes_per_rank_by_part(1000, 4, zero_stage=stage) == memory.bytes_per_rank(1000, 4, zero_stage=stage)


def test_the_model_pads_layers_that_do_not_split_evenly():
    units = (496, 992, 33)                    # k = 4: the last layer pads to 36
    held = theory.bytes_held(units, 4, zero_stage=3)
    assert held[2, :3].tolist() == [4 * 381, 4 * 381, 8 * 381] and held[1, 3] == 8 * 992
    x = np.arange(sum(units), dtype=np.float32)
    padded = theory.pad(x, units, 4)
    assert padded.size == 1524 and (theory.unpad(padded, units, 4) == x).all()
    assert (theory.from_shards([theory.shard_of(padded, units, 4, r) for r in range(4)], units, 4) == x).all()


def one_sentence(message: str) -> bool:
    return message.count(". ") == 0 and message.endswith(".")


@pytest.mark.parametrize("kwargs, name", [
    (dict(k=0), "k"), (dict(k=65), "k"), (dict(steps=0), "steps"), (dict(lr=0), "lr"), (dict(lr=-1.0), "lr"),
    (dict(b=0), "b"), (dict(width=0), "width"), (dict(depth=0), "depth"), (dict(d_in=0), "d_in"),
    (dict(fsdp="yes"), "fsdp"), (dict(stall_timeout=0), "stall_timeout"), (dict(k=2.5), "k"),
    (dict(b=300), "b"), (dict(seed=-1), "seed"),
])
def test_bad_input_is_one_sentence_naming_the_field(kwargs, name):
    for make in (lambda: ShardingConfig(**kwargs), lambda: record_sharding(**kwargs)):
        with pytest.raises((ValueError, TypeError)) as err:
            make()
        assert str(err.value).startswith(name + " "), err.value
        assert one_sentence(str(err.value)), err.value


def test_bad_k_lists_are_refused_before_any_rank_starts():
    with pytest.raises(ValueError, match=r"^ks must name"):
        record_sharding_over_k(ks=())
    with pytest.raises(ValueError, match=r"^ks\[1\] must be an integer from 1 to 64"):
        record_sharding_over_k(ks=(2, 0))
    with pytest.raises(ValueError, match=r"^lr must be"):
        record_sharding_over_k(ks=(2, 4), lr=0)
    with pytest.raises(ValueError, match=r"^zero_stage must be one of"):
        theory.bytes_held((10,), 2, zero_stage=4)


def test_the_front_never_imports_torch():
    code = ("import sys\nfrom dpviz.topics.sharding.run_sharding import ShardingConfig, record_sharding\n"
            "import dpviz.topics.sharding.claims, dpviz.topics.sharding.theory\n"
            "try:\n    ShardingConfig(k=0)\nexcept ValueError:\n    pass\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout


def test_round_trip_and_refuse_a_missing_array(tmp_path, runs):
    run = runs[2]
    back = load(run.save(tmp_path / "sharding_k2"))
    assert isinstance(back, ShardingRun) and back.describe() == run.describe()
    for name, value in run.arrays.items():
        assert (back.arrays[name] == value).all(), name
    assert {"trace_step", "trace_count", "trace_seconds", "trace_bytes", "trace_layer", "trace_action"} <= set(back.arrays)
    for stage in range(4):
        for key, value in run.timeline(stage, 1).items():
            assert (back.timeline(stage, 1)[key] == value).all(), (stage, key)
    assert back.uses(3, 1) == run.uses(3, 1) and back.rings(3, 0) == run.rings(3, 0)
    assert claims.sharding_claims([back])
    assert claims.timeline_claims(back) == claims.timeline_claims(run)
    arrays = {name: value for name, value in run.arrays.items() if name != "memory"}
    with pytest.raises(ValueError, match="lacks the array 'memory'"):
        ShardingRun(run.meta, arrays)


def test_a_record_made_before_the_trace_still_loads_and_says_what_it_lacks(tmp_path, runs):
    run = runs[2]
    old = ShardingRun(run.meta, {name: value for name, value in run.arrays.items() if not name.startswith("trace_")})
    back = load(old.save(tmp_path / "old"))
    assert not back.traced and claims.sharding_claims([back])   # every other claim still holds on it
    with pytest.raises(ValueError, match="no step traces"):
        back.timeline(3)
    with pytest.raises(AssertionError, match="no step traces"):
        claims.timeline_claims(back)


# --- one traced step: every gather, free, gradient and reduce-scatter, against the model ---------------------


@pytest.mark.parametrize("k", [2, 4])
def test_zero3_gathers_each_layer_twice_and_frees_it_after_each_use(runs, k):
    run = runs[k]
    layers, element = len(run.unit_size), 4
    rest = 16 * run.n_params // k                                  # no padding at k = 2 or 4
    largest = element * int(run.unit_size.max())
    assert int(run.trace_step) == run.steps - 1                    # the last step, at every stage
    for rank in range(k):
        line = run.timeline(3, rank)
        assert (np.diff(line["seconds"]) >= 0).all() and line["action"][0] == "begin" and line["action"][-1] == "end"
        for layer in range(layers):
            gathers = np.flatnonzero((line["action"] == "gather") & (line["layer"] == layer))
            frees = np.flatnonzero((line["action"] == "free") & (line["layer"] == layer))
            assert len(gathers) == len(frees) == 2 and (gathers < frees).all(), (rank, layer)
        uses = run.uses(3, rank)
        assert [(layer, which) for layer, which, _, _ in uses] == [(0, "fwd"), (1, "fwd"), (2, "fwd"),
                                                                    (2, "bwd"), (1, "bwd"), (0, "bwd")]
        kinds = [kind for kind, _, _, _ in run.rings(3, rank)]
        assert kinds.count("all-gather") == 2 * layers and kinds.count("reduce-scatter") == layers
        assert line["bytes"].max() == rest + 2 * largest == run.memory[3, rank, 1].sum()  # the measured peak, too
        assert line["bytes"][0] == line["bytes"][-1] == rest
        model = run.modeled_trace(3)
        assert (line["layer"] == model[0]).all() and (line["bytes"] == model[2]).all()
        assert (run.timeline(0, rank)["bytes"] == 16 * run.n_params).all()          # plain: flat, 16P
        assert (run.timeline(2, rank)["bytes"].max() == run.memory[2, rank, 1].sum())  # ZeRO-2: one layer's gradient
    assert (run.trace_count == [5, 5, 5 + 3 * 3, 5 + 3 * 3 + 6 * 3]).all()
    lines = claims.timeline_claims(run)
    assert "each of the 3 layers was all-gathered twice" in lines[0] and "are the model's" in lines[0]
    assert f"peaked at {rest + 2 * largest:,} B in layer 2's backward" in lines[1]
    assert f"fell back to exactly {rest:,} B" in lines[1]
    assert f"a flat {16 * run.n_params:,} B" in lines[2] and lines[3].startswith("Measured on rank 0")


def test_the_trace_model_peaks_where_the_memory_model_does():
    for units, k in (((496, 992, 32), 2), ((496, 992, 33), 4), ((10,), 1)):
        for stage in range(4):
            layers, actions, held = theory.step_trace(units, k, zero_stage=stage)
            table = theory.bytes_held(units, k, zero_stage=stage)
            assert held.max() == table.sum(axis=1).max() and held[0] == held[-1] == table[-1].sum(), (units, k, stage)
            assert len(layers) == len(actions) == len(held)
        words = [theory.TRACE_ACTIONS[a] for a in theory.step_trace(units, k, zero_stage=3)[1]]
        assert words.count("gather") == words.count("free") == 2 * len(units)
        assert words.count("reduce-scatter") == len(units)


def test_ranks_whose_traces_differ_are_refused():
    from dpviz.topics.sharding.run_sharding import trace_arrays

    def stage(events):
        return {"trace": events, "trace_step": 3}

    same = [(0.0, 10, -1, 0), (0.1, 10, -1, 4)]
    result = {"stages": [stage(same) for _ in range(4)]}
    arrays = trace_arrays([result, result])
    assert arrays["trace_count"].tolist() == [2] * 4 and arrays["trace_seconds"].shape == (4, 2, 2)
    other = {"stages": [stage(same)] * 3 + [stage(same[:1])]}
    with pytest.raises(RuntimeError, match="at ZeRO stage 3 rank 1 traced 1 events and rank 0 2"):
        trace_arrays([result, other])


def trace_change(rank, where, code=None, held=None):
    """Change one event of rank ``rank``'s ZeRO-3 trace: its action (a name) or the bytes held after it."""
    def change(arrays):
        if code is not None:
            arrays["trace_action"][3, rank, where] = theory.TRACE_ACTIONS.index(code)
        if held is not None:
            arrays["trace_bytes"][3, rank, where] = held(arrays["trace_bytes"][3, rank, where])
    return change


# the ZeRO-3 trace of the model: 0 begin, 1 forward, 2-4 layer 1 (gather, gathered, free), 5-7 layer 2,
# 8-10 layer 3, 11 backward, 12-17 layer 3 (gather, gathered, grad, free, reduce-scatter, reduced), 18-23 layer 2, ...
@pytest.mark.parametrize("change, words", [
    (trace_change(1, 18, code="gathered"), "rank 1, traced step: layer 2 was gathered 1 time"),
    (trace_change(0, 4, code="gathered"), "layer 2 was gathered at event 5 while layer 1 was still gathered"),
    (trace_change(0, 16, code="gathered"), "layer 3's gradient had 0 'reduce-scatter' events"),
    (trace_change(1, 20, held=lambda b: b + 4), "more than the model's peak of 20,096 B"),
    (trace_change(0, 7, held=lambda b: b + 4), r"after event 7 \(free of layer 2\) the rank held 12,164 B"),
    (trace_change(0, 13, held=lambda b: b - 4), r"event 13 \(gathered of layer 3\), 12,284 B, is not the model's"),
])
def test_a_broken_trace_fails_the_timeline_claim(runs, change, words):
    run = runs[2]
    claims.timeline_claims(run)  # holds on the real record
    arrays = {key: value.copy() for key, value in run.arrays.items()}
    change(arrays)
    with pytest.raises(AssertionError, match=words):
        claims.timeline_claims(ShardingRun(run.meta, arrays))


def test_plain_data_parallelism_must_hold_a_flat_level(runs):
    run = runs[2]
    arrays = {key: value.copy() for key, value in run.arrays.items()}
    arrays["trace_bytes"][0, 1, 2] += 4
    with pytest.raises(AssertionError, match="plain data parallelism, rank 1: the bytes held moved"):
        claims.timeline_claims(ShardingRun(run.meta, arrays))


# --- tamper with one bit of a real record, and the claim that rests on it fails, by name -------------------


def tampered(run, name, change):
    arrays = {key: value.copy() for key, value in run.arrays.items()}
    change(arrays[name])
    return ShardingRun(run.meta, arrays)


def flip_low_bit(where):
    def change(a):
        bits = a.view(np.int32 if a.dtype == np.float32 else np.int64)
        bits[where] ^= 1
    return change


def flip_high_bit(where, bit=20):
    def change(a):
        a.view(np.int32)[where] ^= 1 << bit          # a mantissa bit well above rounding
    return change


@pytest.mark.parametrize("name, change, claim, words", [
    ("params", flip_low_bit((2, 3, 10)), claims.replicas_hold_their_share, "rank 0 held parameters whose digest"),
    ("params", flip_high_bit((3, 2, 5)), claims.same_parameters, "ZeRO stage 3's parameters differ"),
    ("param_digest", lambda d: d.__setitem__((1, 2, 1), b"0" * 40), claims.replicas_hold_their_share, "rank 1"),
    ("memory", flip_low_bit((3, 1, 1, 3)), claims.memory_claims, "ZeRO stage 3, rank 1, backward"),
    ("memory", flip_low_bit((1, 0, 2, 2)), claims.memory_claims, "of optimizer"),
    ("rs_bytes", flip_low_bit((2, 1, 0)), claims.bytes_claims, "ZeRO stage 2"),
    ("ag_bytes", flip_low_bit((3, 0, 1)), claims.bytes_claims, "all-gathers"),
    ("params_fsdp", flip_high_bit((2, 7)), claims.matches_fully_shard, "fully_shard"),
    ("step_seconds", lambda t: t.__setitem__(1, 0.0), claims.step_time_claims, "took no time"),
])
def test_one_changed_bit_fails_the_named_claim(runs, name, change, claim, words):
    run = runs[2]
    claim(run)  # holds on the real record
    with pytest.raises(AssertionError, match=words):
        claim(tampered(run, name, change))


# --- the chapter: its figure records and titles, its exercises, its slider panel -------------------------


@pytest.fixture(scope="module")
def figure_runs():
    from dpviz.topics.sharding.records import FIGURE_PLAN
    return FIGURE_PLAN.load()


def test_figure_records_pass_every_claim_and_titles_say_what_they_show(figure_runs):
    runs = list(figure_runs.values())
    assert sorted(r.k for r in runs) == [2, 4] and figure_runs["sharding_k2"].params_fsdp is not None
    line = claims.figure_claims(figure_runs)
    assert "matches torch's fully_shard" in line and "1.5 times as much" in line
    assert "equal the model's at every stage and k" in claims.memory_title(runs)
    peak = claims.peak_by_category(figure_runs["sharding_k4"].memory[3, 0])
    assert peak.sum() == 16 * 1520 // 4 + 2 * 4 * 992   # 16P/k at rest, the largest layer gathered with its gradient
    assert "ZeRO-3 1.5 times as much at every k" in claims.bytes_title(runs)
    title = claims.timeline_title(runs)
    assert "all-gathered for its forward and again for its backward" in title
    assert "(20,096 B at k = 2, 14,016 B at k = 4)" in title and "one traced step" in line


def test_the_timeline_figure_draws_each_k_from_the_records(figure_runs):
    import matplotlib.pyplot as plt
    from dpviz.topics.sharding.figures import figure_sharding_timeline

    fig = figure_sharding_timeline(figure_runs.values())
    try:
        panels = [ax for ax in fig.axes if ax.has_data()]
        assert [ax.get_title(loc="left") for ax in panels] == ["k = 2 ranks, rank 0", "k = 4 ranks, rank 0"]
        for ax, run in zip(panels, sorted(figure_runs.values(), key=lambda r: r.k)):
            labels = sorted(t.get_text().replace("\n", " ") for t in ax.texts)
            assert labels == sorted(f"L{i} {p}" for i in (1, 2, 3) for p in ("fwd", "bwd"))
            assert "measured" in ax.get_xlabel()
        assert "Step lines" in fig.alt and "Measured: k=2" in fig.caption
    finally:
        plt.close(fig)


def test_figure_titles_fail_on_a_tampered_record(figure_runs):
    run = figure_runs["sharding_k4"]
    tampered = ShardingRun(dict(run.meta), {**run.arrays, "memory": run.memory.copy()})
    tampered.memory[2, 1, 1, 1] += 4                     # rank 1 held one more float of gradient under ZeRO-2
    with pytest.raises(AssertionError, match="ZeRO stage 2, rank 1, backward"):
        claims.memory_title([tampered])
    tampered = ShardingRun(dict(run.meta), {**run.arrays, "ag_bytes": run.ag_bytes.copy()})
    tampered.ag_bytes[3, 0, 0] -= 1
    with pytest.raises(AssertionError, match="ZeRO stage 3"):
        claims.bytes_title([tampered])


def test_chapter_exercises_accept_the_reference_and_name_typical_mistakes():
    import dpviz.exercises as ex
    from dpviz.grading import load_solutions
    solutions = load_solutions()
    assert ex.check_owned_shard(solutions.owned_shard).passed
    assert ex.check_step_bytes(solutions.step_bytes).passed
    unpadded = ex.check_owned_shard(lambda layer, r, k: np.array_split(np.asarray(layer), k)[r])
    assert not unpadded.passed and "Pad the layer" in unpadded
    no_pad = ex.check_owned_shard(lambda layer, r, k: np.asarray(layer)[((r + 1) % k) * (len(layer) // k):
                                                                      ((r + 1) % k + 1) * (len(layer) // k)])
    assert not no_pad.passed and "Pad the layer" in no_pad
    twice = ex.check_step_bytes(lambda k, M, s: 2 * (k - 1) / k * M)
    assert not twice.passed and "three ring passes" in twice
    zero2 = ex.check_step_bytes(lambda k, M, s: (3 if s >= 2 else 2) * (k - 1) / k * M)
    assert not zero2.passed and "Only ZeRO-3 sends more" in zero2
    for answer in (0.0, 1.0, None):
        assert not ex.check_step_bytes(lambda *a: answer).passed
        assert not ex.check_owned_shard(lambda *a: answer).passed


def test_slider_panel_moves_in_place_and_says_where_the_model_fits():
    from dpviz.topics.sharding.widget import sharding_widget
    sf = sharding_widget()
    assert "ZeRO-3" not in sf.view.status_line and "does not fit" in sf.view.status_line  # 7.5 B, mixed, plain: 120 GB > 80
    lines = list(sf.view.lines.values())
    sf.set(zero_stage=3)
    assert sf.view.lines[3] is lines[3] and "fits a 80 GB device" in sf.view.status_line
    assert "1.5× plain DP's" in sf.view.status_line
    assert np.isclose(sf.view.ring.get_ydata()[0], 1.875)       # the ZeRO paper's 1.9 GB at k = 64
    assert np.isclose(sf.view.bars[3].get_height(), 3 * 63 / 64)  # three ring passes, in units of M
    sf.set(k=1)
    assert "nothing at k = 1" in sf.view.status_line
    with pytest.raises(ValueError, match="k, zero_stage"):
        sharding_widget(k=3)
