"""dpviz.topics.one_step.landscape is numpy only, and its closed-form MSE agrees with torch autograd on the real LineModel.

The reference here is the torch side of the package: :class:`dpviz.topics.ground_floor.rank_models.LineModel`,
:func:`dpviz.topics.ground_floor.run_training.mse`, ``loss.backward()`` and ``torch.optim.SGD``.
"""

import subprocess
import sys

import numpy as np
import pytest
import torch

from dpviz.engine.data import LINE_START, line_data
from dpviz.topics.ground_floor.rank_models import LineModel
from dpviz.topics.ground_floor.run_training import mse
from dpviz.topics.one_step import landscape

RTOL = 1e-5  # torch works in float32, landscape in float64: they agree to float32 rounding
ETAS = (0.01, 0.1, 0.5, 0.9)
STEPS = 6


@pytest.fixture(scope="module")
def data():
    return line_data(n=512, seed=0)


def _tensors(x, y):
    return torch.from_numpy(np.asarray(x, np.float32)).reshape(-1, 1), torch.from_numpy(np.asarray(y, np.float32)).reshape(-1, 1)


def torch_loss_grad(x, y, theta):
    """L and ∇θL by autograd on a LineModel at θ."""
    xt, yt = _tensors(x, y)
    model = LineModel(*map(float, theta))
    loss = mse(model(xt), yt)
    loss.backward()
    return loss.item(), np.array([model.w.grad.item(), model.c.grad.item()])


def torch_descent(x, y, *, eta, steps, start, knob=None):
    """The reference path: torch.optim.SGD on a LineModel, the frozen knob's gradient zeroed before each step."""
    xt, yt = _tensors(x, y)
    model = LineModel(*map(float, start))
    params = [model.w, model.c]
    optimizer = torch.optim.SGD(params, lr=eta)
    thetas, losses, grads = [], [], []
    for step in range(steps + 1):
        optimizer.zero_grad()
        loss = mse(model(xt), yt)
        loss.backward()
        thetas.append([model.w.item(), model.c.item()])
        losses.append(loss.item())
        grads.append([model.w.grad.item(), model.c.grad.item()])
        if step == steps:
            break
        if knob is not None:
            params[1 - knob].grad.zero_()
        optimizer.step()
    return {"theta": np.array(thetas), "loss": np.array(losses), "grad": np.array(grads)}


def _close(got, want, *, rtol=RTOL, scale=None):
    """Relative agreement; for entries near zero (a gradient near the minimum), relative to ``scale``."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    atol = 0.0 if scale is None else rtol * scale
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("theta", [LINE_START, (0.5, 1.0), (1.5, 0.5), (-3.0, -2.0)])
def test_loss_and_gradient_match_autograd(data, theta):
    x, y = data
    want_loss, want_grad = torch_loss_grad(x, y, theta)
    got_grad = landscape.full_grad(x, y, theta)
    assert got_grad.dtype == np.float32 and got_grad.shape == (2,)
    _close(got_grad, want_grad, scale=np.abs(torch_loss_grad(x, y, LINE_START)[1]).max())
    for knob in landscape.KNOBS:
        got = landscape.loss_along(x, y, theta, knob=knob, values=[theta[knob]])
        assert got.dtype == np.float32
        _close(got[0], want_loss)


@pytest.mark.parametrize("knob", landscape.KNOBS)
def test_loss_along_matches_autograd_at_every_value(data, knob):
    x, y = data
    theta = (0.5, 1.0)
    values = np.linspace(-3.0, 3.0, 13, dtype=np.float32)
    got = landscape.loss_along(x, y, theta, knob=knob, values=values)
    want = []
    for v in values:
        t = list(theta)
        t[knob] = v
        want.append(torch_loss_grad(x, y, t)[0])
    _close(got, want)


@pytest.mark.parametrize("knob", [None, 0, 1])
@pytest.mark.parametrize("eta", ETAS)
def test_descent_path_matches_torch_sgd(data, eta, knob):
    x, y = data
    got = landscape.descent_path(x, y, eta=eta, steps=STEPS, knob=knob)
    want = torch_descent(x, y, eta=eta, steps=STEPS, start=LINE_START, knob=knob)
    for key in ("theta", "loss", "grad"):
        assert got[key].dtype == np.float32 and got[key].shape == want[key].shape, key
    _close(got["theta"], want["theta"], scale=np.abs(want["theta"]).max())
    _close(got["loss"], want["loss"])
    _close(got["grad"], want["grad"], scale=np.abs(want["grad"]).max())
    if knob is not None:
        assert np.all(got["theta"][:, 1 - knob] == np.float32(LINE_START[1 - knob])), "the frozen knob must not move"


def test_a_diverging_path_overflows_quietly(data):
    x, y = data
    with np.errstate(all="raise"):  # the module silences its own overflow; nothing may leak out
        path = landscape.descent_path(x, y, eta=50.0, steps=400, knob=0)
    assert not np.isfinite(path["loss"][-1])
    assert np.isfinite(path["loss"][0]) and path["loss"][1] > path["loss"][0]


def test_importing_landscape_does_not_import_torch():
    code = ("import sys; import dpviz.topics.one_step.landscape; "
            "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')); "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"importing dpviz.topics.one_step.landscape imported torch: {done.stdout}{done.stderr}"
