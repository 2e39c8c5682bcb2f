"""What the gradient saves: one backward pass against probing every knob with its own forward pass.

Runs in one rank, so that the caller need not import torch. The ground-floor chapter uses it::

    from dpviz.topics.ground_floor.run_probing import probe_every_knob
    probe = probe_every_knob()          # the course's MLP; P + 1 forward passes against one backward
    print(probe.n_params, probe.t_backward, probe.t_probe)

Probing means finite differences: nudge one knob by ``h``, run the forward pass again, and read the
slope as (L(θ + h e_i) − L(θ)) / h. That takes one forward pass per knob, plus one at θ itself. The
model runs in float64 here so that the differences are not swamped by rounding, and on one intra-op
thread: for a model this small more threads only wait on each other (badly, on a busy machine).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.engine.checks import check_int, check_real, check_seed
from dpviz.engine import launch as launcher

H = 1e-6  # the nudge of one knob, in float64


def probe_worker(rank: int, world_size: int, width: int, depth: int, d_in: int, examples: int, repeats: int, h: float, seed: int) -> dict:
    """Runs in each rank: :func:`dpviz.topics.ground_floor.rank_probing.probe_worker`, imported there (with torch), not here."""
    from dpviz.topics.ground_floor.rank_probing import probe_worker

    return probe_worker(rank, world_size, width, depth, d_in, examples, repeats, h, seed)


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
    check_real("h", h, low=0, low_open=True, high=1.0)
    check_seed("seed", seed)
    check_int("width", width, low=1, high=1 << 16)
    check_int("depth", depth, low=1, high=64)
    check_int("d_in", d_in, low=1, high=1 << 16)
    # One rank on one intra-op thread: for a model this small more threads only wait on each other.
    [found] = launcher.launch(probe_worker, 1, args=(width, depth, d_in, examples, repeats, h, seed),
                              backend="gloo", threads=1)
    return Probe(**found, h=h, model=f"MLP {depth}×{width} on {d_in} inputs, float64")
