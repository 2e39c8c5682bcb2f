"""SGD, SGD with momentum, and Adam, written out so each update rule can be read in a few lines.

They follow ``torch.optim``'s arithmetic operation for operation (the tests hold
them to it), so what a reader learns here carries over. They exist because a
rank that calls ``torch.optim`` for the first time imports torch's compiler
stack, about 1.5 s of CPU per process: with k ranks on two cores that alone
would double the time a run takes to start.

Each optimizer keeps its state (velocity, moments, step count) per parameter.
Replicas stay bit-identical only if that state starts identical too: here it
starts at zero in every rank.
"""

from __future__ import annotations

import torch

from dpviz.engine.checks import check_real


class SGD:
    """θ ← θ − η·g, or with momentum μ: v ← μ·v + g, θ ← θ − η·v (v starts as the first g)."""

    def __init__(self, params, lr: float, momentum: float = 0.0):
        self.params = list(params)
        self.lr = check_real("lr", lr, low=0, low_open=True)
        self.momentum = check_real("momentum", momentum, low=0, high=1)
        self.velocity = [None] * len(self.params)

    @torch.no_grad()
    def step(self) -> None:
        for i, p in enumerate(self.params):
            g = p.grad
            if self.momentum:
                if self.velocity[i] is None:
                    self.velocity[i] = g.clone()
                else:
                    self.velocity[i].mul_(self.momentum).add_(g)
                g = self.velocity[i]
            p.add_(g, alpha=-self.lr)

    def __repr__(self):
        return f"SGD(lr={self.lr:g}, momentum={self.momentum:g})"


class Adam:
    """m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²; θ ← θ − η·m̂ / (√v̂ + ε), with bias-corrected m̂, v̂."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.lr = check_real("lr", lr, low=0, low_open=True)
        self.beta1 = check_real("betas[0]", betas[0], low=0, high=1)
        self.beta2 = check_real("betas[1]", betas[1], low=0, high=1)
        self.eps = check_real("eps", eps, low=0)
        self.t = 0
        self.m = [torch.zeros_like(p) for p in self.params]  # first moment: a running mean of g
        self.v = [torch.zeros_like(p) for p in self.params]  # second moment: a running mean of g²

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        correction1 = 1 - self.beta1 ** self.t
        correction2_sqrt = (1 - self.beta2 ** self.t) ** 0.5
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = (v.sqrt() / correction2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / correction1)

    def __repr__(self):
        return f"Adam(lr={self.lr:g}, betas=({self.beta1:g}, {self.beta2:g}), eps={self.eps:g})"
