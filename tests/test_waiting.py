"""Chapter 11 on real runs: a straggler makes the others wait, hooked all-reduces give the serial all-reduce's (and DDP's)
gradients, a parameter server with one worker is plain SGD; the formulas, records, figures, widget and cards."""

from __future__ import annotations

import json

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest

import _waiting_workers
from dpviz import course
from dpviz.topics.waiting.figures import figure_waiting_straggler
from dpviz.topics.waiting import claims
from dpviz.engine.schema import load
from dpviz.topics.waiting.records_async_sgd import AsyncRecord, shipped_async
from dpviz.topics.waiting.records_overlap import OverlapRecord, shipped_overlap
from dpviz.topics.waiting.records_straggler import StragglerRecord, shipped_straggler
from dpviz.topics.waiting.run_async_sgd import AsyncConfig, record_async
from dpviz.engine.supervise import RankError, RankTimeout
from dpviz.engine.launch import launch
from dpviz.topics.waiting.run_overlap import OverlapConfig, record_overlap
from dpviz.topics.waiting.buckets import make_buckets
from dpviz.topics.waiting.run_straggler import StragglerConfig, record_straggler
from dpviz.topics.question_bank.bank import cards_for
from dpviz.topics.waiting import theory as waiting
from dpviz.topics.waiting.widget import StragglerFigure, straggler_widget
from widget_checks import assert_blit_is_right


# ---------------------------------------------------------------------------------------------
# Real runs, shared by the tests below


@pytest.fixture(scope="module")
def sweep():
    return record_straggler(k=2, delays=(0.0, 0.03), slow_ranks=(0, 1), steps=4, warmup=1)


@pytest.fixture(scope="module")
def overlap():
    return record_overlap(k=2, steps=3, warmup=1)  # every mode, DDP included


@pytest.fixture(scope="module")
def async_one():
    return record_async(k=1, updates=12)


@pytest.fixture(scope="module")
def async_three():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 processes may share fewer cores; nothing here is timed
        return record_async(k=3, updates=24, delays=(0.002, 0.002, 0.01))


@pytest.fixture(scope="module")
def sync_three():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return record_async(k=3, mode="sync", updates=8, delays=(0.002, 0.002, 0.01))


# ---------------------------------------------------------------------------------------------
# The straggler


def test_no_rank_leaves_the_all_reduce_before_the_last_one_enters_it(sweep):
    # One monotonic clock on one machine: the moments compare across ranks exactly.
    last_in = sweep.t_enter.max(axis=2, keepdims=True)
    assert (sweep.t_exit >= last_in).all()
    assert (sweep.t_begin <= sweep.t_enter).all() and (sweep.t_enter <= sweep.t_exit).all()


def test_only_the_slow_rank_sleeps_and_it_sleeps_at_least_d(sweep):
    for s, (d, slow) in enumerate(zip(sweep.delay, sweep.slow_rank)):
        others = [r for r in range(sweep.k) if r != slow]
        assert (sweep.slept[s][:, others] == 0).all()
        assert (sweep.slept[s][:, slow] >= d).all()  # time.sleep never returns early


def test_straggler_settings_and_derived_times(sweep):
    assert sweep.delay.tolist() == [0.0, 0.0, 0.03, 0.03] and sweep.slow_rank.tolist() == [0, 1, 0, 1]
    assert sweep.setting(0.03, 1) == 3
    np.testing.assert_array_equal(sweep.t_step, sweep.t_compute + sweep.t_comm)
    assert sweep.measured_wait().shape == (4,)
    with pytest.raises(ValueError, match="delay and slow_rank must be a recorded setting"):
        sweep.setting(0.07, 0)


def test_shipped_sweeps_show_the_others_waiting_d():
    sweeps = shipped_straggler()
    assert sorted(sweeps) == [2, 3, 4]
    for k, sweep in sweeps.items():
        assert sweep.k == k and sorted(set(sweep.slow_rank.tolist())) == list(range(k))
        words = sweep.check()  # asserted for k <= cores, reported otherwise
        assert f"k={k}" in words
    two = sweeps[2]
    err = np.abs(two.measured_wait() - two.delay)
    assert (err <= two.wait_tolerance()).all()


def test_straggler_model():
    step = waiting.straggler_step(0.1, [0.0, 0.05, 0.0, 0.0], 0.02)
    np.testing.assert_allclose(step.wait, [0.05, 0.0, 0.05, 0.05])
    assert step.t_step == pytest.approx(0.17)
    assert step.idle_fraction == pytest.approx(3 * 0.05 / (4 * 0.17))
    assert waiting.straggler_slowdown(0.1, 0.05, 0.02) == pytest.approx(0.17 / 0.12)
    assert waiting.straggler_step(0.1, [0.0], 0.0).wait.tolist() == [0.0]


