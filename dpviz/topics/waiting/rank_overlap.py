"""The rank side of :mod:`dpviz.topics.waiting.run_overlap`: all-reduces started from backward hooks, mode by mode, in torch."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.data import teacher_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad
from dpviz.topics.waiting.buckets import MAX_BUCKETS, make_buckets


class _Timeline:
    """One step's moments on this rank, in seconds after the step began."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.starts, self.ends, self.sizes = [], [], []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def started(self, nbytes: int) -> int:
        self.starts.append(self.now())
        self.ends.append(np.nan)
        self.sizes.append(nbytes)
        return len(self.starts) - 1

    def finished(self, i: int) -> None:
        self.ends[i] = self.now()



class _HookedSync:
    """Async all-reduces launched from post-accumulate-grad hooks, bucket by bucket.

    ``buckets`` lists parameter indices per bucket. Each gradient is copied into its bucket's slice
    of a flat buffer as soon as it is final; a full bucket is all-reduced with ``async_op=True`` and
    the backward pass goes on. ``finish`` waits for every bucket, averages and writes the gradients back.
    With one parameter per bucket the gradient itself is all-reduced in place, with no copy.
    """

    def __init__(self, params, buckets, world_size):
        self.params, self.buckets, self.world_size = params, buckets, world_size
        self.slot = {i: (b, sum(params[j].numel() for j in bucket[:bucket.index(i)]))
                      for b, bucket in enumerate(buckets) for i in bucket}
        self.in_place = all(len(bucket) == 1 for bucket in buckets)
        self.buffers = None if self.in_place else [torch.zeros(sum(params[j].numel() for j in bucket)) for bucket in buckets]
        self.handles = [p.register_post_accumulate_grad_hook(self._ready_hook(i)) for i, p in enumerate(params)]
        self.timeline = None

    def _ready_hook(self, i):
        def hook(p):
            self.ready_at = self.timeline.now()
            b, offset = self.slot[i]
            if not self.in_place:
                self.buffers[b][offset:offset + p.numel()].copy_(p.grad.reshape(-1))
            self.missing[b] -= 1
            if self.missing[b] == 0:
                self._launch(b)
        return hook

    def _launch(self, b):
        tensor = self.params[self.buckets[b][0]].grad if self.in_place else self.buffers[b]
        i = self.timeline.started(tensor.numel() * tensor.element_size())
        work = dist.all_reduce(tensor, async_op=True)
        timeline = self.timeline

        def done(future):
            timeline.finished(i)  # runs on the communication thread when the bytes are in
            return future.value()

        work.get_future().then(done)
        self.works.append(work)

    def begin(self, timeline):
        self.timeline, self.works = timeline, []
        self.missing = [len(bucket) for bucket in self.buckets]

    def finish(self):
        for work in self.works:
            work.wait()
        for b, bucket in enumerate(self.buckets):
            offset = 0
            for j in bucket:
                grad = self.params[j].grad
                if not self.in_place:
                    grad.copy_(self.buffers[b][offset:offset + grad.numel()].view_as(grad))
                    offset += grad.numel()
                grad /= self.world_size

    def remove(self):
        for handle in self.handles:
            handle.remove()



