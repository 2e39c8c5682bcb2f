"""The rank side of :mod:`dpviz.topics.bigger_batch.run_lr_sweep`: k ranks train every (multiplier, warm-up) run of a grid, in torch."""

from __future__ import annotations

import functools
import hashlib
import math
import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.data import line_data, teacher_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad, set_flat_grad, zero_grads
from dpviz.topics.bigger_batch import theory as lr_rules


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
    """One rank of a k-rank launch: train every run of ``runs`` ((multiplier, warm-up) pairs), side by side.

    ``twins`` maps a run's position to its twin's parameters at every k-th state (numpy, (steps+1, P));
    ``keep`` holds the positions whose whole parameter history rank 0 returns. Returns numpy only.

    The runs take their steps together: at step t every run still training computes its gradient on the same
    batch, and one all-reduce carries all of them, cut apart again after it. Each run's arithmetic is the one it
    would do alone, but a launch makes one all-reduce a step instead of one per run: on 2 cores with k = 4
    ranks, one all-reduce of a few kilobytes takes several milliseconds of waking ranks, longer than the
    steps themselves. Where a run's numbers fall in the joined gradient decides the order in which the ranks'
    values are summed, so the last bits of a k > 1 run can depend on which runs shared its launch.
    """
    k = world_size
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    x_all, y_all = (a.to(device) for a in load_data(config))
    steps = config.steps(k)
    scratch = make_model(config).to(device) if rank == 0 and k > 1 else None  # where rank 0 takes the small steps
    every = [_Run(config, multiplier, warmup, steps, device, twins.get(position), rank == 0 and position in keep)
             for position, (multiplier, warmup) in enumerate(runs)]
    training, done = list(every), 0
    for t in range(steps + 1):
        training = [run for run in training if run.observe(t, x_all, y_all, diverge_factor)]  # the same on every rank
        if not training:
            break
        rows = torch.from_numpy(stream_rows(config, k * t + rank)).to(device)
        x, y = x_all[rows], y_all[rows]
        grads = [run.gradient(x, y) for run in training]
        landings = [None] * len(training)
        if k > 1:
            joined = torch.cat(grads)
            # rank 0's k small steps (the step-gap comparison) start from θ, not from the averaged gradient:
            # they are taken while the all-reduce runs, so the other ranks go on instead of waiting for them
            pending = dist.all_reduce(joined, async_op=True)
            if scratch is not None:
                landings = [small_steps(scratch, run.theta, config, k, t, run.used[t] / k, x_all, y_all).double()
                            for run in training]
            pending.wait()
            joined /= k
            grads = joined.split([len(g) for g in grads])
        for run, mean, landing in zip(training, grads, landings):
            run.step(t, mean, landing)
        done += len(training)
        launcher.report_progress(done)
    name = "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device)
    return [run.result(name) for run in every]


class _Run:
    """One (multiplier, warm-up) run of a launch: its model and optimizer, and what it records at each step."""

    def __init__(self, config: LrGridConfig, multiplier: float, warmup: int, steps: int, device, twin, keep: bool):
        self.steps = steps
        self.lrs = lr_rules.warmup_schedule(config.base_lr * multiplier, steps, warmup)
        self.model = make_model(config).to(device)  # the same θ(0) in every run and every rank: built from the seed
        self.params = list(self.model.parameters())  # a step reads them a dozen times: the module tree is walked once
        self.optimizer = optim.SGD(self.params, lr=float(self.lrs[0]))
        self.twin = torch.from_numpy(twin).to(device).double() if twin is not None else None
        self.loss = np.full(steps + 1, np.nan, np.float32)
        self.length, self.gap = np.full(steps, np.nan, np.float32), np.full(steps, np.nan, np.float32)
        self.travel, self.twin_dist = np.full(steps + 1, np.nan, np.float32), np.full(steps + 1, np.nan, np.float32)
        self.used = np.full(steps, np.nan)
        self.history = [] if keep else None
        self.fingerprint = hashlib.sha1()
        self.theta = flat(self.params)
        self.theta0 = self.wide = self.theta.double()  # distances are taken in float64
        self.diverged_at = -1
        self.start, self.seconds = time.perf_counter(), math.nan

    def observe(self, t: int, x_all, y_all, diverge_factor: float) -> bool:
        """Record the state before step t (its loss on the whole data set, how far it has come); False once the
        run is over: every step taken, or diverged (a loss past ``diverge_factor`` times the first, or not a number)."""
        with torch.no_grad():
            self.loss[t] = mse(self.model(x_all), y_all).item()  # every rank: the same bits, so the same decision
        self.travel[t] = distance(self.wide, self.theta0)
        if self.twin is not None and t < len(self.twin):  # a twin that diverged stopped early
            self.twin_dist[t] = distance(self.wide, self.twin[t])
        if self.history is not None:
            self.history.append(self.theta.cpu().numpy().copy())
        if not math.isfinite(self.loss[t]) or self.loss[t] > diverge_factor * self.loss[0]:
            self.diverged_at, self.loss[t + 1:] = t, np.inf  # the loss that gave it away stays, when it is a number
            self.loss[t] = self.loss[t] if math.isfinite(self.loss[t]) else np.inf
        elif t < self.steps:
            self.used[t] = float(self.lrs[t])
            return True
        self.seconds = time.perf_counter() - self.start
        return False

    def gradient(self, x, y) -> torch.Tensor:
        """This run's gradient on the batch (x, y), in one vector."""
        zero_grads(self.params)
        mse(self.model(x), y).backward()
        return flat_grad(self.params)

    def step(self, t: int, g: torch.Tensor, landing) -> None:
        """Step t with the averaged gradient ``g``; ``landing``: where rank 0's k small steps ended (or None)."""
        set_flat_grad(self.params, g)
        self.optimizer.lr = self.used[t]
        self.optimizer.step()
        after = flat(self.params)
        after_wide = after.double()
        self.length[t] = distance(after_wide, self.wide)
        if landing is not None:
            self.gap[t] = distance(after_wide, landing)
        self.fingerprint.update(memoryview(after.cpu().numpy()).cast("B"))
        self.theta, self.wide = after, after_wide

    def result(self, device: str) -> dict:
        """What rank 0 returns for the run (every rank returns it; its digest shows whether the ranks agree)."""
        result = {
            "lr": self.used, "loss": self.loss, "step_length": self.length, "step_gap": self.gap,
            "travel": self.travel, "twin_distance": self.twin_dist, "diverged_at": self.diverged_at,
            "digest": self.fingerprint.hexdigest(), "seconds": self.seconds, "device": device,
        }
        if self.history is not None:
            result["params"] = np.stack(self.history)
        return result


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
