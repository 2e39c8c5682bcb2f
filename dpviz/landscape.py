"""The loss landscape of the line model, and gradient descent on one machine (Step 1).

Everything here is computed by the real :class:`dpviz.models.LineModel` and the
real mean squared error, with torch autograd, on the whole data set::

    from dpviz.data import line_data
    from dpviz import landscape
    x, y = line_data()
    curve = landscape.step1_data(x, y, knob=0, eta=0.1, steps=5)   # what plots.step1 draws

No matplotlib here: the figures in ``dpviz.plots.step1`` only draw these arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call, vmap

from dpviz.checks import check_choice, check_int, check_real
from dpviz.models import LINE_START, LineModel
from dpviz.training import mse

KNOBS = (0, 1)            # positions in θ = (w, b)
KNOB_NAMES = ("w", "b")
OVERSHOOT_VIEW = 4.0    # the default view holds descent steps whose loss is up to this many times the start's


def _data(x, y) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y as float32 tensors of shape (N, 1); 1-D arrays are accepted."""
    x = torch.as_tensor(np.asarray(x, dtype=np.float32)).reshape(-1, 1)
    y = torch.as_tensor(np.asarray(y, dtype=np.float32)).reshape(-1, 1)
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"x and y must hold the same number (>= 1) of examples; got {len(x)} and {len(y)}.")
    return x, y


def _theta(name: str, theta) -> np.ndarray:
    theta = np.asarray(theta, dtype=np.float32).reshape(-1)
    if theta.shape != (2,) or not np.isfinite(theta).all():
        raise ValueError(f"{name} must be two finite numbers (w, b) for the line model; got {theta.tolist()}.")
    return theta


def _knob(knob) -> int:
    check_choice("knob", knob, KNOBS)
    return int(knob)


def loss_along(x, y, theta, *, knob: int = 0, values) -> np.ndarray:
    """The loss L(θ) on all of (x, y) as one knob of θ = (w, b) takes each of ``values``, the other frozen.

    ``knob`` is 0 for w, 1 for b. Returns float32 of the same length as ``values``.
    """
    x, y = _data(x, y)
    theta = _theta("theta", theta)
    knob = _knob(knob)
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != 1 or len(values) == 0 or not np.isfinite(values).all():
        raise ValueError(f"values must be a non-empty 1-D array of finite knob values; got shape {values.shape}.")

    model = LineModel(*theta.tolist())
    thetas = np.repeat(theta[None], len(values), axis=0)  # (n, 2)
    thetas[:, knob] = values
    params = {"w": torch.from_numpy(thetas[:, :1].copy()), "b": torch.from_numpy(thetas[:, 1:].copy())}

    def loss_at(p):
        return mse(functional_call(model, p, (x,)), y)

    with torch.no_grad():
        return vmap(loss_at)(params).numpy()


def full_grad(x, y, theta) -> np.ndarray:
    """∇θL of the whole data set at ``theta`` = (w, b), by autograd: the direction a batch should estimate."""
    x, y = _data(x, y)
    model = LineModel(*_theta("theta", theta).tolist())
    mse(model(x), y).backward()
    return np.array([model.w.grad.item(), model.b.grad.item()], dtype=np.float32)


def angle_deg(u, v) -> float:
    """The angle in degrees between two gradient vectors (0 = same direction, 180 = opposite)."""
    u, v = np.asarray(u, dtype=np.float64).reshape(-1), np.asarray(v, dtype=np.float64).reshape(-1)
    norms = np.linalg.norm(u) * np.linalg.norm(v)
    if u.shape != v.shape or norms == 0:
        raise ValueError(f"u and v must be non-zero vectors of the same length; got shapes {u.shape} and {v.shape}.")
    return float(np.degrees(np.arccos(np.clip(u @ v / norms, -1.0, 1.0))))


