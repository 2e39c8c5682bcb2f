"""What the gradient saves: one backward pass against probing every knob with its own forward pass.

Runs in the calling process (no ranks). The ground-floor chapter uses it::

    from dpviz.runs.probing import probe_every_knob
    probe = probe_every_knob()          # the course's MLP; P + 1 forward passes against one backward
    print(probe.n_params, probe.t_backward, probe.t_probe)

Probing means finite differences: nudge one knob by ``h``, run the forward pass again, and read the
slope as (L(θ + h e_i) − L(θ)) / h. That takes one forward pass per knob, plus one at θ itself. The
model runs in float64 here so that the differences are not swamped by rounding, and on one intra-op
thread: for a model this small more threads only wait on each other (badly, on a busy machine).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from dpviz.checks import check_int, check_real
from dpviz.data import teacher_data
from dpviz.runs.models import build_model

H = 1e-6  # the nudge of one knob, in float64


@dataclass(frozen=True)
class Probe:
    """One model's gradient found twice, by one backward pass and by probing each knob, with both timed."""

    n_params: int               # P, the model's knobs
    examples: int               # rows in the batch the loss is taken over
    t_backward: np.ndarray      # (repeats,) seconds, one forward + backward pass each
    t_probe: float              # seconds, P + 1 forward passes, one nudged knob at a time
    autograd: np.ndarray        # (P,) float64, the gradient from loss.backward()
    probed: np.ndarray          # (P,) float64, (L(θ + h e_i) − L(θ)) / h for every knob i
    h: float                    # the nudge
    model: str                  # what was probed, in words


def probe_every_knob(*, width: int = 32, depth: int = 2, d_in: int = 16, examples: int = 64,
                     repeats: int = 5, h: float = H, seed: int = 0) -> Probe:
    """Time one forward + backward pass of the course's MLP (``repeats`` times) against P + 1 forward passes."""
    check_int("examples", examples, low=1, high=100_000)
    check_int("repeats", repeats, low=1, high=1000)
    check_real("h", h, low=0, low_open=True)
    model = build_model("mlp", d_in=d_in, width=width, depth=depth, seed=seed).double()
    x, y = (torch.from_numpy(a).double() for a in teacher_data(examples, d_in, seed=seed))
    params = list(model.parameters())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _probe(model, params, x, y, repeats=repeats, h=h, examples=examples,
                      name=f"MLP {depth}×{width} on {d_in} inputs, float64")
    finally:
        torch.set_num_threads(threads)


def _probe(model, params, x, y, *, repeats: int, h: float, examples: int, name: str) -> Probe:
    def loss():
        return torch.mean((model(x) - y) ** 2)

    t_backward = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss().backward()
        t_backward.append(time.perf_counter() - t0)
    autograd = torch.cat([p.grad.reshape(-1) for p in params]).numpy().copy()

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
    return Probe(n_params=len(autograd), examples=examples, t_backward=np.array(t_backward), t_probe=t_probe,
                 autograd=autograd, probed=probed, h=h, model=name)
