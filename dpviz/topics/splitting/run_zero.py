"""Sharded optimizer state (ZeRO stage 1) beside plain data parallelism, in the same k ranks, with Adam.

    from dpviz.topics.splitting.run_zero import record_zero
    run = record_zero(k=2, steps=5)
    print(run.check())        # same parameters to rounding; each rank holds 1/k of Adam's state

Both trainings start from the same model and see the same batches (the data-parallel sharding
of :mod:`dpviz.topics.ground_floor.run_training`):

* plain: ``dist.all_reduce`` the flat gradient, divide by k, and let every rank step all P
  parameters with its own full Adam (two more P-long tensors, m and v);
* ZeRO-1: the first half of the hand-written ring, :func:`~dpviz.topics.all_reduce.rank_collectives.ring_reduce_scatter`,
  leaves on rank r the summed gradient of one chunk only, chunk ``(r + 1) mod k``
  (:func:`~dpviz.topics.all_reduce.rank_collectives.owned_chunk`). The rank divides it by k, steps *that chunk* of
  the parameters with an Adam whose m and v cover the chunk alone, and the second half of the
  ring, :func:`~dpviz.topics.all_reduce.rank_collectives.ring_all_gather`, hands every rank every updated chunk.

The reduce-scatter is the ring's own first phase, so its bytes are counted as it runs: each rank
sends k-1 chunks, ``(k-1)/k · M`` bytes when the P parameters split evenly. (This gloo build also
offers ``dist.reduce_scatter``; the hand-written phase is used because it counts what it sends.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.fronts import rank_side_names
from dpviz.engine.checks import check_int, check_lr, check_timeout
from dpviz.topics.splitting.records_zero import ZeroRun
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor.run_training import TrainConfig
from dpviz.engine.where import where_it_ran

ELEMENT_BYTES = 4  # float32


def zero_worker(rank: int, world_size: int, config: ZeroConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.splitting.rank_zero.zero_worker`, imported there (with torch), not here."""
    from dpviz.topics.splitting.rank_zero import zero_worker

    return zero_worker(rank, world_size, config)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.splitting.rank_zero", ("share_one_buffer",))


@dataclass
class ZeroConfig:
    k: int = 2                 # ranks
    b: int = 16                # examples per rank per step
    steps: int = 5             # optimizer steps
    width: int = 33            # hidden units; with d_in = 15 the MLP has 1,684 = 4 · 421 parameters, so k = 2 or 4 split it evenly
    depth: int = 2             # hidden layers
    d_in: int = 15             # input features
    lr: float = 0.01           # Adam's learning rate
    seed: int = 0              # seeds the data, the model and every batch draw
    dataset_size: int = 512    # examples in the data set
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=10_000)
        check_lr("lr", self.lr)
        check_timeout("stall_timeout", self.stall_timeout)
        self.train_config()  # checks b, width, depth, d_in and dataset_size

    def train_config(self) -> TrainConfig:
        """The same run as a :class:`TrainConfig`, for its data, model and batch draws."""
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, optimizer="adam", lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)


def assemble(config: ZeroConfig, results: list[dict], backend: str) -> ZeroRun:
    arrays = {
        "params_dp": np.stack([r["dp"]["params"] for r in results], axis=1),
        "params_zero": np.stack([r["zero"]["params"] for r in results], axis=1),
        "loss_dp": np.stack([r["dp"]["loss"] for r in results], axis=1),
        "loss_zero": np.stack([r["zero"]["loss"] for r in results], axis=1),
        "shard_start": np.array([r["zero"]["shard"][0] for r in results], dtype=np.int64),
        "shard_size": np.array([r["zero"]["shard"][1] for r in results], dtype=np.int64),
        "memory_dp": np.array([r["dp"]["memory"] for r in results], dtype=np.int64),
        "memory_zero": np.array([r["zero"]["memory"] for r in results], dtype=np.int64),
        "rs_bytes": np.array([r["zero"]["rs_bytes"] for r in results], dtype=np.int64).T.copy(),
        "ag_bytes": np.array([r["zero"]["ag_bytes"] for r in results], dtype=np.int64).T.copy(),
    }
    meta = dict(
        k=config.k, b=config.b, steps=config.steps, width=config.width, depth=config.depth, d_in=config.d_in,
        n_params=int(arrays["params_dp"].shape[-1]), element_bytes=ELEMENT_BYTES, lr=config.lr, seed=config.seed,
        dataset_size=config.dataset_size,
        collectives="plain: dist.all_reduce; ZeRO-1: the hand-written ring's reduce-scatter, then its all-gather",
        **where_it_ran(ZeroRun, backend=backend, threads_per_rank=results[0]["threads"]),
    )
    return ZeroRun(meta, arrays)


def record_zero(config: ZeroConfig | None = None, **overrides) -> ZeroRun:
    """Launch k ranks, train both ways, and return the :class:`ZeroRun` record.

    ``record_zero(k=4, steps=5)``: keyword overrides build the config.
    """
    config = ZeroConfig(**{**(asdict(config) if config else {}), **overrides})
    results = launcher.launch(zero_worker, config.k, args=(config,), backend="gloo", threads=1,
                              stall_timeout=config.stall_timeout, total_steps=2 * config.steps)
    return assemble(config, results, "gloo")
