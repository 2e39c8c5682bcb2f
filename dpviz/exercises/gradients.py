"""Checkers for the gradient exercises, run against real numbers: the line model's descent path and
recorded runs' gradients (shipped in ``dpviz/records/shipped_runs``). numpy only; the reader's function runs in
a fresh process that never sees these answers (see :func:`dpviz.engine.verdict.run_cases`).

    print(check_sgd_step(sgd_step))                      # one training step
    print(check_mean_gradient(mean_gradient))            # a mini-batch
    print(check_weighted_mean(weighted_mean))            # the average of averages
    print(check_data_parallel_step(data_parallel_step))  # the whole picture
    print(check_accumulated_gradient(accumulated_gradient))  # gradient accumulation

The real answer is always the recorded one: the next θ of the path, the gradient torch's backward
gave for the whole batch (``big_grad``), the parameters every replica held after the step. All the
calls of one check together get :data:`dpviz.engine.sandbox.TIME_LIMIT` seconds (5); whatever the
function does in them is answered with a verdict (see :func:`dpviz.engine.verdict.run_cases`).
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.data import line_data
import dpviz.engine.verdict as v
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.topics.one_group_per_device.shipped import drift_name, grid_name
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.one_step.landscape import descent_path

PATH_ETAS = ((0.1, 5), (0.9, 3))  # (η, steps): one training step's step size, and its too-large one
# (k, b) of the shipped grid run whose per-example gradients the mini-batch, average-of-averages and accumulation
# checks use
BATCH_RUN = (1, 16)
GROUP_SPLITS = ((2, 5, 9), (9, 2, 5), (1, 15), (4, 4, 4, 4), (3, 13))  # average of averages: group sizes, one per step
MICRO_BATCHES = (4, 4, 2, 8, 16)  # m for gradient accumulation, one per step


def _grid_run() -> Run:
    return Run.load(SHIPPED_DIR / grid_name(*BATCH_RUN))


def _where_step(t, run) -> str:
    return f"on step {t} of a recorded line-model run (k = {run.k}, b = {run.meta['b']}),"


def check_sgd_step(sgd_step) -> v.Verdict:
    """One training step: ``sgd_step(theta, grad, eta)`` must return θ − η ∇θL;
    checked on the line model's descent path."""
    name = v.require_function("check_sgd_step", sgd_step)
    x, y = line_data()
    cases = []
    for eta, steps in PATH_ETAS:
        path = descent_path(x, y, eta=eta, steps=steps)
        for t in range(steps):
            cases.append(v.Case((path["theta"][t].copy(), path["grad"][t].copy(), eta), path["theta"][t + 1],
                                f"at step {t} of the line model's descent path with η = {eta},"))
    mistakes = [
        (lambda th, g, eta: th + eta * g, "That is a step uphill: subtract η∇L from θ, don't add it."),
        (lambda th, g, eta: th - g, "η is missing: the step is η times the gradient."),
        (lambda th, g, eta: -eta * g, "That is the step alone: return the new θ, θ − η∇L."),
        (lambda th, g, eta: th, "θ came back unchanged: return θ − η∇L."),
        (lambda th, g, eta: th - PATH_ETAS[0][0] * g, f"That steps with η = {PATH_ETAS[0][0]} whatever eta is passed: "
                                                      "use the eta argument."),
    ]
    steps = sum(s for _, s in PATH_ETAS)
    return v.run_cases(name, sgd_step, cases, mistakes=mistakes, returns="the new θ, an array of 2 numbers",
                       success=f"it lands on the next θ of the line model's descent path at all {steps} steps, "
                               f"with η = {PATH_ETAS[0][0]} and with the too-large η = {PATH_ETAS[1][0]}")


def check_mean_gradient(mean_gradient) -> v.Verdict:
    """A mini-batch: ``mean_gradient(example_grads)`` (b, P) -> (P,);
    against the whole batch's gradient of a recorded run."""
    name = v.require_function("check_mean_gradient", mean_gradient)
    run = _grid_run()
    cases = [v.Case((run.example_grad[t].copy(),), run.big_grad[t], _where_step(t, run)) for t in range(run.steps)]
    b = run.example_grad.shape[1]
    mistakes = [
        (lambda g: np.sum(g, axis=0), f"That is the sum, {b} times the mean: divide by b."),
        (lambda g: np.mean(g, axis=1), "That averages across the parameters, one number per example: average over "
                                       "the examples (axis 0), one number per parameter."),
        (lambda g: g[0], "That is the first example's gradient alone: average all b of them."),
    ]
    return v.run_cases(name, mean_gradient, cases, mistakes=mistakes,
                       returns="one number per parameter, the mean of the rows",
                       success=f"on all {run.steps} steps of a recorded run the mean of the {b} per-example gradients "
                               "equals the gradient torch's backward gave for the whole batch")


