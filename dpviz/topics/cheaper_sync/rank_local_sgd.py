"""The rank side of :mod:`dpviz.topics.cheaper_sync.run_local_sgd`: plain data parallelism, local SGD by hand, and torch's
``PeriodicModelAverager``, each from θ0 on the same batches, in torch.

Each step of plain data parallelism and of the hand-written local SGD is timed: forward, backward and the sync
(the gradient's all-reduce, or the parameters' average after the step that ends a period), the SGD update and
the copies kept for the record left out, as in :mod:`dpviz.topics.cheaper_sync.rank_compression`. The all-reduce itself is
also timed alone."""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import flat_grad, set_flat_grad
from dpviz.topics.ground_floor.rank_training import batch_indices, load_data, make_model, mse


def _flat(model) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach()


def average_parameters(model) -> float:
    """θ ← (1/k) Σ_r θ_r: one all-reduce of the flat parameters, the whole of local SGD's communication.

    Returns the seconds the all-reduce took."""
    flat = _flat(model).clone()
    t0 = time.perf_counter()
    dist.all_reduce(flat)
    seconds = time.perf_counter() - t0
    flat /= dist.get_world_size()
    torch.nn.utils.vector_to_parameters(flat, model.parameters())
    return seconds


class _History:
    """A training's parameters before each step and after the last (after any average), the parameters each
    local step left before that step's average, the losses, and each step's times and whether it averaged."""

    def __init__(self, model, steps: int):
        n = sum(p.numel() for p in model.parameters())
        self.params = np.zeros((steps + 1, n), np.float32)
        self.before_average = np.zeros((steps, n), np.float32)
        self.loss = np.zeros(steps, np.float32)
        self.seconds = np.zeros(steps)       # forward, backward and sync
        self.sync_seconds = np.zeros(steps)  # the all-reduce alone (0: none this step)
        self.averaged = np.zeros(steps, bool)
        self.params[0] = _flat(model).numpy()


def _train(config, batches, x_all, y_all, *, period: int | None, how: str, progress) -> _History:
    """SGD from θ0 on ``batches``: ``how`` = "dp" averages gradients every step; "hand" averages parameters after
    every ``period`` local steps with :func:`average_parameters`; "torch" lets ``PeriodicModelAverager`` do it."""
    model = make_model(config.train_config())
    sgd = optim.SGD(model.parameters(), lr=config.lr)
    history = _History(model, len(batches))
    averager = None
    if how == "torch":
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # period 1 warns that DDP would do; here it is the H = 1 oracle
            # warmup_steps = H − 1: its first average comes after the H-th step, as in the hand-written loop
            averager = PeriodicModelAverager(period=period, warmup_steps=period - 1)
    for step, rows in enumerate(batches):
        model.zero_grad(set_to_none=False)
        t0 = time.perf_counter()
        loss = mse(model(x_all[rows]), y_all[rows])
        loss.backward()
        if how == "dp":
            g = flat_grad(model)
            t_sent = time.perf_counter()
            dist.all_reduce(g)
            history.sync_seconds[step] = time.perf_counter() - t_sent
            g /= dist.get_world_size()
            set_flat_grad(model, g)
        t1 = time.perf_counter()
        sgd.step()
        history.before_average[step] = _flat(model).numpy()
        t2 = time.perf_counter()
        if how == "hand" and (step + 1) % period == 0:
            history.sync_seconds[step] = average_parameters(model)
            history.averaged[step] = True
        elif how == "torch":
            averager.average_parameters(model.parameters())
        history.seconds[step] = (t1 - t0) + (time.perf_counter() - t2)
        history.params[step + 1] = _flat(model).numpy()
        history.loss[step] = loss.item()
        progress()
    return history


def local_sgd_worker(rank: int, world_size: int, config) -> dict:
    """One rank: plain data parallelism, then for each H local SGD by hand and by torch's averager."""
    train = config.train_config()
    x_all, y_all = load_data(train)
    start = rank * config.b
    batches = [batch_indices(train, step)[start:start + config.b] for step in range(config.steps)]
    done = iter(range(1 << 30))

    def progress():
        launcher.report_progress(next(done))

    dp = _train(config, batches, x_all, y_all, period=None, how="dp", progress=progress)
    hand = [_train(config, batches, x_all, y_all, period=H, how="hand", progress=progress) for H in config.periods]
    oracle = [_train(config, batches, x_all, y_all, period=H, how="torch", progress=progress) if config.oracle else None
              for H in config.periods]
    out = {
        "params_dp": dp.params, "loss_dp": dp.loss, "t_step_dp": dp.seconds, "t_sync_dp": dp.sync_seconds,
        "params_local": np.stack([h.params for h in hand]),
        "before_average": np.stack([h.before_average for h in hand]),
        "loss_local": np.stack([h.loss for h in hand]),
        "t_step_local": np.stack([h.seconds for h in hand]),
        "t_sync_local": np.stack([h.sync_seconds for h in hand]),
        "averaged": np.stack([h.averaged for h in hand]),
        "threads": torch.get_num_threads(),
    }
    if config.oracle:
        out["params_torch"] = np.stack([h.params for h in oracle])
    return out
