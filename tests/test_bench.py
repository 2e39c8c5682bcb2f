"""The all-reduce benchmark: a tiny real sweep, its record on disk, and its argument checks."""

import dataclasses
import json

import numpy as np
import pytest

from dpviz.topics.ground_floor import costmodel
from dpviz.topics.speedup_model.records import BenchRecord
from dpviz.topics.speedup_model.records import IMPLS
from dpviz.topics.measuring.run_bench import PLACEMENTS, BenchConfig, log_sizes, run_sweep, wakeup_worker
from dpviz.engine.launch import launch

SIZES = (64, 4096)  # bytes


@pytest.fixture(scope="module")
def record():
    config = BenchConfig(ks=(2,), sizes=SIZES, repeats=2, warmup=1, stall_timeout=180)
    return run_sweep(config, progress=False)


def test_sweep_times_every_point(record):
    n = len(SIZES) * len(IMPLS)
    assert record.k.shape == record.M.shape == record.impl.shape == (n,)
    assert record.M is record.m  # the stored array "m" (the file schema) under the notes' name M
    assert record.times.shape == (n, 2)
    assert set(record.impl) == set(IMPLS) and set(record.M) == set(SIZES) and set(record.k) == {2}
    assert np.all(record.times > 0)
    low, high = record.spread.T
    assert np.all((low <= record.median) & (record.median <= high))
    np.testing.assert_array_equal(record.fastest, record.times.min(axis=1))
    np.testing.assert_allclose(record.algbw, record.M / record.median)
    np.testing.assert_allclose(record.busbw, record.algbw)  # 2(k-1)/k = 1 at k = 2
    assert record.meta["backend"] == "gloo" and record.KIND.version == 2
    assert "all_reduce" in record.table() and "all-reduce sweep, k=2," in repr(record)


def test_the_fit_follows_the_fastest_call_not_late_wake_ups():
    """Times from a known α, β, with a 4 ms late wake-up added to most repeats at some sizes (what a small VM
    does to a rank that waits on another core): the fit to the fastest calls finds α and β again; a fit to the
    medians would not."""
    alpha, beta, k = 100e-6, 2e9, 2
    M = np.array(log_sizes(1 << 10, 16 << 20, 7))
    exact = costmodel.t_comm(k, M, alpha, beta, formula="ring")
    times = np.repeat(exact[:, None], 10, axis=1)
    times[::2, 4:] += 4e-3  # six of ten calls late at every other size: the median jumps by 4 ms there
    meta = dict(backend="gloo", host="synthetic", cores=2, torch_version="none", date="2026-11-30",
                threads_per_rank={"2": 1}, dtype="float32", config={})
    record = BenchRecord.from_times(np.full(len(M), k), M, ["all_reduce"] * len(M), times, meta)
    np.testing.assert_array_equal(record.fastest, exact)
    fit = record.fit("ring")
    assert fit.alpha == pytest.approx(alpha, rel=1e-6) and fit.beta == pytest.approx(beta, rel=1e-6)
    assert fit.median_rel_err < 1e-6
    by_median = costmodel.fit_alpha_beta(record.k, record.M, record.median, formula="ring")
    assert abs(by_median.beta / beta - 1) > 0.1  # why the fit does not use the median here: β comes out wrong
    assert "fastest ms" in record.table()


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_the_wakeup_diagnostic_times_every_call(placement):
    per_rank = launch(wakeup_worker, 2, args=((64, 4096), 3, placement), progress=False, stall_timeout=120)
    assert len(per_rank) == 2 and all(t.shape == (2, 3) and np.all(t > 0) for t in per_rank)


def test_fits_and_ratios_use_the_measured_rows(record):
    fits = record.fits()
    assert tuple(fits) == costmodel.FORMULAS
    ring = record.fit("ring")
    assert ring.alpha >= 0 and ring.beta > 0 and ring.predicted.shape == (len(SIZES),)
    ks, Ms, ratio = record.ratio("ring")
    assert list(ks) == [2, 2] and sorted(Ms) == list(SIZES) and np.all(ratio > 0)


def test_save_load_round_trip_with_numpy_alone(record, tmp_path):
    stem = record.save(tmp_path / "sweep")
    back = BenchRecord.load(tmp_path / "sweep.npz")
    for name in ("k", "m", "impl", "times"):
        np.testing.assert_array_equal(getattr(back, name), getattr(record, name))
    assert back.meta == json.loads(json.dumps(record.meta))
    with np.load(f"{stem}.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["median"], record.median)
        assert z["impl"].dtype.kind == "U"
    assert json.loads((tmp_path / "sweep.json").read_text())["schema_version"] == 2


def test_load_names_the_path_of_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        BenchRecord.load(tmp_path / "nowhere")


def test_load_names_the_path_of_a_truncated_file(record, tmp_path):
    record.save(tmp_path / "cut")
    npz = tmp_path / "cut.npz"
    npz.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    with pytest.raises(ValueError, match="cut.npz"):
        BenchRecord.load(tmp_path / "cut")

    record.save(tmp_path / "cutjson")
    header = tmp_path / "cutjson.json"
    header.write_text(header.read_text()[:20])
    with pytest.raises(ValueError, match="cutjson.json"):
        BenchRecord.load(tmp_path / "cutjson")


def test_load_names_the_path_of_another_schema(record, tmp_path):
    record.save(tmp_path / "old")
    header_path = tmp_path / "old.json"
    header = json.loads(header_path.read_text())
    header["schema_version"] = 99
    header_path.write_text(json.dumps(header))
    with pytest.raises(ValueError, match=r"old\.json.*schema_version"):
        BenchRecord.load(tmp_path / "old")


@pytest.mark.parametrize(
    "change, name",
    [
        ({"ks": (0,)}, "ks"),
        ({"ks": ()}, "ks"),
        ({"sizes": (2,)}, "sizes"),
        ({"sizes": (6,)}, "sizes"),
        ({"repeats": 0}, "repeats"),
        ({"warmup": -1}, "warmup"),
        ({"impls": ("tree",)}, "impls"),
        ({"backend": "mpi"}, "backend"),
        ({"stall_timeout": 0}, "stall_timeout"),
    ],
)
def test_bad_arguments_name_themselves(change, name):
    with pytest.raises((ValueError, TypeError), match=name) as info:
        BenchConfig(**change)
    assert str(info.value).count(". ") == 0  # one sentence


def test_run_sweep_rechecks_a_config_edited_after_creation():
    config = BenchConfig(ks=(2,))
    config.repeats = 0
    with pytest.raises(ValueError, match="repeats"):
        run_sweep(config, progress=False)
    assert dataclasses.asdict(config)["repeats"] == 0  # the caller's object is left as it was


def test_log_sizes_are_whole_float32s_from_low_to_high():
    sizes = log_sizes(1000, 16 << 20, 8)
    assert sizes[0] == 1000 and sizes[-1] == 16 << 20 and len(sizes) == 8
    assert all(M % 4 == 0 for M in sizes) and list(sizes) == sorted(sizes)


def test_fit_can_be_limited_to_some_k(record):
    assert np.array_equal(record.fit("ring", ks=(2,)).predicted, record.fit("ring").predicted)
    with pytest.raises(ValueError, match="at least 2 points"):
        record.fit("ring", ks=(3,))
