"""The rank side of :mod:`dpviz.topics.when_a_replica_fails.run_diloco`: plain data parallelism, local SGD and
DiLoCo from the same θ0 on the same batches, in torch.

DiLoCo (Douillard et al., 2023) keeps a global θ. Each rank takes H inner SGD steps from it on its own shard; then
one all-reduce averages the ranks' parameters, θ̄, and the outer gradient is Δ = θ − θ̄ (how far the average moved,
with a sign that makes it a gradient). The outer optimizer is SGD with Nesterov momentum μ, torch.optim.SGD's
arithmetic: v ← μ v + Δ (v starts as the first Δ), θ ← θ − η_out (Δ + μ v). Every rank then starts the next H
steps from the new θ. With η_out = 1 and μ = 0 that is local SGD: θ − (θ − θ̄) = θ̄.

Streaming DiLoCo (Douillard et al., 2025) cuts θ into F fragments (here F nearly equal slices of the flat vector)
and syncs one fragment every H/F steps, fragment f first after (f + 1)·H/F steps, each with its own outer state:
every fragment still syncs once per H steps, the bytes per step are the same, and the largest message is 1/F of
θ. Between its syncs a fragment's replicas drift, so the ranks never all hold one θ; the whole data set's loss is
rank 0's.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad, set_flat_grad
from dpviz.topics.ground_floor.rank_training import batch_indices, load_data, mse


def _flat(model) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def _set(model, flat: torch.Tensor) -> None:
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(flat, model.parameters())


def _train(config, how: str, batches, x_all, y_all, progress) -> dict:
    """``how``: "dp" all-reduces the gradient every step; "local" averages θ every H steps; "diloco" takes an outer
    Nesterov step on the averaged change every H steps."""
    model = build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)
    inner = optim.SGD(model.parameters(), lr=config.lr)
    k = dist.get_world_size()
    outer_theta = _flat(model)
    velocity = None
    syncs, before, after, loss, full, fragment = [], [], [], [], [], []
    sent = 0  # bytes this rank all-reduced
    F = config.fragments
    edges = np.linspace(0, outer_theta.numel(), F + 1).round().astype(int)
    velocities = [None] * F
    for step, rows in enumerate(batches):
        model.zero_grad(set_to_none=False)
        batch_loss = mse(model(x_all[rows]), y_all[rows])
        batch_loss.backward()
        if how == "dp":
            g = flat_grad(model)
            dist.all_reduce(g)
            sent += 4 * g.numel()
            set_flat_grad(model, g / k)
        inner.step()
        loss.append(batch_loss.item())
        if how == "streaming" and (step + 1) % (config.H // F) == 0:
            f = ((step + 1) // (config.H // F) - 1) % F
            lo, hi = int(edges[f]), int(edges[f + 1])
            mine = _flat(model)
            before.append(mine.numpy().copy())
            mean = mine[lo:hi].clone()
            dist.all_reduce(mean)
            sent += 4 * mean.numel()
            mean /= k
            delta = outer_theta[lo:hi] - mean
            v = velocities[f] = delta.clone() if velocities[f] is None else \
                velocities[f].mul_(config.outer_momentum).add_(delta)
            outer_theta[lo:hi] = outer_theta[lo:hi] - config.outer_lr * (delta + config.outer_momentum * v)
            mine[lo:hi] = outer_theta[lo:hi]
            _set(model, mine)
            syncs.append(step)
            fragment.append(f)
            after.append(mine.numpy().copy())
        if how in ("local", "diloco") and (step + 1) % config.H == 0:
            mine = _flat(model)
            before.append(mine.numpy().copy())
            mean = mine.clone()
            dist.all_reduce(mean)
            sent += 4 * mean.numel()
            mean /= k
            if how == "local":
                new = mean
            else:
                delta = outer_theta - mean  # the outer gradient
                velocity = delta.clone() if velocity is None else velocity.mul_(config.outer_momentum).add_(delta)
                new = outer_theta - config.outer_lr * (delta + config.outer_momentum * velocity)
            outer_theta = new.clone()
            _set(model, new)
            syncs.append(step)
            after.append(new.numpy().copy())
        if (step + 1) % config.H == 0:
            with torch.no_grad():  # the whole data set's loss at the synced θ (every rank holds the same one)
                full.append(mse(model(x_all), y_all).item())
        progress(step)
    return {"loss": np.asarray(loss, np.float32), "full_loss": np.asarray(full, np.float32),
            "before": np.asarray(before, np.float32), "after": np.asarray(after, np.float32),
            "syncs": np.asarray(syncs, np.int64), "fragment": np.asarray(fragment, np.int64),
            "edges": edges, "sent": sent}


def diloco_worker(rank: int, world_size: int, config) -> dict:
    """One rank: plain DP, local SGD, DiLoCo and streaming DiLoCo, on the same shard of the same batches."""
    train = config.train_config()
    x_all, y_all = load_data(train)
    start = rank * config.b
    batches = [batch_indices(train, step)[start:start + config.b] for step in range(config.steps)]
    theta0 = _flat(build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed))
    done = iter(range(1 << 30))
    out = {how: _train(config, how, batches, x_all, y_all, lambda step: launcher.report_progress(next(done)))
           for how in ("dp", "local", "diloco", "streaming")}
    out["theta0"] = theta0.numpy()
    return out
