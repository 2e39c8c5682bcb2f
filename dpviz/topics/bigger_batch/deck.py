"""Self-check cards for "a bigger batch wants a bigger step": the linear and square-root rules, warm-up, and divergence.

Numbers come from ``dpviz.topics.bigger_batch.theory`` and from the grids of real runs shipped with dpviz
(``dpviz.topics.bigger_batch.records``); a grid is read only when its card is shown.
"""

from __future__ import annotations

import numpy as np

from dpviz import course
from dpviz.engine.data import line_data
from dpviz.topics.bigger_batch.records import LrGrid
from dpviz.engine.cards import Card
from dpviz.topics.bigger_batch import theory as lr_rules

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def lr_three_rules(lr_base, k):
    """The rate each rule gives k ranks, from the rate ``lr_base`` tuned for one."""
    return {rule: lr_rules.scaled_lr(lr_base, rule, k) for rule in lr_rules.RULES} | {"root": float(np.sqrt(k))}


def lr_warmup_rates(lr, steps, warmup):
    """The first rates of a linear warm-up of ``warmup`` steps to ``lr``."""
    return {"rates": [float(v) for v in lr_rules.warmup_schedule(lr, steps, warmup)]}


def lr_bowl_gaps(k, multipliers):
    """The line model's curvatures, its limit 2/λ_max, and the one-step gap modeled and measured at each multiplier."""
    x, _ = line_data()
    lam = lr_rules.line_curvatures(x)
    grid = LrGrid.shipped("line")
    rows = [grid.index(k=k, multiplier=m) for m in multipliers]
    etas = [grid.small_step_rate(r) for r in rows]
    return {
        "lam": [float(v) for v in lam],
        "limit": lr_rules.stability_limit(x),
        "etas": etas,
        "modeled": [float(lr_rules.bowl_step_gap(eta, k, lam[0])) for eta in etas],
        "measured": [grid.median_relative_gap(r) for r in rows],
        "big": [k * eta for eta in etas],
    }


def lr_examples_needed(model, k):
    """How many times k = 1's examples each rule needed on k ranks to reach the same loss, in the shipped grid."""
    grid = LrGrid.shipped(model)
    return {rule: grid.examples_ratio(k=k, rule=rule) for rule in lr_rules.RULES} | {"root": float(np.sqrt(k))}


def lr_divergence_steps(model, k, multiplier):
    """The step at which each warm-up's run diverged in the shipped grid (-1: it did not), and the rate."""
    grid = LrGrid.shipped(model)
    warmups = grid.meta["warmups"]
    steps = [int(grid.diverged_at[grid.index(k=k, multiplier=multiplier, warmup=w)]) for w in warmups]
    return {"warmups": warmups, "steps": steps, "lr": grid.meta["base_lr"] * multiplier,
            "total": int(grid.steps[grid.index(k=k, multiplier=multiplier)])}


