"""Batch normalisation under data parallelism, on real gloo ranks: per-shard statistics break Step 3's identity,
all-reduced statistics restore it."""

import warnings

import json

import numpy as np
import pytest

from dpviz.topics.whole_picture.records import BatchNormRun
from dpviz.engine.schema import load
from dpviz.topics.ground_floor.records import rel_err
from dpviz.topics.whole_picture.run_batchnorm import BatchNormConfig, record_batchnorm

TOL = 1e-5


def quiet(**kwargs) -> BatchNormRun:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ranks may share cores; nothing here is timed
        return record_batchnorm(stall_timeout=120, **kwargs)


@pytest.fixture(scope="module")
def run():
    return quiet(k=2, b=8, steps=2)


def test_per_shard_statistics_miss_the_big_batch_gradient_and_shared_ones_hit_it(run):
    assert (run.local_rel_err() > 1e-2).all()        # each replica normalised with its own shard's statistics
    assert (run.synced_rel_err() <= TOL).all()       # the statistics all-reduced first
    lines = run.check()
    assert len(lines) == 3 and "missed" in lines[0] and "matched" in lines[1]


def test_each_rank_normalised_with_its_shards_mean_or_with_the_batchs(run):
    assert not np.allclose(run.shard_mean[:, 0], run.shard_mean[:, 1])                      # two shards, two means
    assert (rel_err(run.synced_mean, run.big_mean[:, None, :], axis=(1, 2)) <= TOL).all()   # one mean, the batch's
    half = run.shard_mean.mean(axis=1)  # equal shards: the batch's mean is the mean of the shard means
    assert np.allclose(half, run.big_mean, rtol=1e-5, atol=1e-6)


def test_the_ranks_stepped_with_the_shared_gradient_and_stayed_identical(run):
    assert (run.synced_reduced_grad == run.synced_reduced_grad[:, :1]).all()
    assert (run.params == run.params[:, :1]).all()
    stepped = run.params[:-1, 0] - run.meta["lr"] * run.synced_reduced_grad[:, 0]
    assert np.allclose(run.params[1:, 0], stepped, rtol=1e-6, atol=1e-7)


def test_on_one_rank_the_shard_is_the_batch_and_the_hand_written_norm_is_torchs():
    one = quiet(k=1, b=16, steps=1)
    assert (one.local_rel_err() == 0).all()          # torch's BatchNorm1d in the rank and in this process: same bits
    assert (one.synced_rel_err() <= TOL).all()       # the hand-written, all-reduced norm against torch's


def test_a_broken_claim_is_named(run):
    arrays = dict(run.arrays, synced_reduced_grad=run.reduced_grad)  # as if the statistics had not been shared
    with pytest.raises(AssertionError, match="all-reduced statistics"):
        BatchNormRun(run.meta, arrays).check()


def test_record_round_trip_and_a_missing_array_is_refused(run, tmp_path):
    path = run.save(tmp_path / "bn")
    back = load(path)
    assert isinstance(back, BatchNormRun) and back.describe() == run.describe()
    for name, value in run.arrays.items():
        assert np.array_equal(getattr(back, name), value), name
    arrays = dict(np.load(f"{path}.npz"))
    del arrays["synced_mean"]
    np.savez(f"{path}.npz", **arrays)
    header = json.loads(open(f"{path}.json").read())
    header.pop("npz_sha256")  # a hand-made pair: no digest binds it, so the missing array is what load names
    open(f"{path}.json", "w").write(json.dumps(header))
    with pytest.raises(ValueError, match="synced_mean"):
        load(path)


def test_description_comes_from_the_record(run):
    text = run.describe()
    for part in ("k=2", "b=8", f"{run.meta['n_params']} parameters", "2 steps", "gloo", run.meta["host"]):
        assert part in text


@pytest.mark.parametrize("kwargs, name", [(dict(k=0), "k"), (dict(b=1), "b"), (dict(lr=0), "lr"),
                                          (dict(steps=0), "steps"), (dict(width=0), "width")])
def test_bad_config_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BatchNormConfig(**kwargs)


def test_the_figures_draw_the_record(run):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpviz.topics.whole_picture.plots_batchnorm import plot_batchnorm_errors, plot_batchnorm_means

    fig, (left, right) = plt.subplots(1, 2)
    assert plot_batchnorm_means(run, ax=left, step=1) is left
    assert plot_batchnorm_errors(run, ax=right, note=False) is right
    bars = [p.get_height() for p in right.patches]
    assert np.allclose(bars[:run.steps], run.local_rel_err())  # coral: per-shard statistics
    assert len(right.texts) == 0 and len(left.texts) == 1      # one note naming the run
    with pytest.raises(ValueError, match="step"):
        plot_batchnorm_means(run, step=run.steps)
    plt.close(fig)
