"""The record of plain data parallelism beside sharded optimizer state (ZeRO stage 1), on the same data.

Written by :func:`dpviz.topics.splitting.run_zero.record_zero`. Both trainings run in the same k ranks from the
same start with Adam: plain data parallelism all-reduces the gradient and every rank updates all
P parameters with a full copy of Adam's state; ZeRO-1 reduce-scatters the gradient, each rank
updates only its own shard with Adam's state for that shard alone, and an all-gather hands
everyone the updated parameters.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.schema import Array, Kind, Meta, Record, ran_on, register
from dpviz.engine.tolerance import GRAD_TOLERANCE
from dpviz.topics.splitting import theory_memory as memory

PARTS = memory.PARTS  # params, grads, optimizer

KIND = Kind(
    name="zero",
    version=1,
    doc="k ranks trained one MLP with Adam twice from the same start, as plain data parallelism and with "
        "the optimizer state sharded (ZeRO-1); both parameter histories, the bytes of training state each "
        "rank held, and the bytes each rank sent to reduce-scatter and all-gather.",
    arrays=(
        Array("params_dp", ("steps+1", "k", "P"), "float32", "every rank's parameters under plain data parallelism"),
        Array("params_zero", ("steps+1", "k", "P"), "float32", "every rank's parameters under ZeRO-1"),
        Array("loss_dp", ("steps", "k"), "float32", "each rank's loss on its shard, plain data parallelism"),
        Array("loss_zero", ("steps", "k"), "float32", "each rank's loss on its shard, ZeRO-1"),
        Array("shard_start", ("k",), "int64", "the first parameter of each rank's shard"),
        Array("shard_size", ("k",), "int64", "parameters in each rank's shard"),
        Array("memory_dp", ("k", 3), "int64", "bytes each rank held for parameters, gradients, Adam state (plain)"),
        Array("memory_zero", ("k", 3), "int64", "bytes each rank held for parameters, gradients, Adam state (ZeRO-1)"),
        Array("rs_bytes", ("steps", "k"), "int64", "bytes each rank sent in the reduce-scatter of each step"),
        Array("ag_bytes", ("steps", "k"), "int64", "bytes each rank sent in the all-gather of each step"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("b", "int", "examples per rank per step"),
        Meta("steps", "int", "optimizer steps"),
        Meta("width", "int", "hidden units per layer"),
        Meta("depth", "int", "hidden layers"),
        Meta("d_in", "int", "input features"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("element_bytes", "int", "bytes per value (float32: 4)"),
        Meta("lr", "float", "Adam's learning rate η"),
        Meta("seed", "int", "seeds the data, the model and every batch draw"),
        Meta("dataset_size", "int", "examples in the data set"),
        Meta("collectives", "str", "how the gradient was combined in each training"),
        *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date"),
    ),
)


@register
class ZeroRun(Record):
    """Plain data parallelism and ZeRO-1 side by side; each array of :data:`KIND` is an attribute."""

    KIND = KIND

    @property
    def message_bytes(self) -> int:
        """M, the bytes of one full gradient."""
        return self.n_params * int(self.meta["element_bytes"])

    def describe(self) -> str:
        m = self.meta
        return (
            f"k={m['k']}, b={m['b']}, MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters), adam, "
            f"lr={m['lr']:g}, {m['steps']} steps, plain data parallelism beside ZeRO-1, {m['backend']}, "
            f"{m['threads_per_rank']} thread(s) per rank, {m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    def max_param_diff(self) -> np.ndarray:
        """(steps+1,): the largest |ZeRO-1 − plain| over ranks and parameters, per recorded state."""
        return np.abs(self.params_zero.astype(np.float64) - self.params_dp).max(axis=(1, 2))

    def modeled_memory(self, zero_stage: int) -> dict:
        """Bytes per rank by :func:`dpviz.topics.splitting.theory_memory.bytes_per_rank` for this model, k and Adam."""
        return memory.bytes_per_rank(self.n_params, self.k, zero_stage=zero_stage, optimizer="adam",
                                     element_bytes=int(self.meta["element_bytes"]))

    def check(self, tol: float = GRAD_TOLERANCE) -> str:
        """Assert the claims of the chapter on this run and say what was checked."""
        for name in ("params_dp", "params_zero"):
            history = getattr(self, name)
            assert (history == history[:, :1]).all(), f"{name}: the ranks' parameters differ"
        scale = np.abs(self.params_dp).max()
        diff = float(self.max_param_diff().max())
        assert diff <= tol * scale, f"ZeRO-1 parameters differ from plain data parallelism by {diff:.2e}"
        element = int(self.meta["element_bytes"])
        assert (self.memory_zero[:, 2] == 2 * self.shard_size * element).all(), "a rank holds more than its shard of Adam state"
        assert self.memory_zero[:, 2].sum() == self.memory_dp[0, 2], "the shards of Adam state do not add up to one copy"
        assert (self.memory_dp[:, 2] == 2 * self.n_params * element).all()
        assert (self.rs_bytes.sum(axis=1) == (self.k - 1) * self.message_bytes).all()
        same = int((self.params_zero[-1] == self.params_dp[-1]).sum())
        return (
            f"k={self.k}: ZeRO-1 parameters match plain data parallelism to {diff:.1e} at every step "
            f"({same} of {self.params_dp[-1].size} final values bit for bit); each rank holds "
            f"{self.memory_zero[0, 2]:,} of the {self.memory_dp[0, 2]:,} bytes of Adam state."
        )