CARDS = (
    Card(
        "Why does the linear rule multiply η by k, and where does the k come from?",
        "Picture one rank taking k steps of η on k batches in a row, and k ranks taking one step on the "
        "mean of the same k batches. If θ barely moves during the k small steps, each small step uses "
        "about the same gradient it would have at the start, so together they move −η·Σ g_i. The big "
        "step moves −η′·(Σ g_i)/k, because the all-reduce averages. Equal moves need η′ = k·η: the k "
        f"undoes the averaging. {course.Ref('bigger_batch')} measures how far apart the two land on every run.",
        "why", HERE, f"{TOPIC}-why-linear",
    ),
    Card(
        "The notes' derivation asks “why exactly k, not √k?”. What is √k about, then?",
        "Noise. The mean of k·b example gradients scatters around the true gradient with a standard "
        "deviation √k times smaller than the mean of b. The square-root rule scales η by √k, which keeps "
        "η²/B, the spread each step adds, the same as before. It is the gentler choice; the linear rule "
        "(×k) is the one that keeps pace with one rank example for example, as long as η·λ stays small.",
        "why", HERE, f"{TOPIC}-why-sqrt",
    ),
    Card(
        "A rate η = {lr_base:g} was tuned for one rank at batch b. Now k = {k} ranks take b each. What "
        "rate does each rule give?",
        "×1 keeps {x1:.3g}; the square-root rule gives {sqrt:.3g} (×√{k} = ×{root:g}); the linear rule "
        "gives {linear:.3g} (×{k}).",
        "numeric", HERE, f"{TOPIC}-num-rules",
        compute=lr_three_rules, params={"lr_base": 0.01, "k": 4},
    ),
    Card(
        "In the shipped {model} grid, k = {k} ranks train on the same examples as one rank. "
        "How many times one rank's examples does each rule need to reach the same loss?",
        "×{k} (linear): {linear:.2f}×, about 1, as the rule promises. ×√{k}: {sqrt:.2f}×, about "
        "{k}/√{k} = {root:g}. ×1: {x1:.2f}×, about {k}: the same rate with {k} times fewer steps.",
        "numeric", HERE, f"{TOPIC}-num-examples",
        compute=lr_examples_needed, params={"model": "mlp", "k": 4},
    ),
    Card(
        "On the line model's bowl (curvatures λ from the data), how far apart do {k} steps of η and one "
        "step of {k}η land, from the same θ, as a fraction of the step, for the shipped runs at ×{multipliers[0]:g} "
        "and ×{multipliers[1]:g}?",
        "λ = {lam[0]:.2f} and {lam[1]:.2f}. At η = {etas[0]:.3g}: modeled {modeled[0]:.0%} (for λ_max), "
        "measured {measured[0]:.0%} (median over the run). At η = {etas[1]:.3g}: modeled {modeled[1]:.0%}, "
        "measured {measured[1]:.0%}. For small η·λ the gap is about (k−1)·η·λ/2: the rule holds while η·λ "
        "is small. For scale: the big rate there is {big[1]:.3g}, and the bowl diverges past 2/λ_max = {limit:.3g}.",
        "numeric", HERE, f"{TOPIC}-num-gap",
        compute=lr_bowl_gaps, params={"k": 4, "multipliers": (4.0, 64.0)},
    ),
    Card(
        "A linear warm-up of {warmup} steps to η = {lr:g}: which rates do the first {steps} steps use?",
        "{rates[0]:.3g}, {rates[1]:.3g}, {rates[2]:.3g}, then {rates[3]:.3g} and {rates[4]:.3g}: step t "
        "uses η·(t + 1)/{warmup} until the full rate.",
        "numeric", HERE, f"{TOPIC}-num-warmup",
        compute=lr_warmup_rates, params={"lr": 0.64, "steps": 5, "warmup": 3},
    ),
    Card(
        "True or false: with a long enough warm-up, any learning rate becomes safe.",
        "False. Warm-up only shortens the first steps, while the gradients are large and a big step "
        "overshoots. Once the ramp ends, the full rate is used, and a rate past the loss's curvature "
        f"limit (2/λ_max on a bowl) diverges then. {course.Ref('bigger_batch')}'s runs show the blow-up arriving "
        "later "
        "with a longer warm-up, never not at all.",
        "true/false", HERE, f"{TOPIC}-tf-warmup-any",
    ),
    Card(
        "In the shipped {model} grid, k = {k} ranks at ×{multiplier:g}: at which step did the run with "
        "each warm-up diverge?",
        "At η = {lr:.3g}, in runs of {total} steps: warm-up {warmups[0]}, step {steps[0]}; {warmups[1]}, "
        "step {steps[1]}; {warmups[2]}, step {steps[2]}; {warmups[3]}, step {steps[3]}. The warm-up "
        "decided when, not whether.",
        "numeric", HERE, f"{TOPIC}-num-diverge",
        compute=lr_divergence_steps, params={"model": "mlp", "k": 4, "multiplier": 64.0},
    ),
    Card(
        "Spot the error: “k small steps and one step of k·η on their mean are the same thing, so with "
        "the linear rule a k-rank run retraces the one-rank run exactly.”",
        "They agree only while the gradient hardly changes over the k small steps. Each small step "
        "changes it by about η·λ of itself, so the two land (k−1)·η·λ/2 of a step apart for small η·λ, "
        "and far apart when η·λ is large: the big step then overshoots where the small ones would "
        f"have turned. {course.Ref('bigger_batch')} measures the gap on every run.",
        "spot the error", HERE, f"{TOPIC}-spot-exact",
    ),
    Card(
        "Why does a warm-up help most at the start of training?",
        "At the start θ is far from any minimum, so gradients are large and every step is long. The "
        "linear rule's error is a fraction of the step, so long steps make a large error: the big step "
        "lands far from where k small steps would have gone. Ramping η up keeps those first steps "
        "short; by the time the full rate arrives the steps are short anyway.",
        "why", HERE, f"{TOPIC}-why-warmup-early",
    ),
    Card(
        "Edge case: k = 1. What do ×1, ×√k and ×k give?",
        "All three give η itself: with one rank the batch is what it was, and 1 = √1 = 1.",
        "edge case", HERE, f"{TOPIC}-edge-k1",
    ),
)
