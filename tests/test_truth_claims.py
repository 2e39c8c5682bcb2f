"""The sentences chapters 05, 06 and 08 now print from their records: right on the real records, and following
records tampered to show something else (a correctness claim raises with the numbers; a timing sentence changes)."""

import numpy as np
import pytest

from dpviz.topics.all_reduce.claims import replicas_by_optimizer
from dpviz.topics.whole_picture.claims import corner_bar
from dpviz.topics.speedup_model.figure_records import load_inputs
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.one_group_per_device.shipped import drift_runs


def tampered(run, name, change):
    arrays = {key: value.copy() for key, value in run.arrays.items()}
    change(arrays[name])
    return Run(dict(run.meta), arrays)


@pytest.fixture(scope="module")
def drift():
    return drift_runs()


def test_replicas_by_optimizer_on_the_shipped_runs(drift):
    lines = replicas_by_optimizer(drift)
    assert lines[0].startswith("sgd") and "apart from state 1 on" in lines[0]
    assert "adam" in lines[2] and "apart from state 2 on" in lines[2]
    assert lines[3].startswith("adam parts 1 state(s) later") and "the same signs" in lines[3]


def test_replicas_by_optimizer_fails_on_a_synced_run_that_drifted(drift):
    def nudge(digest):
        digest[5, 1] = digest[5, 0][::-1]  # rank 1's parameter bytes after step 4 no longer rank 0's
    bad = {**drift, ("momentum", True): tampered(drift[("momentum", True)], "param_digest", nudge)}
    with pytest.raises(AssertionError, match="momentum with the all-reduce: .* identical at 20 of 21 states"):
        replicas_by_optimizer(bad)


def test_replicas_by_optimizer_fails_on_an_unsynced_run_that_agrees_again(drift):
    def rejoin(digest):
        digest[10:] = digest[10:, :1]  # from state 10 on, every replica the same bytes again
    bad = {**drift, ("sgd", False): tampered(drift[("sgd", False)], "param_digest", rejoin)}
    with pytest.raises(AssertionError, match="sgd without the all-reduce"):
        replicas_by_optimizer(bad)


def test_the_corner_bar_says_what_the_run_measured():
    run = load_inputs().synced
    says = corner_bar(run)
    assert "times as long as the compute" in says and "shared 2 cores" in says
    fast_sync = tampered(run, "t_comm", lambda t: t.__imul__(1e-3))
    assert "only" in corner_bar(fast_sync)
