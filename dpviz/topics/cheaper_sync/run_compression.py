"""Send fewer bytes: DDP communication hooks that compress the gradient, on real ranks, bytes counted.

    from dpviz.topics.cheaper_sync.run_compression import record_compression
    rec = record_compression(k=2, steps=20, ranks=(1, 2, 4))
    print(rec.check())         # bytes as the hooks decide them; gradient error against the exact average

Each mode trains its own ``torch.nn.parallel.DistributedDataParallel`` copy of the MLP from the same θ0
on the same batches, with a different comm hook (see :mod:`dpviz.topics.cheaper_sync.records_compression`):

* ``allreduce``: DDP's own all-reduce (``default_hooks.allreduce_hook``), the reference;
* ``fp16``: ``default_hooks.fp16_compress_hook``, the bucket cast to float16 before its all-reduce;
* ``powersgd_r<r>``: ``powerSGD_hook`` at ``matrix_approximation_rank`` r, with error feedback: each rank
  keeps what compression lost this step and adds it to next step's gradient.

Every tensor a hook hands to ``dist.all_reduce`` is counted as it goes; the exact average of the ranks'
gradients is all-reduced beside it (uncounted, timed on its own, left out of the step's time), so each step's
compressed gradient can be compared with it.

This module is the torch-free front: the config, checked here, and the record assembled with numpy. The
ranks run :mod:`dpviz.topics.cheaper_sync.rank_compression`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.checks import check_int, check_lr, check_real, check_timeout
from dpviz.topics.cheaper_sync.records_compression import CompressionRecord, mode_name
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor.run_training import TrainConfig
from dpviz.engine.where import where_it_ran

MAX_RANK = 1024  # the largest matrix_approximation_rank a config accepts


def compression_worker(rank: int, world_size: int, config: CompressionConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.cheaper_sync.rank_compression.compression_worker`, imported there (with torch)."""
    from dpviz.topics.cheaper_sync.rank_compression import compression_worker

    return compression_worker(rank, world_size, config)


def check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False; got {value!r}.")
    return value


@dataclass
class CompressionConfig:
    k: int = 2                        # ranks
    b: int = 16                       # examples per rank per step
    steps: int = 20                   # SGD steps per mode
    width: int = 32                   # hidden units per layer of the MLP
    depth: int = 2                    # hidden layers
    d_in: int = 16                    # input features
    lr: float = 0.05                  # learning rate η
    seed: int = 0                     # seeds the data, the model, every batch draw and PowerSGD's random Q
    dataset_size: int = 512           # examples in the data set
    ranks: tuple = (1, 2, 4)          # PowerSGD's matrix_approximation_rank r, one mode each
    start_powersgd_iter: int = 2      # steps of plain all-reduce before PowerSGD compresses (torch: >= 2 with error feedback)
    min_compression_rate: float = 2.0  # an n₁×n₂ matrix is compressed only if (n₁ + n₂)·r times this is below n₁·n₂
    error_feedback: bool = True       # PowerSGD keeps what compression lost and adds it to the next gradient
    warm_start: bool = True           # PowerSGD starts each step's Q from the last one
    stall_timeout: float = 60.0       # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=10_000)
        check_lr("lr", self.lr)
        self.ranks = (self.ranks,) if isinstance(self.ranks, int) and not isinstance(self.ranks, bool) else tuple(self.ranks)
        if not self.ranks:
            raise ValueError("ranks must list at least one PowerSGD rank r from 1 to 1024; got ().")
        for r in self.ranks:
            check_int("ranks entries", r, low=1, high=MAX_RANK)
        self.ranks = tuple(dict.fromkeys(self.ranks))
        check_bool("error_feedback", self.error_feedback)
        check_bool("warm_start", self.warm_start)
        check_int("start_powersgd_iter", self.start_powersgd_iter, low=0, high=100_000)
        if (self.error_feedback or self.warm_start) and self.start_powersgd_iter < 2:
            raise ValueError(f"start_powersgd_iter must be an integer >= 2 while error_feedback or warm_start is on "
                             f"(torch's PowerSGDState requires it); got {self.start_powersgd_iter}.")
        check_real("min_compression_rate", self.min_compression_rate, low=0.0, high=1e6)
        check_timeout("stall_timeout", self.stall_timeout)
        self.train_config()  # checks b, width, depth, d_in, seed and dataset_size

    def train_config(self) -> TrainConfig:
        """The same run as a :class:`TrainConfig`, for its data, model and batch draws."""
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)

    def modes(self) -> list[tuple[str, int]]:
        """(hook, PowerSGD rank) per mode, the reference first; rank 0 where the hook has none."""
        return [("allreduce", 0), ("fp16", 0)] + [("powersgd", r) for r in self.ranks]


def assemble(config: CompressionConfig, results: list[dict]) -> CompressionRecord:
    """The record from the ranks' results, in rank order (axis 2 is the rank)."""
    arrays = {name: np.stack([r[key] for r in results], axis=2) for name, key in (
        ("sent_bytes", "bytes"), ("sent_calls", "calls"), ("grad_rel_err", "err"), ("error_norm", "feedback"),
        ("loss", "loss"), ("t_step", "seconds"), ("t_exact", "exact"), ("param_digest", "digest"))}
    modes = config.modes()
    arrays["mode"] = np.array([mode_name(m, r) for m, r in modes], dtype=str)
    arrays["powersgd_rank"] = np.array([r for _, r in modes], dtype=np.int64)
    arrays["param_shape"] = results[0]["shapes"]
    n_params = int(np.prod(arrays["param_shape"], axis=1).sum())
    meta = dict(
        k=config.k, b=config.b, steps=config.steps, width=config.width, depth=config.depth, d_in=config.d_in,
        n_params=n_params, message_bytes=4 * n_params, lr=config.lr, seed=config.seed,
        dataset_size=config.dataset_size, start_powersgd_iter=config.start_powersgd_iter,
        min_compression_rate=config.min_compression_rate, error_feedback=config.error_feedback,
        warm_start=config.warm_start,
        **where_it_ran(CompressionRecord, backend="gloo", threads_per_rank=results[0]["threads"]),
    )
    return CompressionRecord(meta, arrays)


def record_compression(config: CompressionConfig | None = None, *, progress: bool = False,
                       **overrides) -> CompressionRecord:
    """Launch ``config.k`` ranks, train every mode, return the :class:`CompressionRecord`.

    ``record_compression(k=2, steps=20, ranks=(1, 2, 4))`` builds the config for you.
    """
    config = CompressionConfig(**{**(asdict(config) if config else {}), **overrides})
    results = launcher.launch(compression_worker, config.k, args=(config,), backend="gloo", threads=1,
                              stall_timeout=config.stall_timeout, total_steps=len(config.modes()) * config.steps,
                              progress=progress)
    return assemble(config, results)