def descent_path(x, y, *, eta: float, steps: int, start=LINE_START, knob: int | None = None) -> dict:
    """``steps`` real steps θ ← θ − η ∇θL on all of (x, y), from ``start``, with torch.optim.SGD.

    With ``knob`` (0 = w, 1 = b) only that knob moves and the other stays frozen, as
    in the notes' one-knob picture. Returns arrays ``theta`` (steps+1, 2), ``loss``
    (steps+1,) and ``grad`` (steps+1, 2): the state before each step and after the last.
    A too-large ``eta`` makes the loss grow; the numbers are kept as they come (they may overflow to inf).
    """
    x, y = _data(x, y)
    eta = check_real("eta", eta, low=0, low_open=True)
    steps = check_int("steps", steps, low=0, high=100_000)
    start = _theta("start", start)
    frozen = None if knob is None else 1 - _knob(knob)

    model = LineModel(*start.tolist())
    params = [model.w, model.b]
    optimizer = torch.optim.SGD(params, lr=eta)
    thetas, losses, grads = [], [], []
    for step in range(steps + 1):
        optimizer.zero_grad()
        loss = mse(model(x), y)
        loss.backward()
        thetas.append([model.w.item(), model.b.item()])
        losses.append(loss.item())
        grads.append([model.w.grad.item(), model.b.grad.item()])
        if step == steps:
            break
        if frozen is not None:
            params[frozen].grad.zero_()  # the frozen knob does not move
        optimizer.step()
    return {
        "theta": np.array(thetas, dtype=np.float32),
        "loss": np.array(losses, dtype=np.float32),
        "grad": np.array(grads, dtype=np.float32),
    }


@dataclass(frozen=True)
class Step1Data:
    """What the Step 1 figure draws: the loss along one knob, θ, its gradient and a few steps."""

    knob: int               # 0 = w, 1 = b: the knob on the horizontal axis
    theta: np.ndarray       # (2,) the current θ = (w, b): the red dot
    values: np.ndarray      # (n,) knob values of the curve
    loss: np.ndarray        # (n,) the loss there, the other knob frozen at theta's value
    grad: np.ndarray        # (2,) ∇θL at theta, by autograd on the whole data set
    eta: float              # the step size η
    path: np.ndarray        # (steps+1, 2) θ before each step and after the last (one knob moving)
    path_loss: np.ndarray   # (steps+1,) the loss at each of those θ
    source: str             # one line: which data and which computation

    @property
    def knob_name(self) -> str:
        return KNOB_NAMES[self.knob]

    @property
    def frozen_name(self) -> str:
        return KNOB_NAMES[1 - self.knob]

    @property
    def steps(self) -> int:
        return len(self.path) - 1

    @property
    def diverging(self) -> bool:
        """True when the last step's loss is above the first: η is too large."""
        return bool(not np.isfinite(self.path_loss[-1]) or self.path_loss[-1] > self.path_loss[0])


def knob_range(x, y, theta, *, knob: int = 0, margin: float = 0.5) -> tuple[float, float]:
    """A view of one knob centred on the loss minimum along it, reaching (1 + ``margin``) × its distance to θ each side."""
    x, y = _data(x, y)
    theta = _theta("theta", theta)
    knob = _knob(knob)
    margin = check_real("margin", margin, low=0)
    # the loss is quadratic in one knob, so three points give its minimum exactly
    probe = theta[knob] + np.array([-1.0, 0.0, 1.0], dtype=np.float32)
    l_minus, l_mid, l_plus = loss_along(x, y, theta, knob=knob, values=probe).astype(np.float64)
    best = float(theta[knob]) - (l_plus - l_minus) / (2 * (l_plus - 2 * l_mid + l_minus))
    half = (1 + margin) * max(abs(best - float(theta[knob])), 0.5)
    return best - half, best + half


def step1_data(x, y, theta=LINE_START, *, knob: int = 0, eta: float = 0.1, steps: int = 5,
               values=None, source: str | None = None) -> Step1Data:
    """Everything the Step 1 figure needs, computed on all of (x, y) with the real line model.

    ``values`` (the horizontal axis) defaults to a range holding θ and the minimum along ``knob``.
    """
    theta = _theta("theta", theta)
    knob = _knob(knob)
    path = descent_path(x, y, eta=eta, steps=steps, start=theta, knob=knob)
    if values is None:
        # widen the view to hold the steps that overshoot, up to OVERSHOOT_VIEW times the starting loss
        near = path["theta"][path["loss"] <= OVERSHOOT_VIEW * path["loss"][0], knob]
        low, high = knob_range(x, y, theta, knob=knob)
        low, high = min(low, near.min()), max(high, near.max())
        spare = 0.05 * (high - low)
        values = np.linspace(low - spare, high + spare, 201, dtype=np.float32)
    values = np.asarray(values, dtype=np.float32)
    if source is None:
        source = f"LineModel on {len(np.asarray(x))} points; loss and gradients by torch autograd on the whole data set"
    return Step1Data(
        knob=knob,
        theta=theta,
        values=values,
        loss=loss_along(x, y, theta, knob=knob, values=values),
        grad=path["grad"][0],
        eta=float(eta),
        path=path["theta"],
        path_loss=path["loss"],
        source=source,
    )
