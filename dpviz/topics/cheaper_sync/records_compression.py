"""The record of a compression run: the same training under DDP's plain all-reduce, fp16 and PowerSGD hooks.

Written by :func:`dpviz.topics.cheaper_sync.run_compression.record_compression`. In each *mode* the k ranks train the same
MLP from the same θ0 on the same batches with SGD inside ``DistributedDataParallel``; only the comm hook
differs. Every tensor the hook all-reduced is counted (``sent_bytes``, ``sent_calls``); the exact average
of the ranks' gradients was all-reduced beside it, uncounted, and ``grad_rel_err`` compares the two; that
all-reduce of the whole M bytes was timed on its own (``t_exact``) and left out of ``t_step``.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.checks import check_choice
from dpviz.engine.plan import FigurePlan
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register
from dpviz.topics.cheaper_sync.theory import POWERSGD_ALLREDUCES, powersgd_elements

FP16_TOLERANCE = 2e-3  # relative error of an fp16-compressed average: a few units of fp16 rounding (2^-11 ≈ 4.9e-4)
WARMUP_STEPS = 1  # a timing median leaves out each training's first step(s) (DDP builds its buckets in the first),
                  # and PowerSGD's first compressed step, where it allocates its P and Q


def mode_name(hook: str, rank: int = 0) -> str:
    """The mode's name in a record: ``allreduce``, ``fp16``, ``powersgd_r2``."""
    return f"powersgd_r{rank}" if hook == "powersgd" else hook