# ---------------------------------------------------------------------------------------------
# Overlap and buckets


def test_every_way_of_syncing_gives_the_serial_all_reduces_gradient_bit_for_bit(overlap):
    assert list(overlap.mode) == ["serial", "per_parameter", "one_buffer", "buckets", "ddp"]
    assert overlap.grads_bit_identical().all()
    assert (overlap.grad_rel_diff == 0).all()
    assert (overlap.grad_head == overlap.grad_head[0]).all()
    assert "bit-identical" in overlap.check()


def test_gradients_identical_is_asserted_with_a_message(overlap):
    assert claims.gradients_identical(overlap).startswith("All 5 ways (serial, per_parameter, one_buffer, buckets, ddp) "
                                                          "gave bit-identical gradients on both ranks at all 3 steps")
    arrays = {name: value.copy() for name, value in overlap.arrays.items()}
    arrays["grad_digest"][4, 2, 0] = b"0" * 40
    with pytest.raises(AssertionError, match="ddp gave rank 0 a gradient at step 2 that differs"):
        claims.gradients_identical(OverlapRecord(overlap.meta, arrays))


def test_overlap_claims_never_raise_on_a_fresh_run(overlap):
    lines = claims.overlap_against_serial(overlap)   # whatever this machine measured, a sentence for each mode
    assert len(lines) >= 6 and lines[0].startswith("serial: forward")
    assert claims.overlap_title(overlap).startswith("Overlap on this machine:")


def test_hooked_all_reduces_start_during_backward_and_one_buffer_only_after_it(overlap):
    per_param, one, buckets = (overlap.index(m) for m in ("per_parameter", "one_buffer", "buckets"))
    assert overlap.n_buckets[per_param] == overlap.meta["n_tensors"]
    assert overlap.n_buckets[one] == 1 and overlap.bucket_bytes[one, 0] == overlap.meta["message_bytes"]
    assert overlap.bucket_bytes[buckets, :overlap.n_buckets[buckets]].sum() == overlap.meta["message_bytes"]
    # the last layer's gradient is final before the first layer's: its all-reduce starts while backward goes on
    assert (overlap.comm_start[per_param, :, :, 0] < overlap.t_grads_ready[per_param]).all()
    assert (overlap.comm_start[buckets, :, :, 0] < overlap.t_grads_ready[buckets]).all()
    # one buffer is full only when the last gradient is in
    assert (overlap.comm_start[one, :, :, 0] >= overlap.t_grads_ready[one]).all()
    for r in range(len(overlap.mode)):
        n = overlap.n_buckets[r]
        start, end = overlap.comm_start[r], overlap.comm_end[r]
        sent = ~np.isnan(start)
        assert (sent == ~np.isnan(end)).all() and not sent[..., n:].any() and sent[..., 0].all()
        assert (end[sent] >= start[sent]).all()
        assert (end <= overlap.t_synced[r][..., None])[sent].all()  # every all-reduce waited for before stepping


def test_buckets_are_filled_last_parameter_first():
    sizes = [100, 10, 1000, 10, 50, 1]
    assert make_buckets(sizes, 1) == [[5], [4], [3], [2], [1], [0]]
    assert make_buckets(sizes, 10_000) == [[5, 4, 3, 2, 1, 0]]
    assert make_buckets(sizes, 4 * 60) == [[5, 4, 3], [2], [1, 0]]
    assert sorted(i for b in make_buckets(sizes, 333) for i in b) == list(range(len(sizes)))


