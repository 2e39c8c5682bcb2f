"""Waiting in data-parallel training, as formulas: the straggler, overlapping the sync with backward,
and the staleness of asynchronous SGD. The chapter sets each beside a real run.

    from dpviz.topics.waiting import theory as waiting
    waiting.straggler_step(t_compute=0.1, delays=[0, 0, 0.05, 0], t_comm=0.02)   # everyone waits for rank 2
    waiting.overlap_bounds(t_forward=0.01, t_backward=0.02, t_comm=0.015)     # s01's sum against the best overlap
    waiting.async_staleness([0.01, 0.01, 0.05])                                # τ per worker, steady state

Numpy only: no torch, no matplotlib. Times are in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.engine.checks import check_real


def _seconds(name: str, values) -> np.ndarray:
    """A non-empty 1-D array of seconds >= 0, or one sentence naming the argument."""
    array = np.atleast_1d(np.asarray(values, dtype=float))
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty list of seconds >= 0; got {values!r}.")
    for value in array:
        check_real(f"{name} entries", float(value), low=0.0)
    return array


# --- the straggler -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StragglerStep:
    """One synchronous step when ranks finish their compute at different times (seconds, per rank)."""

    compute: np.ndarray  # (k,) each rank's compute, its delay included
    wait: np.ndarray  # (k,) time each rank spends inside the all-reduce before the last rank arrives
    t_comm: float  # the all-reduce itself, once everyone is there
    t_step: float  # the step: the slowest rank's compute, then the all-reduce

    @property
    def k(self) -> int:
        return len(self.compute)

    @property
    def idle_fraction(self) -> float:
        """The share of all ranks' time in the step spent waiting for the slowest."""
        return float(self.wait.sum() / (self.k * self.t_step)) if self.t_step > 0 else 0.0


def straggler_step(t_compute: float, delays, t_comm: float) -> StragglerStep:
    """A synchronous step in which rank r computes for ``t_compute + delays[r]``.

    No rank leaves the all-reduce before the last has entered it, so rank r waits
    ``max(delays) − delays[r]`` and the step takes ``t_compute + max(delays) + t_comm`` for every
    rank: the slowest rank sets the pace.
    """
    t_compute = check_real("t_compute", t_compute, low=0.0)
    t_comm = check_real("t_comm", t_comm, low=0.0)
    delays = _seconds("delays", delays)
    compute = t_compute + delays
    wait = compute.max() - compute
    return StragglerStep(compute, wait, t_comm, float(compute.max() + t_comm))


def straggler_slowdown(t_compute: float, delay: float, t_comm: float) -> float:
    """How many times longer a step gets when one rank is ``delay`` seconds late (>= 1)."""
    t_compute = check_real("t_compute", t_compute, low=0.0)
    delay = check_real("delay", delay, low=0.0)
    t_comm = check_real("t_comm", t_comm, low=0.0)
    base = t_compute + t_comm
    if base <= 0:
        raise ValueError("t_compute + t_comm must be > 0 to compare step times; got 0.")
    return (base + delay) / base


# --- overlapping the sync with the backward pass ---------------------------------------------------


@dataclass(frozen=True)
class OverlapBounds:
    """A step's time with no overlap (the s01 model) and the best that overlap could give (seconds)."""

    serial: float  # forward + backward + all-reduce, one after another
    best: float  # forward + the longer of backward and all-reduce: the sync fully hidden, or the compute
    saving: float  # serial − best: the most that overlap can save

    @property
    def saving_fraction(self) -> float:
        return self.saving / self.serial if self.serial > 0 else 0.0


def overlap_bounds(t_forward: float, t_backward: float, t_comm: float) -> OverlapBounds:
    """The s01 step (no overlap) against the lower bound of any overlap.

    Gradients exist only once the backward pass has produced them, so the all-reduce can at best
    run alongside the backward pass: the step cannot be shorter than ``t_forward + max(t_backward,
    t_comm)``. Real buckets fall short of the bound: the last one is ready only when the backward
    pass ends, and on a busy CPU the communication thread competes with the compute for cores.
    """
    t_forward = check_real("t_forward", t_forward, low=0.0)
    t_backward = check_real("t_backward", t_backward, low=0.0)
    t_comm = check_real("t_comm", t_comm, low=0.0)
    serial = t_forward + t_backward + t_comm
    best = t_forward + max(t_backward, t_comm)
    return OverlapBounds(serial, best, serial - best)


# --- asynchronous SGD ----------------------------------------------------------------------------


def async_staleness(t_grad) -> np.ndarray:
    """Each worker's typical staleness τ in steady state, from its seconds per gradient ``t_grad``.

    While worker i computes one gradient (``t_grad[i]`` seconds) worker j delivers
    ``t_grad[i] / t_grad[j]`` updates, so the θ it pulled is about ``Σ_{j≠i} t_grad[i] / t_grad[j]``
    updates old when its gradient arrives. With k equal workers that is k − 1; a slow worker's
    gradients are the stalest.
    """
    t = _seconds("t_grad", t_grad)
    if (t <= 0).any():
        raise ValueError(f"t_grad entries must be > 0 seconds per gradient; got {t.tolist()}.")
    return t * np.sum(1.0 / t) - 1.0


def update_rates(t_grad) -> tuple[float, float]:
    """Updates per second, ``(synchronous, asynchronous)``, for workers taking ``t_grad`` seconds per gradient.

    Synchronous SGD makes one update per round and a round lasts as long as the slowest worker;
    asynchronous SGD applies every gradient on arrival, Σ 1/t_i per second. (Each synchronous update
    averages k gradients; each asynchronous one uses one.)
    """
    t = _seconds("t_grad", t_grad)
    if (t <= 0).any():
        raise ValueError(f"t_grad entries must be > 0 seconds per gradient; got {t.tolist()}.")
    return float(1.0 / t.max()), float(np.sum(1.0 / t))


# --- the line model's loss over the (w, c) plane -------------------------------------------------


def line_loss(x, y, thetas) -> np.ndarray:
    """L(θ) = mean((w·x + c − y)²) on all of (x, y) at every θ = (w, c) in ``thetas`` (..., 2), float64.

    Written through the data's moments, so a whole grid of θ costs no more than a few sums.
    """
    x = np.asarray(x, dtype=np.float32).reshape(-1).astype(np.float64)
    y = np.asarray(y, dtype=np.float32).reshape(-1).astype(np.float64)
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"x and y must hold the same number (>= 1) of examples; got {len(x)} and {len(y)}.")
    thetas = np.asarray(thetas, dtype=np.float64)
    if thetas.shape[-1:] != (2,):
        raise ValueError(f"thetas must end in an axis of 2, (w, c); got shape {thetas.shape}.")
    w, c = thetas[..., 0], thetas[..., 1]
    xx, x1, xy, y1, yy = (np.mean(v) for v in (x * x, x, x * y, y, y * y))
    return w * w * xx + 2 * w * c * x1 + c * c - 2 * w * xy - 2 * c * y1 + yy


__all__ = [
    "StragglerStep", "straggler_step", "straggler_slowdown", "OverlapBounds", "overlap_bounds",
    "async_staleness", "update_rates", "line_loss",
]
