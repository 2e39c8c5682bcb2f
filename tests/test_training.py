"""Real data-parallel runs (gloo on CPU processes) against what the notes claim."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from dpviz.engine.data import line_kind
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.ground_floor.run_training import TrainConfig, record_run, split_batch

TOL = 1e-5  # max relative error in float32 (DESIGN.md)


def quiet_run(**kwargs) -> Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k > cores: the oversubscription warning
        return record_run(steps=kwargs.pop("steps", 3), stall_timeout=120, **kwargs)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_all_reduced_gradient_equals_big_batch_gradient(k, no_leftover_processes):
    run = quiet_run(k=k, b=8)
    assert run.big_batch_rel_err().max() <= TOL
    # every rank received a bit-identical copy of the reduced gradient
    assert (run.reduced_grad == run.reduced_grad[:, :1]).all()
    # ranks saw different data, so their own gradients differ (k > 1)
    if k > 1:
        assert not np.allclose(run.local_grad[0, 0], run.local_grad[0, 1])
    # the record holds what the issue lists, with the right shapes
    assert run.local_grad.shape == run.reduced_grad.shape == (3, k, 2)
    assert run.t_compute.shape == run.t_comm.shape == (3, k) and (run.t_compute > 0).all()
    assert run.example_grad.shape == (3, 8 * k, 2)
    np.testing.assert_allclose(run.example_grad.mean(axis=1), run.big_grad, rtol=1e-5, atol=1e-6)
    for key in ("k", "b", "backend", "device", "model", "optimizer", "lr", "seed", "torch_version", "host", "cores", "date"):
        assert key in run.meta
    assert (run.KIND.name, run.KIND.version) == ("run", 2)  # the schema version lives in the record's header
    run.check()


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_replicas_stay_bit_identical_and_drift_without_all_reduce(optimizer, no_leftover_processes):
    synced = quiet_run(k=4, b=4, optimizer=optimizer, steps=4)
    assert synced.replicas_identical().all()
    assert (synced.params == synced.params[:, :1]).all()
    alone = quiet_run(k=4, b=4, optimizer=optimizer, steps=4, all_reduce=False)
    identical = alone.replicas_identical()
    assert identical[0]  # they all start from the same θ
    assert not identical[1:].any()  # and part ways at the first step


def test_unequal_shards_need_the_weighted_mean(no_leftover_processes):
    sizes = (3, 9, 20)
    weighted = quiet_run(k=3, shard_sizes=sizes, mean="weighted")
    plain = quiet_run(k=3, shard_sizes=sizes, mean="plain")
    assert weighted.big_batch_rel_err().max() <= TOL
    assert plain.big_batch_rel_err().min() > 1e-3
    assert list(weighted.shard_sizes) == list(sizes)


def test_biased_sampling_takes_one_kind_only(no_leftover_processes):
    run = quiet_run(k=1, b=16, sampling="biased", steps=1)
    assert (run.x[run.batch_index[0], 0] >= 0).all()


def test_by_kind_shards_are_one_kind_each_and_their_mean_is_the_big_batch_gradient(no_leftover_processes):
    """Each rank's shard holds one kind only (rank r: kind r % 2); the union is the global batch, and its gradient
    is still the all-reduced mean: a biased shard does not bias the average when the union is fair."""
    run = quiet_run(k=2, b=8, sampling="by_kind", steps=2)
    kinds = line_kind(run.x)
    for step in range(run.steps):
        rows = run.batch_index[step]
        assert len(np.unique(rows)) == len(rows) == 16
        for rank in range(run.k):
            assert (kinds[rows[run.example_rank == rank]] == rank % 2).all()
    assert run.big_batch_rel_err().max() <= TOL
    assert run.replicas_identical().all()


def test_mlp_run_checks_and_keeps_digests(no_leftover_processes):
    run = quiet_run(k=2, b=8, model="mlp", width=32, depth=2)
    assert run.meta["n_params"] == run.local_grad.shape[-1] > 1000
    assert run.check()


def test_save_and_load_round_trip(tmp_path, no_leftover_processes):
    run = quiet_run(k=2, b=4, steps=2)
    run.save(tmp_path / "r")
    back = Run.load(tmp_path / "r.npz")
    assert back.meta == run.meta
    for name, array in run.arrays.items():
        np.testing.assert_array_equal(back.arrays[name], array)
    # loadable with numpy and json alone
    with np.load(tmp_path / "r.npz", allow_pickle=False) as z:
        assert z["reduced_grad"].shape == run.reduced_grad.shape


def test_torchrun_records_the_same_claims(tmp_path, no_leftover_processes):
    out = tmp_path / "cluster"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "dpviz.topics.ground_floor.run_training", "--b", "4", "--steps", "2", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    run = Run.load(out)
    assert run.k == 2 and run.steps == 2
    assert "bit-identical" in run.check()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(k=0), "k"),
        (dict(k=4, global_batch=10), "global_batch"),
        (dict(k=2, b=0), "b"),
        (dict(backend="tcp"), "backend"),
        (dict(optimizer="lion"), "optimizer"),
        (dict(lr=-1.0), "lr"),
        (dict(k=2, shard_sizes=(1, 2, 3)), "shard_sizes"),
        (dict(model="mlp", sampling="biased"), "sampling"),
        (dict(model="mlp", sampling="by_kind"), "sampling"),
        (dict(sampling="kinds"), "sampling"),
    ],
)
def test_bad_config_names_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        TrainConfig(**kwargs)


def test_split_batch():
    assert split_batch(32, 4) == 8
    with pytest.raises(ValueError, match="global_batch must be a multiple of k=3"):
        split_batch(32, 3)


def test_nccl_without_gpus_is_refused():
    import torch

    with pytest.raises(ValueError, match="nccl"):
        record_run(k=torch.cuda.device_count() + 1, backend="nccl")
