"""The two built-in models, in PyTorch's vocabulary.

* :class:`LineModel` has exactly two knobs, the slope ``w`` and the intercept ``c``, so
  every gradient is an arrow in the (w, c) plane. (The intercept is ``c``, not the usual
  ``b``, because the notes use b for the batch size.)
* :class:`MLP` has a size you choose, so its gradient can be big enough for the
  all-reduce to take measurable time.
"""

from __future__ import annotations

import torch
from torch import nn

from dpviz.engine.checks import check_choice, check_int
from dpviz.engine.data import LINE_START  # θ0 = (w, c); numpy-only, so the theory modules can use it without torch
from dpviz.topics.ground_floor.model_sizes import MODELS  # noqa: F401 - importable from here too


class LineModel(nn.Module):
    """f(x; θ) = w·x + c with θ = (w, c): slope w, intercept c."""

    def __init__(self, w: float = LINE_START[0], c: float = LINE_START[1]):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([w]))
        self.c = nn.Parameter(torch.tensor([c]))

    def forward(self, x):  # x: (B, 1) -> (B, 1)
        return x * self.w + self.c

    def __repr__(self):
        return f"LineModel(w={self.w.item():.4g}, c={self.c.item():.4g})"


class MLP(nn.Sequential):
    """``depth`` hidden tanh layers of ``width`` units on ``d_in`` inputs, one output."""

    def __init__(self, d_in: int = 16, width: int = 64, depth: int = 2):
        layers, d = [], d_in
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.Tanh()]
            d = width
        layers.append(nn.Linear(d, 1))
        super().__init__(*layers)


def build_model(name: str, *, d_in: int = 16, width: int = 64, depth: int = 2, seed: int = 0) -> nn.Module:
    """A fresh model; the same ``seed`` gives bit-identical parameters in every process."""
    check_choice("model", name, MODELS)
    if name == "line":
        return LineModel()
    check_int("width", width, low=1, high=1 << 16)
    check_int("depth", depth, low=1, high=64)
    torch.manual_seed(seed)
    return MLP(d_in, width, depth)


def _parameters(model) -> list:
    """A model's parameters in ``model.parameters()`` order, or ``model`` itself when it is already their list
    (a loop that steps thousands of times takes the list once, instead of walking the module tree every step)."""
    return list(model.parameters()) if isinstance(model, nn.Module) else model


def flat_grad(model) -> torch.Tensor:
    """Every parameter's ``.grad`` in one 1-D vector (a copy), in ``model.parameters()`` order; ``model`` is a
    module or the list of its parameters."""
    return torch.cat([p.grad.reshape(-1) for p in _parameters(model)])


def set_flat_grad(model, flat: torch.Tensor) -> None:
    """Write a 1-D vector back into each parameter's ``.grad``; ``model`` is a module or the list of its parameters."""
    offset = 0
    for p in _parameters(model):
        n = p.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p))
        offset += n


def zero_grads(params: list) -> None:
    """``model.zero_grad(set_to_none=False)`` on the list of a model's parameters, without walking its modules."""
    for p in params:
        if p.grad is not None:
            p.grad.zero_()