KIND = Kind(
    name="compression",
    version=2,
    doc="k ranks trained one MLP under DistributedDataParallel from the same θ0 on the same batches once per comm "
        "hook (DDP's all-reduce, fp16 compression, PowerSGD at several ranks r); the bytes each hook all-reduced per "
        "step, its averaged gradient's error against the exact average, the error-feedback memory, losses and "
        "step times, and the time of a plain all-reduce of the whole gradient beside each step.",
    arrays=(
        Array("mode", ("R",), "str", "the comm hook: allreduce, fp16, or powersgd_r<r>"),
        Array("powersgd_rank", ("R",), "int64", "PowerSGD's matrix_approximation_rank r (0: not PowerSGD)"),
        Array("param_shape", ("T", 2), "int64", "each parameter as the hook sees it, a matrix (rows, cols)"),
        Array("sent_bytes", ("R", "steps", "k"), "int64", "bytes of the tensors the hook handed to dist.all_reduce"),
        Array("sent_calls", ("R", "steps", "k"), "int64", "dist.all_reduce calls the hook made"),
        Array("grad_rel_err", ("R", "steps", "k"), "float64",
              "‖g − ḡ‖ / ‖ḡ‖: the hook's averaged gradient g against the exact average ḡ of the ranks' gradients"),
        Array("error_norm", ("R", "steps", "k"), "float64",
              "‖e‖, what PowerSGD's error feedback kept after the step for the next one (0: none kept)"),
        Array("loss", ("R", "steps", "k"), "float32", "each rank's loss on its shard, before the step"),
        Array("t_step", ("R", "steps", "k"), "float64", "seconds of forward, backward and the hook's sync (the exact average beside it left out)"),
        Array("t_exact", ("R", "steps", "k"), "float64",
              "seconds of the uncounted dist.all_reduce of the whole float32 gradient (M bytes) beside the hook"),
        Array("param_digest", ("R", "steps+1", "k"), "bytes", "SHA-1 (hex) of each rank's parameters before each step, and after the last"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("b", "int", "examples per rank per step"),
        Meta("steps", "int", "SGD steps per mode"),
        Meta("width", "int", "hidden units per layer"),
        Meta("depth", "int", "hidden layers"),
        Meta("d_in", "int", "input features"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("message_bytes", "int", "M, bytes of the float32 gradient (P × 4)"),
        Meta("lr", "float", "learning rate η"),
        Meta("seed", "int", "seeds the data, the model, the batches and PowerSGD's random start"),
        Meta("dataset_size", "int", "examples in the data set"),
        Meta("start_powersgd_iter", "int", "steps PowerSGD ran a plain all-reduce before compressing"),
        Meta("min_compression_rate", "float", "PowerSGD compresses an n₁×n₂ matrix only if (n₁ + n₂)·r times this is below n₁·n₂"),
        Meta("error_feedback", "bool", "whether PowerSGD kept and re-added what compression lost"),
        Meta("warm_start", "bool", "whether PowerSGD started each step's Q from the last one"),
        *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date"),
    ),
)


@register
class CompressionRecord(RankRecord):
    """A compression run; every array of :data:`KIND` is an attribute."""

    KIND = KIND

    def describe(self) -> str:
        m = self.meta
        return (f"compression run, k={m['k']}, MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters, "
                f"M = {m['message_bytes']:,} bytes), b={m['b']}, {m['steps']} SGD steps per hook, "
                f"{m['backend']}, {m['threads_per_rank']} thread(s) per rank, {m['host']}, {m['cores']} cores, "
                f"{m['date'][:10]}")

    def index(self, mode: str) -> int:
        check_choice("mode", mode, tuple(self.mode.tolist()))
        return int(np.flatnonzero(self.mode == mode)[0])

    def compressed_steps(self, mode: str) -> np.ndarray:
        """(steps,) True where ``mode`` compressed: every step for fp16, from start_powersgd_iter on for PowerSGD."""
        steps = np.arange(self.steps)
        if mode.startswith("powersgd"):
            return steps >= int(self.meta["start_powersgd_iter"])
        return np.full(self.steps, mode == "fp16")

    def expected_bytes(self, mode: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps,) bytes and all-reduce calls per rank that ``mode`` should send, from the parameters' shapes."""
        M = int(self.meta["message_bytes"])
        plain = np.full(self.steps, M, np.int64), np.ones(self.steps, np.int64)
        if mode == "allreduce":
            return plain
        if mode == "fp16":
            return np.full(self.steps, M // 2, np.int64), plain[1]
        r = int(self.powersgd_rank[self.index(mode)])
        sent = powersgd_elements(self.param_shape, r, min_compression_rate=float(self.meta["min_compression_rate"]))
        on = self.compressed_steps(mode)
        return np.where(on, 4 * sent["total"], M), np.where(on, POWERSGD_ALLREDUCES, 1)

    def timed_steps(self, mode: str) -> np.ndarray:
        """(steps,) True on the steps ``mode``'s time is read from: its own kind of step (PowerSGD: the compressed
        ones) after the first :data:`WARMUP_STEPS`, PowerSGD's first compressed step left out too (warm-up)."""
        own = np.ones(self.steps, bool)
        if mode.startswith("powersgd"):
            own = self.compressed_steps(mode)
            own[np.flatnonzero(own)[:1]] = False
        own[:WARMUP_STEPS] = False
        if not own.any():
            raise ValueError(f"mode {mode!r} has no step left to time after its warm-up in {self.steps} steps; record "
                             "more steps.")
        return own

    def step_seconds(self, mode: str = "allreduce") -> float:
        """Median seconds of a step (forward, backward, the hook's sync) under ``mode``, over its timed steps and
        every rank."""
        return float(np.median(self.t_step[self.index(mode)][self.timed_steps(mode)]))

    def sync_seconds(self) -> float:
        """Median seconds of the plain all-reduce of the M-byte gradient timed beside the plain hook's steps."""
        return float(np.median(self.t_exact[self.index("allreduce")][self.timed_steps("allreduce")]))

    def mean_loss(self, mode: str) -> np.ndarray:
        """(steps,) the loss on each whole global batch: the mean of the ranks' equal shards' losses."""
        return self.loss[self.index(mode)].astype(np.float64).mean(axis=1)


# --- the chapter's figure plan, and the workload its model prices -----------------------------------------

# Three kinds, one plan: this module holds it because compression comes first in the chapter. The recorder is
# dpviz.topics.cheaper_sync.run_local_sgd.record_cheaper_sync_plan (the one front that may import the other two).
# The k = 1 local-SGD run is the same workload on one rank (same b, model, seed, one thread) with H = steps: its
# local steps, forward and backward with no sync, are the T_step(1) that the chapter's measured speedups
# k · T_step(1) / T_step(k) divide by, the DDP hooks' and the hand-written loop's alike.
FIGURE_PLAN = FigurePlan(
    name="cheaper_sync",
    settings={
        "cheaper_sync_compression": dict(k=2, steps=16, ranks=(1, 2, 4)),     # dpviz.topics.cheaper_sync.run_compression
        "cheaper_sync_local_sgd": dict(k=2, steps=24, periods=(1, 2, 4, 8)),  # dpviz.topics.cheaper_sync.run_local_sgd
        "cheaper_sync_local_sgd_k1": dict(k=1, steps=24, periods=(24,), oracle=False),
        "cheaper_sync_hierarchical": dict(k=4, group_size=2),                  # dpviz.topics.cheaper_sync.run_hierarchical
    },
    quick={"cheaper_sync_compression": dict(steps=4, ranks=(1,)), "cheaper_sync_local_sgd": dict(steps=8),
           "cheaper_sync_local_sgd_k1": dict(steps=8, periods=(8,)), "cheaper_sync_hierarchical": dict(sizes=(1001,),
                                                                                                     repeats=2)},
)

# The modeled workload the chapter prices each method on: the recorded MLP's 6 KiB gradient is far too small for
# the wire to matter, so the model takes a bigger one (chosen, not measured): 16 square 4096×4096 layers, about
# 268 M parameters or 1.07 GB of float32 gradient, half a second of compute for one device's whole batch, on
# k = 8 devices, in two machines of 4 for the two levels.
PRICED_LAYERS = 16          # square weight matrices
PRICED_WIDTH = 4096         # n = m of each
PRICED_SHAPES = ((PRICED_WIDTH, PRICED_WIDTH),) * PRICED_LAYERS
PRICED_M = 4 * PRICED_LAYERS * PRICED_WIDTH ** 2  # bytes of float32 gradient
PRICED_T_COMPUTE = 0.5      # seconds: one device's forward and backward for the whole batch
PRICED_K = 8                # devices
PRICED_GROUP = 4            # devices per machine: NVLink inside, the chosen link between
PRICED_RANK = 4             # PowerSGD's r in the figure (the slider moves it)
PRICED_PERIOD = 8           # local SGD's H in the figure (the slider moves it)
