"""One training step: the chapter's three claims, asserted on the line model and all its data (numpy only).

    from dpviz.topics.one_step.claims import one_step_claims
    print(one_step_claims(x, y, curve, too_big, arrow_tip=arrow_end(curve)[0]))
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.one_step import landscape
from dpviz.topics.one_step.landscape import Step1Data

H = 0.01  # the half-width of the centred difference that stands in for the slope of the drawn curve


def one_step_claims(x, y, curve: Step1Data, too_big: Step1Data, *, arrow_tip: float) -> str:
    """A small step lowers the loss; the red arrow is −η times the gradient; too large an η makes the loss grow.

    ``curve`` is the first figure's data (a small η), ``too_big`` the same from an η past the limit, and
    ``arrow_tip`` the knob's value where the figure's red arrow ends. The gradient is computed afresh here.
    """
    eta, theta0, knob = curve.eta, np.asarray(curve.theta), curve.knob
    one_step = landscape.descent_path(x, y, eta=eta, steps=1, start=theta0)   # both knobs moving
    grad = landscape.full_grad(x, y, theta0)
    assert one_step["loss"][1] < one_step["loss"][0], \
        f"one step with η = {eta:g} did not lower the loss: {one_step['loss'][0]:.4f} -> {one_step['loss'][1]:.4f}"
    assert curve.path_loss[1] < curve.path_loss[0], \
        f"the step along one knob did not lower the loss: {curve.path_loss[0]:.4f} -> {curve.path_loss[1]:.4f}"
    arrow = arrow_tip - theta0[knob]
    assert np.isclose(arrow, -eta * grad[knob], rtol=1e-5), \
        f"the red arrow is not −η times the gradient: {arrow:+.6f} against {-eta * grad[knob]:+.6f}"
    moved = one_step["theta"][1] - one_step["theta"][0]
    assert np.allclose(moved, -eta * grad, rtol=1e-5), f"the step is not −η times the gradient: {moved} against {-eta * grad}"
    values = [theta0[knob] - H, theta0[knob] + H]
    left, right = landscape.loss_along(x, y, theta0, knob=knob, values=values)
    slope = (right - left) / (2 * H)
    assert np.isclose(slope, grad[knob], rtol=1e-3), \
        f"the gradient is not the slope of the drawn curve: {grad[knob]:+.4f} against a centred difference of {slope:+.4f}"
    lengths = np.abs(np.diff(curve.path[:, knob]))
    assert (np.diff(lengths) < 0).all(), \
        f"the steps along the knob did not get shorter one after another: lengths {np.round(lengths, 4).tolist()}"
    rises = np.diff(too_big.path_loss)
    assert (rises > 0).all(), \
        f"with η = {too_big.eta:g} the loss did not rise at every step: it changed by {np.round(rises, 3).tolist()}"
    return (f"One step with η = {eta:g} lowered the loss; the red arrow is −η times the gradient, "
            f"which is the slope of the drawn curve; each of the {len(lengths)} steps was shorter than the one before; "
            f"with η = {too_big.eta:g} the loss rose at every step.")
