"""dpviz.topics.ground_floor.rank_optim follows torch.optim's arithmetic: the same parameters after every step."""

import pytest
import torch

from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import MLP


def trajectory(make, steps=6):
    torch.manual_seed(0)
    model = MLP(d_in=4, width=8, depth=2)
    opt = make(model.parameters())
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    states = []
    for _ in range(steps):
        model.zero_grad()
        torch.mean((model(x) - y) ** 2).backward()
        opt.step()
        states.append(torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()]))
    return torch.stack(states)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
        (lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
        (lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01, foreach=False)),
    ],
    ids=["sgd", "momentum", "adam"],
)
def test_matches_torch_optim(ours, theirs):
    a, b = trajectory(ours), trajectory(theirs)
    assert torch.equal(a, b)  # bit for bit: the same operations in the same order


def test_bad_arguments_name_them():
    p = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(ValueError, match="lr"):
        optim.SGD(p, lr=0)
    with pytest.raises(ValueError, match="momentum"):
        optim.SGD(p, lr=0.1, momentum=1.5)
    with pytest.raises(ValueError, match="eps"):
        optim.Adam(p, eps=-1.0)
