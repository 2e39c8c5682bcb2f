"""Learning-rate rules for a batch k times larger, linear warm-up, and the line model's curvature limit.

A run tuned at batch b with rate η moves to k ranks of b examples each, a global batch of k·b.
The rules say what rate the bigger batch should take:

    rule        multiplier    why
    "x1"        1             keep η: k times fewer steps per epoch, each no longer than before
    "sqrt"      √k            the gradient noise's standard deviation falls by √k: keep η²/B fixed
    "linear"    k             k small steps of η add up to −η Σ g_i; one step on the mean Σ g_i / k
                              needs k·η to go as far (while the g_i hardly change over the k steps)

(``costmodel.lr_linear`` and ``costmodel.lr_sqrt`` give the two scaled rates; this module
reuses them.) A *linear warm-up* of w steps reaches the target rate gradually: step t (from 0)
uses target · (t + 1) / w for t < w, then the target.

For the line model f(x) = w·x + c with the mean squared error, the loss is a quadratic bowl
whose Hessian is the same everywhere, H = 2·mean([[x², x], [x, 1]]). Plain gradient descent
on it converges only when η < 2 / λ_max(H); every step multiplies the error along an eigenvector
of eigenvalue λ by (1 − η·λ). So on the bowl, k steps of η multiply it by (1 − ηλ)^k while one
step of k·η multiplies it by (1 − kηλ): :func:`bowl_step_gap` is how far apart the two land.

Numpy only.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.topics.ground_floor import costmodel

RULES = ("x1", "sqrt", "linear")
RULE_LABELS = {"x1": "×1", "sqrt": "×√k", "linear": "×k"}  # how the chapters write them


def multiplier(rule: str, k: int) -> float:
    """The factor a rule applies to the base rate for k ranks: 1, √k or k."""
    check_choice("rule", rule, RULES)
    k = check_int("k", k, low=1)
    if rule == "x1":
        return 1.0
    if rule == "sqrt":
        return costmodel.lr_sqrt(1.0, k)
    return costmodel.lr_linear(1.0, k)


def scaled_lr(lr_base: float, rule: str, k: int) -> float:
    """The target rate of ``rule`` for k ranks, from the rate ``lr_base`` tuned for one."""
    lr_base = check_real("lr_base", lr_base, low=0, low_open=True)
    return lr_base * multiplier(rule, k)


def warmup_schedule(lr: float, steps: int, warmup: int = 0) -> np.ndarray:
    """The rate at each of ``steps`` steps: a linear ramp over the first ``warmup`` steps, then ``lr``.

    Step t (from 0) takes ``lr * (t + 1) / warmup`` while t < warmup, so the first step is
    ``lr / warmup`` and step ``warmup - 1`` the full rate. ``warmup = 0`` is no warm-up.
    """
    lr = check_real("lr", lr, low=0, low_open=True)
    steps = check_int("steps", steps, low=1)
    warmup = check_int("warmup", warmup, low=0)
    if warmup > steps:
        raise ValueError(f"warmup must be an integer from 0 to steps={steps} (a warm-up cannot outlast the run); got {warmup}.")
    t = np.arange(steps, dtype=float)
    if warmup == 0:
        return np.full(steps, lr)
    return lr * np.minimum(1.0, (t + 1) / warmup)


def line_hessian(x) -> np.ndarray:
    """H = 2·mean([[x², x], [x, 1]]): the line model's loss curvature on inputs ``x`` (the same at every θ)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("x must hold at least one example; got an empty array.")
    return 2.0 * np.array([[np.mean(x * x), np.mean(x)], [np.mean(x), 1.0]])


def line_curvatures(x) -> np.ndarray:
    """The two eigenvalues λ of :func:`line_hessian`, largest first."""
    return np.sort(np.linalg.eigvalsh(line_hessian(x)))[::-1]


def stability_limit(x) -> float:
    """2 / λ_max: on the line model's bowl, gradient descent with a larger rate diverges."""
    return float(2.0 / line_curvatures(x)[0])


def bowl_step_gap(eta, k, lam):
    """On a quadratic of curvature ``lam``: |(1 − ηλ)^k − (1 − kηλ)| / (kηλ).

    How far k steps of ``eta`` and one step of ``k * eta`` land apart, from the same point,
    as a fraction of the big step's length (no gradient noise). For small ηλ it is about
    (k − 1)·ηλ / 2, so the linear rule's two ways of stepping agree while η·λ is small.
    """
    eta, lam = _positive("eta", eta), _positive("lam", lam)
    k = np.asarray(k)
    for value in k.reshape(-1):
        check_int("k", value.item(), low=1)
    k = k.astype(float)
    x = eta * lam
    gap = np.abs((1.0 - x) ** k - (1.0 - k * x)) / (k * x)
    return float(gap) if gap.ndim == 0 else gap


def _positive(name, value) -> np.ndarray:
    """``value`` as a float array, after checking every element is a number > 0."""
    array = np.asarray(value, dtype=float)
    for element in array.reshape(-1):
        check_real(name, float(element), low=0, low_open=True)
    return array


def examples_to_reach(examples, loss, target: float) -> float:
    """The first number of examples seen at which ``loss`` is at or below ``target`` (inf if never).

    ``examples`` and ``loss`` are one run's curve (NaN and inf entries never count as reached).
    """
    examples, loss = np.asarray(examples, dtype=float), np.asarray(loss, dtype=float)
    if examples.shape != loss.shape:
        raise ValueError(f"examples and loss must have one shape; got {examples.shape} and {loss.shape}.")
    target = check_real("target", target, low=0, low_open=True)
    hit = np.flatnonzero(np.isfinite(loss) & (loss <= target))
    return float(examples[hit[0]]) if hit.size else float("inf")


def line_loss_surface(x, y, ws, cs) -> np.ndarray:
    """The line model's loss mean((w·x + c − y)²) on the grid ``ws`` × ``cs``: shape (len(cs), len(ws)), float64.

    From the data's moments, so a fine grid costs nothing: the contours drawn under the chapter's paths.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"x and y must hold the same number of examples, at least one; got {x.size} and {y.size}.")
    w, c = np.meshgrid(np.asarray(ws, dtype=np.float64), np.asarray(cs, dtype=np.float64))
    xx, xm, yy, xy, ym = np.mean(x * x), np.mean(x), np.mean(y * y), np.mean(x * y), np.mean(y)
    return w * w * xx + c * c + yy + 2 * w * c * xm - 2 * w * xy - 2 * c * ym