def _ddp(model, cap_bytes):
    """Wrap ``model`` in DistributedDataParallel with a comm hook that times its default all-reduce and nothing else."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, bucket_cap_mb=cap_bytes / 2**20)
    state = {"timeline": None}

    def timed_allreduce(process_group, bucket):
        timeline = state["timeline"]
        i = timeline.started(bucket.buffer().numel() * bucket.buffer().element_size())
        future = default_hooks.allreduce_hook(process_group, bucket)

        def done(f):
            timeline.finished(i)
            return f.value()

        return future.then(done)

    ddp.register_comm_hook(None, timed_allreduce)
    return ddp, state



def _digest(t: torch.Tensor) -> bytes:
    return hashlib.sha1(memoryview(t.contiguous().numpy()).cast("B")).hexdigest().encode()



class _Mode:
    """One way of syncing, on its own copy of the model (built from the seed, so every copy starts at θ0)."""

    def __init__(self, mode: str, config: OverlapConfig, world_size: int):
        self.mode, self.world_size = mode, world_size
        self.model = build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)
        self.params = list(self.model.parameters())
        self.sizes = [p.numel() for p in self.params]
        self.net, self.sync, self.ddp_state = self.model, None, None
        if mode == "ddp":
            self.net, self.ddp_state = _ddp(self.model, config.bucket_cap_bytes)
        elif mode != "serial":
            cap = {"per_parameter": 1, "one_buffer": sum(self.sizes) * 4 + 1, "buckets": config.bucket_cap_bytes}[mode]
            self.sync = _HookedSync(self.params, make_buckets(self.sizes, cap), world_size)
        self.timeline, self.ready_at = None, 0.0
        if self.sync is None:  # the hooked modes note when the last gradient is ready themselves
            for p in self.params:
                p.register_post_accumulate_grad_hook(self._note_ready)
        self.sgd = optim.SGD(self.params, lr=config.lr)

    def _note_ready(self, p):
        self.ready_at = self.timeline.now()

    def step(self, x, y) -> tuple:
        """One timed SGD step; returns (timeline, forward end, grads ready, synced, step end), seconds."""
        for p in self.params:
            p.grad = None
        self.timeline = timeline = _Timeline()
        if self.sync is not None:
            self.sync.begin(timeline)
        if self.ddp_state is not None:
            self.ddp_state["timeline"] = timeline
        loss = torch.mean((self.net(x) - y) ** 2)
        forward_end = timeline.now()
        loss.backward()
        if self.sync is not None:
            self.sync.finish()
            self.ready_at = self.sync.ready_at
        if self.mode == "serial":
            g = flat_grad(self.model)
            i = timeline.started(g.numel() * 4)
            dist.all_reduce(g)
            timeline.finished(i)
            g /= self.world_size
            offset = 0
            for p in self.params:
                p.grad.copy_(g[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        synced = timeline.now()
        self.sgd.step()
        return timeline, forward_end, self.ready_at, synced, timeline.now()



def overlap_worker(rank: int, world_size: int, config: OverlapConfig) -> dict:
    """One rank: ``steps`` SGD steps of every mode from θ0 on the same batches, timed.

    The modes take turns step by step (step 0 of each, then step 1 of each, ...), so that anything
    else the machine is doing slows them alike rather than whichever mode it happened to meet.
    """
    x_all, y_all = (torch.from_numpy(a) for a in teacher_data(config.b * world_size * 4, config.d_in, seed=config.seed))
    n_modes, steps = len(config.modes), config.steps
    times = {name: np.zeros((n_modes, steps)) for name in ("t_forward_end", "t_grads_ready", "t_synced", "t_step_end")}
    comm_start = np.full((n_modes, steps, MAX_BUCKETS), np.nan)
    comm_end = np.full((n_modes, steps, MAX_BUCKETS), np.nan)
    bucket_bytes = np.zeros((n_modes, MAX_BUCKETS), np.int64)
    n_buckets = np.zeros(n_modes, np.int64)
    digests = np.zeros((n_modes, steps), "S40")
    rel_diff = np.zeros((n_modes, steps))
    head = np.zeros((n_modes, 4), np.float32)
    modes = [_Mode(mode, config, world_size) for mode in config.modes]  # "serial" first: the reference

    done = 0
    for step in range(steps):
        start = ((step * world_size + rank) * config.b) % len(x_all)
        x, y = x_all[start:start + config.b], y_all[start:start + config.b]
        reference = None
        for r, mode in enumerate(modes):
            dist.barrier()  # both ranks start the step together: a wait in it is this step's, not a leftover
            timeline, *moments = mode.step(x, y)
            g = flat_grad(mode.model)
            digests[r, step] = _digest(g)
            reference = g if reference is None else reference
            rel_diff[r, step] = (g - reference).abs().max().item() / (reference.abs().max().item() or 1.0)
            if step == 0 and rank == 0:
                head[r] = g[:4].numpy()
            for name, value in zip(times, moments):
                times[name][r, step] = value
            nb = len(timeline.starts)
            comm_start[r, step, :nb], comm_end[r, step, :nb] = timeline.starts, timeline.ends
            n_buckets[r] = max(n_buckets[r], nb)  # DDP rebuilds its buckets after the first step
            bucket_bytes[r, :] = 0
            bucket_bytes[r, :nb] = timeline.sizes
            launcher.report_progress(done)
            done += 1
    for mode in modes:
        if mode.sync is not None:
            mode.sync.remove()
    sizes = modes[0].sizes
    return dict(times, comm_start=comm_start, comm_end=comm_end, bucket_bytes=bucket_bytes, n_buckets=n_buckets,
                grad_digest=digests, grad_rel_diff=rel_diff, grad_head=head, n_params=sum(sizes), n_tensors=len(sizes),
                threads=torch.get_num_threads())
