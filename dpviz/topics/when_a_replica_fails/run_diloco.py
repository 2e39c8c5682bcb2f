"""Sync rarely: DiLoCo, local SGD with an outer optimizer, beside local SGD and plain data parallelism, on real ranks.

    from dpviz.topics.when_a_replica_fails.run_diloco import record_diloco
    run = record_diloco(k=2, steps=48, H=8)
    run.bytes_per_step        # {"dp": 4P, "local": 4P/H, "diloco": 4P/H, "streaming": 4P/H}: counted in the ranks
    run.largest_message       # streaming DiLoCo's is 1/F of the others'
    run.full_loss["diloco"]   # the whole data set's loss at each synced θ

Plain DP, local SGD, DiLoCo and streaming DiLoCo (one fragment of θ at a time) start from the same θ0 and take
the same batches. The oracle is a numpy recomputation (:func:`outer_step_error`): from the parameters every rank held before each sync, it recomputes the average and
DiLoCo's outer Nesterov step, and compares with what the ranks set. Where torchft is installed,
``tests/test_ch15_torchft.py`` also runs ``torchft.local_sgd.DiLoCo`` in two replica groups joined by a real
Lighthouse server and torchft's quorum-based gloo group, on the same θ0 and batches, and holds dpviz's θ after
every outer step to it within 1.5e-7.

This module is the torch-free front; the ranks run :mod:`dpviz.topics.when_a_replica_fails.rank_diloco`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine import launch as launcher
from dpviz.engine.checks import check_int, check_lr, check_real, check_timeout
from dpviz.topics.ground_floor.run_training import TrainConfig

MODES = ("dp", "local", "diloco", "streaming")


def diloco_worker(rank: int, world_size: int, config) -> dict:
    """Runs in each rank: :func:`dpviz.topics.when_a_replica_fails.rank_diloco.diloco_worker` (with torch)."""
    from dpviz.topics.when_a_replica_fails.rank_diloco import diloco_worker

    return diloco_worker(rank, world_size, config)


@dataclass
class DilocoConfig:
    k: int = 2                  # ranks
    b: int = 16                 # examples per rank per step
    steps: int = 48             # inner steps
    H: int = 8                  # inner steps between two syncs
    width: int = 32             # hidden units per layer of the MLP
    depth: int = 2              # hidden layers
    d_in: int = 16              # input features
    lr: float = 0.05            # inner learning rate η
    outer_lr: float = 0.7       # η_out, DiLoCo's outer learning rate
    outer_momentum: float = 0.9  # μ, its Nesterov momentum
    fragments: int = 2          # F: streaming DiLoCo syncs one of F fragments of θ every H/F steps
    seed: int = 0               # seeds the data, the model and every batch draw
    dataset_size: int = 512     # examples in the data set
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=10_000)
        self.H = check_int("H", self.H, low=1, high=self.steps)
        check_lr("lr", self.lr)
        self.outer_lr = check_real("outer_lr", self.outer_lr, low=0, high=10, low_open=True)
        self.outer_momentum = check_real("outer_momentum", self.outer_momentum, low=0, high=0.999)
        self.fragments = check_int("fragments", self.fragments, low=1, high=self.H)
        if self.H % self.fragments:
            raise ValueError(f"fragments must divide H={self.H}, so that one fragment syncs every H/F steps; "
                             f"got fragments={self.fragments}.")
        check_timeout("stall_timeout", self.stall_timeout)
        self.train_config()

    def train_config(self) -> TrainConfig:
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)


@dataclass
class DilocoRun:
    config: DilocoConfig
    loss: dict            # mode -> (steps,) mean over ranks of each step's training loss
    full_loss: dict       # mode -> (steps // H,) the whole data set's loss every H steps (at the synced θ)
    before: dict          # mode -> (syncs, k, P) each rank's θ just before each sync (local, diloco)
    after: dict           # mode -> (syncs, P) the θ every rank holds after each sync
    theta0: np.ndarray    # (P,)
    n_params: int
    sent: dict            # mode -> bytes each rank all-reduced in the whole run, counted in the ranks
    fragment: np.ndarray  # (syncs,) streaming: the fragment each sync sent
    edges: np.ndarray     # (F + 1,) streaming: fragment f is θ[edges[f]:edges[f + 1]]

    @property
    def bytes_per_step(self) -> dict:
        """Bytes each rank all-reduced per inner step, averaged over the run."""
        return {mode: self.sent[mode] / self.config.steps for mode in MODES}

    @property
    def largest_message(self) -> dict:
        """The bytes of the largest single all-reduce of each mode."""
        P = self.n_params
        return {"dp": 4 * P, "local": 4 * P, "diloco": 4 * P, "streaming": 4 * int(np.diff(self.edges).max())}


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


def outer_step_error(run: DilocoRun) -> float:
    """The numpy oracle: recompute every sync of DiLoCo (and local SGD's averages) from the parameters the ranks
    held before it, and return the largest difference from what the ranks set, relative to |θ|."""
    cfg = run.config
    worst = 0.0
    for mode in ("local", "diloco"):
        theta, v = run.theta0.astype(np.float64), None
        for before, after in zip(run.before[mode], run.after[mode]):
            mean = before.astype(np.float64).mean(axis=0)
            if mode == "local":
                theta = mean
            else:
                delta = theta - mean
                v = delta if v is None else cfg.outer_momentum * v + delta
                theta = theta - cfg.outer_lr * (delta + cfg.outer_momentum * v)
            worst = max(worst, float(np.abs(after - theta).max() / np.abs(theta).max()))
            theta = after.astype(np.float64)  # go on from what the ranks held, so errors do not compound
    # streaming: fragment by fragment, each with its own outer θ slice and velocity
    outer, velocities = run.theta0.astype(np.float64), {}
    for f, before, after in zip(run.fragment, run.before["streaming"], run.after["streaming"]):
        lo, hi = run.edges[f], run.edges[f + 1]
        delta = outer[lo:hi] - before[:, lo:hi].astype(np.float64).mean(axis=0)
        v = velocities[f] = delta if f not in velocities else cfg.outer_momentum * velocities[f] + delta
        expected = outer[lo:hi] - cfg.outer_lr * (delta + cfg.outer_momentum * v)
        worst = max(worst, float(np.abs(after[lo:hi] - expected).max() / np.abs(expected).max()))
        if not np.array_equal(after[:lo], before[0, :lo]) or not np.array_equal(after[hi:], before[0, hi:]):
            return float("inf")  # a sync changed what lies outside its fragment
        outer[lo:hi] = after[lo:hi]
    return worst
