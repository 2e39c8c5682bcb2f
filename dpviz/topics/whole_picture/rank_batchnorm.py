"""The rank side of :mod:`dpviz.topics.whole_picture.run_batchnorm`: each rank's gradient with its own batch statistics and with
all-reduced ones, in torch.

Rank 0 also computes, after the loop, the gradient of each whole global batch through one BatchNorm1d on a
fresh model (:func:`big_batch`): the reference both ways are compared with.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from dpviz.engine.data import teacher_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import flat_grad, set_flat_grad


def build_model(config: BatchNormConfig) -> nn.Sequential:
    """Linear → BatchNorm1d → tanh → Linear; the same seed gives bit-identical parameters in every process."""
    torch.manual_seed(config.seed)
    return nn.Sequential(nn.Linear(config.d_in, config.width), nn.BatchNorm1d(config.width), nn.Tanh(),
                         nn.Linear(config.width, 1))



class AllReduceSum(torch.autograd.Function):
    """Sum a tensor over all ranks; the backward pass sums the incoming gradients over all ranks the same way.

    Rank i's loss depends on every shard's activations through the shared sum, so the gradient
    of that sum must reach every shard: the sum over ranks of d(loss_i)/d(sum) is what each
    rank's own contribution to the sum receives.
    """

    @staticmethod
    def forward(ctx, tensor):
        total = tensor.clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad):
        total = grad.clone()
        dist.all_reduce(total)
        return total



def synced_batch_norm(h: torch.Tensor, bn: nn.BatchNorm1d, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalise ``h`` (n, H) with the mean and biased variance of all ranks' ``h`` together (``total`` rows).

    Two all-reduces, as BatchNorm1d computes its statistics in two passes: the mean, then the
    mean squared distance from it. Returns the normalised, scaled and shifted output and the mean.
    """
    mean = AllReduceSum.apply(h.sum(dim=0)) / total  # (H,)
    centred = h - mean
    var = AllReduceSum.apply((centred * centred).sum(dim=0)) / total  # (H,) biased, as batch norm uses in training
    return centred / torch.sqrt(var + bn.eps) * bn.weight + bn.bias, mean



def forward(model: nn.Sequential, x: torch.Tensor, *, total: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The network's output and the mean its batch norm normalised with: the shard's own, or with ``total`` all ranks'."""
    linear, bn, act, head = model
    h = linear(x)
    if total is None:
        z, mean = bn(h), h.mean(dim=0)  # BatchNorm1d in training mode: this batch's statistics
    else:
        z, mean = synced_batch_norm(h, bn, total)
    return head(act(z)), mean.detach()



def batch_indices(config: BatchNormConfig, step: int) -> torch.Tensor:
    """Rows of the global batch of ``step``: a seeded random draw of k·b rows, the same in every rank."""
    gen = torch.Generator().manual_seed(config.seed * 100_003 + step)
    return torch.randperm(config.dataset_size, generator=gen)[: config.k * config.b]



def mse(pred, target):
    return torch.mean((pred - target) ** 2)



def load_data(config: BatchNormConfig) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = teacher_data(config.dataset_size, config.d_in, seed=config.seed)
    return torch.from_numpy(x), torch.from_numpy(y)



def batchnorm_worker(rank: int, world_size: int, config: BatchNormConfig) -> dict:
    """One rank: at every step its gradient with its own statistics and with all-reduced ones, both all-reduced.
    Rank 0 adds the big-batch reference: each global batch's gradient and batch mean, and the layer's eps."""
    x_all, y_all = load_data(config)
    model = build_model(config)
    optimizer = optim.SGD(model.parameters(), lr=config.lr)
    total = world_size * config.b
    n_params = sum(p.numel() for p in model.parameters())
    out = {name: np.zeros((config.steps, n_params), np.float32)
           for name in ("local_grad", "reduced_grad", "synced_local_grad", "synced_reduced_grad")}
    out["shard_mean"] = np.zeros((config.steps, config.width), np.float32)
    out["synced_mean"] = np.zeros((config.steps, config.width), np.float32)
    params = np.zeros((config.steps + 1, n_params), np.float32)

    def mean_over_ranks(g):
        g = g.clone()
        dist.all_reduce(g)
        return g / world_size

    for step in range(config.steps):
        params[step] = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
        rows = batch_indices(config, step)[rank * config.b:(rank + 1) * config.b]
        x, y = x_all[rows], y_all[rows]

        model.zero_grad(set_to_none=False)
        pred, out["shard_mean"][step] = forward(model, x)  # what each replica's BatchNorm1d does on its own
        mse(pred, y).backward()
        g = flat_grad(model)
        out["local_grad"][step], out["reduced_grad"][step] = g.numpy(), mean_over_ranks(g).numpy()

        model.zero_grad(set_to_none=False)
        pred, out["synced_mean"][step] = forward(model, x, total=total)  # statistics of the whole global batch
        mse(pred, y).backward()
        g = flat_grad(model)
        reduced = mean_over_ranks(g)
        out["synced_local_grad"][step], out["synced_reduced_grad"][step] = g.numpy(), reduced.numpy()

        set_flat_grad(model, reduced)
        optimizer.step()
        launcher.report_progress(step)
    params[config.steps] = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
    out["params"] = params
    out["threads"] = torch.get_num_threads()
    if rank == 0:
        batches = [batch_indices(config, step) for step in range(config.steps)]
        big = []
        for step, rows in enumerate(batches):  # work after the loop: each step reported, so it is not a stall
            big.append(big_batch(config, params[step], x_all[rows], y_all[rows]))
            launcher.report_progress()
        out["big_grad"] = np.stack([g for g, _ in big])
        out["big_mean"] = np.stack([m for _, m in big])
        out["batch_index"] = np.stack([rows.numpy() for rows in batches])
        out["eps"] = float(model[1].eps)
    return out



def big_batch(config: BatchNormConfig, flat: np.ndarray, x: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of one global batch (x, y) at parameters ``flat``, one BatchNorm1d over all of it; and its mean."""
    model = build_model(config)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(flat), model.parameters())
    pred, mean = forward(model, x)
    mse(pred, y).backward()
    return flat_grad(model).numpy().copy(), mean.numpy()
