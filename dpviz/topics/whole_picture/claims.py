"""The whole picture: every claim of the walkthrough (Steps 1 to 6), asserted on recorded runs (numpy only).

* :func:`verify_summary` asserts each step's claim on one line-model run and its twin without the sync,
  and returns the lines the summary chapter prints.
* :func:`figure_claims` asserts what the derivation's published figures rest on, on their records
  (:data:`dpviz.topics.speedup_model.figure_records.FIGURE_PLAN`), and returns the lines ``./run`` prints.
* :func:`corner_bar` says what the summary's time bar shows: how the measured sync compares with the compute.
* :func:`biased_shard_or_batch` asserts, on a run with one kind of example per shard and one with a biased
  global batch, that a biased shard does not spoil the all-reduced mean while a biased batch does.

A claim that fails raises ``AssertionError`` naming it and the numbers behind it.
"""

from __future__ import annotations

import numpy as np

from dpviz import course
from dpviz.topics.speedup_model.figure_records import DerivationRecords
from dpviz.topics.ground_floor.records import Run, rel_err
from dpviz.engine.tolerance import GRAD_TOLERANCE
from dpviz.topics.one_step import landscape
from dpviz.topics.ground_floor import timing


def verify_summary(run: Run, alone: Run | None = None, *, tol: float = GRAD_TOLERANCE) -> list[str]:
    """Assert every claim of the walkthrough (Steps 1 to 6) on one recorded run; return them as lines.

    ``run`` is a line-model run with the all-reduce on and equal shards (its per-example
    gradients and parameters kept). ``alone``, if given, is its twin with the all-reduce off
    (same seed, k, b and steps; it may come from another machine, such as a shipped record),
    for the claim that the replicas drift without the sync.
    A claim that fails raises ``AssertionError`` naming it and the numbers behind it.
    """
    if not isinstance(run, Run):
        raise TypeError(f"run must be a Run record; got {type(run).__name__}.")
    m = run.meta
    if run.example_grad is None or run.params is None or not m["all_reduce"] or len(set(m["shard_sizes"])) > 1:
        raise ValueError("run must be a line-model run with the all-reduce on and equal shards (per-example "
                         f"gradients and parameters kept); got {run.describe()}, all_reduce={m['all_reduce']}.")
    k, b, steps = run.k, int(m["b"]), run.steps
    big = run.big_grad  # (steps, P), computed again in one process from all k·b examples

    def claim(ok, what: str, detail) -> None:
        if not bool(np.all(ok)):
            raise AssertionError(f"{what}: does not hold ({detail})")

    lines = []
    err = rel_err(run.example_grad.mean(axis=1), big, axis=1)
    claim(err <= tol, "each batch gradient is the mean of its examples' gradients", f"relative errors {err}")
    lines.append(f"each batch gradient is the mean of its examples' gradients ({course.ref('mini_batch')})")

    err = rel_err(run.local_grad.mean(axis=1), big, axis=1)
    claim(err <= tol, "the mean of the slice gradients is the big-batch gradient", f"relative errors {err}")
    lines.append(f"the mean of the slice gradients equals the big-batch gradient, relative error <= {tol:g} "
                 f"({course.ref('average_of_averages')})")

    distinct = [len(np.unique(run.batch_index[s])) for s in range(steps)]
    claim(np.array(distinct) == k * b, "the slices do not overlap", f"distinct rows per step {distinct}, k·b = {k * b}")
    counts = np.bincount(run.example_rank, minlength=k)
    claim(counts == b, f"every slice holds b = {b} examples", f"examples per rank {counts.tolist()}")
    different = [len({g.tobytes() for g in run.local_grad[s]}) for s in range(steps)]
    claim(np.array(different) == k, "the k slice gradients differ", f"distinct gradients per step {different}")
    lines.append(f"the {k} slices are disjoint, {b} examples each, with {k} different gradients "
                 f"({course.ref('one_group_per_device')})")

    err = run.big_batch_rel_err()
    claim(err <= tol, "the all-reduced gradient is the big-batch gradient", f"relative errors {err}")
    claim(run.received_identical(), "every rank received the same bits", f"per step {run.received_identical()}")
    lines.append(f"all_reduce returned the big-batch gradient, and the same bits to every rank "
                 f"({course.ref('all_reduce')})")

    if m["optimizer"] == "sgd":
        stepped = run.params[:-1] - m["lr"] * run.reduced_grad
        claim(np.allclose(run.params[1:], stepped, rtol=1e-6, atol=1e-7), "every rank stepped by θ ← θ − η ḡ",
              f"largest gap {np.abs(run.params[1:] - stepped).max():.2e}")
        lines.append(f"every rank stepped by θ ← θ − η ḡ ({course.ref('one_step')})")
    claim(run.replicas_identical(), "the replicas are bit-identical", f"per state {run.replicas_identical()}")
    lines.append(f"the {k} replicas were bit-identical at the start and after every one of the {steps} steps "
                 f"({course.ref('all_reduce')})")

    if alone is not None:
        same = {name: alone.meta[name] == m[name] for name in ("k", "b", "steps", "seed", "optimizer", "lr", "model")}
        if alone.meta["all_reduce"] or not all(same.values()):
            raise ValueError("alone must be the twin of run with the all-reduce off (same k, b, steps, seed, "
                             f"optimizer, lr and model); got {alone.describe()}, all_reduce={alone.meta['all_reduce']}.")
        drift = alone.replicas_identical()
        claim(drift[0], "without the all-reduce the replicas start equal", f"per state {drift}")
        first = rel_err(alone.local_grad[0], run.local_grad[0])
        claim(first <= tol, "the twin's first gradients are the run's", f"relative error {first:.1e} at step 0")
        claim(~drift[1:], "without the all-reduce the replicas differ after every step", f"per state {drift}")
        lines.append(f"without the all-reduce the replicas started equal and differed after each of the {steps} steps")

    claim(run.t_comm > 0, "the sync took time on every rank at every step", f"t_comm {run.t_comm}")
    lines.append(f"the sync cost time on every rank at every step ({course.ref('speedup_model')})")
    return lines


