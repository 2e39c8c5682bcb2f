"""Self-check cards for one group per device: what each device holds and computes before any sync."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number

CARDS = (
    Card(
        "In Step 4, what does each device hold, and what does it compute?",
        "A full copy of θ, the same on every device, and one group B_i of the big batch. From "
        "these it computes its own group gradient g_i. Nobody communicates yet.",
        "self-check", HERE, f"{TOPIC}-holds",
    ),
    Card(
        "The copies of the model are identical, so why do the devices' arrows point different ways?",
        "A gradient depends on the data as well as on θ, and each device sees other examples. The "
        "same θ with different data gives different arrows.",
        "why", HERE, f"{TOPIC}-different-arrows",
    ),
    Card(
        "Suppose every device skipped the sync and stepped along its own g_i. What happens over a "
        "few steps?",
        "The copies part after the first step, since each moves along a different arrow, and they "
        "need not meet again: the loss pulls them all towards the same fit, but each rank's own "
        "batches push it its own way at every step. How far apart they get depends on the loss and "
        "on those batches (the chapter prints the gap step by step); either way they are k different "
        "models, each trained on only its own share of the data. "
        "The sync of Step 5 is what prevents this.",
        "edge case", HERE, f"{TOPIC}-no-sync",
    ),
    Card(
        "True or false: in Step 4 the devices must take turns.",
        "False. The groups do not depend on one another (Step 3), so all k gradients are computed "
        "at the same time; that is where the compute share T_compute/k comes from.",
        "true/false", HERE, f"{TOPIC}-tf-turns",
    ),
)
