"""The record of one MLP trained with Adam at ZeRO stages 0 to 3 (FSDP) in the same k ranks, on the same data.

Written by :func:`dpviz.topics.sharding.run_sharding.record_sharding`. Per stage: the full parameters after every step,
a digest of what each rank held, the peak bytes each rank held in each phase by category (counted from
its tensors), the bytes each rank sent in the ring's reduce-scatter and all-gather, and each step's time;
and a trace of one step (the last) per stage and rank: each event (a phase starting, a layer gathered or
freed, a gradient made or reduce-scattered), when it happened and the bytes held right after it.
Optionally the same training under torch's own FSDP2 (``fully_shard``), the oracle.

The trace arrays are optional so that records made before the trace was added still load; every record
made now has them, and the timeline figure needs them.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.plan import FigurePlan
from dpviz.engine.schema import Array, Meta, Kind, RankRecord, ran_on, register
from dpviz.engine.tolerance import GRAD_TOLERANCE
from dpviz.topics.sharding import theory

PHASES, CATEGORIES, STAGE_NAMES = theory.PHASES, theory.CATEGORIES, theory.STAGE_NAMES
TRACED = "in records made since the step trace was added (the timeline figure needs them)"

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
        Array("trace_step", (), "int64", "the step traced at every stage (counted from 0): the last", optional=TRACED),
        Array("trace_count", ("S",), "int64", "events in each stage's trace, the same on every rank; the trace "
                                              "arrays are padded past it (seconds and bytes 0, layer and action -1)",
              optional=TRACED),
        Array("trace_seconds", ("S", "k", "E"), "float64", "each event's time since the traced step began "
                                                           "(time.perf_counter on the rank)", optional=TRACED),
        Array("trace_bytes", ("S", "k", "E"), "int64", "bytes the rank held right after each event, every "
                                                       "category together", optional=TRACED),
        Array("trace_layer", ("S", "k", "E"), "int64", "the layer of each event, or -1 for an event of no one "
                                                       "layer (a phase starting)", optional=TRACED),
        Array("trace_action", ("S", "k", "E"), "int64", "what each event was: its index in "
                                                        "dpviz.topics.sharding.theory.TRACE_ACTIONS (begin, forward, "
                                                        "backward, step, end, gather, gathered, free, grad, "
                                                        "reduce-scatter, reduced)", optional=TRACED),
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
        """(phases, categories): :func:`dpviz.topics.sharding.theory.bytes_held` for this model, k and float32 Adam."""
        return theory.bytes_held(self.unit_size, self.k, zero_stage=zero_stage, element_bytes=int(self.meta["element_bytes"]))

    def modeled_bytes(self, zero_stage: int) -> dict:
        """Bytes per rank per step by :func:`dpviz.topics.sharding.theory.bytes_sent`."""
        return theory.bytes_sent(self.unit_size, self.k, zero_stage=zero_stage, element_bytes=int(self.meta["element_bytes"]))

    def sent(self) -> np.ndarray:
        """(S, steps, k): bytes each rank sent in each step, both ring phases."""
        return self.rs_bytes + self.ag_bytes

    @property
    def traced(self) -> bool:
        """Whether this record carries the step traces (every record made since they were added)."""
        return self.trace_count is not None

    def timeline(self, zero_stage: int, rank: int = 0) -> dict:
        """The traced step of ``zero_stage`` on ``rank``: ``{"seconds", "bytes", "layer", "action"}``, one entry
        per event (padding dropped), ``action`` as words from :data:`dpviz.topics.sharding.theory.TRACE_ACTIONS`."""
        if not self.traced:
            raise ValueError("this sharding record has no step traces; record it again with this dpviz.")
        row = self.index(zero_stage)
        if not (isinstance(rank, (int, np.integer)) and 0 <= rank < self.k):
            raise ValueError(f"rank must be an integer from 0 to {self.k - 1}; got {rank!r}.")
        n = int(self.trace_count[row])
        codes = self.trace_action[row, rank, :n]
        return {"seconds": self.trace_seconds[row, rank, :n], "bytes": self.trace_bytes[row, rank, :n],
                "layer": self.trace_layer[row, rank, :n],
                "action": np.array([theory.TRACE_ACTIONS[c] if 0 <= c < len(theory.TRACE_ACTIONS) else "?"
                                    for c in codes.tolist()])}

    def uses(self, zero_stage: int, rank: int = 0) -> list:
        """Each time ``rank`` held a layer whole in the traced step: ``(layer, pass, start, end)``, seconds from
        the step's start, pass ``"fwd"`` or ``"bwd"``. At ZeRO-3 a forward use runs from the layer's gather to its
        free, a backward use from its gather to the end of its gradient's reduce-scatter (the gathered parameters,
        then the full gradient); at ZeRO-2 only backward uses, from each gradient made to its reduce-scatter's end."""
        line = self.timeline(zero_stage, rank)
        opens = "gather" if zero_stage == 3 else "grad"
        out, open_at, backward = [], {}, False
        for t, layer, action in zip(line["seconds"].tolist(), line["layer"].tolist(), line["action"].tolist()):
            backward = backward or action == "backward"
            if action == opens and layer not in open_at:
                open_at[layer] = t
            elif layer in open_at and action == ("reduced" if backward else "free"):
                out.append((layer, "bwd" if backward else "fwd", open_at.pop(layer), t))
        return out

    def rings(self, zero_stage: int, rank: int = 0) -> list:
        """Each ring collective of one layer ``rank`` traced in the step: ``(kind, layer, start, end)``, seconds,
        ``kind`` ``"all-gather"`` (from "gather" to "gathered") or ``"reduce-scatter"`` (to "reduced")."""
        line = self.timeline(zero_stage, rank)
        ends = {"gather": ("gathered", "all-gather"), "reduce-scatter": ("reduced", "reduce-scatter")}
        out, open_at = [], {}
        for t, layer, action in zip(line["seconds"].tolist(), line["layer"].tolist(), line["action"].tolist()):
            if action in ends:
                open_at[(ends[action][0], layer)] = (ends[action][1], t)
            elif (action, layer) in open_at:
                kind, start = open_at.pop((action, layer))
                out.append((kind, layer, start, t))
        return out

    def modeled_trace(self, zero_stage: int) -> tuple:
        """``(layers, actions, bytes)`` of one step by :func:`dpviz.topics.sharding.theory.step_trace`."""
        return theory.step_trace(self.unit_size, self.k, zero_stage=zero_stage, element_bytes=int(self.meta["element_bytes"]))

    def check(self, tol: float = GRAD_TOLERANCE) -> str:
        """Assert that every stage trained the same parameters as plain data parallelism; say what was checked.

        (The memory, the bytes and the oracle are asserted by :mod:`dpviz.topics.sharding.claims`.)
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
    settings={  # dpviz.topics.sharding.run_sharding.ShardingConfig; k = 2 also trains under torch's fully_shard, the oracle
        "sharding_k2": dict(k=2, fsdp=True),
        "sharding_k4": dict(k=4),
    },
)