def figure_claims(records: dict) -> str:
    """The derivation's figure records checked: the line model's claims, the drift without the sync, the hand rings."""
    inputs = DerivationRecords.from_records(records)
    lines = [f"line model, k=4: {inputs.synced.check()}"]
    differ = int((~inputs.unsynced.replicas_identical()).sum())
    lines.append(f"all-reduce off: replicas differ in {differ} of {inputs.unsynced.steps + 1} recorded states")
    for sched in (inputs.ring, inputs.server):
        assert sched.equal, f"the hand-written {sched.impl} differs from dist.all_reduce"
        lines.append(f"{sched.impl} by hand, k={sched.k}: bit-identical to dist.all_reduce")
    return "\n".join(lines)


def biased_shard_or_batch(by_kind: Run, biased: Run, *, tol: float = GRAD_TOLERANCE) -> str:
    """A biased shard does not spoil the average; a biased global batch does.

    ``by_kind`` is a k = 2 run whose rank 0 took only x < 0 and rank 1 only x ≥ 0 (``sampling="by_kind"``),
    ``biased`` one whose ranks both took only x ≥ 0 (``sampling="biased"``). The yardstick is the whole data
    set's gradient at ``by_kind``'s starting θ. In both runs the all-reduced gradient must be the global
    batch's; the two one-kind shards' gradients must be more than 45° apart and each at least twice as far
    from the yardstick as their mean, which is within 10° of it; the biased batch's mean more than 30° off.
    """
    for run, sampling in ((by_kind, "by_kind"), (biased, "biased")):
        if run.k != 2 or run.meta["sampling"] != sampling:
            raise ValueError(f"the {sampling} run must have k = 2 and sampling={sampling!r}; "
                             f"got k = {run.k}, sampling={run.meta['sampling']!r}.")
    full = landscape.full_grad(by_kind.x, by_kind.y, by_kind.params[0, 0])

    def angle(g) -> float:
        return landscape.angle_deg(g, full)

    for run in (by_kind, biased):
        err = run.big_batch_rel_err().max()
        assert err <= tol and run.received_identical().all(), \
            f"{run.meta['sampling']}: the all-reduced gradient is not the global batch's (relative error {err:.1e})"
    shards, mean = by_kind.local_grad[0], by_kind.reduced_grad[0, 0]
    apart = landscape.angle_deg(*shards)
    assert apart > 45, f"the two one-kind shards' gradients are only {apart:.1f}° apart, not more than 45°"
    alone = [angle(g) for g in shards]
    assert all(a > 2 * angle(mean) for a in alone), \
        f"a one-kind shard alone is not twice as far off as the mean: {alone[0]:.1f}° and {alone[1]:.1f}° against {angle(mean):.1f}°"
    assert angle(mean) < 10, f"the mean of the one-kind shards is {angle(mean):.1f}° off the whole data set's gradient, not within 10°"
    off = angle(biased.reduced_grad[0, 0])
    assert off > 30, f"the biased global batch's mean is only {off:.1f}° off the whole data set's gradient, not more than 30°"
    return ("One kind per shard: the shards' gradients disagree and are each further off than their all-reduced "
            "mean, which is close to the whole data set's gradient. A biased global batch: the exact mean of "
            "its shards points far off.")


