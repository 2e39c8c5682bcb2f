"""Start the all-reduce before the backward pass ends: per parameter, in one buffer, in buckets, and as DDP does.

    from dpviz.topics.waiting.run_overlap import record_overlap
    run = record_overlap(k=2, steps=8)
    print(run.check())         # every mode's gradients equal the serial all-reduce's; step times compared

Backward produces gradients from the last layer to the first. A parameter's gradient is final as
soon as autograd has accumulated it, and torch then calls the parameter's *post-accumulate-grad
hook*. From that hook we can start the parameter's all-reduce with ``async_op=True`` and let the
rest of the backward pass run while the bytes travel. That is the idea behind
``torch.nn.parallel.DistributedDataParallel``: it copies gradients into *buckets* of about 25 MiB
in the order they become ready and all-reduces each bucket when it is full.

Each mode (see :mod:`dpviz.topics.waiting.records_overlap`) trains its own copy of the model from the same θ0 on
the same batches, the modes taking turns step by step, so their gradients can be compared step by
step; each rank times every all-reduce from its start to the moment its future completes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_lr, check_real, check_seed
from dpviz.topics.waiting.buckets import MAX_BUCKETS, make_buckets  # noqa: F401 - make_buckets: importable from here too
from dpviz.topics.waiting.records_overlap import MODES, OverlapRecord
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran


def overlap_worker(rank: int, world_size: int, config: OverlapConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.waiting.rank_overlap.overlap_worker`, imported there (with torch), not here."""
    from dpviz.topics.waiting.rank_overlap import overlap_worker

    return overlap_worker(rank, world_size, config)


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
        check_lr("lr", self.lr)
        check_seed("seed", self.seed)
        check_int("threads", self.threads, low=1, high=4096)

    @property
    def bucket_cap_bytes(self) -> int:
        return int(self.bucket_mb * 2**20)


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
