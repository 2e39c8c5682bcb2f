"""The average of averages: equal groups give the big-batch gradient, unequal ones need a weighted mean (numpy only).

    from dpviz.topics.average_of_averages.claims import equal_groups, unequal_groups
    print(equal_groups(run), unequal_groups(uneven))   # raises AssertionError naming the claim that fails
"""

from __future__ import annotations

from dpviz.topics.ground_floor.records import Run, rel_err
from dpviz.engine.tolerance import GRAD_TOLERANCE, tolerance_words

MISS = 0.01  # relative: what "the plain mean missed" means, far above rounding


def equal_groups(run: Run) -> str:
    """With equal groups, the mean of the group means is the big-batch gradient, and every rank got the same bits."""
    if len(set(run.meta["shard_sizes"])) != 1:
        raise ValueError(f"run must have equal groups; got shard sizes {run.meta['shard_sizes']}.")
    err = run.big_batch_rel_err().max()
    assert err <= GRAD_TOLERANCE, f"the all-reduced gradient is not the big-batch gradient: relative error {err:.1e} > {tolerance_words()}"
    means = rel_err(run.local_grad[0].mean(axis=0), run.big_grad[0])  # (1/k) Σ g_i against g_big, at step 0
    assert means <= GRAD_TOLERANCE, f"the mean of the {run.k} group means is not the big-batch gradient: relative error {means:.1e} > {tolerance_words()}"
    same = run.received_identical()
    assert same.all(), f"the ranks did not receive the same bits at steps {[s for s, ok in enumerate(same) if not ok]}"
    return (f"Equal groups: the mean of the {run.k} group means matched the big-batch gradient to within {tolerance_words()} "
            "(relative), and every rank received the same bits.")


def unequal_groups(uneven: Run) -> str:
    """With unequal groups, the weighted mean Σ b_i g_i / Σ b_i is the big-batch gradient and the plain mean is not.

    ``uneven`` is a run with unequal shards whose all-reduce took the weighted mean.
    """
    if uneven.meta["mean"] != "weighted" or len(set(uneven.meta["shard_sizes"])) == 1:
        raise ValueError("uneven must be a run with unequal shards and the weighted all-reduce; got shard sizes "
                         f"{uneven.meta['shard_sizes']}, mean={uneven.meta['mean']!r}.")
    sizes, local, big = uneven.shard_sizes, uneven.local_grad[0], uneven.big_grad[0]
    err = uneven.big_batch_rel_err().max()
    assert err <= GRAD_TOLERANCE, f"the weighted all-reduce is not the big-batch gradient: relative error {err:.1e} > {tolerance_words()}"
    weighted = rel_err((sizes[:, None] * local).sum(axis=0) / sizes.sum(), big)
    assert weighted <= GRAD_TOLERANCE, f"the weighted mean of the group means is not the big-batch gradient: relative error {weighted:.1e}"
    plain = rel_err(local.mean(axis=0), big)
    assert plain > MISS, f"the plain mean did not miss: relative error {plain:.1e}, not above {MISS:g}"
    return (f"Unequal groups ({_and(sizes.tolist())}): the weighted mean matched the big-batch gradient to within "
            f"{tolerance_words()} (relative); the plain mean missed it by {plain:.1%} of the gradient's size "
            f"(more than the {MISS:.0%} this check calls a miss, far above rounding).")


def _and(values) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


# The answers the chapter's prediction offers: where the mean of the k group means lands against the big-batch gradient
LANDS = ("on the big-batch gradient, to float rounding", "a few per cent off it", "far off it")
FEW = 0.1  # relative: up to this much off is "a few per cent"


def where_the_mean_of_means_lands(run: Run) -> dict:
    """The answer to the chapter's prediction: where (1/k) Σ g_i lands against the big-batch gradient at step 0, as one
    of :data:`LANDS`, and why (keywords of :meth:`dpviz.engine.predict.Prediction.answer`; :func:`equal_groups`
    asserts it)."""
    big, local = run.big_grad[0], run.local_grad[0]
    err = rel_err(local.mean(axis=0), big)
    measured = LANDS[0] if err <= GRAD_TOLERANCE else LANDS[1] if err <= FEW else LANDS[2]
    said = f"the mean of the {run.k} means " + (f"{measured} (within {tolerance_words()}, relative)" if measured == LANDS[0]
                                                else f"{measured} ({err:.1%} of its size)")
    spread = max(rel_err(g, big) for g in local)
    return {"measured": measured, "said": said,
            "why": (f"The {run.k} group means are up to {spread:.0%} of the gradient's size away from it, since each "
                    f"group is a different sample; but each group's sum is b times its mean, so with equal groups "
                    f"the b cancels and the mean of the {run.k} means is the mean of all {int(run.shard_sizes.sum())} "
                    "examples (the derivation above)")}
