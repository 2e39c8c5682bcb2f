"""A bigger batch wants a bigger step: the chapter's claims, asserted on the learning-rate grids (numpy only).

    from dpviz.topics.bigger_batch.claims import lr_claims
    for sentence in lr_claims(line_grid, mlp_grid):   # raises AssertionError naming the first claim that fails
        print(sentence)
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.data import line_data
from dpviz.topics.bigger_batch.records import LrGrid
from dpviz.topics.bigger_batch import theory as lr_rules


def figure_claims(records: dict) -> str:
    """The chapter's claims, asserted on the figure records; one line for the terminal."""
    line, mlp = records["lr_line"], records["lr_mlp"]
    return "learning-rate rules: " + " ".join(lr_claims(line, mlp))


def lr_claims(line: LrGrid, mlp: LrGrid, *, k: int = 4) -> list[str]:
    """Assert what the chapter claims on two grids that hold its runs; returns one sentence per claim."""
    said = []
    for grid in (line, mlp):
        grid.check()
        ratios = {rule: grid.examples_ratio(k=k, rule=rule) for rule in ("x1", "sqrt", "linear")}
        for rule, ratio in ratios.items():
            expected = k / lr_rules.multiplier(rule, k)
            assert abs(ratio / expected - 1) <= 0.15, f"{grid.model_words}, {rule}: {ratio:.2f}× the examples, not {expected:g}×"
        one, same = grid.curve(grid.index(k=1, multiplier=1.0)), grid.curve(grid.rule_index(k=k, rule="x1"))
        by_step = float(np.max(np.abs(same / one[: len(same)] - 1)))
        assert by_step < 0.15, f"{grid.model_words}: ×1 on {k} ranks is {by_step:.0%} off one rank, step for step"
        said.append(f"{_capital(grid.model_words)}: to reach k=1's loss, k={k} needed {ratios['linear']:.2f}× its examples with ×k, "
                    f"{ratios['sqrt']:.2f}× with ×√k, {ratios['x1']:.2f}× with ×1 (which stays within {by_step:.0%} of "
                    f"k=1 step for step).")
        rows = [grid.index(k=k, multiplier=m) for m in grid.meta["multipliers"]]
        rows = [r for r in rows if not grid.diverged(r)]
        gaps = {float(grid.multiplier[r]): grid.median_relative_gap(r) for r in rows}
        doublings = [gaps[2 * m] / gaps[m] for m in gaps if 2 * m in gaps]
        assert all(1.5 <= d <= 2.5 for d in doublings), f"{grid.model_words}: gap ratios per doubling of the rate {doublings}"
        said.append(f"{_capital(grid.model_words)}: the one-step gap grew {min(doublings):.2f}× to {max(doublings):.2f}× with each "
                    f"doubling of the rate.")
    x, _ = line_data(line.meta["dataset_size"], seed=line.meta["seed"])
    lam = lr_rules.line_curvatures(x)
    for r in (line.index(k=k, multiplier=m) for m in line.meta["multipliers"]):
        if line.diverged(r):
            continue
        eta, gap = line.small_step_rate(r), line.median_relative_gap(r)
        assert lr_rules.bowl_step_gap(eta, k, lam[1]) <= gap <= lr_rules.bowl_step_gap(eta, k, lam[0]), \
            f"line model at small rate {eta:g}: gap {gap:.3f} outside the bowl's two curvatures"
        early, late = np.nanmedian(line.relative_gap(r)[:10]), np.nanmedian(line.relative_gap(r)[10:])
        assert 0.75 <= early / late <= 1.33, f"line model at small rate {eta:g}: gap {early:.3f} early, {late:.3f} later"
    for r in (mlp.index(k=k, multiplier=m) for m in mlp.meta["multipliers"]):
        if not mlp.diverged(r):
            early, late = np.nanmedian(mlp.relative_gap(r)[:10]), np.nanmedian(mlp.relative_gap(r)[10:])
            assert early <= 1.05 * late, f"MLP at small rate {mlp.small_step_rate(r):g}: gap {early:.3f} early, {late:.3f} later"
    small, large = (line.median_relative_gap(line.index(k=k, multiplier=m)) for m in (4.0, 64.0))
    assert small < 0.1 < 0.3 < large, f"one-step gaps {small:.2f} at ×4 and {large:.2f} at ×64"
    said.append(f"Line model: one big step against {k} small ones from the same θ, {small:.0%} of a step apart at ×4, "
                f"{large:.0%} at ×64; every run's gap between the bowl's two modeled curves, and about as large in its "
                f"first 10 steps as later (the MLP's: no larger early than later).")
    plain = line.index(k=k, multiplier=64.0, warmup=0)
    twin = int(line.twin[plain])
    distance = line.twin_distance[plain, : line.steps[plain] + 1]
    early, late = float(np.max(distance[1:6])), float(np.median(distance[line.steps[plain] // 2:]))
    assert early > 5 * late, f"line model, ×64: distance to the twin {early:.2f} early, {late:.2f} later"
    said.append(f"Line model, ×64: up to {early:.2f} from its twin in the first 5 steps, {late:.2f} (median) in its second half.")
    floor = 1.5 * line.final_loss(twin)
    reach = {w: line.examples_to_reach(line.index(k=k, multiplier=64.0, warmup=w), floor) for w in line.meta["warmups"]}
    twin_reach, big_step = line.examples_to_reach(twin, floor), k * line.meta["b"]
    assert reach[3] < reach[0] and reach[3] <= twin_reach + big_step, f"warm-up 3 did not rescue ×64: {reach}, twin {twin_reach}"
    longest = max(line.meta["warmups"])
    if longest > 3:
        assert reach[longest] > reach[3], f"a {longest}-step warm-up was not slower than a 3-step one: {reach}"
    said.append(f"Line model, ×64: within 1.5× the floor after {reach[3]:.0f} examples with a 3-step warm-up (its twin: "
                f"{twin_reach:.0f}, so within one big step of {big_step}), {reach[0]:.0f} without"
                + (f", {reach[longest]:.0f} with {longest} steps." if longest > 3 else "."))
    for grid, multiplier in ((line, 128.0), (mlp, 64.0)):
        runs = [grid.index(k=k, multiplier=multiplier, warmup=w) for w in grid.meta["warmups"]]
        at = [int(grid.diverged_at[r]) for r in runs]
        assert min(at) >= 0, f"{grid.model_words}, ×{multiplier:g}: a warm-up prevented the divergence"
        assert all(a < b for a, b in zip(at, at[1:])), f"{grid.model_words}, ×{multiplier:g}: a longer warm-up blew up sooner: {at}"
        said.append(f"{_capital(grid.model_words)}, ×{multiplier:g}: diverged with every warm-up ({', '.join(map(str, grid.meta['warmups']))} "
                    f"steps), at steps {', '.join(map(str, at))}.")
    return said


def _capital(words: str) -> str:
    return words[:1].upper() + words[1:]


# The answers to "which rule reaches the lowest loss on k ranks after the same examples?", the chapter's prediction.
RULE_CHOICES = {"x1": "×1 (keep η)", "sqrt": "×√k (square root)", "linear": "×k (linear)"}


def lowest_loss_answer(grid: LrGrid, *, k: int = 4) -> tuple[str, str, str]:
    """For the prediction on ``grid`` at ``k`` ranks, no warm-up: the rule of :data:`RULE_CHOICES` whose run ended
    lowest after the same examples, how the chapter writes it, and why."""
    final = {rule: grid.final_loss(grid.rule_index(k=k, rule=rule)) for rule in RULE_CHOICES}
    best = min(final, key=final.get)
    one = grid.final_loss(grid.index(k=1, multiplier=1.0))
    said = f"{RULE_CHOICES[best]}, at loss {final[best]:.3g}"
    why = (f"After the same {grid.meta['examples']:,} examples, {grid.model_words} on {k} ranks ended at loss "
           + ", ".join(f"{final[r]:.3g} with {lr_rules.RULE_LABELS[r]}" for r in RULE_CHOICES)
           + f" (one rank at η: {one:.3g})")
    if best == "linear":
        why += (f": {k} ranks take a {_nth(k)} of the steps, and only ×k lets each big step go as far as the {k} small "
                f"ones it replaces, while ηλ stays small")
    else:
        why += f": ×k did not end lowest here, so its big steps did not make up for the {_nth(k)} of the steps"
    return RULE_CHOICES[best], said, why


def _nth(k: int) -> str:
    return {2: "half", 3: "third", 4: "quarter"}.get(k, f"{k}th")
