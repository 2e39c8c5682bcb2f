"""The launcher: results in rank order, failing and hung ranks named, every child reaped."""

import _thread
import threading
import time
import warnings

import pytest
import torch.multiprocessing as mp

import _workers
from dpviz.runs import launch as launcher
from dpviz.runs.launch import RankError, RankTimeout, launch


@pytest.mark.parametrize("k", [1, 2, 4])
def test_results_come_back_in_rank_order(k, no_leftover_processes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = launch(_workers.sum_ranks, k)
    assert [r["rank"] for r in results] == list(range(k))
    assert all(r["sum"] == k * (k + 1) / 2 for r in results)
    assert all(r["threads"] == launcher.threads_per_rank(k) for r in results)


def test_global_start_method_is_left_alone(no_leftover_processes):
    before = mp.get_start_method(allow_none=True)
    launch(_workers.sum_ranks, 1)
    launch(_workers.sum_ranks, 1)  # a re-run of the same cell works
    assert mp.get_start_method(allow_none=True) == before


def test_more_ranks_than_cores_warns(no_leftover_processes):
    k = launcher.cpu_count() + 1
    with pytest.warns(UserWarning, match="oversubscription"):
        launch(_workers.sum_ranks, k)


def test_failing_rank_is_named_with_its_traceback(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankError, match="rank 1 failed") as info:
        launch(_workers.fail_on_rank, 3, args=(1,), timeout=60)
    assert info.value.rank == 1
    assert "deliberate failure in rank 1" in info.value.rank_traceback
    assert "fail_on_rank" in info.value.rank_traceback
    assert time.monotonic() - start < 30


def test_hung_rank_ends_at_the_timeout(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankTimeout, match="rank 2 stalled: no progress for 12 s, stuck before its first step") as info:
        launch(_workers.hang_on_rank, 3, args=(2,), timeout=12)
    assert info.value.ranks == [2]
    assert time.monotonic() - start < 12 + 10


def test_keyboard_interrupt_reaps_every_rank(no_leftover_processes):
    timer = threading.Timer(8.0, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            launch(_workers.hang_on_rank, 2, args=(0,), timeout=120)
    finally:
        timer.cancel()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(k=0), "k"),
        (dict(k=2, backend="mpi"), "backend"),
        (dict(k=2, timeout=0), "timeout"),
        (dict(k=2, threads=0), "threads"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name, no_leftover_processes):
    with pytest.raises((ValueError, TypeError), match=name) as info:
        launch(_workers.sum_ranks, **kwargs)
    assert str(info.value).count(". ") == 0  # one sentence


def test_nccl_without_a_gpu_per_rank_is_refused():
    import torch

    k = torch.cuda.device_count() + 1
    with pytest.raises(ValueError, match="nccl.*one GPU per rank"):
        launch(_workers.sum_ranks, k, backend="nccl")
