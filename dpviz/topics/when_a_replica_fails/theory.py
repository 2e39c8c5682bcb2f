"""How often to checkpoint: the Young/Daly interval, and the time a run loses to failures (numpy only).

A run that saves a checkpoint every τ seconds of work, each save costing δ seconds, on machines that fail on
average once every M seconds (the mean time between failures, MTBF), and that takes R seconds to notice a failure
and restart, loses per second of useful work about

    waste(τ) = δ / τ  +  (τ / 2 + R) / M

the first term the checkpoints themselves, the second the work redone after a failure (a failure lands on average
halfway through an interval) plus the restart. Setting d waste / dτ = −δ/τ² + 1/(2M) to zero gives Young's interval
(1974; Daly's 2006 refinement multiplies it by 1 + (1/3)·√(δ/2M) + (1/9)·(δ/2M), less δ: a correction of
order √(δ/M): about 0.8 % when δ is a thousandth of M, 8 % when it is a tenth)

    τ* = √(2 · δ · M),

where the two costs are equal: δ/τ* = τ*/(2M). Halving M shortens τ* by √2; so does halving δ.

The chapter's other derivation, DiLoCo's outer step, is here too as the numpy oracle the runs are held to
(:func:`outer_step_error`): the mean of the ranks' θ, then a Nesterov step on the outer θ.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.checks import check_real

MAX_FAILURES = 1000  # a schedule with more failures than this is a run that never finishes


def young_daly_interval(checkpoint_seconds: float, mtbf_seconds: float) -> float:
    """τ* = √(2 δ M): the seconds of work between checkpoints that lose the least time."""
    delta = check_real("checkpoint_seconds", checkpoint_seconds, low=0, low_open=True)
    mtbf = check_real("mtbf_seconds", mtbf_seconds, low=0, low_open=True)
    return float(np.sqrt(2.0 * delta * mtbf))


def lost_per_failure(interval_seconds, restart_seconds: float = 0.0):
    """The expected seconds one failure costs: half an interval of work done again, plus the restart."""
    interval = np.asarray(interval_seconds, dtype=float)
    if np.any(interval <= 0):
        raise ValueError(f"interval_seconds must be > 0; got {interval_seconds!r}.")
    check_real("restart_seconds", restart_seconds, low=0)
    return interval / 2.0 + restart_seconds


def waste_fraction(interval_seconds, checkpoint_seconds: float, mtbf_seconds: float, restart_seconds: float = 0.0):
    """δ/τ + (τ/2 + R)/M: seconds lost per second of useful work, modeled (first order in δ/M and τ/M)."""
    check_real("checkpoint_seconds", checkpoint_seconds, low=0)
    mtbf = check_real("mtbf_seconds", mtbf_seconds, low=0, low_open=True)
    interval = np.asarray(interval_seconds, dtype=float)
    return checkpoint_seconds / interval + lost_per_failure(interval, restart_seconds) / mtbf


def expected_waste(steps: int, every, step_seconds: float, checkpoint_seconds: float, failures: float,
                   restart_seconds: float = 0.0):
    """Modeled seconds a run of ``steps`` steps loses with a checkpoint every ``every`` steps and ``failures``
    failures: (steps/every − 1)·δ saves (none at the end) and, per failure, half an interval redone plus R."""
    every = np.asarray(every, dtype=float)
    saves = np.ceil(steps / every) - 1
    return saves * checkpoint_seconds + failures * lost_per_failure(every * step_seconds, restart_seconds)


def kill_schedule(steps: int, every: int, mtbf_steps: float, k: int, seed: int = 0) -> list:
    """(rank, step) of each failure of a run of ``steps`` steps with a checkpoint every ``every`` steps, failures
    arriving as a Poisson process with a mean of ``mtbf_steps`` steps of work between them.

    Work is counted in steps executed, redone ones included: after a failure the run resumes from the last
    checkpoint, and the clock of failures keeps running. The same ``seed`` gives the same arrival times for every
    ``every``, so runs at different intervals meet the same failures."""
    mtbf = check_real("mtbf_steps", mtbf_steps, low=0, low_open=True)
    rng = np.random.default_rng(seed)
    kills, position, executed = [], 0, 0.0
    arrival = rng.exponential(mtbf)
    while True:
        at = position + int(arrival - executed)  # the step the failure lands in
        if at >= steps:
            return kills
        if len(kills) == MAX_FAILURES:
            raise ValueError(f"every must be small enough against mtbf_steps={mtbf:g} for the run to get through: "
                             f"with a checkpoint every {every} steps, {MAX_FAILURES} failures struck before step "
                             f"{steps}; got every={every}.")
        kills.append((int(rng.integers(k)), at))
        executed = arrival
        position = (at // every) * every  # back to the last checkpoint
        arrival += max(rng.exponential(mtbf), 1.0)  # a restart does at least one step before the next failure


def outer_step_error(run) -> float:
    """The numpy oracle: recompute every sync of DiLoCo (and local SGD's averages) from the parameters the ranks
    held before it, and return the largest difference from what the ranks set, relative to |θ|.

    ``run`` is a :class:`~dpviz.topics.when_a_replica_fails.records.DilocoRun`, live or rebuilt from its record."""
    cfg = run.config
    worst = 0.0
    for mode in ("local", "diloco"):
        theta, v = run.theta0.astype(np.float64), None
        for before, after in zip(run.before[mode], run.after[mode]):
            mean = before.astype(np.float64).mean(axis=0)
            if mode == "local":
                theta = mean
            else:
                delta = theta - mean
                v = delta if v is None else cfg.outer_momentum * v + delta
                theta = theta - cfg.outer_lr * (delta + cfg.outer_momentum * v)
            worst = max(worst, float(np.abs(after - theta).max() / np.abs(theta).max()))
            theta = after.astype(np.float64)  # go on from what the ranks held, so errors do not compound
    # streaming: fragment by fragment, each with its own outer θ slice and velocity
    outer, velocities = run.theta0.astype(np.float64), {}
    for f, before, after in zip(run.fragment, run.before["streaming"], run.after["streaming"]):
        lo, hi = run.edges[f], run.edges[f + 1]
        delta = outer[lo:hi] - before[:, lo:hi].astype(np.float64).mean(axis=0)
        v = velocities[f] = delta if f not in velocities else cfg.outer_momentum * velocities[f] + delta
        expected = outer[lo:hi] - cfg.outer_lr * (delta + cfg.outer_momentum * v)
        worst = max(worst, float(np.abs(after[lo:hi] - expected).max() / np.abs(expected).max()))
        if not np.array_equal(after[:lo], before[0, :lo]) or not np.array_equal(after[hi:], before[0, hi:]):
            return float("inf")  # a sync changed what lies outside its fragment
        outer[lo:hi] = after[lo:hi]
    return worst
