"""The rank side of :mod:`dpviz.topics.ground_floor.run_probing`: one backward pass against probing every knob, in torch, in float64."""

from __future__ import annotations

import time

import numpy as np
import torch

from dpviz.engine.data import teacher_data
from dpviz.engine.rank import report_progress
from dpviz.topics.ground_floor.rank_models import build_model


def probe_worker(rank: int, world_size: int, width: int, depth: int, d_in: int, examples: int, repeats: int,
                 h: float, seed: int) -> dict:
    """The course's MLP in float64: ``repeats`` timed backward passes, then P + 1 timed forward passes."""
    model = build_model("mlp", d_in=d_in, width=width, depth=depth, seed=seed).double()
    x, y = (torch.from_numpy(a).double() for a in teacher_data(examples, d_in, seed=seed))
    return _probe(model, list(model.parameters()), x, y, repeats=repeats, h=h, examples=examples)


def _probe(model, params, x, y, *, repeats: int, h: float, examples: int) -> dict:
    def loss():
        return torch.mean((model(x) - y) ** 2)

    t_backward = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss().backward()
        t_backward.append(time.perf_counter() - t0)
    autograd = torch.cat([p.grad.reshape(-1) for p in params]).numpy().copy()
    report_progress(0)

    probed = np.empty(len(autograd))
    t0 = time.perf_counter()
    with torch.no_grad():
        base = loss().item()                         # the one forward pass at θ itself
        i = 0
        for p in params:
            flat = p.view(-1)
            for j in range(flat.numel()):
                old = flat[j].item()
                flat[j] = old + h                    # nudge one knob ...
                probed[i] = (loss().item() - base) / h
                flat[j] = old                        # ... and put it back exactly
                i += 1
    t_probe = time.perf_counter() - t0
    return dict(n_params=len(autograd), examples=examples, t_backward=np.array(t_backward), t_probe=t_probe,
                autograd=autograd, probed=probed)
