"""The record of a local-SGD run: plain data parallelism beside local SGD at several H, and torch's averager.

Written by :func:`dpviz.topics.cheaper_sync.run_local_sgd.record_local_sgd`. Every training runs in the same k ranks from
the same θ0 on the same batches with plain SGD. Plain data parallelism all-reduces the gradient at every
step; local SGD with period H lets every rank step alone and averages the parameters after every H-th
step; the oracle does the same with torch's ``PeriodicModelAverager``. Every rank's parameters are kept
before each step and after the last (after that step's average, if any), and also just before each
step's average, so the replicas' drift can be measured at every step. Each step of plain data parallelism and
of the hand-written local SGD is timed, with the all-reduce in it alone, and each rank noted which steps it
averaged after.
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.cheaper_sync.records_compression import WARMUP_STEPS
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register

KIND = Kind(
    name="local_sgd",
    version=2,
    doc="k ranks trained one MLP with SGD from the same θ0 on the same batches, as plain data parallelism and as "
        "local SGD averaging the parameters every H steps (by hand, and with torch's PeriodicModelAverager); every "
        "rank's parameters at every step, before and after each average, every rank's loss, and step times.",
    arrays=(
        Array("period", ("N",), "int64", "H, local steps between two averages, one training each"),
        Array("params_dp", ("steps+1", "k", "P"), "float32", "every rank's parameters under plain data parallelism"),
        Array("loss_dp", ("steps", "k"), "float32", "each rank's loss on its shard, plain data parallelism"),
        Array("params_local", ("N", "steps+1", "k", "P"), "float32",
              "every rank's parameters under local SGD, before each step and after the last (after any average)"),
        Array("before_average", ("N", "steps", "k", "P"), "float32",
              "every rank's parameters right after each local step, before that step's average (if any)"),
        Array("loss_local", ("N", "steps", "k"), "float32", "each rank's loss on its shard under local SGD"),
        Array("t_step_dp", ("steps", "k"), "float64",
              "seconds of forward, backward and the gradient's all-reduce, plain data parallelism (SGD update left out)"),
        Array("t_sync_dp", ("steps", "k"), "float64", "seconds of that all-reduce alone"),
        Array("t_step_local", ("N", "steps", "k"), "float64",
              "seconds of forward, backward and, after every H-th step, the parameters' average, under local SGD "
              "(SGD update left out)"),
        Array("t_sync_local", ("N", "steps", "k"), "float64",
              "seconds of the average's all-reduce alone (0 on a step that did not average)"),
        Array("averaged", ("N", "steps", "k"), "bool", "True where the rank averaged the parameters after the step"),
        Array("params_torch", ("N", "steps+1", "k", "P"), "float32",
              "the same under torch's PeriodicModelAverager(period=H, warmup_steps=H−1)", optional="when oracle is set"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("b", "int", "examples per rank per step"),
        Meta("steps", "int", "SGD steps per training"),
        Meta("width", "int", "hidden units per layer"),
        Meta("depth", "int", "hidden layers"),
        Meta("d_in", "int", "input features"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("message_bytes", "int", "M, bytes of the float32 parameters, what one average all-reduces (P × 4)"),
        Meta("lr", "float", "learning rate η"),
        Meta("seed", "int", "seeds the data, the model and every batch draw"),
        Meta("dataset_size", "int", "examples in the data set"),
        Meta("oracle", "str", "the torch averager the hand-written loop was checked against (\"\": none)"),
        *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date"),
    ),
)


def drift_of(params: np.ndarray) -> np.ndarray:
    """max over ranks of ‖θ_r − mean θ‖ for params (..., k, P), in float64: (...)."""
    params = np.asarray(params, np.float64)
    return np.linalg.norm(params - params.mean(axis=-2, keepdims=True), axis=-1).max(axis=-1)


@register
class LocalSgdRecord(RankRecord):
    """A local-SGD run; every array of :data:`KIND` is an attribute."""

    KIND = KIND

    def describe(self) -> str:
        m = self.meta
        H = ", ".join(map(str, self.period.tolist()))
        return (f"local SGD run, k={m['k']}, MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters), "
                f"b={m['b']}, {m['steps']} SGD steps, H = {H}, {m['backend']}, {m['threads_per_rank']} thread(s) "
                f"per rank, {m['host']}, {m['cores']} cores, {m['date'][:10]}")

    def index(self, H: int) -> int:
        where = np.flatnonzero(self.period == H)
        if not where.size:
            raise ValueError(f"H must be one of this record's periods {self.period.tolist()}; got {H!r}.")
        return int(where[0])

    def synced(self, H: int) -> np.ndarray:
        """(steps,) True after the steps that end with an average: every H-th."""
        return (np.arange(self.steps) + 1) % H == 0

    def drift(self, H: int) -> np.ndarray:
        """(steps+1,) the replicas' drift max_r ‖θ_r − mean θ‖ before each step and after the last."""
        return drift_of(self.params_local[self.index(H)])

    def drift_before_average(self, H: int) -> np.ndarray:
        """(steps,) the drift right after each local step, before that step's average: the peak of each stretch."""
        return drift_of(self.before_average[self.index(H)])

    def all_reduces(self, H: int | None = None) -> np.ndarray:
        """(steps,) all-reduces made up to and including each step: one per step for plain DP (H None), else one per H."""
        steps = np.arange(1, self.steps + 1)
        return steps if H is None else steps // H

    def _timed(self, kind: np.ndarray) -> np.ndarray:
        """(steps,) True on the steps of one kind (a mask) whose times count: the training's first
        :data:`~dpviz.topics.cheaper_sync.records_compression.WARMUP_STEPS` left out as warm-up."""
        return kind & (np.arange(self.steps) >= WARMUP_STEPS)

    def median_step(self, H: int, *, averaged: bool) -> float:
        """Median seconds of local SGD's steps at ``H`` that averaged (or, ``averaged=False``, that did not), over
        every rank, the training's warm-up left out."""
        timed = self._timed(self.synced(H) if averaged else ~self.synced(H))
        if not timed.any():
            raise ValueError(f"H = {H} leaves no {'averaging' if averaged else 'local'} step to time after "
                             f"{WARMUP_STEPS} warm-up step(s) of {self.steps}; record more steps.")
        return float(np.median(self.t_step_local[self.index(H)][timed]))

    def step_seconds(self, H: int | None = None) -> float:
        """Seconds per step, from medians over every rank (plain data parallelism for H None): under local SGD,
        ((H − 1) · the median local step + the median step that averaged) / H, the cost of a period shared over
        its steps. The training's first step is left out as warm-up."""
        if H is None:
            return float(np.median(self.t_step_dp[self._timed(np.ones(self.steps, bool))]))
        local = (H - 1) * self.median_step(H, averaged=False) if H > 1 else 0.0
        return (local + self.median_step(H, averaged=True)) / H

    def local_step_seconds(self) -> float:
        """Median seconds of the local steps (forward and backward, no sync) of every H > 1, over every rank, the
        warm-up left out. On one rank it is what one device does in a step: a measured speedup's T_step(1)."""
        steps = [self.t_step_local[self.index(H)][self._timed(~self.synced(H))] for H in self.period.tolist() if H > 1]
        steps = np.concatenate(steps) if steps else np.zeros(0)
        if not steps.size:
            raise ValueError(f"a record with H = {self.period.tolist()} and {self.steps} steps has no local step to "
                             "time; record one with an H > 1 (a one-rank run: H = steps).")
        return float(np.median(steps))

    def sync_seconds(self, H: int | None = None) -> float:
        """Median seconds of one all-reduce of the M bytes (the gradient for H None, else the parameters), over the
        steps that made one, the warm-up left out."""
        if H is None:
            return float(np.median(self.t_sync_dp[self._timed(np.ones(self.steps, bool))]))
        timed = self._timed(self.synced(H))
        if not timed.any():
            raise ValueError(f"H = {H} leaves no averaging step to time after {WARMUP_STEPS} warm-up step(s) of "
                             f"{self.steps}; record more steps.")
        return float(np.median(self.t_sync_local[self.index(H)][timed]))

    def examples(self) -> np.ndarray:
        """(steps,) examples seen by all ranks together up to and including each step."""
        return np.arange(1, self.steps + 1) * self.k * self.b

    def mean_loss(self, H: int | None = None) -> np.ndarray:
        """(steps,) the ranks' mean loss on their shards at each step (plain DP for H None)."""
        loss = self.loss_dp if H is None else self.loss_local[self.index(H)]
        return loss.astype(np.float64).mean(axis=-1)
