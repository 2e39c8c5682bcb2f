"""The rank side of :mod:`dpviz.topics.cheaper_sync.run_compression`: DDP with a compressing comm hook, mode by mode, in torch.

Every mode trains its own DistributedDataParallel copy of the MLP from θ0 on the same batches. Its comm
hook is wrapped twice over:

* before the real hook runs, the wrapper copies the bucket (this rank's own gradient, untouched) and
  all-reduces the copy exactly, so each step knows the average the compressed one stands for; that
  all-reduce of the whole uncompressed gradient is timed on its own (the machine's T_comm for M bytes)
  and left out of the step's time;
* while the real hook and its callbacks run, ``torch.distributed.all_reduce`` is replaced in this process
  by :class:`_CountingAllReduce`, which adds up the bytes of every tensor handed to it: what the hook
  actually put on the wire (fp16 casts, PowerSGD's P and Q factors and its uncompressed tensors).
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import flat_grad
from dpviz.topics.waiting.rank_overlap import _digest
from dpviz.topics.ground_floor.rank_training import batch_indices, load_data, make_model, mse

_REAL_ALL_REDUCE = dist.all_reduce


class _CountingAllReduce:
    """``dist.all_reduce`` that counts the bytes and calls handed to it while ``on``; installed for the run.

    The hooks look ``dist.all_reduce`` up when they call it (in the backward pass and in their futures'
    callbacks, on gloo's thread), so replacing the module's attribute sees every tensor they send.
    """

    def __init__(self):
        self.on, self.bytes, self.calls = False, 0, 0

    def __call__(self, tensor, *args, **kwargs):
        if self.on:
            self.bytes += tensor.numel() * tensor.element_size()
            self.calls += 1
        return _REAL_ALL_REDUCE(tensor, *args, **kwargs)

    def __enter__(self):
        dist.all_reduce = self
        return self

    def __exit__(self, *exc):
        dist.all_reduce = _REAL_ALL_REDUCE


def _hook_for(mode: str, rank_r: int, config):
    """The comm hook and its state for ``mode``: DDP's own all-reduce, fp16 compression or PowerSGD at rank r."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if mode == "allreduce":
        return None, default_hooks.allreduce_hook
    if mode == "fp16":
        return None, default_hooks.fp16_compress_hook
    state = powerSGD_hook.PowerSGDState(
        process_group=None, matrix_approximation_rank=rank_r, start_powerSGD_iter=config.start_powersgd_iter,
        min_compression_rate=config.min_compression_rate, use_error_feedback=config.error_feedback,
        warm_start=config.warm_start, random_seed=config.seed)
    return state, powerSGD_hook.powerSGD_hook


class _Mode:
    """One way of syncing, on its own DDP copy of the model, with the exact average noted per parameter."""

    def __init__(self, mode: str, rank_r: int, config, counter: _CountingAllReduce, world_size: int):
        from torch.nn.parallel import DistributedDataParallel

        self.model = make_model(config.train_config())
        self.params = list(self.model.parameters())
        self.ddp = DistributedDataParallel(self.model)
        self.state, hook = _hook_for(mode, rank_r, config)
        self.exact, self.counter, self.world_size = {}, counter, world_size
        self.reference_seconds = 0.0  # spent on the exact average: not part of the mode's own step
        self.exact_seconds = 0.0      # of which the all-reduce of the M bytes alone: this machine's T_comm

        def wrapped(state, bucket):
            t0 = time.perf_counter()
            mine = bucket.buffer().clone()  # this rank's gradient, before the hook adds error feedback to it
            t_sent = time.perf_counter()
            _REAL_ALL_REDUCE(mine)          # the exact sum, never counted
            self.exact_seconds += time.perf_counter() - t_sent
            mine /= self.world_size
            self.reference_seconds += time.perf_counter() - t0
            offset = 0
            for p in bucket.parameters():
                self.exact[id(p)] = mine[offset:offset + p.numel()]
                offset += p.numel()
            counter.on = True
            return hook(state, bucket)

        self.ddp.register_comm_hook(self.state, wrapped)
        self.sgd = optim.SGD(self.params, lr=config.lr)

    def step(self, x, y) -> dict:
        for p in self.params:
            p.grad = None
        self.counter.bytes, self.counter.calls = 0, 0
        self.reference_seconds = self.exact_seconds = 0.0
        t0 = time.perf_counter()
        loss = mse(self.ddp(x), y)
        loss.backward()  # DDP waits here for every bucket's future, so every counted call is in
        self.counter.on = False
        t1 = time.perf_counter()
        g = flat_grad(self.model)
        exact = torch.cat([self.exact[id(p)] for p in self.params])
        err = (g.double() - exact.double()).norm().item() / (exact.double().norm().item() or 1.0)
        feedback = 0.0
        if self.state is not None and self.state.use_error_feedback:
            feedback = float(sum(e.double().pow(2).sum().item() for e in self.state.error_dict.values())) ** 0.5
        self.sgd.step()
        return dict(loss=loss.item(), bytes=self.counter.bytes, calls=self.counter.calls, err=err,
                    feedback=feedback, seconds=t1 - t0 - self.reference_seconds, exact=self.exact_seconds)


def compression_worker(rank: int, world_size: int, config) -> dict:
    """One rank: ``steps`` SGD steps of every mode from θ0 on the same batches; bytes, errors, losses per step.

    The modes take turns step by step, as in :mod:`dpviz.topics.waiting.rank_overlap`, so that whatever else the
    machine does slows them alike.
    """
    train = config.train_config()
    x_all, y_all = load_data(train)
    start = rank * config.b
    batches = [batch_indices(train, step)[start:start + config.b] for step in range(config.steps)]
    names = config.modes()
    R, steps = len(names), config.steps
    out = {name: np.zeros((R, steps)) for name in ("err", "feedback", "seconds", "exact")}
    out.update(loss=np.zeros((R, steps), np.float32), bytes=np.zeros((R, steps), np.int64),
               calls=np.zeros((R, steps), np.int64), digest=np.zeros((R, steps + 1), "S40"))
    with _CountingAllReduce() as counter:
        modes = [_Mode(mode, r, config, counter, world_size) for mode, r in names]
        for i, mode in enumerate(modes):
            out["digest"][i, 0] = _digest(torch.nn.utils.parameters_to_vector(mode.params).detach())
        done = 0
        for step, rows in enumerate(batches):
            for i, mode in enumerate(modes):
                dist.barrier()
                result = mode.step(x_all[rows], y_all[rows])
                for name, value in result.items():
                    out[name][i, step] = value
                out["digest"][i, step + 1] = _digest(torch.nn.utils.parameters_to_vector(mode.params).detach())
                launcher.report_progress(done)
                done += 1
    model = modes[0].model
    out.update(shapes=np.array([(p.shape[0], p.numel() // p.shape[0]) for p in model.parameters()], np.int64),
               threads=torch.get_num_threads())
    return out
