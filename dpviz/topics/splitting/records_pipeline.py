"""The record of a pipelined training step: when every stage ran every pass, and what came out.

Written by :func:`dpviz.topics.splitting.run_pipeline.record_pipeline`; drawn as a Gantt chart by
:mod:`dpviz.topics.splitting.plots_pipeline`. p is the number of stages (one rank each), m the number of
micro-batches, B the examples in the batch, P the model's parameters. Times are seconds on one
clock shared by all stages (``time.perf_counter`` on one machine), from the moment the first stage
left a barrier.

    from dpviz.topics.splitting.records_pipeline import PipelineRun, shipped_grid
    grid = shipped_grid()                 # {(p, m, schedule): PipelineRun}, real runs shipped with dpviz
    run = grid[(2, 4, "gpipe")]
    run.idle_fraction(), run.bubble()     # measured beside (p - 1) / (m + p - 1)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.plan import FigurePlan
from dpviz.topics.ground_floor.records import rel_err
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register
from dpviz.engine.tolerance import GRAD_TOLERANCE
from dpviz.topics.splitting import theory_pipeline as theory

KIND = Kind(
    name="pipeline",
    version=1,
    doc="An MLP cut into p stages on p ranks ran one training step on m micro-batches, sending activations "
        "forward and their gradients back; when every forward, backward and send happened on every stage, "
        "and the outputs and gradients beside those of the unsplit model.",
    arrays=(
        Array("fwd", ("p", "m", 2), "float64", "start and end of each stage's forward pass of each micro-batch, seconds"),
        Array("bwd", ("p", "m", 2), "float64", "start and end of each stage's backward pass of each micro-batch, seconds"),
        Array("send_fwd", ("p", "m", 2), "float64",
              "start and end of handing each micro-batch's activations to the next stage (NaN on the last stage)", nonfinite="NaN where a stage has no neighbour to send to"),
        Array("send_bwd", ("p", "m", 2), "float64",
              "start and end of handing each micro-batch's input gradient to the previous stage (NaN on the first)", nonfinite="NaN where a stage has no neighbour to send to"),
        Array("finish", ("p",), "float64", "when each stage was done, its last sends delivered, seconds"),
        Array("sent_bytes", ("p", 2), "int64", "bytes each stage sent: activations forward, gradients backward"),
        Array("max_in_flight", ("p",), "int64", "the most micro-batches whose activations a stage held at once"),
        Array("stage_layers", ("p",), "int64", "hidden layers per stage (the last stage also holds the output layer)"),
        Array("stage_params", ("p",), "int64", "parameters held by each stage"),
        Array("output", ("B", 1), "float32", "the last stage's outputs for the whole batch, micro-batches in order"),
        Array("big_output", ("B", 1), "float32", "the unsplit model's outputs for the whole batch, in one process"),
        Array("loss", (), "float32", "the batch's loss, summed over micro-batches by the last stage"),
        Array("big_loss", (), "float32", "the unsplit model's loss on the whole batch"),
        Array("grad", ("P",), "float32", "every stage's accumulated parameter gradient, stages in order",
              optional="when the run kept gradients (the shipped runs keep only their errors)"),
        Array("big_grad", ("P",), "float32", "the unsplit model's gradient of the whole batch",
              optional="when the run kept gradients"),
        Array("grad_rel_err", ("p",), "float64",
              "per stage, max |grad − big_grad| / max |big_grad| over its parameters, computed when recorded"),
    ),
    meta=(
        Meta("p", "int", "pipeline stages, one rank each"),
        Meta("m", "int", "micro-batches per step"),
        Meta("schedule", "str", "\"gpipe\" (all forwards, then all backwards) or \"1f1b\" (one forward, one backward)"),
        Meta("batch", "int", "examples in the step's batch"),
        Meta("micro_batch", "int", "examples per micro-batch, batch / m"),
        Meta("width", "int", "units per layer (inputs too)"),
        Meta("depth", "int", "hidden layers of the MLP"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("seed", "int", "seeds the data and the model"),
        Meta("repeats", "int", "timed steps run after a warm-up one; the record keeps the one with the shortest span"),
        Meta("backend", "str", "the torch.distributed backend"),
        Meta("threads_per_rank", "int", "intra-op threads each stage ran with"),
        *ran_on("torch_version", "host", "cores", "date"),
    ),
)


@register
class PipelineRun(RankRecord):
    """One recorded pipelined step; each array of :data:`KIND` is an attribute."""

    KIND = KIND
    source = "measured"  # as opposed to a modeled theory.pipeline.Timeline

    @property
    def processes(self) -> int:
        """One process per stage: p (more stages than cores take turns on a core, and their times stretch)."""
        return self.p

    def describe(self) -> str:
        m = self.meta
        return (
            f"pipeline p={m['p']}, m={m['m']} micro-batches of {m['micro_batch']}, {theory.SCHEDULE_NAMES[m['schedule']]}, "
            f"MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters), {m['backend']}, "
            f"{m['threads_per_rank']} thread(s) per rank, {m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    # --- what the chapter compares ---

    def span(self) -> float:
        """Seconds from the first forward to the last backward."""
        return theory.span(self.fwd, self.bwd)

    def idle_fraction(self) -> np.ndarray:
        """(p,): the measured share of the span each stage did no forward or backward work."""
        return theory.idle_fractions(self.fwd, self.bwd)

    def bubble(self) -> float:
        """The modeled idle share, ``(p - 1) / (m + p - 1)``."""
        return theory.bubble_fraction(self.p, self.m)

    def busy(self) -> np.ndarray:
        """(p,): seconds each stage spent in forward and backward passes."""
        return theory.busy(self.fwd, self.bwd)

    def idle_parts(self) -> np.ndarray:
        """(p, 3): seconds each stage waited before its first forward, between its first forward and its last
        backward, and after its last backward (:func:`dpviz.topics.splitting.theory_pipeline.idle_parts`)."""
        return theory.idle_parts(self.fwd, self.bwd)

    def handoff_delays(self) -> np.ndarray:
        """Seconds from each handed-over input being ready to the pass that used it starting (zero in the model)."""
        return theory.handoff_delays(self.fwd, self.bwd, self.schedule)

    def replay(self) -> theory.Timeline:
        """These passes, each as long as measured, run again with free hand-offs (a modeled Timeline)."""
        return theory.replay(self.fwd, self.bwd, self.schedule)

    def output_rel_err(self) -> float:
        return rel_err(self.output, self.big_output)

    def check(self, tol: float = GRAD_TOLERANCE) -> str:
        """Assert that the split model computed what the unsplit one does, to rounding; return what was checked."""
        out_err = self.output_rel_err()
        assert out_err <= tol, f"pipeline outputs differ from the unsplit model's by {out_err:.2e} > {tol:g}"
        grad_err = float(self.grad_rel_err.max())
        assert grad_err <= tol, f"pipeline gradients differ from the unsplit model's by {grad_err:.2e} > {tol:g}"
        if self.grad is not None:
            assert np.isclose(rel_err(self.grad, self.big_grad), grad_err, rtol=0, atol=tol)
        loss_err = rel_err(self.loss, self.big_loss)
        assert loss_err <= tol, f"pipeline loss differs from the unsplit model's by {loss_err:.2e}"
        same = int((self.output == self.big_output).sum())
        return (
            f"p={self.p} stages, m={self.m} micro-batches ({self.schedule}): outputs equal the unsplit model's to "
            f"{out_err:.1e} ({same} of {self.output.size} bit for bit), parameter gradients to {grad_err:.1e} "
            f"(max relative error)."
        )


def idle_points(runs) -> dict:
    """The measured idle share of each run (mean over its stages), as arrays ``p``, ``m``, ``idle``, ``oversubscribed``."""
    runs = list(runs)
    return {
        "p": np.array([r.p for r in runs], dtype=np.int64),
        "m": np.array([r.m for r in runs], dtype=np.int64),
        "idle": np.array([r.idle_fraction().mean() for r in runs]),
        "oversubscribed": np.array([r.oversubscribed for r in runs], dtype=bool),
    }


GRID_P = (1, 2, 3, 4)
GRID_M = (1, 2, 4, 8)


def grid_name(p: int, m: int, schedule: str) -> str:
    return f"pipeline_p{p}_m{m}_{schedule}"


def shipped_grid(records_dir=SHIPPED_DIR) -> dict:
    """The shipped pipeline runs, keyed by (p, m, schedule): p in 1..4, m in 1, 2, 4, 8, both schedules.

    ``python -m dpviz.topics.splitting.run_pipeline`` records them again.
    """
    grid = {}
    for p in GRID_P:
        for m in GRID_M:
            for schedule in theory.SCHEDULES:
                path = Path(records_dir) / grid_name(p, m, schedule)
                if not path.with_suffix(".json").is_file():
                    raise FileNotFoundError(
                        f"path {str(path)!r}.json does not exist; record the shipped pipeline runs with "
                        f"`python -m dpviz.topics.splitting.run_pipeline --out {records_dir}`."
                    )
                grid[(p, m, schedule)] = PipelineRun.load(path)
    return grid


# --- the runs behind the splitting chapter's figures (recorded by ./run, saved in figures/records) ---

def pipeline_stem(p: int, m: int, schedule: str) -> str:
    """The record stem of a figure pipeline: p stages, m micro-batches, the schedule."""
    return f"pipeline_p{p}_m{m}_{schedule}"


# both pipelines with every m all-forwards-then-all-backwards, and p = 2, m = 4 also one-forward-one-backward;
# beside them the k = 2 tensor-parallel layer and k = 4 plain data parallelism beside ZeRO-1
FIGURE_PIPELINES = tuple((p, m, "gpipe") for p in (2, 4) for m in (1, 2, 4, 8)) + ((2, 4, "1f1b"),)
FIGURE_PLAN = FigurePlan(
    name="splitting",
    settings={
        # dpviz.topics.splitting.run_pipeline.PipelineConfig, one launch per p; repeats: timed steps, the least disturbed kept
        **{pipeline_stem(p, m, s): dict(p=p, m=m, schedule=s, keep_grads=False, repeats=3) for p, m, s in FIGURE_PIPELINES},
        "tensor_split_k2": dict(k=2),   # dpviz.topics.splitting.run_tensor_parallel.record_tensor_split
        "zero_k4": dict(k=4),           # dpviz.topics.splitting.run_zero.record_zero
    },
    quick={pipeline_stem(p, m, s): dict(repeats=1) for p, m, s in FIGURE_PIPELINES},
)
