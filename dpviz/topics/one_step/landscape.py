"""The loss landscape of the line model, and gradient descent on one machine (Step 1).

Numpy only: no torch here, so the figures and sliders of Step 1 load without it.
The line model is f(x; θ) = w·x + c with θ = (w, c) (slope w, intercept c), and its loss on the whole
data set is the mean squared error

    L(θ) = mean((w·x + c − y)²),   ∇θL = (mean(2·r·x), mean(2·r))   with r = w·x + c − y,

the same MSE that :class:`dpviz.topics.ground_floor.rank_models.LineModel` with
:func:`dpviz.topics.ground_floor.run_training.mse` computes in torch. Here it is written in closed
form and computed in float64 (results are returned as float32, like the torch
model's); ``tests/test_landscape.py`` checks the loss, the gradient and the descent
path against torch autograd and ``torch.optim.SGD`` on the real ``LineModel``::

    from dpviz.engine.data import line_data
    from dpviz.topics.one_step import landscape
    x, y = line_data()
    curve = landscape.step1_data(x, y, knob=0, eta=0.1, steps=5)   # what plots.step1 draws

No matplotlib here: the figures in ``dpviz.topics.one_step.plots`` only draw these arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.engine.data import LINE_START

KNOBS = (0, 1)            # positions in θ = (w, c)
KNOB_NAMES = ("w", "c")  # slope, intercept (c, because b is the batch size)
OVERSHOOT_VIEW = 4.0    # the default view holds descent steps whose loss is up to this many times the start's
_CHUNK = 1 << 20        # loss_along forms at most about this many residuals at once


def _data(x, y) -> tuple[np.ndarray, np.ndarray]:
    """x, y as float64 vectors of shape (N,); (N, 1) arrays are accepted.

    They pass through float32 first, as they do on their way into the torch model.
    """
    x = np.asarray(x, dtype=np.float32).reshape(-1).astype(np.float64)
    y = np.asarray(y, dtype=np.float32).reshape(-1).astype(np.float64)
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"x and y must hold the same number (>= 1) of examples; got {len(x)} and {len(y)}.")
    return x, y


def _theta(name: str, theta) -> np.ndarray:
    theta = np.asarray(theta, dtype=np.float32).reshape(-1)
    if theta.shape != (2,) or not np.isfinite(theta).all():
        raise ValueError(f"{name} must be two finite numbers (w, c) for the line model; got {theta.tolist()}.")
    return theta


def _knob(knob) -> int:
    check_choice("knob", knob, KNOBS)
    return int(knob)


def _loss_grad(x: np.ndarray, y: np.ndarray, theta: np.ndarray) -> tuple[float, np.ndarray]:
    """L(θ) = mean(r²) and ∇θL = (mean(2·r·x), mean(2·r)), r = w·x + c − y, in float64."""
    r = theta[0] * x + theta[1] - y
    return np.mean(r * r), np.array([2.0 * np.mean(r * x), 2.0 * np.mean(r)])


def _float32(a) -> np.ndarray:
    """float64 -> float32; what float32 cannot hold becomes ±inf, as it would in the torch model."""
    with np.errstate(over="ignore"):
        return np.asarray(a, dtype=np.float64).astype(np.float32)


def loss_along(x, y, theta, *, knob: int = 0, values) -> np.ndarray:
    """The loss L(θ) on all of (x, y) as one knob of θ = (w, c) takes each of ``values``, the other frozen.

    ``knob`` is 0 for w, 1 for c. Returns float32 of the same length as ``values``.
    """
    x, y = _data(x, y)
    theta = _theta("theta", theta)
    knob = _knob(knob)
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != 1 or len(values) == 0 or not np.isfinite(values).all():
        raise ValueError(f"values must be a non-empty 1-D array of finite knob values; got shape {values.shape}.")

    thetas = np.repeat(theta[None].astype(np.float64), len(values), axis=0)  # (n, 2)
    thetas[:, knob] = values
    loss = np.empty(len(values))
    rows = max(1, _CHUNK // len(x))
    for i in range(0, len(values), rows):
        w, c = thetas[i:i + rows, :1], thetas[i:i + rows, 1:]
        r = w * x + c - y  # (rows, N)
        loss[i:i + rows] = np.mean(r * r, axis=1)
    return _float32(loss)


def full_grad(x, y, theta) -> np.ndarray:
    """∇θL of the whole data set at ``theta`` = (w, c), exactly: the direction a batch should estimate."""
    x, y = _data(x, y)
    return _float32(_loss_grad(x, y, _theta("theta", theta).astype(np.float64))[1])


def angle_deg(u, v) -> float:
    """The angle in degrees between two gradient vectors (0 = same direction, 180 = opposite)."""
    u, v = np.asarray(u, dtype=np.float64).reshape(-1), np.asarray(v, dtype=np.float64).reshape(-1)
    norms = np.linalg.norm(u) * np.linalg.norm(v)
    if u.shape != v.shape or norms == 0:
        raise ValueError(f"u and v must be non-zero vectors of the same length; got shapes {u.shape} and {v.shape}.")
    return float(np.degrees(np.arccos(np.clip(u @ v / norms, -1.0, 1.0))))


def descent_path(x, y, *, eta: float, steps: int, start=LINE_START, knob: int | None = None) -> dict:
    """``steps`` plain gradient-descent steps θ ← θ − η ∇θL on all of (x, y), from ``start``.

    The same steps ``torch.optim.SGD`` (no momentum) takes on the line model. With
    ``knob`` (0 = w, 1 = c) only that knob moves and the other stays frozen, as in
    the notes' one-knob picture. Returns float32 arrays ``theta`` (steps+1, 2),
    ``loss`` (steps+1,) and ``grad`` (steps+1, 2): the state before each step and
    after the last. A too-large ``eta`` makes the loss grow; the numbers are kept as
    they come (they may overflow to inf, then nan), without an error or a warning.
    """
    x, y = _data(x, y)
    eta = check_real("eta", eta, low=0, low_open=True)
    steps = check_int("steps", steps, low=0, high=100_000)
    theta = _theta("start", start).astype(np.float64)
    moving = slice(None) if knob is None else _knob(knob)  # a frozen knob does not move

    thetas, losses, grads = np.empty((steps + 1, 2)), np.empty(steps + 1), np.empty((steps + 1, 2))
    with np.errstate(over="ignore", invalid="ignore"):
        for step in range(steps + 1):
            thetas[step] = theta
            losses[step], grads[step] = _loss_grad(x, y, theta)
            if step < steps:
                theta[moving] -= eta * grads[step, moving]
    return {"theta": _float32(thetas), "loss": _float32(losses), "grad": _float32(grads)}


@dataclass(frozen=True)
class Step1Data:
    """What the Step 1 figure draws: the loss along one knob, θ, its gradient and a few steps."""

    knob: int               # 0 = w, 1 = c: the knob on the horizontal axis
    theta: np.ndarray       # (2,) the current θ = (w, c): the red dot
    values: np.ndarray      # (n,) knob values of the curve
    loss: np.ndarray        # (n,) the loss there, the other knob frozen at theta's value
    grad: np.ndarray        # (2,) ∇θL at theta, exact, on the whole data set
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
    # along one knob the loss is a parabola with curvature mean(x²) (for w) or 1 (for c):
    # its minimum is one Newton step from θ (none if x is all zero and the knob is w: L is flat in w)
    curvature = float(np.mean(x * x)) if knob == 0 else 1.0
    slope = float(_loss_grad(x, y, theta.astype(np.float64))[1][knob])
    best = float(theta[knob]) - (slope / (2 * curvature) if curvature > 0 else 0.0)
    half = (1 + margin) * max(abs(best - float(theta[knob])), 0.5)
    return best - half, best + half


def step1_data(x, y, theta=LINE_START, *, knob: int = 0, eta: float = 0.1, steps: int = 5,
               values=None, source: str | None = None) -> Step1Data:
    """Everything the Step 1 figure needs, computed on all of (x, y) for the line model.

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
        source = f"LineModel on {len(np.asarray(x))} points; its MSE and exact gradient on the whole data set"
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
