"""Sync less often: local SGD, H local steps and then one average of the parameters, on real ranks.

    from dpviz.topics.cheaper_sync.run_local_sgd import record_local_sgd
    rec = record_local_sgd(k=2, steps=24, periods=(1, 2, 4, 8))

In the same k ranks, from the same θ0 and on the same batches (the data-parallel sharding of
:mod:`dpviz.topics.ground_floor.run_training`), with plain SGD:

* plain data parallelism: all-reduce the gradient at every step, θ ← θ − η ḡ;
* local SGD, for each H in ``periods``: every rank steps on its own gradient, θ_r ← θ_r − η g_r, and after
  every H-th step the ranks average their parameters with one ``dist.all_reduce`` of the flat θ
  (:func:`dpviz.topics.cheaper_sync.rank_local_sgd.average_parameters`). With H = 1 that is plain data parallelism again:
  the mean of θ − η g_r is θ − η ḡ;
* the oracle, for each H: torch's post-local-SGD averager,
  ``torch.distributed.algorithms.model_averaging.averagers.PeriodicModelAverager(period=H, warmup_steps=H-1)``,
  called after every step on the same loop.

Between averages the replicas drift apart; the record keeps every rank's parameters before and after each
average, so the drift is measured, not modeled. Every step of plain data parallelism and of the hand-written
local SGD is timed (forward, backward, sync), and the record says which steps averaged; with ``k=1`` the same
loop on one rank gives the T_step(1) a measured speedup divides by.

This module is the torch-free front; the ranks run :mod:`dpviz.topics.cheaper_sync.rank_local_sgd`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.checks import check_int, check_lr, check_timeout
from dpviz.topics.cheaper_sync.records_compression import FIGURE_PLAN
from dpviz.topics.cheaper_sync.records_local_sgd import LocalSgdRecord
from dpviz.engine import launch as launcher
from dpviz.topics.cheaper_sync.run_compression import check_bool, record_compression
from dpviz.topics.cheaper_sync.run_hierarchical import record_hierarchical
from dpviz.topics.ground_floor.run_training import TrainConfig
from dpviz.engine.where import where_it_ran


def local_sgd_worker(rank: int, world_size: int, config: LocalSgdConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.cheaper_sync.rank_local_sgd.local_sgd_worker`, imported there (with torch)."""
    from dpviz.topics.cheaper_sync.rank_local_sgd import local_sgd_worker

    return local_sgd_worker(rank, world_size, config)


@dataclass
class LocalSgdConfig:
    k: int = 2                  # ranks
    b: int = 16                 # examples per rank per step
    steps: int = 24             # SGD steps per training
    width: int = 32             # hidden units per layer of the MLP
    depth: int = 2              # hidden layers
    d_in: int = 16              # input features
    lr: float = 0.05            # learning rate η
    seed: int = 0               # seeds the data, the model and every batch draw
    dataset_size: int = 512     # examples in the data set
    periods: tuple = (1, 2, 4, 8)  # H: local steps between two averages, one training each
    oracle: bool = True         # also train each H with torch's PeriodicModelAverager
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=10_000)
        check_lr("lr", self.lr)
        self.periods = (self.periods,) if isinstance(self.periods, int) and not isinstance(self.periods, bool) \
            else tuple(self.periods)
        if not self.periods:
            raise ValueError(f"periods must list at least one H from 1 to steps={self.steps}; got ().")
        for H in self.periods:
            check_int("periods entries", H, low=1, high=self.steps)
        self.periods = tuple(dict.fromkeys(self.periods))
        check_bool("oracle", self.oracle)
        check_timeout("stall_timeout", self.stall_timeout)
        self.train_config()  # checks b, width, depth, d_in, seed and dataset_size

    def train_config(self) -> TrainConfig:
        """The same run as a :class:`TrainConfig`, for its data, model and batch draws."""
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)


def assemble(config: LocalSgdConfig, results: list[dict]) -> LocalSgdRecord:
    """The record from the ranks' results, in rank order (the rank axis comes just before P)."""
    names = ["params_dp", "loss_dp", "params_local", "before_average", "loss_local"]
    names += ["t_step_dp", "t_sync_dp", "t_step_local", "t_sync_local", "averaged"]
    names += ["params_torch"] if config.oracle else []
    arrays = {}
    for name in names:  # parameters (..., k, P); per-step values (..., steps, k)
        arrays[name] = np.stack([r[name] for r in results], axis=-2 if name.startswith(("params", "before")) else -1)
    arrays["period"] = np.array(config.periods, dtype=np.int64)
    n_params = int(arrays["params_dp"].shape[-1])
    meta = dict(
        k=config.k, b=config.b, steps=config.steps, width=config.width, depth=config.depth, d_in=config.d_in,
        n_params=n_params, message_bytes=4 * n_params, lr=config.lr, seed=config.seed,
        dataset_size=config.dataset_size,
        oracle="torch.distributed.algorithms.model_averaging.averagers.PeriodicModelAverager(period=H, "
               "warmup_steps=H-1)" if config.oracle else "",
        **where_it_ran(LocalSgdRecord, backend="gloo", threads_per_rank=results[0]["threads"]),
    )
    return LocalSgdRecord(meta, arrays)


def record_local_sgd(config: LocalSgdConfig | None = None, *, progress: bool = False, **overrides) -> LocalSgdRecord:
    """Launch ``config.k`` ranks, train plain DP and local SGD at every H, return the :class:`LocalSgdRecord`.

    ``record_local_sgd(k=4, periods=(1, 4))`` builds the config for you.
    """
    config = LocalSgdConfig(**{**(asdict(config) if config else {}), **overrides})
    trainings = 1 + len(config.periods) * (2 if config.oracle else 1)
    results = launcher.launch(local_sgd_worker, config.k, args=(config,), backend="gloo", threads=1,
                              stall_timeout=config.stall_timeout, total_steps=trainings * config.steps,
                              progress=progress)
    return assemble(config, results)


def record_cheaper_sync_plan(*, quick: bool = False, progress: bool = False) -> dict:
    """The records behind the chapter's figures, {stem: record} (:data:`dpviz.topics.cheaper_sync.records_compression.FIGURE_PLAN`).

    All three kinds of the chapter (compression, local SGD, two levels) are recorded here, the one front that
    imports the other two, and local SGD's k = 1 run. About 25 s on 2 cores, most of it the runs' starts;
    ``quick`` shortens it.
    """
    settings = FIGURE_PLAN.settings_for(quick=quick)
    # k = 4 ranks on fewer cores only slow the two-level run down; its claims and figure say so
    with launcher.sharing_cores_said_elsewhere():
        return {
            "cheaper_sync_compression": record_compression(progress=progress, **settings["cheaper_sync_compression"]),
            "cheaper_sync_local_sgd": record_local_sgd(progress=progress, **settings["cheaper_sync_local_sgd"]),
            "cheaper_sync_local_sgd_k1": record_local_sgd(progress=progress, **settings["cheaper_sync_local_sgd_k1"]),
            "cheaper_sync_hierarchical": record_hierarchical(progress=progress,
                                                             **settings["cheaper_sync_hierarchical"]),
        }
