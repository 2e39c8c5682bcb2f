"""The rank side of :mod:`dpviz.runs.lr_sweep`: k ranks train every (multiplier, warm-up) run of a grid, in torch."""

from __future__ import annotations

import functools
import hashlib
import math
import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.data import line_data, teacher_data
from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.runs.models import build_model, flat_grad, set_flat_grad, zero_grads
from dpviz.theory import lr_rules


def stream_rows(config: LrGridConfig, j: int) -> np.ndarray:
    """Rows of small batch ``j`` of the run's stream: the data set shuffled once per epoch, cut into batches of b."""
    per_epoch = config.dataset_size // config.b
    epoch, position = divmod(j, per_epoch)
    return epoch_order(config.seed, epoch, config.dataset_size)[position * config.b:(position + 1) * config.b].copy()


@functools.lru_cache(maxsize=4)
def epoch_order(seed: int, epoch: int, dataset_size: int) -> np.ndarray:
    """The data set's order in one epoch of the stream: shuffled once, not once per batch (a step asks up to k + 1 times)."""
    order = np.random.default_rng([seed, epoch]).permutation(dataset_size)
    order.flags.writeable = False
    return order


def load_data(config: LrGridConfig) -> tuple[torch.Tensor, torch.Tensor]:
    if config.model == "line":
        x, y = line_data(config.dataset_size, seed=config.seed)
    else:
        x, y = teacher_data(config.dataset_size, config.d_in, seed=config.seed)
    return torch.from_numpy(x), torch.from_numpy(y)



def make_model(config: LrGridConfig) -> torch.nn.Module:
    return build_model(config.model, d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)



def mse(pred, target):
    return torch.mean((pred - target) ** 2)



def flat(params: list) -> torch.Tensor:
    """The parameters in one 1-D vector (a copy)."""
    return torch.cat([p.detach().reshape(-1) for p in params])



def distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """|a − b| of two float64 vectors (the float32 states widened once each, where they are made)."""
    return float(torch.linalg.vector_norm(a - b))



def lr_worker(rank: int, world_size: int, config: LrGridConfig, runs: list, twins: dict, keep: set,
              diverge_factor: float) -> list[dict]:
    """One rank of a k-rank launch: train every run of ``runs`` ((multiplier, warm-up) pairs) in turn.

    ``twins`` maps a run's position to its twin's parameters at every k-th state (numpy, (steps+1, P));
    ``keep`` holds the positions whose whole parameter history rank 0 returns. Returns numpy only.
    """
    k = world_size
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    x_all, y_all = (a.to(device) for a in load_data(config))
    steps = config.steps(k)
    scratch = make_model(config).to(device) if rank == 0 and k > 1 else None  # where rank 0 takes the small steps
    done = 0
    out = []
    for position, (multiplier, warmup) in enumerate(runs):
        lrs = lr_rules.warmup_schedule(config.base_lr * multiplier, steps, warmup)
        model = make_model(config).to(device)  # the same θ(0) in every run and every rank: built from the seed
        params = list(model.parameters())  # a step reads them a dozen times: the module tree is walked once
        optimizer = optim.SGD(params, lr=float(lrs[0]))
        twin = torch.from_numpy(twins[position]).to(device).double() if position in twins else None
        loss = np.full(steps + 1, np.nan, np.float32)
        length, gap = np.full(steps, np.nan, np.float32), np.full(steps, np.nan, np.float32)
        travel, twin_dist = np.full(steps + 1, np.nan, np.float32), np.full(steps + 1, np.nan, np.float32)
        used = np.full(steps, np.nan)
        history = [] if rank == 0 and position in keep else None
        fingerprint = hashlib.sha1()
        theta = flat(params)
        theta0 = wide = theta.double()  # distances are taken in float64
        diverged_at = -1
        start = time.perf_counter()
        for t in range(steps + 1):
            with torch.no_grad():
                loss[t] = mse(model(x_all), y_all).item()  # every rank: the same bits, so the same decision below
            travel[t] = distance(wide, theta0)
            if twin is not None and t < len(twin):  # a twin that diverged stopped early
                twin_dist[t] = distance(wide, twin[t])
            if history is not None:
                history.append(theta.cpu().numpy().copy())
            if not math.isfinite(loss[t]) or loss[t] > diverge_factor * loss[0]:
                diverged_at, loss[t + 1:] = t, np.inf  # the loss that gave it away stays, when it is a number
                loss[t] = loss[t] if math.isfinite(loss[t]) else np.inf
                break
            if t == steps:
                break
            rows = torch.from_numpy(stream_rows(config, k * t + rank)).to(device)
            zero_grads(params)
            mse(model(x_all[rows]), y_all[rows]).backward()
            g = flat_grad(params)
            used[t] = float(lrs[t])
            landing = None
            if k > 1:
                # rank 0's k small steps (the step-gap comparison) start from θ, not from the averaged gradient:
                # they are taken while the all-reduce runs, so the other ranks go on instead of waiting for them
                pending = dist.all_reduce(g, async_op=True)
                if scratch is not None:
                    landing = small_steps(scratch, theta, config, k, t, used[t] / k, x_all, y_all).double()
                pending.wait()
                g /= k
            set_flat_grad(params, g)
            optimizer.lr = used[t]
            optimizer.step()
            after = flat(params)
            after_wide = after.double()
            length[t] = distance(after_wide, wide)
            if landing is not None:
                gap[t] = distance(after_wide, landing)
            fingerprint.update(memoryview(after.cpu().numpy()).cast("B"))
            theta, wide = after, after_wide
            done += 1
            launcher.report_progress(done)
        result = {
            "lr": used, "loss": loss, "step_length": length, "step_gap": gap, "travel": travel,
            "twin_distance": twin_dist, "diverged_at": diverged_at, "digest": fingerprint.hexdigest(),
            "seconds": time.perf_counter() - start, "device": "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device),
        }
        if history is not None:
            result["params"] = np.stack(history)
        out.append(result)
    return out



def small_steps(scratch, theta, config, k, t, lr, x_all, y_all) -> torch.Tensor:
    """Where k plain steps of ``lr`` land from θ = ``theta``, taking the k shards of step t one after another."""
    params = list(scratch.parameters())
    torch.nn.utils.vector_to_parameters(theta.clone(), params)
    for i in range(k):
        rows = torch.from_numpy(stream_rows(config, k * t + i)).to(theta.device)
        zero_grads(params)
        mse(scratch(x_all[rows]), y_all[rows]).backward()
        with torch.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-lr)
    return flat(params)
