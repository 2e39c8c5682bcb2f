"""A recorded run holds, bit for bit, what the obvious recording loop holds (issue 21).

The rank worker keeps its steps cheap: each step only copies its parameters and gradients into
arrays allocated before the loop; digests, per-example gradients and the big-batch check are computed
from those copies after the loop. ``reference_worker`` below records the same run the obvious way,
everything inside the step it belongs to, and every array of the two records must have the same bytes
(the timings excepted). The workers live in this module so the ranks can import them.
"""

import warnings

import numpy as np
import pytest
import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor.rank_models import flat_grad, set_flat_grad
from dpviz.topics.ground_floor.model_sizes import FULL_PARAMS_LIMIT
from dpviz.topics.ground_floor import rank_training as rank_side
from dpviz.topics.ground_floor.rank_training import (
    batch_indices, big_batch, digest, load_data, make_model, make_optimizer, model_at, mse, per_example_grads,
)
from dpviz.topics.ground_floor.run_training import TrainConfig, assemble, record_run

TIMED = ("t_compute", "t_comm", "loop_seconds")  # differ from run to run; only their shapes must agree


def reference_worker(rank: int, world_size: int, config: TrainConfig) -> dict:
    """The recording loop written the obvious way (on CPU): every digest and per-example gradient inside its step."""
    x_all, y_all = load_data(config)
    model = make_model(config)
    optimizer = make_optimizer(config, model.parameters())
    sizes, start = config.sizes, sum(config.sizes[:rank])

    def flat_params():
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()

    params, digests, local, reduced, losses, example_grads, batches = [], [], [], [], [], [], []
    for step in range(config.steps):
        params.append(flat_params().copy())
        digests.append(digest(model.parameters()))
        batches.append(batch_indices(config, step))
        rows = batches[-1][start:start + sizes[rank]]
        model.zero_grad(set_to_none=False)
        loss = mse(model(x_all[rows]), y_all[rows])
        loss.backward()
        g = flat_grad(model)
        local.append(g.numpy().copy())
        if config.all_reduce:
            if config.mean == "weighted":
                g = g * sizes[rank]
            dist.all_reduce(g)
            g /= sum(sizes) if config.mean == "weighted" else world_size
        set_flat_grad(model, g)
        optimizer.step()
        reduced.append(g.numpy().copy())
        losses.append(loss.item())
        if config.model == "line":
            example_grads.append(per_example_grads(model_at(params[step], config), x_all[rows], y_all[rows]).numpy())
    params.append(flat_params().copy())
    digests.append(digest(model.parameters()))
    steps = config.steps
    out = {
        "local_grad": np.stack(local), "reduced_grad": np.stack(reduced), "loss": np.array(losses, np.float32),
        "t_compute": np.zeros(steps), "t_comm": np.zeros(steps), "loop_seconds": 0.0,
        "param_digest": np.array(digests, dtype="S40"), "threads": torch.get_num_threads(), "device": "cpu",
    }
    if len(params[0]) <= FULL_PARAMS_LIMIT or rank == 0:
        out["params"] = np.stack(params)
    if example_grads:
        out["example_grad"] = np.stack(example_grads)
    if rank == 0:
        big = [big_batch(config, params[step], x_all[rows], y_all[rows]) for step, rows in enumerate(batches)]
        out["big_grad"] = np.stack([g for g, _ in big])
        out["big_loss"] = np.array([loss for _, loss in big], dtype=np.float32)
        out["batch_index"] = np.stack([rows.numpy() for rows in batches])
    return out


def hashing_in_loop_worker(rank: int, world_size: int, config: TrainConfig) -> dict:
    """The rank worker made to take the path of a rank whose parameters do not fit: it hashes them inside each step."""
    rank_side.DEFERRED_DIGEST_BYTES = 0  # this rank process only
    return rank_side.train_worker(rank, world_size, config)


def assert_same_arrays(run, reference):
    assert sorted(run.arrays) == sorted(reference.arrays)
    for name, value in reference.arrays.items():
        got = run.arrays[name]
        assert got.shape == value.shape, name
        if name not in TIMED:
            assert got.dtype == value.dtype and got.tobytes() == value.tobytes(), f"{name} differs"


CONFIGS = {
    "line, k=3, unequal shards, adam, weighted mean": dict(k=3, b=4, steps=3, optimizer="adam", mean="weighted",
                                                          shard_sizes=(3, 5, 4)),
    "line, k=2, no all-reduce (drift)": dict(k=2, b=8, steps=3, all_reduce=False),
    "mlp, k=2, momentum, every rank's parameters kept": dict(k=2, b=16, steps=3, model="mlp", width=32, optimizer="momentum"),
    "mlp, k=2, past FULL_PARAMS_LIMIT: rank 1 keeps digests only": dict(k=2, b=8, steps=3, model="mlp", width=160),
}


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_record_holds_what_the_obvious_loop_holds(overrides, no_leftover_processes):
    config = TrainConfig(stall_timeout=120, **overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k > cores: the oversubscription warning
        reference = assemble(config, launcher.launch(reference_worker, config.k, args=(config,)), "gloo")
        run = record_run(config)
    assert_same_arrays(run, reference)
    if config.n_params() > FULL_PARAMS_LIMIT:
        assert "params" not in run.arrays  # the record stays as small as before
    run.check()


def test_a_rank_that_hashes_inside_its_steps_records_the_same_bits(no_leftover_processes):
    config = TrainConfig(k=2, b=8, steps=3, model="mlp", width=160, stall_timeout=120)
    run = record_run(config)
    in_loop = assemble(config, launcher.launch(hashing_in_loop_worker, config.k, args=(config,)), "gloo")
    assert_same_arrays(in_loop, run)