def check_weighted_mean(weighted_mean) -> v.Verdict:
    """The average of averages: ``weighted_mean(group_grads, group_sizes)`` = Σ b_i g_i / Σ b_i;
    against the whole batch's gradient."""
    name = v.require_function("check_weighted_mean", weighted_mean)
    run = _grid_run()
    cases = []
    for t, sizes in enumerate(GROUP_SPLITS[:run.steps]):
        edges = np.cumsum((0,) + sizes)
        means = np.array([run.example_grad[t, lo:hi].astype(np.float64).mean(axis=0)
                          for lo, hi in zip(edges[:-1], edges[1:])], dtype=np.float32)
        cases.append(v.Case((means, list(sizes)), run.big_grad[t],
                            f"with groups of {', '.join(map(str, sizes))} examples from step {t} of a recorded run,"))
    mistakes = [
        (lambda g, b: np.mean(g, axis=0), "That is the plain mean of the group means, which counts a small group as "
                                          "much as a big one: weight each g_i by its b_i."),
        (lambda g, b: np.asarray(b, float) @ np.asarray(g) / len(b),
         "Divide by the number of examples, Σ b_i, not by the number of groups."),
        (lambda g, b: np.asarray(b, float) @ np.asarray(g), "That is Σ b_i g_i, the sum over all examples: divide by Σ b_i."),
    ]
    return v.run_cases(name, weighted_mean, cases, mistakes=mistakes, returns="one number per parameter",
                       success=f"for {len(cases)} splits of recorded batches into groups of unequal size it gives "
                               "the gradient of the whole batch, as torch's backward computed it")


def check_data_parallel_step(data_parallel_step) -> v.Verdict:
    """The whole picture: ``data_parallel_step(theta, rank_grads, eta)``;
    against the parameters a recorded k-rank run stepped to."""
    name = v.require_function("check_data_parallel_step", data_parallel_step)
    run = Run.load(SHIPPED_DIR / drift_name("sgd", True))
    eta, k = float(run.meta["lr"]), run.k
    cases = [v.Case((run.params[t, 0].copy(), run.local_grad[t].copy(), eta), run.params[t + 1, 0],
                    f"at step {t} of a recorded run on k = {k} ranks (η = {eta}),") for t in range(run.steps)]
    mistakes = [
        (lambda th, g, eta: th - eta * np.sum(g, axis=0),
         f"That steps with the sum of the {k} gradients: the all-reduce sums, and the mean needs a division by k."),
        (lambda th, g, eta: th - eta * g[0],
         "That is rank 0 stepping on its own gradient, as the run without the all-reduce does: use the mean of all k."),
        (lambda th, g, eta: th + eta * np.mean(g, axis=0), "That steps uphill: subtract η times the mean gradient."),
    ]
    return v.run_cases(name, data_parallel_step, cases, mistakes=mistakes, returns="the new θ, an array of 2 numbers",
                       success=f"it reproduces all {run.steps} steps of a recorded SGD run on k = {k} real ranks, "
                               "the parameters every replica held after each step")


def check_accumulated_gradient(accumulated_gradient) -> v.Verdict:
    """Gradient accumulation: ``accumulated_gradient(micro_grads)`` (m, P) -> (P,);
    against the whole batch's recorded gradient."""
    name = v.require_function("check_accumulated_gradient", accumulated_gradient)
    run = _grid_run()
    b = run.example_grad.shape[1]
    cases = []
    for t, m in enumerate(MICRO_BATCHES[:run.steps]):
        micro = run.example_grad[t].astype(np.float64).reshape(m, b // m, -1).mean(axis=1).astype(np.float32)
        cases.append(v.Case((micro,), run.big_grad[t],
                            f"with m = {m} micro-batches of {b // m} examples from step {t} of a recorded run,"))
    mistakes = [
        (lambda g: np.sum(g, axis=0), "That is the sum of the m micro-batch gradients, m times too large: backward() "
                                      "adds them up, so divide by m (or scale each micro-batch's loss by 1/m)."),
        (lambda g: g[-1], "That is the last micro-batch's gradient alone, as if the gradients were zeroed between "
                          "micro-batches: keep adding, and zero only after the update."),
        (lambda g: np.mean(g, axis=1), "That averages across the parameters: average over the micro-batches (axis 0)."),
    ]
    return v.run_cases(name, accumulated_gradient, cases, mistakes=mistakes, returns="one number per parameter",
                       success=f"for m = {', '.join(map(str, sorted(set(MICRO_BATCHES))))} micro-batches it gives the "
                               f"gradient torch's backward computed for the whole batch of {b}")
