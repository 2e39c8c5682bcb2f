"""Self-check cards for the average of averages: where b cancels, unequal groups, and rounding."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number

CARDS = (
    Card(
        "In the Step 3 derivation, where does b cancel, and what remains?",
        "Each group's sum of per-example gradients equals b·g_i. Summing over the k groups and "
        "dividing by the total count b·k, the b of every term meets the b below the line, leaving "
        "(1/k)·Σ g_i: the plain mean of the group means.",
        "why", HERE, f"{TOPIC}-b-cancels",
    ),
    Card(
        "What changes when the k groups hold different numbers of examples?",
        "The plain mean of the group means is then wrong: a small group's mean counts as much as "
        "a large one's. Weight each group's mean by its size, Σ b_i·g_i / Σ b_i, to get back the "
        "big-batch mean (mean=\"weighted\" in TrainConfig).",
        "edge case", HERE, f"{TOPIC}-unequal-groups",
    ),
    Card(
        "True or false: on a computer, the mean of the group means equals the big-batch mean to "
        "the last bit.",
        "Not always. The two are equal as real numbers, but floating-point addition is not "
        "associative: adding in another order can round differently. They agree to within rounding "
        "(a relative error near 1e-7 in float32), which is what dpviz checks, and on some steps to the "
        f"last bit too: {course.ref('all_reduce')}'s run has steps of both kinds.",
        "true/false", HERE, f"{TOPIC}-tf-last-bit",
    ),
    Card(
        "Why is this identity what makes data parallelism train like one large batch?",
        "If splitting the batch changed the gradient, a split run would take a different path from "
        "the single-device run. Since the mean of equal-size group means is the big-batch mean, "
        "splitting changes where the arithmetic happens, not its result.",
        "why", HERE, f"{TOPIC}-why-it-matters",
    ),
)
