"""Sync rarely: DiLoCo, local SGD with an outer optimizer, beside local SGD and plain data parallelism, on real ranks.

    from dpviz.topics.when_a_replica_fails.run_diloco import record_diloco
    run = record_diloco(k=2, steps=48, H=8)
    run.bytes_per_step        # {"dp": 4P, "local": 4P/H, "diloco": 4P/H, "streaming": 4P/H}: counted in the ranks
    run.largest_message       # streaming DiLoCo's is 1/F of the others'
    run.full_loss["diloco"]   # the whole data set's loss at each synced θ

Plain DP, local SGD, DiLoCo and streaming DiLoCo (one fragment of θ at a time) start from the same θ0 and take
the same batches. The oracle is a numpy recomputation
(:func:`~dpviz.topics.when_a_replica_fails.theory.outer_step_error`): from the parameters every rank held before
each sync, it recomputes the average and DiLoCo's outer Nesterov step, and compares with what the ranks set.
Where torchft is installed,
``tests/test_ch15_torchft.py`` also runs ``torchft.local_sgd.DiLoCo`` in two replica groups joined by a real
Lighthouse server and torchft's quorum-based gloo group, on the same θ0 and batches, and holds dpviz's θ after
every outer step to it within 1.5e-7.

This module is the torch-free front; the ranks run :mod:`dpviz.topics.when_a_replica_fails.rank_diloco`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine import launch as launcher
from dpviz.engine.checks import check_timeout
from dpviz.topics.ground_floor.run_training import TrainConfig
from dpviz.topics.when_a_replica_fails.records import MODES, DilocoRun, DilocoSettings
from dpviz.topics.when_a_replica_fails.theory import outer_step_error  # noqa: F401 - importable from here too


def diloco_worker(rank: int, world_size: int, config) -> dict:
    """Runs in each rank: :func:`dpviz.topics.when_a_replica_fails.rank_diloco.diloco_worker` (with torch)."""
    from dpviz.topics.when_a_replica_fails.rank_diloco import diloco_worker

    return diloco_worker(rank, world_size, config)


@dataclass
class DilocoConfig(DilocoSettings):
    """The settings a record keeps (:class:`~dpviz.topics.when_a_replica_fails.records.DilocoSettings`), plus what a
    live run alone needs: a stall timeout, and the checks of the TrainConfig its ranks draw batches from."""
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        super().__post_init__()
        check_timeout("stall_timeout", self.stall_timeout)
        self.train_config()

    def train_config(self) -> TrainConfig:
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)


def record_diloco(config: DilocoConfig | None = None, **overrides) -> DilocoRun:
    """Launch k ranks that train plain DP, local SGD and DiLoCo at H; return what each did."""
    config = DilocoConfig(**{**(asdict(config) if config else {}), **overrides})
    results = launcher.launch(diloco_worker, config.k, args=(config,), backend="gloo", threads=1,
                              stall_timeout=config.stall_timeout, total_steps=len(MODES) * config.steps)
    return DilocoRun(
        config,
        {m: np.mean([r[m]["loss"] for r in results], axis=0) for m in MODES},
        {m: results[0][m]["full_loss"] for m in MODES},
        {m: np.stack([r[m]["before"] for r in results], axis=1) for m in MODES if m != "dp"},
        {m: results[0][m]["after"] for m in MODES if m != "dp"},
        results[0]["theta0"], int(results[0]["theta0"].size), {m: results[0][m]["sent"] for m in MODES},
        results[0]["streaming"]["fragment"], results[0]["streaming"]["edges"])
