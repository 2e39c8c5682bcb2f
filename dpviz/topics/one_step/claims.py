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


def loss_after_too_big_steps(x, y, too_big: Step1Data) -> dict:
    """The answer to the chapter's prediction: how many times its starting value the loss is after ``too_big``'s
    steps along one knob, and why, from the parabola's curvature. Keywords of
    :meth:`dpviz.engine.predict.Prediction.answer`; nothing is asserted here (``one_step_claims`` asserts the rise).

    Along one knob the loss is a parabola of curvature L'' (2·mean(x²) along w, 2 along c), so each step multiplies the
    knob's distance to the valley floor by 1 − η L'', and the loss's height above the floor by (1 − η L'')².
    """
    xs, ys = (np.asarray(a, dtype=np.float32).reshape(-1).astype(np.float64) for a in (x, y))
    knob, eta, theta = too_big.knob, too_big.eta, np.asarray(too_big.theta, dtype=np.float64)
    name = landscape.KNOB_NAMES[knob]
    curvature = 2 * np.mean(xs * xs) if knob == 0 else 2.0
    other = theta[1 - knob]
    # the valley floor along the knob, the other knob frozen: where the slope along it is zero
    best = np.mean((ys - other) * xs) / np.mean(xs * xs) if knob == 0 else np.mean(ys - other * xs)
    floor = float(landscape.loss_along(x, y, theta, knob=knob, values=[best])[0])
    start, end = float(too_big.path_loss[0]), float(too_big.path_loss[-1])
    steps, factor = len(too_big.path_loss) - 1, 1 - eta * curvature
    return {"measured": end / start,
            "said": f"{end / start:.1f}× ({start:.1f} → {end:.1f} in {steps} steps)",
            "why": (f"Along {name} the loss is a parabola (L'' = {curvature:.2f}) whose floor, with "
                    f"{landscape.KNOB_NAMES[1 - knob]} held at {other:g}, is {floor:.2f}. Each step multiplied {name}'s "
                    f"distance to the floor by 1 − ηL'' = {factor:+.2f}, so the loss's height above it by "
                    f"{factor ** 2:.2f}: {steps} steps made {start - floor:.2f} above the floor into "
                    f"{start - floor:.2f} × {factor ** 2:.2f}^{steps} = {(start - floor) * factor ** (2 * steps):.1f}, "
                    f"a loss of {floor + (start - floor) * factor ** (2 * steps):.1f}")}
