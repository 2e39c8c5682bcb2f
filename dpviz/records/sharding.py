"""The record of one MLP trained with Adam at ZeRO stages 0 to 3 (FSDP) in the same k ranks, on the same data.

Written by :func:`dpviz.runs.sharding.record_sharding`. Per stage: the full parameters after every step,
a digest of what each rank held, the peak bytes each rank held in each phase by category (counted from
its tensors), the bytes each rank sent in the ring's reduce-scatter and all-gather, and each step's time.
Optionally the same training under torch's own FSDP2 (``fully_shard``), the oracle.
"""

from __future__ import annotations

import numpy as np

from dpviz.records.plan import FigurePlan
from dpviz.records.schema import Array, Meta, Kind, RankRecord, ran_on, register
from dpviz.records.tolerance import GRAD_TOLERANCE
from dpviz.theory import sharding as theory

PHASES, CATEGORIES, STAGE_NAMES = theory.PHASES, theory.CATEGORIES, theory.STAGE_NAMES

KIND = Kind(
    name="sharding",
    version=1,
    doc="k ranks trained one MLP with Adam four times from the same start, at ZeRO stages 0 (plain data "
        "parallelism), 1, 2 and 3 (FSDP), every collective the hand-written ring; per stage the parameters "
        "after each step, the bytes each rank held by phase and category, the bytes it sent, and step times.",
    arrays=(
        Array("stage", ("S",), "int64", "the ZeRO stage of each training: 0, 1, 2, 3"),
        Array("unit_size", ("L",), "int64", "parameters of each linear layer (weight and bias), the unit that is "
                                            "gathered and reduce-scattered; padded to a multiple of k when sharded"),
        Array("params", ("S", "steps+1", "P"), "float32", "the full parameters after each step: rank 0's at stages "
                                                          "0 to 2, the k ranks' shards put together at stage 3"),
        Array("param_digest", ("S", "steps+1", "k"), "bytes", "SHA-1 of what each rank held of the parameters: the "
                                                              "whole padded vector (stages 0 to 2), its shard (stage 3)"),
        Array("loss", ("S", "steps", "k"), "float32", "each rank's loss on its slice of the batch"),
        Array("memory", ("S", "k", 3, 4), "int64", "peak bytes each rank held in each phase (forward, backward, "
                                                    "step) for parameters, gradients, Adam's state, one layer's "
                                                    "transient full tensors"),
        Array("rs_bytes", ("S", "steps", "k"), "int64", "bytes each rank sent in reduce-scatters in each step"),
        Array("ag_bytes", ("S", "steps", "k"), "int64", "bytes each rank sent in all-gathers in each step"),
        Array("step_seconds", ("S", "steps", "k"), "float64", "each rank's wall time of each step, communication included"),
        Array("params_fsdp", ("steps+1", "P"), "float32", "the full parameters after each step under torch's "
              "fully_shard (FSDP2) and torch.optim.Adam", optional="when recorded with fsdp=True"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("b", "int", "examples per rank per step"),
        Meta("steps", "int", "Adam steps at each stage"),
        Meta("width", "int", "hidden units per layer"),
        Meta("depth", "int", "hidden layers"),
        Meta("d_in", "int", "input features"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("element_bytes", "int", "bytes per value (float32: 4)"),
        Meta("lr", "float", "Adam's learning rate η"),
        Meta("seed", "int", "seeds the data, the model and every batch draw"),
        Meta("dataset_size", "int", "examples in the data set"),
        Meta("collectives", "str", "what each stage sent, and how"),
        *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date"),
    ),
)


@register
class ShardingRun(RankRecord):
    """ZeRO stages 0 to 3 side by side; each array of :data:`KIND` is an attribute."""

    KIND = KIND

    @property
    def message_bytes(self) -> int:
        """M, the bytes of one full (padded) gradient."""
        return int(theory.padded_sizes(self.unit_size, self.k).sum()) * int(self.meta["element_bytes"])

    def describe(self) -> str:
        m = self.meta
        return (
            f"k={m['k']}, b={m['b']}, MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters), adam, "
            f"lr={m['lr']:g}, {m['steps']} steps at ZeRO stages 0–3{', with FSDP2' if self.params_fsdp is not None else ''}, "
            f"{m['backend']}, {m['threads_per_rank']} thread(s) per rank, {m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    def index(self, zero_stage: int) -> int:
        """The row of ``zero_stage`` in the per-stage arrays."""
        rows = np.flatnonzero(self.stage == zero_stage)
        if not rows.size:
            raise ValueError(f"zero_stage must be one of {self.stage.tolist()}; got {zero_stage!r}.")
        return int(rows[0])

    def max_param_diff(self, zero_stage: int) -> np.ndarray:
        """(steps+1,): the largest |stage − plain data parallelism| over the parameters, after each step."""
        return np.abs(self.params[self.index(zero_stage)].astype(np.float64) - self.params[self.index(0)]).max(axis=1)

    def modeled_memory(self, zero_stage: int) -> np.ndarray:
        """(phases, categories): :func:`dpviz.theory.sharding.bytes_held` for this model, k and float32 Adam."""
        return theory.bytes_held(self.unit_size, self.k, zero_stage=zero_stage, element_bytes=int(self.meta["element_bytes"]))

    def modeled_bytes(self, zero_stage: int) -> dict:
        """Bytes per rank per step by :func:`dpviz.theory.sharding.bytes_sent`."""
        return theory.bytes_sent(self.unit_size, self.k, zero_stage=zero_stage, element_bytes=int(self.meta["element_bytes"]))

    def sent(self) -> np.ndarray:
        """(S, steps, k): bytes each rank sent in each step, both ring phases."""
        return self.rs_bytes + self.ag_bytes

    def check(self, tol: float = GRAD_TOLERANCE) -> str:
        """Assert that every stage trained the same parameters as plain data parallelism; say what was checked.

        (The memory, the bytes and the oracle are asserted by :mod:`dpviz.claims.sharding`.)
        """
        from_stage0 = [float(self.max_param_diff(int(s)).max()) for s in self.stage]
        scale = float(np.abs(self.params[self.index(0)]).max())
        for stage, diff in zip(self.stage, from_stage0):
            assert diff <= tol * scale, (f"ZeRO stage {stage}'s parameters differ from plain data parallelism's by "
                                         f"{diff:.2e}, more than {tol:g} of the largest parameter ({scale:.3g})")
        return (f"k={self.k}: the parameters of ZeRO stages 1, 2 and 3 match plain data parallelism to "
                f"{max(from_stage0):.1e} after each of {self.steps} steps.")


# --- the runs behind the shard-everything chapter's figures (recorded by ./run, saved in figures/records) ---

FIGURE_KS = (2, 4)  # the same model at both k; nothing drawn from them is a time, so 4 ranks on 2 cores is fine
FIGURE_PLAN = FigurePlan(
    name="sharding",
    settings={  # dpviz.runs.sharding.ShardingConfig; k = 2 also trains under torch's fully_shard, the oracle
        "sharding_k2": dict(k=2, fsdp=True),
        "sharding_k4": dict(k=4),
    },
)
