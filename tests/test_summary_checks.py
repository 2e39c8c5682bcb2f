"""verify_summary: every claim of the walkthrough asserted on one recorded run and its twin without the sync.

The runs are real: the shipped drift pair (k = 4, b = 8, 20 SGD steps, with and without the
all-reduce), recorded by dpviz.topics.one_group_per_device.run_shipped. Tampering with one number of a record makes the
claim that rests on it fail, by name.
"""

import numpy as np
import pytest

from dpviz.topics.ground_floor.records import Run
from dpviz.topics.one_group_per_device import shipped
from dpviz.topics.whole_picture.claims import verify_summary


@pytest.fixture(scope="module")
def pair():
    drift = shipped.drift_runs()
    return drift[("sgd", True)], drift[("sgd", False)]


def tampered(run, name, change):
    arrays = {key: value.copy() for key, value in run.arrays.items()}
    change(arrays[name])
    return Run(run.meta, arrays)


def test_every_claim_holds_on_the_shipped_pair(pair):
    run, alone = pair
    lines = verify_summary(run, alone)
    assert len(lines) == 8
    for chapter in ("chapter 01", "chapter 02", "chapter 03", "chapter 04", "chapter 05", "chapter 06"):
        assert any(chapter in line for line in lines), chapter
    assert any("without the all-reduce" in line for line in lines)
    assert f"{run.steps} steps" in lines[-2]


def test_without_the_twin_the_drift_claim_is_left_out(pair):
    lines = verify_summary(pair[0])
    assert len(lines) == 7
    assert not any("without the all-reduce" in line for line in lines)


def test_momentum_runs_skip_the_plain_sgd_update_claim():
    drift = shipped.drift_runs()
    lines = verify_summary(drift[("momentum", True)], drift[("momentum", False)])
    assert not any("θ ← θ − η ḡ" in line for line in lines)
    assert any("bit-identical" in line for line in lines)


def flip_one_rank(received):
    received[3, 1, 0] = np.nextafter(received[3, 1, 0], np.float32(0))  # one rank, one step, one last bit


@pytest.mark.parametrize("name, change, claim", [
    ("reduced_grad", flip_one_rank, "every rank received the same bits"),
    ("local_grad", lambda g: g.__setitem__((2, 0), g[2, 0] * 1.01), "mean of the slice gradients"),
    ("example_grad", lambda g: g.__setitem__((0, 0), g[0, 0] + 1.0), "mean of its examples' gradients"),
    ("batch_index", lambda rows: rows.__setitem__((1, 1), rows[1, 0]), "the slices do not overlap"),
    ("param_digest", lambda d: d.__setitem__((5, 2), b"0" * 40), "the replicas are bit-identical"),
    ("t_comm", lambda t: t.__setitem__((0, 0), 0.0), "the sync took time"),
])
def test_a_tampered_record_fails_the_claim_that_rests_on_it(pair, name, change, claim):
    with pytest.raises(AssertionError, match=claim):
        verify_summary(tampered(pair[0], name, change), pair[1])


def test_a_twin_from_another_start_fails(pair):
    run, alone = pair
    arrays = dict(alone.arrays, local_grad=alone.local_grad * 1.001)
    with pytest.raises(AssertionError, match="the twin's first gradients"):
        verify_summary(run, Run(alone.meta, arrays))


def test_a_twin_that_did_not_drift_fails(pair):
    run, alone = pair
    arrays = dict(alone.arrays, param_digest=run.param_digest)  # as if every replica had stayed the same
    with pytest.raises(AssertionError, match="differ after every step"):
        verify_summary(run, Run(alone.meta, arrays))


def test_bad_arguments_are_named(pair):
    run, alone = pair
    with pytest.raises(ValueError, match="alone must be the twin"):
        verify_summary(run, run)
    with pytest.raises(ValueError, match="run must be a line-model run with the all-reduce on"):
        verify_summary(alone)
    with pytest.raises(TypeError, match="run must be a Run"):
        verify_summary({"k": 4})
    smaller = shipped.grid_runs()[(2, 4)]  # all-reduce off, but k, b and steps are not the run's
    with pytest.raises(ValueError, match="alone must be the twin"):
        verify_summary(run, Run(dict(smaller.meta, all_reduce=False), smaller.arrays))