def test_more_ranks_than_two_agree_to_rounding(no_leftover_processes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 3 ranks on 2 cores: slower, and nothing here is timed
        run = record_overlap(k=3, steps=2, warmup=1, modes=("serial", "buckets"), width=64, depth=2)
    assert run.grad_rel_diff.max() <= 1e-6
    assert "k=3" in run.check()


def test_overlap_bounds():
    b = waiting.overlap_bounds(0.01, 0.02, 0.015)
    assert (b.serial, b.best, b.saving) == pytest.approx((0.045, 0.03, 0.015))
    assert waiting.overlap_bounds(0.01, 0.02, 0.05).best == pytest.approx(0.06)  # a long all-reduce cannot hide
    assert b.saving_fraction == pytest.approx(1 / 3)


def test_shipped_overlap_run_includes_ddp_with_identical_gradients():
    run = shipped_overlap()
    assert "ddp" in run.mode and run.grads_bit_identical().all()
    for mode in run.mode:
        phases = run.phases(mode)
        assert phases["step"] > 0 and phases["forward"] > 0
        assert run.meta["warmup"] <= run.typical_step(mode) < run.meta["steps"]


# ---------------------------------------------------------------------------------------------
# Asynchronous SGD


def test_one_worker_is_plain_sgd_bit_for_bit(async_one):
    assert (async_one.staleness == 0).all() and (async_one.worker == 1).all()
    assert np.array_equal(async_one.theta_after, async_one.sequential_theta[1:])
    assert async_one.equals_sequential()
    np.testing.assert_array_equal(async_one.grad, async_one.fresh_grad)
    assert "bit-identical to plain SGD" in async_one.check()


def test_one_worker_claim_is_asserted_with_a_message(async_one):
    assert claims.one_worker_is_plain_sgd(async_one).startswith("k = 1: τ = 0 at all 12 updates, and θ after each "
                                                                "equals plain SGD's bit for bit")
    arrays = {name: value.copy() for name, value in async_one.arrays.items()}
    arrays["sequential_theta"][5, 0] = np.nextafter(arrays["sequential_theta"][5, 0], np.float32(0))   # one last bit
    with pytest.raises(AssertionError, match="plain SGD"):
        claims.one_worker_is_plain_sgd(AsyncRecord(async_one.meta, arrays))


def test_async_claims_never_raise_on_a_fresh_pair(async_three, sync_three):
    lines = claims.async_against_sync(async_three, sync_three)   # the same 24 gradients; whatever the timings, sentences
    assert len(lines) == 6 and lines[0].startswith("Asynchronous: 24 updates in ")
    assert claims.stale_arrows_title(async_three).startswith(("Stale arrows:", "No stale arrows"))
    assert claims.sync_vs_async_title(async_three, sync_three).startswith("Async ")


def test_async_staleness_is_bookkept_and_gradients_were_applied_where_they_arrived(async_three):
    run = async_three
    run.check()
    assert (run.staleness >= 0).all() and run.staleness.max() > 0
    assert set(run.worker.tolist()) <= {1, 2, 3}
    # every update is θ_t − η·g, in float32 as the server stepped
    expected = run.theta_before - np.float32(run.meta["lr"]) * run.grad
    np.testing.assert_allclose(run.theta_after, expected, rtol=0, atol=1e-6)
    # each worker sent its applied gradients plus the one in flight at the end
    assert run.worker_gradients.sum() == run.updates + len(run.dropped_worker) + run.k
    # stale gradients differ from what their mini-batch gives at θ_t
    stale = run.staleness > 0
    assert not np.array_equal(run.grad[stale], run.fresh_grad[stale])
    assert run.angles().shape == (run.updates,)
    # the slowest worker's gradients are the stalest, as the model says
    by_worker = {w: taus.mean() for w, taus in run.staleness_by_worker().items() if len(taus)}
    assert max(by_worker, key=by_worker.get) == 3


def test_sync_through_the_server_is_never_stale_and_differs_from_async(sync_three, async_three):
    sync_three.check()
    assert (sync_three.staleness == 0).all() and (sync_three.worker == 0).all()
    assert sync_three.sequential_theta is None
    np.testing.assert_array_equal(sync_three.grad, sync_three.fresh_grad)  # the mean of 3, summed in worker order
    assert sync_three.batch_index.shape == (8, 3 * sync_three.meta["b"])
    assert not np.array_equal(async_three.theta_after[2::3][:8], sync_three.theta_after)


def test_staleness_bound_is_respected(no_leftover_processes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = record_async(k=3, updates=12, delays=(0.001, 0.001, 0.004), max_staleness=0)
    assert (run.staleness == 0).all()
    assert (run.dropped_staleness > 0).all()
    assert run.equals_sequential()  # only fresh gradients: plain SGD on the batches that were applied


def test_async_model():
    np.testing.assert_allclose(waiting.async_staleness([0.01] * 4), [3.0] * 4)
    np.testing.assert_allclose(waiting.async_staleness([0.01, 0.01, 0.05]), [1.2, 1.2, 10.0])
    assert waiting.update_rates([0.01, 0.01, 0.05]) == pytest.approx((20.0, 220.0))


def test_line_loss_matches_the_mean_squared_error():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(50, 1)), rng.normal(size=(50, 1))
    thetas = rng.normal(size=(3, 4, 2))
    x32, y32 = x.astype(np.float32).astype(float), y.astype(np.float32).astype(float)
    direct = ((thetas[..., :1, None] * x32[:, 0] + thetas[..., 1:, None] - y32[:, 0]) ** 2).mean(axis=-1)[..., 0]
    np.testing.assert_allclose(waiting.line_loss(x, y, thetas), direct, rtol=1e-10)


def test_shipped_async_pair():
    pair = shipped_async()
    assert pair["async"].mode == "async" and pair["sync"].mode == "sync"
    assert pair["async"].updates == pair["async"].k * pair["sync"].updates  # the same number of gradients
    for run in pair.values():
        run.check()


# ---------------------------------------------------------------------------------------------
# Failures: named with their rank, nothing left running


def test_a_failing_worker_is_named(no_leftover_processes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RankError, match="rank 2 failed") as info:
            launch(_waiting_workers.failing_worker, 4, args=(AsyncConfig(k=3, updates=10), 2), backend="gloo",
                   threads=1, stall_timeout=60)
    assert "deliberate failure in worker 2" in info.value.rank_traceback


def test_a_hung_worker_is_named_at_the_timeout(no_leftover_processes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RankTimeout) as info:
            launch(_waiting_workers.hanging_worker, 3, args=(AsyncConfig(k=2, updates=6), 1), backend="gloo",
                   threads=1, stall_timeout=8)
    assert info.value.ranks == [1]


# ---------------------------------------------------------------------------------------------
# Bad input: one sentence naming the argument


@pytest.mark.parametrize("make, name", [
    (lambda: StragglerConfig(delays=(-0.01,)), "delay"),
    (lambda: StragglerConfig(k=0), "k"),
    (lambda: StragglerConfig(k=2, slow_ranks=(2,)), "slow_rank"),
    (lambda: StragglerConfig(steps=3, warmup=3), "warmup"),
    (lambda: OverlapConfig(bucket_mb=0), "bucket_mb"),
    (lambda: OverlapConfig(modes=("serial", "ring")), "modes entries"),
    (lambda: AsyncConfig(max_staleness=-1), "max_staleness"),
    (lambda: AsyncConfig(k=0), "k"),
    (lambda: AsyncConfig(k=2, delays=(0.01,)), "delays"),
    (lambda: AsyncConfig(k=2, delays=(0.01, -1.0)), "delays entries"),
    (lambda: AsyncConfig(mode="sync", max_staleness=2), "max_staleness"),
    (lambda: AsyncConfig(mode="gossip"), "mode"),
    (lambda: AsyncConfig(updates=0), "updates"),
    (lambda: waiting.straggler_step(0.1, [0.0, -0.01], 0.0), "delays entries"),
    (lambda: waiting.overlap_bounds(-1.0, 0.0, 0.0), "t_forward"),
    (lambda: waiting.async_staleness([0.0, 0.01]), "t_grad"),
])
def test_bad_input_is_one_sentence_naming_the_argument(make, name):
    with pytest.raises((ValueError, TypeError)) as info:
        make()
    message = str(info.value)
    assert message.startswith(name) and message.count(".") >= 1 and "\n" not in message


def test_bad_input_stops_before_any_process_starts(no_leftover_processes):
    with pytest.raises(ValueError, match="^delay must be"):
        record_straggler(k=2, delays=(-0.01,))
    with pytest.raises(ValueError, match="^max_staleness must be"):
        record_async(k=2, max_staleness=-1)


# ---------------------------------------------------------------------------------------------
# Records: round trip, and a missing array refused


@pytest.mark.parametrize("fixture, cls", [("sweep", StragglerRecord), ("overlap", OverlapRecord),
                                          ("async_three", AsyncRecord), ("sync_three", AsyncRecord)])
def test_records_round_trip(request, tmp_path, fixture, cls):
    record = request.getfixturevalue(fixture)
    stem = record.save(tmp_path / fixture)
    again = load(stem)
    assert isinstance(again, cls) and again.meta == record.meta
    for name, array in record.arrays.items():
        np.testing.assert_array_equal(again.arrays[name], array)
    assert again.describe() == record.describe()
    assert f"k={record.meta['k']}" in record.describe() and record.meta["host"] in record.describe()


def test_load_refuses_a_record_missing_an_array(sweep, tmp_path):
    stem = sweep.save(tmp_path / "sweep")
    arrays = dict(np.load(stem.with_suffix(".npz")))
    del arrays["t_exit"]
    np.savez(stem.with_suffix(".npz"), **arrays)
    header = json.loads(stem.with_suffix(".json").read_text())
    header.pop("npz_sha256")  # a hand-made pair: no digest binds it, so the missing array is what load names
    stem.with_suffix(".json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match="t_exit"):
        load(stem)


def test_shipped_loaders_name_a_missing_folder(tmp_path):
    for loader in (shipped_straggler, shipped_overlap, shipped_async):
        with pytest.raises(FileNotFoundError, match="python -m dpviz.topics.waiting.run_figures"):
            loader(tmp_path)


# ---------------------------------------------------------------------------------------------
# Figures, widget, cards


@pytest.fixture(scope="module")
def shipped_records():
    pair = shipped_async()
    return {"waiting_straggler": shipped_straggler()[2], "waiting_overlap": shipped_overlap(),
            "waiting_async": pair["async"], "waiting_sync": pair["sync"]}


def test_figures_draw_and_name_their_runs(shipped_records):
    group = next(g for g in course.GROUPS if g.name == "waiting")
    drawn = group.draw(shipped_records)
    assert set(drawn) == {"waiting_straggler", "waiting_overlap", "waiting_stale_arrows", "waiting_sync_vs_async"}
    for name, (fig, sources) in drawn.items():
        assert fig.axes and all(ax.has_data() for ax in fig.axes), name
        assert sources and all(s.meta["host"] in s.describe() for s in sources)
        plt.close(fig)
    assert set(group.plan.stems) == set(shipped_records)
    assert "waiting:" in group.claims(shipped_records)


def test_straggler_figure_title_states_the_measured_wait(shipped_records):
    sweep = shipped_records["waiting_straggler"]
    fig = figure_waiting_straggler(sweep)
    s = sweep.setting(0.05, int(sweep.slow_rank[np.isclose(sweep.delay, 0.05)][-1]))
    assert f"{sweep.measured_wait()[s] * 1e3:.1f} ms" in fig.axes[0].get_title(loc="left")
    plt.close(fig)


def test_widget_moves_change_the_artists_and_blit_correctly():
    sf = straggler_widget(shipped_straggler(), k=2, delay=0.05, slow_rank=1)
    view = sf.view
    before = [p.vertices.copy() for p in view.bars["measured"].collections["delay"].get_paths()]
    sf.set(delay=0.1)
    after = [p.vertices.copy() for p in view.bars["measured"].collections["delay"].get_paths()]
    assert len(before) == len(after) and not all(np.array_equal(a, b) for a, b in zip(before, after))
    assert_blit_is_right(sf, "straggler widget, d = 100 ms")
    sf.set(k=4, slow_rank=3)
    assert sum(label.get_visible() for label in view.rank_labels["measured"]) == 4
    assert "cores" in view.note.get_text() or not shipped_straggler()[4].oversubscribed
    assert_blit_is_right(sf, "straggler widget, k = 4")
    sf.set(k=2)  # the slow rank follows k down
    assert sf.controls["slow_rank"].value == 1
    sf.set(slow_rank=2)  # ... and a slow rank past k pushes k up
    assert sf.controls["k"].value == 3
    assert len(sf.timings) >= 5


def test_widget_refuses_what_was_not_recorded():
    with pytest.raises(ValueError, match="delay must be one of the recorded delays"):
        straggler_widget(shipped_straggler(), delay=0.07)
    with pytest.raises(ValueError, match="sweeps must"):
        StragglerFigure({})


def test_chapter_cards_compute_their_numbers():
    cards = {c.key: c for c in cards_for("waiting")}
    assert len(cards) >= 10
    straggler = cards["waiting-num-straggler"].values()
    assert straggler["t_step_ms"] == pytest.approx(170.0) and straggler["wait_ms"] == pytest.approx(50.0)
    assert straggler["idle"] == pytest.approx(7 * 0.05 / (8 * 0.17))
    overlap = cards["waiting-num-overlap"].values()
    assert (overlap["serial_ms"], overlap["best_ms"]) == pytest.approx((45.0, 30.0))
    asynchronous = cards["waiting-num-async"].values()
    assert asynchronous["tau"] == pytest.approx([1.2, 1.2, 10.0])
    assert (asynchronous["sync_rate"], asynchronous["async_rate"]) == pytest.approx((20.0, 220.0))
    for card in cards.values():
        assert "{" not in card.answer_text()
    bank = {c.key: c.answer_text() for c in cards_for("question_bank")}
    for key in ("question_bank-tf-async", "question_bank-spot-async", "question_bank-why-straggler"):
        assert "Chapter 11" in bank[key]
