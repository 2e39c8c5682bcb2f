"""The rank side of :mod:`dpviz.topics.splitting.run_zero`: plain data parallelism, then ZeRO-1, in each of k ranks, in torch."""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.all_reduce.rank_collectives import owned_chunk, ring_all_gather, ring_reduce_scatter
from dpviz.topics.ground_floor.rank_models import flat_grad, set_flat_grad
from dpviz.topics.ground_floor.rank_training import batch_indices, load_data, make_model, mse


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
