"""Start the all-reduce before the backward pass ends: per parameter, in one buffer, in buckets, and as DDP does.

    from dpviz.runs.overlap import record_overlap
    run = record_overlap(k=2, steps=8)
    print(run.check())         # every mode's gradients equal the serial all-reduce's; step times compared

Backward produces gradients from the last layer to the first. A parameter's gradient is final as
soon as autograd has accumulated it, and torch then calls the parameter's *post-accumulate-grad
hook*. From that hook we can start the parameter's all-reduce with ``async_op=True`` and let the
rest of the backward pass run while the bytes travel. That is the idea behind
``torch.nn.parallel.DistributedDataParallel``: it copies gradients into *buckets* of about 25 MiB
in the order they become ready and all-reduces each bucket when it is full.

Each mode (see :mod:`dpviz.records.overlap`) trains its own copy of the model from the same θ0 on
the same batches, the modes taking turns step by step, so their gradients can be compared step by
step; each rank times every all-reduce from its start to the moment its future completes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from dpviz.checks import check_choice, check_int, check_real
from dpviz.data import teacher_data
from dpviz.records.overlap import MODES, OverlapRecord
from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.runs.models import build_model, flat_grad
from dpviz.runs.where import where_it_ran

MAX_BUCKETS = 64  # the padding of the bucket arrays; per_parameter needs one per parameter tensor


@dataclass
class OverlapConfig:
    k: int = 2                        # ranks
    modes: tuple = MODES              # which ways of syncing to run, in order ("serial" always runs first)
    steps: int = 8                    # steps per mode, warm-up included
    warmup: int = 2                   # first steps of each mode left out of medians
    width: int = 512                  # hidden units per layer of the MLP
    depth: int = 3                    # hidden layers
    d_in: int = 64                    # input features
    b: int = 64                       # examples per rank per step
    bucket_mb: float = 1.0            # MiB per bucket in the buckets and ddp modes (DDP's default is 25)
    lr: float = 0.01                  # learning rate η
    seed: int = 0                     # seeds the data and the model
    threads: int = 1                  # intra-op threads per rank

    def __post_init__(self):
        check_int("k", self.k, low=1, high=64)
        self.modes = (self.modes,) if isinstance(self.modes, str) else tuple(self.modes)
        for mode in self.modes:
            check_choice("modes entries", mode, MODES)
        self.modes = ("serial",) + tuple(m for m in dict.fromkeys(self.modes) if m != "serial")  # the reference first
        check_int("steps", self.steps, low=1, high=10_000)
        check_int("warmup", self.warmup, low=0, high=self.steps - 1)
        check_int("width", self.width, low=1, high=1 << 14)
        check_int("depth", self.depth, low=1, high=MAX_BUCKETS // 2 - 1)
        check_int("d_in", self.d_in, low=1, high=1 << 14)
        check_int("b", self.b, low=1, high=1 << 16)
        check_real("bucket_mb", self.bucket_mb, low=0.0, low_open=True, high=1024.0)
        check_real("lr", self.lr, low=0.0, low_open=True)
        check_int("threads", self.threads, low=1, high=4096)

    @property
    def bucket_cap_bytes(self) -> int:
        return int(self.bucket_mb * 2**20)


def make_buckets(sizes: list[int], cap_bytes: int) -> list[list[int]]:
    """Group parameter indices into buckets of about ``cap_bytes``, last parameter first (the order backward goes).

    A bucket closes once it holds at least ``cap_bytes``; ``cap_bytes`` larger than the whole
    gradient gives one buffer, 1 gives one bucket per parameter.
    """
    buckets, current, filled = [], [], 0
    for i in reversed(range(len(sizes))):
        current.append(i)
        filled += sizes[i] * 4
        if filled >= cap_bytes:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


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
        self.where = {i: (b, sum(params[j].numel() for j in bucket[:bucket.index(i)]))
                      for b, bucket in enumerate(buckets) for i in bucket}
        self.in_place = all(len(bucket) == 1 for bucket in buckets)
        self.buffers = None if self.in_place else [torch.zeros(sum(params[j].numel() for j in bucket)) for bucket in buckets]
        self.handles = [p.register_post_accumulate_grad_hook(self._ready_hook(i)) for i, p in enumerate(params)]
        self.timeline = None

    def _ready_hook(self, i):
        def hook(p):
            self.ready_at = self.timeline.now()
            b, offset = self.where[i]
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


def record_overlap(config: OverlapConfig | None = None, *, progress: bool = False, **overrides) -> OverlapRecord:
    """Launch ``config.k`` ranks, run every mode, return the :class:`OverlapRecord`.

    ``record_overlap(k=2, steps=8, bucket_mb=1.0)`` builds the config for you.
    """
    config = make_config(config, **overrides)
    results = launcher.launch(overlap_worker, config.k, args=(config,), backend="gloo", threads=config.threads,
                              total_steps=len(config.modes) * config.steps, progress=progress)
    return assemble(config, results)


def make_config(config: OverlapConfig | None = None, **overrides) -> OverlapConfig:
    return OverlapConfig(**{**(asdict(config) if config else {}), **overrides})


def assemble(config: OverlapConfig, results: list[dict]) -> OverlapRecord:
    """The record from the ranks' results, in rank order."""
    width = max(int(r["n_buckets"].max()) for r in results)
    arrays = {name: np.stack([r[name] for r in results], axis=2)
              for name in ("t_forward_end", "t_grads_ready", "t_synced", "t_step_end", "grad_digest", "grad_rel_diff")}
    for name in ("comm_start", "comm_end"):
        arrays[name] = np.stack([r[name][:, :, :width] for r in results], axis=2)
    arrays["bucket_bytes"] = results[0]["bucket_bytes"][:, :width]
    arrays["n_buckets"] = results[0]["n_buckets"]
    arrays["grad_head"] = results[0]["grad_head"]
    arrays["mode"] = np.array(config.modes, dtype=str)
    n_params = results[0]["n_params"]
    meta = dict(
        k=config.k, steps=config.steps, warmup=config.warmup, width=config.width, depth=config.depth, d_in=config.d_in,
        n_params=n_params, n_tensors=results[0]["n_tensors"], message_bytes=n_params * 4,
        bucket_cap_bytes=config.bucket_cap_bytes, b=config.b, lr=config.lr, seed=config.seed,
        **where_it_ran(OverlapRecord, backend="gloo", threads_per_rank=results[0]["threads"]),
    )
    return OverlapRecord(meta, arrays)
