"""The rank side of :mod:`dpviz.topics.splitting.run_pipeline`: one stage per rank, activations and gradients sent point to point.

One rank also runs each config's whole model on its whole batch (:func:`unsplit`), the reference the
stages' outputs and gradients are compared with: the last rank, while the stages of a config that
leaves it out warm up, where there is such a config; else rank 0, after every step is timed.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from dpviz.engine.data import teacher_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad
from dpviz.topics.splitting import theory_pipeline as theory


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
                # out.backward(grad_out) as the gradient of sum(out * grad_out): the same bits, without the shape
                # check by which backward(gradient) makes a fresh process import sympy (0.5 s on a rank's first step)
                (out * grad_out).sum().backward()
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
    wait in a barrier (asleep, so the stages have the cores) until its timed steps are done. Each
    config's :func:`unsplit` reference, computed once for all the configs with the same model and
    batch, is in the results of the rank that computed it (:func:`reference_ranks`), under "unsplit".
    """
    by_sitter = reference_ranks(configs, world_size)
    references = {}  # what this rank computed: the same model and batch -> its unsplit reference
    out, step = [], 0
    for i, config in enumerate(configs):
        if rank >= config.p:
            if by_sitter.get(_same_model(config)) == i and rank == world_size - 1:
                references[_same_model(config)] = unsplit(config)  # while the stages warm up: nothing is timed yet
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
    for i, config in enumerate(configs):
        key = _same_model(config)
        if rank == 0 and key not in by_sitter and key not in references:
            references[key] = unsplit(config)
        if key in references:
            out[i] = {**(out[i] or {}), "unsplit": references[key]}
    return out


def _same_model(config: PipelineConfig) -> tuple:
    """Configs that differ only in p, m, schedule or repeats run the same model on the same batch: one reference."""
    return config.width, config.depth, config.batch, config.seed


def reference_ranks(configs: list, world_size: int) -> dict:
    """``{model and batch: config}``: the references the last rank computes, each while the stages of the first
    config with that model warm up, if that config leaves the last rank out. Rank 0 computes the others last."""
    by_sitter = {}
    for i, config in enumerate(configs):
        if config.p < world_size:
            by_sitter.setdefault(_same_model(config), i)
    return by_sitter


def unsplit(config: PipelineConfig) -> tuple[np.ndarray, np.ndarray, float]:
    """The whole model on the whole batch in one process: outputs, parameter gradient, loss."""
    model = make_model(config)
    x, y = load_batch(config)
    out = model(x)
    loss = torch.mean((out - y) ** 2)
    loss.backward()
    return out.detach().numpy(), flat_grad(model).numpy().copy(), float(loss.item())