def corner_bar(run: Run) -> str:
    """The summary's corner bar in words: the run's median step, its compute against its sync, and why.

    The reasoning (two knobs and a few examples per rank: tiny arithmetic, a sync that costs a message
    round trip) predicts a long coral part; the sentence says what this run measured, and where the ranks
    shared cores it says that too.
    """
    times = timing.step_times(run)
    ratio = times.t_comm / times.t_compute if times.t_compute > 0 else np.inf
    cores = int(run.meta.get("cores", 1))
    crowded = (f" The {run.k} ranks shared {cores} core{'s' if cores > 1 else ''}, so part of each phase was "
               "waiting for a turn on the CPU." if run.k > cores else "")
    if ratio >= 1:
        verdict = (f"the sync took {ratio:.1f} times as long as the compute: as expected for two knobs and "
                   f"{run.meta['b']} examples per rank, keeping the copies identical cost more than the arithmetic")
    else:
        verdict = (f"the sync took only {ratio:.2f} of the compute's time, less than expected for so little "
                   "arithmetic: this machine passed the messages unusually fast, or the compute waited for cores")
    return (f"Median step of this run: {times.t_compute * 1e3:.2f} ms computing, {times.t_comm * 1e3:.2f} ms in the "
            f"sync; {verdict}.{crowded}")


# The answers to "how close to the whole data set's gradient will the all-reduced gradient of one kind per shard
# point?", the chapter's prediction, and the angles that part them.
FAIR_BATCH = ("close: within 10°", "in between: 10° to 30°", "far off: more than 30°")
CLOSE_DEG, FAR_DEG = 10.0, 30.0


def fair_batch_answer(by_kind: Run, full) -> tuple[str, str, str]:
    """For the prediction on the run with one kind of example per shard (``full``: the whole data set's gradient
    at the same θ): which of :data:`FAIR_BATCH` its all-reduced gradient was, how the chapter writes it, and why."""
    angle = landscape.angle_deg(by_kind.reduced_grad[0, 0], full)
    shards = [landscape.angle_deg(by_kind.local_grad[0, r], full) for r in range(by_kind.k)]
    choice = FAIR_BATCH[0] if angle <= CLOSE_DEG else FAIR_BATCH[1] if angle <= FAR_DEG else FAIR_BATCH[2]
    said = f"{choice} ({angle:.1f}° off)"
    why = (f"Each shard alone pointed {' and '.join(f'{a:.1f}°' for a in shards)} off, but the all-reduce returns the "
           f"mean of the shards' gradients, the gradient of the global batch, and that batch held both kinds, as a "
           f"random batch does")
    return choice, said, why
