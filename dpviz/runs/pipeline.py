"""Pipeline parallelism for real: an MLP's layers cut into p stages on p ranks, one training step on m micro-batches.

    from dpviz.runs.pipeline import PipelineConfig, record_pipeline, record_pipelines
    run = record_pipeline(p=2, m=4)                       # 2 real processes, one stage each
    print(run.check())                                    # outputs and gradients equal the unsplit model's
    run.idle_fraction(), run.bubble()                     # measured idle share beside (p-1)/(m+p-1)
    pipe, one = record_pipelines([PipelineConfig(p=2), PipelineConfig(p=1)])   # one launch: 2 stages, then one alone

    python -m dpviz.runs.pipeline --out dpviz/records/shipped_runs   # record the shipped grid again (about a minute)

Stage s holds a contiguous run of the MLP's hidden layers (the last stage also the output layer
and the loss). For each micro-batch, stage s receives the activations from stage s-1 with
``dist.recv``, runs its layers, and hands its output to stage s+1 with ``dist.isend``; on the way
back it receives the gradient of its output from stage s+1, runs backward, and sends the gradient
of its input to stage s-1. The order of those passes is :func:`dpviz.theory.pipeline.stage_order`
(``"gpipe"`` or ``"1f1b"``). Parameter gradients add up over the micro-batches, each micro-batch's
loss weighted 1/m, so the step's gradient is that of the whole batch.

Every stage runs the step once to warm up; then, for each timed repeat, all stages meet at a
barrier and take as their common origin the moment the first of them left it. Every time is read
with ``time.perf_counter``, which on one machine is a single monotonic clock shared by all
processes, so a stage's times and its neighbours' compare directly (a receive never appears to end
before the matching send began).
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from dpviz.checks import check_choice, check_int, check_real
from dpviz.data import teacher_data
from dpviz.records.paths import SHIPPED_DIR
from dpviz.records.pipeline import GRID_M, GRID_P, PipelineRun, grid_name
from dpviz.records.run import rel_err
from dpviz.runs import launch as launcher
from dpviz.runs.models import build_model, flat_grad
from dpviz.runs.where import where_it_ran
from dpviz.theory import pipeline as theory


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
        self.batch = check_int("batch", self.batch, low=1)
        if self.batch % self.m:
            raise ValueError(f"batch must be a multiple of m={self.m} to split into equal micro-batches; got batch={self.batch}.")
        check_choice("schedule", self.schedule, theory.SCHEDULES)
        self.width = check_int("width", self.width, low=1, high=1 << 14)
        self.threads = check_int("threads", self.threads, low=1, high=4096)
        self.repeats = check_int("repeats", self.repeats, low=1, high=100)
        check_real("stall_timeout", self.stall_timeout, low=0, low_open=True)

    @property
    def micro_batch(self) -> int:
        return self.batch // self.m


def stage_layers(depth: int, p: int) -> list[int]:
    """Hidden layers per stage: as even as possible, the extra ones on the first stages."""
    return [len(part) for part in np.array_split(np.arange(depth), p)]


def split_model(model: nn.Sequential, depth: int, p: int) -> list[nn.Sequential]:
    """Cut the MLP (Linear, Tanh) × depth + Linear into p stages; the output layer joins the last one."""
    modules = list(model)
    stages, start = [], 0
    for s, n in enumerate(stage_layers(depth, p)):
        end = start + 2 * n + (1 if s == p - 1 else 0)
        stages.append(nn.Sequential(*modules[start:end]))
        start = end
    return stages


def make_model(config: PipelineConfig) -> nn.Sequential:
    return build_model("mlp", d_in=config.width, width=config.width, depth=config.depth, seed=config.seed)


def load_batch(config: PipelineConfig) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = teacher_data(config.batch, config.width, seed=config.seed)
    return torch.from_numpy(x), torch.from_numpy(y)


def _run_step(stage: nn.Sequential, rank: int, config: PipelineConfig, xs, ys, clock, first_step: int) -> dict:
    """Run one pipelined step's passes on this stage in schedule order; ``clock()`` gives seconds since the origin.

    Progress is reported once per pass, counting from ``first_step``.
    """
    p, m, width = config.p, config.m, config.width
    first, last = rank == 0, rank == p - 1
    nan = np.full((m, 2), np.nan)
    times = {"fwd": nan.copy(), "bwd": nan.copy(), "send_fwd": nan.copy(), "send_bwd": nan.copy()}
    held, peak, sent = {}, 0, [0, 0]
    outputs, loss_sum, pending = [None] * m, 0.0, []
    stage.zero_grad(set_to_none=False)
    for n_done, (kind, j) in enumerate(theory.stage_order(p, m, config.schedule, rank)):
        if kind == "F":
            if first:
                inp = xs[j]
            else:
                inp = torch.empty(config.micro_batch, width)
                dist.recv(inp, src=rank - 1)  # waiting here is the bubble: nothing to do until it arrives
                inp.requires_grad_(True)
            t0 = clock()
            out = stage(inp)
            if last:
                outputs[j] = out.detach().clone()
                out = torch.mean((out - ys[j]) ** 2) / m  # this micro-batch's share of the batch's mean loss
                loss_sum += out.item()
            times["fwd"][j] = (t0, clock())
            held[j] = (inp, out)
            peak = max(peak, len(held))
            if not last:
                t0 = clock()
                act = out.detach()
                pending.append((dist.isend(act, dst=rank + 1), act))  # the tensor must outlive the send
                times["send_fwd"][j] = (t0, clock())
                sent[0] += out.numel() * out.element_size()
        else:
            inp, out = held.pop(j)
            if last:
                t0 = clock()
                out.backward()
            else:
                grad_out = torch.empty_like(out)
                dist.recv(grad_out, src=rank + 1)
                t0 = clock()
                out.backward(grad_out)
            times["bwd"][j] = (t0, clock())
            if not first:
                t0 = clock()
                pending.append((dist.isend(inp.grad, dst=rank - 1), inp.grad))
                times["send_bwd"][j] = (t0, clock())
                sent[1] += inp.grad.numel() * inp.grad.element_size()
        launcher.report_progress(first_step + n_done)
    for req, _ in pending:
        req.wait()
    return {**times, "finish": clock(), "max_in_flight": peak, "sent_bytes": sent,
            "outputs": outputs, "loss": loss_sum}


def _sit_out(config: PipelineConfig, step: int) -> None:
    """A rank the config has no stage for: meet the stages at every barrier of the timed steps, and wait."""
    for _ in range(config.repeats):
        dist.barrier()
        dist.all_reduce(torch.tensor([np.inf], dtype=torch.float64), op=dist.ReduceOp.MIN)  # leaves the origin to the stages
    launcher.report_progress(step + 2 * config.m * (1 + config.repeats) - 1)
    dist.barrier()


def pipeline_worker(rank: int, world_size: int, configs: list) -> list[dict]:
    """One stage: for each config (any p up to world_size, m or schedule), a warm-up step, then the timed ones.

    Numpy results; None for a config with fewer stages than ranks on the ranks it leaves out, which
    wait in a barrier (asleep, so the stages have the cores) until its timed steps are done.
    """
    out, step = [], 0
    for config in configs:
        if rank >= config.p:
            _sit_out(config, step)
            step += 2 * config.m * (1 + config.repeats)
            out.append(None)
            continue
        model = make_model(config)
        stage = split_model(model, config.depth, config.p)[rank]
        x, y = load_batch(config)
        xs, ys = x.split(config.micro_batch), y.split(config.micro_batch)
        _run_step(stage, rank, config, xs, ys, time.perf_counter, step)  # warm-up: first-touch allocations, lazy init
        step += 2 * config.m
        timed = []
        for _ in range(config.repeats):
            dist.barrier()
            # One origin for all stages: the moment the first of them left the barrier. perf_counter reads
            # one monotonic clock for the whole machine, so the stages' times compare directly.
            left = torch.tensor([time.perf_counter()], dtype=torch.float64)
            dist.all_reduce(left, op=dist.ReduceOp.MIN)
            origin = float(left.item())
            result = _run_step(stage, rank, config, xs, ys, lambda: time.perf_counter() - origin, step)
            step += 2 * config.m
            timed.append({name: result[name] for name in ("fwd", "bwd", "send_fwd", "send_bwd", "finish")})
        last = rank == config.p - 1
        out.append({
            "timed": timed,
            **{name: result[name] for name in ("max_in_flight", "sent_bytes")},
            "output": torch.cat(result["outputs"]).numpy() if last else None,
            "loss": result["loss"] if last else None,
            "grad": flat_grad(stage).numpy().copy(),
            "layers": (len(stage) + 1) // 2 - (1 if last else 0),
            "params": sum(q.numel() for q in stage.parameters()),
            "threads": torch.get_num_threads(),
        })
        dist.barrier()  # the next config's warm-up starts together
    return out


def unsplit(config: PipelineConfig) -> tuple[np.ndarray, np.ndarray, float]:
    """The whole model on the whole batch in this process: outputs, parameter gradient, loss."""
    model = make_model(config)
    x, y = load_batch(config)
    out = model(x)
    loss = torch.mean((out - y) ** 2)
    loss.backward()
    return out.detach().numpy(), flat_grad(model).numpy().copy(), float(loss.item())


def assemble(config: PipelineConfig, results: list[dict], backend: str) -> PipelineRun:
    """Stack the stages' results into one :class:`PipelineRun`, with the unsplit model's outputs and gradient."""
    big_output, big_grad, big_loss = unsplit(config)
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
    return [assemble(c, [r[i] for r in results[:c.p]], "gloo") for i, c in enumerate(configs)]


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
    parser = argparse.ArgumentParser(prog="python -m dpviz.runs.pipeline",
                                     description="Record the pipeline runs shipped for chapter 12's sliders.")
    parser.add_argument("--out", default=str(SHIPPED_DIR), help="folder for the records (default: the shipped folder)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    written = record_grid(args.out)
    print(f"wrote {len(written)} records to {args.out} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
