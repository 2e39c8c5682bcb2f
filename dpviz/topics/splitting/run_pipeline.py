"""Pipeline parallelism for real: an MLP's layers cut into p stages on p ranks, one training step on m micro-batches.

    from dpviz.topics.splitting.run_pipeline import PipelineConfig, record_pipeline, record_pipelines
    run = record_pipeline(p=2, m=4)                       # 2 real processes, one stage each
    print(run.check())                                    # outputs and gradients equal the unsplit model's
    run.idle_fraction(), run.bubble()                     # measured idle share beside (p-1)/(m+p-1)
    pipe, one = record_pipelines([PipelineConfig(p=2), PipelineConfig(p=1)])   # one launch: 2 stages, then one alone

    python -m dpviz.topics.splitting.run_pipeline --out dpviz/records/shipped_runs   # record the shipped grid again (about a minute)

Stage s holds a contiguous run of the MLP's hidden layers (the last stage also the output layer
and the loss). For each micro-batch, stage s receives the activations from stage s-1 with
``dist.recv``, runs its layers, and hands its output to stage s+1 with ``dist.isend``; on the way
back it receives the gradient of its output from stage s+1, runs backward, and sends the gradient
of its input to stage s-1. The order of those passes is :func:`dpviz.topics.splitting.theory_pipeline.stage_order`
(``"gpipe"`` or ``"1f1b"``). Parameter gradients add up over the micro-batches, each micro-batch's
loss weighted 1/m, so the step's gradient is that of the whole batch.

Every stage runs the step once to warm up; then, for each timed repeat, all stages meet at a
barrier and take as their common origin the moment the first of them left it. Every time is read
with ``time.perf_counter``, which on one machine is a single monotonic clock shared by all
processes, so a stage's times and its neighbours' compare directly (a receive never appears to end
before the matching send began).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dpviz import course
from dpviz.engine.fronts import rank_side_names, record_shipped
from dpviz.engine.checks import check_choice, check_int, check_seed, check_timeout
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.topics.splitting.records_pipeline import GRID_M, GRID_P, PipelineRun, grid_name
from dpviz.topics.ground_floor.records import rel_err
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran
from dpviz.topics.splitting import theory_pipeline as theory


def pipeline_worker(rank: int, world_size: int, configs: list) -> list[dict]:
    """Runs in each rank: :func:`dpviz.topics.splitting.rank_pipeline.pipeline_worker`, imported there (with torch), not here."""
    from dpviz.topics.splitting.rank_pipeline import pipeline_worker

    return pipeline_worker(rank, world_size, configs)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.splitting.rank_pipeline", (
    "stage_layers", "split_model", "make_model", "load_batch", "unsplit",
))


@dataclass
class PipelineConfig:
    p: int = 2                 # stages, one rank each
    m: int = 4                 # micro-batches in the step
    schedule: str = "gpipe"    # "gpipe" (all forwards, then all backwards) or "1f1b"
    batch: int = 2048          # examples in the step's batch; must split into m equal micro-batches
    width: int = 256           # units per layer; the inputs have this width too, so every hidden layer costs the same
    depth: int = 12            # hidden layers, shared out among the stages (12 splits evenly for p = 1, 2, 3, 4)
    seed: int = 0              # seeds the data and the model
    keep_grads: bool = True    # keep both P-long gradients in the record (the shipped runs keep only their errors)
    repeats: int = 3           # timed steps; the record keeps the one with the shortest span (the least disturbed)
    threads: int = 1           # intra-op threads per stage, the same for every p so that times compare
    stall_timeout: float = 60.0  # seconds a stage may go without progress before it is named

    def __post_init__(self):
        self.depth = check_int("depth", self.depth, low=1, high=64)
        self.p = check_int("p", self.p)
        if not 1 <= self.p <= self.depth:
            raise ValueError(
                f"p must be an integer from 1 to depth={self.depth}, since every stage needs at least one of the "
                f"model's {self.depth} hidden layers; got p={self.p}."
            )
        self.m = check_int("m", self.m, low=1, high=4096)
        self.batch = check_int("batch", self.batch, low=1, high=1 << 16)
        if self.batch % self.m:
            raise ValueError(f"batch must be a multiple of m={self.m} to split into equal micro-batches; got batch={self.batch}.")
        check_choice("schedule", self.schedule, theory.SCHEDULES)
        self.width = check_int("width", self.width, low=1, high=1 << 14)
        self.threads = check_int("threads", self.threads, low=1, high=4096)
        self.repeats = check_int("repeats", self.repeats, low=1, high=100)
        check_timeout("stall_timeout", self.stall_timeout)
        check_seed("seed", self.seed)

    @property
    def micro_batch(self) -> int:
        return self.batch // self.m


def assemble(config: PipelineConfig, results: list[dict], unsplit: tuple, backend: str) -> PipelineRun:
    """Stack the stages' results into one :class:`PipelineRun`, with the unsplit model's outputs and gradient."""
    big_output, big_grad, big_loss = unsplit  # the whole model, run by one rank
    big_output, big_grad = big_output.copy(), big_grad.copy()  # configs with one model share it: a record owns its own
    grads = [r["grad"] for r in results]
    bounds = np.cumsum([0] + [len(g) for g in grads])
    grad = np.concatenate(grads)
    # Keep the timed step the machine disturbed least: the one that took the shortest span.
    spans = [theory.span([r["timed"][i]["fwd"] for r in results], [r["timed"][i]["bwd"] for r in results])
             for i in range(config.repeats)]
    best = int(np.argmin(spans))
    arrays = {name: np.stack([r["timed"][best][name] for r in results]) for name in ("fwd", "bwd", "send_fwd", "send_bwd")}
    arrays.update(
        finish=np.array([r["timed"][best]["finish"] for r in results]),
        sent_bytes=np.array([r["sent_bytes"] for r in results], dtype=np.int64),
        max_in_flight=np.array([r["max_in_flight"] for r in results], dtype=np.int64),
        stage_layers=np.array([r["layers"] for r in results], dtype=np.int64),
        stage_params=np.array([r["params"] for r in results], dtype=np.int64),
        output=results[-1]["output"],
        big_output=big_output,
        loss=np.float32(results[-1]["loss"]),
        big_loss=np.float32(big_loss),
        grad_rel_err=np.array([rel_err(grad[a:b], big_grad[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]),
    )
    if config.keep_grads:
        arrays.update(grad=grad, big_grad=big_grad)
    meta = dict(
        p=config.p, m=config.m, schedule=config.schedule, batch=config.batch, micro_batch=config.micro_batch,
        width=config.width, depth=config.depth, n_params=int(len(grad)), seed=config.seed, repeats=config.repeats,
        **where_it_ran(PipelineRun, backend=backend, threads_per_rank=results[0]["threads"]),
    )
    return PipelineRun(meta, arrays)


def record_pipelines(configs, *, progress: bool = False) -> list[PipelineRun]:
    """Run several pipelined steps in one launch (one process start); a record for each.

    The launch starts as many ranks as the largest p; a config with fewer stages runs on the first
    ranks while the others wait, so that ``PipelineConfig(p=1)`` times the same model, data and
    micro-batches on one process beside a pipeline of more stages.
    """
    configs = list(configs)
    if not configs or any(not isinstance(c, PipelineConfig) for c in configs):
        raise TypeError("configs must be a non-empty list of PipelineConfig.")
    configs = [PipelineConfig(**asdict(c)) for c in configs]  # checked again: a field may have been set since
    p = max(c.p for c in configs)
    if any(c.threads != configs[0].threads for c in configs):
        raise ValueError(f"configs must all have the same threads, since one launch sets them for every rank; "
                         f"got threads={[c.threads for c in configs]}.")
    with warnings.catch_warnings():
        if p > launcher.cpu_count():
            warnings.simplefilter("ignore")  # the records say p > cores, and every figure of them says so too
        results = launcher.launch(
            pipeline_worker, p, args=(configs,), backend="gloo", threads=configs[0].threads,
            stall_timeout=max(c.stall_timeout for c in configs),
            total_steps=sum(2 * c.m * (1 + c.repeats) for c in configs), progress=progress,
        )
    # each config's unsplit reference, from whichever rank computed it
    unsplit = {i: r[i]["unsplit"] for r in results for i in range(len(configs)) if r[i] and "unsplit" in r[i]}
    return [assemble(c, [r[i] for r in results[:c.p]], unsplit[i], "gloo") for i, c in enumerate(configs)]


def record_pipeline(config: PipelineConfig | None = None, *, progress: bool = False, **overrides) -> PipelineRun:
    """Launch ``p`` stages, run one pipelined step on ``m`` micro-batches, and return the :class:`PipelineRun`.

    ``record_pipeline(p=2, m=4, schedule="1f1b")``: keyword overrides build the config.
    """
    config = PipelineConfig(**{**(asdict(config) if config else {}), **overrides})
    return record_pipelines([config], progress=progress)[0]


GRID_REPEATS = 5  # timed steps per shipped run: recorded once, so a few more chances of an undisturbed one


def record_grid(out=SHIPPED_DIR, *, ps=GRID_P, ms=GRID_M, progress: bool = True) -> list[Path]:
    """Record the shipped grid: every p, m and schedule, one launch per p; write each record under ``out``."""
    written = []
    for p in ps:
        configs = [PipelineConfig(p=p, m=m, schedule=s, keep_grads=False, repeats=GRID_REPEATS)
                   for m in ms for s in theory.SCHEDULES]
        for config, run in zip(configs, record_pipelines(configs, progress=progress)):
            run.check()
            written.append(run.save(Path(out) / grid_name(p, config.m, config.schedule)))
            if progress:
                print(f"{written[-1].name}: idle {run.idle_fraction().mean():.2f} (modeled {run.bubble():.2f})")
    return written


def main(argv=None) -> None:
    record_shipped("python -m dpviz.topics.splitting.run_pipeline",
                   f"Record the pipeline runs shipped for {course.ref('splitting')}'s sliders.", record_grid, argv)


if __name__ == "__main__":
    main()
