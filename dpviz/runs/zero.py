"""Sharded optimizer state (ZeRO stage 1) beside plain data parallelism, in the same k ranks, with Adam.

    from dpviz.runs.zero import record_zero
    run = record_zero(k=2, steps=5)
    print(run.check())        # same parameters to rounding; each rank holds 1/k of Adam's state

Both trainings start from the same model and see the same batches (the data-parallel sharding
of :mod:`dpviz.runs.training`):

* plain: ``dist.all_reduce`` the flat gradient, divide by k, and let every rank step all P
  parameters with its own full Adam (two more P-long tensors, m and v);
* ZeRO-1: the first half of the hand-written ring, :func:`~dpviz.runs.collectives.ring_reduce_scatter`,
  leaves on rank r the summed gradient of one chunk only, chunk ``(r + 1) mod k``
  (:func:`~dpviz.runs.collectives.owned_chunk`). The rank divides it by k, steps *that chunk* of
  the parameters with an Adam whose m and v cover the chunk alone, and the second half of the
  ring, :func:`~dpviz.runs.collectives.ring_all_gather`, hands every rank every updated chunk.

The reduce-scatter is the ring's own first phase, so its bytes are counted as it runs: each rank
sends k-1 chunks, ``(k-1)/k · M`` bytes when the P parameters split evenly. (This gloo build also
offers ``dist.reduce_scatter``; the hand-written phase is used because it counts what it sends.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from dpviz.checks import check_int, check_real
from dpviz.records.zero import ZeroRun
from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.runs.collectives import owned_chunk, ring_all_gather, ring_reduce_scatter
from dpviz.runs.models import flat_grad, set_flat_grad
from dpviz.runs.training import TrainConfig, batch_indices, load_data, make_model, mse
from dpviz.runs.where import where_it_ran

ELEMENT_BYTES = 4  # float32


@dataclass
class ZeroConfig:
    k: int = 2                 # ranks
    b: int = 16                # examples per rank per step
    steps: int = 5             # optimizer steps
    width: int = 33            # hidden units; with d_in = 15 the MLP has 1,684 = 4 · 421 parameters, so k = 2 or 4 split it evenly
    depth: int = 2             # hidden layers
    d_in: int = 15             # input features
    lr: float = 0.01           # Adam's learning rate
    seed: int = 0              # seeds the data, the model and every batch draw
    dataset_size: int = 512    # examples in the data set
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=10_000)
        check_real("lr", self.lr, low=0, low_open=True)
        check_real("stall_timeout", self.stall_timeout, low=0, low_open=True)
        self.train_config()  # checks b, width, depth, d_in and dataset_size

    def train_config(self) -> TrainConfig:
        """The same run as a :class:`TrainConfig`, for its data, model and batch draws."""
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, optimizer="adam", lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)


def _bytes(tensors) -> int:
    return int(sum(t.numel() * t.element_size() for t in tensors))


def share_one_buffer(model: torch.nn.Module) -> torch.Tensor:
    """Move every parameter of ``model`` into one flat buffer (each becomes a view of it); return the buffer.

    Then a shard of the flat parameters is a view too: stepping it steps the model, with no copy.
    """
    flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    offset = 0
    for p in model.parameters():
        p.data = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


def zero_worker(rank: int, world_size: int, config: ZeroConfig) -> dict:
    """One rank: train plain data parallelism, then ZeRO-1, from the same start on the same batches."""
    k, train = world_size, config.train_config()
    x_all, y_all = load_data(train)
    start = rank * config.b
    batches = [batch_indices(train, step)[start:start + config.b] for step in range(config.steps)]
    out = {}

    # Plain data parallelism: the whole Adam on every rank.
    model = make_model(train)
    adam = optim.Adam(model.parameters(), lr=config.lr)
    params, losses = [torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy()], []
    for step, rows in enumerate(batches):
        model.zero_grad(set_to_none=False)
        loss = mse(model(x_all[rows]), y_all[rows])
        loss.backward()
        g = flat_grad(model)
        dist.all_reduce(g)
        g /= k
        set_flat_grad(model, g)
        adam.step()
        params.append(torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy())
        losses.append(loss.item())
        launcher.report_progress(step)
    out["dp"] = {"params": np.stack(params), "loss": np.array(losses, np.float32),
                 "memory": [_bytes(model.parameters()), _bytes(p.grad for p in model.parameters()), _bytes(adam.m + adam.v)]}

    # ZeRO-1: the same start; each rank keeps Adam's state for its own chunk of the flat parameters only.
    model = make_model(train)
    flat = share_one_buffer(model)
    chunk = owned_chunk(rank, k) if k > 1 else 0
    bounds = np.cumsum([0] + [len(c) for c in torch.tensor_split(flat, k)])
    lo, hi = int(bounds[chunk]), int(bounds[chunk + 1])
    shard = flat[lo:hi]  # a view: this rank's slice of θ, the only part it steps
    adam = optim.Adam([shard], lr=config.lr)  # so m and v are the shard's size
    params, losses, rs_bytes, ag_bytes = [flat.numpy().copy()], [], [], []
    for step, rows in enumerate(batches):
        model.zero_grad(set_to_none=False)
        loss = mse(model(x_all[rows]), y_all[rows])
        loss.backward()
        g = flat_grad(model)
        rs_bytes.append(ring_reduce_scatter(g))   # now g[lo:hi] is the sum over ranks; the rest are partial sums
        shard.grad = g[lo:hi] / k
        adam.step()                               # writes into flat[lo:hi]: the model's own parameters
        ag_bytes.append(ring_all_gather(flat))    # every rank's updated chunk to every rank, in place
        params.append(flat.numpy().copy())
        losses.append(loss.item())
        launcher.report_progress(config.steps + step)
    out["zero"] = {"params": np.stack(params), "loss": np.array(losses, np.float32),
                   "memory": [_bytes(model.parameters()), _bytes(p.grad for p in model.parameters()), _bytes(adam.m + adam.v)],
                   "rs_bytes": rs_bytes, "ag_bytes": ag_bytes, "shard": (lo, hi - lo)}
    out["threads"] = torch.get_num_threads()
    return out


def assemble(config: ZeroConfig, results: list[dict], backend: str) -> ZeroRun:
    arrays = {
        "params_dp": np.stack([r["dp"]["params"] for r in results], axis=1),
        "params_zero": np.stack([r["zero"]["params"] for r in results], axis=1),
        "loss_dp": np.stack([r["dp"]["loss"] for r in results], axis=1),
        "loss_zero": np.stack([r["zero"]["loss"] for r in results], axis=1),
        "shard_start": np.array([r["zero"]["shard"][0] for r in results], dtype=np.int64),
        "shard_size": np.array([r["zero"]["shard"][1] for r in results], dtype=np.int64),
        "memory_dp": np.array([r["dp"]["memory"] for r in results], dtype=np.int64),
        "memory_zero": np.array([r["zero"]["memory"] for r in results], dtype=np.int64),
        "rs_bytes": np.array([r["zero"]["rs_bytes"] for r in results], dtype=np.int64).T.copy(),
        "ag_bytes": np.array([r["zero"]["ag_bytes"] for r in results], dtype=np.int64).T.copy(),
    }
    meta = dict(
        k=config.k, b=config.b, steps=config.steps, width=config.width, depth=config.depth, d_in=config.d_in,
        n_params=int(arrays["params_dp"].shape[-1]), element_bytes=ELEMENT_BYTES, lr=config.lr, seed=config.seed,
        dataset_size=config.dataset_size,
        collectives="plain: dist.all_reduce; ZeRO-1: the hand-written ring's reduce-scatter, then its all-gather",
        **where_it_ran(ZeroRun, backend=backend, threads_per_rank=results[0]["threads"]),
    )
    return ZeroRun(meta, arrays)


def record_zero(config: ZeroConfig | None = None, **overrides) -> ZeroRun:
    """Launch k ranks, train both ways, and return the :class:`ZeroRun` record.

    ``record_zero(k=4, steps=5)``: keyword overrides build the config.
    """
    config = ZeroConfig(**{**(asdict(config) if config else {}), **overrides})
    results = launcher.launch(zero_worker, config.k, args=(config,), backend="gloo", threads=1,
                              stall_timeout=config.stall_timeout, total_steps=2 * config.steps)
    return assemble(config, results, "gloo")
